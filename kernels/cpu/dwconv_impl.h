/* The direct depthwise kernel's body (dwconv.c), included once per vector
 * width. The includer defines VL (floats per vector), DW_V (a GNU vector of
 * VL floats), DW_SHUFFLE_EVEN(lo, hi) (the even lanes of two DW_V) and
 * DW_FN(name) (the name of this width's copy of each function). No include
 * guard, on purpose. */

/* LD loads VL outputs' worth of one tap: x[ow*s + 0 .. ] for s = 1, the even
 * lanes of 2*VL consecutive floats for s = 2 (the caller keeps p + 2*VL - 1
 * inside the row). */
#define DW_LOAD(dst, p, s)                                                                                          \
    do {                                                                                                            \
        if ((s) == 1) {                                                                                             \
            memcpy(&(dst), (p), sizeof(DW_V));                                                                     \
        } else {                                                                                                    \
            DW_V lo_, hi_;                                                                                         \
            memcpy(&lo_, (p), sizeof(DW_V));                                                                       \
            memcpy(&hi_, (p) + VL, sizeof(DW_V));                                                                  \
            (dst) = DW_SHUFFLE_EVEN(lo_, hi_);                                                      \
        }                                                                                                           \
    } while (0)

/* VL outputs from column ow: acc = bv + sum over taps of w * x, stored to
 * dst (written through a pointer: a 32-byte vector returned by value changes
 * ABI between the baseline and AVX2 copies). rows[kh] (NULL: padding row)
 * are indexed from the window's first column, base = ow*s - pw. */
static inline __attribute__((always_inline)) void DW_FN(dw_block)(const float *const *rows, const float *wk, int64_t KH,
                                                          int64_t KW, int64_t base, int64_t d, float bv,
                                                          const int64_t s, float *dst, const bool full) {
    DW_V acc = bv - (DW_V){0}; /* broadcast */
    for (int64_t kh = 0; kh < KH; kh++) {
        const float *xr = rows[kh];
        if (!full && !xr) continue; /* full: the caller knows no row is padding */
        const float *wr = wk + kh * KW;
        for (int64_t kw = 0; kw < KW; kw++) {
            DW_V xv;
            DW_LOAD(xv, xr + base + kw * d, s);
            acc += wr[kw] * xv;
        }
    }
    memcpy(dst, &acc, sizeof acc);
}

/* NB (1..4, a constant) blocks of VL outputs side by side, at base, base +
 * VL*s, ...: the same sums as NB dw_block calls, tap for tap in the same
 * order, but NB independent FMA chains. One block was one chain of KH*KW
 * dependent FMAs (49 for ConvNeXt's 7x7: the FMA latency, not the units,
 * set the time; its 56x56 stage ran at 20 GMAC/s).
 * PH (a constant): stride 2 from phase-split rows (dw_plane_padded), a
 * padded row's even columns and then, Lh floats on, its odd ones; base is
 * then the output column. Tap kw of output ow reads padded column 2 ow +
 * kw d, column ow + (kw d >> 1) of the (kw d & 1) half: VL outputs are one
 * plain load, where the stride-2 load is two and an even-lane shuffle
 * (EfficientNet-B0's 144x56x56 5x5 stride-2 layer: 0.317 -> 0.21 ms, 1
 * thread, AVX-512). The same products in the same order, so the same sums.
 * The 112x112 stride-2 planes (58 KiB padded) stay on dw_row: through a
 * 64 KiB buffer MobileNetV2's ReLU6 one gained 10% but EfficientNet-B0's
 * SiLU one lost 10-20% (the buffer passes L1). */
