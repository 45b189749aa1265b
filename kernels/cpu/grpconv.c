/* Grouped 2-D convs with narrow groups (RegNet, ResNeXt: 8 to 64 channels a
 * group) straight from conv.c's zero-padded phase planes, without the
 * SGEMM's packing: the fast twin of conv.c's padded-plane SGEMM (and of its
 * plain im2col one, the oracle the tests hold both against).
 *
 *   y_g (Mg, OH*OW) = act(bias_g + W_g (Mg, K) x B_g (K, OH*OW)),
 *   B_g row k (= input channel c, tap kh, kw) = the phase plane of that tap
 *   shifted by off[k]: column j = oh*Wq + ow of the plane grid, Wq - OW of
 *   each row's columns past the output (conv.c's padg geometry).
 *
 * conv.c's padded-plane SGEMM packed every B row into 32-column panels per
 * call (a copy of 9 floats per input float at 3x3), wrote its result into a
 * scratch C' of Wq-wide rows and copied that out dropping the extra
 * columns: on RegNetY-800MF's grouped 3x3 convs (16 channels a group) that
 * ran at ~32 GMAC/s on an AVX-512 VM against onnxruntime's ~50 (its NCHWc
 * kernels). Here the pixels are the vector dimension and the B rows are read
 * in place: a tile is one vector of plane columns (16 on AVX-512, 3 x 8 on
 * AVX2) times a block of output channels (16 on AVX-512, 4 on AVX2) whose
 * filter values are broadcast from the packed filter (K, ldw), ldw = Mg
 * rounded up to 16 (zeros past Mg: a last block's extra channels computed,
 * never stored). Per k step on AVX-512: one load of x, 16 FMAs with their
 * weight broadcast from memory; on AVX2 3 loads, 4 broadcasts, 12 FMAs.
 * The store drops the extra columns: the vector's valid lanes (j % Wq < OW)
 * are compacted (vcompressps / vpermps) and stored masked, in order, where
 * they are consecutive outputs. Bias in the accumulators' start, the
 * activation on the vector before the store (the kinds act_vec.h lacks by
 * act.c afterwards). A residual only on AVX-512 and without gaps (conv.c's
 * pointwise path); the grouped convs with one keep the SGEMM. x86-64 only (AVX2+FMA or AVX-512F, chosen at run time under
 * the kernel cap); elsewhere conv.c keeps the SGEMM. */
#include "act_vec.h"
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <string.h>

#define GC_MAGIC 0x67637631 /* "gcv1" */
#define GC_HDR 64
#define GC_LDW 16 /* the packed filter's row: Mg rounded up to this (the AVX-512 block) */

typedef struct gc_hdr {
    int64_t magic, G, Mg, K, ldw;
} gc_hdr;

static int64_t gc_ldw(int64_t Mg) { return (Mg + GC_LDW - 1) / GC_LDW * GC_LDW; }

size_t ert_cpu_gc_packed_bytes(int64_t G, int64_t Mg, int64_t K) {
    size_t f, bytes;
    if (ert_mul_ovf((size_t)G, (size_t)(gc_ldw(Mg) * K), &f) || ert_mul_ovf(f, sizeof(float), &bytes) ||
        bytes > SIZE_MAX - GC_HDR)
        return SIZE_MAX;
    return bytes + GC_HDR;
}

ert_status ert_cpu_gc_pack(const float *w, const float *scale, int64_t G, int64_t Mg, int64_t K, void *dst,
                           size_t bytes) {
    const size_t need = ert_cpu_gc_packed_bytes(G, Mg, K);
    if (!dst || need == SIZE_MAX || bytes < need) return ERT_E_INTERNAL;
    const int64_t ldw = gc_ldw(Mg);
    *(gc_hdr *)dst = (gc_hdr){GC_MAGIC, G, Mg, K, ldw};
    float *d = (float *)((char *)dst + GC_HDR);
    for (int64_t gi = 0; gi < G; gi++, d += K * ldw) /* group gi: (K, ldw), w_g transposed */
        for (int64_t k = 0; k < K; k++)
            for (int64_t m = 0; m < ldw; m++) {
                const int64_t row = gi * Mg + m;
                d[k * ldw + m] = m < Mg ? (scale ? scale[row] : 1.0f) * w[row * K + k] : 0.0f;
            }
    return ERT_OK;
}

