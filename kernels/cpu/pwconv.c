/* Pointwise convolution (1x1, stride 1, no padding, one group), and other
 * one-group convs whose windows do not overlap (strided 1x1, kernel =
 * stride) through a per-task im2col: a kernel
 * beside the SGEMM that conv.c otherwise runs for them.
 *
 *   y (N, M, P) = W (M, K) x (N, K, P) + bias, + residual, activation
 *   (P = the output pixels of a plane; x's channel k is x's row k, NCHW; for
 *   the im2col case x's rows are the K = C*KH*KW taps of each pixel)
 *
 * The SGEMM makes pixels its vector dimension: each call packs x into
 * 16-column panels (a copy of every input float per 288 output channels),
 * loses lanes where P is not a multiple of 16 (a 7x7 map is 3 panels and 1
 * column of a fourth), and pays a tile's set-up and store per 16 pixels x 6
 * channels. Here the output channels are the vector dimension (onnxruntime's
 * NCHWc kernels do the same): a tile is 4 pixels x CB channels (AVX2: 3
 * vectors, 24 channels; NEON: 4 vectors, 16), its x values broadcast (AVX2)
 * or taken by lane (NEON's FMLA by element) straight from the input rows,
 * no packing, its weights whole vectors of a panel packed once at session
 * create. Per k step on AVX2: 3 loads, 4 broadcasts, 12 FMAs (the SGEMM's
 * 6x16 tile: 2, 6, 12 plus its B packing). Pixel counts need no padding (a
 * last tile of 1..3 pixels); channel counts are multiples of 8 in the
 * networks this is for, and a last block of 1 or 2 vectors takes its own
 * copy (channels past M are zero in the panel, never stored). The tile is
 * transposed in registers into 4-pixel pieces of each output channel's row,
 * which get the residual and the activation before the store.
 *
 * Work: tasks of (image, pixel chunk, range of channel blocks), claimed by
 * worker slots from an atomic counter. Without packed panels (ERT_SESSION_
 * NO_PACK, the trainer) each task packs its blocks into its slot's share of
 * the workspace (the same numbers either way); a fused squeeze-excitation
 * scale on the input channels (conv in_scale) goes into a copy of the
 * task's pixels there (the SGEMM applies it while packing), and so do the
 * im2col rows of a conv that is not pointwise (windows that do not
 * overlap, PW_GATHER_KMAX). prepare
 * sizes the workspace for the SGEMM; where a slot's share is too small the
 * conv takes the SGEMM (only without packed panels: K > 256 with few
 * pixels and channels).
 *
 * Chosen where the SGEMM would run its AVX2 kernel (x86) or NEON (aarch64),
 * and on AVX-512 CPUs a 16-lane copy (4 pixels x up to 64 channels) for
 * convs whose output channels are a multiple of 16 (the others keep the
 * SGEMM's 8x32 kernel: pw_block_channels); the portable kernel keeps the
 * SGEMM, which is also what the tests hold this against. */
#include "act_vec.h"
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <stdatomic.h>
#include <string.h>

#define PW_MAGIC 0x70776331 /* "pwc1" */
#define PW_HDR 64
#define PW_CHUNK 128 /* pixels per task at most: the chunk's x rows (and its scaled copy) stay in L2 */

typedef struct pw_hdr {
    int64_t magic, M, K, cb, vl;
} pw_hdr;

/* A conv that is not pointwise, as the per-task im2col sees it (2-D; 1-D
 * with H = OH = KH = 1): x rows k = (c, kh, kw) of K = C*KH*KW. */
typedef struct pw_geom {
    int64_t C, H, W, OW, KH, KW, sh, sw, dh, dw, ph, pw;
} pw_geom;

typedef struct pw_job {
    const float *x, *b, *res, *isc; /* isc (N, C) or NULL: the fused SE scale */
    const pw_geom *gm;            /* or NULL: pointwise, x's rows read in place */
    const float *wp;              /* the panels packed at create, or NULL: each task packs its blocks from */
    const float *w, *osc;         /* the filter (M, K) and the output-channel scale (M) or NULL */
    float *y;
    int64_t N, K, M, P, cb, vl, n_cb; /* cb: channels per block, a multiple of vl (the vector width) */
    int64_t chunk, n_pc, n_cg, n_tasks; /* chunk: the most pixels a task has (pw_chunk_of) */
    int64_t n_tiles;                    /* 4-pixel tiles of a plane: chunk pc is tiles [pc * n_tiles / n_pc, ..) */
    const ert_act_params *act;
    bool pf;                      /* several threads: pw_targs.pf */
    float *ws;                    /* per slot slot_floats: a block's panel (wp NULL), the scaled chunk (isc) */
    const float *xsh;             /* or NULL: the im2col rows of every image built once (N, K, P), read in place */
    int64_t slot_floats;
    atomic_llong next;
} pw_job;

/* Channels c0 .. c0 + nch of w (M, K) times osc (or 1), as (K, width)
 * rows (width: nch rounded up to whole vectors, zeros past nch): a panel
 * block, at create for all of them or per task into its slot. */
static void pw_pack_block(const float *w, const float *osc, int64_t K, int64_t c0, int64_t nch, int64_t width,
                          float *restrict blk) {
    for (int64_t c = 0; c < width; c++) {
        const float *wr = w + (c0 + c) * K;
        const float sc = c < nch && osc ? osc[c0 + c] : 1.0f;
        for (int64_t k = 0; k < K; k++) blk[k * width + c] = c < nch ? sc * wr[k] : 0.0f;
    }
}

/* The im2col rows of output pixels [p0, p1) of one image xn (C, H, W),
 * input channel c times isc[c] when isc: dst row k = (c, kh, kw), p1 - p0
 * floats, zero where the tap falls in the padding. Per output-row segment
 * the in-image span is found up front, so the copy loops have no test. */
static inline void pw_im2col_c(const pw_geom *g, const float *xn, const float *isc, int64_t c0, int64_t c1,
                               int64_t p0, int64_t p1, float *restrict dst) {
    const int64_t w = p1 - p0, sw = g->sw;
    float *d = dst;
    for (int64_t c = c0; c < c1; c++) {
        const float s = isc ? isc[c] : 1.0f;
        for (int64_t kh = 0; kh < g->KH; kh++)
            for (int64_t kw = 0; kw < g->KW; kw++, d += w) {
                for (int64_t p = p0; p < p1;) {
                    const int64_t oh = p / g->OW, ow0 = p % g->OW;
                    const int64_t n = g->OW - ow0 < p1 - p ? g->OW - ow0 : p1 - p;
                    const int64_t ih = oh * g->sh - g->ph + kh * g->dh, iw0 = ow0 * sw - g->pw + kw * g->dw;
                    float *dd = d + (p - p0);
                    int64_t lo = 0, hi = 0; /* taps t in [lo, hi) read the image */
                    if (ih >= 0 && ih < g->H) {
                        lo = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
                        hi = g->W - iw0 > 0 ? (g->W - iw0 + sw - 1) / sw : 0;
                        if (hi > n) hi = n;
                        if (lo > hi) lo = hi;
                    }
                    int64_t t = 0;
                    for (; t < lo; t++) dd[t] = 0.0f;
                    if (hi > lo) {
                        const float *row = xn + (c * g->H + ih) * g->W + iw0;
                        if (sw == 1 && !isc)
                            for (; t < hi; t++) dd[t] = row[t];
                        else if (sw == 1)
                            for (; t < hi; t++) dd[t] = s * row[t];
                        else
                            for (; t < hi; t++) dd[t] = s * row[t * sw];
                    }
                    for (; t < n; t++) dd[t] = 0.0f;
                    p += n;
                }
            }
    }
}
static inline void pw_im2col(const pw_geom *g, const float *xn, const float *isc, int64_t p0, int64_t p1,
                             float *restrict dst) {
    pw_im2col_c(g, xn, isc, 0, g->C, p0, p1, dst);
}

