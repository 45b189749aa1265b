/* prepare() for element-wise ops: unary, broadcasting binary, Where,
 * reductions, Identity/Dropout. Shapes and attributes are validated here so the
 * CPU kernels (kernels/cpu/eltwise.c, reduce.c, copy.c) can trust them. */
#include "ert_internal.h"

#include <math.h>
#include <string.h>

/* Input k if present (given and not omitted), else NULL. */
static const ert_tinfo *opt_in(const ert_prep *p, int k) {
    if (k >= p->n_in || p->in[k].dtype == ERT_DTYPE_UNDEFINED) return NULL;
    return &p->in[k];
}

/* Every input's dims must be concrete and their element count representable. */
static ert_status check_dims(ert_prep *p, const ert_tinfo *t, int k) {
    int64_t n;
    if (t->ndim < 0 || t->ndim > ERT_MAX_DIMS || !ert_dims_nelems(t->ndim, t->dims, &n) || n < 0)
        return k < 0 ? ert_prep_error(p, ERT_E_SHAPE, "output element count overflows")
                     : ert_prep_error(p, ERT_E_SHAPE, "input %d has an invalid shape", k);
    return ERT_OK;
}

/* Constant one-element input k of dtype `want` (a 0-d or 1-element tensor):
 * *data points at its value, or is NULL when the input is omitted (the caller
 * keeps its default). A wrong dtype gives `dt_status`. */
static ert_status const_scalar(ert_prep *p, int k, ert_dtype want, ert_status dt_status, const void **data) {
    const ert_tinfo *t = opt_in(p, k);
    *data = NULL;
    if (!t) return ERT_OK;
    if (!t->const_data)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "input %d must be a constant", k);
    int64_t n;
    if (!ert_dims_nelems(t->ndim, t->dims, &n) || n != 1)
        return ert_prep_error(p, ERT_E_SHAPE, "input %d must have one element", k);
    if (t->dtype != want)
        return ert_prep_error(p, dt_status, "input %d has dtype %s, expected %s", k, ert_dtype_name(t->dtype),
                              ert_dtype_name(want));
    *data = t->const_data;
    return ERT_OK;
}

static ert_status const_scalar_f32(ert_prep *p, int k, float *out) {
    const void *v;
    ert_status st = const_scalar(p, k, ERT_DTYPE_F32, ERT_E_UNSUPPORTED, &v);
    if (!st && v) memcpy(out, v, sizeof *out);
    return st;
}

/* Clip bounds on integer data: the bound must have x's dtype (ONNX's T). */
static ert_status const_scalar_int(ert_prep *p, int k, ert_dtype want, int64_t *out) {
    const void *v;
    ert_status st = const_scalar(p, k, want, ERT_E_SHAPE, &v);
    if (st || !v) return st;
    switch (want) {
    case ERT_DTYPE_I8: *out = *(const int8_t *)v; break;
    case ERT_DTYPE_U8: *out = *(const uint8_t *)v; break;
    case ERT_DTYPE_I32: *out = *(const int32_t *)v; break;
    default: memcpy(out, v, sizeof *out); break;
    }
    return ERT_OK;
}

static bool is_int(ert_dtype dt) {
    return dt == ERT_DTYPE_I8 || dt == ERT_DTYPE_U8 || dt == ERT_DTYPE_I32 || dt == ERT_DTYPE_I64;
}

/* Clip on integer data: bounds default to the dtype's range; min > max gives
 * max everywhere (ONNX: min(max(x, lo), hi)). */
static ert_status prepare_clip_int(ert_prep *p, ert_unary_params *u) {
    ert_dtype dt = p->in[0].dtype;
    int64_t lo = dt == ERT_DTYPE_I8 ? INT8_MIN : dt == ERT_DTYPE_U8 ? 0 : dt == ERT_DTYPE_I32 ? INT32_MIN : INT64_MIN;
    int64_t hi = dt == ERT_DTYPE_I8 ? INT8_MAX : dt == ERT_DTYPE_U8 ? UINT8_MAX : dt == ERT_DTYPE_I32 ? INT32_MAX : INT64_MAX;
    ert_status st;
    if ((st = const_scalar_int(p, 1, dt, &lo)) || (st = const_scalar_int(p, 2, dt, &hi))) return st;
    u->ilo = lo > hi ? hi : lo;
    u->ihi = hi;
    return ERT_OK;
}

