/* SGEMM (shared by Conv/ConvTranspose/MatMul/Gemm) and the MatMul/Gemm kernels.
 *
 * SGEMM algorithm (Goto/BLIS style, see cpu_gemm.h for the contract):
 *   1. Split C into tasks of MC rows x a chunk of NC-column blocks. Each
 *      worker slot (one scratch buffer each) claims tasks from an atomic
 *      counter. For each K block of KC:
 *        pack the MC x KC block of alpha*A into MR-row panels (rows past M
 *        are zero), once per task;
 *        for each NC block of the chunk: pack the KC x NC block of B into
 *        NR-column panels (for a conv input this is where im2col happens,
 *        straight from the image);
 *        for each NR panel of B (kept in L1), for each MR panel of A (the
 *        MC x KC block stays in L2): the micro-kernel computes an MR x NR
 *        tile in registers over KC, then it is stored or added to C.
 *   2. After the last K block, the tile gets bias, residual and activation
 *      while it is still in cache.
 * The micro-kernel (mr x nr) is picked at run time (see micro-kernels): the
 * default build targets baseline x86-64, so AVX2 and AVX-512 are only used
 * where the CPU has them. The panel widths follow the chosen kernel.
 * Workspace: per worker slot one B block and one A block (<= 544 KiB). */
#include "act_vec.h"
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <stdatomic.h>
#include <string.h>

#define MR_MAX 8
#define MR_LCM 24 /* multiple of every kernel's mr: A blocks are sized with it */
#define NR_MAX 32
/* Row blocks: M is split into equal blocks of at most MC rows (rounded up
 * to MR_LCM), so a 256- or 512-row conv packs its im2col B once or twice
 * rather than 2 or 4 times (M = 256 with MC = 144 was 144 + 112); the A
 * block (<= 288 x 256 floats, 288 KiB) still sits in a 2 MiB L2. */
#define MC 288 /* multiple of MR_LCM */
#define NC 256 /* multiple of every kernel's nr (16, 32) */
#define KC 256 /* 8x32 kernel: a 32 KiB B panel stays in a 48 KiB L1 */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ------------------------------------------------------------ micro-kernels */

/* A micro-kernel computes out (mr x nr, row stride nr) = sum_k a[k*mr+i] *
 * b[k*nr+j] over packed panels. On aarch64 a NEON 6x16 kernel with FMLA by
 * lane (gemm_neon.c) is picked when HWCAP has ASIMD. On x86 three exist,
 * picked at run time:
 *   portable 6x16 (GNU vector types: AVX/NEON/SSE registers, whatever the
 *   build targets), the same body compiled for AVX2+FMA, and an 8x32 AVX-512
 *   one (16 zmm accumulators: enough independent FMAs to cover the FMA
 *   latency on two ports; 8 broadcasts and 2 loads feed 16 FMAs per k).
 *   mr = 8 rather than 12 because conv channel counts are multiples of 8 and
 *   64-row layers (a third of ResNet-18's FLOPs) would waste 1/8 at mr = 12:
 *   measured 55 -> 50.5 ms on ResNet-18. */
/* out rows are ldo apart; add: out += result, else out = result. Full
 * tiles go straight to C this way (no round trip through a scratch tile).
 * e (or NULL): the store epilogue, applied in registers (cpu_gemm.h), by the
 * kernels whose desc says epi; the driver runs it as a pass over the stored
 * tile for the others. */
typedef void (*ukr_fn)(int64_t kc, const float *a, const float *b, float *out, int64_t ldo, bool add,
                       const ert_ukr_epi *e);

typedef struct ukr_desc {
    ukr_fn fn;
    int64_t mr, nr;
    ert_cpu_gemm_kernel kind;
    bool epi; /* applies ert_ukr_epi itself */
    /* or NULL: the kernel over the first nr/2 columns of the B panels only
     * (panel stride still nr), out = result, no epilogue: the driver's last
     * panel when it has <= nr/2 real columns (N = 49: 1 of 16) */
    ukr_fn half;
    /* or NULL: rows[r] (r = 1 .. mr-1) is the kernel over the first r rows
     * of the A panels, full width, with the epilogue: the last rows of M */
    ukr_fn rows[MR_MAX];
} ukr_desc;

#if defined(__GNUC__)
typedef float ert_v8f __attribute__((vector_size(32)));

/* the epilogue on 8 lanes, in ERT_AV_N-lane pieces (one on x86) */
static inline __attribute__((always_inline)) void ukr_epi8(ert_v8f *v, const ert_ukr_epi *e, int64_t i, int64_t j0,
                                                           int kind) {
    for (int h = 0; h < 8 / ERT_AV_N; h++) {
        ert_av8 p;
        memcpy(&p, (float *)v + h * ERT_AV_N, sizeof p);
        ert_av_ukr_epi_k(&p, e, i, j0 + h * ERT_AV_N, kind);
        memcpy((float *)v + h * ERT_AV_N, &p, sizeof p);
    }
}

#else
static void ukr_body(int64_t kc, const float *restrict a, const float *restrict b, float *restrict out,
                     int64_t ldo, bool add, const ert_ukr_epi *e) {
    (void)e; /* not this kernel's (desc epi false) */
    float acc[6][16] = {{0}};
    for (int64_t k = 0; k < kc; k++)
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 16; j++) acc[i][j] += a[k * 6 + i] * b[k * 16 + j];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 16; j++) out[i * ldo + j] = add ? out[i * ldo + j] + acc[i][j] : acc[i][j];
}
#endif

#if defined(__GNUC__)
/* The portable kernel uses 4-float vectors: eight-float ones are wider than
 * the baseline target's registers (NEON, SSE2), and gcc 12 then kept all 12
 * accumulators on the stack (ResNet-18 took 1.8 s on x86-64 without AVX2,
 * and the aarch64 build showed the same spills). 24 accumulators + 4 B
 * vectors fit NEON's 32 registers; SSE2 (16) spills a few. */
typedef float ert_v4f __attribute__((vector_size(16)));

#define P_ROW(i) ert_v4f c##i##0 = {0}, c##i##1 = {0}, c##i##2 = {0}, c##i##3 = {0}
#define P_FMA(i)                                                                                                    \
    do {                                                                                                            \
        const float av = a[i];                                                                                      \
        c##i##0 += av * b0, c##i##1 += av * b1, c##i##2 += av * b2, c##i##3 += av * b3;                             \
    } while (0)