/* The shared im2col rows (pw_job.xsh): task t builds input channels
 * [t % n_ct * C / n_ct, ..) of image t / n_ct, all P pixels (rows P apart) */
typedef struct pw_sh_job {
    const pw_geom *g;
    const float *x, *isc;
    float *xsh;
    int64_t P, n_ct;
} pw_sh_job;
static void pw_sh_run(void *arg, int64_t t0, int64_t t1) {
    const pw_sh_job *j = arg;
    const pw_geom *g = j->g;
    const int64_t kk = g->KH * g->KW, K = g->C * kk;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t n = t / j->n_ct, ct = t % j->n_ct;
        const int64_t c0 = ct * g->C / j->n_ct, c1 = (ct + 1) * g->C / j->n_ct;
        pw_im2col_c(g, j->x + n * g->C * g->H * g->W, j->isc ? j->isc + n * g->C : NULL, c0, c1, 0, j->P,
                    j->xsh + (n * K + c0 * kk) * j->P);
    }
}

/* What every tile of one channel block shares. */
typedef struct pw_targs {
    int64_t ldx, K, P;       /* x's row stride, input channels, y's row stride (pixels of a plane) */
    const float *wp;         /* the block's panel (K, V * VL) */
    const float *bias;       /* V * VL floats (zeros past nch) */
    int nch, kind;           /* real channels; the activation if act_vec.h has it, else ERT_ACT_NONE */
    float al, be;
    /* K split into blocks (pw_block, PW_KB): the tile's accumulators start from acc_in (NULL: the
     * bias) and, where acc_out is set, are stored there raw (no epilogue) for the next block */
    const float *acc_in;
    float *acc_out;
    bool pf; /* the AVX-512 tile prefetches x rows PWZ_PF ahead (several threads, x read in place) */
} pw_targs;

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
#define PW_ON 1

#if defined(__aarch64__)
#include <arm_neon.h>
#define PW_VMAX 4 /* 16 accumulators + 4 weight vectors + the 4 pixels' x */
#define PW_VL 4
#define PW_FN(name) name##_n
#define PW_TARGET

/* The NEON tile (pwconv_impl.h's contract for PW_FN(pw_tile_k)): per k
 * step one q-register of 4 pixels' x, V weight vectors and 4V FMLA by
 * lane (`fmla v.4s, v.4s, v.s[r]`: no broadcasts). Intrinsics on named
 * accumulators, one function per (V, FULL): the GNU-vector body with its
 * accumulators in an array spilled them on every k step (gcc 12). */
#define PWN_ROW(r) float32x4_t c##r##0 = b0, c##r##1 = b1, c##r##2 = b2, c##r##3 = b3
#define PWN_FMA(r)                                                                                                  \
    do {                                                                                                            \
        c##r##0 = vfmaq_laneq_f32(c##r##0, w0, xv, r);                                                              \
        if (V > 1) c##r##1 = vfmaq_laneq_f32(c##r##1, w1, xv, r);                                                   \
        if (V > 2) c##r##2 = vfmaq_laneq_f32(c##r##2, w2, xv, r);                                                   \
        if (V > 3) c##r##3 = vfmaq_laneq_f32(c##r##3, w3, xv, r);                                                   \
    } while (0)

/* channel row u (4 pixels) of output channel c of the block (nch real):
 * residual, activation (act_vec.h's vectors are q-registers here), store */
static inline __attribute__((always_inline)) void pwn_out(float32x4_t u, float *restrict y,
                                                         const float *restrict res, int c, const bool FULL, int R,
                                                         int nch, const int KIND, float al, float be) {
    if (!FULL && c >= nch) return;
    if (res) {
        if (FULL) u = vaddq_f32(u, vld1q_f32(res));
        else {
            float rt[4] = {0};
            memcpy(rt, res, (size_t)R * sizeof(float));
            u = vaddq_f32(u, vld1q_f32(rt));
        }
    }
    if (KIND != ERT_ACT_NONE) {
        ert_av8 t;
        memcpy(&t, &u, sizeof t);
        ert_av_act(&t, KIND, al, be);
        memcpy(&u, &t, sizeof u);
    }
    if (FULL) vst1q_f32(y, u);
    else {
        float t[4];
        vst1q_f32(t, u);
        memcpy(y, t, (size_t)R * sizeof(float));
    }
}

/* the 4x4 block of vector v (rows = pixels) transposed into 4 channel
 * rows, then out */
