/* Element-wise kernels: unary ops, numpy-broadcasting binary ops, Where, and
 * Expand (a broadcasting copy). Shapes were validated by prepare.
 *
 * Broadcasting: every input is viewed in the output's rank with stride 0 on
 * broadcast dims. The output is walked row by row (a row = the last dim); each
 * row is one call of a tight loop with per-input inner strides 0 or 1, so
 * same-shape, scalar and row-broadcast ((N,C) + (C)) cases all become simple
 * loops. Rows are split across the pool. */
#include "act_vec.h"
#include "cpu_kernels.h"
#include "nan_rules.h"

#include <math.h>
#include <string.h>

#define GRAIN 16384 /* elements per parallel chunk: below this threads cost more than they give */

/* ------------------------------------------------------------------ broadcast walk */

typedef struct bcast {
    int nd;                        /* output rank (>= 1; 0-d is treated as (1)) */
    int64_t dims[ERT_MAX_DIMS];    /* output dims */
    int64_t st[3][ERT_MAX_DIMS];   /* element strides of up to 3 inputs in output index space */
    int n_in;
} bcast;

static void bcast_init(bcast *b, const ert_tview *out, const ert_tview *const *ins, int n_in) {
    b->nd = out->ndim > 0 ? out->ndim : 1;
    b->n_in = n_in;
    for (int d = 0; d < b->nd; d++) b->dims[d] = out->ndim > 0 ? out->dims[d] : 1;
    for (int k = 0; k < n_in; k++) {
        const ert_tview *t = ins[k];
        int64_t s = 1;
        for (int d = b->nd - 1; d >= 0; d--) {
            int td = d - (b->nd - t->ndim);
            int64_t dim = td >= 0 ? t->dims[td] : 1;
            b->st[k][d] = dim == 1 ? 0 : s;
            s *= dim;
        }
    }
}

/* Offsets (in elements) of each input at the start of output row `row`. */
static void bcast_row(const bcast *b, int64_t row, int64_t *off) {
    for (int k = 0; k < b->n_in; k++) off[k] = 0;
    for (int d = b->nd - 2; d >= 0; d--) {
        int64_t i = row % b->dims[d];
        row /= b->dims[d];
        for (int k = 0; k < b->n_in; k++) off[k] += i * b->st[k][d];
    }
}

/* ------------------------------------------------------------------ unary */

typedef void (*act_row_fn)(float *x, int64_t n, const ert_act_params *ap);
typedef struct unary_job {
    const ert_kargs *a;
    act_row_fn act_row; /* the activation kinds' row loop (pick_act_row) */
} unary_job;

static float gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/* log(1 + e^x) without overflow for large x or loss for very negative x */
static float softplus(float x) { return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

/* The activation kinds of act_vec.h as a standalone node (YOLO's class
 * Sigmoid, exporters' unfused SiLU): the row epilogue compiled for the
 * widest unit the CPU has and a->choice allows; baseline SSE2 ran the 8-lane
 * code as two halves with a division each (YOLOv8n's 672k-element Sigmoid:
 * 1.15 ms). The portable copy (cap 0) stays the oracle's loop. */
static void act_row_base(float *x, int64_t n, const ert_act_params *ap) { ert_cpu_act_row(x, n, ap); }
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void act_row_avx2(float *x, int64_t n, const ert_act_params *ap) {
    ert_cpu_act_row(x, n, ap);
}
#define ACT_Z_LOOP(KIND)                                                                                            \
    for (int64_t i = 0; i < n; i += 16) {                                                                           \
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);                   \
        _mm512_mask_storeu_ps(x + i, m, ert_av_act_z(_mm512_maskz_loadu_ps(m, x + i), (KIND), al, be));            \
    }
/* 16 lanes; the tail masked, through the same code (no value depends on its position).
 * Also the activation pass of dwconv.c's AVX-512 copies (cpu_kernels.h). */
