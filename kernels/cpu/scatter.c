/* ScatterND, ScatterElements, GatherElements on the CPU (shapes checked by
 * core/ops/scatter.c). Indices may come from the graph at run time, so every
 * index is checked before anything is written: a bad one gives ERT_E_ARG and
 * leaves the output untouched. Duplicate indices apply in order (ONNX leaves
 * the result of duplicates without a reduction undefined). Single-threaded:
 * these ops touch few elements in the models that have them. */
#include "cpu_kernels.h"

#include <string.h>

static int64_t index_at(const ert_tview *ind, int64_t i) {
    return ind->dtype == ERT_DTYPE_I64 ? ((const int64_t *)ind->data)[i] : ((const int32_t *)ind->data)[i];
}

/* out[o] (op)= upd[u] for one element of dtype dt under a reduction. */
#define COMBINE(T)                                                      \
    do {                                                                \
        T *y = (T *)out + o;                                            \
        T v = ((const T *)upd)[u];                                      \
        switch (red) {                                                  \
        case ERT_SCATTER_ADD: *y = (T)(*y + v); break;                  \
        case ERT_SCATTER_MUL: *y = (T)(*y * v); break;                  \
        case ERT_SCATTER_MAX: *y = *y > v ? *y : v; break;              \
        case ERT_SCATTER_MIN: *y = *y < v ? *y : v; break;              \
        default: *y = v; break;                                         \
        }                                                               \
    } while (0)

static void combine(void *out, int64_t o, const void *upd, int64_t u, int64_t n, ert_dtype dt, ert_scatter_red red) {
    size_t es = ert_dtype_size(dt);
    if (red == ERT_SCATTER_NONE) {
        memcpy((char *)out + o * (int64_t)es, (const char *)upd + u * (int64_t)es, (size_t)n * es);
        return;
    }
    for (int64_t e = 0; e < n; e++, o++, u++) {
        if (dt == ERT_DTYPE_F32) COMBINE(float);
        else if (dt == ERT_DTYPE_I32) COMBINE(int32_t);
        else COMBINE(int64_t);
    }
}
#undef COMBINE

static void copy_data(const ert_kargs *a) {
    const ert_tview *x = &a->in[0];
    if (a->out[0].data != x->data)
        memcpy(a->out[0].data, x->data, (size_t)x->n_elems * ert_dtype_size(x->dtype));
}

/* data (r dims) viewed as (d0..d{k-1}) x slice; update u's k-tuple names the
 * slice (the offset of its first element) that updates[u * slice ..] fill. */
static bool nd_offset(const ert_tview *x, const ert_tview *ind, int64_t u, int64_t k, int64_t slice, int64_t *off) {
    int64_t o = 0;
    for (int64_t d = 0; d < k; d++) {
        int64_t v = index_at(ind, u * k + d), n = x->dims[d];
        if (v < 0) v += n;
        if (v < 0 || v >= n) return false;
        o = o * n + v;
    }
    *off = o * slice;
    return true;
}

ert_status ert_cpu_scatter_nd(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *ind = &a->in[1], *upd = &a->in[2];
    int64_t k = ind->dims[ind->ndim - 1], slice = 1, off;
    for (int d = (int)k; d < x->ndim; d++) slice *= x->dims[d];
    int64_t n_upd = k ? ind->n_elems / k : 0;
    for (int64_t u = 0; u < n_upd; u++)
        if (!nd_offset(x, ind, u, k, slice, &off)) return ERT_E_ARG;
    copy_data(a);
    for (int64_t u = 0; u < n_upd; u++) {
        (void)nd_offset(x, ind, u, k, slice, &off);
        combine(a->out[0].data, off, upd->data, u * slice, slice, x->dtype, a->params->scatter.reduction);
    }
    return ERT_OK;
}

/* Element i of indices (C order over indices' dims) -> the data offset it
 * names (its coordinates, with the axis one replaced by the index value), or
 * -1 if the value is out of range. */
static int64_t elem_offset(const ert_tview *x, const ert_tview *ind, int64_t axis, int64_t i) {
    int64_t rem = i, off = 0, stride = 1;
    for (int d = ind->ndim - 1; d >= 0; d--) {
        int64_t c = rem % ind->dims[d];
        rem /= ind->dims[d];
        if (d == axis) {
            c = index_at(ind, i);
            if (c < 0) c += x->dims[d];
            if (c < 0 || c >= x->dims[d]) return -1;
        }
        off += c * stride;
        stride *= x->dims[d];
    }
    return off;
}

ert_status ert_cpu_scatter_elements(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *ind = &a->in[1];
    int64_t axis = a->params->scatter.axis;
    for (int64_t i = 0; i < ind->n_elems; i++)
        if (elem_offset(x, ind, axis, i) < 0) return ERT_E_ARG;
    copy_data(a);
    for (int64_t i = 0; i < ind->n_elems; i++)
        combine(a->out[0].data, elem_offset(x, ind, axis, i), a->in[2].data, i, 1, x->dtype, a->params->scatter.reduction);
    return ERT_OK;
}

ert_status ert_cpu_gather_elements(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *ind = &a->in[1];
    int64_t axis = a->params->scatter.axis;
    size_t es = ert_dtype_size(x->dtype);
    for (int64_t i = 0; i < ind->n_elems; i++)
        if (elem_offset(x, ind, axis, i) < 0) return ERT_E_ARG;
    for (int64_t i = 0; i < ind->n_elems; i++)
        memcpy((char *)a->out[0].data + i * (int64_t)es, (const char *)x->data + elem_offset(x, ind, axis, i) * (int64_t)es, es);
    return ERT_OK;
}