/* Unary ops. Params: unary.act holds the activation the kernel evaluates with
 * ert_cpu_act1 (kind NONE for math functions, which the kernel selects by op).
 * Gelu: unary.alpha = 0 for approximate="none" (erf form, act GELU) and 1 for
 * "tanh" (the kernel evaluates the tanh form itself). Clip: act.alpha = min,
 * act.beta = max (from constant inputs 1 and 2, or opset<11 attributes). */
ert_status ert_prepare_unary(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_dims(p, x, 0);
    if (st) return st;
    const ert_node *n = p->node;
    ert_unary_params *u = &p->params->unary;
    memset(u, 0, sizeof *u);
    ert_op op = n->op;
    bool int_ok = op == ERT_OP_NEG || op == ERT_OP_ABS || op == ERT_OP_RELU || op == ERT_OP_CLIP;
    if (!(x->dtype == ERT_DTYPE_F32 || (int_ok && is_int(x->dtype))))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "input 0 has dtype %s, not supported by this op",
                              ert_dtype_name(x->dtype));
    if (op == ERT_OP_CLIP && is_int(x->dtype)) {
        if ((st = prepare_clip_int(p, u))) return st;
        p->out[0] = *x;
        p->out[0].const_data = NULL;
        return ERT_OK;
    }
    switch (op) {
    case ERT_OP_RELU: u->act.kind = ERT_ACT_RELU; break;
    case ERT_OP_LEAKY_RELU:
        u->act.kind = ERT_ACT_LEAKY_RELU;
        u->act.alpha = u->alpha = ert_attr_float(n, "alpha", 0.01f);
        break;
    case ERT_OP_CLIP: {
        float lo = ert_attr_float(n, "min", -INFINITY), hi = ert_attr_float(n, "max", INFINITY);
        if ((st = const_scalar_f32(p, 1, &lo)) || (st = const_scalar_f32(p, 2, &hi))) return st;
        if (isnan(lo) || isnan(hi))
            return ert_prep_error(p, ERT_E_ARG, "Clip min/max is NaN");
        if (lo > hi) lo = hi; /* ONNX: min(max(x, lo), hi), i.e. all hi; keeps act CLIP's simple form right */
        u->act.kind = ERT_ACT_CLIP;
        u->act.alpha = lo;
        u->act.beta = hi;
        break;
    }
    case ERT_OP_SIGMOID: u->act.kind = ERT_ACT_SIGMOID; break;
    case ERT_OP_TANH: u->act.kind = ERT_ACT_TANH; break;
    case ERT_OP_HARD_SIGMOID:
        u->act.kind = ERT_ACT_HARD_SIGMOID;
        u->act.alpha = ert_attr_float(n, "alpha", 0.2f);
        u->act.beta = ert_attr_float(n, "beta", 0.5f);
        break;
    case ERT_OP_HARD_SWISH: u->act.kind = ERT_ACT_HARD_SWISH; break;
    case ERT_OP_SILU: u->act.kind = ERT_ACT_SILU; break;
    case ERT_OP_GELU: {
        const char *ap = ert_attr_str(n, "approximate", "none");
        if (strcmp(ap, "none") == 0) u->alpha = 0;
        else if (strcmp(ap, "tanh") == 0) u->alpha = 1;
        else return ert_prep_error(p, ERT_E_UNSUPPORTED, "Gelu approximate=\"%.32s\" (expected none or tanh)", ap);
        u->act.kind = ERT_ACT_GELU;
        break;
    }
    case ERT_OP_ELU: u->alpha = ert_attr_float(n, "alpha", 1.0f); break;
    case ERT_OP_SELU:
        /* the defaults are ONNX's (float32 values of the SELU paper's constants) */
        u->alpha = ert_attr_float(n, "alpha", 1.67326319217681884765625f);
        u->gamma = ert_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
    case ERT_OP_SOFTPLUS: case ERT_OP_MISH:
    case ERT_OP_ERF: case ERT_OP_SQRT: case ERT_OP_EXP: case ERT_OP_LOG: case ERT_OP_NEG:
    case ERT_OP_ABS: case ERT_OP_RECIPROCAL: case ERT_OP_FLOOR: case ERT_OP_CEIL:
        break;
    default:
        return ert_prep_error(p, ERT_E_INTERNAL, "not a unary op");
    }
    /* Clip's min/max inputs are parameters, not data: only input 0 matters. */
    p->out[0] = *x;
    p->out[0].const_data = NULL;
    return ERT_OK;
}