static inline __attribute__((always_inline)) void DW_FN(dw_blockn)(const float *const *rows, const float *wk,
                                                           int64_t KH, int64_t KW, int64_t base, int64_t d, float bv,
                                                           const int64_t s, float *dst, const bool full,
                                                           const int NB, const bool PH, int64_t Lh) {
    /* four named accumulators, not an array (gcc 12 then warned of the unused ones at -O3) */
    const DW_V b0 = bv - (DW_V){0}; /* broadcast */
    DW_V a0 = b0, a1 = b0, a2 = b0, a3 = b0;
    const int64_t ls = PH ? 1 : s, st = VL * ls; /* the loads' stride, the blocks' distance */
    for (int64_t kh = 0; kh < KH; kh++) {
        const float *xr = rows[kh];
        if (!full && !xr) continue;
        const float *wr = wk + kh * KW;
        for (int64_t kw = 0; kw < KW; kw++) {
            const float *xp = PH ? xr + (kw * d & 1) * Lh + (kw * d >> 1) + base : xr + base + kw * d;
            DW_V xv;
            DW_LOAD(xv, xp, ls);
            a0 += wr[kw] * xv;
            if (NB > 1) {
                DW_LOAD(xv, xp + st, ls);
                a1 += wr[kw] * xv;
            }
            if (NB > 2) {
                DW_LOAD(xv, xp + 2 * st, ls);
                a2 += wr[kw] * xv;
            }
            if (NB > 3) {
                DW_LOAD(xv, xp + 3 * st, ls);
                a3 += wr[kw] * xv;
            }
        }
    }
    memcpy(dst, &a0, sizeof a0);
    if (NB > 1) memcpy(dst + VL, &a1, sizeof a1);
    if (NB > 2) memcpy(dst + 2 * VL, &a2, sizeof a2);
    if (NB > 3) memcpy(dst + 3 * VL, &a3, sizeof a3);
}

/* The blocks of a padded row, [0, OWp) in steps of VL, four at a time
 * (PH, Lh: phase-split rows, dw_blockn). */
static inline __attribute__((always_inline)) void DW_FN(dw_blocks)(const float *const *rows, const float *wk,
                                                           int64_t KH, int64_t KW, int64_t d, float bv,
                                                           const int64_t s, float *dst, int64_t OWp,
                                                           const bool full, const bool PH, int64_t Lh) {
    const int64_t bs = PH ? 1 : s; /* base per output column */
    int64_t ow = 0;
    for (; ow + 4 * VL <= OWp; ow += 4 * VL)
        DW_FN(dw_blockn)(rows, wk, KH, KW, ow * bs, d, bv, s, dst + ow, full, 4, PH, Lh);
    switch ((OWp - ow) / VL) {
    case 3: DW_FN(dw_blockn)(rows, wk, KH, KW, ow * bs, d, bv, s, dst + ow, full, 3, PH, Lh); break;
    case 2: DW_FN(dw_blockn)(rows, wk, KH, KW, ow * bs, d, bv, s, dst + ow, full, 2, PH, Lh); break;
    case 1: DW_FN(dw_blockn)(rows, wk, KH, KW, ow * bs, d, bv, s, dst + ow, full, 1, PH, Lh); break;
    default: break;
    }
}

/* src[0 .. n): the even-indexed floats to de[0 ..], the odd-indexed to
 * dp[0 ..], 2 VL at a time (two shuffles), a last pair of vectors
 * overlapping the one before at an even start, the rest (n < 2 VL) scalar.
 * Writes exactly (n + 1) / 2 and n / 2 floats. */
static inline __attribute__((always_inline)) void DW_FN(dw_deinterleave)(float *restrict de, float *restrict dp,
                                                                 const float *restrict src, int64_t n) {
    if (n < 2 * VL) {
        for (int64_t i = 0; i < n; i++) (i & 1 ? dp : de)[i >> 1] = src[i];
        return;
    }
    for (int64_t i = 0;; i += 2 * VL) {
        const bool last = i + 2 * VL >= n - 1; /* the pair ending at n or, from an even start, at n - 1 */
        if (i + 2 * VL > n) i = (n - 2 * VL) & ~(int64_t)1;
        DW_V lo, hi;
        memcpy(&lo, src + i, sizeof lo);
        memcpy(&hi, src + i + VL, sizeof hi);
        const DW_V e = DW_SHUFFLE_EVEN(lo, hi), o = DW_SHUFFLE_ODD(lo, hi);
        memcpy(de + i / 2, &e, sizeof e);
        memcpy(dp + i / 2, &o, sizeof o);
        if (last) break;
    }
    if (n & 1) de[n / 2] = src[n - 1]; /* an odd n's last float: past the even start's last pair */
}

/* Narrow rows (the 14x14 and 7x7 maps of a classifier's last stages, where
 * the border is most of the row): the KH input rows are copied into
 * zero-padded buffers so every column takes the vector body. Returns false
 * when the padded row would not fit (the caller then uses dw_row). */
