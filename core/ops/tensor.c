/* prepare() for data-movement and shape ops (Resize is in ops_resize.c).
 * Every shape-carrying input (Reshape's shape, Slice's starts, ...) must be a
 * constant so output shapes are concrete at session create; the values are
 * treated as hostile: ranges, duplicates and size overflow are all checked
 * here so the kernels (kernels/cpu/shape.c, shape_gen.c, eltwise.c) can trust
 * the shapes they get. */
#include "ert_internal.h"

#include <math.h>
#include <string.h>

/* Input k if present (given and not omitted), else NULL. */
static const ert_tinfo *opt_in(const ert_prep *p, int k) {
    if (k >= p->n_in || p->in[k].dtype == ERT_DTYPE_UNDEFINED) return NULL;
    return &p->in[k];
}

static ert_status check_in(ert_prep *p, int k) {
    const ert_tinfo *t = &p->in[k];
    int64_t n;
    if (t->ndim < 0 || t->ndim > ERT_MAX_DIMS || !ert_dims_nelems(t->ndim, t->dims, &n) || n < 0)
        return ert_prep_error(p, ERT_E_SHAPE, "input %d has an invalid shape", k);
    if (ert_dtype_size(t->dtype) == 0)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "input %d has dtype %s", k, ert_dtype_name(t->dtype));
    return ERT_OK;
}

/* Read constant integer input k (0-d or 1-D, i32/i64, at most `max` values)
 * into out; *n gets the count. */
static ert_status const_ints(ert_prep *p, int k, const char *what, int64_t *out, int max, int *n) {
    const ert_tinfo *t = opt_in(p, k);
    if (!t) return ert_prep_error(p, ERT_E_ARG, "%s (input %d) is missing", what, k);
    if (!t->const_data) return ert_prep_error(p, ERT_E_UNSUPPORTED, "%s (input %d) must be a constant", what, k);
    if (t->ndim > 1) return ert_prep_error(p, ERT_E_SHAPE, "%s (input %d) must be 1-D", what, k);
    if (t->dtype != ERT_DTYPE_I64 && t->dtype != ERT_DTYPE_I32)
        return ert_prep_error(p, ERT_E_SHAPE, "%s (input %d) has dtype %s, expected i64", what, k, ert_dtype_name(t->dtype));
    *n = ert_tinfo_ints(t, out, max);
    if (*n < 0) return ert_prep_error(p, ERT_E_SHAPE, "%s (input %d) has more than %d values", what, k, max);
    return ERT_OK;
}

/* axis in [-rank, rank) (or [-rank, rank] if `incl`) -> [0, rank). */
static ert_status norm_axis(ert_prep *p, int64_t axis, int rank, bool incl, int64_t *out) {
    int64_t hi = incl ? rank : rank - 1;
    *out = 0;
    if (axis < -(int64_t)rank || axis > hi)
        return ert_prep_error(p, ERT_E_ARG, "axis %lld out of range for rank %d", (long long)axis, rank);
    *out = axis < 0 ? axis + rank : axis;
    return ERT_OK;
}

static ert_status prod_dims(ert_prep *p, const int64_t *d, int n, int64_t *out) {
    if (!ert_dims_nelems(n, d, out)) return ert_prep_error(p, ERT_E_SHAPE, "element count overflows");
    return ERT_OK;
}

static void out_like(ert_prep *p, ert_dtype dt, int ndim, const int64_t *dims) {
    ert_tinfo *o = &p->out[0];
    memset(o, 0, sizeof *o);
    o->dtype = dt;
    o->ndim = ndim;
    if (ndim) memcpy(o->dims, dims, (size_t)ndim * sizeof dims[0]);
}

/* ------------------------------------------------------------------ views */

/* Flatten(axis): (d0..d{axis-1}) x (d{axis}..). */
ert_status ert_prepare_flatten(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int64_t axis, d[2];
    if ((st = norm_axis(p, ert_attr_int(p->node, "axis", 1), x->ndim, true, &axis))) return st;
    if ((st = prod_dims(p, x->dims, (int)axis, &d[0])) ||
        (st = prod_dims(p, x->dims + axis, x->ndim - (int)axis, &d[1])))
        return st;
    out_like(p, x->dtype, 2, d);
    return ERT_OK;
}