const float *ert_cpu_gc_packed(const void *packed, size_t bytes, int64_t G, int64_t Mg, int64_t K, int64_t *ldw) {
    const gc_hdr *h = packed;
    if (!h || bytes < GC_HDR || h->magic != GC_MAGIC || h->G != G || h->Mg != Mg || h->K != K ||
        h->ldw != gc_ldw(Mg) || bytes < ert_cpu_gc_packed_bytes(G, Mg, K))
        return NULL;
    *ldw = h->ldw;
    return (const float *)((const char *)h + GC_HDR);
}

/* Where the vector of VL plane columns from jv (only those < j1) stores:
 * its valid lanes' bit mask, how many, the lanes in order (idx) and the
 * output index of the first. (oh, ow) of jv come in and step on by VL. */
static inline __attribute__((always_inline)) unsigned gc_plan(int64_t *oh, int64_t *ow, int64_t jv, int64_t j1,
                                                             int64_t Wq, int64_t OW, int VL, int *cnt, int64_t *dst,
                                                             int *idx) {
    unsigned mask = 0;
    int n = 0;
    int64_t h = *oh, w = *ow;
    *dst = h * OW + w;
    for (int l = 0; l < VL; l++) {
        if (jv + l < j1 && w < OW) {
            if (!n) *dst = h * OW + w;
            mask |= 1u << l;
            idx[n++] = l;
        }
        if (++w == Wq) w = 0, h++;
    }
    *oh = h;
    *ow = w;
    *cnt = n;
    return mask;
}

/* Lanes 0 .. n - 1 of 16 (none for n <= 0) */
static inline __attribute__((always_inline)) unsigned gc_mask16(int64_t n) {
    return n >= 16 ? 0xffffu : n > 0 ? (1u << n) - 1 : 0u;
}

/* The phase planes' rows (ert_cpu_gc_fill): on the 7x7 to 28x28 maps a
 * plane row is 7 to 28 floats, and a call (memcpy, or a row function) with
 * its set-up per plane row cost as much as the conv's FMAs there (RegNetY's
 * 14x14 -> 7x7 stride-2 conv: 126 us of filling against 165 of FMAs). One
 * loop over the input rows with the constants hoisted; stride 2 splits a
 * row's even and odd pixels by two permutes of the same two loads, each to
 * its column phase; the ends masked. GC_FILL_LOOP's argument is the body
 * for one input row xr, whose column phase 0 row is at d. */
#define GC_FILL_LOOP(...)                                                                                           \
    do {                                                                                                            \
        const int64_t pst_ = f->Hp * f->Wq, sh_ = f->sh, sw_ = f->sw;                                               \
        for (int64_t c = 0; c < f->Cg; c++)                                                                         \
            for (int64_t pa = 0; pa < sh_; pa++) {                                                                  \
                if (!(f->used_r >> pa & 1)) continue;                                                               \
                float *pc = f->P + (c * sh_ + pa) * sw_ * pst_;                                                     \
                for (int64_t r = f->r0; r < f->r0 + f->nr; r++) {                                                   \
                    const int64_t ih = r * sh_ + pa - f->ph;                                                        \
                    float *d = pc + (r - f->r0) * f->Wq;                                                            \
                    if (ih >= 0 && ih < f->H) {                                                                     \
                        const float *xr = f->x + (c * f->H + ih) * f->W;                                            \
                        __VA_ARGS__;                                                                                \
                    } else if (f->pad_rows)                                                                         \
                        for (int64_t pb = 0; pb < sw_; pb++) memset(d + pb * pst_, 0, (size_t)f->Wq * sizeof(float));\
                }                                                                                                   \
            }                                                                                                       \
    } while (0)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GC_ON 1

/* ------------------------------------------------------------ AVX-512: 16 columns x 16 channels */

