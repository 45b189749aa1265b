/* Index-driven ops: shape inference for ScatterND (opset 11+, reduction
 * opset 16/18), ScatterElements (opset 11+, reduction 16/18) and
 * GatherElements (opset 11+). Exporters emit ScatterND for slice assignment
 * (torchvision's Swin-T builds its shifted-window mask with it) and the
 * Elements pair for torch.scatter / torch.gather.
 *
 * ScatterND(data (r dims), indices i64 (q dims, last = k <= r), updates of
 *   shape indices[:-1] + data[k:]) -> data with each k-tuple's slice
 *   replaced (or combined by add/mul/max/min).
 * ScatterElements(data, indices, updates), all of rank r, indices and updates
 *   of one shape, each dim at most data's except on axis -> data with
 *   updates[i] written at i with its axis coordinate replaced by indices[i].
 * GatherElements(data, indices) -> y of indices' shape, the same mapping read.
 * Index values may be negative (counted from the end). Constant indices are
 * checked here; computed ones by the kernel before it writes anything
 * (kernels/cpu/scatter.c), which then fails with ERT_E_ARG. */
#include "ert_internal.h"

#include <string.h>

static ert_status scatter_reduction(ert_prep *p, ert_dtype dt) {
    const char *r = p->node ? ert_attr_str(p->node, "reduction", "none") : "none";
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    for (int k = 0; k < 5; k++)
        if (strcmp(r, names[k]) == 0) {
            p->params->scatter.reduction = (ert_scatter_red)k;
            if (k && dt != ERT_DTYPE_F32 && dt != ERT_DTYPE_I32 && dt != ERT_DTYPE_I64)
                return ert_prep_error(p, ERT_E_UNSUPPORTED, "reduction '%s' on dtype %s (f32, i32, i64 only)", r,
                                      ert_dtype_name(dt));
            return ERT_OK;
        }
    return ert_prep_error(p, ERT_E_FORMAT, "reduction '%s' (none, add, mul, max or min expected)", r);
}

static ert_status check_shape(ert_prep *p, int k) {
    int64_t n;
    const ert_tinfo *t = &p->in[k];
    if (t->ndim < 0 || t->ndim > ERT_MAX_DIMS || !ert_dims_nelems(t->ndim, t->dims, &n))
        return ert_prep_error(p, ERT_E_SHAPE, "input %d has an invalid shape", k);
    if (ert_dtype_size(t->dtype) == 0)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "input %d has dtype %s", k, ert_dtype_name(t->dtype));
    return ERT_OK;
}

/* Every constant index value i of input k in [-dim(i), dim(i)), where dim(i)
 * is data's dim stride-selected by dim_of. */
static ert_status check_const_indices(ert_prep *p, const ert_tinfo *ind, int64_t (*dim_of)(const ert_prep *, int64_t)) {
    if (!ind->const_data) return ERT_OK;
    int64_t n;
    (void)ert_dims_nelems(ind->ndim, ind->dims, &n);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ind->dtype == ERT_DTYPE_I64 ? ((const int64_t *)ind->const_data)[i]
                                                : ((const int32_t *)ind->const_data)[i];
        int64_t dim = dim_of(p, i);
        if (v < -dim || v >= dim)
            return ert_prep_error(p, ERT_E_ARG, "index %lld (element %lld of indices) out of range for a dim of %lld",
                                  (long long)v, (long long)i, (long long)dim);
    }
    return ERT_OK;
}

static int64_t nd_dim(const ert_prep *p, int64_t i) {
    const ert_tinfo *ind = &p->in[1];
    return p->in[0].dims[i % ind->dims[ind->ndim - 1]];
}

static int64_t elem_dim(const ert_prep *p, int64_t i) {
    (void)i;
    return p->in[0].dims[p->params->scatter.axis];
}

