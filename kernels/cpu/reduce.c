/* ReduceMean / ReduceSum / ReduceMax (and the others: reduce_more_range) over
 * the axes prepare resolved
 * (params->axis.axes, sorted, positive; n_axes 0 = identity copy).
 *
 * x is viewed as kept dims K and reduced dims R. Each output element is the
 * reduction, over an odometer on R, of x at base(K index) + offset(R index).
 * f32 sums accumulate in double so long reductions stay accurate; i64 sums
 * wrap (computed unsigned). Empty reductions give 0 (Sum), NaN (Mean) and the
 * dtype's lowest value (Max: -inf / INT64_MIN), like ONNX. */
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

typedef struct reduce_job {
    const ert_kargs *a;
    int nk, nr;
    int64_t kdim[ERT_MAX_DIMS], kst[ERT_MAX_DIMS]; /* kept dims and their input strides */
    int64_t rdim[ERT_MAX_DIMS], rst[ERT_MAX_DIMS]; /* reduced dims and strides */
    int64_t n_red;
} reduce_job;

/* Input offset of output element o's first reduced element. */
static int64_t reduce_base(const reduce_job *j, int64_t o) {
    int64_t base = 0;
    for (int d = j->nk - 1; d >= 0; d--) {
        base += (o % j->kdim[d]) * j->kst[d];
        o /= j->kdim[d];
    }
    return base;
}

/* Advance the odometer idx over the outer reduced dims (all but the
 * innermost, walked by the caller): the next row's offset. */
static int64_t reduce_next(const reduce_job *j, int64_t *idx, int64_t off) {
    for (int d = j->nr - 2; d >= 0; d--) {
        off += j->rst[d];
        if (++idx[d] < j->rdim[d]) break;
        off -= idx[d] * j->rst[d];
        idx[d] = 0;
    }
    return off;
}

static void reduce_range(void *arg, int64_t o0, int64_t o1) {
    const reduce_job *j = arg;
    const ert_kargs *a = j->a;
    bool is_f32 = a->in[0].dtype == ERT_DTYPE_F32;
    for (int64_t o = o0; o < o1; o++) {
        int64_t base = reduce_base(j, o);
        int64_t idx[ERT_MAX_DIMS] = {0};
        double sum = 0, mx = -INFINITY;
        uint64_t isum = 0;
        int64_t imx = INT64_MIN;
        int64_t off = base;
        /* the innermost reduced dim is walked in a plain loop */
        int64_t in_n = j->nr ? j->rdim[j->nr - 1] : 1, in_s = j->nr ? j->rst[j->nr - 1] : 0;
        int64_t outer = in_n ? j->n_red / in_n : 0;
        for (int64_t t = 0; t < outer; t++) {
            if (is_f32) {
                const float *x = (const float *)a->in[0].data + off;
                if (a->op == ERT_OP_REDUCE_MAX) {
                    for (int64_t i = 0; i < in_n; i++) {
                        double v = x[i * in_s];
                        if (v > mx || isnan(v)) mx = v;
                        if (isnan(mx)) break;
                    }
                } else {
                    for (int64_t i = 0; i < in_n; i++) sum += x[i * in_s];
                }
            } else {
                const int64_t *x = (const int64_t *)a->in[0].data + off;
                if (a->op == ERT_OP_REDUCE_MAX) {
                    for (int64_t i = 0; i < in_n; i++) imx = x[i * in_s] > imx ? x[i * in_s] : imx;
                } else {
                    for (int64_t i = 0; i < in_n; i++) isum += (uint64_t)x[i * in_s];
                }
            }
            off = reduce_next(j, idx, off);
        }
        if (is_f32) {
            float *y = a->out[0].data;
            if (a->op == ERT_OP_REDUCE_MAX) y[o] = (float)mx;
            else if (a->op == ERT_OP_REDUCE_MEAN) y[o] = j->n_red ? (float)(sum / (double)j->n_red) : NAN;
            else y[o] = (float)sum;
        } else {
            int64_t *y = a->out[0].data;
            y[o] = a->op == ERT_OP_REDUCE_MAX ? imx : (int64_t)isum;
        }
    }
}

