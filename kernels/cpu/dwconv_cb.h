/* The channel-blocked depthwise path of dwconv.c, for small planes (the
 * 28x28 to 7x7 maps of a classifier's later stages). Included once by
 * dwconv.c; the always_inline bodies take the target of the driver copy
 * that calls them (baseline, AVX2+FMA, AVX-512F), like act_vec.h's.
 *
 * Along a row of such a plane the row-vectorised kernel (dwconv_impl.h)
 * wastes lanes (a 7-wide row in an 8-lane block, 14 in 16) and pays a
 * row's set-up, a padded copy and an activation pass for a few vectors.
 * Here CB = ERT_AV_N channels (8 on x86, 4 on NEON) go together instead:
 * their input planes are transposed into one zero-padded buffer with the
 * CB channels of a pixel side by side (NCHWc, the layout onnxruntime's
 * NCHWc transformer gives these layers), every output pixel is then
 * KH*KW FMAs of whole vectors with no lane wasted and no bounds test
 * (stride only moves the window), and CB consecutive output pixels are
 * transposed back into the CB output planes with bias, residual and the
 * activation applied in registers before the one store.
 *
 * The AVX-512 copy takes 2 CB = 16 channels a block, the taps on 16-lane
 * vectors (an 8-lane block there ran at ~9 GMAC/s on EfficientNet-B0's
 * 7x7x1152 5x5 layers, a fifth of the FMA peak: the per-block transposes,
 * weight set-up and stores around 8-lane FMAs), still transposed 8 x 8.
 *
 * Claims: multiplier 1, dilation 1, kernel up to 7x7, any stride and
 * padding, planes whose padded copy fits DWCB_MAX floats (at CB floats a
 * pixel; the AVX-512 copy's buffer is twice that); the channels
 * left over (M % CB) take the plane-at-a-time kernel. */
#ifndef ERT_CPU_DWCONV_CB_H
#define ERT_CPU_DWCONV_CB_H
#include "act_vec.h"

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
/* an activation pass over a row (ert_cpu_act_row's signature) */
typedef void (*ert_act_row_fn)(float *x, int64_t n, const ert_act_params *a);
#define DWCB ERT_AV_N
#define DWCB_MAX 8192    /* floats of the padded NCHWc buffer (32 KiB of stack) */
#define DWCB_PIX_MAX 1024 /* input pixels of a plane (the offset table) */
#define DWCB_OW_BELOW 32 /* output rows narrower than this: the 28-, 14- and 7-wide maps */

#if defined(__clang__)
#define DWCB_SHUF(a, b, ...) __builtin_shufflevector((a), (b), __VA_ARGS__)
#else
#define DWCB_SHUF(a, b, ...) __builtin_shuffle((a), (b), (ert_av8i){__VA_ARGS__})
#endif