#define PWN_OUT(v)                                                                                                  \
    do {                                                                                                            \
        const float32x4_t t0 = vtrn1q_f32(c0##v, c1##v), t1 = vtrn2q_f32(c0##v, c1##v);                           \
        const float32x4_t t2 = vtrn1q_f32(c2##v, c3##v), t3 = vtrn2q_f32(c2##v, c3##v);                           \
        const float64x2_t d0 = vreinterpretq_f64_f32(t0), d1 = vreinterpretq_f64_f32(t1);                           \
        const float64x2_t d2 = vreinterpretq_f64_f32(t2), d3 = vreinterpretq_f64_f32(t3);                           \
        float32x4_t u_[4] = {vreinterpretq_f32_f64(vtrn1q_f64(d0, d2)), vreinterpretq_f32_f64(vtrn1q_f64(d1, d3)), \
                             vreinterpretq_f32_f64(vtrn2q_f64(d0, d2)), vreinterpretq_f32_f64(vtrn2q_f64(d1, d3))}; \
        for (int i_ = 0; i_ < 4; i_++) {                                                                            \
            const int c_ = (v) * 4 + i_;                                                                            \
            pwn_out(u_[i_], y + c_ * P, res ? res + c_ * P : NULL, c_, FULL, R, nch, KIND, al, be);                 \
        }                                                                                                           \
    } while (0)
#define PWN_EPI(KIND_)                                                                                              \
    do {                                                                                                            \
        const int KIND = (KIND_);                                                                                   \
        PWN_OUT(0);                                                                                                 \
        if (V > 1) PWN_OUT(1);                                                                                      \
        if (V > 2) PWN_OUT(2);                                                                                      \
        if (V > 3) PWN_OUT(3);                                                                                      \
    } while (0)

static inline __attribute__((always_inline)) void pwn_tile(const pw_targs *tg, const float *restrict x,
                                                          float *restrict y, const float *restrict res, int R,
                                                          const int V, const bool FULL) {
    const int64_t ldx = tg->ldx, K = tg->K, P = tg->P;
    const float *wk = tg->wp, *xk = x;
    const float32x4_t b0 = vld1q_f32(tg->bias), b1 = V > 1 ? vld1q_f32(tg->bias + 4) : b0,
                      b2 = V > 2 ? vld1q_f32(tg->bias + 8) : b0, b3 = V > 3 ? vld1q_f32(tg->bias + 12) : b0;
    PWN_ROW(0); PWN_ROW(1); PWN_ROW(2); PWN_ROW(3);
    for (int64_t k = 0; k < K; k++, xk += ldx, wk += V * 4) {
        float32x4_t xv;
        if (FULL) xv = vld1q_f32(xk);
        else { /* the last 1..3 pixels of a row: the lanes past them are zero */
            float t[4] = {0};
            memcpy(t, xk, (size_t)R * sizeof(float));
            xv = vld1q_f32(t);
        }
        const float32x4_t w0 = vld1q_f32(wk), w1 = V > 1 ? vld1q_f32(wk + 4) : w0,
                          w2 = V > 2 ? vld1q_f32(wk + 8) : w0, w3 = V > 3 ? vld1q_f32(wk + 12) : w0;
        PWN_FMA(0); PWN_FMA(1); PWN_FMA(2); PWN_FMA(3);
    }
    const int nch = tg->nch;
    const float al = tg->al, be = tg->be;
    switch (tg->kind) { /* a constant in each epilogue, so ert_av_act's switch and constants fold */
    case ERT_ACT_NONE: PWN_EPI(ERT_ACT_NONE); break;
    case ERT_ACT_RELU: PWN_EPI(ERT_ACT_RELU); break;
    case ERT_ACT_CLIP: PWN_EPI(ERT_ACT_CLIP); break;
    case ERT_ACT_SILU: PWN_EPI(ERT_ACT_SILU); break;
    case ERT_ACT_HARD_SWISH: PWN_EPI(ERT_ACT_HARD_SWISH); break;
    case ERT_ACT_GELU: PWN_EPI(ERT_ACT_GELU); break;
    default: PWN_EPI(tg->kind); break;
    }
}
#undef PWN_ROW
#undef PWN_FMA
#undef PWN_OUT
#undef PWN_EPI

#define PWN_COPY(V, FULL, NAME)                                                                                     \
    __attribute__((noinline)) static void NAME(const pw_targs *tg, const float *x, float *y, const float *res,      \
                                               int R) {                                                             \
        pwn_tile(tg, x, y, res, R, V, FULL);                                                                        \
    }
PWN_COPY(1, true, pwn_tile1f)
PWN_COPY(2, true, pwn_tile2f)
PWN_COPY(3, true, pwn_tile3f)
PWN_COPY(4, true, pwn_tile4f)
PWN_COPY(1, false, pwn_tile1p)
PWN_COPY(2, false, pwn_tile2p)
PWN_COPY(3, false, pwn_tile3p)
PWN_COPY(4, false, pwn_tile4p)
#undef PWN_COPY

static inline __attribute__((always_inline)) void pw_tile_k_n(const pw_targs *tg, const float *x, float *y,
                                                             const float *res, int R, const int V, const bool FULL) {
    if (V == 4) (FULL ? pwn_tile4f : pwn_tile4p)(tg, x, y, res, R);
    else if (V == 3) (FULL ? pwn_tile3f : pwn_tile3p)(tg, x, y, res, R);
    else if (V == 2) (FULL ? pwn_tile2f : pwn_tile2p)(tg, x, y, res, R);
    else (FULL ? pwn_tile1f : pwn_tile1p)(tg, x, y, res, R);
}
#include "pwconv_impl.h"
static void pw_run_neon(void *arg, int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; s++) pw_slot_n(arg, s);
}
#else
#include <immintrin.h>
#define PW_VMAX 3 /* 12 accumulators + 3 weight vectors + a broadcast: the 16 ymm registers */
#define PW_VL 8
#define PW_FN(name) name##_y
#define PW_TARGET __attribute__((target("avx2,fma")))

/* The AVX2 tile (pwconv_impl.h's contract for PW_FN(pw_tile_k)), in
 * intrinsics on named accumulators, one function per (V, FULL) that the
 * block loop calls per tile: inlined into that loop (or written with GNU
 * vectors in an array), gcc 12 kept the tile's row addresses in registers
 * and stack slots of their own, stepped each per tile, and copied
 * accumulators around (~20% more instructions a k step, ~180 per tile
 * outside it). */
#define PWY_ROW(r)                                                                                                  \
    __m256 c##r##0 = b0, c##r##1 = b1, c##r##2 = b2
#define PWY_FMA(r, XR)                                                                                              \
    if ((r) < R) {                                                                                                  \
        const __m256 s_ = _mm256_broadcast_ss((XR) + (r));                                                         \
        c##r##0 = _mm256_fmadd_ps(w0, s_, c##r##0);                                                                 \
        if (V > 1) c##r##1 = _mm256_fmadd_ps(w1, s_, c##r##1);                                                      \
        if (V > 2) c##r##2 = _mm256_fmadd_ps(w2, s_, c##r##2);                                                      \
    }
#define PWY_STEP(J, XR)                                                                                             \
    do {                                                                                                            \
        const __m256 w0 = _mm256_loadu_ps(wk + (J) * V * 8);                                                        \
        const __m256 w1 = V > 1 ? _mm256_loadu_ps(wk + (J) * V * 8 + 8) : w0;                                       \
        const __m256 w2 = V > 2 ? _mm256_loadu_ps(wk + (J) * V * 8 + 16) : w0;                                      \
        PWY_FMA(0, XR) PWY_FMA(1, XR) PWY_FMA(2, XR) PWY_FMA(3, XR)                                                 \
    } while (0)

/* the epilogue of one transposed vector u (lane 0: the channel row at y,
 * lane 1: the one 4 rows on; 4 pixels each; channels c, c + 4 of the
 * block, nch real) and its store; res the same rows of the residual */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
pwy_out(__m256 u, float *restrict y, const float *restrict res, int64_t P4, int c, const bool FULL, int R, int nch,
        const int KIND, float al, float be) {
    if (FULL) {
        if (res)
            u = _mm256_add_ps(u, _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(res)),
                                                      _mm_loadu_ps(res + P4), 1));
    } else {
        float rt[8] = {0};
        if (res) {
            if (c < nch) memcpy(rt, res, (size_t)R * sizeof(float));
            if (c + 4 < nch) memcpy(rt + 4, res + P4, (size_t)R * sizeof(float));
        }
        u = _mm256_add_ps(u, _mm256_loadu_ps(rt));
    }
    /* ReLU and Clip as act_vec.h's `x < lo ? lo : x` exactly (MAXPS returns
     * its second operand unless the first is greater: NaN stays NaN) */
    if (KIND == ERT_ACT_RELU) u = _mm256_max_ps(_mm256_setzero_ps(), u);
    else if (KIND == ERT_ACT_CLIP)
        u = _mm256_min_ps(_mm256_set1_ps(be + 0.0f), _mm256_max_ps(_mm256_set1_ps(al + 0.0f), u));
    else if (KIND != ERT_ACT_NONE) {
        ert_av8 t = (ert_av8)u;
        ert_av_act(&t, KIND, al, be);
        u = (__m256)t;
    }
    if (FULL) {
        _mm_storeu_ps(y, _mm256_castps256_ps128(u));
        _mm_storeu_ps(y + P4, _mm256_extractf128_ps(u, 1));
    } else {
        float t[8];
        _mm256_storeu_ps(t, u);
        if (c < nch) memcpy(y, t, (size_t)R * sizeof(float));
        if (c + 4 < nch) memcpy(y + P4, t + 4, (size_t)R * sizeof(float));
    }
}

/* the 4 x 8 tile of vector v (rows = pixels) transposed into 4 vectors of
 * 2 channels x 4 pixels, then out; yq and rq step one channel row at a time */
#define PWY_OUT1(U, I)                                                                                              \
    do {                                                                                                            \
        pwy_out((U), yq, rq, P4, (I), FULL, R, nch, KIND, al, be);                                                  \
        yq += P;                                                                                                    \
        if (res) rq += P;                                                                                           \
    } while (0)
