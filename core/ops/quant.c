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

/* Longest integer dot product whose int32 sum cannot overflow: 2^31 / 255^2. */
#define ERT_QSUM_MAX 33025

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

/* ------------------------------------------------------------ integer ops */

/* A scalar quantization input pair (scale at is, zero point at iz, either may
 * be -1 for "none") for data of dtype dt: per-tensor only. */
static ert_status check_scalar_q(ert_prep *p, int is, int iz, ert_dtype dt, const char *what) {
    ert_tinfo none = {0};
    bool per_axis = false;
    ert_status st;
    if (is >= 0) {
        st = check_qparams(p, is, iz, &none, -1, dt, &per_axis);
        if (!st && per_axis) st = ert_prep_error(p, ERT_E_UNSUPPORTED, "%s scale must be per-tensor (a scalar)", what);
        return st;
    }
    if (iz >= p->n_in || p->in[iz].dtype == ERT_DTYPE_UNDEFINED) return ERT_OK;
    int64_t n;
    if (p->in[iz].dtype != dt)
        return ert_prep_error(p, ERT_E_FORMAT, "%s zero point has dtype %s, expected %s", what,
                              ert_dtype_name(p->in[iz].dtype), ert_dtype_name(dt));
    if (!ert_dims_nelems(p->in[iz].ndim, p->in[iz].dims, &n) || n != 1)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "%s zero point must be a scalar", what);
    return ERT_OK;
}

/* A zero point without a scale (ConvInteger/MatMulInteger's w/b): dtype dt,
 * a scalar or 1-D of n values (per output channel / column). */
static ert_status check_zp_vec(ert_prep *p, int iz, ert_dtype dt, int64_t n, const char *what) {
    if (iz >= p->n_in || p->in[iz].dtype == ERT_DTYPE_UNDEFINED) return ERT_OK;
    const ert_tinfo *z = &p->in[iz];
    int64_t nz;
    if (z->dtype != dt)
        return ert_prep_error(p, ERT_E_FORMAT, "%s zero point has dtype %s, expected %s", what, ert_dtype_name(z->dtype),
                              ert_dtype_name(dt));
    if (z->ndim > 1 || !ert_dims_nelems(z->ndim, z->dims, &nz) || (nz != 1 && nz != n))
        return ert_prep_error(p, ERT_E_SHAPE, "%s zero point must be a scalar or have %lld values", what, (long long)n);
    return ERT_OK;
}

/* Runs a float op's prepare on f32 stand-ins of the two data inputs for the
 * output shape (and, for convs, the geometry). */
static ert_status float_shape(ert_prep *p, ert_prepare_fn fn, int ia, int ib, ert_op_params *fp) {
    ert_tinfo in[2] = {p->in[ia], p->in[ib]}, out[1];
    in[0].dtype = in[1].dtype = ERT_DTYPE_F32;
    in[0].const_data = in[1].const_data = NULL;
    memset(out, 0, sizeof out);
    ert_prep q = {.ctx = p->ctx, .node = p->node, .n_in = 2, .n_out = 1, .in = in, .out = out, .params = fp,
                  .n_threads = p->n_threads};
    ert_status st = fn(&q);
    if (st) return st;
    p->out[0] = out[0];
    return ERT_OK;
}

/* QLinearConv/QLinearMatMul's quantization inputs: input 0's scale and zero
 * point (1, 2) per-tensor; the weights' (4, 5) per-tensor or per-axis along
 * w_axis of w; y's (6, 7) per-tensor, y of yzp's dtype (u8 without one); the
 * optional int32 bias (8) of n_out values. Sets quant.qdt, has_bias, y's dtype. */