static inline __attribute__((always_inline)) bool DW_FN(dw_row_padded)(const ert_dw2d *p, float *restrict yr,
                                                               const float *const *rows, const float *wk, float bv,
                                                               const float *rr, const int64_t s, const int64_t KH,
                                                               const int64_t KW, const int64_t D) {
    const int64_t W = p->W, OW = p->OW, d = D ? D : p->dw, pw = p->pw;
    const int64_t OWp = (OW + VL - 1) / VL * VL;
    const int64_t Lp = OWp * s + (KW - 1) * d; /* one past the last float a block reads */
    if (Lp > DW_PADW) return false;
    float buf[DW_KMAX][DW_PADW], orow[DW_PADW];
    const float *prow[DW_KMAX];
    for (int64_t kh = 0; kh < KH; kh++) {
        prow[kh] = NULL;
        if (!rows[kh]) continue;
        float *b = buf[kh];
        /* b[j] = x[j - pw], zero outside the row */
        int64_t j0 = pw < Lp ? pw : Lp, j1 = pw + W < Lp ? pw + W : Lp;
        memset(b, 0, (size_t)j0 * sizeof(float));
        if (j1 > j0) memcpy(b + j0, rows[kh], (size_t)(j1 - j0) * sizeof(float));
        if (Lp > j1) memset(b + (j1 > j0 ? j1 : j0), 0, (size_t)(Lp - (j1 > j0 ? j1 : j0)) * sizeof(float));
        prow[kh] = b;
    }
    DW_FN(dw_blocks)(prow, wk, KH, KW, d, bv, s, orow, OWp, false, false, 0);
    if (rr)
        for (int64_t ow = 0; ow < OW; ow++) yr[ow] = orow[ow] + rr[ow];
    else
        memcpy(yr, orow, (size_t)OW * sizeof(float));
    if (p->act) DW_ACT_ROW(yr, OW, p->act);
    return true;
}

/* One output row (the caller tried dw_row_padded first). rows[kh] is input
 * row oh*sh - ph + kh*dh, or NULL when it
 * lies in the padding; wk is (KH, KW), already scaled. Interior columns
 * (whole window inside the row) in vector blocks, the last block overlapping
 * the one before rather than falling back to scalar; border columns scalar. */
static inline __attribute__((always_inline)) void DW_FN(dw_row)(const ert_dw2d *p, float *restrict yr,
                                                        const float *const *rows, const float *wk, float bv,
                                                        const float *rr, const int64_t s, const int64_t KH,
                                                        const int64_t KW, const int64_t D, const bool full) {
    const int64_t W = p->W, OW = p->OW, d = D ? D : p->dw, pw = p->pw;
    /* window of column ow spans iw = ow*s - pw + [0, (KW-1)*d]; vector blocks
     * also read (s-1) past it */
    const int64_t span = (KW - 1) * d + (s - 1);
    int64_t lo = (pw + s - 1) / s;
    int64_t hi = W - 1 - span + pw < 0 ? 0 : (W - 1 - span + pw) / s + 1;
    if (lo > OW) lo = OW;
    if (hi > OW) hi = OW;
    if (hi < lo) hi = lo;
    const int64_t n_vec = hi - lo >= VL ? hi - lo : 0; /* columns the vector body covers */
    for (int64_t ow = 0; ow < OW; ow++) {
        if (ow == lo && n_vec) {
            /* blocks at lo, lo+VL, ..., and one ending exactly at hi: it may
             * recompute a few columns, which gives the same values */
            for (int64_t o = lo;; o += VL) {
                if (o + VL > hi) o = hi - VL;
                DW_FN(dw_block)(rows, wk, KH, KW, o * s - pw, d, bv, s, yr + o, full);
                if (rr) {
                    DW_V v, rv;
                    memcpy(&v, yr + o, sizeof v);
                    memcpy(&rv, rr + o, sizeof rv);
                    v += rv;
                    memcpy(yr + o, &v, sizeof v);
                }
                if (o + VL >= hi) break;
            }
            ow = hi;
            if (ow >= OW) break;
        }
        /* scalar, bounds-checked: the border columns */
        float v = bv;
        const int64_t base = ow * s - pw;
        for (int64_t kh = 0; kh < KH; kh++) {
            const float *xr = rows[kh];
            if (!full && !xr) continue;
            for (int64_t kw = 0; kw < KW; kw++) {
                int64_t iw = base + kw * d;
                if (iw >= 0 && iw < W) v += wk[kh * KW + kw] * xr[iw];
            }
        }
        yr[ow] = rr ? v + rr[ow] : v;
    }
    if (p->act) DW_ACT_ROW(yr, OW, p->act); /* the row is still in L1 */
}

/* n floats s -> d (no overlap) in vectors, the last one overlapping the one
 * before when n is not a multiple of VL: no libc call for the short rows
 * here (a memcpy or memset call per 7..56 floats was a fifth of MobileNetV2's
 * depthwise instructions, callgrind) */