static bool is_compare(ert_op op) { return op == ERT_OP_EQUAL || op == ERT_OP_LESS || op == ERT_OP_GREATER; }

static bool is_num(ert_dtype dt) { return dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_I32 || dt == ERT_DTYPE_I64; }

/* Binary ops with numpy broadcasting, for f32, i32, i64, i8 and u8 (Equal also
 * bool); Min, Max and Mean (f32 only) are variadic (any number of inputs,
 * broadcast together). PRelu (f32) broadcasts its slope to x only.
 * All inputs share a dtype, except Pow: base and exponent may each be f32, i32
 * or i64, and the output has the base's dtype (ONNX Pow-12+). Compare ops
 * give bool. */
ert_status ert_prepare_binary(ert_prep *p) {
    const ert_tinfo *a = &p->in[0];
    ert_status st;
    ert_op op = p->node->op;
    ert_tinfo *o = &p->out[0];
    if ((st = check_dims(p, a, 0))) return st;
    if (op == ERT_OP_POW) {
        if (!is_num(a->dtype) || !is_num(p->in[1].dtype))
            return ert_prep_error(p, ERT_E_UNSUPPORTED, "Pow of %s by %s", ert_dtype_name(a->dtype), ert_dtype_name(p->in[1].dtype));
    } else {
        /* i8/u8 too (quantized graphs): wrapping arithmetic like the wider ints */
        bool ok = is_num(a->dtype) || a->dtype == ERT_DTYPE_I8 || a->dtype == ERT_DTYPE_U8 ||
                  (op == ERT_OP_EQUAL && a->dtype == ERT_DTYPE_BOOL);
        if (op == ERT_OP_MEAN || op == ERT_OP_PRELU) ok = a->dtype == ERT_DTYPE_F32; /* Mean: float-only in ONNX */
        if (!ok) return ert_prep_error(p, ERT_E_UNSUPPORTED, "dtype %s is not supported by this op", ert_dtype_name(a->dtype));
    }
    o->ndim = a->ndim;
    memcpy(o->dims, a->dims, sizeof o->dims);
    for (int k = 1; k < p->n_in; k++) {
        const ert_tinfo *b = &p->in[k];
        if ((st = check_dims(p, b, k))) return st;
        if (b->dtype != a->dtype && op != ERT_OP_POW)
            return ert_prep_error(p, ERT_E_SHAPE, "inputs have dtypes %s and %s", ert_dtype_name(a->dtype), ert_dtype_name(b->dtype));
        int64_t d[ERT_MAX_DIMS];
        int nd;
        if (!ert_broadcast_shape(o->ndim, o->dims, b->ndim, b->dims, &nd, d))
            return ert_prep_error(p, ERT_E_SHAPE, "shapes cannot be broadcast together");
        o->ndim = nd;
        memcpy(o->dims, d, sizeof d);
    }
    if ((st = check_dims(p, o, -1))) return st; /* (2^40,1) + (1,2^40) overflows */
    /* PRelu's slope broadcasts to x, never x to the slope (unidirectional) */
    if (op == ERT_OP_PRELU && (o->ndim != a->ndim || memcmp(o->dims, a->dims, (size_t)a->ndim * sizeof a->dims[0]) != 0))
        return ert_prep_error(p, ERT_E_SHAPE, "PRelu slope does not broadcast to the input's shape");
    o->dtype = is_compare(op) ? ERT_DTYPE_BOOL : a->dtype;
    o->const_data = NULL;
    return ERT_OK;
}