__attribute__((target("avx512f,avx2,fma"))) void ert_cpu_act_row_avx512(float *x, int64_t n, const ert_act_params *ap) {
    const float al = ap->alpha, be = ap->beta;
    switch (ap->kind) {
    case ERT_ACT_RELU: ACT_Z_LOOP(ERT_ACT_RELU) break;
    case ERT_ACT_CLIP: ACT_Z_LOOP(ERT_ACT_CLIP) break;
    case ERT_ACT_LEAKY_RELU: ACT_Z_LOOP(ERT_ACT_LEAKY_RELU) break;
    case ERT_ACT_HARD_SIGMOID: ACT_Z_LOOP(ERT_ACT_HARD_SIGMOID) break;
    case ERT_ACT_HARD_SWISH: ACT_Z_LOOP(ERT_ACT_HARD_SWISH) break;
    case ERT_ACT_SIGMOID: ACT_Z_LOOP(ERT_ACT_SIGMOID) break;
    case ERT_ACT_SILU: ACT_Z_LOOP(ERT_ACT_SILU) break;
    case ERT_ACT_GELU: ACT_Z_LOOP(ERT_ACT_GELU) break;
    default: ert_cpu_act_row(x, n, ap); break;
    }
}
#undef ACT_Z_LOOP
#endif

static act_row_fn pick_act_row(const ert_kargs *a) {
#if defined(__x86_64__) && defined(__GNUC__)
    const ert_cpu_gemm_kernel cap = ert_cpu_kernel_cap(a->choice);
    if (cap >= ERT_CPU_GEMM_AVX512 && __builtin_cpu_supports("avx512f")) return ert_cpu_act_row_avx512;
    if (cap >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return act_row_avx2;
#else
    (void)a;
#endif
    return act_row_base;
}

static void unary_f32(void *arg, int64_t b, int64_t e) {
    const ert_kargs *a = ((unary_job *)arg)->a;
    const float *x = a->in[0].data;
    float *y = a->out[0].data;
    const ert_unary_params *u = &a->params->unary;
    switch (a->op) {
    case ERT_OP_ERF: for (int64_t i = b; i < e; i++) y[i] = erff(x[i]); break;
    case ERT_OP_SQRT: for (int64_t i = b; i < e; i++) y[i] = sqrtf(x[i]); break;
    case ERT_OP_EXP: for (int64_t i = b; i < e; i++) y[i] = expf(x[i]); break;
    case ERT_OP_LOG: for (int64_t i = b; i < e; i++) y[i] = logf(x[i]); break;
    case ERT_OP_NEG: for (int64_t i = b; i < e; i++) y[i] = -x[i]; break;
    case ERT_OP_ABS: for (int64_t i = b; i < e; i++) y[i] = fabsf(x[i]); break;
    case ERT_OP_RECIPROCAL: for (int64_t i = b; i < e; i++) y[i] = 1.0f / x[i]; break;
    case ERT_OP_FLOOR: for (int64_t i = b; i < e; i++) y[i] = floorf(x[i]); break;
    case ERT_OP_CEIL: for (int64_t i = b; i < e; i++) y[i] = ceilf(x[i]); break;
    case ERT_OP_ELU: for (int64_t i = b; i < e; i++) y[i] = x[i] >= 0 ? x[i] : u->alpha * expm1f(x[i]); break;
    case ERT_OP_SELU:
        for (int64_t i = b; i < e; i++) y[i] = u->gamma * (x[i] > 0 ? x[i] : u->alpha * expm1f(x[i]));
        break;
    case ERT_OP_SOFTPLUS: for (int64_t i = b; i < e; i++) y[i] = softplus(x[i]); break;
    case ERT_OP_MISH: for (int64_t i = b; i < e; i++) y[i] = x[i] * tanhf(softplus(x[i])); break;
    default:
        if (a->op == ERT_OP_GELU && u->alpha != 0) { /* tanh form; the erf form is act GELU */
            for (int64_t i = b; i < e; i++) y[i] = gelu_tanh(x[i]);
            break;
        }
        if (y != x) memcpy(y + b, x + b, (size_t)(e - b) * sizeof *y);
        ((unary_job *)arg)->act_row(y + b, e - b, &u->act); /* vectorised where act_vec.h has the kind */
        break;
    }
}

/* a function, so the u8 instance does not warn that v < 0 is always false */
static inline bool is_neg(int64_t v) { return v < 0; }

/* Integer Neg/Abs/Relu wrap like two's complement (INT_MIN stays INT_MIN)
 * instead of overflowing; Clip uses the exact bounds prepare read (lo <= hi). */
#define UNARY_INT(T, UT)                                                             \
    static void unary_##T(void *arg, int64_t b, int64_t e) {                         \
        const ert_kargs *a = ((unary_job *)arg)->a;                                  \
        const T *x = a->in[0].data;                                                  \
        T *y = a->out[0].data;                                                       \
        if (a->op == ERT_OP_CLIP) {                                                  \
            T lo = (T)a->params->unary.ilo, hi = (T)a->params->unary.ihi;            \
            for (int64_t i = b; i < e; i++) y[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i]; \
            return;                                                                  \
        }                                                                            \
        for (int64_t i = b; i < e; i++) {                                            \
            T v = x[i];                                                              \
            T neg = (T)(0u - (UT)v);                                                 \
            y[i] = a->op == ERT_OP_NEG ? neg : a->op == ERT_OP_ABS ? (is_neg((int64_t)v) ? neg : v) \
                                                                   : (v > 0 ? v : 0); \
        }                                                                            \
    }
