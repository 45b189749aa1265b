/* Element-wise kernels: unary ops, numpy-broadcasting binary ops, Where, and
 * Expand (a broadcasting copy). Shapes were validated by prepare.
 *
 * Broadcasting: every input is viewed in the output's rank with stride 0 on
 * broadcast dims. The output is walked row by row (a row = the last dim); each
 * row is one call of a tight loop with per-input inner strides 0 or 1, so
 * same-shape, scalar and row-broadcast ((N,C) + (C)) cases all become simple
 * loops. Rows are split across the pool. */
#include "cpu_kernels.h"

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

typedef struct unary_job {
    const ert_kargs *a;
} unary_job;

static float gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
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
    default:
        if (a->op == ERT_OP_GELU && u->alpha != 0) { /* tanh form; the erf form is act GELU */
            for (int64_t i = b; i < e; i++) y[i] = gelu_tanh(x[i]);
            break;
        }
        if (y != x) memcpy(y + b, x + b, (size_t)(e - b) * sizeof *y);
        ert_cpu_act_inplace(y + b, e - b, &u->act);
        break;
    }
}

/* Integer Neg/Abs/Relu wrap like two's complement (INT_MIN stays INT_MIN) instead of overflowing. */
#define UNARY_INT(T, UT)                                                             \
    static void unary_##T(void *arg, int64_t b, int64_t e) {                         \
        const ert_kargs *a = ((unary_job *)arg)->a;                                  \
        const T *x = a->in[0].data;                                                  \
        T *y = a->out[0].data;                                                       \
        for (int64_t i = b; i < e; i++) {                                            \
            T v = x[i];                                                              \
            T neg = (T)(0u - (UT)v);                                                 \
            y[i] = a->op == ERT_OP_NEG ? neg : a->op == ERT_OP_ABS ? (v < 0 ? neg : v) \
                                                                   : (v > 0 ? v : 0); \
        }                                                                            \
    }
UNARY_INT(int32_t, uint32_t)
UNARY_INT(int64_t, uint64_t)

ert_status ert_cpu_unary(const ert_kargs *a) {
    unary_job j = {a};
    int64_t n = a->out[0].n_elems;
    switch (a->in[0].dtype) {
    case ERT_DTYPE_F32: ert_parallel_for(a->pool, n, GRAIN, unary_f32, &j); return ERT_OK;
    case ERT_DTYPE_I32: ert_parallel_for(a->pool, n, GRAIN, unary_int32_t, &j); return ERT_OK;
    case ERT_DTYPE_I64: ert_parallel_for(a->pool, n, GRAIN, unary_int64_t, &j); return ERT_OK;
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
    case ERT_OP_POW: LOOP(y[i] = powf(p, q)) break;
    /* NaN propagates like ONNX Min/Max */
    case ERT_OP_MIN: LOOP(y[i] = (p < q || isnan(p)) ? p : q) break;
    case ERT_OP_MAX: LOOP(y[i] = (p > q || isnan(p)) ? p : q) break;
    case ERT_OP_EQUAL: LOOP(yb[i] = p == q) break;
    case ERT_OP_LESS: LOOP(yb[i] = p < q) break;
    case ERT_OP_GREATER: LOOP(yb[i] = p > q) break;
    default: break;
    }
#undef LOOP
}

/* Integers: Add/Sub/Mul wrap (computed unsigned, no UB); Div truncates toward
 * zero, x/0 gives 0 and MIN/-1 wraps to MIN instead of trapping. */
#define ROW_INT(T, UT)                                                                      \
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
            case ERT_OP_DIV: y[i] = q == 0 ? 0 : q == -1 ? (T)(0u - (UT)p) : p / q; break;  \
            case ERT_OP_MIN: y[i] = p < q ? p : q; break;                                   \
            case ERT_OP_MAX: y[i] = p > q ? p : q; break;                                   \
            case ERT_OP_EQUAL: yb[i] = p == q; break;                                       \
            case ERT_OP_LESS: yb[i] = p < q; break;                                         \
            case ERT_OP_GREATER: yb[i] = p > q; break;                                      \
            default: break;                                                                 \
            }                                                                               \
        }                                                                                   \
    }
