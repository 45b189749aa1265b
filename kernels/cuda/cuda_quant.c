/* CUDA backend: which int8 nodes run on the GPU (kernels/cuda/quant.cu) and
 * the op entry the dispatcher calls. The kernels reproduce the CPU integer
 * reference bit for bit; what they do not cover keeps the per-node CPU
 * fallback (counted by ert_session_n_cpu_fallback):
 *   - channels-last (nhwc) convs and pools other than 2-D;
 *   - tensors of 2^31 elements or more (the kernels index in int);
 *   - QLinearMatMul / MatMulInteger with a 1-D B or broadcast batch dims
 *     (a 2-D B, or A and B of equal batch dims, run here);
 *   - MaxPool with an Indices output.
 * ert.QLinearAdd (the Q/DQ pass's residual join) and ert.QLut (its element-wise
 * functions as a 256-entry table) run here whole. */
#include "cuda_backend.h"

#include <stdlib.h>
#include <string.h>

static bool is_q8(ert_dtype dt) { return dt == ERT_DTYPE_I8 || dt == ERT_DTYPE_U8; }
static bool is_fl(ert_dtype dt) { return dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16; }

bool ert_cuda_quant_claims(ert_op op, ert_dtype dt) {
    switch (op) {
    case ERT_OP_QUANTIZE_LINEAR: return is_fl(dt);
    case ERT_OP_DEQUANTIZE_LINEAR: return is_q8(dt) || dt == ERT_DTYPE_I32;
    case ERT_OP_QLINEAR_CONV: case ERT_OP_CONV_INTEGER: case ERT_OP_QLINEAR_MATMUL: case ERT_OP_MATMUL_INTEGER:
    case ERT_OP_MAXPOOL: case ERT_OP_QLINEAR_ADD: case ERT_OP_QLUT:
        return is_q8(dt);
    default: return false;
    }
}

static bool small(const ert_kargs *a) {
    for (int k = 0; k < a->n_in + a->n_out; k++) {
        const ert_tview *v = k < a->n_in ? &a->in[k] : &a->out[k - a->n_in];
        if (v->n_elems >= ((int64_t)1 << 31)) return false;
    }
    return true;
}

bool ert_cuda_quant_node_ok(const ert_kargs *a) {
    if (a->n_in < 1 || a->n_out < 1 || !ert_cuda_quant_claims(a->op, a->in[0].dtype) || !small(a)) return false;
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    switch (a->op) {
    case ERT_OP_QUANTIZE_LINEAR: return a->n_in > 1 && a->in[1].dtype == x->dtype && is_q8(y->dtype);
    case ERT_OP_DEQUANTIZE_LINEAR: return a->n_in > 1 && is_fl(a->in[1].dtype) && a->in[1].dtype == y->dtype;
    case ERT_OP_QLINEAR_CONV: case ERT_OP_CONV_INTEGER: {
        const ert_conv_params *cp = &a->params->quant.conv;
        if ((cp->nhwc && cp->nsp != 2) || cp->nsp < 1 || cp->nsp > 3 || x->ndim != cp->nsp + 2) return false;
        const ert_tview *w = &a->in[a->op == ERT_OP_CONV_INTEGER ? 1 : 3];
        /* the GEMM tiles' grid: (Mg + 63) / 64 rows of blocks at most 65535 */
        if (w->ndim != x->ndim || cp->group < 1 || w->dims[0] % cp->group || (w->dims[0] / cp->group + 63) / 64 > 65535)
            return false;
        if (a->op == ERT_OP_CONV_INTEGER) return y->dtype == ERT_DTYPE_I32 && is_q8(a->in[1].dtype);
        return a->n_in >= 8 && a->n_in <= 10 && is_q8(a->in[3].dtype) && is_q8(y->dtype) && is_fl(a->in[1].dtype) &&
               a->in[4].dtype == a->in[1].dtype && a->in[6].dtype == a->in[1].dtype &&
               (a->n_in < 10 || (a->in[9].dtype == y->dtype && a->in[9].n_elems == 256)); /* a fused ert.QLut */
    }
    case ERT_OP_QLINEAR_MATMUL: case ERT_OP_MATMUL_INTEGER: {
        bool ql = a->op == ERT_OP_QLINEAR_MATMUL;
        const ert_tview *B = &a->in[ql ? 3 : 1];
        if (!is_q8(B->dtype) || B->ndim < 2 || x->ndim < 1) return false;
        int64_t K = x->dims[x->ndim - 1], rows = K ? x->n_elems / K : 0, batch = 1;
        if (K < 1 || B->dims[B->ndim - 2] != K) return false; /* K = 0: the tiles' grid would be empty */
        if (B->ndim > 2) { /* batched: equal batch dims, no broadcasting */
            if (x->ndim != B->ndim) return false;
            for (int d = 0; d < x->ndim - 2; d++)
                if (x->dims[d] != B->dims[d]) return false;
            rows = x->dims[x->ndim - 2];
            batch = rows > 0 ? x->n_elems / (rows * K) : 0;
        }
        if ((rows + 63) / 64 > 65535 || batch > 65535) return false; /* the tiles' grid (y, z) */
        if (!ql) return y->dtype == ERT_DTYPE_I32;
        return a->n_in >= 8 && is_q8(y->dtype) && is_fl(a->in[1].dtype) && a->in[4].dtype == a->in[1].dtype &&
               a->in[6].dtype == a->in[1].dtype;
    }
    case ERT_OP_QLINEAR_ADD:
        return a->n_in == 8 && is_q8(a->in[3].dtype) && a->in[3].n_elems == x->n_elems && is_q8(y->dtype) &&
               is_fl(a->in[1].dtype) && a->in[4].dtype == a->in[1].dtype && a->in[6].dtype == a->in[1].dtype;
    case ERT_OP_QLUT:
        return a->n_in == 2 && a->in[1].n_elems == 256 && a->in[1].dtype == y->dtype && is_q8(y->dtype) &&
               y->n_elems == x->n_elems;
    case ERT_OP_MAXPOOL:
        return (!a->params->pool.nhwc || a->params->pool.nsp == 2) && a->params->pool.nsp >= 1 && a->params->pool.nsp <= 3 &&
               y->dtype == x->dtype && (a->n_out < 2 || !a->out[1].data);
    default: return false;
    }
}