#define P_ST(i)                                                                                                     \
    do {                                                                                                            \
        ert_v4f r_[4] = {c##i##0, c##i##1, c##i##2, c##i##3};                                                       \
        const float *t_ = (const float *)r_;                                                                        \
        float *o_ = out + (i) * ldo;                                                                                \
        if (add)                                                                                                    \
            for (int j_ = 0; j_ < 16; j_++) o_[j_] += t_[j_];                                                       \
        else                                                                                                        \
            memcpy(o_, t_, 16 * sizeof(float));                                                                     \
    } while (0)

static void ukr_generic(int64_t kc, const float *restrict a, const float *restrict b, float *restrict out,
                        int64_t ldo, bool add, const ert_ukr_epi *e) {
    (void)e; /* desc epi false: the driver's pass applies it */
    P_ROW(0); P_ROW(1); P_ROW(2); P_ROW(3); P_ROW(4); P_ROW(5);
    for (int64_t k = 0; k < kc; k++, a += 6, b += 16) {
        ert_v4f b0, b1, b2, b3;
        memcpy(&b0, b, sizeof b0);
        memcpy(&b1, b + 4, sizeof b1);
        memcpy(&b2, b + 8, sizeof b2);
        memcpy(&b3, b + 12, sizeof b3);
        P_FMA(0); P_FMA(1); P_FMA(2); P_FMA(3); P_FMA(4); P_FMA(5);
    }
    P_ST(0); P_ST(1); P_ST(2); P_ST(3); P_ST(4); P_ST(5);
}
#else
static void ukr_generic(int64_t kc, const float *a, const float *b, float *out, int64_t ldo, bool add,
                        const ert_ukr_epi *e) {
    ukr_body(kc, a, b, out, ldo, add, e);
}
#endif

static const ukr_desc ukr_portable_desc = {ukr_generic, 6, 16, ERT_CPU_GEMM_PORTABLE, false, NULL, {NULL}};

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The AVX2 6x16 kernel: 12 ymm accumulators, and for the epilogues conv
 * layers have (bias, residual, ReLU, Clip) a store written out per row in
 * intrinsics. Through the generic epilogue (ukr_epi8: the tile spilled to
 * the stack, one switch on the kind per 8 lanes) a call with a ReLU6 epilogue
 * cost about 400 instructions besides its k loop: a quarter of MobileNetV2's
 * micro-kernel instructions, where K is 16..960 (callgrind). ReLU and Clip
 * are max/min with the operands ordered so that they equal act_vec.h's
 * `x < lo ? lo : x` exactly, NaN and -0 included (MAXPS returns its second
 * operand unless the first is greater). */
#define Y_ROW(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps()
/* rows at or past R (the row count, a constant in each copy) are dropped at compile time */
#define Y_FMA(i)                                                                                                    \
    if ((i) < R) {                                                                                                  \
        const __m256 av = _mm256_broadcast_ss(a + (i));                                                             \
        c##i##0 = _mm256_fmadd_ps(av, b0, c##i##0);                                                                 \
        c##i##1 = _mm256_fmadd_ps(av, b1, c##i##1);                                                                 \
    }
#define Y_ST(i, ADD, FAST, BR, RS, BC, KIND)                                                                        \
    if ((i) < R) {                                                                                                  \
        float *o = out + (i) * ldo;                                                                                 \
        if (ADD) {                                                                                                  \
            c##i##0 = _mm256_add_ps(c##i##0, _mm256_loadu_ps(o));                                                   \
            c##i##1 = _mm256_add_ps(c##i##1, _mm256_loadu_ps(o + 8));                                               \
        }                                                                                                           \
        if (FAST) {                                                                                                 \
            if (BR) {                                                                                               \
                const __m256 bv = _mm256_broadcast_ss(e->bias_row + (i));                                           \
                c##i##0 = _mm256_add_ps(c##i##0, bv);                                                               \
                c##i##1 = _mm256_add_ps(c##i##1, bv);                                                               \
            }                                                                                                       \
            if (RS) {                                                                                               \
                c##i##0 = _mm256_add_ps(c##i##0, _mm256_loadu_ps(e->res + (i) * e->ldr));                           \
                c##i##1 = _mm256_add_ps(c##i##1, _mm256_loadu_ps(e->res + (i) * e->ldr + 8));                       \
            }                                                                                                       \
            if (BC) {                                                                                               \
                c##i##0 = _mm256_add_ps(c##i##0, _mm256_loadu_ps(e->bias_col));                                     \
                c##i##1 = _mm256_add_ps(c##i##1, _mm256_loadu_ps(e->bias_col + 8));                                 \
            }                                                                                                       \
            if ((KIND) != ERT_ACT_NONE) {                                                                           \
                c##i##0 = _mm256_max_ps(lo, c##i##0);                                                               \
                c##i##1 = _mm256_max_ps(lo, c##i##1);                                                               \
            }                                                                                                       \
            if ((KIND) == ERT_ACT_CLIP) {                                                                           \
                c##i##0 = _mm256_min_ps(hi, c##i##0);                                                               \
                c##i##1 = _mm256_min_ps(hi, c##i##1);                                                               \
            }                                                                                                       \
        } else if (e) {                                                                                             \
            ert_v8f v0 = (ert_v8f)c##i##0, v1 = (ert_v8f)c##i##1;                                                   \
            ukr_epi8(&v0, e, i, 0, KIND);                                                                           \
            ukr_epi8(&v1, e, i, 8, KIND);                                                                           \
            c##i##0 = (__m256)v0, c##i##1 = (__m256)v1;                                                             \
        }                                                                                                           \
        _mm256_storeu_ps(o, c##i##0);                                                                               \
        _mm256_storeu_ps(o + 8, c##i##1);                                                                           \
    }

/* the 6 rows, with the flags constant where the caller specialises */
#define Y_ST_ALL(ADD, FAST, BR, RS, BC, KIND)                                                                       \
    do {                                                                                                            \
        Y_ST(0, ADD, FAST, BR, RS, BC, KIND);                                                                       \
        Y_ST(1, ADD, FAST, BR, RS, BC, KIND);                                                                       \
        Y_ST(2, ADD, FAST, BR, RS, BC, KIND);                                                                       \
        Y_ST(3, ADD, FAST, BR, RS, BC, KIND);                                                                       \
        Y_ST(4, ADD, FAST, BR, RS, BC, KIND);                                                                       \
        Y_ST(5, ADD, FAST, BR, RS, BC, KIND);                                                                       \
    } while (0)

/* R (1..6) rows of the 6-row A panels: 6 for full tiles, fewer for the
 * last rows of M (M = 16: RegNetY's group width, 6 + 6 + 4), which went
 * through the full kernel into a scratch tile, then a copy and a separate
 * epilogue pass */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
ukr_avx2_body(int64_t kc, const float *restrict a, const float *restrict b, float *restrict out, int64_t ldo,
              bool add, const ert_ukr_epi *e, const int R) {
    Y_ROW(0); Y_ROW(1); Y_ROW(2); Y_ROW(3); Y_ROW(4); Y_ROW(5);
    /* 4 k steps per loop trip: the 4 pointer/counter instructions a trip
     * costs were a sixth of the loop's 24 (callgrind, DeiT-Tiny) */
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++, a += 6, b += 16) {
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        Y_FMA(0); Y_FMA(1); Y_FMA(2); Y_FMA(3); Y_FMA(4); Y_FMA(5);
    }
    const int kind = e ? e->kind : ERT_ACT_NONE;
    const bool fast = e && (kind == ERT_ACT_NONE || kind == ERT_ACT_RELU || kind == ERT_ACT_CLIP);
    /* Clip's bounds as act_vec.h forms them (al + 0: a -0 bound becomes +0) */
    const __m256 lo = kind == ERT_ACT_CLIP ? _mm256_set1_ps(e->alpha + 0.0f) : _mm256_setzero_ps();
    const __m256 hi = _mm256_set1_ps(kind == ERT_ACT_CLIP ? e->beta + 0.0f : 0.0f);
    if (!e) {
        if (add) Y_ST_ALL(true, false, false, false, false, ERT_ACT_NONE);
        else Y_ST_ALL(false, false, false, false, false, ERT_ACT_NONE);
        return;
    }
    const bool br = e->bias_row, rs = e->res, bc = e->bias_col;
    /* the conv layers' epilogues with every test folded away (~70 of a
     * tile's ~105 store instructions were the per-row flag tests) */
    if (fast && !add && br && !bc) {
        if (!rs && kind == ERT_ACT_RELU) {
            Y_ST_ALL(false, true, true, false, false, ERT_ACT_RELU);
            return;
        }
        if (!rs && kind == ERT_ACT_CLIP) {
            Y_ST_ALL(false, true, true, false, false, ERT_ACT_CLIP);
            return;
        }
        if (kind == ERT_ACT_NONE) {
            if (rs) Y_ST_ALL(false, true, true, true, false, ERT_ACT_NONE);
            else Y_ST_ALL(false, true, true, false, false, ERT_ACT_NONE);
            return;
        }
    }
    /* the transcendental kinds with the kind a constant, so ert_av_act's
     * switch folds (per 8 lanes it was a switch and every polynomial
     * constant broadcast again: EfficientNet's SiLU 1x1 convs, callgrind) */
    switch (kind) {
    case ERT_ACT_SILU: Y_ST_ALL(add, false, br, rs, bc, ERT_ACT_SILU); return;
    case ERT_ACT_SIGMOID: Y_ST_ALL(add, false, br, rs, bc, ERT_ACT_SIGMOID); return;
    case ERT_ACT_GELU: Y_ST_ALL(add, false, br, rs, bc, ERT_ACT_GELU); return;
    case ERT_ACT_HARD_SWISH: Y_ST_ALL(add, false, br, rs, bc, ERT_ACT_HARD_SWISH); return;
    default: Y_ST_ALL(add, fast, br, rs, bc, kind); return;
    }
}

/* ISA's kernel of R rows: its body with R a constant */
#define UKR_ROWS(ISA, TARGET, R)                                                                                    \
    __attribute__((target(TARGET))) static void ukr_##ISA##_r##R(int64_t kc, const float *restrict a,             \
                                                                 const float *restrict b, float *restrict out,     \
                                                                 int64_t ldo, bool add, const ert_ukr_epi *e) {    \
        ukr_##ISA##_body(kc, a, b, out, ldo, add, e, R);                                                            \
    }
UKR_ROWS(avx2, "avx2,fma", 1)
UKR_ROWS(avx2, "avx2,fma", 2)
UKR_ROWS(avx2, "avx2,fma", 3)
UKR_ROWS(avx2, "avx2,fma", 4)
UKR_ROWS(avx2, "avx2,fma", 5)
UKR_ROWS(avx2, "avx2,fma", 6)
#undef Y_ROW
#undef Y_FMA
#undef Y_ST
#undef Y_ST_ALL

#define Z_ROW(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps()
/* rows at or past R (a constant in each copy) are dropped at compile time */
#define Z_FMA(i)                                                                                                    \
    if ((i) < R) {                                                                                                  \
        __m512 av = _mm512_set1_ps(a[i]);                                                                           \
        c##i##0 = _mm512_fmadd_ps(av, b0, c##i##0);                                                                 \
        c##i##1 = _mm512_fmadd_ps(av, b1, c##i##1);                                                                 \
    }
/* row i's store: + C (ADD), + bias_row, + residual, + bias_col, activation,
 * in that order (cpu_gemm.h's ert_ukr_epi); the flags constant where the
 * caller specialises */
#define Z_ST(i, ADD, BR, RS, BC, KIND)                                                                              \
    if ((i) < R) {                                                                                                  \
        float *o = out + (i) * ldo;                                                                                 \
        if (ADD) {                                                                                                  \
            c##i##0 = _mm512_add_ps(c##i##0, _mm512_loadu_ps(o));                                                   \
            c##i##1 = _mm512_add_ps(c##i##1, _mm512_loadu_ps(o + 16));                                              \
        }                                                                                                           \
        if (BR) {                                                                                                   \
            const __m512 bv = _mm512_set1_ps(e->bias_row[i]);                                                       \
            c##i##0 = _mm512_add_ps(c##i##0, bv);                                                                   \
            c##i##1 = _mm512_add_ps(c##i##1, bv);                                                                   \
        }                                                                                                           \
        if (RS) {                                                                                                   \
            c##i##0 = _mm512_add_ps(c##i##0, _mm512_loadu_ps(e->res + (i) * e->ldr));                               \
            c##i##1 = _mm512_add_ps(c##i##1, _mm512_loadu_ps(e->res + (i) * e->ldr + 16));                          \
        }                                                                                                           \
        if (BC) {                                                                                                   \
            c##i##0 = _mm512_add_ps(c##i##0, _mm512_loadu_ps(e->bias_col));                                         \
            c##i##1 = _mm512_add_ps(c##i##1, _mm512_loadu_ps(e->bias_col + 16));                                    \
        }                                                                                                           \
        c##i##0 = ert_av_act_z(c##i##0, (KIND), al, be);                                                                   \
        c##i##1 = ert_av_act_z(c##i##1, (KIND), al, be);                                                                   \
        _mm512_storeu_ps(o, c##i##0);                                                                               \
        _mm512_storeu_ps(o + 16, c##i##1);                                                                          \
    }
#define Z_ST_ALL(ADD, BR, RS, BC, KIND)                                                                             \
    do {                                                                                                            \
        Z_ST(0, ADD, BR, RS, BC, KIND);                                                                             \
        Z_ST(1, ADD, BR, RS, BC, KIND);                                                                             \
        Z_ST(2, ADD, BR, RS, BC, KIND);                                                                             \
        Z_ST(3, ADD, BR, RS, BC, KIND);                                                                             \
        Z_ST(4, ADD, BR, RS, BC, KIND);                                                                             \
        Z_ST(5, ADD, BR, RS, BC, KIND);                                                                             \
        Z_ST(6, ADD, BR, RS, BC, KIND);                                                                             \
        Z_ST(7, ADD, BR, RS, BC, KIND);                                                                             \
    } while (0)

/* The 8x32 tile. Its store was written for any epilogue, with the flags
 * and the activation kind tested per row and per 8 lanes: on an AVX-512
 * host (perf, 1 thread, ConvNeXt-atto) half of this function's time was
 * outside the k loop, in that store (K = 40 and 160 MLP GEMMs, GELU). As
 * the AVX2 kernel does, the conv epilogues get the flags folded and the
 * transcendental kinds a constant kind; the results are the same
 * operations in the same order. */
/* R (1..8) rows of the 8-row A panels: 8 for full tiles, fewer for the last
 * rows of M. A Gemm of one row (a classifier's last layer at batch 1: 1280
 * -> 1000) ran the full kernel, 8 rows computed for 1, into a scratch tile,
 * then a copy and an epilogue pass: 0.41 ms where onnxruntime takes 0.22 */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
ukr_avx512_body(int64_t kc, const float *restrict a, const float *restrict b, float *restrict out, int64_t ldo,
                bool add, const ert_ukr_epi *e, const int R) {
    Z_ROW(0); Z_ROW(1); Z_ROW(2); Z_ROW(3); Z_ROW(4); Z_ROW(5); Z_ROW(6); Z_ROW(7);
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++, a += 8, b += 32) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        Z_FMA(0); Z_FMA(1); Z_FMA(2); Z_FMA(3); Z_FMA(4); Z_FMA(5); Z_FMA(6); Z_FMA(7);
    }
    if (!e) {
        const float al = 0.0f, be = 0.0f;
        if (add) Z_ST_ALL(true, false, false, false, ERT_ACT_NONE);
        else Z_ST_ALL(false, false, false, false, ERT_ACT_NONE);
        return;
    }
    const int kind = e->kind;
    const float al = e->alpha, be = e->beta;
    const bool br = e->bias_row, rs = e->res, bc = e->bias_col;
    if (!add && br && !bc) { /* a conv layer's epilogue, every test folded away */
        switch (kind) {
        case ERT_ACT_NONE:
            if (rs) Z_ST_ALL(false, true, true, false, ERT_ACT_NONE);
            else Z_ST_ALL(false, true, false, false, ERT_ACT_NONE);
            return;
        case ERT_ACT_RELU:
            if (rs) Z_ST_ALL(false, true, true, false, ERT_ACT_RELU);
            else Z_ST_ALL(false, true, false, false, ERT_ACT_RELU);
            return;
        case ERT_ACT_CLIP: Z_ST_ALL(false, true, rs, false, ERT_ACT_CLIP); return;
        case ERT_ACT_SILU: Z_ST_ALL(false, true, rs, false, ERT_ACT_SILU); return;
        case ERT_ACT_HARD_SWISH: Z_ST_ALL(false, true, rs, false, ERT_ACT_HARD_SWISH); return;
        default: break;
        }
    }
    switch (kind) {
    case ERT_ACT_NONE: Z_ST_ALL(add, br, rs, bc, ERT_ACT_NONE); return;
    case ERT_ACT_SILU: Z_ST_ALL(add, br, rs, bc, ERT_ACT_SILU); return;
    case ERT_ACT_SIGMOID: Z_ST_ALL(add, br, rs, bc, ERT_ACT_SIGMOID); return;
    case ERT_ACT_GELU: Z_ST_ALL(add, br, rs, bc, ERT_ACT_GELU); return;
    case ERT_ACT_HARD_SWISH: Z_ST_ALL(add, br, rs, bc, ERT_ACT_HARD_SWISH); return;
    default: Z_ST_ALL(add, br, rs, bc, kind); return;
    }
}
UKR_ROWS(avx512, "avx512f", 1)
UKR_ROWS(avx512, "avx512f", 2)
UKR_ROWS(avx512, "avx512f", 3)
UKR_ROWS(avx512, "avx512f", 4)
UKR_ROWS(avx512, "avx512f", 5)
UKR_ROWS(avx512, "avx512f", 6)
UKR_ROWS(avx512, "avx512f", 7)
UKR_ROWS(avx512, "avx512f", 8)
#undef UKR_ROWS
#undef Z_ROW
#undef Z_FMA
#undef Z_ST
#undef Z_ST_ALL

/* 6x8 over 16-wide panels: one B load and 6 FMAs per k instead of 2 and 12,
 * for the last panel of N = 49 (7x7 maps: a third of MobileNetV2's 1x1 conv
 * MACs) and N = 196 */
__attribute__((target("avx2,fma"))) static void ukr_avx2_half(int64_t kc, const float *restrict a,
                                                              const float *restrict b, float *restrict out,
                                                              int64_t ldo, bool add, const ert_ukr_epi *e) {
    (void)add, (void)e; /* always a fresh tile into the driver's scratch */
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++, a += 6, b += 16) {
        const __m256 b0 = _mm256_loadu_ps(b);
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), b0, c0);
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, c1);
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, c2);
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, c3);
        c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, c4);
        c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, c5);
    }
    _mm256_storeu_ps(out, c0);
    _mm256_storeu_ps(out + ldo, c1);
    _mm256_storeu_ps(out + 2 * ldo, c2);
    _mm256_storeu_ps(out + 3 * ldo, c3);
    _mm256_storeu_ps(out + 4 * ldo, c4);
    _mm256_storeu_ps(out + 5 * ldo, c5);
}