/* Where(cond, x, y): cond is bool; x and y share any dtype; all three broadcast. */
ert_status ert_prepare_where(ert_prep *p) {
    const ert_tinfo *c = &p->in[0], *x = &p->in[1], *y = &p->in[2];
    ert_status st;
    for (int k = 0; k < 3; k++)
        if ((st = check_dims(p, &p->in[k], k))) return st;
    if (c->dtype != ERT_DTYPE_BOOL)
        return ert_prep_error(p, ERT_E_SHAPE, "condition has dtype %s, expected bool", ert_dtype_name(c->dtype));
    if (x->dtype != y->dtype || ert_dtype_size(x->dtype) == 0)
        return ert_prep_error(p, ERT_E_SHAPE, "x and y have dtypes %s and %s", ert_dtype_name(x->dtype), ert_dtype_name(y->dtype));
    ert_tinfo *o = &p->out[0];
    int n1;
    int64_t d1[ERT_MAX_DIMS];
    if (!ert_broadcast_shape(c->ndim, c->dims, x->ndim, x->dims, &n1, d1) ||
        !ert_broadcast_shape(n1, d1, y->ndim, y->dims, &o->ndim, o->dims))
        return ert_prep_error(p, ERT_E_SHAPE, "condition, x and y cannot be broadcast together");
    if ((st = check_dims(p, o, -1))) return st;
    o->dtype = x->dtype;
    o->const_data = NULL;
    return ERT_OK;
}

/* ReduceMean/Sum/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp: f32, and i64
 * for Sum/Max/Min/Prod. Params (axis): axes[0..n_axes) sorted ascending and made
 * positive; n_axes == 0 means "identity" (noop_with_empty_axes) because empty
 * axes otherwise become all axes here. Axes come from constant input 1 (opset
 * 13 ReduceSum, opset 18 all) or the "axes" attribute (older opsets). */
ert_status ert_prepare_reduce(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_dims(p, x, 0);
    if (st) return st;
    ert_op op = p->node->op;
    bool int_ok = op == ERT_OP_REDUCE_SUM || op == ERT_OP_REDUCE_MAX || op == ERT_OP_REDUCE_MIN || op == ERT_OP_REDUCE_PROD;
    if (!(x->dtype == ERT_DTYPE_F32 || (int_ok && x->dtype == ERT_DTYPE_I64)))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "dtype %s is not supported by this reduction", ert_dtype_name(x->dtype));
    ert_axis_params *ap = &p->params->axis;
    memset(ap, 0, sizeof *ap);
    ap->keepdims = ert_attr_int(p->node, "keepdims", 1) != 0;
    ap->noop_with_empty_axes = ert_attr_int(p->node, "noop_with_empty_axes", 0) != 0;
    int64_t axes[ERT_MAX_DIMS];
    int na = 0;
    const ert_tinfo *ta = opt_in(p, 1);
    if (ta) {
        if (!ta->const_data)
            return ert_prep_error(p, ERT_E_UNSUPPORTED, "axes (input 1) must be a constant");
        if (ta->ndim > 1) return ert_prep_error(p, ERT_E_SHAPE, "axes must be 1-D");
        na = ert_tinfo_ints(ta, axes, ERT_MAX_DIMS);
        if (na < 0) return ert_prep_error(p, ERT_E_SHAPE, "axes must be at most %d i32/i64 values", ERT_MAX_DIMS);
    } else {
        na = ert_attr_ints(p->node, "axes", axes, ERT_MAX_DIMS);
        if (na > ERT_MAX_DIMS) return ert_prep_error(p, ERT_E_SHAPE, "too many axes");
        if (na < 0) na = 0;
    }
    bool red[ERT_MAX_DIMS] = {false};
    if (na == 0 && !ap->noop_with_empty_axes) {
        for (int d = 0; d < x->ndim; d++) red[d] = true;
    }
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i];
        if (a < -x->ndim || a >= x->ndim)
            return ert_prep_error(p, ERT_E_ARG, "axis %lld out of range for rank %d", (long long)a, x->ndim);
        if (a < 0) a += x->ndim;
        if (red[a]) return ert_prep_error(p, ERT_E_ARG, "axis %lld repeated", (long long)axes[i]);
        red[a] = true;
    }
    ert_tinfo *o = &p->out[0];
    o->dtype = x->dtype;
    o->const_data = NULL;
    o->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (red[d]) {
            ap->axes[ap->n_axes++] = d;
            if (ap->keepdims) o->dims[o->ndim++] = 1;
        } else {
            o->dims[o->ndim++] = x->dims[d];
        }
    }
    return ERT_OK;
}