/* ------------------------------------------------------------------ tensor-core convs (cuda_quant.h) */

bool ert_cuda_qmma_geom(const ert_kargs *a, int64_t *M, int64_t *Kg, int64_t *tiles, int64_t *steps) {
    if ((a->op != ERT_OP_QLINEAR_CONV && a->op != ERT_OP_CONV_INTEGER) || !ert_cuda_quant_node_ok(a)) return false;
    const ert_conv_params *cp = &a->params->quant.conv;
    const ert_tview *x = &a->in[0], *w = &a->in[a->op == ERT_OP_QLINEAR_CONV ? 3 : 1], *y = &a->out[0];
    if (cp->nsp > 2 || w->dtype != ERT_DTYPE_I8 || cp->group > 65535 / 32) return false;
    if (a->n_in > 2 && a->in[2].n_elems > 1) return false; /* x_zero_point per tensor */
    const int cd = cp->nhwc ? 3 : 1, sp = cp->nhwc ? 1 : 2; /* the channel dim, the first spatial one */
    int64_t G = cp->group, m = w->dims[0], mg = m / G, cg = x->dims[cd] / G, ksz = 1, pix = y->dims[0];
    for (int i = 0; i < cp->nsp; i++) {
        int64_t d = cp->dilation[i] ? cp->dilation[i] : 1;
        if (cp->kernel[i] < 1 || (cp->kernel[i] - 1) * d >= 32768) return false; /* ktab's 16-bit dh, dw */
        ksz *= cp->kernel[i];
        pix *= y->dims[sp + i];
    }
    if (mg < 16 || cg * ksz < 1 || x->dims[cd] != cg * G) return false;
    ert_qmma_layout l = ert_qmma_layout_of(m, cg * ksz);
    *M = m, *Kg = cg * ksz;
    *tiles = (pix + ERT_QMMA_TN - 1) / ERT_QMMA_TN * ((mg + ERT_QMMA_TM - 1) / ERT_QMMA_TM) * G;
    *steps = l.Kp / ERT_QMMA_TK;
    return true;
}

size_t ert_cuda_qmma_packed_bytes(const ert_kargs *a) {
    int64_t M, Kg, tiles, steps;
    return ert_cuda_qmma_geom(a, &M, &Kg, &tiles, &steps) ? ert_qmma_layout_of(M, Kg).bytes : 0;
}

size_t ert_cuda_qmma_ws(const ert_kargs *a, int sm_count) {
    int64_t M, Kg, tiles, steps;
    if (!ert_cuda_qmma_geom(a, &M, &Kg, &tiles, &steps)) return 0;
    return ert_qmma_ws_bytes(tiles, ert_qmma_split(tiles, steps, sm_count));
}

