/* The pointwise conv kernel's loops over a task (pwconv.c), included once
 * per ISA. The includer defines PW_VL (floats per vector), PW_VMAX (the
 * most vectors a channel block has), PW_FN(name) (this ISA's copy of each
 * function), PW_TARGET (its target attribute, or nothing) and the tile,
 * PW_FN(pw_tile_k)(tg, x, y, res, R, V, FULL):
 *   y[c][r] = act(bias[c] + sum_k wp[k][c] * x[k][r] + res[c][r])
 * for the R <= 4 pixels r of x (rows tg->ldx apart), y and res (rows tg->P
 * apart), the V * PW_VL channels c of the block's panel tg->wp (tg->nch of
 * them real: only those stored); FULL: R = 4 and every channel real, a
 * constant. No include guard, on purpose. */

/* Channel block cb (nch real channels from c0, V vectors; its panel wp)
 * over pixels [p0, p1) of image n. x0 is input channel 0 at pixel p0 with
 * rows ldx apart (the image itself, or the task's scaled copy). */
PW_TARGET static inline __attribute__((always_inline)) void PW_FN(pw_block)(const pw_job *j, int64_t n, int64_t c0,
                                                                           int nch, const float *wp, const float *x0,
                                                                           int64_t ldx, int64_t p0, int64_t p1,
                                                                           const int V) {
    const int64_t P = j->P, M = j->M;
    float bt[PW_VMAX * PW_VL] = {0};
    if (j->b) memcpy(bt, j->b + c0, (size_t)nch * sizeof(float));
    const ert_act_params *a = j->act;
    const pw_targs tg = {
        .ldx = ldx, .K = j->K, .P = P, .wp = wp, .bias = bt, .nch = nch,
        .kind = a && ert_act_row_vectorised(a->kind) ? (int)a->kind : ERT_ACT_NONE,
        .al = a ? a->alpha : 0.0f, .be = a ? a->beta : 0.0f, .pf = j->pf && !j->isc && !j->gm,
    };
    float *y = j->y + (n * M + c0) * P;
    const float *res = j->res ? j->res + (n * M + c0) * P : NULL;
    int64_t p = p0;
#if defined(PW_KB)
    /* Deep K over several tiles: the panel, K x V vectors (240 KiB at K = 960), streamed from L2 once
     * per 4-pixel tile, held the FMAs to ~60% of the peak (the 7x7 maps' 1x1 convs, 49 pixels: 48
     * GMAC/s, AVX-512). In K blocks of PW_KB (a 32 KiB slice of the panel, kept in L1 over the
     * tiles) with each tile's accumulators kept between blocks in acc: the same FMAs in the same
     * order, so the same bits. */
    if (j->K > PW_KB && p1 - p0 > 4) {
        float acc[PW_CHUNK / 4 * 4 * PW_VMAX * PW_VL] __attribute__((aligned(64)));
        const int64_t K = j->K;
        for (int64_t k0 = 0; k0 < K; k0 += PW_KB) {
            pw_targs tk = tg;
            tk.K = K - k0 < PW_KB ? K - k0 : PW_KB;
            tk.wp = wp + k0 * V * PW_VL;
            const float *xk = x0 + k0 * ldx;
            float *at = acc;
            for (p = p0; p < p1; p += 4, at += 4 * PW_VMAX * PW_VL) {
                tk.acc_in = k0 ? at : NULL;
                tk.acc_out = k0 + tk.K < K ? at : NULL;
                const float *rp = res ? res + p : NULL;
                if (nch == V * PW_VL && p + 4 <= p1) PW_FN(pw_tile_k)(&tk, xk + (p - p0), y + p, rp, 4, V, true);
                else PW_FN(pw_tile_k)(&tk, xk + (p - p0), y + p, rp, p1 - p < 4 ? (int)(p1 - p) : 4, V, false);
            }
        }
        p = p1;
    }
#endif
    if (nch == V * PW_VL)
        for (; p + 4 <= p1; p += 4) PW_FN(pw_tile_k)(&tg, x0 + (p - p0), y + p, res ? res + p : NULL, 4, V, true);
    for (; p < p1; p += 4)
        PW_FN(pw_tile_k)(&tg, x0 + (p - p0), y + p, res ? res + p : NULL, p1 - p < 4 ? (int)(p1 - p) : 4, V, false);
    if (a && !ert_act_row_vectorised(a->kind))
        for (int c = 0; c < nch; c++) ert_cpu_act_inplace(y + c * P + p0, p1 - p0, a);
}

