/* Quantization ops: shape and type inference, and the load-time checks of
 * their constant scales and zero points.
 *
 * QuantizeLinear (opset 10, 13, 19, 21 forms):
 *   (x f32, y_scale f32, [y_zero_point i8/u8]) -> y of the zero point's dtype
 *   (u8 without one). y = saturate(round_half_even(x / y_scale) + zp).
 * DequantizeLinear: (x i8/u8/i32, x_scale f32, [x_zero_point, x's dtype]) ->
 *   y f32 = (x - zp) * x_scale. An i32 x (a quantized bias) takes zero point 0.
 * Scales: a scalar or one-element 1-D tensor (per-tensor), or 1-D of
 *   x.dims[axis] values (per-axis, opset 13+; axis default 1, negative counts
 *   from the end). The zero point has the scale's shape.
 * Refused, naming the node: opset 21's block_size (blocked scales), an
 *   output_dtype other than i8/u8, int4/float8 data (the loader's dtypes),
 *   constant scales that are 0, negative, NaN or inf, an i32 zero point that
 *   is not 0, a zero point whose dtype differs from the data.
 */
#include "ert_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool is_q8(ert_dtype dt) { return dt == ERT_DTYPE_I8 || dt == ERT_DTYPE_U8; }

/* The blocked layout and opset-21 dtypes. */
static ert_status check_attrs(ert_prep *p) {
    if (ert_attr_int(p->node, "block_size", 0) != 0)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "blocked quantization (block_size %lld, opset 21) is not supported",
                              (long long)ert_attr_int(p->node, "block_size", 0));
    return ERT_OK;
}

/* Scale in[is] and zero point in[iz] (may be omitted) of data x whose integer
 * dtype is qdt: per-tensor or per-axis along `axis` (already positive, or -1
 * when x's rank does not allow one). Sets *per_axis. */
static ert_status check_qparams(ert_prep *p, int is, int iz, const ert_tinfo *x, int64_t axis, ert_dtype qdt,
                                bool *per_axis) {
    const ert_tinfo *s = &p->in[is];
    if (s->dtype != ERT_DTYPE_F32 && s->dtype != ERT_DTYPE_F16 && s->dtype != ERT_DTYPE_BF16)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "scale (input %d) has dtype %s, expected f32", is,
                              ert_dtype_name(s->dtype));
    int64_t n;
    if (!ert_dims_nelems(s->ndim, s->dims, &n)) return ert_prep_error(p, ERT_E_SHAPE, "scale's size overflows");
    if (s->ndim > 1)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "scale (input %d) has rank %d: blocked quantization is not supported",
                              is, s->ndim);
    *per_axis = s->ndim == 1 && n != 1;
    if (*per_axis) {
        if (axis < 0 || axis >= x->ndim)
            return ert_prep_error(p, ERT_E_SHAPE, "per-axis scale of %lld values needs an axis of the data (rank %d)",
                                  (long long)n, x->ndim);
        if (n != x->dims[axis])
            return ert_prep_error(p, ERT_E_SHAPE, "scale has %lld values, data has %lld along axis %lld", (long long)n,
                                  (long long)x->dims[axis], (long long)axis);
    }
    if (s->const_data) {
        const float *v = s->const_data;
        for (int64_t i = 0; i < n && s->dtype == ERT_DTYPE_F32; i++)
            if (!isfinite(v[i]) || !(v[i] > 0))
                return ert_prep_error(p, ERT_E_FORMAT, "scale[%lld] is %g: scales must be finite and positive",
                                      (long long)i, (double)v[i]);
    }
    if (iz >= p->n_in || p->in[iz].dtype == ERT_DTYPE_UNDEFINED) return ERT_OK;
    const ert_tinfo *z = &p->in[iz];
    if (z->dtype != qdt)
        return ert_prep_error(p, ERT_E_FORMAT, "zero point (input %d) has dtype %s, expected %s", iz,
                              ert_dtype_name(z->dtype), ert_dtype_name(qdt));
    int64_t nz;
    if (!ert_dims_nelems(z->ndim, z->dims, &nz) || nz != n || z->ndim > 1)
        return ert_prep_error(p, ERT_E_SHAPE, "zero point (input %d) must have the scale's shape (%lld values)", iz,
                              (long long)n);
    if (qdt == ERT_DTYPE_I32 && z->const_data)
        for (int64_t i = 0; i < nz; i++)
            if (((const int32_t *)z->const_data)[i] != 0)
                return ert_prep_error(p, ERT_E_FORMAT, "zero point[%lld] of i32 data is %d, must be 0", (long long)i,
                                      ((const int32_t *)z->const_data)[i]);
    return ERT_OK;
}