#define GZ_ACC(i) __m512 c##i = _mm512_set1_ps(bt[i])
#define GZ_FMA(i) c##i = _mm512_fmadd_ps(_mm512_set1_ps(wk[i]), xv, c##i)
#define GZ_ST(i)                                                                                                    \
    if ((i) < nch) {                                                                                                \
        if (res) c##i = _mm512_add_ps(c##i, _mm512_maskz_loadu_ps(sm, res + (i) * ldy + dst));                     \
        __m512 v_ = ert_av_act_z(c##i, KIND, al, be);                                                               \
        if (perm) v_ = _mm512_maskz_compress_ps((__mmask16)mask, v_);                                               \
        _mm512_mask_storeu_ps(y + (i) * ldy + dst, sm, v_);                                                         \
    }

__attribute__((target("avx512f,avx2,fma"))) static inline __attribute__((always_inline)) void
gz_cols(const ert_gc_cols *g, int64_t j0, int64_t j1, const int KIND) {
    const int64_t K = g->K, ldw = g->ldw, ldy = g->ldy, Wq = g->Wq, OW = g->OW;
    const float al = g->act ? g->act->alpha : 0.0f, be = g->act ? g->act->beta : 0.0f;
    int64_t oh = j0 / Wq, ow = j0 % Wq;
    for (int64_t j = j0; j < j1; j += 16) {
        int cnt, idx[16];
        int64_t dst;
        const unsigned mask = gc_plan(&oh, &ow, j, j1, Wq, OW, 16, &cnt, &dst, idx);
        if (!cnt) continue;
        const bool perm = mask != (1u << cnt) - 1; /* a gap inside the vector: compact */
        const __mmask16 sm = (__mmask16)((1u << cnt) - 1), lm = (__mmask16)gc_mask16(j1 - j);
        const float *xj = g->P + j;
        for (int64_t m0 = 0; m0 < g->Mg; m0 += 16) {
            const int nch = g->Mg - m0 < 16 ? (int)(g->Mg - m0) : 16;
            float bt[16] = {0};
            if (g->bias) memcpy(bt, g->bias + m0, (size_t)nch * sizeof(float));
            GZ_ACC(0); GZ_ACC(1); GZ_ACC(2); GZ_ACC(3); GZ_ACC(4); GZ_ACC(5); GZ_ACC(6); GZ_ACC(7);
            GZ_ACC(8); GZ_ACC(9); GZ_ACC(10); GZ_ACC(11); GZ_ACC(12); GZ_ACC(13); GZ_ACC(14); GZ_ACC(15);
            const float *wk = g->wp + m0;
            if (lm == 0xffff)
                for (int64_t k = 0; k < K; k++, wk += ldw) {
                    const __m512 xv = _mm512_loadu_ps(xj + g->off[k]);
                    GZ_FMA(0); GZ_FMA(1); GZ_FMA(2); GZ_FMA(3); GZ_FMA(4); GZ_FMA(5); GZ_FMA(6); GZ_FMA(7);
                    GZ_FMA(8); GZ_FMA(9); GZ_FMA(10); GZ_FMA(11); GZ_FMA(12); GZ_FMA(13); GZ_FMA(14); GZ_FMA(15);
                }
            else /* the last vector: nothing read past j1 (x may end there); masked loads cost more on the others */
                for (int64_t k = 0; k < K; k++, wk += ldw) {
                    const __m512 xv = _mm512_maskz_loadu_ps(lm, xj + g->off[k]);
                    GZ_FMA(0); GZ_FMA(1); GZ_FMA(2); GZ_FMA(3); GZ_FMA(4); GZ_FMA(5); GZ_FMA(6); GZ_FMA(7);
                    GZ_FMA(8); GZ_FMA(9); GZ_FMA(10); GZ_FMA(11); GZ_FMA(12); GZ_FMA(13); GZ_FMA(14); GZ_FMA(15);
                }
            float *y = g->y + m0 * ldy;
            const float *res = g->res ? g->res + m0 * ldy : NULL;
            GZ_ST(0); GZ_ST(1); GZ_ST(2); GZ_ST(3); GZ_ST(4); GZ_ST(5); GZ_ST(6); GZ_ST(7);
            GZ_ST(8); GZ_ST(9); GZ_ST(10); GZ_ST(11); GZ_ST(12); GZ_ST(13); GZ_ST(14); GZ_ST(15);
        }
    }
}
#undef GZ_ACC
#undef GZ_FMA
#undef GZ_ST

/* ------------------------------------------------------------ AVX2: 24 columns x 4 channels */

#define GY_ACC(i) __m256 c##i##0 = _mm256_set1_ps(bt[i]), c##i##1 = c##i##0, c##i##2 = c##i##0
#define GY_FMA(i)                                                                                                   \
    do {                                                                                                            \
        const __m256 w_ = _mm256_broadcast_ss(wk + (i));                                                           \
        c##i##0 = _mm256_fmadd_ps(w_, x0, c##i##0);                                                                 \
        c##i##1 = _mm256_fmadd_ps(w_, x1, c##i##1);                                                                 \
        c##i##2 = _mm256_fmadd_ps(w_, x2, c##i##2);                                                                 \
    } while (0)

typedef struct gy_plan {
    int64_t dst;
    int cnt;
    bool perm;
    int idx[8], lm[8]; /* the lanes to compact, and the store mask (lanes < cnt) */
} gy_plan;

static inline __attribute__((always_inline)) void gy_plan_of(gy_plan *s, int64_t *oh, int64_t *ow, int64_t jv,
                                                            int64_t j1, int64_t Wq, int64_t OW) {
    int idx[16];
    const unsigned mask = gc_plan(oh, ow, jv, j1, Wq, OW, 8, &s->cnt, &s->dst, idx);
    s->perm = mask != (1u << s->cnt) - 1;
    for (int l = 0; l < 8; l++) {
        s->idx[l] = l < s->cnt ? idx[l] : 0;
        s->lm[l] = l < s->cnt ? -1 : 0;
    }
}

/* channel row y's piece of one vector: activation, compaction, store */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
gy_store(__m256 v, float *y, const gy_plan *s, const int KIND, float al, float be) {
    if (!s->cnt) return;
    if (KIND != ERT_ACT_NONE) {
        ert_av8 t = (ert_av8)v;
        ert_av_act(&t, KIND, al, be);
        v = (__m256)t;
    }
    if (s->perm) v = _mm256_permutevar8x32_ps(v, _mm256_loadu_si256((const __m256i *)s->idx));
    if (s->cnt == 8) _mm256_storeu_ps(y + s->dst, v);
    else _mm256_maskstore_ps(y + s->dst, _mm256_loadu_si256((const __m256i *)s->lm), v);
}

#define GY_ST(i)                                                                                                    \
    if (m0 + (i) < g->Mg) {                                                                                         \
        float *yr = g->y + (m0 + (i)) * ldy;                                                                        \
        gy_store(c##i##0, yr, &pl[0], KIND, al, be);                                                                \
        gy_store(c##i##1, yr, &pl[1], KIND, al, be);                                                                \
        gy_store(c##i##2, yr, &pl[2], KIND, al, be);                                                                \
    }

__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
gy_cols(const ert_gc_cols *g, int64_t j0, int64_t j1, const int KIND) {
    const int64_t K = g->K, ldw = g->ldw, ldy = g->ldy, Wq = g->Wq, OW = g->OW;
    const float al = g->act ? g->act->alpha : 0.0f, be = g->act ? g->act->beta : 0.0f;
    int64_t oh = j0 / Wq, ow = j0 % Wq;
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t j = j0; j < j1; j += 24) {
        gy_plan pl[3];
        for (int v = 0; v < 3; v++) gy_plan_of(&pl[v], &oh, &ow, j + 8 * v, j1, Wq, OW);
        const float *xj = g->P + j;
        for (int64_t m0 = 0; m0 < g->Mg; m0 += 4) {
            float bt[4] = {0};
            if (g->bias) memcpy(bt, g->bias + m0, (size_t)(g->Mg - m0 < 4 ? g->Mg - m0 : 4) * sizeof(float));
            GY_ACC(0); GY_ACC(1); GY_ACC(2); GY_ACC(3);
            const float *wk = g->wp + m0;
            if (j + 24 <= j1)
                for (int64_t k = 0; k < K; k++, wk += ldw) {
                    const float *xk = xj + g->off[k];
                    const __m256 x0 = _mm256_loadu_ps(xk), x1 = _mm256_loadu_ps(xk + 8), x2 = _mm256_loadu_ps(xk + 16);
                    GY_FMA(0); GY_FMA(1); GY_FMA(2); GY_FMA(3);
                }
            else { /* the last step: nothing read past j1 (x may end there) */
                const __m256i l0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(j1 - j)), lanes);
                const __m256i l1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(j1 - j - 8)), lanes);
                const __m256i l2 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(j1 - j - 16)), lanes);
                for (int64_t k = 0; k < K; k++, wk += ldw) {
                    const float *xk = xj + g->off[k];
                    const __m256 x0 = _mm256_maskload_ps(xk, l0), x1 = _mm256_maskload_ps(xk + 8, l1),
                                 x2 = _mm256_maskload_ps(xk + 16, l2);
                    GY_FMA(0); GY_FMA(1); GY_FMA(2); GY_FMA(3);
                }
            }
            GY_ST(0) GY_ST(1) GY_ST(2) GY_ST(3)
        }
    }
}
#undef GY_ACC
#undef GY_FMA
#undef GY_ST