static const ukr_desc ukr_avx2_desc = {ukr_avx2_r6, 6, 16, ERT_CPU_GEMM_AVX2, true, ukr_avx2_half,
                                       {NULL, ukr_avx2_r1, ukr_avx2_r2, ukr_avx2_r3, ukr_avx2_r4, ukr_avx2_r5}};
static const ukr_desc ukr_avx512_desc = {ukr_avx512_r8, 8, 32, ERT_CPU_GEMM_AVX512, true, NULL,
                                         {NULL, ukr_avx512_r1, ukr_avx512_r2, ukr_avx512_r3, ukr_avx512_r4,
                                          ukr_avx512_r5, ukr_avx512_r6, ukr_avx512_r7}};

static const ukr_desc *pick_ukr(const ert_kernel_choice *kc) {
    int cap = ert_kernel_choice_of(kc).gemm_cap;
    if (cap >= ERT_CPU_GEMM_AVX512 && __builtin_cpu_supports("avx512f")) return &ukr_avx512_desc;
    if (cap >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return &ukr_avx2_desc;
    return &ukr_portable_desc;
}
#elif defined(__aarch64__) && defined(__GNUC__) && defined(__linux__)
#include <sys/auxv.h>
#include <asm/hwcap.h>

/* gemm_neon.c */
void ert_cpu_ukr_neon_6x16(int64_t kc, const float *a, const float *b, float *out, int64_t ldo, bool add,
                           const ert_ukr_epi *e);
static const ukr_desc ukr_neon_desc = {ert_cpu_ukr_neon_6x16, 6, 16, ERT_CPU_GEMM_NEON, true, NULL, {NULL}};

/* ASIMD is part of the aarch64 baseline, but a kernel may run without it
 * (some embedded Linux configs): ask the kernel's HWCAP, never the build. */
static const ukr_desc *pick_ukr(const ert_kernel_choice *kc) {
    int cap = ert_kernel_choice_of(kc).gemm_cap;
    if (cap >= ERT_CPU_GEMM_NEON && (getauxval(AT_HWCAP) & HWCAP_ASIMD)) return &ukr_neon_desc;
    return &ukr_portable_desc;
}
#else
static const ukr_desc *pick_ukr(const ert_kernel_choice *kc) {
    (void)kc;
    return &ukr_portable_desc;
}
#endif

ert_cpu_gemm_kernel ert_cpu_kernel_cap(const ert_kernel_choice *kc) {
    int cap = ert_kernel_choice_of(kc).gemm_cap;
    return cap >= ERT_CPU_GEMM_FASTEST ? ERT_CPU_GEMM_FASTEST : cap < 0 ? ERT_CPU_GEMM_PORTABLE : (ert_cpu_gemm_kernel)cap;
}

ert_cpu_gemm_kernel ert_cpu_sgemm_kernel(const ert_kernel_choice *kc) { return pick_ukr(kc)->kind; }

/* ------------------------------------------------------------ packing */

/* Row-major A (weights): mr row streams, contiguous writes; mr is a
 * constant at each call site so the inner loop unrolls. */
static inline __attribute__((always_inline)) void pack_a_rows(const float *src, int64_t a_rs, float alpha,
                                                              int64_t kc, float *restrict d, const int64_t mr) {
    for (int64_t kk = 0; kk < kc; kk++, d += mr)
        for (int64_t r = 0; r < mr; r++) d[r] = alpha * src[r * a_rs + kk];
}

/* The same with a per-row scale (rare: folded BatchNorm) */
static void pack_a_rows_scaled(const float *src, int64_t a_rs, int64_t a_cs, float alpha, const float *rs, int64_t h,
                               int64_t kc, float *restrict d, int64_t mr) {
    for (int64_t r = 0; r < mr; r++) {
        float s = r < h ? alpha * rs[r] : 0.0f;
        const float *sr = src + r * a_rs;
        for (int64_t kk = 0; kk < kc; kk++) d[kk * mr + r] = r < h ? s * sr[kk * a_cs] : 0.0f;
    }
}

/* A block (rows [i0,i0+mc), cols [k0,k0+kc)) times alpha into mr-row panels:
 * dst[(ii/mr)*kc*mr + kk*mr + ii%mr]; rows past mc are zero. The loop order
 * follows whichever of A's strides is contiguous. */
static inline __attribute__((always_inline)) void pack_a_block(const ert_sgemm_args *g, int64_t i0, int64_t mc, int64_t k0, int64_t kc, int64_t mr,
                         float *dst) {
    const float alpha = g->alpha;
    for (int64_t ip = 0; ip < mc; ip += mr) {
        int64_t h = min64(mr, mc - ip);
        float *d = dst + (ip / mr) * kc * mr;
        const float *src = g->a + (i0 + ip) * g->a_rs + k0 * g->a_cs;
        if (g->a_row_scale) {
            pack_a_rows_scaled(src, g->a_rs, g->a_cs, alpha, g->a_row_scale + i0 + ip, h, kc, d, mr);
            continue;
        }
        if (g->a_rs == 1 && h == mr) {
            for (int64_t kk = 0; kk < kc; kk++)
                for (int64_t r = 0; r < mr; r++) d[kk * mr + r] = alpha * src[kk * g->a_cs + r];
            continue;
        }
        if (g->a_cs == 1 && h == mr) {
            if (mr == 8) pack_a_rows(src, g->a_rs, alpha, kc, d, 8);
            else if (mr == 6) pack_a_rows(src, g->a_rs, alpha, kc, d, 6);
            else pack_a_rows(src, g->a_rs, alpha, kc, d, mr);
            continue;
        }
        for (int64_t r = 0; r < mr; r++) {
            if (r >= h) {
                for (int64_t kk = 0; kk < kc; kk++) d[kk * mr + r] = 0.0f;
                continue;
            }
            const float *sr = src + r * g->a_rs;
            for (int64_t kk = 0; kk < kc; kk++) d[kk * mr + r] = alpha * sr[kk * g->a_cs];
        }
    }
}

/* Dense B block (rows [k0,k0+kc), cols [j0,j0+nc)) into nr-column panels:
 * dst[(jj/nr)*kc*nr + kk*nr + jj%nr]; columns past nc are zero.
 * The full panels of a contiguous B go row by row (one source row pointer
 * per k, fixed-size copies for nr = 16 and 32): per (panel, k) the loop
 * below used to reload g's fields and call memcpy with a run-time size,
 * ~30 instructions for 16 floats (callgrind, RegNetY-800MF's 1x1 convs). */
static inline __attribute__((always_inline)) void pack_b_dense(const ert_sgemm_args *g, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
                         float *dst) {
    const float *const b = g->b;
    const int64_t b_rs = g->b_rs, b_cs = g->b_cs;
    const int64_t *const roff = g->b_row_off;
    const float *const rsc = g->b_row_scale;
    const int64_t nfull = b_cs == 1 ? nc / nr : 0;
    if (nfull) {
        for (int64_t kk = 0; kk < kc; kk++) {
            const float *src = b + (roff ? roff[k0 + kk] : (k0 + kk) * b_rs) + j0;
            float *dk = dst + kk * nr;
            if (rsc) { /* a fused SE scale (every 1x1 conv after an SE block: EfficientNet, RegNetY) */
                const float sc = rsc[k0 + kk];
                if (nr == 16)
                    for (int64_t p = 0; p < nfull; p++)
                        for (int q = 0; q < 16; q++) dk[p * kc * 16 + q] = sc * src[p * 16 + q];
                else
                    for (int64_t p = 0; p < nfull; p++)
                        for (int64_t q = 0; q < nr; q++) dk[p * kc * nr + q] = sc * src[p * nr + q];
            } else if (nr == 16)
                for (int64_t p = 0; p < nfull; p++) memcpy(dk + p * kc * 16, src + p * 16, 16 * sizeof(float));
            else if (nr == 32)
                for (int64_t p = 0; p < nfull; p++) memcpy(dk + p * kc * 32, src + p * 32, 32 * sizeof(float));
            else
                for (int64_t p = 0; p < nfull; p++) memcpy(dk + p * kc * nr, src + p * nr, (size_t)nr * sizeof(float));
        }
    }
    for (int64_t jp = nfull * nr; jp < nc; jp += nr) {
        int64_t w = min64(nr, nc - jp);
        float *d = dst + (jp / nr) * kc * nr;
        for (int64_t kk = 0; kk < kc; kk++) {
            const float *src = b + (roff ? roff[k0 + kk] : (k0 + kk) * b_rs) + (j0 + jp) * b_cs;
            float *dk = d + kk * nr;
            if (rsc) { /* the last panel with a fused SE scale: one general loop */
                const float sc = rsc[k0 + kk];
                int64_t q = 0;
                for (; q < w; q++) dk[q] = sc * src[q * b_cs];
                for (; q < nr; q++) dk[q] = 0.0f;
                continue;
            }
            if (b_cs == 1) { /* the last panel of a row (N = 49, 196, 784...): copy, then zero-pad */
                memcpy(dk, src, (size_t)w * sizeof(float));
                memset(dk + w, 0, (size_t)(nr - w) * sizeof(float));
                continue;
            }
            int64_t q = 0;
            for (; q < w; q++) dk[q] = src[q * b_cs];
            for (; q < nr; q++) dk[q] = 0.0f;
        }
    }
}

/* ceil(v / s) for v >= 0, s >= 1 without a division for the usual strides */
static inline int64_t ceil_div_s(int64_t v, int64_t s) {
    return s == 1 ? v : s == 2 ? (v + 1) >> 1 : (v + s - 1) / s;
}

/* Copies taps iw = iw0 + r*s, r in [0, n), of one input row into d (zero
 * where iw falls outside [0, W)); the in-range span is found up front so the
 * copy loop has no branch. */
static inline __attribute__((always_inline)) void copy_taps(float *restrict d, const float *restrict row, int64_t iw0, int64_t s, int64_t n,
                             int64_t W) {
    int64_t lo = iw0 >= 0 ? 0 : ceil_div_s(-iw0, s);
    int64_t hi = W - iw0 <= 0 ? 0 : ceil_div_s(W - iw0, s);
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    if (hi < lo) hi = lo;
    int64_t r = 0;
    for (; r < lo; r++) d[r] = 0.0f;
    if (s == 1) {
        memcpy(d + r, row + iw0 + r, (size_t)(hi - r) * sizeof(float));
        r = hi;
    } else if (s == 2) {
        const float *p = row + iw0;
        for (; r < hi; r++) d[r] = p[2 * r];
    } else {
        for (; r < hi; r++) d[r] = row[iw0 + r * s];
    }
    for (; r < n; r++) d[r] = 0.0f;
}

/* One output-row segment of the NC columns of a B block: columns
 * [jj, jj+len) are outputs (od, oh, ow0 .. ow0+len). */
typedef struct conv_seg {
    int64_t od, oh, ow0, jj, len; /* int64: output dims are only bounded by the element-count check */
} conv_seg;

/* im2col on the fly: B(k, j) with k = (c, kd, kh, kw), j = (od, oh, ow);
 * out-of-image taps (padding) read as zero. The column walk (segments of
 * output rows) is the same for every k, so it is computed once; each B row
 * is first built contiguously in `line` (a memcpy per segment for stride 1,
 * no per-element index math), then split into the nr-wide panels with
 * fixed-size copies. */
static inline __attribute__((always_inline)) void pack_b_conv(const ert_conv_geom *cg, const float *cscale, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
                        float *dst) {
    const int64_t KH = cg->kernel[1], KW = cg->kernel[2];
    const int64_t D = cg->in[0], H = cg->in[1], W = cg->in[2];
    const int64_t OH = cg->out[1], OW = cg->out[2], sw = cg->stride[2];
    const int64_t ksz = cg->kernel[0] * KH * KW;
    const int64_t ncp = round_up(nc, nr);
    conv_seg seg[NC];
    int64_t n_seg = 0;
    {
        int64_t ow = j0 % OW, t = j0 / OW, oh = t % OH, od = t / OH;
        for (int64_t jj = 0; jj < nc;) {
            int64_t len = min64(OW - ow, nc - jj);
            seg[n_seg++] = (conv_seg){od, oh, ow, jj, len};
            jj += len;
            ow += len;
            if (ow == OW) {
                ow = 0;
                if (++oh == OH) {
                    oh = 0;
                    od++;
                }
            }
        }
    }
    float line[NC + NR_MAX] __attribute__((aligned(64)));
    for (int64_t x = nc; x < ncp; x++) line[x] = 0.0f;
    /* k -> (c, kd, kh, kw) by counting, not dividing, after the first */
    int64_t c = k0 / ksz, r = k0 % ksz;
    int64_t kd = r / (KH * KW), kh = (r / KW) % KH, kw = r % KW;
    for (int64_t kk = 0; kk < kc; kk++) {
        const float *xc = cg->x + c * D * H * W;
        const int64_t d_off = kd * cg->dilation[0] - cg->pad[0];
        const int64_t h_off = kh * cg->dilation[1] - cg->pad[1];
        const int64_t w_off = kw * cg->dilation[2] - cg->pad[2];
        for (int64_t si = 0; si < n_seg; si++) {
            const conv_seg *sg = &seg[si];
            int64_t id = sg->od * cg->stride[0] + d_off, ih = sg->oh * cg->stride[1] + h_off;
            if (id >= 0 && id < D && ih >= 0 && ih < H)
                copy_taps(line + sg->jj, xc + (id * H + ih) * W, sg->ow0 * sw + w_off, sw, sg->len, W);
            else
                memset(line + sg->jj, 0, (size_t)sg->len * sizeof(float));
        }
        if (cscale) {
            const float sc = cscale[c];
            for (int64_t x = 0; x < nc; x++) line[x] *= sc;
        }
        float *dk = dst + kk * nr;
        if (nr == 32) {
            for (int64_t x = 0; x < ncp; x += 32, dk += kc * 32) memcpy(dk, line + x, 32 * sizeof(float));
        } else if (nr == 16) {
            for (int64_t x = 0; x < ncp; x += 16, dk += kc * 16) memcpy(dk, line + x, 16 * sizeof(float));
        } else {
            for (int64_t x = 0; x < ncp; x += nr, dk += kc * nr) memcpy(dk, line + x, (size_t)nr * sizeof(float));
        }
        if (++kw == KW) {
            kw = 0;
            if (++kh == KH) {
                kh = 0;
                if (++kd == cg->kernel[0]) {
                    kd = 0;
                    c++;
                }
            }
        }
    }
}

/* ------------------------------------------------------------ store + epilogue */

/* bias, residual, column bias, activation on n columns of row i of C from
 * j0 (crow), the order of ert_av_ukr_epi */
static inline __attribute__((always_inline)) void epilogue_row(const ert_sgemm_args *g, float *crow, int64_t i,
                                                             int64_t j0, int64_t n) {
    const float *br = g->bias_row ? g->bias_row + i : NULL;
    const float *res = g->residual ? g->residual + i * g->ldc + j0 : NULL;
    if (!g->bias_col) {
        ert_cpu_epilogue_row(crow, n, br, res, g->act);
        return;
    }
    if (br || res) ert_cpu_epilogue_row(crow, n, br, res, NULL);
    ert_cpu_epilogue_row(crow, n, NULL, g->bias_col + j0, g->act);
}

/* the epilogue on a finished tile of C, one pass per row (kernels without
 * ert_ukr_epi, activations act_vec.h lacks) */
static inline __attribute__((always_inline)) void epilogue_tile(const ert_sgemm_args *g, int64_t i0, int64_t j0,
                                                              int64_t mr, int64_t nr) {
    for (int64_t i = 0; i < mr; i++) epilogue_row(g, g->c + (i0 + i) * g->ldc + j0, i0 + i, j0, nr);
}

/* acc is mr x nr with row stride ldacc */
static inline __attribute__((always_inline)) void store_tile(const ert_sgemm_args *g, const float *acc, int64_t ldacc, int64_t i0, int64_t j0, int64_t mr,
                       int64_t nr, bool first, bool last) {
    for (int64_t i = 0; i < mr; i++) {
        float *crow = g->c + (i0 + i) * g->ldc + j0;
        const float *arow = acc + i * ldacc;
        if (first && !g->accumulate)
            for (int64_t j = 0; j < nr; j++) crow[j] = arow[j];
        else
            for (int64_t j = 0; j < nr; j++) crow[j] += arow[j];
        if (last && (g->bias_row || g->residual || g->bias_col || g->act)) epilogue_row(g, crow, i0 + i, j0, nr);
    }
}

/* ------------------------------------------------------------ whole operands packed at create */

/* A packed operand: this header, then from byte PACK_HDR the panels of every
 * K block. A: block pc (KC deep) holds round_up(M, mr) rows in mr-row panels
 * at pc * Mp floats, the panel of rows i0.. at + i0 * kc (the layout
 * pack_a_block writes for mc = M). B: the same with N and nr-column panels,
 * block pc at pc * Np, columns j0.. at + j0 * kc. */
typedef struct packed_hdr {
    int64_t kind, rows, K; /* ert_cpu_gemm_kernel it was packed for; M or N; K */
} packed_hdr;
#define PACK_HDR 64

size_t ert_cpu_sgemm_packed_bytes(int64_t M, int64_t N, int64_t K, bool b_side) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    size_t f, bytes;
    /* rows rounded for the widest mr / nr any kernel uses */
    if (ert_mul_ovf((size_t)(b_side ? round_up(N, NR_MAX) : round_up(M, MR_LCM)), (size_t)K, &f) ||
        ert_mul_ovf(f, sizeof(float), &bytes) || bytes > SIZE_MAX - PACK_HDR)
        return SIZE_MAX;
    return bytes + PACK_HDR;
}