#define PWY_OUT(v)                                                                                                  \
    do {                                                                                                            \
        const __m256 t0 = _mm256_unpacklo_ps(c0##v, c1##v), t1 = _mm256_unpackhi_ps(c0##v, c1##v);                 \
        const __m256 t2 = _mm256_unpacklo_ps(c2##v, c3##v), t3 = _mm256_unpackhi_ps(c2##v, c3##v);                 \
        PWY_OUT1(_mm256_shuffle_ps(t0, t2, 0x44), (v) * 8 + 0);                                                     \
        PWY_OUT1(_mm256_shuffle_ps(t0, t2, 0xEE), (v) * 8 + 1);                                                     \
        PWY_OUT1(_mm256_shuffle_ps(t1, t3, 0x44), (v) * 8 + 2);                                                     \
        PWY_OUT1(_mm256_shuffle_ps(t1, t3, 0xEE), (v) * 8 + 3);                                                     \
        yq += P4;                                                                                                   \
        if (res) rq += P4;                                                                                          \
    } while (0)
#define PWY_EPI(KIND_)                                                                                              \
    do {                                                                                                            \
        const int KIND = (KIND_);                                                                                   \
        float *yq = y;                                                                                              \
        const float *rq = res;                                                                                      \
        PWY_OUT(0);                                                                                                 \
        if (V > 1) PWY_OUT(1);                                                                                      \
        if (V > 2) PWY_OUT(2);                                                                                      \
    } while (0)

__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
pwy_tile(const pw_targs *tg, const float *restrict x, float *restrict y, const float *restrict res, int R,
         const int V, const bool FULL) {
    if (FULL) R = 4;
    const int64_t ldx = tg->ldx, K = tg->K, P = tg->P, P4 = 4 * P, l2 = 2 * ldx, l3 = 3 * ldx;
    const float *wk = tg->wp;
    const __m256 b0 = _mm256_loadu_ps(tg->bias), b1 = V > 1 ? _mm256_loadu_ps(tg->bias + 8) : b0,
                 b2 = V > 2 ? _mm256_loadu_ps(tg->bias + 16) : b0;
    PWY_ROW(0); PWY_ROW(1); PWY_ROW(2); PWY_ROW(3);
    const float *xk = x;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4, xk += 4 * ldx, wk += 4 * V * 8) {
        /* the row pointers opaque to gcc's induction-variable pass, which
         * otherwise keeps every (row, pixel) offset of the trip in a register
         * of its own (16 of them, some spilled) instead of a displacement */
        const float *x0 = xk, *x1 = xk + ldx, *x2 = xk + l2, *x3 = xk + l3;
        __asm__("" : "+r"(x0), "+r"(x1), "+r"(x2), "+r"(x3));
        PWY_STEP(0, x0);
        PWY_STEP(1, x1);
        PWY_STEP(2, x2);
        PWY_STEP(3, x3);
    }
    for (; k < K; k++, xk += ldx, wk += V * 8) PWY_STEP(0, xk);
    const int nch = tg->nch;
    const float al = tg->al, be = tg->be;
    switch (tg->kind) { /* a constant in each epilogue, so ert_av_act's switch and constants fold */
    case ERT_ACT_NONE: PWY_EPI(ERT_ACT_NONE); break;
    case ERT_ACT_RELU: PWY_EPI(ERT_ACT_RELU); break;
    case ERT_ACT_CLIP: PWY_EPI(ERT_ACT_CLIP); break;
    case ERT_ACT_SILU: PWY_EPI(ERT_ACT_SILU); break;
    case ERT_ACT_HARD_SWISH: PWY_EPI(ERT_ACT_HARD_SWISH); break;
    case ERT_ACT_GELU: PWY_EPI(ERT_ACT_GELU); break;
    default: PWY_EPI(tg->kind); break;
    }
}
#undef PWY_ROW
#undef PWY_FMA
#undef PWY_STEP
#undef PWY_OUT
#undef PWY_OUT1
#undef PWY_EPI

#define PWY_COPY(V, FULL, NAME)                                                                                     \
    __attribute__((target("avx2,fma"), noinline)) static void NAME(const pw_targs *tg, const float *x, float *y,   \
                                                                  const float *res, int R) {                        \
        pwy_tile(tg, x, y, res, R, V, FULL);                                                                        \
    }
PWY_COPY(1, true, pwy_tile1f)
PWY_COPY(2, true, pwy_tile2f)
PWY_COPY(3, true, pwy_tile3f)
PWY_COPY(1, false, pwy_tile1p)
PWY_COPY(2, false, pwy_tile2p)
PWY_COPY(3, false, pwy_tile3p)
#undef PWY_COPY

__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
pw_tile_k_y(const pw_targs *tg, const float *x, float *y, const float *res, int R, const int V, const bool FULL) {
    if (V == 3) (FULL ? pwy_tile3f : pwy_tile3p)(tg, x, y, res, R);
    else if (V == 2) (FULL ? pwy_tile2f : pwy_tile2p)(tg, x, y, res, R);
    else (FULL ? pwy_tile1f : pwy_tile1p)(tg, x, y, res, R);
}
#include "pwconv_impl.h"
__attribute__((target("avx2,fma"))) static void pw_run_avx2(void *arg, int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; s++) pw_slot_y(arg, s);
}

/* The AVX-512 tile: 4 pixels x up to 4 vectors of 16 channels (16 zmm
 * accumulators, 4 weight vectors, a broadcast: 21 of the 32 registers), per
 * k step 4 loads, 4 broadcasts, 16 FMAs. On an AVX-512 CPU the SGEMM runs
 * its 8x32 kernel, so this copy is what the pointwise convs take there (the
 * AVX2 copy on such a CPU measured 1.05x slower than that SGEMM over the CPU
 * zoo: its 8 lanes do half the work per instruction). The 4 x 16 tile of
 * each vector is transposed per 128-bit lane (the AVX2 copy's unpack and
 * shuffle), giving 4 zmm of 4 channel rows each (channels i, i + 4, i + 8,
 * i + 12 of the vector, 4 pixels a row). */
#undef PW_VMAX
#undef PW_VL
#undef PW_FN
#undef PW_TARGET
#define PW_VMAX 4
#define PW_VL 16
#define PW_FN(name) name##_z
#define PW_TARGET __attribute__((target("avx512f,avx2,fma")))

/* x rows this far ahead prefetched by the 16-lane tile when the conv runs on several threads
 * (pw_targs.pf). There a 1x1 conv's input was just written by the node before it, split between
 * the cores (a depthwise conv by channel planes), and each k row of a tile is a line the other core
 * holds: MobileNetV2's 14x14 1x1 convs did not scale from 1 to 2 threads at all inside the model
 * (alone: 1.8x); with the prefetch a depthwise -> 576 -> 96 pair's 1x1 takes 0.13 -> 0.09 ms at 2
 * threads. At 1 thread it only cost (+1-2%), and on a task's own copy of its rows (SE scale, im2col)
 * it has nothing to fetch (EfficientNet-B0's SE-scaled 32 -> 16 at 112x112: +54%): off there. */