ROW_INT(int32_t, uint32_t)
ROW_INT(int64_t, uint64_t)

static void row_bool(ert_op op, const uint8_t *x, int64_t sx, const uint8_t *z, int64_t sz, void *yv, int64_t n) {
    uint8_t *y = yv;
    (void)op; /* only Equal is allowed on bool by prepare */
    for (int64_t i = 0; i < n; i++) y[i] = (x[i * sx] != 0) == (z[i * sz] != 0);
}

static void binary_rows(void *arg, int64_t r0, int64_t r1) {
    binary_job *j = arg;
    const ert_kargs *a = j->a;
    size_t isz = ert_dtype_size(a->in[0].dtype), osz = ert_dtype_size(a->out[0].dtype);
    int nd = j->b.nd;
    int64_t sx = j->b.st[0][nd - 1], sz = j->b.st[1][nd - 1];
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[3];
        bcast_row(&j->b, r, off);
        const char *x = (const char *)a->in[0].data + off[0] * (int64_t)isz;
        const char *z = (const char *)a->in[1].data + off[1] * (int64_t)isz;
        void *y = (char *)a->out[0].data + r * j->row_len * (int64_t)osz;
        switch (a->in[0].dtype) {
        case ERT_DTYPE_F32: row_f32(a->op, (const float *)x, sx, (const float *)z, sz, y, j->row_len); break;
        case ERT_DTYPE_I32: row_int32_t(a->op, (const int32_t *)x, sx, (const int32_t *)z, sz, y, j->row_len); break;
        case ERT_DTYPE_I64: row_int64_t(a->op, (const int64_t *)x, sx, (const int64_t *)z, sz, y, j->row_len); break;
        default: row_bool(a->op, (const uint8_t *)x, sx, (const uint8_t *)z, sz, y, j->row_len); break;
        }
    }
}

/* Flat fast path (same shape, or one side a scalar): chunks of the whole output. */
static void binary_flat(void *arg, int64_t i0, int64_t i1) {
    binary_job *j = arg;
    const ert_kargs *a = j->a;
    size_t isz = ert_dtype_size(a->in[0].dtype), osz = ert_dtype_size(a->out[0].dtype);
    int64_t sx = a->in[0].n_elems == 1 ? 0 : 1, sz = a->in[1].n_elems == 1 ? 0 : 1;
    const char *x = (const char *)a->in[0].data + i0 * sx * (int64_t)isz;
    const char *z = (const char *)a->in[1].data + i0 * sz * (int64_t)isz;
    void *y = (char *)a->out[0].data + i0 * (int64_t)osz;
    int64_t n = i1 - i0;
    switch (a->in[0].dtype) {
    case ERT_DTYPE_F32: row_f32(a->op, (const float *)x, sx, (const float *)z, sz, y, n); break;
    case ERT_DTYPE_I32: row_int32_t(a->op, (const int32_t *)x, sx, (const int32_t *)z, sz, y, n); break;
    case ERT_DTYPE_I64: row_int64_t(a->op, (const int64_t *)x, sx, (const int64_t *)z, sz, y, n); break;
    default: row_bool(a->op, (const uint8_t *)x, sx, (const uint8_t *)z, sz, y, n); break;
    }
}

ert_status ert_cpu_binary(const ert_kargs *a) {
    ert_dtype dt = a->in[0].dtype;
    if (dt != a->in[1].dtype ||
        !(dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_I32 || dt == ERT_DTYPE_I64 || dt == ERT_DTYPE_BOOL))
        return ERT_E_UNSUPPORTED;
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
    int64_t rows = n / j.row_len;
    int64_t grain = GRAIN / j.row_len + 1;
    ert_parallel_for(a->pool, rows, grain, binary_rows, &j);
    return ERT_OK;
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