static inline __attribute__((always_inline)) void DW_FN(dw_copy)(float *restrict d, const float *restrict s,
                                                               int64_t n) {
    if (n < VL) {
        for (int64_t i = 0; i < n; i++) d[i] = s[i];
        return;
    }
    for (int64_t i = 0;; i += VL) {
        if (i + VL > n) i = n - VL;
        DW_V v;
        memcpy(&v, s + i, sizeof v);
        memcpy(d + i, &v, sizeof v);
        if (i + VL >= n) break;
    }
}

/* Output row oh of a plane from padded rows (dw_plane_padded,
 * dw_plane_rows_s2): without a residual the blocks store straight into y,
 * the row's last block spilling into the rows after it, which overwrite it
 * later (a row whose blocks would pass the plane's end goes through orow). */
static inline __attribute__((always_inline)) void DW_FN(dw_out_row)(const float *const *rows, const float *wk,
                                                            const int64_t KH, const int64_t KW, int64_t d, float bv,
                                                            const int64_t s, const bool PH, int64_t Lh, float *ym,
                                                            const float *rm, float *orow, int64_t OW, int64_t OH,
                                                            int64_t OWp, int64_t oh) {
    float *yr = ym + oh * OW;
    const bool spill = !rm && oh * OW + OWp <= OH * OW; /* the blocks' spill stays inside the plane */
    float *dst = spill ? yr : orow;
    DW_FN(dw_blocks)(rows, wk, KH, KW, d, bv, s, dst, OWp, true, PH, Lh);
    if (spill) return;
    if (rm)
        for (int64_t ow = 0; ow < OW; ow++) yr[ow] = orow[ow] + rm[oh * OW + ow];
    else
        DW_FN(dw_copy)(yr, orow, OW);
}

/* Small planes (the 28x28 to 7x7 maps of a classifier's later stages, where
 * a row is a few vectors and the per-row set-up was most of the time:
 * EfficientNet-B0's 7x7x1152 5x5 layers): the input plane is copied into a
 * zero-padded buffer, then every output row reads it without bounds checks.
 * buf (DW_PLANE_MAX floats) is the caller's, kept over its planes: the
 * padding is zeroed once (*zeroed), each plane then only copies its rows in
 * (dw_out_row stores). Returns false when the buffer would not hold it. */
static inline __attribute__((always_inline)) bool DW_FN(dw_plane_padded)(const ert_dw2d *p, const float *xc, float *ym,
                                                                     const float *rm, const float *wk, float bv,
                                                                     const int64_t s, const int64_t KH,
                                                                     const int64_t KW, const int64_t D, float *buf,
                                                                     bool *zeroed) {
    const int64_t W = p->W, H = p->H, OW = p->OW, OH = p->OH, d = D ? D : p->dw, dh = D ? D : p->dh, pw = p->pw;
    const int64_t OWp = (OW + VL - 1) / VL * VL;
    const int64_t Lp = OWp * s + (KW - 1) * d;                  /* floats a row's blocks read */
    const int64_t Hp = (OH - 1) * p->sh + (KH - 1) * dh + 1; /* padded rows the plane reads */
    /* stride 2: each buffer row phase-split (dw_blockn, PH), its even columns then, Lh on, its odd ones */
    const int64_t Lh = (Lp + 1) / 2, Lr = s == 2 ? 2 * Lh : Lp; /* floats per buffer row */
    if (OWp > DW_PADW || Lr * Hp > DW_PLANE_MAX) return false;
    float orow[DW_PADW];
    /* buf row r, column j = x[r - ph][j - pw], zero outside the image (at stride 2 column j is at
     * (j & 1) Lh + j / 2) */
    const int64_t j0 = pw < Lp ? pw : Lp, j1 = pw + W < Lp ? pw + W : Lp;
    if (!*zeroed) {
        memset(buf, 0, (size_t)(Lr * Hp) * sizeof(float));
        *zeroed = true;
    }
    if (j1 > j0)
        for (int64_t r = p->ph > 0 ? p->ph : 0; r < Hp && r - p->ph < H; r++) {
            float *br = buf + r * Lr;
            if (s == 1) DW_FN(dw_copy)(br + j0, xc + (r - p->ph) * W, j1 - j0);
            else if (j0 % 2 == 0) DW_FN(dw_deinterleave)(br + j0 / 2, br + Lh + j0 / 2, xc + (r - p->ph) * W, j1 - j0);
            else DW_FN(dw_deinterleave)(br + Lh + j0 / 2, br + j0 / 2 + 1, xc + (r - p->ph) * W, j1 - j0);
        }
    const float *rows[DW_KMAX];
    for (int64_t oh = 0; oh < OH; oh++) {
        for (int64_t kh = 0; kh < KH; kh++) rows[kh] = buf + (oh * p->sh + kh * dh) * Lr;
        if (s == 2) DW_FN(dw_out_row)(rows, wk, KH, KW, d, bv, s, true, Lh, ym, rm, orow, OW, OH, OWp, oh);
        else DW_FN(dw_out_row)(rows, wk, KH, KW, d, bv, s, false, 0, ym, rm, orow, OW, OH, OWp, oh);
    }
    if (p->act) DW_ACT_ROW(ym, OH * OW, p->act);
    return true;
}