/* pixel iw goes to column phase (iw + pw) % 2, column (iw + pw) / 2: the even pixels (ne of them, from
 * column se) to phase pw % 2, the odd ones (no, from so) to the other; counts cut at Wq */
#define GC_SPLIT2_GEOM                                                                                                  const int64_t se = f->pw / 2, so = (f->pw + 1) / 2;                                                                 const int64_t ne = (f->W + 1) / 2 < f->Wq - se ? (f->W + 1) / 2 : f->Wq - se;                                      const int64_t no = f->W / 2 < f->Wq - so ? f->W / 2 : f->Wq - so;                                                   const int64_t oe = f->pw % 2 * f->Hp * f->Wq + se, oo = (f->pw + 1) % 2 * f->Hp * f->Wq + so;                       const int64_t n1 = f->W < f->Wq - f->pw ? f->W : f->Wq - f->pw /* stride 1: pixels copied */

__attribute__((target("avx512f,avx2,fma"))) static void gz_fill(const ert_gc_fill *f) {
    GC_SPLIT2_GEOM;
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    /* the masks of the last (or only) vector are the same on every row: made once */
    const int64_t t1 = n1 > 0 ? (n1 - 1) / 16 * 16 : 0;        /* stride 1: the last vector's start */
    const __mmask16 m1 = (__mmask16)gc_mask16(n1 - t1);
    const int64_t nu = ne > no ? ne : no, u1 = nu > 0 ? (nu - 1) / 16 * 16 : 0; /* stride 2: the last one's */
    const __mmask16 ml = (__mmask16)gc_mask16(f->W - 2 * u1), mh = (__mmask16)gc_mask16(f->W - 2 * u1 - 16);
    const __mmask16 me = (__mmask16)gc_mask16(ne - u1), mo = (__mmask16)gc_mask16(no - u1);
    if (f->sw == 1) {
        GC_FILL_LOOP({
            float *dd = d + f->pw;
            for (int64_t t = 0; t < t1; t += 16) _mm512_storeu_ps(dd + t, _mm512_loadu_ps(xr + t));
            _mm512_mask_storeu_ps(dd + t1, m1, _mm512_maskz_loadu_ps(m1, xr + t1));
        });
    } else if (f->sw == 2) {
        /* vectors before the last: 32 pixels in, 16 to each phase (ne, no >= u + 16, so W >= 2u + 32) */
        GC_FILL_LOOP({
            for (int64_t u = 0; u < u1; u += 16) {
                const __m512 lo = _mm512_loadu_ps(xr + 2 * u), hi = _mm512_loadu_ps(xr + 2 * u + 16);
                _mm512_storeu_ps(d + oe + u, _mm512_permutex2var_ps(lo, ev, hi));
                _mm512_storeu_ps(d + oo + u, _mm512_permutex2var_ps(lo, od, hi));
            }
            const __m512 lo = _mm512_maskz_loadu_ps(ml, xr + 2 * u1), hi = _mm512_maskz_loadu_ps(mh, xr + 2 * u1 + 16);
            _mm512_mask_storeu_ps(d + oe + u1, me, _mm512_permutex2var_ps(lo, ev, hi));
            _mm512_mask_storeu_ps(d + oo + u1, mo, _mm512_permutex2var_ps(lo, od, hi));
        });
    }
}