#define PWZ_PF 32
#define PWZ_ROW(r) __m512 c##r##0 = b0, c##r##1 = b1, c##r##2 = b2, c##r##3 = b3
/* pixel r's accumulators from / to ai (vector v at (4r + v) * 16: every slot, whatever V and R) */
#define PWZ_LD(r, v) c##r##v = _mm512_loadu_ps(ai + (4 * (r) + (v)) * 16)
#define PWZ_SV(r, v) _mm512_storeu_ps(ai + (4 * (r) + (v)) * 16, c##r##v)
#define PWZ_ACC(r, OP)                                                                                              \
    if ((r) < R) {                                                                                                  \
        OP(r, 0);                                                                                                   \
        if (V > 1) OP(r, 1);                                                                                        \
        if (V > 2) OP(r, 2);                                                                                        \
        if (V > 3) OP(r, 3);                                                                                        \
    }
#define PWZ_FMA(r, XR)                                                                                              \
    if ((r) < R) {                                                                                                  \
        const __m512 s_ = _mm512_set1_ps((XR)[r]);                                                                  \
        c##r##0 = _mm512_fmadd_ps(w0, s_, c##r##0);                                                                 \
        if (V > 1) c##r##1 = _mm512_fmadd_ps(w1, s_, c##r##1);                                                      \
        if (V > 2) c##r##2 = _mm512_fmadd_ps(w2, s_, c##r##2);                                                      \
        if (V > 3) c##r##3 = _mm512_fmadd_ps(w3, s_, c##r##3);                                                      \
    }
#define PWZ_STEP(J, XR)                                                                                             \
    do {                                                                                                            \
        const __m512 w0 = _mm512_loadu_ps(wk + (J) * V * 16);                                                       \
        const __m512 w1 = V > 1 ? _mm512_loadu_ps(wk + (J) * V * 16 + 16) : w0;                                     \
        const __m512 w2 = V > 2 ? _mm512_loadu_ps(wk + (J) * V * 16 + 32) : w0;                                     \
        const __m512 w3 = V > 3 ? _mm512_loadu_ps(wk + (J) * V * 16 + 48) : w0;                                     \
        PWZ_FMA(0, XR) PWZ_FMA(1, XR) PWZ_FMA(2, XR) PWZ_FMA(3, XR)                                                 \
    } while (0)

/* the epilogue of one transposed vector u (lane L: the channel row 4L rows
 * on from y, channel c + 4L of the block, nch real; R pixels each) and its
 * store; res the same rows of the residual; rows P apart */
__attribute__((target("avx512f,avx2,fma"))) static inline __attribute__((always_inline)) void
pwz_out(__m512 u, float *restrict y, const float *restrict res, int64_t P4, int c, const bool FULL, int R, int nch,
        const int KIND, float al, float be) {
    if (FULL) {
        if (res) {
            __m512 r = _mm512_castps128_ps512(_mm_loadu_ps(res));
            r = _mm512_insertf32x4(r, _mm_loadu_ps(res + P4), 1);
            r = _mm512_insertf32x4(r, _mm_loadu_ps(res + 2 * P4), 2);
            r = _mm512_insertf32x4(r, _mm_loadu_ps(res + 3 * P4), 3);
            u = _mm512_add_ps(u, r);
        }
    } else {
        float rt[16] = {0};
        if (res)
            for (int L = 0; L < 4; L++)
                if (c + 4 * L < nch) memcpy(rt + 4 * L, res + L * P4, (size_t)R * sizeof(float));
        u = _mm512_add_ps(u, _mm512_loadu_ps(rt));
    }
    u = ert_av_act_z(u, KIND, al, be);
    if (FULL) {
        _mm_storeu_ps(y, _mm512_castps512_ps128(u));
        _mm_storeu_ps(y + P4, _mm512_extractf32x4_ps(u, 1));
        _mm_storeu_ps(y + 2 * P4, _mm512_extractf32x4_ps(u, 2));
        _mm_storeu_ps(y + 3 * P4, _mm512_extractf32x4_ps(u, 3));
    } else {
        float t[16];
        _mm512_storeu_ps(t, u);
        for (int L = 0; L < 4; L++)
            if (c + 4 * L < nch) memcpy(y + L * P4, t + 4 * L, (size_t)R * sizeof(float));
    }
}

#define PWZ_OUT1(U, I)                                                                                              \
    do {                                                                                                            \
        pwz_out((U), yq, rq, P4, (I), FULL, R, nch, KIND, al, be);                                                  \
        yq += P;                                                                                                    \
        if (res) rq += P;                                                                                           \
    } while (0)