ert_status ert_cpu_sgemm_pack(const ert_sgemm_args *g, bool b_side, void *dst, size_t bytes) {
    size_t need = ert_cpu_sgemm_packed_bytes(g->M, g->N, g->K, b_side);
    if (need == 0) return ERT_OK;
    if (!dst || bytes < need || (b_side && g->conv)) return ERT_E_INTERNAL;
    const ukr_desc *uk = pick_ukr(g->choice);
    *(packed_hdr *)dst = (packed_hdr){uk->kind, b_side ? g->N : g->M, g->K};
    float *d = (float *)((char *)dst + PACK_HDR);
    const int64_t p = b_side ? round_up(g->N, uk->nr) : round_up(g->M, uk->mr);
    for (int64_t pc = 0; pc < g->K; pc += KC) {
        int64_t kc = min64(KC, g->K - pc);
        if (!b_side) {
            pack_a_block(g, 0, g->M, pc, kc, uk->mr, d + pc * p);
            continue;
        }
        for (int64_t j0 = 0; j0 < g->N; j0 += NC)
            pack_b_dense(g, pc, kc, j0, min64(NC, g->N - j0), uk->nr, d + pc * p + j0 * kc);
    }
    return ERT_OK;
}

/* The panels of a packed operand if it fits this call's kernel and shape, else NULL. */
static const float *packed_panels(const void *pk, const ukr_desc *uk, int64_t rows, int64_t K) {
    const packed_hdr *h = pk;
    if (!h || h->kind != uk->kind || h->rows != rows || h->K != K) return NULL;
    return (const float *)((const char *)pk + PACK_HDR);
}