__attribute__((target("avx2,fma"))) static void gy_fill(const ert_gc_fill *f) {
    GC_SPLIT2_GEOM;
    if (f->sw == 1) {
        GC_FILL_LOOP({
            int64_t t = 0;
            for (; t + 8 <= n1; t += 8) _mm256_storeu_ps(d + f->pw + t, _mm256_loadu_ps(xr + t));
            for (; t < n1; t++) d[f->pw + t] = xr[t];
        });
    } else if (f->sw == 2) {
        GC_FILL_LOOP({
            int64_t u = 0;
            for (; 2 * u + 16 <= f->W && u + 8 <= ne && u + 8 <= no; u += 8) {
                const __m256 lo = _mm256_loadu_ps(xr + 2 * u), hi = _mm256_loadu_ps(xr + 2 * u + 8);
                const __m256 e = _mm256_shuffle_ps(lo, hi, 0x88), o = _mm256_shuffle_ps(lo, hi, 0xDD);
                _mm256_storeu_ps(d + oe + u, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
                _mm256_storeu_ps(d + oo + u, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8)));
            }
            for (int64_t t = u; t < ne; t++) d[oe + t] = xr[2 * t];
            for (int64_t t = u; t < no; t++) d[oo + t] = xr[2 * t + 1];
        });
    }
}