#define PWZ_OUT(v)                                                                                                  \
    do {                                                                                                            \
        const __m512 t0 = _mm512_unpacklo_ps(c0##v, c1##v), t1 = _mm512_unpackhi_ps(c0##v, c1##v);                 \
        const __m512 t2 = _mm512_unpacklo_ps(c2##v, c3##v), t3 = _mm512_unpackhi_ps(c2##v, c3##v);                 \
        PWZ_OUT1(_mm512_shuffle_ps(t0, t2, 0x44), (v) * 16 + 0);                                                    \
        PWZ_OUT1(_mm512_shuffle_ps(t0, t2, 0xEE), (v) * 16 + 1);                                                    \
        PWZ_OUT1(_mm512_shuffle_ps(t1, t3, 0x44), (v) * 16 + 2);                                                    \
        PWZ_OUT1(_mm512_shuffle_ps(t1, t3, 0xEE), (v) * 16 + 3);                                                    \
        yq += 3 * P4; /* lanes 1-3 held the vector's other 12 channels */                                           \
        if (res) rq += 3 * P4;                                                                                      \
    } while (0)
#define PWZ_EPI(KIND_)                                                                                              \
    do {                                                                                                            \
        const int KIND = (KIND_);                                                                                   \
        float *yq = y;                                                                                              \
        const float *rq = res;                                                                                      \
        PWZ_OUT(0);                                                                                                 \
        if (V > 1) PWZ_OUT(1);                                                                                      \
        if (V > 2) PWZ_OUT(2);                                                                                      \
        if (V > 3) PWZ_OUT(3);                                                                                      \
    } while (0)

__attribute__((target("avx512f,avx2,fma"))) static inline __attribute__((always_inline)) void
pwz_tile(const pw_targs *tg, const float *restrict x, float *restrict y, const float *restrict res, int R,
         const int V, const bool FULL) {
    if (FULL) R = 4;
    const int64_t ldx = tg->ldx, K = tg->K, P = tg->P, P4 = 4 * P, l2 = 2 * ldx, l3 = 3 * ldx;
    const float *wk = tg->wp;
    const __m512 b0 = _mm512_loadu_ps(tg->bias), b1 = V > 1 ? _mm512_loadu_ps(tg->bias + 16) : b0,
                 b2 = V > 2 ? _mm512_loadu_ps(tg->bias + 32) : b0, b3 = V > 3 ? _mm512_loadu_ps(tg->bias + 48) : b0;
    PWZ_ROW(0); PWZ_ROW(1); PWZ_ROW(2); PWZ_ROW(3);
    if (tg->acc_in) {
        const float *ai = tg->acc_in;
        PWZ_ACC(0, PWZ_LD) PWZ_ACC(1, PWZ_LD) PWZ_ACC(2, PWZ_LD) PWZ_ACC(3, PWZ_LD)
    }
    const float *xk = x;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4, xk += 4 * ldx, wk += 4 * V * 16) {
        const float *x0 = xk, *x1 = xk + ldx, *x2 = xk + l2, *x3 = xk + l3;
        __asm__("" : "+r"(x0), "+r"(x1), "+r"(x2), "+r"(x3)); /* as in the AVX2 copy */
        if (tg->pf) {
            _mm_prefetch((const char *)(x0 + PWZ_PF * ldx), _MM_HINT_T0);
            _mm_prefetch((const char *)(x1 + PWZ_PF * ldx), _MM_HINT_T0);
            _mm_prefetch((const char *)(x2 + PWZ_PF * ldx), _MM_HINT_T0);
            _mm_prefetch((const char *)(x3 + PWZ_PF * ldx), _MM_HINT_T0);
        }
        PWZ_STEP(0, x0);
        PWZ_STEP(1, x1);
        PWZ_STEP(2, x2);
        PWZ_STEP(3, x3);
    }
    for (; k < K; k++, xk += ldx, wk += V * 16) PWZ_STEP(0, xk);
    if (tg->acc_out) {
        float *ai = tg->acc_out;
        PWZ_ACC(0, PWZ_SV) PWZ_ACC(1, PWZ_SV) PWZ_ACC(2, PWZ_SV) PWZ_ACC(3, PWZ_SV)
        return;
    }
    const int nch = tg->nch;
    const float al = tg->al, be = tg->be;
    switch (tg->kind) { /* a constant in each epilogue, so ert_av_act's switch and constants fold */
    case ERT_ACT_NONE: PWZ_EPI(ERT_ACT_NONE); break;
    case ERT_ACT_RELU: PWZ_EPI(ERT_ACT_RELU); break;
    case ERT_ACT_CLIP: PWZ_EPI(ERT_ACT_CLIP); break;
    case ERT_ACT_SILU: PWZ_EPI(ERT_ACT_SILU); break;
    case ERT_ACT_HARD_SWISH: PWZ_EPI(ERT_ACT_HARD_SWISH); break;
    case ERT_ACT_GELU: PWZ_EPI(ERT_ACT_GELU); break;
    default: PWZ_EPI(tg->kind); break;
    }
}
#undef PWZ_ROW
#undef PWZ_LD
#undef PWZ_SV
#undef PWZ_ACC
#undef PWZ_FMA
#undef PWZ_STEP
#undef PWZ_OUT
#undef PWZ_OUT1
#undef PWZ_EPI

#define PWZ_COPY(V, FULL, NAME)                                                                                     \
    __attribute__((target("avx512f,avx2,fma"), noinline)) static void NAME(const pw_targs *tg, const float *x,     \
                                                                          float *y, const float *res, int R) {     \
        pwz_tile(tg, x, y, res, R, V, FULL);                                                                        \
    }
PWZ_COPY(1, true, pwz_tile1f)
PWZ_COPY(2, true, pwz_tile2f)
PWZ_COPY(3, true, pwz_tile3f)
PWZ_COPY(4, true, pwz_tile4f)
PWZ_COPY(1, false, pwz_tile1p)
PWZ_COPY(2, false, pwz_tile2p)
PWZ_COPY(3, false, pwz_tile3p)
PWZ_COPY(4, false, pwz_tile4p)
#undef PWZ_COPY

__attribute__((target("avx512f,avx2,fma"))) static inline __attribute__((always_inline)) void
pw_tile_k_z(const pw_targs *tg, const float *x, float *y, const float *res, int R, const int V, const bool FULL) {
    if (V == 4) (FULL ? pwz_tile4f : pwz_tile4p)(tg, x, y, res, R);
    else if (V == 3) (FULL ? pwz_tile3f : pwz_tile3p)(tg, x, y, res, R);
    else if (V == 2) (FULL ? pwz_tile2f : pwz_tile2p)(tg, x, y, res, R);
    else (FULL ? pwz_tile1f : pwz_tile1p)(tg, x, y, res, R);
}
#define PW_KB 128 /* K per block over a task's tiles: 128 x 64 channels, a 32 KiB panel slice in L1 */
#include "pwconv_impl.h"
#undef PW_KB
__attribute__((target("avx512f,avx2,fma"))) static void pw_run_avx512(void *arg, int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; s++) pw_slot_z(arg, s);
}
#endif
#else
#define PW_ON 0
#endif

/* Channels per block of the kernel a->choice picks for a's M output
 * channels, or 0 where the SGEMM runs. AVX-512: the 16-lane copy where M is
 * a multiple of 16 (every block then a run of whole vectors) or where the
 * pixels are few (P <= 16); other M keep the SGEMM's 8x32 kernel: with 16 lanes their last block is a partial one,
 * whose every tile takes the masked store path (MobileNetV3-L, channels
 * 24/40/72/120: 1.5x slower than the SGEMM on an AVX-512 VM, 1 thread). */
static int64_t pw_block_channels(const ert_kargs *a, int64_t *vl) {
    *vl = 0;
#if PW_ON && defined(__x86_64__)
    const ert_cpu_gemm_kernel k = ert_cpu_sgemm_kernel(a->choice);
    const int64_t M = a->n_out > 0 && a->out[0].ndim > 1 ? a->out[0].dims[1] : 0;
    /* a few pixels (a squeeze-excitation block's 1x1 maps) take it at any M: the SGEMM then runs a
     * matrix-vector product on its 8x32 tiles, one column in 32 used (MobileNetV3-L's 672 -> 168:
     * 46 us, 2.5 GMAC/s; 960 -> 240 through this kernel: 19 us) */
    int64_t P = 1;
    for (int i = 2; a->n_out > 0 && i < a->out[0].ndim; i++) P *= a->out[0].dims[i];
    if (k == ERT_CPU_GEMM_AVX512) return M > 0 && (M % 16 == 0 || P <= 16) ? (*vl = 16, 64) : 0;
    if (k == ERT_CPU_GEMM_AVX2) return *vl = 8, 24;
#elif PW_ON
    if (ert_cpu_sgemm_kernel(a->choice) == ERT_CPU_GEMM_NEON) return *vl = 4, 16;
#else
    (void)a;
#endif
    return 0;
}

/* Input channels times taps at most for a conv that is not pointwise: each
 * task builds the im2col rows of its pixels (K of them, chunk wide) in its
 * slot; strided 1x1 shortcuts, patchify stems and downsampling convs
 * (kernel = stride). Wider ones keep the SGEMM, whose B blocks stay 256
 * deep. */
#define PW_GATHER_KMAX 576
/* Output pixels at most of a conv whose windows overlap that the 16-lane (AVX-512) copy still takes
 * through the im2col, at any K: the 7x7 maps of a classifier's last stage (ResNet-18's 3x3 convs of
 * K = 4608 and 2304, 49 pixels). The SGEMM's 32-column panels there hold 49 in 64 and ran at ~35
 * GMAC/s; here the output channels are the vectors (no lane lost) and the deep K runs in PW_KB
 * blocks. One chunk's im2col copy is K x 52 floats (0.9 MiB at K = 4608; cpu_node_workspace). */
#define PW_OVERLAP_PMAX 64

static int64_t pw_pixels(const ert_tview *t) {
    int64_t P = 1;
    for (int i = 2; i < t->ndim; i++) P *= t->dims[i];
    return P;
}

/* 1: a pointwise conv this kernel takes (x read in place), 2: one it takes
 * through a per-task im2col, 0: neither (shape and dtypes; not whether it
 * is packed). */