/* dst row k (w floats) = sc[k] * x row k (rows P apart): out of line, so
 * the copy loop keeps its bound in a register (inlined into the task loop
 * it reloaded it from the stack every 8 floats) */
PW_TARGET __attribute__((noinline)) static void PW_FN(pw_scale_rows)(const float *restrict x, int64_t P,
                                                                    const float *restrict sc, int64_t K, int64_t w,
                                                                    float *restrict dst) {
    for (int64_t k = 0; k < K; k++) {
        const float s_k = sc[k];
        const float *src = x + k * P;
        float *d = dst + k * w;
        for (int64_t q = 0; q < w; q++) d[q] = s_k * src[q];
    }
}

/* Tasks of j (claimed from its counter) on worker slot s. */
PW_TARGET static inline __attribute__((always_inline)) void PW_FN(pw_slot)(pw_job *j, int64_t s) {
    const int64_t K = j->K, P = j->P;
    float *panel = j->ws ? j->ws + s * j->slot_floats : NULL; /* wp NULL: K x cb */
    float *xs = panel && !j->wp ? panel + K * j->cb : panel;  /* isc or gm: K x chunk */
    for (int64_t t; (t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n_tasks;) {
        const int64_t cg = t % j->n_cg, pc = t / j->n_cg % j->n_pc, n = t / (j->n_cg * j->n_pc);
        const int64_t p0 = 4 * (pc * j->n_tiles / j->n_pc), e1 = 4 * ((pc + 1) * j->n_tiles / j->n_pc);
        const int64_t p1 = e1 < P ? e1 : P;
        const float *x0 = j->x + n * K * P + p0;
        int64_t ldx = P;
        if (j->xsh) { /* the shared im2col rows, built before the tasks */
            x0 = j->xsh + n * K * P + p0;
        } else if (j->gm) { /* im2col rows of pixels [p0, p1) into the slot */
            pw_im2col(j->gm, j->x + n * j->gm->C * j->gm->H * j->gm->W, j->isc ? j->isc + n * j->gm->C : NULL, p0,
                      p1, xs);
            x0 = xs;
            ldx = p1 - p0;
        } else if (j->isc) { /* a fused squeeze-excitation: input channel k times isc[n][k], into the slot's copy */
            PW_FN(pw_scale_rows)(x0, P, j->isc + n * K, K, p1 - p0, xs);
            x0 = xs;
            ldx = p1 - p0;
        }
        const int64_t cb0 = cg * j->n_cb / j->n_cg, cb1 = (cg + 1) * j->n_cb / j->n_cg;
        for (int64_t cb = cb0; cb < cb1; cb++) {
            const int64_t c0 = cb * j->cb;
            const int nch = (int)(j->M - c0 < j->cb ? j->M - c0 : j->cb);
            const int V = (nch + PW_VL - 1) / PW_VL;
            const float *wp = j->wp ? j->wp + c0 * K : panel;
            if (!j->wp) pw_pack_block(j->w, j->osc, K, c0, nch, (int64_t)V * PW_VL, panel);
            switch (V) {
#if PW_VMAX >= 4
            case 4: PW_FN(pw_block)(j, n, c0, nch, wp, x0, ldx, p0, p1, 4); break;
#endif
            case 3: PW_FN(pw_block)(j, n, c0, nch, wp, x0, ldx, p0, p1, 3); break;
            case 2: PW_FN(pw_block)(j, n, c0, nch, wp, x0, ldx, p0, p1, 2); break;
            default: PW_FN(pw_block)(j, n, c0, nch, wp, x0, ldx, p0, p1, 1); break;
            }
        }
    }
}