bool ert_cpu_sgemm_packed_fits(const void *packed, int64_t rows, int64_t K, const ert_kernel_choice *kc) {
    return packed_panels(packed, pick_ukr(kc), rows, K) != NULL;
}

/* ------------------------------------------------------------ driver */

typedef struct sgemm_job {
    const ert_sgemm_args *g;
    float *slots;            /* per slot: packed B block, then packed A block */
    size_t slot_floats, b_floats;
    int64_t n_slots, n_mb, n_nb, n_jc, mcb;
    const float *a_all, *b_all; /* operands packed at create, or NULL */
    int64_t a_rows, b_rows;  /* their rows per K block: round_up(M, mr), round_up(N, nr) */
    const ukr_desc *uk;
    atomic_llong next_task;  /* tasks are claimed, so a late worker stalls nobody */
} sgemm_job;

/* A task is one MC row block times a chunk of consecutive NC column blocks.
 * K is the middle loop so each A block is packed once per chunk, not once
 * per NC block (repacking A per NC block was most of the packing cost on
 * conv layers with thousands of output pixels); the C rows of the chunk are
 * revisited once per KC block and stay in L2. */
static inline __attribute__((always_inline)) void sgemm_slot_body(void *arg, int64_t s0, int64_t s1) {
    sgemm_job *jb = arg;
    const ert_sgemm_args *g = jb->g;
    const int64_t n_tasks = jb->n_mb * jb->n_jc;
    const int64_t mr = jb->uk->mr, nr = jb->uk->nr;
    const ukr_fn ukr = jb->uk->fn;
    const bool has_epi = g->bias_row || g->residual || g->bias_col || g->act;
    /* the epilogue in the kernel's registers where it can (else a pass over the stored tile) */
    const bool reg_epi = has_epi && jb->uk->epi && (!g->act || ert_act_row_vectorised(g->act->kind));
    float acc[MR_MAX * NR_MAX] __attribute__((aligned(64)));
    for (int64_t s = s0; s < s1; s++) {
        float *pb = jb->slots + (size_t)s * jb->slot_floats;
        float *pa = pb + jb->b_floats;
        for (int64_t t; (t = atomic_fetch_add_explicit(&jb->next_task, 1, memory_order_relaxed)) < n_tasks;) {
            int64_t i0 = (t % jb->n_mb) * jb->mcb, jc = t / jb->n_mb;
            int64_t mc = min64(jb->mcb, g->M - i0);
            /* chunk jc covers column blocks [jc*n_nb/n_jc, (jc+1)*n_nb/n_jc) */
            int64_t jb0 = jc * jb->n_nb / jb->n_jc, jb1 = (jc + 1) * jb->n_nb / jb->n_jc;
            for (int64_t pc = 0; pc < g->K; pc += KC) {
                int64_t kc = min64(KC, g->K - pc);
                bool first = pc == 0, last = pc + kc >= g->K;
                const float *pa_blk = pa;
                if (jb->a_all) pa_blk = jb->a_all + pc * jb->a_rows + i0 * kc;
                else pack_a_block(g, i0, mc, pc, kc, mr, pa);
                for (int64_t jblk = jb0; jblk < jb1; jblk++) {
                    int64_t j0 = jblk * NC, nc = min64(NC, g->N - j0);
                    const float *pb_blk = pb;
                    if (jb->b_all) pb_blk = jb->b_all + pc * jb->b_rows + j0 * kc;
                    else if (g->conv) pack_b_conv(g->conv, g->b_row_scale, pc, kc, j0, nc, nr, pb);
                    else pack_b_dense(g, pc, kc, j0, nc, nr, pb);
                    for (int64_t jr = 0; jr < nc; jr += nr) {
                        const float *bp = pb_blk + (jr / nr) * kc * nr;
                        for (int64_t ir = 0; ir < mc; ir += mr) {
                            const float *ap = pa_blk + (ir / mr) * kc * mr;
                            /* a full tile, or the last rows of M at full width where the kernel has a copy for them */
                            const ukr_fn f = jr + nr > nc ? NULL : ir + mr <= mc ? ukr : jb->uk->rows[mc - ir];
                            if (f) {
                                float *ct = g->c + (i0 + ir) * g->ldc + j0 + jr;
                                const bool add = !first || g->accumulate;
                                if (last && reg_epi) {
                                    const ert_ukr_epi e = {
                                        .bias_row = g->bias_row ? g->bias_row + i0 + ir : NULL,
                                        .res = g->residual ? g->residual + (i0 + ir) * g->ldc + j0 + jr : NULL,
                                        .bias_col = g->bias_col ? g->bias_col + j0 + jr : NULL,
                                        .ldr = g->ldc,
                                        .kind = g->act ? (int)g->act->kind : ERT_ACT_NONE,
                                        .alpha = g->act ? g->act->alpha : 0.0f,
                                        .beta = g->act ? g->act->beta : 0.0f,
                                    };
                                    f(kc, ap, bp, ct, g->ldc, add, &e);
                                    continue;
                                }
                                f(kc, ap, bp, ct, g->ldc, add, NULL);
                                if (last && has_epi) epilogue_tile(g, i0 + ir, j0 + jr, min64(mr, mc - ir), nr);
                                continue;
                            }
                            if (jb->uk->half && nc - jr <= nr / 2) jb->uk->half(kc, ap, bp, acc, nr, false, NULL);
                            else ukr(kc, ap, bp, acc, nr, false, NULL);
                            store_tile(g, acc, nr, i0 + ir, j0 + jr, min64(mr, mc - ir), min64(nr, nc - jr), first,
                                       last);
                        }
                    }
                }
            }
        }
    }
}