static int pw_kind_of(const ert_kargs *a, bool sizing) {
    const ert_conv_params *p = &a->params->conv;
    if (a->op != ERT_OP_CONV || a->n_in < 2 || a->n_out < 1 || p->group != 1) return 0;
    if (p->has_scale && (a->n_in < 5 || !a->in[4].data)) return 0;
    if (a->in[0].dtype != ERT_DTYPE_F32 || a->in[1].dtype != ERT_DTYPE_F32) return 0;
    /* the SE scale is an activation: no data yet when the workspace is sized (sizing) */
    if (p->has_in_scale && (a->n_in < 6 || (!sizing && !a->in[5].data))) return 0;
    const ert_tview *X = &a->in[0], *Y = &a->out[0];
    if (X->dims[0] < 1 || X->dims[1] < 1 || Y->dims[1] < 1) return 0;
    bool point = true, disjoint = true;
    int64_t K = X->dims[1];
    for (int i = 0; i < p->nsp; i++) {
        if (p->kernel[i] != 1 || p->stride[i] != 1 || p->pad_begin[i] != 0 || X->dims[2 + i] != Y->dims[2 + i])
            point = false;
        if ((p->kernel[i] - 1) * p->dilation[i] >= p->stride[i]) disjoint = false;
        K *= p->kernel[i];
    }
    if (point) return 1;
    if (p->nsp > 2 || ert_cpu_wino_chosen(a)) return 0;
    /* windows that do not overlap (every input float in at most one im2col
     * row): there the per-task im2col is cheaper than the SGEMM's panels;
     * where they overlap (a 3x3 stride-2 stem) it cost more (callgrind:
     * MobileNetV2 +0.8 M, YOLOv8n +12 M), except on few pixels (PW_OVERLAP_PMAX) */
    if (disjoint && K <= PW_GATHER_KMAX) return 2;
    /* not with a fused SE scale: it is a graph input, so the workspace query (no data yet) does not see
     * this kernel take the conv, and without packed panels a block's panel (K x 64) outgrew the SGEMM's
     * workspace: the NO_PACK session then took the SGEMM, with other bits (test_cpu_fast's SE check, a
     * 3x3 stride-2 conv of 12 pixels, C = 39) */
    int64_t vl;
    return !p->has_in_scale && pw_block_channels(a, &vl) && vl == 16 && pw_pixels(Y) <= PW_OVERLAP_PMAX ? 2 : 0;
}
static int pw_kind(const ert_kargs *a) { return pw_kind_of(a, false); }

static void pw_geom_of(const ert_kargs *a, pw_geom *g) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *X = &a->in[0], *Y = &a->out[0];
    const int o = p->nsp == 2 ? 0 : 1; /* 1-D: the second axis only */
    *g = (pw_geom){.C = X->dims[1], .H = o ? 1 : X->dims[2], .W = X->dims[3 - o], .OW = Y->dims[3 - o],
                   .KH = o ? 1 : p->kernel[0], .KW = p->kernel[1 - o], .sh = o ? 1 : p->stride[0],
                   .sw = p->stride[1 - o], .dh = o ? 1 : p->dilation[0], .dw = p->dilation[1 - o],
                   .ph = o ? 0 : p->pad_begin[0], .pw = p->pad_begin[1 - o]};
}

size_t ert_cpu_pw_packed_bytes(const ert_kargs *a) {
    int64_t vl, cb = pw_block_channels(a, &vl);
    if (!cb || !pw_kind(a)) return 0;
    const int64_t M = a->out[0].dims[1], K = a->in[1].n_elems / M;
    size_t f, bytes;
    /* every block is its channels rounded up to whole vectors (cb is a
     * multiple of vl), so the panels hold M rounded up to vl rows: not to
     * cb (an AVX-512 conv of 16 channels would have reserved 64 rows) */
    if (ert_mul_ovf((size_t)((M + vl - 1) / vl * vl), (size_t)K, &f) || ert_mul_ovf(f, sizeof(float), &bytes) ||
        bytes > SIZE_MAX - PW_HDR)
        return SIZE_MAX;
    return bytes + PW_HDR;
}

/* Block b of the panels: channels c0 = b*cb .. as pw_pack_block lays them
 * out, at c0 * K floats. */
ert_status ert_cpu_pw_pack(const ert_kargs *a) {
    int64_t vl, cb = pw_block_channels(a, &vl);
    size_t need = ert_cpu_pw_packed_bytes(a);
    if (!a->packed || need == 0 || need == SIZE_MAX || a->packed_bytes < need) return ERT_E_INTERNAL;
    const int64_t M = a->out[0].dims[1], K = a->in[1].n_elems / M;
    const float *osc = a->params->conv.has_scale ? a->in[4].data : NULL;
    *(pw_hdr *)a->packed = (pw_hdr){PW_MAGIC, M, K, cb, vl};
    float *d = (float *)((char *)a->packed + PW_HDR);
    for (int64_t c0 = 0; c0 < M; c0 += cb) {
        const int64_t nch = M - c0 < cb ? M - c0 : cb;
        pw_pack_block(a->in[1].data, osc, K, c0, nch, (nch + vl - 1) / vl * vl, d + c0 * K);
    }
    return ERT_OK;
}

/* Scratch beyond prepare's (sized for the SGEMM) that guarantees one
 * worker slot of this kernel: a block of unpacked panels (K x CB, sessions
 * with ERT_SESSION_NO_PACK) and a 4-pixel chunk of the scaled copy or im2col
 * rows. Without it a small conv with a fused squeeze-excitation scale took
 * the SGEMM unpacked and this kernel packed: different roundings for the
 * same session options but NO_PACK (test_cpu_fast's SE check, AVX-512,
 * 16 output channels; and again where the SE scale, having no data when
 * this is asked, hid the kernel: C2 M16 5x3, seed 1796182204243019178).
 * 0 where this kernel does not take the conv. */
/* Where the channel blocks are split over several workers, each task built
 * the im2col rows of its pixels again for its blocks: ResNet-18's 7x7 x 512
 * 3x3 convs at batch 1 (K = 4608, 49 pixels, 0.9 MiB of rows) built them four
 * times on 2 threads and ran 1.35x faster than on 1 (onnxruntime 2.1x).
 * There the rows of every image are built once, in parallel, and shared
 * (the same values, so the same sums): floats of them, at most
 * PW_SHARED_MAX bytes, or 0. */
#define PW_SHARED_MAX (4u << 20)
static int64_t pw_shared_floats(const ert_kargs *a, int kind, int64_t K, int64_t P) {
    const int64_t n_thr = a->n_threads > 0 ? a->n_threads : ert_threadpool_size(a->pool);
    if (kind != 2 || n_thr < 2) return 0;
    const int64_t f = a->in[0].dims[0] * K * P;
    return f > 0 && (uint64_t)f * sizeof(float) <= PW_SHARED_MAX ? f : 0;
}

size_t ert_cpu_pw_workspace(const ert_kargs *a) {
    int64_t vl, cb = pw_block_channels(a, &vl);
    const int kind = cb ? pw_kind_of(a, true) : 0;
    if (!kind) return 0;
    const int64_t M = a->out[0].dims[1], K = a->in[1].n_elems / M, P = pw_pixels(&a->out[0]);
    /* an overlapping im2col (PW_OVERLAP_PMAX) at deep K: one whole chunk of its pixels, so each task
     * streams the filter once (the SGEMM's share held 16 of ResNet-18's 49 at K = 4608) */
    const int64_t px = kind == 2 && K > PW_GATHER_KMAX ? (P + 3) / 4 * 4 : 4;
    return (size_t)(K * (cb + px) + pw_shared_floats(a, kind, K, P)) * sizeof(float);
}

/* The packed panels if a->packed holds them for the kernel this call picks. */
static const float *pw_packed(const ert_kargs *a, int64_t M, int64_t K, int64_t cb, int64_t vl) {
    const pw_hdr *h = a->packed;
    if (!h || a->packed_bytes < PW_HDR || h->magic != PW_MAGIC || h->M != M || h->K != K || h->cb != cb ||
        h->vl != vl)
        return NULL;
    return (const float *)((const char *)h + PW_HDR);
}