static ert_status qlinear_params(ert_prep *p, const ert_tinfo *w, int64_t w_axis, int64_t n_out) {
    ert_quant_params *qp = &p->params->quant;
    bool per_axis = false;
    ert_status st;
    if ((st = check_scalar_q(p, 1, 2, p->in[0].dtype, "input 0")) ||
        (st = check_qparams(p, 4, 5, w, w_axis, w->dtype, &per_axis)))
        return st;
    if (p->in[7].dtype != ERT_DTYPE_UNDEFINED && !is_q8(p->in[7].dtype))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "y zero point has dtype %s: only int8 and uint8 are supported",
                              ert_dtype_name(p->in[7].dtype));
    ert_dtype ydt = p->in[7].dtype != ERT_DTYPE_UNDEFINED ? p->in[7].dtype : ERT_DTYPE_U8;
    if ((st = check_scalar_q(p, 6, 7, ydt, "y"))) return st;
    if (p->n_in > 8 && p->in[8].dtype != ERT_DTYPE_UNDEFINED) {
        if (p->in[8].dtype != ERT_DTYPE_I32 || p->in[8].ndim != 1 || p->in[8].dims[0] != n_out)
            return ert_prep_error(p, ERT_E_SHAPE, "the bias (input 8) must be int32 of shape (%lld)", (long long)n_out);
        qp->conv.has_bias = true;
    }
    qp->qdt = ydt;
    p->out[0].dtype = ydt;
    return ERT_OK;
}

/* QLinearConv (x, xs, xzp, w, ws, wzp, ys, yzp, [B], [table]) and ConvInteger
 * (x, w, [xzp], [wzp]): x (N, C, D...) and w (M, C/group, k...) of i8/u8;
 * xzp a scalar, wzp a scalar or M values (per output channel, like ws).
 * Workspace: the integer im2col of one image group (Kg, out) as int32, the
 * group's weights minus their zero points (Mg, Kg) and its accumulators
 * (Mg, out), all int32. */
ert_status ert_prepare_qlinear_conv(ert_prep *p) {
    ert_quant_params *qp = &p->params->quant;
    memset(qp, 0, sizeof *qp);
    bool ql = p->n_in >= 8; /* QLinearConv has 8 or 9 inputs, ConvInteger 2 to 4 */
    int ix = 0, iw = ql ? 3 : 1;
    const ert_tinfo *x = &p->in[ix], *w = &p->in[iw];
    if (!is_q8(x->dtype) || !is_q8(w->dtype))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "x is %s and w is %s: only int8 and uint8 are supported",
                              ert_dtype_name(x->dtype), ert_dtype_name(w->dtype));
    ert_op_params fp;
    ert_status st = float_shape(p, ert_prepare_conv, ix, iw, &fp);
    if (st) return st;
    if (fp.conv.act.kind != ERT_ACT_NONE && fp.conv.act.kind != ERT_ACT_RELU)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "only a Relu can be fused into an integer conv");
    if (!ql && fp.conv.act.kind != ERT_ACT_NONE)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "ConvInteger takes no fused activation");
    qp->conv = fp.conv;
    qp->conv.has_bias = false;
    int64_t M = w->dims[0];
    if (ql) {
        if ((st = qlinear_params(p, w, 0, M))) return st;
        /* ert extension (the Q/DQ pass's step 1e): input 9, a 256-byte table of y's type that y goes
         * through, y = table[(uint8_t)requantised] (an ert.QLut fused into the conv) */
        if (p->n_in > 9 && p->in[9].dtype != ERT_DTYPE_UNDEFINED &&
            (p->in[9].dtype != qp->qdt || p->in[9].ndim != 1 || p->in[9].dims[0] != 256))
            return ert_prep_error(p, ERT_E_SHAPE, "input 9 (the output table) must be %s of shape (256)",
                                  ert_dtype_name(qp->qdt));
    } else {
        if ((st = check_scalar_q(p, -1, 2, x->dtype, "x")) || (st = check_zp_vec(p, 3, w->dtype, M, "w"))) return st;
        qp->qdt = ERT_DTYPE_I32;
        p->out[0].dtype = ERT_DTYPE_I32;
    }
    int64_t out_sz = 1, k_sz = 1, Mg = M / qp->conv.group, Kg;
    for (int i = 0; i < qp->conv.nsp; i++) out_sz *= p->out[0].dims[2 + i], k_sz *= qp->conv.kernel[i];
    size_t cols, wsz, acc, tot;
    if (__builtin_mul_overflow(w->dims[1], k_sz, &Kg) || Kg > ERT_QSUM_MAX)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "%lld products per output: the int32 sum could overflow (at most %d)",
                              (long long)Kg, ERT_QSUM_MAX);
    if (ert_mul_ovf((size_t)Kg, (size_t)out_sz, &cols) ||
        ert_mul_ovf((size_t)Mg, (size_t)Kg, &wsz) || ert_mul_ovf((size_t)Mg, (size_t)out_sz, &acc) ||
        ert_add_ovf(cols, wsz, &tot) || ert_add_ovf(tot, acc, &tot) || ert_mul_ovf(tot, sizeof(int32_t), &tot))
        return ert_prep_error(p, ERT_E_SHAPE, "workspace size overflows");
    p->workspace_bytes = tot;
    return ERT_OK;
}