/* A parallel_for body compiled once per x86 vector ISA, and the copy for a
 * micro-kernel: NAME_pick(uk). With the AVX-512 kernel the packing and the
 * tile stores are a third of the time; built for the baseline target they
 * run on 4-wide SSE, so the whole driver is compiled again for AVX-512 (same
 * code, same results: no multiply-add is contracted differently, packing
 * and stores only copy, scale by alpha and add); the AVX2 copy because the
 * store epilogue's activations (act_vec.h) are 8-wide, which baseline SSE2
 * runs as two halves. */
#if defined(__x86_64__) && defined(__GNUC__)
#define PER_ISA(name, body)                                                                                      \
    static void name##_base(void *arg, int64_t a0, int64_t a1) { body(arg, a0, a1); }                             \
    __attribute__((target("avx512f,avx2,fma"))) static void name##_avx512(void *arg, int64_t a0, int64_t a1) {    \
        body(arg, a0, a1);                                                                                        \
    }                                                                                                             \
    __attribute__((target("avx2,fma"))) static void name##_avx2(void *arg, int64_t a0, int64_t a1) {              \
        body(arg, a0, a1);                                                                                        \
    }                                                                                                             \
    static ert_par_fn name##_pick(const ukr_desc *uk) {                                                           \
        return uk->kind == ERT_CPU_GEMM_AVX512 ? name##_avx512 : uk->kind == ERT_CPU_GEMM_AVX2 ? name##_avx2      \
                                                                                                : name##_base;    \
    }
#else
#define PER_ISA(name, body)                                                                                      \
    static void name##_base(void *arg, int64_t a0, int64_t a1) { body(arg, a0, a1); }                             \
    static ert_par_fn name##_pick(const ukr_desc *uk) {                                                           \
        (void)uk;                                                                                                 \
        return name##_base;                                                                                       \
    }
#endif
PER_ISA(sgemm_slot, sgemm_slot_body)

/* The shared im2col B (shared_b_floats): task t packs K block t / n_nb,
 * column block t % n_nb, where the slots' tasks read it as a B packed at
 * create (b_all) */