size_t ert_cuda_packed_bytes(const ert_kargs *a) {
    if (a->op == ERT_OP_QLINEAR_CONV || a->op == ERT_OP_CONV_INTEGER) return ert_cuda_qmma_packed_bytes(a);
    return ert_cuda_dw_rsc_bytes(a);
}

/* filter row m's zero point (nz of them: one, or one per row; none: 0) */
static int wzp_at(const void *zp, bool zp_u8, int64_t nz, int64_t m) {
    const int64_t zi = nz > 1 ? m : 0;
    return !zp || nz < 1 ? 0 : zp_u8 ? ((const uint8_t *)zp)[zi] : ((const int8_t *)zp)[zi];
}

/* the shifted filter w - w_zero_point fits int8 (the packed layout's values) */
static bool qmma_fits(const int8_t *w, const void *zp, bool zp_u8, int64_t nz, int64_t M, int64_t Kg) {
    for (int64_t m = 0; m < M; m++) {
        const int z = wzp_at(zp, zp_u8, nz, m);
        for (int64_t k = 0; k < Kg; k++) {
            const int v = w[m * Kg + k] - z;
            if (v < -128 || v > 127) return false;
        }
    }
    return true;
}

/* host side of the packing: w (M, Kg) int8 and its zero points (nz of them,
 * int8 or uint8) into buf (the layout of cuda_quant.h); false if a shifted
 * weight leaves int8. Channels-last convs take K in the order (kh, kw, c):
 * consecutive k are consecutive bytes of one tap. */
static bool qmma_fill(uint8_t *buf, const ert_qmma_layout *l, const int8_t *w, const void *zp, bool zp_u8, int64_t nz,
                      int64_t M, int64_t Kg, const ert_conv_params *cp, const ert_tview *x) {
    int8_t *pw = (int8_t *)buf;
    int32_t *sum = (int32_t *)(buf + l->sum_off);
    int32_t *tab = (int32_t *)(buf + l->tab_off);
    memset(buf, 0, l->bytes);
    /* 1-D convs: H = KH = 1 */
    const int two = cp->nsp == 2, nhwc = cp->nhwc && two;
    const int64_t H = two ? x->dims[nhwc ? 1 : 2] : 1, W = x->dims[nhwc ? 2 : 2 + two], C = x->dims[nhwc ? 3 : 1];
    const int64_t kh = two ? cp->kernel[0] : 1, kw = cp->kernel[two], ksz = kh * kw, cg = Kg / ksz;
    const int64_t dh = two && cp->dilation[0] ? cp->dilation[0] : 1, dw = cp->dilation[two] ? cp->dilation[two] : 1;
    if (!qmma_fits(w, zp, zp_u8, nz, M, Kg)) return false;
    for (int64_t m = 0; m < M; m++) {
        const int z = wzp_at(zp, zp_u8, nz, m);
        int32_t s = 0;
        for (int64_t k = 0; k < Kg; k++) { /* k = (c, q) of the model's filter */
            const int v = w[m * Kg + k] - z;
            int64_t c = k / ksz, q = k % ksz;
            pw[m * l->Kp + (nhwc ? q * cg + c : k)] = (int8_t)v;
            s += v;
        }
        sum[m] = s;
    }
    for (int64_t k = 0; k < Kg; k++) { /* k in the packed order */
        int64_t c = nhwc ? k % cg : k / ksz, q = nhwc ? k / cg : k % ksz, oh = q / kw * dh, ow = q % kw * dw;
        tab[2 * k] = (int32_t)(nhwc ? (oh * W + ow) * C + c : c * H * W + oh * W + ow);
        tab[2 * k + 1] = (int32_t)(oh | ow << 16);
    }
    return true;
}

/* Create-time self-check of a packed conv: on hashed inputs in scratch
 * memory (nothing of the arena but the node's workspace is touched), the
 * tensor-core kernel must give the CUDA-core kernel's output bit for bit
 * (both are exact integer sums and the same epilogue). The CUDA-core kernel
 * reads the filter from the device: hw (its host copy) goes to scratch
 * memory when the arena holds none (a->packed_only). *ran false: the check
 * could not run (no scratch memory); *same false: it ran and they differ. */