UNARY_INT(int32_t, uint32_t)
UNARY_INT(int64_t, uint64_t)
UNARY_INT(int8_t, uint8_t)
UNARY_INT(uint8_t, uint8_t)

ert_status ert_cpu_unary(const ert_kargs *a) {
    unary_job j = {a, pick_act_row(a)};
    int64_t n = a->out[0].n_elems;
    switch (a->in[0].dtype) {
    case ERT_DTYPE_F32: ert_parallel_for(a->pool, n, GRAIN, unary_f32, &j); return ERT_OK;
    case ERT_DTYPE_I32: ert_parallel_for(a->pool, n, GRAIN, unary_int32_t, &j); return ERT_OK;
    case ERT_DTYPE_I64: ert_parallel_for(a->pool, n, GRAIN, unary_int64_t, &j); return ERT_OK;
    case ERT_DTYPE_I8: ert_parallel_for(a->pool, n, GRAIN, unary_int8_t, &j); return ERT_OK;
    case ERT_DTYPE_U8: ert_parallel_for(a->pool, n, GRAIN, unary_uint8_t, &j); return ERT_OK;
    default: return ERT_E_UNSUPPORTED;
    }
}

/* ------------------------------------------------------------------ binary */

typedef struct binary_job {
    const ert_kargs *a;
    bcast b;
    int64_t row_len;
} binary_job;

/* One row: y[i] = op(a[i*sa], b[i*sb]) with sa, sb in {0, 1}. */
static void row_f32(ert_op op, const float *x, int64_t sx, const float *z, int64_t sz, void *yv, int64_t n) {
    float *y = yv;
    uint8_t *yb = yv;
#define LOOP(expr) for (int64_t i = 0; i < n; i++) { float p = x[i * sx], q = z[i * sz]; expr; }
    switch (op) {
    case ERT_OP_ADD: LOOP(y[i] = p + q) break;
    case ERT_OP_SUB: LOOP(y[i] = p - q) break;
    case ERT_OP_MUL: LOOP(y[i] = p * q) break;
    case ERT_OP_DIV: LOOP(y[i] = p / q) break;
    case ERT_OP_POW: /* x^2 (LayerNorm's variance as exporters decompose it): x*x is the correctly
                      * rounded square, libm's powf a call per element (a sixth of BERT-mini's time) */
        if (sz == 0 && n > 0 && z[0] == 2.0f) LOOP((void)q; y[i] = p * p)
        else LOOP(y[i] = powf(p, q))
        break;
    case ERT_OP_MIN: LOOP(y[i] = ert_min_nan(p, q)) break;
    case ERT_OP_MAX: LOOP(y[i] = ert_max_nan(p, q)) break;
    case ERT_OP_EQUAL: LOOP(yb[i] = p == q) break;
    case ERT_OP_LESS: LOOP(yb[i] = p < q) break;
    case ERT_OP_GREATER: LOOP(yb[i] = p > q) break;
    case ERT_OP_PRELU: LOOP(y[i] = p < 0 ? q * p : p) break;
    default: break;
    }
#undef LOOP
}

/* Integers: Add/Sub/Mul wrap (computed unsigned, no UB); Div truncates toward
 * zero, x/0 gives 0 and MIN/-1 wraps to MIN instead of trapping. */