/* Stride-2 planes too large for dw_plane_padded (MobileNetV2's and
 * EfficientNet-B0's 96x112x112, MobileNetV3-L's 64x112x112): each input row
 * is copied once, zero-padded and phase-split (even columns, then Lh floats
 * on the odd ones, as dw_plane_padded's rows), into a ring of KH row buffers
 * that the output rows needing it share; every output row is then whole
 * vector blocks of plain loads (dw_blockn, PH). dw_row took two loads and an
 * even-lane shuffle per tap and vector, one FMA chain per block, and its
 * border columns scalar. The same products in the same order, so the same
 * sums. Returns false when a ring row would not fit. */
static inline __attribute__((always_inline)) bool DW_FN(dw_plane_rows_s2)(const ert_dw2d *p, const float *xc, float *ym,
                                                                      const float *rm, const float *wk, float bv,
                                                                      const int64_t KH, const int64_t KW) {
    const int64_t W = p->W, H = p->H, OW = p->OW, OH = p->OH, pw = p->pw;
    const int64_t OWp = (OW + VL - 1) / VL * VL;
    const int64_t Lp = OWp * 2 + (KW - 1); /* floats a row's blocks read (dilation 1) */
    const int64_t Lh = (Lp + 1) / 2, Lr = 2 * Lh;
    if (OWp > DW_PADW || Lr > DW_RING_W) return false;
    float ring[DW_KMAX][DW_RING_W], zero[DW_RING_W], orow[DW_PADW];
    int64_t tag[DW_KMAX];
    const int64_t j0 = pw < Lp ? pw : Lp, j1 = pw + W < Lp ? pw + W : Lp;
    memset(zero, 0, (size_t)Lr * sizeof(float));
    for (int64_t k = 0; k < KH; k++) {
        memset(ring[k], 0, (size_t)Lr * sizeof(float)); /* the padding columns stay zero */
        tag[k] = -1;
    }
    const float *rows[DW_KMAX];
    for (int64_t oh = 0; oh < OH; oh++) {
        for (int64_t kh = 0; kh < KH; kh++) {
            const int64_t ih = oh * p->sh - p->ph + kh * p->dh;
            if (ih < 0 || ih >= H || j1 <= j0) {
                rows[kh] = zero;
                continue;
            }
            float *br = ring[ih % KH];
            if (tag[ih % KH] != ih) {
                if (j0 % 2 == 0) DW_FN(dw_deinterleave)(br + j0 / 2, br + Lh + j0 / 2, xc + ih * W, j1 - j0);
                else DW_FN(dw_deinterleave)(br + Lh + j0 / 2, br + j0 / 2 + 1, xc + ih * W, j1 - j0);
                tag[ih % KH] = ih;
            }
            rows[kh] = br;
        }
        DW_FN(dw_out_row)(rows, wk, KH, KW, 1, bv, 2, true, Lh, ym, rm, orow, OW, OH, OWp, oh);
    }
    /* one activation pass over the plane (56x56 floats: still in L1): a call per 56-float row was a
     * sixth of the layer's time (MobileNetV2's ReLU6, perf) */
    if (p->act) DW_ACT_ROW(ym, OH * OW, p->act);
    return true;
}

/* The planes [t0, t1); KH and KW are constants where the caller specialises
 * (3x3, 5x5, 7x7), so the tap loops unroll and the weights stay in registers;
 * D is the dilation as a constant (1) or 0 (p's). With D = 1 the taps are
 * fixed offsets and, for rows with no padding row in their window, the
 * per-tap-row NULL tests go (a 3x3 block was ~30 instructions for 9 FMAs,
 * ~half of them addressing and tests: MobileNetV2, callgrind). */