typedef struct shared_b_job {
    const ert_sgemm_args *g;
    const ukr_desc *uk;
    float *b;
    int64_t b_rows, n_kb, n_nb;
} shared_b_job;

static inline __attribute__((always_inline)) void shared_b_body(void *arg, int64_t t0, int64_t t1) {
    const shared_b_job *j = arg;
    const ert_sgemm_args *g = j->g;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t pc = (t / j->n_nb) * KC, kc = min64(KC, g->K - pc);
        const int64_t j0 = (t % j->n_nb) * NC, nc = min64(NC, g->N - j0);
        pack_b_conv(g->conv, g->b_row_scale, pc, kc, j0, nc, j->uk->nr, j->b + pc * j->b_rows + j0 * kc);
    }
}
PER_ISA(shared_b, shared_b_body)

/* B block (KC x NC) + A block (<= MC x KC), both trimmed to the problem; sized
 * for the widest kernel so that any kernel can run in it. */
static void slot_sizes(int64_t M, int64_t N, int64_t K, size_t *b_floats, size_t *total) {
    int64_t kc = min64(K, KC);
    *b_floats = (size_t)round_up(kc * min64(round_up(N, NR_MAX), NC), 16);
    *total = *b_floats + (size_t)round_up(kc * min64(round_up(M, MR_LCM), MC), 16);
}

/* A conv's im2col B packed once for all tasks, beside the worker slots:
 * with each task packing its own B blocks, every row block of the filter
 * repacked the same im2col panels, so a conv of a few hundred pixels and
 * many output channels packed its whole B once per row block (a 3x3
 * stride-2 conv 128 -> 256 at 14x14: M split in 2 blocks on 2 workers, each
 * packing all of B, where one worker packed it once). Where the whole B is
 * small: floats of it (panels for the widest kernel), or 0. */
#define SHARED_B_MAX_BYTES (2u << 20)
static size_t shared_b_floats(int64_t M, int64_t N, int64_t K, int64_t slots) {
    const size_t f = (size_t)K * (size_t)round_up(N, NR_MAX);
    if (f * sizeof(float) > SHARED_B_MAX_BYTES) return 0;
    return M > MR_LCM && (M > MC || slots > 1) ? f : 0; /* more than one row block possible */
}

size_t ert_cpu_sgemm_workspace(int64_t M, int64_t N, int64_t K, int n_threads) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    if (n_threads < 1) n_threads = 1;
    size_t bf, sf, total;
    slot_sizes(M, N, K, &bf, &sf);
    if (ert_mul_ovf(sf * sizeof(float), (size_t)n_threads, &total)) return SIZE_MAX;
    return total + shared_b_floats(M, N, K, n_threads) * sizeof(float);
}

size_t ert_cpu_sgemm_slot_bytes(int64_t M, int64_t N, int64_t K) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    size_t bf, sf;
    slot_sizes(M, N, K, &bf, &sf);
    return sf * sizeof(float);
}

/* ert_cpu_sgemm's split (below): row blocks, then column chunks */
static void sgemm_split(int64_t M, int64_t N, int64_t slots, int64_t *n_mb, int64_t *mcb, int64_t *n_jc) {
    const int64_t n_nb = (N + NC - 1) / NC;
    *n_mb = (M + MC - 1) / MC;
    /* fewest row blocks; more when the columns alone give too few tasks */
    if (slots > 1 && n_nb < 2 * slots) {
        int64_t want = (2 * slots + n_nb - 1) / n_nb, most = (M + MR_LCM - 1) / MR_LCM;
        if (want > *n_mb) *n_mb = min64(want, most);
    }
    *mcb = round_up((M + *n_mb - 1) / *n_mb, MR_LCM);
    *n_mb = (M + *mcb - 1) / *mcb;
    /* one chunk per row block when single-threaded (each A block packed
     * once); otherwise about two tasks per worker, for balance */
    *n_jc = slots <= 1 ? 1 : min64(n_nb, (2 * slots + *n_mb - 1) / *n_mb);
}

int64_t ert_cpu_sgemm_tasks(int64_t M, int64_t N, int64_t slots) {
    if (M <= 0 || N <= 0) return 0;
    int64_t n_mb, mcb, n_jc;
    sgemm_split(M, N, slots, &n_mb, &mcb, &n_jc);
    return n_mb * n_jc;
}

ert_status ert_cpu_sgemm(const ert_sgemm_args *g, void *ws, size_t ws_bytes, struct ert_threadpool *pool) {
    if (g->M <= 0 || g->N <= 0) return ERT_OK;
    if (g->K <= 0) { /* empty sum: C = 0 (or unchanged) + epilogue */
        float zero[6 * 16] = {0};
        for (int64_t i = 0; i < g->M; i += 6)
            for (int64_t j = 0; j < g->N; j += 16)
                store_tile(g, zero, 16, i, j, min64(6, g->M - i), min64(16, g->N - j), true, true);
        return ERT_OK;
    }
    size_t bf, sf;
    slot_sizes(g->M, g->N, g->K, &bf, &sf);
    if (!ws || ws_bytes < sf * sizeof(float)) return ERT_E_INTERNAL;
    sgemm_job jb = {
        .g = g,
        .slots = ws,
        .slot_floats = sf,
        .b_floats = bf,
        .n_nb = (g->N + NC - 1) / NC,
        .uk = pick_ukr(g->choice),
    };
    jb.a_all = packed_panels(g->a_packed, jb.uk, g->M, g->K);
    jb.b_all = g->conv ? NULL : packed_panels(g->b_packed, jb.uk, g->N, g->K);
    jb.a_rows = round_up(g->M, jb.uk->mr);
    jb.b_rows = round_up(g->N, jb.uk->nr);
    atomic_init(&jb.next_task, 0);
    int64_t fit = (int64_t)(ws_bytes / (sf * sizeof(float)));
    int64_t slots = min64(ert_threadpool_size(pool), fit);
    /* a conv's im2col B packed once, after the slots, where the row blocks
     * would each pack it (shared_b_floats) and the workspace holds it */
    const size_t sb = g->conv ? shared_b_floats(g->M, g->N, g->K, ert_threadpool_size(pool)) : 0;
    if (sb && ws_bytes >= (sf + sb) * sizeof(float)) {
        const int64_t s2 = min64(slots, (int64_t)((ws_bytes - sb * sizeof(float)) / (sf * sizeof(float))));
        int64_t n_mb, mcb, n_jc;
        sgemm_split(g->M, g->N, s2, &n_mb, &mcb, &n_jc);
        if (n_mb > 1) {
            slots = s2;
            shared_b_job sj = {g, jb.uk, (float *)ws + (size_t)s2 * sf, jb.b_rows, (g->K + KC - 1) / KC, jb.n_nb};
            ert_parallel_for(pool, sj.n_kb * sj.n_nb, 1, shared_b_pick(jb.uk), &sj);
            jb.b_all = sj.b;
        }
    }
    sgemm_split(g->M, g->N, slots, &jb.n_mb, &jb.mcb, &jb.n_jc);
    jb.n_slots = min64(slots, jb.n_mb * jb.n_jc);
    ert_parallel_for(pool, jb.n_slots, 1, sgemm_slot_pick(jb.uk), &jb);
    return ERT_OK;
}

/* ------------------------------------------------------------ MatMul */

/* Numpy matmul: a is (..., M, K) or (K), b is (..., K, N) or (K); batch dims
 * broadcast. One SGEMM per output batch entry, each threaded inside; when b
 * has no batch (a weight (K, N), or leading dims all 1), one SGEMM of
 * batch*M rows instead: a's and y's batches are then contiguous rows, and
 * the per-batch calls left the small M of a transformer's token rows (197
 * for ViT-Ti) to each, with B packing and thread start-up paid per batch. */