#define ROW_INT(T, UT, SIGNED)                                                              \
    static void row_##T(ert_op op, const T *x, int64_t sx, const T *z, int64_t sz, void *yv, \
                        int64_t n) {                                                        \
        T *y = yv;                                                                          \
        uint8_t *yb = yv;                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T p = x[i * sx], q = z[i * sz];                                                 \
            switch (op) {                                                                   \
            case ERT_OP_ADD: y[i] = (T)((UT)p + (UT)q); break;                              \
            case ERT_OP_SUB: y[i] = (T)((UT)p - (UT)q); break;                              \
            case ERT_OP_MUL: y[i] = (T)((UT)p * (UT)q); break;                              \
            case ERT_OP_DIV: y[i] = q == 0 ? 0 : (SIGNED && q == (T)-1) ? (T)(0u - (UT)p) : (T)(p / q); break; \
            case ERT_OP_MIN: y[i] = p < q ? p : q; break;                                   \
            case ERT_OP_MAX: y[i] = p > q ? p : q; break;                                   \
            case ERT_OP_EQUAL: yb[i] = p == q; break;                                       \
            case ERT_OP_LESS: yb[i] = p < q; break;                                         \
            case ERT_OP_GREATER: yb[i] = p > q; break;                                      \
            default: break;                                                                 \
            }                                                                               \
        }                                                                                   \
    }
ROW_INT(int32_t, uint32_t, 1)
ROW_INT(int64_t, uint64_t, 1)
ROW_INT(int8_t, uint8_t, 1)
ROW_INT(uint8_t, uint8_t, 0)

static void row_bool(ert_op op, const uint8_t *x, int64_t sx, const uint8_t *z, int64_t sz, void *yv, int64_t n) {
    uint8_t *y = yv;
    (void)op; /* only Equal is allowed on bool by prepare */
    for (int64_t i = 0; i < n; i++) y[i] = (x[i * sx] != 0) == (z[i * sz] != 0);
}

/* Pow with mixed dtypes (base and exponent each f32/i32/i64): computed in
 * double, stored in the base's dtype; float -> int truncates and saturates
 * (ONNX reference: np.power(a, b).astype(a.dtype)). */
static double load_num(const void *p, ert_dtype dt, int64_t i) {
    switch (dt) {
    case ERT_DTYPE_F32: return ((const float *)p)[i];
    case ERT_DTYPE_I32: return ((const int32_t *)p)[i];
    default: return (double)((const int64_t *)p)[i];
    }
}

static void row_pow_mixed(const ert_kargs *a, const void *x, int64_t sx, const void *z, int64_t sz, void *y, int64_t n) {
    ert_dtype xt = a->in[0].dtype, zt = a->in[1].dtype;
    for (int64_t i = 0; i < n; i++) {
        double v = pow(load_num(x, xt, i * sx), load_num(z, zt, i * sz));
        switch (xt) {
        case ERT_DTYPE_F32: ((float *)y)[i] = (float)v; break;
        case ERT_DTYPE_I32: ((int32_t *)y)[i] = v != v ? 0 : v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v; break;
        default: ((int64_t *)y)[i] = v != v ? 0 : v <= -9.2233720368547758e18 ? INT64_MIN : v >= 9.2233720368547748e18 ? INT64_MAX : (int64_t)v; break;
        }
    }
}

/* One run of n outputs; x, z already offset; strides in elements. */
static void binary_run(const ert_kargs *a, const char *x, int64_t sx, const char *z, int64_t sz, void *y, int64_t n) {
    if (a->op == ERT_OP_POW && (a->in[0].dtype != ERT_DTYPE_F32 || a->in[1].dtype != ERT_DTYPE_F32)) {
        row_pow_mixed(a, x, sx, z, sz, y, n);
        return;
    }
    switch (a->in[0].dtype) {
    case ERT_DTYPE_F32: row_f32(a->op, (const float *)x, sx, (const float *)z, sz, y, n); break;
    case ERT_DTYPE_I32: row_int32_t(a->op, (const int32_t *)x, sx, (const int32_t *)z, sz, y, n); break;
    case ERT_DTYPE_I64: row_int64_t(a->op, (const int64_t *)x, sx, (const int64_t *)z, sz, y, n); break;
    case ERT_DTYPE_I8: row_int8_t(a->op, (const int8_t *)x, sx, (const int8_t *)z, sz, y, n); break;
    case ERT_DTYPE_U8: row_uint8_t(a->op, (const uint8_t *)x, sx, (const uint8_t *)z, sz, y, n); break;
    default: row_bool(a->op, (const uint8_t *)x, sx, (const uint8_t *)z, sz, y, n); break;
    }
}