/* The axis, the scale and zero point checks, params and output 0 (x's
 * shape, dtype out_dt) shared by Q and DQ; qdt is the integer dtype. */
static ert_status finish_qdq(ert_prep *p, ert_dtype qdt, ert_dtype out_dt) {
    const ert_tinfo *x = &p->in[0];
    int64_t a = ert_attr_int(p->node, "axis", 1), axis = -1;
    /* out of range only matters when the scale is per-axis (opset 10 data of
     * rank 0 or 1 has no axis 1): check_qparams says so then */
    if (a >= -x->ndim && a < x->ndim) axis = a < 0 ? a + x->ndim : a;
    bool per_axis = false;
    ert_status st = check_qparams(p, 1, 2, x, axis, qdt, &per_axis);
    if (st) return st;
    p->params->quant.axis = per_axis ? axis : -1;
    p->params->quant.qdt = qdt;
    if ((st = ert_prep_out_as_in0(p))) return st;
    p->out[0].dtype = out_dt;
    return ERT_OK;
}

ert_status ert_prepare_quantize(ert_prep *p) {
    memset(&p->params->quant, 0, sizeof p->params->quant);
    ert_status st;
    if ((st = check_attrs(p))) return st;
    const ert_tinfo *x = &p->in[0];
    if (x->dtype != ERT_DTYPE_F32)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "x has dtype %s, expected f32", ert_dtype_name(x->dtype));
    bool has_zp = p->n_in > 2 && p->in[2].dtype != ERT_DTYPE_UNDEFINED;
    ert_dtype qdt = has_zp ? p->in[2].dtype : ERT_DTYPE_U8;
    int64_t od = ert_attr_int(p->node, "output_dtype", 0);
    if (od != 0) {
        ert_dtype want = ert_onnx_dtype((int)(od > 1000 ? 0 : od));
        if (!is_q8(want))
            return ert_prep_error(p, ERT_E_UNSUPPORTED, "output_dtype %lld: only int8 and uint8 are supported",
                                  (long long)od);
        if (has_zp && want != qdt)
            return ert_prep_error(p, ERT_E_FORMAT, "output_dtype is %s but the zero point is %s", ert_dtype_name(want),
                                  ert_dtype_name(qdt));
        qdt = want;
    }
    if (!is_q8(qdt))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "quantized dtype %s: only int8 and uint8 are supported",
                              ert_dtype_name(qdt));
    return finish_qdq(p, qdt, qdt);
}

ert_status ert_prepare_dequantize(ert_prep *p) {
    memset(&p->params->quant, 0, sizeof p->params->quant);
    ert_status st;
    if ((st = check_attrs(p))) return st;
    const ert_tinfo *x = &p->in[0];
    if (!is_q8(x->dtype) && x->dtype != ERT_DTYPE_I32)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "x has dtype %s: only int8, uint8 and int32 are supported",
                              ert_dtype_name(x->dtype));
    /* A DequantizeLinear of a constant (weights, bias) is kept as a node so
     * the Q/DQ folding pass still sees the integer weights; the pass folds
     * the ones it leaves into f32 constants (runtime/passes/qdq.c). */
    p->fold_ok = false;
    return finish_qdq(p, x->dtype, ERT_DTYPE_F32);
}

/* ------------------------------------------------------------ load-time checks */

/* The same checks as prepare's on the node's constant inputs, so a hostile
 * file is refused by the loader rather than by the first session. */