/* r[i][j] -> r[j][i], CB x CB */
static inline __attribute__((always_inline)) void dwcb_transpose(ert_av8 *r) {
#if DWCB == 8
    ert_av8 t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = DWCB_SHUF(r[2 * i], r[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[2 * i + 1] = DWCB_SHUF(r[2 * i], r[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 2; i++) {
        s[4 * i + 0] = DWCB_SHUF(t[4 * i], t[4 * i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        s[4 * i + 1] = DWCB_SHUF(t[4 * i], t[4 * i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        s[4 * i + 2] = DWCB_SHUF(t[4 * i + 1], t[4 * i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        s[4 * i + 3] = DWCB_SHUF(t[4 * i + 1], t[4 * i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = DWCB_SHUF(s[i], s[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[i + 4] = DWCB_SHUF(s[i], s[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
#elif DWCB == 4
    ert_av8 t0 = DWCB_SHUF(r[0], r[1], 0, 4, 1, 5), t1 = DWCB_SHUF(r[0], r[1], 2, 6, 3, 7);
    ert_av8 t2 = DWCB_SHUF(r[2], r[3], 0, 4, 1, 5), t3 = DWCB_SHUF(r[2], r[3], 2, 6, 3, 7);
    r[0] = DWCB_SHUF(t0, t2, 0, 1, 4, 5);
    r[1] = DWCB_SHUF(t0, t2, 2, 3, 6, 7);
    r[2] = DWCB_SHUF(t1, t3, 0, 1, 4, 5);
    r[3] = DWCB_SHUF(t1, t3, 2, 3, 6, 7);
#else
#error "dwconv_cb.h: ERT_AV_N must be 4 or 8"
#endif
}

/* Whether p takes this path (the caller has checked ert_cpu_dw2d_fits). */
static inline bool dwcb_fits(const ert_dw2d *p) {
    const int64_t Hp = (p->OH - 1) * p->sh + p->KH, Wp = (p->OW - 1) * p->sw + p->KW;
    return p->mult == 1 && p->M >= DWCB && p->dh == 1 && p->dw == 1 && p->OW < DWCB_OW_BELOW &&
           p->H * p->W <= DWCB_PIX_MAX && p->OH * p->OW <= DWCB_PIX_MAX && (Hp * Wp + 1) * DWCB <= DWCB_MAX;
}

/* The padded buffer's offset (pixel index times PS, the floats a pixel
 * takes) of every input pixel (Hp * Wp, one past
 * the buffer, for the pixels no window reads: their stores land there),
 * and of every output pixel's window (CB more past the plane's end, for a
 * last block's lanes past the plane: they read the first window). */
static inline void dwcb_tables(const ert_dw2d *p, int64_t Hp, int64_t Wp, int64_t PS, int32_t *tab, int32_t *otab) {
    for (int64_t r = 0; r < p->H; r++)
        for (int64_t c = 0; c < p->W; c++) {
            const int64_t br = r + p->ph, bc = c + p->pw;
            tab[r * p->W + c] = (int32_t)((br < Hp && bc < Wp ? br * Wp + bc : Hp * Wp) * PS);
        }
    for (int64_t r = 0; r < p->OH; r++)
        for (int64_t c = 0; c < p->OW; c++) otab[r * p->OW + c] = (int32_t)((r * p->sh * Wp + c * p->sw) * PS);
    for (int64_t i = 0; i < DWCB; i++) otab[p->OH * p->OW + i] = 0;
}

#if defined(__clang__)
#define DWCB_UNROLL _Pragma("unroll")
#else
#define DWCB_UNROLL _Pragma("GCC unroll 8")
#endif

/* CB output planes' pixels o..o+k-1 from acc (transposed: acc[c] is
 * channel c's CB pixels): + residual, activation KIND (a constant where
 * the caller specialises), store. */
static inline __attribute__((always_inline)) void dwcb_store(const ert_av8 *acc, float *y0, const float *r0,
                                                            int64_t OHW, int64_t o, int64_t k, const int KIND,
                                                            float al, float be) {
    DWCB_UNROLL
    for (int c = 0; c < DWCB; c++) {
        ert_av8 v = acc[c];
        if (k == DWCB) {
            if (r0) {
                ert_av8 rv;
                memcpy(&rv, r0 + c * OHW + o, sizeof rv);
                v += rv;
            }
            if (KIND != ERT_ACT_NONE) ert_av_act(&v, KIND, al, be);
            memcpy(y0 + c * OHW + o, &v, sizeof v);
        } else { /* the plane's last k < CB pixels: only those are read and stored */
            float t[DWCB], rt[DWCB] = {0};
            if (r0) memcpy(rt, r0 + c * OHW + o, (size_t)k * sizeof(float));
            ert_av8 rv;
            memcpy(&rv, rt, sizeof rv);
            v += rv;
            if (KIND != ERT_ACT_NONE) ert_av_act(&v, KIND, al, be);
            memcpy(t, &v, sizeof t);
            memcpy(y0 + c * OHW + o, t, (size_t)k * sizeof(float));
        }
    }
}

/* The KH x KW taps of output pixels o .. o + CB - 1 into acc[j], vectors of
 * type VT (CB channels, or 2 CB in the AVX-512 copy) from the buffer's
 * pixels PS floats apart. A row pointer stepped by rs: the taps are then
 * constant offsets from it (with kh * rs per tap gcc kept KH*KW offsets on
 * the stack, an extra load and add per FMA). */
#define DWCB_TAPS(VT, acc, wv, bv)                                                                                  \
    DWCB_UNROLL                                                                                                     \
    for (int j = 0; j < DWCB; j++) {                                                                                \
        const float *xr = buf + otab[o + j];                                                                        \
        VT s_ = (bv);                                                                                               \
        for (int64_t kh = 0; kh < KH; kh++, xr += rs)                                                               \
            for (int64_t kw = 0; kw < KW; kw++) {                                                                   \
                VT xv;                                                                                              \
                memcpy(&xv, xr + kw * PS, sizeof xv);                                                               \
                s_ += (wv)[kh * KW + kw] * xv;                                                                      \
            }                                                                                                       \
        (acc)[j] = s_;                                                                                              \
    }

/* CB channels' pixels o .. o + k - 1 (acc[j]: pixel j's CB channels): transposed, then the
 * residual, activation kind and store (dwcb_store) into the planes from y0 (residual r0) */
static inline __attribute__((always_inline)) void dwcb_out(ert_av8 *acc, float *y0, const float *r0, int64_t OHW,
                                                          int64_t o, int kind, float al, float be) {
    dwcb_transpose(acc);
    const int64_t k = OHW - o < DWCB ? OHW - o : DWCB;
    switch (kind) { /* a constant in each call, so ert_av_act's switch folds */
    case ERT_ACT_NONE: dwcb_store(acc, y0, r0, OHW, o, k, ERT_ACT_NONE, al, be); break;
    case ERT_ACT_RELU: dwcb_store(acc, y0, r0, OHW, o, k, ERT_ACT_RELU, al, be); break;
    case ERT_ACT_CLIP: dwcb_store(acc, y0, r0, OHW, o, k, ERT_ACT_CLIP, al, be); break;
    case ERT_ACT_HARD_SWISH: dwcb_store(acc, y0, r0, OHW, o, k, ERT_ACT_HARD_SWISH, al, be); break;
    case ERT_ACT_SILU: dwcb_store(acc, y0, r0, OHW, o, k, ERT_ACT_SILU, al, be); break;
    default: dwcb_store(acc, y0, r0, OHW, o, k, kind, al, be); break;
    }
}

#if defined(__x86_64__)
/* 2 CB = 16 channels as one AVX-512 vector (the driver copy's target has it) */
typedef float dwcb_v16 __attribute__((vector_size(2 * DWCB * sizeof(float))));
#endif

/* H2 * CB channels m0.. of image n (H2 = 2 only in the AVX-512 copy: the
 * taps then run 16 channels a vector, and the transposes in and out stay
 * CB x CB, one per half). buf (2 DWCB_MAX floats), tab and otab
 * (DWCB_PIX_MAX + DWCB) are the caller's, kept over its blocks, with
 * pixels PS floats apart (CB, or 2 CB in the AVX-512 copy, also for its
 * blocks of H2 = 1): *ready says the padding is zeroed and the tables
 * built (every block has the same shape). */
static inline __attribute__((always_inline)) void dwcb_block(const ert_dw2d *p, int64_t n, int64_t m0,
                                                            const int64_t KH, const int64_t KW, const int H2,
                                                            const int64_t PS, float *buf, int32_t *tab, int32_t *otab,
                                                            bool *ready, ert_act_row_fn act_row) {
    const int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW;
    const int64_t Hp = (OH - 1) * p->sh + KH, Wp = (OW - 1) * p->sw + KW;
    const int64_t HW = H * W, OHW = OH * OW;
    if (!*ready) {
        memset(buf, 0, (size_t)((Hp * Wp + 1) * PS) * sizeof(float));
        dwcb_tables(p, Hp, Wp, PS, tab, otab);
        *ready = true;
    }
    /* the input planes, CB channels and CB pixels at a time, transposed into the buffer */
    for (int h = 0; h < H2; h++) {
        const float *x0 = p->x + (n * p->C + m0 + h * DWCB) * HW;
        float *bh = buf + h * DWCB;
        for (int64_t f = 0; f < HW; f += DWCB) {
            const int64_t k = HW - f < DWCB ? HW - f : DWCB;
            ert_av8 r[DWCB];
            if (k == DWCB) {
                DWCB_UNROLL
                for (int c = 0; c < DWCB; c++) memcpy(&r[c], x0 + c * HW + f, sizeof r[c]);
            } else {
                for (int c = 0; c < DWCB; c++) {
                    float t[DWCB] = {0};
                    memcpy(t, x0 + c * HW + f, (size_t)k * sizeof(float));
                    memcpy(&r[c], t, sizeof r[c]);
                }
            }
            dwcb_transpose(r);
            if (k == DWCB) {
                DWCB_UNROLL
                for (int j = 0; j < DWCB; j++) memcpy(bh + tab[f + j], &r[j], sizeof r[j]);
            } else {
                for (int64_t j = 0; j < k; j++) memcpy(bh + tab[f + j], &r[j], sizeof r[j]);
            }
        }
    }
    /* weights (scaled) and bias, one vector (H2 * CB channels) per tap */
    float wt[7 * 7][2 * DWCB], bt[2 * DWCB];
    for (int c = 0; c < H2 * DWCB; c++) {
        const int64_t m = m0 + c;
        const float sc = p->scale ? p->scale[m] : 1.0f;
        for (int64_t i = 0; i < KH * KW; i++) wt[i][c] = p->w[m * KH * KW + i] * sc;
        bt[c] = p->b ? p->b[m] : 0.0f;
    }
    const ert_act_params *a = p->act;
    /* act_row (the AVX-512 copy's 16-lane pass) takes the transcendental kinds after the block, over
     * planes still in L1; the cheap ones stay in the registers before the store */
    const bool late = act_row && a && a->kind != ERT_ACT_RELU && a->kind != ERT_ACT_CLIP;
    const bool vec_act = a && !late && ert_act_row_vectorised(a->kind);
    const int kind = vec_act ? (int)a->kind : ERT_ACT_NONE;
    const float al = a ? a->alpha : 0.0f, be = a ? a->beta : 0.0f;
    float *y0 = p->y + (n * p->M + m0) * OHW;
    const float *r0 = p->res ? p->res + (n * p->M + m0) * OHW : NULL;
    const int64_t rs = Wp * PS; /* floats per buffer row */
/* the weights as vectors of VT, then per CB output pixels their taps into acc and the statements
 * after them (the stores) */
#define DWCB_RUN(VT, ...)                                                                                           \
    do {                                                                                                            \
        VT wv[7 * 7], bv;                                                                                           \
        for (int64_t i = 0; i < KH * KW; i++) memcpy(&wv[i], wt[i], sizeof wv[i]);                                  \
        memcpy(&bv, bt, sizeof bv);                                                                                 \
        for (int64_t o = 0; o < OHW; o += DWCB) {                                                                   \
            VT acc[DWCB];                                                                                           \
            DWCB_TAPS(VT, acc, wv, bv)                                                                              \
            __VA_ARGS__                                                                                             \
        }                                                                                                           \
    } while (0)
#if defined(__x86_64__)
    if (H2 == 2)
        DWCB_RUN(dwcb_v16, ert_av8 lo[DWCB], hi[DWCB];
                 for (int j = 0; j < DWCB; j++) {
                     memcpy(&lo[j], (const float *)&acc[j], sizeof lo[j]);
                     memcpy(&hi[j], (const float *)&acc[j] + DWCB, sizeof hi[j]);
                 } dwcb_out(lo, y0, r0, OHW, o, kind, al, be);
                 dwcb_out(hi, y0 + DWCB * OHW, r0 ? r0 + DWCB * OHW : NULL, OHW, o, kind, al, be););
    else
#endif
        DWCB_RUN(ert_av8, dwcb_out(acc, y0, r0, OHW, o, kind, al, be););
#undef DWCB_RUN
    /* the block's H2 * CB output planes are consecutive: one pass over all of them (per plane, a 7x7
     * map's 49 values were 4 vectors a call, with the call and its switch each time) */
    if (a && !vec_act) (late ? act_row : ert_cpu_act_row)(y0, H2 * DWCB * OHW, a);
}

/* Blocks [t0, t1) of (image, H2 * CB channels): H2 = 2 in the AVX-512
 * copy (16 channels a vector), else 1. A block past the last whole H2 * CB
 * channels takes the CB channels it still holds one block of H2 = 1 and
 * runs the rest through body (the plane-at-a-time kernel). */
static inline __attribute__((always_inline)) void dwcb_blocks(const ert_dw2d *p, int64_t t0, int64_t t1,
                                                             void (*body)(void *, int64_t, int64_t),
                                                             ert_act_row_fn act_row, const int H2) {
    float buf[2 * DWCB_MAX];
    int32_t tab[DWCB_PIX_MAX], otab[DWCB_PIX_MAX + DWCB];
    bool ready = false;
    const int64_t CH = H2 * DWCB, nb = (p->M + CH - 1) / CH, PS = CH;
    const bool d3 = p->KH == 3 && p->KW == 3, d5 = p->KH == 5 && p->KW == 5, d7 = p->KH == 7 && p->KW == 7;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t n = t / nb;
        int64_t m0 = t % nb * CH;
        int h2 = H2;
        if (m0 + CH > p->M) {
            if (H2 == 2 && m0 + DWCB <= p->M) {
                h2 = 1; /* one 8-channel block, the rest below */
            } else {
                body((void *)p, n * p->M + m0, n * p->M + p->M);
                continue;
            }
        }
/* the block with the window as constants where specialised (3x3, 5x5, 7x7) */
#define DWCB_KERNEL(H2C)                                                                                            \
    do {                                                                                                            \
        if (d3) dwcb_block(p, n, m0, 3, 3, (H2C), PS, buf, tab, otab, &ready, act_row);                             \
        else if (d5) dwcb_block(p, n, m0, 5, 5, (H2C), PS, buf, tab, otab, &ready, act_row);                        \
        else if (d7) dwcb_block(p, n, m0, 7, 7, (H2C), PS, buf, tab, otab, &ready, act_row);                        \
        else dwcb_block(p, n, m0, p->KH, p->KW, (H2C), PS, buf, tab, otab, &ready, act_row);                        \
    } while (0)
        if (h2 == 2) DWCB_KERNEL(2);
        else DWCB_KERNEL(1);
#undef DWCB_KERNEL
        if (h2 != H2 && m0 + DWCB < p->M) body((void *)p, n * p->M + m0 + DWCB, n * p->M + p->M);
    }
}
#endif /* __GNUC__ */
#endif