static void binary_rows(void *arg, int64_t r0, int64_t r1) {
    binary_job *j = arg;
    const ert_kargs *a = j->a;
    int64_t xs = (int64_t)ert_dtype_size(a->in[0].dtype), zs = (int64_t)ert_dtype_size(a->in[1].dtype);
    int64_t os = (int64_t)ert_dtype_size(a->out[0].dtype);
    int nd = j->b.nd;
    int64_t sx = j->b.st[0][nd - 1], sz = j->b.st[1][nd - 1];
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[3];
        bcast_row(&j->b, r, off);
        binary_run(a, (const char *)a->in[0].data + off[0] * xs, sx, (const char *)a->in[1].data + off[1] * zs, sz,
                   (char *)a->out[0].data + r * j->row_len * os, j->row_len);
    }
}

/* Flat fast path (same shape, or one side a scalar): chunks of the whole output. */
static void binary_flat(void *arg, int64_t i0, int64_t i1) {
    binary_job *j = arg;
    const ert_kargs *a = j->a;
    int64_t xs = (int64_t)ert_dtype_size(a->in[0].dtype), zs = (int64_t)ert_dtype_size(a->in[1].dtype);
    int64_t os = (int64_t)ert_dtype_size(a->out[0].dtype);
    int64_t sx = a->in[0].n_elems == 1 ? 0 : 1, sz = a->in[1].n_elems == 1 ? 0 : 1;
    binary_run(a, (const char *)a->in[0].data + i0 * sx * xs, sx, (const char *)a->in[1].data + i0 * sz * zs, sz,
               (char *)a->out[0].data + i0 * os, i1 - i0);
}

static ert_status binary2(const ert_kargs *a) {
    binary_job j = {.a = a};
    int64_t n = a->out[0].n_elems;
    if (n == 0) return ERT_OK;
    if ((a->in[0].n_elems == n || a->in[0].n_elems == 1) && (a->in[1].n_elems == n || a->in[1].n_elems == 1)) {
        ert_parallel_for(a->pool, n, GRAIN, binary_flat, &j);
        return ERT_OK;
    }
    const ert_tview *ins[2] = {&a->in[0], &a->in[1]};
    bcast_init(&j.b, &a->out[0], ins, 2);
    j.row_len = j.b.dims[j.b.nd - 1];
    ert_parallel_for(a->pool, n / j.row_len, GRAIN / j.row_len + 1, binary_rows, &j);
    return ERT_OK;
}