/* QLinearMatMul (a, as, azp, b, bs, bzp, ys, yzp, [bias]) and MatMulInteger
 * (a, b, [azp], [bzp]): MatMul's shapes and broadcasting; a per-tensor, b
 * per-tensor or per column (N values along b's last dim); the optional int32
 * bias (N) is an ert extension the Q/DQ pass uses for a folded Gemm.
 * Workspace: one (M, N) int32 accumulator block. */
ert_status ert_prepare_qlinear_matmul(ert_prep *p) {
    ert_quant_params *qp = &p->params->quant;
    memset(qp, 0, sizeof *qp);
    bool ql = p->n_in >= 8; /* QLinearMatMul has 8 or 9 inputs, MatMulInteger 2 to 4 */
    int ia = 0, ib = ql ? 3 : 1;
    const ert_tinfo *a = &p->in[ia], *b = &p->in[ib];
    if (!is_q8(a->dtype) || !is_q8(b->dtype))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "a is %s and b is %s: only int8 and uint8 are supported",
                              ert_dtype_name(a->dtype), ert_dtype_name(b->dtype));
    ert_op_params fp;
    ert_status st = float_shape(p, ert_prepare_matmul, ia, ib, &fp);
    if (st) return st;
    if (fp.gemm.act.kind != ERT_ACT_NONE && (!ql || fp.gemm.act.kind != ERT_ACT_RELU))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "only a Relu can be fused into QLinearMatMul");
    qp->conv.act = fp.gemm.act;
    int64_t N = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1, M = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
    if (ql) {
        if ((st = qlinear_params(p, b, b->ndim >= 2 ? b->ndim - 1 : -1, N))) return st;
    } else {
        if ((st = check_scalar_q(p, -1, 2, a->dtype, "a")) || (st = check_zp_vec(p, 3, b->dtype, N, "b"))) return st;
        if (b->ndim < 2 && p->n_in > 3 && p->in[3].ndim == 1 && p->in[3].dims[0] != 1)
            return ert_prep_error(p, ERT_E_SHAPE, "a per-column b zero point needs a 2-D b");
        qp->qdt = ERT_DTYPE_I32;
        p->out[0].dtype = ERT_DTYPE_I32;
    }
    int64_t K = a->dims[a->ndim - 1];
    if (K > ERT_QSUM_MAX)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "inner dim %lld: the int32 sum could overflow (at most %d)",
                              (long long)K, ERT_QSUM_MAX);
    size_t acc;
    if (ert_mul_ovf((size_t)M, (size_t)N, &acc) || ert_mul_ovf(acc, sizeof(int32_t), &acc))
        return ert_prep_error(p, ERT_E_SHAPE, "workspace size overflows");
    p->workspace_bytes = ql ? acc : 0;
    return ERT_OK;
}

/* ert.QLinearAdd (a, as, [azp], b, bs, [bzp], ys, [yzp]): what the Q/DQ pass
 * makes of DQ(a) + DQ(b) -> [Relu] -> Q. a and b int8/uint8 of one shape (no
 * broadcasting), every scale and zero point per tensor; y of a's shape and
 * yzp's dtype (uint8 without one), as QuantizeLinear's. The Relu, if any,
 * is quant.conv.act (set by the pass after this). */