static ert_status qmma_selfcheck(cuda_ctx *c, ert_kargs *a, const int8_t *hw, size_t wb, bool *ran, bool *same) {
    *ran = *same = false;
    const int wi = a->op == ERT_OP_QLINEAR_CONV ? 3 : 1;
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    const size_t xb = (size_t)x->n_elems * ert_dtype_size(x->dtype), yb = (size_t)y->n_elems * ert_dtype_size(y->dtype);
    const size_t xa = (xb + 255) / 256 * 256, ya = (yb + 255) / 256 * 256, wa = a->packed_only ? wb : 0;
    cudaError_t e;
    uint8_t *sc = ert_cuda_scratch(c, xa + 2 * ya + wa, &e);
    if (!sc || a->n_in > 10) return ERT_OK;
    ert_tview vin[10], vout = *y;
    memcpy(vin, a->in, (size_t)a->n_in * sizeof vin[0]);
    vin[0].data = sc;
    ert_kargs b = *a;
    b.in = vin;
    b.out = &vout;
    uint8_t *host = malloc(2 * yb + 1);
    if (!host) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
    e = ert_cuda_fill_bytes_launch(sc, (int64_t)xb, 0x9e3779b9u ^ (unsigned)xb, c->stream);
    if (wa) {
        vin[wi].data = sc + xa + 2 * ya;
        if (e == cudaSuccess) e = cudaMemcpyAsync(vin[wi].data, hw, wb, cudaMemcpyHostToDevice, c->stream);
    }
    vout.data = sc + xa;
    b.packed = NULL; /* the CUDA-core kernel */
    if (e == cudaSuccess) e = ert_cuda_qconv_launch(&b, c->sm_count, c->stream);
    vout.data = sc + xa + ya;
    b.packed = a->packed;
    if (e == cudaSuccess) e = ert_cuda_qconv_launch(&b, c->sm_count, c->stream);
    if (e == cudaSuccess) e = cudaMemcpyAsync(host, sc + xa, yb, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaMemcpyAsync(host + yb, sc + xa + ya, yb, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    *ran = e == cudaSuccess;
    *same = *ran && memcmp(host, host + yb, yb) == 0;
    free(host);
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "int8 conv self-check");
}

bool ert_cuda_qconv_packed_only(void *bctx, const ert_kargs *a) {
    const cuda_ctx *c = bctx;
    int64_t M, Kg, tiles, steps;
    if (c->cc_major < 8 || (a->op != ERT_OP_QLINEAR_CONV && a->op != ERT_OP_CONV_INTEGER) ||
        !ert_cuda_qmma_geom(a, &M, &Kg, &tiles, &steps) || a->packed_bytes < ert_qmma_layout_of(M, Kg).bytes)
        return false;
    const bool ql = a->op == ERT_OP_QLINEAR_CONV;
    const ert_tview *w = &a->in[ql ? 3 : 1], *z = &a->in[ql ? 5 : 3];
    const bool has_z = a->n_in > (ql ? 5 : 3) && z->data && z->n_elems > 0;
    if (!w->data || (a->n_in > (ql ? 5 : 3) && z->n_elems > 0 && !z->data) || w->n_elems != M * Kg) return false;
    return qmma_fits(w->data, has_z ? z->data : NULL, z->dtype == ERT_DTYPE_U8, has_z ? z->n_elems : 0, M, Kg);
}

/* a packed-only conv (the arena holds no copy of its filter) that cannot
 * run from its packing: the session cannot run it at all */
static ert_status qmma_no_fallback(cuda_ctx *c, const ert_kargs *a, const char *why) {
    return ert_set_error(c->ctx, ERT_E_CUDA, "int8 conv '%s': %s, and its filter is held on the device only in the "
                         "tensor-core packing (create the session with ERT_SESSION_NO_PACK to run every int8 conv "
                         "on the CUDA cores)", a->name ? a->name : "?", why);
}

ert_status ert_cuda_qconv_pack(cuda_ctx *c, ert_kargs *a) {
    if (!a->packed) return ERT_OK;
    int64_t M, Kg, tiles, steps;
    if (c->cc_major < 8 || !ert_cuda_qmma_geom(a, &M, &Kg, &tiles, &steps)) {
        if (a->packed_only) return qmma_no_fallback(c, a, "the tensor-core kernel does not apply");
        a->packed = NULL;
        return ERT_OK;
    }
    const bool ql = a->op == ERT_OP_QLINEAR_CONV;
    const ert_tview *w = &a->in[ql ? 3 : 1], *z = &a->in[ql ? 5 : 3];
    const ert_qmma_layout l = ert_qmma_layout_of(M, Kg);
    if (a->packed_bytes < l.bytes) {
        if (a->packed_only) return qmma_no_fallback(c, a, "its packing does not fit");
        a->packed = NULL;
        return ERT_OK;
    }
    const bool has_z = a->n_in > (ql ? 5 : 3) && z->data && z->n_elems > 0;
    const size_t wb = (size_t)(M * Kg), zb = has_z ? (size_t)z->n_elems : 0;
    uint8_t *host = malloc(l.bytes + wb + zb);
    if (!host) return ert_set_error(c->ctx, ERT_E_NOMEM, "node '%s': out of memory packing its int8 filter", a->name ? a->name : "?");
    int8_t *hw = (int8_t *)(host + l.bytes);
    cudaError_t e = cudaStreamSynchronize(c->stream); /* the weights' upload */
    if (e == cudaSuccess && a->packed_only) memcpy(hw, w->data, wb); /* the host copy: the arena has none */
    else if (e == cudaSuccess) e = cudaMemcpy(hw, w->data, wb, cudaMemcpyDefault);
    if (e == cudaSuccess && zb) e = cudaMemcpy(host + l.bytes + wb, z->data, zb, cudaMemcpyDefault);
    bool ok = e == cudaSuccess && qmma_fill(host, &l, hw, zb ? host + l.bytes + wb : NULL, z->dtype == ERT_DTYPE_U8,
                                           (int64_t)zb, M, Kg, &a->params->quant.conv, &a->in[0]);
    if (ok) e = cudaMemcpy(a->packed, host, l.bytes, cudaMemcpyDefault);
    bool ran = false, same = false;
    ert_status st = ERT_OK;
    if (e == cudaSuccess && ok) st = qmma_selfcheck(c, a, hw, wb, &ran, &same);
    free(host);
    if (e != cudaSuccess) return cuda_err(c, e, "int8 conv filter packing");
    if (st != ERT_OK) return st;
    if (!ok) {
        if (a->packed_only) return qmma_no_fallback(c, a, "its filter minus its zero point leaves int8");
        ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s': filter minus its zero point leaves int8: CUDA-core kernel",
                a->name ? a->name : "?");
        a->packed = NULL;
        return ERT_OK;
    }
    if (ran && !same && a->packed_only)
        return qmma_no_fallback(c, a, "the tensor-core kernel disagrees with the CUDA-core kernel on the create-time check");
    if (!same && !a->packed_only) {
        ert_log(c->ctx, ERT_LOG_WARN, "conv '%s': the int8 tensor-core kernel disagrees with the CUDA-core kernel "
                "on the create-time check (or the check could not run): CUDA-core kernel kept", a->name ? a->name : "?");
        a->packed = NULL;
        return ERT_OK;
    }
    if (!ran)
        ert_log(c->ctx, ERT_LOG_WARN, "conv '%s': no scratch memory for the int8 create-time check: tensor-core kernel "
                "kept unchecked (its filter is held only in that packing)", a->name ? a->name : "?");
    ert_log(c->ctx, ERT_LOG_DEBUG, "conv '%s' (%lld x %lld, %lld tiles, split %d): int8 tensor cores%s",
            a->name ? a->name : "?", (long long)M, (long long)Kg, (long long)tiles,
            ert_qmma_split(tiles, steps, c->sm_count), a->packed_only ? ", filter packed only" : "");
    return ERT_OK;
}