ert_status ert_cpu_matmul(const ert_kargs *a) {
    const ert_tview *A = &a->in[0], *B = &a->in[1];
    ert_tview *Y = &a->out[0];
    if (A->dtype != ERT_DTYPE_F32 || B->dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    /* What the session's passes fuse (runtime/passes/fuse.c): trans_b (B
     * given as (..., N, K)), alpha (a scalar factor), a bias (N) over the
     * last axis (in[2]) and a residual of Y's shape (in[3]), added before
     * the activation. */
    const ert_gemm_params *gp = &a->params->gemm;
    const bool tb = gp->trans_b && B->ndim >= 2;
    int64_t M = A->ndim >= 2 ? A->dims[A->ndim - 2] : 1, K = A->dims[A->ndim - 1];
    int64_t N = B->ndim >= 2 ? B->dims[B->ndim - (tb ? 2 : 1)] : 1;
    int64_t bd[ERT_MAX_DIMS], n_batch;
    int nbd;
    if (!ert_cpu_batch_shape(A, B, bd, &nbd, &n_batch)) return ERT_E_SHAPE;
    const float *bias = gp->has_c && a->n_in > 2 && a->in[2].data ? a->in[2].data : NULL;
    const float *res = a->n_in > 3 && a->in[3].data ? a->in[3].data : NULL;
    const ert_act_params *act = gp->act.kind != ERT_ACT_NONE ? &gp->act : NULL;
    ert_sgemm_args g = {
        .M = M, .N = N, .K = K, .a_rs = K, .a_cs = 1, .alpha = gp->alpha,
        .b_rs = tb ? 1 : (B->ndim >= 2 ? N : 1), .b_cs = tb ? K : 1, .ldc = N,
        .bias_col = bias, .act = act, /* in the store epilogue (a separate pass over Y before) */
        .choice = a->choice,
    };
    if (ert_cpu_matmul_rows(A, B) != M) { /* b shared by every batch: one GEMM */
        g.M = M * n_batch;
        n_batch = 1;
    }
    for (int64_t bi = 0; bi < n_batch; bi++) {
        int64_t oa, ob;
        ert_cpu_batch_offsets(A, B, bd, nbd, bi, M * K, K * N, &oa, &ob);
        g.a = (const float *)A->data + oa;
        g.b = (const float *)B->data + ob;
        g.b_packed = B->ndim == 2 ? a->packed : NULL; /* a constant 2-D B, packed at create */
        g.c = (float *)Y->data + bi * M * N;
        g.residual = res ? res + bi * M * N : NULL;
        ert_status st = ert_cpu_sgemm(&g, a->workspace, a->workspace_bytes, a->pool);
        if (st) return st;
    }
    return ERT_OK;
}

/* Rows of the SGEMM(s) ert_cpu_matmul runs: a's batch*M when b has no
 * batch of its own (then a's batches, and y's, are consecutive row blocks
 * of one matrix), else M (one SGEMM per batch). prepare sizes the
 * workspace by it (core/ops/matmul.c does the same from shapes). */
int64_t ert_cpu_matmul_rows(const ert_tview *A, const ert_tview *B) {
    int64_t rows = A->ndim >= 2 ? A->dims[A->ndim - 2] : 1;
    for (int d = 0; d + 2 < B->ndim; d++)
        if (B->dims[d] != 1) return rows;
    for (int d = 0; d + 2 < A->ndim; d++) rows *= A->dims[d];
    return rows;
}

/* A MatMul's broadcast batch dims bd[*nbd] (a's and b's dims before the
 * last two) and their product; false if they do not broadcast. */
bool ert_cpu_batch_shape(const ert_tview *A, const ert_tview *B, int64_t *bd, int *nbd, int64_t *n_batch) {
    int na = A->ndim > 2 ? A->ndim - 2 : 0, nb = B->ndim > 2 ? B->ndim - 2 : 0;
    if (!ert_broadcast_shape(na, A->dims, nb, B->dims, nbd, bd)) return false;
    *n_batch = 1;
    for (int i = 0; i < *nbd; i++) *n_batch *= bd[i];
    return true;
}

/* Output batch index bi of a MatMul (batch dims bd[nbd], a's matrices of
 * a_mat elements, b's of b_mat) -> element offsets into a and b, broadcast
 * dims (size 1) staying at 0. */
void ert_cpu_batch_offsets(const ert_tview *A, const ert_tview *B, const int64_t *bd, int nbd, int64_t bi,
                           int64_t a_mat, int64_t b_mat, int64_t *oa, int64_t *ob) {
    int na = A->ndim > 2 ? A->ndim - 2 : 0, nb = B->ndim > 2 ? B->ndim - 2 : 0;
    int64_t rem = bi, sa = a_mat, sb = b_mat;
    *oa = *ob = 0;
    for (int d = nbd - 1; d >= 0; d--) {
        int64_t idx = rem % bd[d];
        rem /= bd[d];
        int da = d - (nbd - na), db = d - (nbd - nb);
        if (da >= 0) {
            if (A->dims[da] != 1) *oa += idx * sa;
            sa *= A->dims[da];
        }
        if (db >= 0) {
            if (B->dims[db] != 1) *ob += idx * sb;
            sb *= B->dims[db];
        }
    }
}

/* ------------------------------------------------------------ Gemm */

/* A constant B (a weight) packed once at create: MatMul with a 2-D B, Gemm. */
static bool b_packable(const ert_kargs *a, ert_sgemm_args *g);

size_t ert_cpu_matmul_packed_bytes(const ert_kargs *a) {
    ert_sgemm_args g;
    return b_packable(a, &g) ? ert_cpu_sgemm_packed_bytes(g.M, g.N, g.K, true) : 0;
}

ert_status ert_cpu_matmul_pack(const ert_kargs *a) {
    ert_sgemm_args g;
    if (!a->packed || !b_packable(a, &g)) return ERT_OK;
    return ert_cpu_sgemm_pack(&g, true, a->packed, a->packed_bytes);
}

/* Y (M,N) = alpha * op(A) op(B) + beta * C, C broadcast to (M,N). The
 * SGEMM arguments without C (data pointers as given, possibly NULL). */
static void gemm_args(const ert_kargs *a, ert_sgemm_args *g) {
    const ert_gemm_params *p = &a->params->gemm;
    const ert_tview *A = &a->in[0], *B = &a->in[1];
    int64_t M = a->out[0].dims[0], N = a->out[0].dims[1];
    int64_t K = p->trans_a ? A->dims[0] : A->dims[1];
    *g = (ert_sgemm_args){
        .M = M, .N = N, .K = K, .a = A->data, .alpha = p->alpha,
        .a_rs = p->trans_a ? 1 : K, .a_cs = p->trans_a ? M : 1,
        .b = B->data, .b_rs = p->trans_b ? 1 : N, .b_cs = p->trans_b ? K : 1,
        .c = a->out[0].data, .ldc = N,
        .act = p->act.kind != ERT_ACT_NONE ? &p->act : NULL,
        .b_packed = a->packed, .choice = a->choice,
    };
}

static bool b_packable(const ert_kargs *a, ert_sgemm_args *g) {
    if (a->n_in < 2 || a->n_out < 1 || a->in[0].dtype != ERT_DTYPE_F32 || a->in[1].dtype != ERT_DTYPE_F32) return false;
    const ert_tview *B = &a->in[1];
    if (a->op == ERT_OP_GEMM) {
        if (B->ndim != 2 || a->out[0].ndim != 2) return false;
        gemm_args(a, g);
        return true;
    }
    if (a->op != ERT_OP_MATMUL || B->ndim != 2 || a->in[0].ndim < 1) return false;
    const ert_tview *A = &a->in[0];
    const bool tb = a->params->gemm.trans_b; /* B given as (N, K) (fuse.c): as ert_cpu_matmul reads it */
    const int64_t N = B->dims[tb ? 0 : 1], K = B->dims[tb ? 1 : 0];
    *g = (ert_sgemm_args){.M = A->ndim >= 2 ? A->dims[A->ndim - 2] : 1, .N = N, .K = K,
                          .b = B->data, .b_rs = tb ? 1 : N, .b_cs = tb ? K : 1, .choice = a->choice};
    return true;
}

ert_status ert_cpu_gemm(const ert_kargs *a) {
    const ert_gemm_params *p = &a->params->gemm;
    const ert_tview *A = &a->in[0], *B = &a->in[1];
    const ert_tview *C = a->n_in > 2 && a->in[2].data ? &a->in[2] : NULL;
    ert_tview *Y = &a->out[0];
    if (A->dtype != ERT_DTYPE_F32 || B->dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    int64_t M = Y->dims[0], N = Y->dims[1];
    float *y = Y->data;
    bool acc = C && p->beta != 0.0f;
    ert_sgemm_args g;
    gemm_args(a, &g);
    if (acc && p->beta == 1.0f) { /* C (N) or (M, N) as is: into the store epilogue, not a prefill of Y */
        int64_t cm = C->ndim == 2 ? C->dims[0] : 1, cn = C->ndim >= 1 ? C->dims[C->ndim - 1] : 1;
        if (cm == 1 && cn == N && N > 1) g.bias_col = C->data, acc = false;
        else if (cm == M && cn == N && M > 1 && N > 1) g.residual = C->data, acc = false;
    }
    if (acc) {
        /* C is (), (N), (1,N), (M,1), (M,N)...: strides 0 on broadcast dims */
        int64_t cm = C->ndim == 2 ? C->dims[0] : 1, cn = C->ndim >= 1 ? C->dims[C->ndim - 1] : 1;
        int64_t s_i = cm == 1 ? 0 : cn, s_j = cn == 1 ? 0 : 1;
        const float *c = C->data;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) y[i * N + j] = p->beta * c[i * s_i + j * s_j];
    }
    g.accumulate = acc;
    return ert_cpu_sgemm(&g, a->workspace, a->workspace_bytes, a->pool);
}