static inline __attribute__((always_inline)) void DW_FN(dw_planes)(const ert_dw2d *p, int64_t t0, int64_t t1,
                                                           const int64_t KH, const int64_t KW, const int64_t D) {
    const int64_t plane_in = p->H * p->W, plane_out = p->OH * p->OW;
    float wk[DW_KMAX * DW_KMAX], pbuf[DW_PLANE_MAX];
    bool pbuf_zeroed = false; /* dw_plane_padded's padding, zeroed once for all these planes */
    const float *rows[DW_KMAX];
    for (int64_t t = t0; t < t1; t++) {
        const int64_t n = t / p->M, m = t % p->M, c = m / p->mult;
        const float *xc = p->x + (n * p->C + c) * plane_in;
        const float sc = p->scale ? p->scale[m] : 1.0f, bv = p->b ? p->b[m] : 0.0f;
        for (int64_t i = 0; i < KH * KW; i++) wk[i] = p->w[m * KH * KW + i] * sc;
        float *ym = p->y + t * plane_out;
        const float *rm = p->res ? p->res + t * plane_out : NULL;
        /* every plane whose padded copy fits (up to ~64x64 at stride 1), not only the narrow rows: at
         * 56x56 3x3 (MobileNetV2, EfficientNet-B0) the rows' scalar border columns and one FMA chain
         * per block took 0.29 and 0.45 ms where this takes 0.25 and 0.37 (AVX-512, 1 thread) */
        if (p->sw == 1 ? DW_FN(dw_plane_padded)(p, xc, ym, rm, wk, bv, 1, KH, KW, D, pbuf, &pbuf_zeroed)
                       : DW_FN(dw_plane_padded)(p, xc, ym, rm, wk, bv, 2, KH, KW, D, pbuf, &pbuf_zeroed))
            continue;
        if (p->sw == 2 && D && DW_FN(dw_plane_rows_s2)(p, xc, ym, rm, wk, bv, KH, KW)) continue;
        const int64_t dh = D ? D : p->dh;
        for (int64_t oh = 0; oh < p->OH; oh++) {
            bool full = true;
            for (int64_t kh = 0; kh < KH; kh++) {
                int64_t ih = oh * p->sh - p->ph + kh * dh;
                rows[kh] = ih >= 0 && ih < p->H ? xc + ih * p->W : NULL;
                full = full && rows[kh];
            }
            float *yr = ym + oh * p->OW;
            const float *rr = rm ? rm + oh * p->OW : NULL;
            /* stride and (dilation 1 only: the copies this file compiles are many) the
             * padding-row case as constants in each branch so the loads specialise */
            const bool padded = p->OW < DW_PAD_BELOW || KW >= DW_PAD_KW;
            if (p->sw == 1) {
                if (padded && DW_FN(dw_row_padded)(p, yr, rows, wk, bv, rr, 1, KH, KW, D)) continue;
                if (D && full) DW_FN(dw_row)(p, yr, rows, wk, bv, rr, 1, KH, KW, D, true);
                else DW_FN(dw_row)(p, yr, rows, wk, bv, rr, 1, KH, KW, D, false);
            } else {
                if (padded && DW_FN(dw_row_padded)(p, yr, rows, wk, bv, rr, 2, KH, KW, D)) continue;
                if (D && full) DW_FN(dw_row)(p, yr, rows, wk, bv, rr, 2, KH, KW, D, true);
                else DW_FN(dw_row)(p, yr, rows, wk, bv, rr, 2, KH, KW, D, false);
            }
        }
    }
}

static inline __attribute__((always_inline)) void DW_FN(dw_body)(const ert_dw2d *p, int64_t t0, int64_t t1) {
    /* dilated kernels take the generic copy: this file's copies are many
     * (each ISA, stride and padding case), and an ASan build of it took minutes */
    const bool d1 = p->dh == 1 && p->dw == 1;
    if (p->KH == 3 && p->KW == 3 && d1) DW_FN(dw_planes)(p, t0, t1, 3, 3, 1);
    else if (p->KH == 5 && p->KW == 5 && d1) DW_FN(dw_planes)(p, t0, t1, 5, 5, 1);
    else if (p->KH == 7 && p->KW == 7 && d1) DW_FN(dw_planes)(p, t0, t1, 7, 7, 1);
    else DW_FN(dw_planes)(p, t0, t1, p->KH, p->KW, 0);
}

#undef DW_LOAD