ert_status ert_cuda_run_quant(cuda_ctx *c, const ert_kargs *a) {
    cudaError_t e;
    switch (a->op) {
    case ERT_OP_QUANTIZE_LINEAR: e = ert_cuda_quantize_launch(a, c->stream); break;
    case ERT_OP_DEQUANTIZE_LINEAR: e = ert_cuda_dequantize_launch(a, c->stream); break;
    case ERT_OP_QLINEAR_CONV: case ERT_OP_CONV_INTEGER: e = ert_cuda_qconv_launch(a, c->sm_count, c->stream); break;
    case ERT_OP_QLINEAR_MATMUL: case ERT_OP_MATMUL_INTEGER: e = ert_cuda_qmatmul_launch(a, c->stream); break;
    case ERT_OP_MAXPOOL: e = ert_cuda_maxpool_q8_launch(a, c->stream); break;
    case ERT_OP_QLINEAR_ADD: e = ert_cuda_qadd_launch(a, c->stream); break;
    case ERT_OP_QLUT: e = ert_cuda_qlut_launch(a, c->stream); break;
    default: e = cudaErrorInvalidValue;
    }
    if (e == cudaSuccess) return ERT_OK;
    return ert_set_error(c->ctx, e == cudaErrorInvalidValue ? ERT_E_UNSUPPORTED : ERT_E_CUDA,
                         "node '%s' (%s): int8 kernel: %s", a->name ? a->name : "?", ert_op_get(a->op)->name,
                         cudaGetErrorString(e));
}