/* ArgMax/ArgMin(x): i64 indices along one axis. Params (axis): axis made
 * positive, keepdims, select_last_index. An empty axis has no answer: refused. */
ert_status ert_prepare_arg(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    ert_status st = check_dims(p, x, 0);
    if (st) return st;
    ert_dtype dt = x->dtype;
    if (!(is_num(dt) || dt == ERT_DTYPE_I8 || dt == ERT_DTYPE_U8))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "dtype %s is not supported by this op", ert_dtype_name(dt));
    const ert_attr_val *av = ert_node_attr(p->node, "axis");
    if (av && av->type != ERT_ATTR_INT) return ert_prep_error(p, ERT_E_ARG, "attribute 'axis' must be an INT");
    ert_axis_params *ap = &p->params->axis;
    memset(ap, 0, sizeof *ap);
    int r = x->ndim > 0 ? x->ndim : 1; /* a 0-d x is treated as (1) */
    int64_t axis = av ? av->i : 0;
    if (axis < -r || axis >= r)
        return ert_prep_error(p, ERT_E_ARG, "axis %lld out of range for rank %d", (long long)axis, x->ndim);
    ap->axis = axis < 0 ? axis + r : axis;
    ap->keepdims = ert_attr_int(p->node, "keepdims", 1) != 0;
    ap->select_last_index = ert_attr_int(p->node, "select_last_index", 0) != 0;
    if (x->ndim > 0 && x->dims[ap->axis] == 0)
        return ert_prep_error(p, ERT_E_SHAPE, "axis %lld is empty: no index to return", (long long)axis);
    ert_tinfo *o = &p->out[0];
    o->dtype = ERT_DTYPE_I64;
    o->const_data = NULL;
    o->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != ap->axis) o->dims[o->ndim++] = x->dims[d];
        else if (ap->keepdims) o->dims[o->ndim++] = 1;
    }
    return ERT_OK;
}

/* Identity, and Dropout at inference: a copy; Dropout's optional mask output
 * (bool, all true) has the input's shape. */
ert_status ert_prepare_identity(ert_prep *p) {
    ert_status st = check_dims(p, &p->in[0], 0);
    if (st) return st;
    if (ert_dtype_size(p->in[0].dtype) == 0)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "dtype %s", ert_dtype_name(p->in[0].dtype));
    if (p->node->op == ERT_OP_DROPOUT) {
        const ert_tinfo *tm = opt_in(p, 2);
        if (tm && (!tm->const_data || tm->dtype != ERT_DTYPE_BOOL || *(const uint8_t *)tm->const_data))
            return ert_prep_error(p, ERT_E_UNSUPPORTED, "Dropout in training mode");
    }
    for (int i = 0; i < p->n_out; i++) {
        p->out[i] = p->in[0];
        p->out[i].const_data = NULL;
        if (i == 1) p->out[1].dtype = ERT_DTYPE_BOOL; /* Dropout mask */
    }
    return ERT_OK;
}