/* Reshape(x, shape): 0 copies the input dim (unless allowzero=1), one -1 is inferred. */
ert_status ert_prepare_reshape(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int64_t shape[ERT_MAX_DIMS], total, known = 1;
    int n, infer = -1;
    if ((st = const_ints(p, 1, "shape", shape, ERT_MAX_DIMS, &n))) return st;
    bool allowzero = ert_attr_int(p->node, "allowzero", 0) != 0;
    (void)prod_dims(p, x->dims, x->ndim, &total);
    for (int i = 0; i < n; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) return ert_prep_error(p, ERT_E_SHAPE, "shape has more than one -1");
            infer = i;
            continue;
        }
        if (shape[i] == 0 && !allowzero) {
            if (i >= x->ndim) return ert_prep_error(p, ERT_E_SHAPE, "shape[%d] = 0 but the input has rank %d", i, x->ndim);
            shape[i] = x->dims[i];
        }
        if (shape[i] < 0) return ert_prep_error(p, ERT_E_SHAPE, "shape[%d] = %lld is negative", i, (long long)shape[i]);
        if (__builtin_mul_overflow(known, shape[i], &known))
            return ert_prep_error(p, ERT_E_SHAPE, "shape element count overflows");
    }
    if (infer >= 0) {
        if (known == 0 || total % known != 0)
            return ert_prep_error(p, ERT_E_SHAPE, "cannot infer -1: %lld elements into blocks of %lld",
                                  (long long)total, (long long)known);
        shape[infer] = total / known;
    } else if (known != total) {
        return ert_prep_error(p, ERT_E_SHAPE, "shape has %lld elements, the input has %lld", (long long)known, (long long)total);
    }
    out_like(p, x->dtype, n, shape);
    return ERT_OK;
}

/* Axes for Squeeze/Unsqueeze: constant input 1 (opset 13) or the "axes"
 * attribute (older opsets). *n = -1 when neither is given. */
static ert_status squeeze_axes(ert_prep *p, int64_t *axes, int *n) {
    if (opt_in(p, 1)) return const_ints(p, 1, "axes", axes, ERT_MAX_DIMS, n);
    *n = ert_attr_ints(p->node, "axes", axes, ERT_MAX_DIMS);
    if (*n > ERT_MAX_DIMS) return ert_prep_error(p, ERT_E_SHAPE, "too many axes");
    return ERT_OK;
}

ert_status ert_prepare_squeeze(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int64_t axes[ERT_MAX_DIMS], dims[ERT_MAX_DIMS];
    int n, nd = 0;
    if ((st = squeeze_axes(p, axes, &n))) return st;
    bool drop[ERT_MAX_DIMS] = {false};
    if (n <= 0) {
        for (int d = 0; d < x->ndim; d++) drop[d] = x->dims[d] == 1;
    }
    for (int i = 0; i < n; i++) {
        int64_t a;
        if ((st = norm_axis(p, axes[i], x->ndim, false, &a))) return st;
        if (x->dims[a] != 1)
            return ert_prep_error(p, ERT_E_SHAPE, "cannot squeeze axis %lld of size %lld", (long long)axes[i], (long long)x->dims[a]);
        drop[a] = true; /* a repeated axis is harmless here */
    }
    for (int d = 0; d < x->ndim; d++)
        if (!drop[d]) dims[nd++] = x->dims[d];
    out_like(p, x->dtype, nd, dims);
    return ERT_OK;
}

ert_status ert_prepare_unsqueeze(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int64_t axes[ERT_MAX_DIMS], dims[ERT_MAX_DIMS];
    int n;
    if ((st = squeeze_axes(p, axes, &n))) return st;
    if (n < 0) return ert_prep_error(p, ERT_E_ARG, "axes are missing");
    int r = x->ndim + n;
    if (r > ERT_MAX_DIMS) return ert_prep_error(p, ERT_E_SHAPE, "output rank %d exceeds %d", r, ERT_MAX_DIMS);
    bool ins[ERT_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int64_t a;
        if ((st = norm_axis(p, axes[i], r, false, &a))) return st;
        if (ins[a]) return ert_prep_error(p, ERT_E_ARG, "axis %lld repeated", (long long)axes[i]);
        ins[a] = true;
    }
    for (int d = 0, k = 0; d < r; d++) dims[d] = ins[d] ? 1 : x->dims[k++];
    out_like(p, x->dtype, r, dims);
    return ERT_OK;
}

/* ------------------------------------------------------------------ Transpose, Concat, Split */

ert_status ert_prepare_transpose(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int64_t *perm = p->params->transpose.perm, dims[ERT_MAX_DIMS];
    int n = ert_attr_ints(p->node, "perm", perm, ERT_MAX_DIMS);
    if (n < 0) {
        n = x->ndim;
        for (int d = 0; d < n; d++) perm[d] = n - 1 - d;
    }
    if (n != x->ndim) return ert_prep_error(p, ERT_E_ARG, "perm has %d entries, the input has rank %d", n, x->ndim);
    bool seen[ERT_MAX_DIMS] = {false};
    for (int d = 0; d < n; d++) {
        if (perm[d] < 0 || perm[d] >= n || seen[perm[d]])
            return ert_prep_error(p, ERT_E_ARG, "perm is not a permutation of 0..%d (perm[%d] = %lld)", n - 1, d, (long long)perm[d]);
        seen[perm[d]] = true;
        dims[d] = x->dims[perm[d]];
    }
    out_like(p, x->dtype, n, dims);
    return ERT_OK;
}