/* One copy per (ISA, activation kind): the kind a constant, so the epilogue's switch folds. */
#define GC_KINDS(X)                                                                                                 \
    X(none, ERT_ACT_NONE) X(relu, ERT_ACT_RELU) X(clip, ERT_ACT_CLIP) X(silu, ERT_ACT_SILU)                        \
    X(sigmoid, ERT_ACT_SIGMOID) X(hswish, ERT_ACT_HARD_SWISH) X(gelu, ERT_ACT_GELU)
#define GC_COPY(name, KIND)                                                                                         \
    __attribute__((target("avx512f,avx2,fma"), noinline)) static void gz_##name(const ert_gc_cols *g, int64_t j0,  \
                                                                                 int64_t j1) {                      \
        gz_cols(g, j0, j1, KIND);                                                                                   \
    }                                                                                                               \
    __attribute__((target("avx2,fma"), noinline)) static void gy_##name(const ert_gc_cols *g, int64_t j0,          \
                                                                         int64_t j1) {                              \
        gy_cols(g, j0, j1, KIND);                                                                                   \
    }
GC_KINDS(GC_COPY)
#undef GC_COPY

typedef void (*gc_fn)(const ert_gc_cols *, int64_t, int64_t);

/* This ISA's copy for activation kind `kind` (kinds outside the list: none, the caller applies it after) */
static gc_fn gc_pick(bool z, int kind) {
#define GC_CASE(name, KIND)                                                                                         \
    if (kind == KIND) return z ? gz_##name : gy_##name;
    GC_KINDS(GC_CASE)
#undef GC_CASE
    return z ? gz_none : gy_none;
}
#else
#define GC_ON 0
#endif

int ert_cpu_gc_isa(const ert_kernel_choice *kc) {
#if GC_ON
    const ert_cpu_gemm_kernel k = ert_cpu_sgemm_kernel(kc);
    return k == ERT_CPU_GEMM_AVX512 ? 2 : k == ERT_CPU_GEMM_AVX2 ? 1 : 0;
#else
    (void)kc;
    return 0;
#endif
}

void ert_cpu_gc_fill(const ert_gc_fill *f, int isa) {
#if GC_ON
    if (isa == 2 && f->sw <= 2) {
        gz_fill(f);
        return;
    }
    if (isa == 1 && f->sw <= 2) {
        gy_fill(f);
        return;
    }
#else
    (void)isa;
#endif
    /* column phase pb: plane column qq holds pixel iw = qq * sw + pb - pw, [q0, q1) the ones in the row */
    const int64_t sw = f->sw, pw = f->pw;
    GC_FILL_LOOP(for (int64_t pb = 0; pb < sw; pb++) {
        const int64_t q0 = pw - pb > 0 ? (pw - pb + sw - 1) / sw : 0;
        const int64_t q1 = (f->W + pw - pb + sw - 1) / sw < f->Wq ? (f->W + pw - pb + sw - 1) / sw : f->Wq;
        float *dp = d + pb * f->Hp * f->Wq;
        for (int64_t qq = q0; qq < q1; qq++) dp[qq] = xr[qq * sw + pb - pw];
    });
}

void ert_cpu_gc_cols_run(const ert_gc_cols *g, int64_t j0, int64_t j1, int isa) {
#if GC_ON
    const int kind = g->act ? (int)g->act->kind : ERT_ACT_NONE;
    gc_fn f = gc_pick(isa == 2, kind);
    f(g, j0, j1);
    if (kind == ERT_ACT_NONE || (f != gz_none && f != gy_none)) return;
    /* an activation act_vec.h does not have: on the stored outputs, row by row */
    const int64_t p0 = j0 / g->Wq * g->OW + (j0 % g->Wq < g->OW ? j0 % g->Wq : g->OW);
    const int64_t p1 = (j1 - 1) / g->Wq * g->OW + ((j1 - 1) % g->Wq < g->OW ? (j1 - 1) % g->Wq + 1 : g->OW);
    for (int64_t m = 0; m < g->Mg && p1 > p0; m++) ert_cpu_act_inplace(g->y + m * g->ldy + p0, p1 - p0, g->act);
#else
    (void)g, (void)j0, (void)j1, (void)isa;
#endif
}