ert_status ert_quant_check_node(const ert_model *m, const ert_node *n) {
    if (n->op != ERT_OP_QUANTIZE_LINEAR && n->op != ERT_OP_DEQUANTIZE_LINEAR) return ERT_OK;
    if (n->n_in < 2 || n->n_out < 1) return ERT_OK; /* counts: checked by the op table at session create */
    ert_tinfo in[3];
    memset(in, 0, sizeof in);
    for (int k = 0; k < n->n_in && k < 3; k++) {
        if (n->in[k] < 0 || n->in[k] >= m->n_tensors) continue;
        const ert_tensor *t = &m->tensors[n->in[k]];
        in[k].dtype = t->dtype;
        in[k].ndim = t->ndim;
        memcpy(in[k].dims, t->dims, sizeof in[k].dims);
        in[k].const_data = t->role == ERT_ROLE_WEIGHT ? t->data : NULL;
    }
    /* dynamic dims: only the constant values can be judged */
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < in[k].ndim; d++)
            if (in[k].dims[d] < 0) in[k].dims[d] = 1, in[0].const_data = NULL;
    ert_tinfo out[1];
    ert_op_params params;
    ert_prep p = {.ctx = m->ctx, .node = n, .n_in = n->n_in < 3 ? n->n_in : 3, .n_out = 1, .in = in, .out = out,
                  .params = &params, .n_threads = 1, .fold_ok = true};
    /* only the constant-value checks: shapes may be dynamic here, and the
     * session's prepare repeats everything with concrete shapes */
    ert_status st = check_attrs(&p);
    if (!st) {
        const ert_tinfo *s = &in[1], *z = n->n_in > 2 ? &in[2] : NULL;
        int64_t ns = 0;
        if (s->const_data && s->dtype == ERT_DTYPE_F32 && ert_dims_nelems(s->ndim, s->dims, &ns))
            for (int64_t i = 0; i < ns && !st; i++) {
                float v = ((const float *)s->const_data)[i];
                if (!isfinite(v) || !(v > 0))
                    st = ert_set_error(m->ctx, ERT_E_FORMAT, "scale[%lld] is %g: scales must be finite and positive",
                                       (long long)i, (double)v);
            }
        ert_dtype data_dt = n->op == ERT_OP_DEQUANTIZE_LINEAR ? in[0].dtype : ERT_DTYPE_UNDEFINED;
        if (!st && z && z->dtype != ERT_DTYPE_UNDEFINED) {
            if (!is_q8(z->dtype) && !(z->dtype == ERT_DTYPE_I32 && n->op == ERT_OP_DEQUANTIZE_LINEAR))
                st = ert_set_error(m->ctx, ERT_E_UNSUPPORTED, "zero point has dtype %s: only int8 and uint8 are supported",
                                   ert_dtype_name(z->dtype));
            else if (data_dt != ERT_DTYPE_UNDEFINED && z->dtype != data_dt)
                st = ert_set_error(m->ctx, ERT_E_FORMAT, "zero point has dtype %s, x has %s", ert_dtype_name(z->dtype),
                                   ert_dtype_name(data_dt));
            int64_t nz = 0;
            if (!st && z->dtype == ERT_DTYPE_I32 && z->const_data && ert_dims_nelems(z->ndim, z->dims, &nz))
                for (int64_t i = 0; i < nz && !st; i++)
                    if (((const int32_t *)z->const_data)[i] != 0)
                        st = ert_set_error(m->ctx, ERT_E_FORMAT, "zero point[%lld] of i32 data is %d, must be 0",
                                           (long long)i, ((const int32_t *)z->const_data)[i]);
        }
        if (!st && n->op == ERT_OP_DEQUANTIZE_LINEAR && in[0].dtype != ERT_DTYPE_UNDEFINED && !is_q8(in[0].dtype) &&
            in[0].dtype != ERT_DTYPE_I32)
            st = ert_set_error(m->ctx, ERT_E_UNSUPPORTED, "x has dtype %s: only int8, uint8 and int32 are supported",
                               ert_dtype_name(in[0].dtype));
        if (!st && n->op == ERT_OP_QUANTIZE_LINEAR && in[0].dtype != ERT_DTYPE_UNDEFINED &&
            in[0].dtype != ERT_DTYPE_F32 && in[0].dtype != ERT_DTYPE_F16 && in[0].dtype != ERT_DTYPE_BF16)
            st = ert_set_error(m->ctx, ERT_E_FORMAT, "x has dtype %s, expected a float", ert_dtype_name(in[0].dtype));
    }
    if (st) {
        char msg[ERT_ERRMSG_SIZE];
        snprintf(msg, sizeof msg, "%s", ert_last_error(m->ctx));
        return ert_set_error(m->ctx, st, "node '%s' (%s): %s", n->name ? n->name : "", ert_op_get(n->op)->name, msg);
    }
    return ERT_OK;
}