/* Concat(axis): params axis.axis. All inputs share dtype, rank and other dims. */
ert_status ert_prepare_concat(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st;
    ert_axis_params *ap = &p->params->axis;
    memset(ap, 0, sizeof *ap);
    if (!ert_node_attr(p->node, "axis")) return ert_prep_error(p, ERT_E_ARG, "attribute axis is required");
    if ((st = check_in(p, 0))) return st;
    if (x->ndim == 0) return ert_prep_error(p, ERT_E_SHAPE, "cannot concatenate 0-d tensors");
    if ((st = norm_axis(p, ert_attr_int(p->node, "axis", 0), x->ndim, false, &ap->axis))) return st;
    int64_t dims[ERT_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    for (int k = 1; k < p->n_in; k++) {
        const ert_tinfo *t = &p->in[k];
        if ((st = check_in(p, k))) return st;
        if (t->dtype != x->dtype || t->ndim != x->ndim)
            return ert_prep_error(p, ERT_E_SHAPE, "input %d has dtype %s rank %d, input 0 has %s rank %d", k,
                                  ert_dtype_name(t->dtype), t->ndim, ert_dtype_name(x->dtype), x->ndim);
        for (int d = 0; d < x->ndim; d++) {
            if (d == ap->axis) continue;
            if (t->dims[d] != x->dims[d])
                return ert_prep_error(p, ERT_E_SHAPE, "input %d has dim %d = %lld, input 0 has %lld", k, d,
                                      (long long)t->dims[d], (long long)x->dims[d]);
        }
        if (__builtin_add_overflow(dims[ap->axis], t->dims[ap->axis], &dims[ap->axis]))
            return ert_prep_error(p, ERT_E_SHAPE, "concatenated dim overflows");
    }
    int64_t total;
    if ((st = prod_dims(p, dims, x->ndim, &total))) return st;
    out_like(p, x->dtype, x->ndim, dims);
    return ERT_OK;
}

/* Split(axis): sizes from constant input 1, else the "split" attribute (opset
 * < 13), else num_outputs (opset 18) or the number of outputs: n-1 chunks of
 * ceil(dim / n) and the rest last (the ONNX reference). Any number of outputs:
 * the kernel takes the sizes from the output dims; params split.sizes holds
 * only the first ERT_MAX_NODE_IO. */
typedef struct split_src {
    const ert_tinfo *in; /* constant sizes input, or */
    const ert_attr_val *attr; /* INTS attribute, or neither: chunks */
    int64_t chunk, dim;
    int n;
} split_src;

static int64_t split_size(const split_src *s, int i) {
    if (s->in) return s->in->dtype == ERT_DTYPE_I64 ? ((const int64_t *)s->in->const_data)[i] : ((const int32_t *)s->in->const_data)[i];
    if (s->attr) return s->attr->ints[i];
    return i < s->n - 1 ? s->chunk : s->dim - s->chunk * (s->n - 1);
}

ert_status ert_prepare_split(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    ert_split_params *sp = &p->params->split;
    memset(sp, 0, sizeof *sp);
    if (x->ndim == 0) return ert_prep_error(p, ERT_E_SHAPE, "cannot split a 0-d tensor");
    if ((st = norm_axis(p, ert_attr_int(p->node, "axis", 0), x->ndim, false, &sp->axis))) return st;
    split_src s = {.dim = x->dims[sp->axis], .n = p->n_out};
    const ert_tinfo *t = opt_in(p, 1);
    const ert_attr_val *a = ert_node_attr(p->node, "split");
    int64_t n = -1;
    if (t) {
        if (!t->const_data) return ert_prep_error(p, ERT_E_UNSUPPORTED, "split (input 1) must be a constant");
        if (t->ndim != 1 || (t->dtype != ERT_DTYPE_I64 && t->dtype != ERT_DTYPE_I32))
            return ert_prep_error(p, ERT_E_SHAPE, "split (input 1) must be 1-D i64");
        n = t->dims[0];
        s.in = t;
    } else if (a && a->type == ERT_ATTR_INTS) {
        n = a->n;
        s.attr = a;
    }
    if (n >= 0) {
        if (n != p->n_out) return ert_prep_error(p, ERT_E_SHAPE, "split has %lld sizes for %d outputs", (long long)n, p->n_out);
    } else {
        int64_t no = ert_attr_int(p->node, "num_outputs", p->n_out);
        if (no != p->n_out || no < 1)
            return ert_prep_error(p, ERT_E_SHAPE, "num_outputs %lld but the node has %d outputs", (long long)no, p->n_out);
        s.chunk = s.dim / no + (s.dim % no != 0);
        if (s.chunk * (no - 1) > s.dim)
            return ert_prep_error(p, ERT_E_SHAPE, "cannot split %lld into %lld chunks", (long long)s.dim, (long long)no);
    }
    int64_t sum = 0;
    for (int i = 0; i < p->n_out; i++) {
        int64_t v = split_size(&s, i);
        if (v < 0) return ert_prep_error(p, ERT_E_SHAPE, "split[%d] is negative", i);
        if (__builtin_add_overflow(sum, v, &sum)) return ert_prep_error(p, ERT_E_SHAPE, "split sizes overflow");
        if (i < ERT_MAX_NODE_IO) sp->sizes[i] = v;
        ert_tinfo *o = &p->out[i];
        *o = *x;
        o->const_data = NULL;
        o->dims[sp->axis] = v;
    }
    if (sum != s.dim)
        return ert_prep_error(p, ERT_E_SHAPE, "split sizes sum to %lld, the axis has %lld", (long long)sum, (long long)s.dim);
    sp->n_out = p->n_out;
    return ERT_OK;
}

/* ------------------------------------------------------------------ Slice, Gather */

/* Slice(data, starts, ends[, axes[, steps]]), all constant. Resolved per dim
 * into slice.start/step; the output dim is the element count. Out-of-range
 * starts/ends clamp (INT64_MAX ends mean "to the end"), negative values count
 * from the end, negative steps walk backwards. */
ert_status ert_prepare_slice(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int r = x->ndim;
    int64_t starts[ERT_MAX_DIMS], ends[ERT_MAX_DIMS], axes[ERT_MAX_DIMS], steps[ERT_MAX_DIMS], dims[ERT_MAX_DIMS];
    int ns, ne, na, nst;
    if ((st = const_ints(p, 1, "starts", starts, ERT_MAX_DIMS, &ns)) ||
        (st = const_ints(p, 2, "ends", ends, ERT_MAX_DIMS, &ne)))
        return st;
    if (ns != ne) return ert_prep_error(p, ERT_E_SHAPE, "starts has %d values, ends %d", ns, ne);
    if (opt_in(p, 3)) {
        if ((st = const_ints(p, 3, "axes", axes, ERT_MAX_DIMS, &na))) return st;
        if (na != ns) return ert_prep_error(p, ERT_E_SHAPE, "axes has %d values, starts %d", na, ns);
    } else {
        if (ns > r) return ert_prep_error(p, ERT_E_SHAPE, "starts has %d values for rank %d", ns, r);
        for (int i = 0; i < ns; i++) axes[i] = i;
    }
    if (opt_in(p, 4)) {
        if ((st = const_ints(p, 4, "steps", steps, ERT_MAX_DIMS, &nst))) return st;
        if (nst != ns) return ert_prep_error(p, ERT_E_SHAPE, "steps has %d values, starts %d", nst, ns);
    } else {
        for (int i = 0; i < ns; i++) steps[i] = 1;
    }
    ert_slice_params *sp = &p->params->slice;
    bool seen[ERT_MAX_DIMS] = {false};
    for (int d = 0; d < r; d++) {
        sp->start[d] = 0;
        sp->step[d] = 1;
        dims[d] = x->dims[d];
    }
    for (int i = 0; i < ns; i++) {
        int64_t a;
        if ((st = norm_axis(p, axes[i], r, false, &a))) return st;
        if (seen[a]) return ert_prep_error(p, ERT_E_ARG, "axis %lld repeated", (long long)axes[i]);
        seen[a] = true;
        int64_t dim = x->dims[a], s = starts[i], e = ends[i], step = steps[i];
        if (step == 0) return ert_prep_error(p, ERT_E_ARG, "steps[%d] is 0", i);
        if (s < 0) s += dim; /* no overflow: s < 0 <= dim */
        if (e < 0) e += dim;
        int64_t cnt;
        if (step > 0) {
            s = s < 0 ? 0 : (s > dim ? dim : s);
            e = e < 0 ? 0 : (e > dim ? dim : e);
            uint64_t diff = e > s ? (uint64_t)(e - s) : 0;
            cnt = (int64_t)((diff + (uint64_t)step - 1) / (uint64_t)step);
        } else {
            s = s < 0 ? 0 : (s > dim - 1 ? dim - 1 : s); /* spec: clamp to [0, dim-1] */
            e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
            uint64_t as = 0u - (uint64_t)step; /* |step|, also for INT64_MIN */
            uint64_t diff = s > e ? (uint64_t)(s - e) : 0;
            cnt = (int64_t)((diff + as - 1) / as);
        }
        if (dim == 0) cnt = 0;
        sp->start[a] = cnt ? s : 0;
        sp->step[a] = step;
        dims[a] = cnt;
    }
    out_like(p, x->dtype, r, dims);
    return ERT_OK;
}

/* Gather(data, indices, axis): out = data.dims[:axis] + indices.dims +
 * data.dims[axis+1:]. Constant indices are range-checked here; the kernel
 * checks runtime indices (ERT_E_ARG) before reading. */
ert_status ert_prepare_gather(ert_prep *p) {
    const ert_tinfo *x = &p->in[0], *ind = &p->in[1];
    ert_status st;
    if ((st = check_in(p, 0)) || (st = check_in(p, 1))) return st;
    if (ind->dtype != ERT_DTYPE_I64 && ind->dtype != ERT_DTYPE_I32)
        return ert_prep_error(p, ERT_E_SHAPE, "indices have dtype %s, expected i32 or i64", ert_dtype_name(ind->dtype));
    if (x->ndim == 0) return ert_prep_error(p, ERT_E_SHAPE, "cannot gather from a 0-d tensor");
    int64_t axis;
    if ((st = norm_axis(p, ert_attr_int(p->node, "axis", 0), x->ndim, false, &axis))) return st;
    p->params->gather.axis = axis;
    int r = x->ndim - 1 + ind->ndim;
    if (r > ERT_MAX_DIMS) return ert_prep_error(p, ERT_E_SHAPE, "output rank %d exceeds %d", r, ERT_MAX_DIMS);
    int64_t dims[ERT_MAX_DIMS], dim = x->dims[axis], ni;
    int k = 0;
    for (int d = 0; d < axis; d++) dims[k++] = x->dims[d];
    for (int d = 0; d < ind->ndim; d++) dims[k++] = ind->dims[d];
    for (int d = (int)axis + 1; d < x->ndim; d++) dims[k++] = x->dims[d];
    int64_t total;
    if ((st = prod_dims(p, dims, r, &total))) return st;
    if (ind->const_data) {
        (void)ert_dims_nelems(ind->ndim, ind->dims, &ni);
        for (int64_t i = 0; i < ni; i++) {
            int64_t v = ind->dtype == ERT_DTYPE_I64 ? ((const int64_t *)ind->const_data)[i]
                                                    : ((const int32_t *)ind->const_data)[i];
            if (v < -dim || v >= dim)
                return ert_prep_error(p, ERT_E_ARG, "index %lld out of range for axis %lld of size %lld",
                                      (long long)v, (long long)axis, (long long)dim);
        }
    }
    out_like(p, x->dtype, r, dims);
    return ERT_OK;
}

/* ------------------------------------------------------------------ Pad */

/* Pad(data, pads[, constant_value[, axes]]) (opset >= 11; opset < 11 "pads" and
 * "value" attributes also accepted). pads = (begins..., ends...) for the
 * listed axes (all by default); negative pads crop. Workspace: one int64 per
 * output coordinate of every dim (the input coordinate it reads, -1 = the
 * constant), filled by the kernel. */
ert_status ert_prepare_pad(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int r = x->ndim;
    ert_pad_params *pp = &p->params->pad;
    memset(pp, 0, sizeof *pp);
    const char *mode = ert_attr_str(p->node, "mode", "constant");
    if (strcmp(mode, "constant") == 0) pp->mode = 0;
    else if (strcmp(mode, "reflect") == 0) pp->mode = 1;
    else if (strcmp(mode, "edge") == 0) pp->mode = 2;
    else if (strcmp(mode, "wrap") == 0) pp->mode = 3;
    else return ert_prep_error(p, ERT_E_UNSUPPORTED, "Pad mode \"%.32s\"", mode);
    int64_t pads[2 * ERT_MAX_DIMS], axes[ERT_MAX_DIMS];
    int np, na = r;
    if (opt_in(p, 1)) {
        if ((st = const_ints(p, 1, "pads", pads, 2 * ERT_MAX_DIMS, &np))) return st;
    } else {
        np = ert_attr_ints(p->node, "pads", pads, 2 * ERT_MAX_DIMS);
        if (np < 0 || np > 2 * ERT_MAX_DIMS) return ert_prep_error(p, ERT_E_ARG, "pads are missing or too long");
        pp->value = ert_attr_float(p->node, "value", 0.0f);
    }
    if (opt_in(p, 3)) {
        if ((st = const_ints(p, 3, "axes", axes, ERT_MAX_DIMS, &na))) return st;
    } else {
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (np != 2 * na) return ert_prep_error(p, ERT_E_SHAPE, "pads has %d values, expected %d", np, 2 * na);
    bool seen[ERT_MAX_DIMS] = {false};
    for (int i = 0; i < na; i++) {
        int64_t a;
        if ((st = norm_axis(p, axes[i], r, false, &a))) return st;
        if (seen[a]) return ert_prep_error(p, ERT_E_ARG, "axis %lld repeated", (long long)axes[i]);
        seen[a] = true;
        pp->pad_begin[a] = pads[i];
        pp->pad_end[a] = pads[na + i];
    }
    const ert_tinfo *cv = opt_in(p, 2);
    if (cv) {
        int64_t n;
        if (!cv->const_data) return ert_prep_error(p, ERT_E_UNSUPPORTED, "constant_value (input 2) must be a constant");
        if (cv->dtype != x->dtype) return ert_prep_error(p, ERT_E_SHAPE, "constant_value dtype differs from data");
        if (!ert_dims_nelems(cv->ndim, cv->dims, &n) || n > 1) return ert_prep_error(p, ERT_E_SHAPE, "constant_value must be a scalar");
        if (n == 1) {
            const void *v = cv->const_data;
            switch (cv->dtype) {
            case ERT_DTYPE_F32: pp->value = *(const float *)v; break;
            case ERT_DTYPE_F16: pp->value = ert_f16_to_f32(*(const uint16_t *)v); break;
            case ERT_DTYPE_BF16: pp->value = ert_bf16_to_f32(*(const uint16_t *)v); break;
            case ERT_DTYPE_I8: pp->value = *(const int8_t *)v; break;
            case ERT_DTYPE_U8: case ERT_DTYPE_BOOL: pp->value = *(const uint8_t *)v; break;
            case ERT_DTYPE_I32: pp->value = *(const int32_t *)v; break;
            case ERT_DTYPE_I64: pp->value = (double)*(const int64_t *)v; break;
            default: break;
            }
        }
    }
    int64_t dims[ERT_MAX_DIMS], total;
    size_t ws = 0;
    for (int d = 0; d < r; d++) {
        int64_t b = pp->pad_begin[d], e = pp->pad_end[d], o;
        if (b > INT32_MAX || e > INT32_MAX || b < -x->dims[d] || e < -x->dims[d] ||
            __builtin_add_overflow(x->dims[d], b + e, &o) || o < 0)
            return ert_prep_error(p, ERT_E_SHAPE, "pads %lld, %lld invalid for axis %d of size %lld", (long long)b,
                                  (long long)e, d, (long long)x->dims[d]);
        if (pp->mode != 0 && x->dims[d] == 0 && o > 0)
            return ert_prep_error(p, ERT_E_SHAPE, "cannot %s-pad the empty axis %d", mode, d);
        dims[d] = o;
        if (ert_add_ovf(ws, (size_t)o, &ws)) return ert_prep_error(p, ERT_E_SHAPE, "pads overflow");
    }
    if ((st = prod_dims(p, dims, r, &total))) return st;
    if (ert_mul_ovf(ws, sizeof(int64_t), &p->workspace_bytes)) return ert_prep_error(p, ERT_E_SHAPE, "pads overflow");
    out_like(p, x->dtype, r, dims);
    return ERT_OK;
}

/* ------------------------------------------------------------------ Expand, Cast */

/* Expand(x, shape): numpy broadcast of x's dims and the constant shape. */
ert_status ert_prepare_expand(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int64_t shape[ERT_MAX_DIMS], dims[ERT_MAX_DIMS], total;
    int n, nd;
    if ((st = const_ints(p, 1, "shape", shape, ERT_MAX_DIMS, &n))) return st;
    for (int i = 0; i < n; i++)
        if (shape[i] < 0) return ert_prep_error(p, ERT_E_SHAPE, "shape[%d] = %lld is negative", i, (long long)shape[i]);
    if (!ert_broadcast_shape(x->ndim, x->dims, n, shape, &nd, dims))
        return ert_prep_error(p, ERT_E_SHAPE, "input cannot be broadcast to the shape");
    if ((st = prod_dims(p, dims, nd, &total))) return st;
    out_like(p, x->dtype, nd, dims);
    return ERT_OK;
}

/* Tile: repeats (constant, one non-negative value per dim of x) multiply
 * each dim; any dtype (the kernel copies by element size). */
ert_status ert_prepare_tile(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int64_t rep[ERT_MAX_DIMS], dims[ERT_MAX_DIMS], total;
    int n;
    if ((st = const_ints(p, 1, "repeats", rep, ERT_MAX_DIMS, &n))) return st;
    if (p->in[1].ndim != 1 || n != x->ndim)
        return ert_prep_error(p, ERT_E_SHAPE, "repeats must be 1-D with %d values (the input's rank), got %d", x->ndim, n);
    for (int i = 0; i < n; i++) {
        if (rep[i] < 0) return ert_prep_error(p, ERT_E_ARG, "repeats[%d] = %lld is negative", i, (long long)rep[i]);
        if (__builtin_mul_overflow(x->dims[i], rep[i], &dims[i]))
            return ert_prep_error(p, ERT_E_SHAPE, "dim %d overflows", i);
    }
    if ((st = prod_dims(p, dims, n, &total))) return st;
    out_like(p, x->dtype, n, dims);
    return ERT_OK;
}

/* ONNX TensorProto.DataType -> ert_dtype (UNDEFINED if unsupported). The IR
 * keeps Cast's `to` as an ONNX code, so the map lives here; the ONNX loader
 * uses it for tensors too. */
ert_dtype ert_onnx_dtype(int code) {
    switch (code) {
    case 1: return ERT_DTYPE_F32;
    case 2: return ERT_DTYPE_U8;
    case 3: return ERT_DTYPE_I8;
    case 6: return ERT_DTYPE_I32;
    case 7: return ERT_DTYPE_I64;
    case 9: return ERT_DTYPE_BOOL;
    case 10: return ERT_DTYPE_F16;
    case 16: return ERT_DTYPE_BF16;
    default: return ERT_DTYPE_UNDEFINED;
    }
}

ert_status ert_prepare_cast(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    if (!ert_node_attr(p->node, "to")) return ert_prep_error(p, ERT_E_ARG, "attribute 'to' is required");
    int64_t code = ert_attr_int(p->node, "to", 0);
    ert_dtype to = ert_onnx_dtype(code);
    if (to == ERT_DTYPE_UNDEFINED) return ert_prep_error(p, ERT_E_UNSUPPORTED, "Cast to ONNX dtype %lld", (long long)code);
    p->params->cast.to = to;
    out_like(p, to, x->ndim, x->dims);
    return ERT_OK;
}

/* ------------------------------------------------------------------ Shape, ConstantOfShape, Range */

/* Shape(start, end): params axis.axis = first dim, axis.n_axes = count. The
 * kernel writes the input's dims (known at create), so it always folds. */
ert_status ert_prepare_shape(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_in(p, 0);
    if (st) return st;
    int64_t r = x->ndim, s = ert_attr_int(p->node, "start", 0), e = ert_attr_int(p->node, "end", r);
    if (s < 0) s = s < -r ? 0 : s + r;
    if (e < 0) e = e < -r ? 0 : e + r;
    s = s > r ? r : s;
    e = e > r ? r : e;
    ert_axis_params *ap = &p->params->axis;
    memset(ap, 0, sizeof *ap);
    ap->axis = s;
    ap->n_axes = e > s ? e - s : 0;
    int64_t d = ap->n_axes;
    out_like(p, ERT_DTYPE_I64, 1, &d);
    return ERT_OK;
}

/* Size(x): the element count of x as an i64 scalar (0-d). Like Shape it only
 * reads x's dims, so the session folds it at create even when x is not a
 * constant. */
ert_status ert_prepare_size(ert_prep *p) {
    ert_status st = check_in(p, 0);
    if (st) return st;
    out_like(p, ERT_DTYPE_I64, 0, NULL);
    return ERT_OK;
}

/* ConstantOfShape(shape). Value convention (the ONNX attribute is a one-element
 * TensorProto; the ONNX loader and the builder pass it as): attribute "value"
 * of type FLOATS or INTS (or FLOAT / INT) with exactly one element, plus an
 * optional INT attribute "value_dtype" (an ert_dtype). Without value_dtype the
 * output is i64 for INTS/INT and f32 for FLOATS/FLOAT; without "value" it is
 * f32 0.0. Params: pad.value holds the value as double, pad.pad_begin[0] the
 * exact int64 for integer dtypes (i64 beyond 2^53). */
ert_status ert_prepare_constant_of_shape(ert_prep *p) {
    ert_status st = check_in(p, 0);
    if (st) return st;
    int64_t shape[ERT_MAX_DIMS], total;
    int n;
    if ((st = const_ints(p, 0, "shape", shape, ERT_MAX_DIMS, &n))) return st;
    for (int i = 0; i < n; i++)
        if (shape[i] < 0) return ert_prep_error(p, ERT_E_SHAPE, "shape[%d] = %lld is negative", i, (long long)shape[i]);
    if ((st = prod_dims(p, shape, n, &total))) return st;
    ert_pad_params *pp = &p->params->pad;
    memset(pp, 0, sizeof *pp);
    ert_dtype dt = ERT_DTYPE_F32;
    const ert_attr_val *v = ert_node_attr(p->node, "value");
    if (v) {
        switch (v->type) {
        case ERT_ATTR_FLOATS:
            if (v->n != 1 || !v->floats) return ert_prep_error(p, ERT_E_ARG, "value must have one element");
            pp->value = v->floats[0];
            break;
        case ERT_ATTR_FLOAT: pp->value = v->f; break;
        case ERT_ATTR_INTS:
            if (v->n != 1 || !v->ints) return ert_prep_error(p, ERT_E_ARG, "value must have one element");
            pp->pad_begin[0] = v->ints[0];
            pp->value = (double)v->ints[0];
            dt = ERT_DTYPE_I64;
            break;
        case ERT_ATTR_INT:
            pp->pad_begin[0] = v->i;
            pp->value = (double)v->i;
            dt = ERT_DTYPE_I64;
            break;
        default: return ert_prep_error(p, ERT_E_ARG, "value has an unsupported attribute type");
        }
        if (dt == ERT_DTYPE_F32) pp->pad_begin[0] = isfinite(pp->value) && fabs(pp->value) < 9.2e18 ? (int64_t)pp->value : 0;
    }
    if (ert_node_attr(p->node, "value_dtype")) {
        int64_t vd = ert_attr_int(p->node, "value_dtype", ERT_DTYPE_F32);
        if (vd <= ERT_DTYPE_UNDEFINED || vd >= ERT_DTYPE_COUNT)
            return ert_prep_error(p, ERT_E_ARG, "value_dtype %lld is not an ert_dtype", (long long)vd);
        dt = (ert_dtype)vd;
    }
    out_like(p, dt, n, shape);
    return ERT_OK;
}

/* Range(start, limit, delta): scalars of one dtype (f32/i32/i64). The length
 * max(ceil((limit - start) / delta), 0) needs constant inputs; the kernel
 * reads start and delta itself. */
#define ERT_RANGE_MAX ((int64_t)1 << 31) /* longest Range output accepted */
ert_status ert_prepare_range(ert_prep *p) {
    ert_status st;
    ert_dtype dt = p->in[0].dtype;
    double v[3];
    int64_t iv[3];
    for (int k = 0; k < 3; k++) {
        const ert_tinfo *t = &p->in[k];
        int64_t n;
        if ((st = check_in(p, k))) return st;
        if (t->dtype != dt || !(dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_I32 || dt == ERT_DTYPE_I64))
            return ert_prep_error(p, ERT_E_UNSUPPORTED, "inputs must all be f32, i32 or i64");
        if (!ert_dims_nelems(t->ndim, t->dims, &n) || n != 1) return ert_prep_error(p, ERT_E_SHAPE, "input %d is not a scalar", k);
        if (!t->const_data) return ert_prep_error(p, ERT_E_UNSUPPORTED, "input %d must be a constant (output length)", k);
        iv[k] = dt == ERT_DTYPE_I64 ? *(const int64_t *)t->const_data : dt == ERT_DTYPE_I32 ? *(const int32_t *)t->const_data : 0;
        v[k] = dt == ERT_DTYPE_F32 ? *(const float *)t->const_data : (double)iv[k];
    }
    int64_t len;
    if (dt == ERT_DTYPE_F32) {
        if (!isfinite(v[0]) || !isfinite(v[1]) || !isfinite(v[2]) || v[2] == 0)
            return ert_prep_error(p, ERT_E_ARG, "start/limit/delta must be finite and delta non-zero");
        double c = ceil((v[1] - v[0]) / v[2]);
        if (c > (double)ERT_RANGE_MAX) return ert_prep_error(p, ERT_E_SHAPE, "Range output too long");
        len = c > 0 ? (int64_t)c : 0;
    } else {
        if (iv[2] == 0) return ert_prep_error(p, ERT_E_ARG, "delta is 0");
        int64_t diff;
        if (__builtin_sub_overflow(iv[1], iv[0], &diff)) return ert_prep_error(p, ERT_E_SHAPE, "Range output too long");
        if ((diff > 0) != (iv[2] > 0) || diff == 0) {
            len = 0;
        } else {
            /* same signs: ceil(diff / delta) without overflow */
            uint64_t ad = diff > 0 ? (uint64_t)diff : 0u - (uint64_t)diff;
            uint64_t as = iv[2] > 0 ? (uint64_t)iv[2] : 0u - (uint64_t)iv[2];
            uint64_t c = ad / as + (ad % as != 0);
            if (c > (uint64_t)ERT_RANGE_MAX) return ert_prep_error(p, ERT_E_SHAPE, "Range output too long");
            len = (int64_t)c;
        }
    }
    out_like(p, dt, 1, &len);
    return ERT_OK;
}