ert_status ert_prepare_scatter_nd(ert_prep *p) {
    const ert_tinfo *x = &p->in[0], *ind = &p->in[1], *upd = &p->in[2];
    ert_status st;
    memset(&p->params->scatter, 0, sizeof p->params->scatter);
    for (int k = 0; k < 3; k++)
        if ((st = check_shape(p, k))) return st;
    if (ind->dtype != ERT_DTYPE_I64)
        return ert_prep_error(p, ERT_E_SHAPE, "indices have dtype %s, expected i64", ert_dtype_name(ind->dtype));
    if (upd->dtype != x->dtype)
        return ert_prep_error(p, ERT_E_SHAPE, "updates have dtype %s, data %s", ert_dtype_name(upd->dtype),
                              ert_dtype_name(x->dtype));
    if (x->ndim < 1 || ind->ndim < 1) return ert_prep_error(p, ERT_E_SHAPE, "data and indices must have rank >= 1");
    int64_t k = ind->dims[ind->ndim - 1];
    if (k < 1 || k > x->ndim)
        return ert_prep_error(p, ERT_E_SHAPE, "indices' last dim is %lld, expected 1 to data's rank %d", (long long)k,
                              x->ndim);
    int want = ind->ndim - 1 + x->ndim - (int)k;
    bool ok = upd->ndim == want;
    for (int d = 0; ok && d < want; d++)
        ok = upd->dims[d] == (d < ind->ndim - 1 ? ind->dims[d] : x->dims[k + d - (ind->ndim - 1)]);
    if (!ok) return ert_prep_error(p, ERT_E_SHAPE, "updates' shape is not indices.shape[:-1] + data.shape[%lld:]", (long long)k);
    if ((st = scatter_reduction(p, x->dtype)) || (st = check_const_indices(p, ind, nd_dim))) return st;
    return ert_prep_out_as_in0(p);
}

/* data and indices (and updates) of one rank; indices' dims within data's
 * off the axis. */
static ert_status elements_common(ert_prep *p, bool scatter) {
    const ert_tinfo *x = &p->in[0], *ind = &p->in[1];
    ert_status st;
    memset(&p->params->scatter, 0, sizeof p->params->scatter);
    for (int k = 0; k < (scatter ? 3 : 2); k++)
        if ((st = check_shape(p, k))) return st;
    if (ind->dtype != ERT_DTYPE_I64 && ind->dtype != ERT_DTYPE_I32)
        return ert_prep_error(p, ERT_E_SHAPE, "indices have dtype %s, expected i32 or i64", ert_dtype_name(ind->dtype));
    if (x->ndim < 1 || ind->ndim != x->ndim)
        return ert_prep_error(p, ERT_E_SHAPE, "data (rank %d) and indices (rank %d) need one rank >= 1", x->ndim, ind->ndim);
    int64_t axis = p->node ? ert_attr_int(p->node, "axis", 0) : 0;
    if (axis < -x->ndim || axis >= x->ndim)
        return ert_prep_error(p, ERT_E_ARG, "axis %lld out of range for rank %d", (long long)axis, x->ndim);
    p->params->scatter.axis = axis < 0 ? axis + x->ndim : axis;
    for (int d = 0; d < x->ndim; d++)
        if (d != p->params->scatter.axis && ind->dims[d] > x->dims[d])
            return ert_prep_error(p, ERT_E_SHAPE, "indices' dim %d is %lld, data's only %lld", d, (long long)ind->dims[d],
                                  (long long)x->dims[d]);
    if (scatter) {
        const ert_tinfo *upd = &p->in[2];
        if (upd->dtype != x->dtype)
            return ert_prep_error(p, ERT_E_SHAPE, "updates have dtype %s, data %s", ert_dtype_name(upd->dtype),
                                  ert_dtype_name(x->dtype));
        if (upd->ndim != ind->ndim || memcmp(upd->dims, ind->dims, (size_t)ind->ndim * sizeof ind->dims[0]))
            return ert_prep_error(p, ERT_E_SHAPE, "updates and indices have different shapes");
        if ((st = scatter_reduction(p, x->dtype))) return st;
    }
    return check_const_indices(p, ind, elem_dim);
}

ert_status ert_prepare_scatter_elements(ert_prep *p) {
    ert_status st = elements_common(p, true);
    return st ? st : ert_prep_out_as_in0(p);
}

ert_status ert_prepare_gather_elements(ert_prep *p) {
    ert_status st = elements_common(p, false);
    if (st) return st;
    ert_tinfo *o = &p->out[0];
    memset(o, 0, sizeof *o);
    o->dtype = p->in[0].dtype;
    o->ndim = p->in[1].ndim;
    memcpy(o->dims, p->in[1].dims, sizeof o->dims);
    return ERT_OK;
}