ert_status ert_cpu_binary(const ert_kargs *a) {
    ert_dtype dt = a->in[0].dtype;
    bool num = dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_I32 || dt == ERT_DTYPE_I64 || dt == ERT_DTYPE_I8 || dt == ERT_DTYPE_U8;
    if (!(num || (dt == ERT_DTYPE_BOOL && a->op == ERT_OP_EQUAL))) return ERT_E_UNSUPPORTED;
    if (a->n_in == 2 && a->op != ERT_OP_MEAN) {
        ert_dtype zt = a->in[1].dtype;
        if (zt != dt && !(a->op == ERT_OP_POW && (zt == ERT_DTYPE_F32 || zt == ERT_DTYPE_I32 || zt == ERT_DTYPE_I64)))
            return ERT_E_UNSUPPORTED;
        return binary2(a);
    }
    /* variadic Min/Max/Mean: broadcast input 0 into the output, then fold
     * each further input in place (out has the full shape, so reading and
     * writing it at the same index is safe); Mean folds with Add and divides
     * by the count last, as ONNX's reference does */
    bool mean = a->op == ERT_OP_MEAN;
    if ((a->op != ERT_OP_MIN && a->op != ERT_OP_MAX && !mean) || a->n_in < 1) return ERT_E_UNSUPPORTED;
    if (mean && dt != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    ert_kargs e = *a;
    e.n_in = 1;
    ert_status st = ert_cpu_expand(&e);
    for (int k = 1; k < a->n_in && st == ERT_OK; k++) {
        if (a->in[k].dtype != dt) return ERT_E_UNSUPPORTED;
        ert_tview in2[2] = {a->out[0], a->in[k]};
        ert_kargs b = *a;
        b.op = mean ? ERT_OP_ADD : a->op;
        b.n_in = 2;
        b.in = in2;
        st = binary2(&b);
    }
    if (mean && st == ERT_OK) {
        float *y = a->out[0].data, cnt = (float)a->n_in;
        for (int64_t i = 0; i < a->out[0].n_elems; i++) y[i] /= cnt;
    }
    return st;
}

/* ------------------------------------------------------------------ Where, Expand */

/* Copy one element of `sz` bytes (1, 2, 4 or 8). */
static inline void copy_elem(void *d, const void *s, size_t sz) {
    switch (sz) {
    case 1: *(uint8_t *)d = *(const uint8_t *)s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    default: memcpy(d, s, 8); break;
    }
}

typedef struct bjob {
    const ert_kargs *a;
    bcast b;
    int64_t row_len;
    size_t esz;
} bjob;

/* Where: in[0] cond (bool), in[1] x, in[2] y, all broadcast to out. */
static void where_rows(void *arg, int64_t r0, int64_t r1) {
    bjob *j = arg;
    const ert_kargs *a = j->a;
    int nd = j->b.nd;
    int64_t sc = j->b.st[0][nd - 1], sx = j->b.st[1][nd - 1], sy = j->b.st[2][nd - 1];
    size_t es = j->esz;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[3];
        bcast_row(&j->b, r, off);
        const uint8_t *c = (const uint8_t *)a->in[0].data + off[0];
        const char *x = (const char *)a->in[1].data + off[1] * (int64_t)es;
        const char *y = (const char *)a->in[2].data + off[2] * (int64_t)es;
        char *o = (char *)a->out[0].data + r * j->row_len * (int64_t)es;
        for (int64_t i = 0; i < j->row_len; i++)
            copy_elem(o + i * (int64_t)es, c[i * sc] ? x + i * sx * (int64_t)es : y + i * sy * (int64_t)es, es);
    }
}

ert_status ert_cpu_where(const ert_kargs *a) {
    bjob j = {.a = a, .esz = ert_dtype_size(a->out[0].dtype)};
    if (j.esz == 0 || a->in[0].dtype != ERT_DTYPE_BOOL) return ERT_E_UNSUPPORTED;
    if (a->out[0].n_elems == 0) return ERT_OK;
    const ert_tview *ins[3] = {&a->in[0], &a->in[1], &a->in[2]};
    bcast_init(&j.b, &a->out[0], ins, 3);
    j.row_len = j.b.dims[j.b.nd - 1];
    ert_parallel_for(a->pool, a->out[0].n_elems / j.row_len, GRAIN / j.row_len + 1, where_rows, &j);
    return ERT_OK;
}

/* Expand: out is the broadcast of in[0] with the target shape. */
static void expand_rows(void *arg, int64_t r0, int64_t r1) {
    bjob *j = arg;
    const ert_kargs *a = j->a;
    int64_t sx = j->b.st[0][j->b.nd - 1];
    size_t es = j->esz;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[3];
        bcast_row(&j->b, r, off);
        const char *x = (const char *)a->in[0].data + off[0] * (int64_t)es;
        char *o = (char *)a->out[0].data + r * j->row_len * (int64_t)es;
        if (sx) memcpy(o, x, (size_t)j->row_len * es);
        else
            for (int64_t i = 0; i < j->row_len; i++) copy_elem(o + i * (int64_t)es, x, es);
    }
}

ert_status ert_cpu_expand(const ert_kargs *a) {
    bjob j = {.a = a, .esz = ert_dtype_size(a->out[0].dtype)};
    if (j.esz == 0) return ERT_E_UNSUPPORTED;
    if (a->out[0].n_elems == 0) return ERT_OK;
    const ert_tview *ins[1] = {&a->in[0]};
    bcast_init(&j.b, &a->out[0], ins, 1);
    j.row_len = j.b.dims[j.b.nd - 1];
    ert_parallel_for(a->pool, a->out[0].n_elems / j.row_len, GRAIN / j.row_len + 1, expand_rows, &j);
    return ERT_OK;
}