ert_status ert_prepare_qlinear_add(ert_prep *p) {
    ert_quant_params *qp = &p->params->quant;
    memset(qp, 0, sizeof *qp);
    const ert_tinfo *a = &p->in[0], *b = &p->in[3];
    if (!is_q8(a->dtype) || !is_q8(b->dtype))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "a is %s and b is %s: only int8 and uint8 are supported",
                              ert_dtype_name(a->dtype), ert_dtype_name(b->dtype));
    if (a->ndim != b->ndim || memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof a->dims[0]) != 0)
        return ert_prep_error(p, ERT_E_SHAPE, "a and b must have one shape (no broadcasting)");
    if (p->in[7].dtype != ERT_DTYPE_UNDEFINED && !is_q8(p->in[7].dtype))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "y zero point has dtype %s: only int8 and uint8 are supported",
                              ert_dtype_name(p->in[7].dtype));
    const ert_dtype ydt = p->in[7].dtype != ERT_DTYPE_UNDEFINED ? p->in[7].dtype : ERT_DTYPE_U8;
    ert_status st;
    if ((st = check_scalar_q(p, 1, 2, a->dtype, "a")) || (st = check_scalar_q(p, 4, 5, b->dtype, "b")) ||
        (st = check_scalar_q(p, 6, 7, ydt, "y")))
        return st;
    qp->axis = -1;
    qp->qdt = ydt;
    p->out[0].dtype = ydt;
    p->out[0].ndim = a->ndim;
    memcpy(p->out[0].dims, a->dims, sizeof p->out[0].dims);
    return ERT_OK;
}

/* ert.QLut (x, table): what the Q/DQ pass makes of DQ(x) -> element-wise
 * float nodes -> Q, every scale and zero point per tensor: y[i] =
 * table[(uint8_t)x[i]], the table those float nodes' result on all 256
 * values of x. x int8/uint8 of any shape; table 256 values (1-D) of y's
 * dtype, int8/uint8; y of x's shape. */
ert_status ert_prepare_qlut(ert_prep *p) {
    ert_quant_params *qp = &p->params->quant;
    memset(qp, 0, sizeof *qp);
    const ert_tinfo *x = &p->in[0], *t = &p->in[1];
    if (!is_q8(x->dtype) || !is_q8(t->dtype))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "x is %s and table %s: only int8 and uint8 are supported",
                              ert_dtype_name(x->dtype), ert_dtype_name(t->dtype));
    if (t->ndim != 1 || t->dims[0] != 256)
        return ert_prep_error(p, ERT_E_SHAPE, "table must be 1-D of 256 values (one per byte of x)");
    qp->axis = -1;
    qp->qdt = t->dtype;
    p->out[0].dtype = t->dtype;
    p->out[0].ndim = x->ndim;
    memcpy(p->out[0].dims, x->dims, sizeof p->out[0].dims);
    return ERT_OK;
}

/* ------------------------------------------------------------ load-time checks */

static const ert_tensor *tensor_of(const ert_model *m, const ert_node *n, int k) {
    return k < n->n_in && n->in[k] >= 0 && n->in[k] < m->n_tensors ? &m->tensors[n->in[k]] : NULL;
}

/* A constant scale's values: finite and positive. */
static ert_status check_scale_values(const ert_model *m, const ert_tensor *t, int k) {
    int64_t ns;
    if (!t || t->role != ERT_ROLE_WEIGHT || !t->data || t->dtype != ERT_DTYPE_F32 ||
        !ert_dims_nelems(t->ndim, t->dims, &ns))
        return ERT_OK;
    for (int64_t i = 0; i < ns; i++) {
        float v = ((const float *)t->data)[i];
        if (!isfinite(v) || !(v > 0))
            return ert_set_error(m->ctx, ERT_E_FORMAT, "scale (input %d) [%lld] is %g: scales must be finite and positive",
                                 k, (long long)i, (double)v);
    }
    return ERT_OK;
}

/* A zero point's dtype: i8/u8 (i32 where allowed, then every constant value
 * 0), and data_dt's when that is known. */
static ert_status check_zp(const ert_model *m, const ert_tensor *z, int k, ert_dtype data_dt, bool allow_i32) {
    if (!z) return ERT_OK;
    if (!is_q8(z->dtype) && !(allow_i32 && z->dtype == ERT_DTYPE_I32))
        return ert_set_error(m->ctx, ERT_E_UNSUPPORTED, "zero point (input %d) has dtype %s: only int8 and uint8 are supported",
                             k, ert_dtype_name(z->dtype));
    if (data_dt != ERT_DTYPE_UNDEFINED && z->dtype != data_dt)
        return ert_set_error(m->ctx, ERT_E_FORMAT, "zero point (input %d) has dtype %s, the data %s", k,
                             ert_dtype_name(z->dtype), ert_dtype_name(data_dt));
    int64_t nz;
    if (z->dtype == ERT_DTYPE_I32 && z->role == ERT_ROLE_WEIGHT && z->data && ert_dims_nelems(z->ndim, z->dims, &nz))
        for (int64_t i = 0; i < nz; i++)
            if (((const int32_t *)z->data)[i] != 0)
                return ert_set_error(m->ctx, ERT_E_FORMAT, "zero point[%lld] of i32 data is %d, must be 0", (long long)i,
                                     ((const int32_t *)z->data)[i]);
    return ERT_OK;
}