/* How a conv's work is cut into tasks: n_pc pixel chunks (whole 4-pixel
 * tiles, as even as tiles allow) times n_cg groups of consecutive channel
 * blocks, per image. One thread: the fewest chunks of at most `most` pixels,
 * one group. Several: the (n_pc, n_cg) with the least estimated makespan
 * of the tasks claimed in turn by n_thr threads, in tile x vector units
 * (one 4-pixel x VL-channel tile over all of K): Graham's bound for list
 * scheduling, total / n_thr + (1 - 1 / n_thr) * largest task, where a task
 * of blocks of V vectors over T tiles costs sum V * (T + 1) (the + 1: each
 * block's panel streamed in again per task) + 2, and a task's scaled copy
 * or im2col rows (SE scale, gm) T / 4 more per block group. Splitting the
 * channel blocks alone, as before, left 7x7 maps unbalanced: 320 channels
 * are 5 blocks of 64 over 4 tasks (2, 1, 1, 1), at most 1.67x on 2
 * threads, and 960 -> 160 had 3 tasks for any thread count. The split
 * changes no sum: every output's products are added in the same order. */
static void pw_split(pw_job *j, int64_t most, int64_t n_thr) {
    const int64_t nt = (j->P + 3) / 4, n_pc0 = (j->P + most - 1) / most, vl = j->vl;
    const int64_t vpb = j->cb / vl, vlast = (j->M - (j->n_cb - 1) * j->cb + vl - 1) / vl;
    const int64_t nv = (j->n_cb - 1) * vpb + vlast;
    int64_t best_pc = n_pc0, best_cg = 1;
    if (n_thr > 1) {
        const double copy = (j->isc || j->gm) && !j->xsh ? 0.25 : 0.0;
        double best = 1e300;
        for (int64_t n_cg = 1; n_cg <= j->n_cb && n_cg <= 2 * n_thr; n_cg++) {
            /* the group of the most vectors: groups are blocks [cg * n_cb / n_cg, (cg + 1) * n_cb / n_cg) */
            int64_t gv = 0;
            for (int64_t cg = 0; cg < n_cg; cg++) {
                const int64_t b0 = cg * j->n_cb / n_cg, b1 = (cg + 1) * j->n_cb / n_cg;
                const int64_t v = b1 == j->n_cb ? (b1 - 1 - b0) * vpb + vlast : (b1 - b0) * vpb;
                if (v > gv) gv = v;
            }
            for (int64_t n_pc = n_pc0; n_pc <= nt && (n_pc == n_pc0 || j->N * n_pc * n_cg <= 4 * n_thr); n_pc++) {
                const double tmax = (double)((nt + n_pc - 1) / n_pc);
                const double total = (double)j->N * ((double)nv * (double)(nt + n_pc) + 2.0 * (double)(n_pc * n_cg) +
                                                     copy * (double)(nt * n_cg));
                const double big = (double)gv * (tmax + 1.0) + 2.0 + copy * tmax;
                const double est = total / (double)n_thr + (1.0 - 1.0 / (double)n_thr) * big;
                if (est < best * 0.999) best = est, best_pc = n_pc, best_cg = n_cg;
            }
        }
    }
    j->n_tiles = nt;
    j->n_pc = best_pc;
    j->n_cg = best_cg;
    j->chunk = (nt + best_pc - 1) / best_pc * 4;
}

ert_status ert_cpu_pw_conv(const ert_kargs *a, bool *done) {
    *done = false;
#if PW_ON
    int64_t vl, cb = pw_block_channels(a, &vl);
    const int kind = cb ? pw_kind(a) : 0;
    if (!kind) return ERT_OK;
    const ert_tview *X = &a->in[0];
    const ert_conv_params *p = &a->params->conv;
    const int64_t N = X->dims[0], M = a->out[0].dims[1], K = a->in[1].n_elems / M, P = pw_pixels(&a->out[0]);
    pw_geom gm;
    if (kind == 2) pw_geom_of(a, &gm);
    pw_job j = {
        .x = X->data, .gm = kind == 2 ? &gm : NULL, .wp = pw_packed(a, M, K, cb, vl), .w = a->in[1].data,
        .osc = p->has_scale ? a->in[4].data : NULL,
        .b = a->n_in > 2 ? a->in[2].data : NULL, .res = a->n_in > 3 ? a->in[3].data : NULL,
        .isc = p->has_in_scale ? a->in[5].data : NULL, .y = a->out[0].data,
        .N = N, .K = K, .M = M, .P = P, .cb = cb, .vl = vl, .n_cb = (M + cb - 1) / cb,
        .act = p->act.kind != ERT_ACT_NONE ? &p->act : NULL,
    };
    const int64_t n_thr = ert_threadpool_size(a->pool);
    int64_t ws_floats = (int64_t)(a->workspace_bytes / sizeof(float));
    j.pf = n_thr > 1;
    const int64_t sh = kind == 2 && n_thr > 1 ? pw_shared_floats(a, kind, K, P) : 0;
    if (sh && ws_floats - sh >= (j.wp ? 0 : K * cb)) { /* the shared rows at the workspace's end */
        float *xsh = (float *)a->workspace + (ws_floats - sh);
        ws_floats -= sh;
        const int64_t want = (4 * n_thr + N - 1) / N;
        pw_sh_job sj = {&gm, X->data, j.isc, xsh, P, want < gm.C ? want : gm.C};
        ert_parallel_for(a->pool, N * sj.n_ct, 1, pw_sh_run, &sj);
        j.xsh = xsh;
    }
    const bool copy = (j.isc || j.gm) && !j.xsh; /* each task its own rows */
    /* pixel chunks of at most PW_CHUNK (multiples of 4), fewer where a
     * slot's share of the workspace (prepare's, sized for the SGEMM) must
     * hold a chunk's scaled copy or im2col rows */
    int64_t most = PW_CHUNK, thr = n_thr;
    if (copy) {
        /* prepare sized it per thread for the SGEMM; where a thread's share is too small, fewer slots
         * (each output's sum is the same on any slot), so the numbers never depend on the thread count */
        while (thr > 1 && (ws_floats / thr - (j.wp ? 0 : K * cb)) / K < 4) thr--;
        const int64_t per = ws_floats / thr - (j.wp ? 0 : K * cb);
        if (per / K < most) most = per / K / 4 * 4;
        if (most < 4) return ERT_OK; /* the SGEMM then: only where cpu_node_workspace's extra is missing */
    }
    pw_split(&j, most, thr);
    j.n_tasks = N * j.n_pc * j.n_cg;
    int64_t slots = thr < j.n_tasks ? thr : j.n_tasks;
    j.slot_floats = (j.wp ? 0 : K * cb) + (copy ? K * j.chunk : 0);
    if (j.slot_floats) {
        const int64_t fit = ws_floats / j.slot_floats;
        if (fit < 1) return ERT_OK;
        if (slots > fit) slots = fit;
        j.ws = a->workspace;
    }
    atomic_init(&j.next, 0);
#if defined(__x86_64__)
    ert_parallel_for(a->pool, slots, 1, vl == 16 ? pw_run_avx512 : pw_run_avx2, &j);
#else
    ert_parallel_for(a->pool, slots, 1, pw_run_neon, &j);
#endif
    *done = true;
#else
    (void)a;
#endif
    return ERT_OK;
}