/* The other reductions (Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp), one
 * accumulator in double per output, walked like reduce_range. Empty
 * reductions give ONNX's identities: Min +inf / INT64_MAX, Prod 1, L1, L2 and
 * SumSquare 0, LogSum and LogSumExp -inf. LogSumExp keeps a running maximum
 * m and s = sum exp(x - m) (rescaled when m grows), so large inputs do not
 * overflow; a NaN propagates. i64 (Min, Prod only) is exact: Prod wraps. */
static void reduce_more_range(void *arg, int64_t o0, int64_t o1) {
    const reduce_job *j = arg;
    const ert_kargs *a = j->a;
    ert_op op = a->op;
    bool is_f32 = a->in[0].dtype == ERT_DTYPE_F32;
    for (int64_t o = o0; o < o1; o++) {
        int64_t base = reduce_base(j, o);
        int64_t idx[ERT_MAX_DIMS] = {0};
        double s = op == ERT_OP_REDUCE_PROD ? 1.0 : op == ERT_OP_REDUCE_MIN ? INFINITY : 0.0, m = -INFINITY;
        uint64_t iprod = 1;
        int64_t imin = INT64_MAX;
        int64_t off = base, in_n = j->rdim[j->nr - 1], in_s = j->rst[j->nr - 1];
        int64_t outer = in_n ? j->n_red / in_n : 0;
        for (int64_t t = 0; t < outer; t++) {
            for (int64_t i = 0; i < in_n; i++) {
                if (!is_f32) {
                    int64_t v = ((const int64_t *)a->in[0].data)[off + i * in_s];
                    if (op == ERT_OP_REDUCE_MIN) imin = v < imin ? v : imin;
                    else iprod *= (uint64_t)v;
                    continue;
                }
                double v = ((const float *)a->in[0].data)[off + i * in_s];
                switch (op) {
                case ERT_OP_REDUCE_MIN:
                    if (v < s || isnan(v)) s = isnan(s) ? s : v;
                    break;
                case ERT_OP_REDUCE_PROD: s *= v; break;
                case ERT_OP_REDUCE_L1: s += fabs(v); break;
                case ERT_OP_REDUCE_L2: case ERT_OP_REDUCE_SUM_SQUARE: s += v * v; break;
                case ERT_OP_REDUCE_LOG_SUM: s += v; break;
                default: /* LogSumExp */
                    if (isnan(v) || isnan(m)) m = NAN;
                    else if (v > m) {
                        s = s * exp(m - v) + 1.0;
                        m = v;
                    } else if (v != -INFINITY) s += exp(v - m);
                    break;
                }
            }
            off = reduce_next(j, idx, off);
        }
        if (!is_f32) {
            ((int64_t *)a->out[0].data)[o] = op == ERT_OP_REDUCE_MIN ? imin : (int64_t)iprod;
            continue;
        }
        double r = s;
        if (op == ERT_OP_REDUCE_L2) r = sqrt(s);
        else if (op == ERT_OP_REDUCE_LOG_SUM) r = log(s);
        else if (op == ERT_OP_REDUCE_LOG_SUM_EXP) r = isnan(m) ? NAN : m == -INFINITY ? -INFINITY : m + log(s);
        ((float *)a->out[0].data)[o] = (float)r;
    }
}