static ert_dtype dtype_of(const ert_tensor *t) { return t ? t->dtype : ERT_DTYPE_UNDEFINED; }

static ert_status check_node(const ert_model *m, const ert_node *n) {
    ert_status st = ERT_OK;
    switch (n->op) {
    case ERT_OP_QUANTIZE_LINEAR:
    case ERT_OP_DEQUANTIZE_LINEAR: {
        bool dq = n->op == ERT_OP_DEQUANTIZE_LINEAR;
        ert_dtype xdt = dtype_of(tensor_of(m, n, 0));
        if (ert_attr_int(n, "block_size", 0) != 0)
            return ert_set_error(m->ctx, ERT_E_UNSUPPORTED, "blocked quantization (block_size %lld, opset 21) is not supported",
                                 (long long)ert_attr_int(n, "block_size", 0));
        if (dq && xdt != ERT_DTYPE_UNDEFINED && !is_q8(xdt) && xdt != ERT_DTYPE_I32)
            return ert_set_error(m->ctx, ERT_E_UNSUPPORTED, "x has dtype %s: only int8, uint8 and int32 are supported",
                                 ert_dtype_name(xdt));
        if (!dq && xdt != ERT_DTYPE_UNDEFINED && xdt != ERT_DTYPE_F32 && xdt != ERT_DTYPE_F16 && xdt != ERT_DTYPE_BF16)
            return ert_set_error(m->ctx, ERT_E_FORMAT, "x has dtype %s, expected a float", ert_dtype_name(xdt));
        if (!(st = check_scale_values(m, tensor_of(m, n, 1), 1)))
            st = check_zp(m, tensor_of(m, n, 2), 2, dq ? xdt : ERT_DTYPE_UNDEFINED, dq);
        return st;
    }
    case ERT_OP_QLINEAR_CONV:
    case ERT_OP_QLINEAR_MATMUL:
        for (int k = 1; k <= 6 && !st; k += k == 1 ? 3 : 2) st = check_scale_values(m, tensor_of(m, n, k), k);
        if (!st) st = check_zp(m, tensor_of(m, n, 2), 2, dtype_of(tensor_of(m, n, 0)), false);
        if (!st) st = check_zp(m, tensor_of(m, n, 5), 5, dtype_of(tensor_of(m, n, 3)), false);
        if (!st) st = check_zp(m, tensor_of(m, n, 7), 7, ERT_DTYPE_UNDEFINED, false);
        return st;
    case ERT_OP_QLINEAR_ADD:
        for (int k = 1; k <= 6 && !st; k += 3) st = check_scale_values(m, tensor_of(m, n, k), k);
        for (int k = 2; k <= 5 && !st; k += 3)
            st = check_zp(m, tensor_of(m, n, k), k, dtype_of(tensor_of(m, n, k - 2)), false);
        if (!st) st = check_zp(m, tensor_of(m, n, 7), 7, ERT_DTYPE_UNDEFINED, false);
        return st;
    case ERT_OP_CONV_INTEGER:
    case ERT_OP_MATMUL_INTEGER:
        if (!(st = check_zp(m, tensor_of(m, n, 2), 2, dtype_of(tensor_of(m, n, 0)), false)))
            st = check_zp(m, tensor_of(m, n, 3), 3, dtype_of(tensor_of(m, n, 1)), false);
        return st;
    default: return ERT_OK;
    }
}

/* The constant-value checks of prepare on the node's weights, so a hostile
 * file is refused by the loader rather than by the first session (shapes
 * may still be dynamic here; the session's prepare checks them). */
ert_status ert_quant_check_node(const ert_model *m, const ert_node *n) {
    ert_status st = check_node(m, n);
    if (st) {
        char msg[ERT_ERRMSG_SIZE];
        snprintf(msg, sizeof msg, "%s", ert_last_error(m->ctx));
        return ert_set_error(m->ctx, st, "node '%s' (%s): %s", n->name ? n->name : "", ert_op_get(n->op)->name, msg);
    }
    return ERT_OK;
}