ert_status ert_cpu_reduce(const ert_kargs *a) {
    const ert_axis_params *p = &a->params->axis;
    const ert_tview *x = &a->in[0];
    if (x->dtype != ERT_DTYPE_F32 && x->dtype != ERT_DTYPE_I64) return ERT_E_UNSUPPORTED;
    if (p->n_axes == 0) { /* noop_with_empty_axes */
        if (a->out[0].data != x->data) memcpy(a->out[0].data, x->data, (size_t)x->n_elems * ert_dtype_size(x->dtype));
        return ERT_OK;
    }
    reduce_job j = {.a = a, .n_red = 1};
    bool red[ERT_MAX_DIMS] = {false};
    for (int64_t i = 0; i < p->n_axes; i++) red[p->axes[i]] = true;
    int64_t s = 1, st[ERT_MAX_DIMS];
    for (int d = x->ndim - 1; d >= 0; d--) {
        st[d] = s;
        s *= x->dims[d];
    }
    for (int d = 0; d < x->ndim; d++) {
        if (red[d]) {
            j.rdim[j.nr] = x->dims[d];
            j.rst[j.nr++] = st[d];
            j.n_red *= x->dims[d];
        } else {
            j.kdim[j.nk] = x->dims[d];
            j.kst[j.nk++] = st[d];
        }
    }
    int64_t n_out = a->out[0].n_elems;
    bool more = a->op != ERT_OP_REDUCE_MEAN && a->op != ERT_OP_REDUCE_SUM && a->op != ERT_OP_REDUCE_MAX;
    ert_parallel_for(a->pool, n_out, 16384 / (j.n_red + 1) + 1, more ? reduce_more_range : reduce_range, &j);
    return ERT_OK;
}

/* ArgMax/ArgMin: x viewed as (outer, n, inner) around the axis; y is (outer,
 * inner) i64. Ties keep the first index, or the last with select_last_index.
 * A NaN wins over any number (numpy's argmax/argmin return the first NaN). */
#define ARG_LOOP(T, ISNAN)                                                                  \
    static void arg_##T(const ert_kargs *a, int64_t outer, int64_t n, int64_t inner) {      \
        const T *x = a->in[0].data;                                                         \
        int64_t *y = a->out[0].data;                                                        \
        bool is_max = a->op == ERT_OP_ARGMAX, last = a->params->axis.select_last_index;     \
        for (int64_t o = 0; o < outer; o++)                                                 \
            for (int64_t i = 0; i < inner; i++) {                                           \
                const T *row = x + o * n * inner + i;                                       \
                T best = row[0];                                                            \
                int64_t bi = 0;                                                             \
                for (int64_t k = 1; k < n; k++) {                                           \
                    T v = row[k * inner];                                                   \
                    bool vn = ISNAN(v), bn = ISNAN(best);                                   \
                    bool better = (vn && !bn) || (!vn && !bn && (is_max ? v > best : v < best)); \
                    bool tie = (vn && bn) || (!vn && !bn && v == best);                     \
                    if (better || (last && tie)) {                                          \
                        best = v;                                                           \
                        bi = k;                                                             \
                    }                                                                       \
                }                                                                           \
                y[o * inner + i] = bi;                                                      \
            }                                                                               \
    }
#define NO_NAN(v) ((void)(v), false)
ARG_LOOP(float, isnan)
ARG_LOOP(int32_t, NO_NAN)
ARG_LOOP(int64_t, NO_NAN)
ARG_LOOP(int8_t, NO_NAN)
ARG_LOOP(uint8_t, NO_NAN)
#undef NO_NAN
#undef ARG_LOOP

ert_status ert_cpu_arg(const ert_kargs *a) {
    const ert_tview *x = &a->in[0];
    int64_t ax = a->params->axis.axis, outer = 1, inner = 1, n = x->ndim > 0 ? x->dims[ax] : 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d < ax) outer *= x->dims[d];
        else if (d > ax) inner *= x->dims[d];
    }
    if (outer == 0 || inner == 0) return ERT_OK; /* nothing to write */
    if (n <= 0) return ERT_E_SHAPE;               /* prepare refuses an empty axis */
    switch (x->dtype) {
    case ERT_DTYPE_F32: arg_float(a, outer, n, inner); break;
    case ERT_DTYPE_I32: arg_int32_t(a, outer, n, inner); break;
    case ERT_DTYPE_I64: arg_int64_t(a, outer, n, inner); break;
    case ERT_DTYPE_I8: arg_int8_t(a, outer, n, inner); break;
    case ERT_DTYPE_U8: arg_uint8_t(a, outer, n, inner); break;
    default: return ERT_E_UNSUPPORTED;
    }
    return ERT_OK;
}
