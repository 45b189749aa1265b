/* Helpers (nn_internal.h) shared by prepare() of the neural-network ops
 * (ONNX semantics, newest opset): Conv, ConvTranspose (conv.c), MatMul, Gemm
 * (matmul.c), MaxPool/AveragePool, GlobalAveragePool/GlobalMaxPool
 * (pool.c), BatchNormalization, InstanceNormalization, LayerNormalization
 * (norm.c), Softmax/LogSoftmax (softmax.c).
 *
 * Each prepare: parse attributes into typed params (rejecting malformed values
 * with ERT_E_FORMAT), check dtypes (f32 only for now: ERT_E_UNSUPPORTED) and
 * shapes (ERT_E_SHAPE, the message names the numbers), infer the output
 * shape with overflow-checked arithmetic, and size the CPU workspace.
 * Messages do not repeat the op or node: the session prefixes both.
 * Workspace sizes come from the CPU SGEMM's own sizing function (reached
 * through ert_prep.gemm_workspace, which runtime/ fills from the CPU backend
 * table, so core/ includes no kernel header) so the two cannot drift apart. */
#include "nn_internal.h"

#include <math.h>
#include <string.h>

static const ert_node k_empty_node; /* attribute source when prep has no node */

const ert_node *ert_nn_node_of(const ert_prep *p) { return p->node ? p->node : &k_empty_node; }

bool ert_nn_has_in(const ert_prep *p, int i) { return i < p->n_in && p->in[i].dtype != ERT_DTYPE_UNDEFINED; }

/* Was optional output i requested (present and not an omitted "" output)? */
bool ert_nn_wants_out(const ert_prep *p, int i) {
    if (i >= p->n_out) return false;
    return !p->node || !p->node->out || p->node->out[i] >= 0;
}

ert_status ert_nn_need_f32(ert_prep *p, int i) {
    if (ert_nn_has_in(p, i) && p->in[i].dtype != ERT_DTYPE_F32)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "input %d has dtype %s, only f32 is supported", i,
                              ert_dtype_name(p->in[i].dtype));
    return ERT_OK;
}

void ert_nn_set_out_k(ert_prep *p, int k, int ndim, const int64_t *dims) {
    ert_tinfo *o = &p->out[k];
    o->dtype = ERT_DTYPE_F32;
    o->ndim = ndim;
    for (int i = 0; i < ndim; i++) o->dims[i] = dims[i];
    o->const_data = NULL;
}

void ert_nn_set_out(ert_prep *p, int ndim, const int64_t *dims) { ert_nn_set_out_k(p, 0, ndim, dims); }

ert_status ert_nn_check_nelems(ert_prep *p, int ndim, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (dims[i] < 0 || __builtin_mul_overflow(n, dims[i], &n) || n > (INT64_MAX >> 4))
            return ert_prep_error(p, ERT_E_SHAPE, "output shape overflows");
    return ERT_OK;
}

/* The CPU SGEMM's scratch, through the caller's hook (ert_prep.gemm_workspace). */
size_t ert_nn_gemm_ws(const ert_prep *p, int64_t M, int64_t N, int64_t K, int n_threads) {
    return p->gemm_workspace ? p->gemm_workspace(M, N, K, n_threads) : 0;
}

ert_status ert_nn_set_workspace(ert_prep *p, size_t bytes) {
    if (bytes == SIZE_MAX) return ert_prep_error(p, ERT_E_SHAPE, "workspace size overflows");
    p->workspace_bytes = bytes;
    return ERT_OK;
}

/* Fused epilogue attributes (see ert_internal.h). */
ert_status ert_nn_read_act(ert_prep *p, ert_act_params *act) {
    const ert_node *n = ert_nn_node_of(p);
    int64_t k = ert_attr_int(n, "ert_act", ERT_ACT_NONE);
    if (k < ERT_ACT_NONE || k > ERT_ACT_GELU)
        return ert_prep_error(p, ERT_E_FORMAT, "ert_act %lld is not a known activation", (long long)k);
    float da = 0.0f, db = 0.0f;
    if (k == ERT_ACT_LEAKY_RELU) da = 0.01f;
    if (k == ERT_ACT_CLIP) da = -INFINITY, db = INFINITY;
    if (k == ERT_ACT_HARD_SIGMOID) da = 0.2f, db = 0.5f;
    act->kind = (ert_act)k;
    act->alpha = ert_attr_float(n, "ert_act_alpha", da);
    act->beta = ert_attr_float(n, "ert_act_beta", db);
    return ERT_OK;
}

/* ------------------------------------------------------------ spatial attributes */



/* Reads an INTS attribute of exactly `want` entries, each >= lo; absent keeps out. */
ert_status ert_nn_read_ints(ert_prep *p, const char *name, int want, int64_t lo, int64_t *out, bool *present) {
    int64_t tmp[6];
    int n = ert_attr_ints(ert_nn_node_of(p), name, tmp, 6);
    if (present) *present = n >= 0;
    if (n < 0) return ERT_OK;
    if (n != want)
        return ert_prep_error(p, ERT_E_FORMAT, "%s has %d values, expected %d", name, n, want);
    for (int i = 0; i < n; i++) {
        if (tmp[i] < lo)
            return ert_prep_error(p, ERT_E_FORMAT, "%s[%d] is %lld, must be >= %lld", name, i,
                                  (long long)tmp[i], (long long)lo);
        out[i] = tmp[i];
    }
    return ERT_OK;
}

ert_status ert_nn_read_spatial(ert_prep *p, int nsp, ert_spatial *sa) {
    memset(sa, 0, sizeof *sa);
    sa->nsp = nsp;
    for (int i = 0; i < 3; i++) sa->s[i] = sa->d[i] = 1;
    ert_status st;
    if ((st = ert_nn_read_ints(p, "kernel_shape", nsp, 1, sa->k, &sa->have_k))) return st;
    if ((st = ert_nn_read_ints(p, "strides", nsp, 1, sa->s, NULL))) return st;
    if ((st = ert_nn_read_ints(p, "dilations", nsp, 1, sa->d, NULL))) return st;
    int64_t pads[6] = {0};
    if ((st = ert_nn_read_ints(p, "pads", 2 * nsp, 0, pads, NULL))) return st;
    for (int i = 0; i < nsp; i++) {
        sa->pb[i] = pads[i];
        sa->pe[i] = pads[nsp + i];
    }
    const char *ap = ert_attr_str(ert_nn_node_of(p), "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0) sa->auto_pad = ERT_AUTO_PAD_NOTSET;
    else if (strcmp(ap, "SAME_UPPER") == 0) sa->auto_pad = ERT_AUTO_PAD_SAME_UPPER;
    else if (strcmp(ap, "SAME_LOWER") == 0) sa->auto_pad = ERT_AUTO_PAD_SAME_LOWER;
    else if (strcmp(ap, "VALID") == 0) sa->auto_pad = ERT_AUTO_PAD_VALID;
    else return ert_prep_error(p, ERT_E_FORMAT, "unknown auto_pad '%s'", ap);
    return ERT_OK;
}

/* Output size of spatial dim i of a forward window op (Conv, pools); also
 * resolves auto_pad into sa->pb/pe. */
ert_status ert_nn_fwd_out(ert_prep *p, ert_spatial *sa, int i, int64_t in, bool ceil_mode, int64_t *out) {
    int64_t k = sa->k[i], s = sa->s[i], d = sa->d[i], eff, padded;
    if (__builtin_mul_overflow(k - 1, d, &eff) || __builtin_add_overflow(eff, 1, &eff))
        return ert_prep_error(p, ERT_E_FORMAT, "kernel %lld with dilation %lld overflows",
                              (long long)k, (long long)d);
    if (sa->auto_pad == ERT_AUTO_PAD_SAME_UPPER || sa->auto_pad == ERT_AUTO_PAD_SAME_LOWER) {
        int64_t o = in / s + (in % s != 0), total;
        if (__builtin_mul_overflow(o > 0 ? o - 1 : 0, s, &total) || __builtin_add_overflow(total, eff - in, &total))
            return ert_prep_error(p, ERT_E_FORMAT, "padding overflows");
        if (total < 0) total = 0;
        sa->pb[i] = sa->auto_pad == ERT_AUTO_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        sa->pe[i] = total - sa->pb[i];
        *out = o;
        return ERT_OK;
    }
    if (sa->auto_pad == ERT_AUTO_PAD_VALID) sa->pb[i] = sa->pe[i] = 0;
    if (__builtin_add_overflow(in, sa->pb[i], &padded) || __builtin_add_overflow(padded, sa->pe[i], &padded))
        return ert_prep_error(p, ERT_E_FORMAT, "pads overflow");
    if (padded < eff)
        return ert_prep_error(p, ERT_E_SHAPE,
                              "kernel extent %lld (kernel %lld, dilation %lld) is larger than the padded input %lld "
                              "in spatial dim %d",
                              (long long)eff, (long long)k, (long long)d, (long long)padded, i);
    int64_t num = padded - eff;
    int64_t o = (ceil_mode ? num / s + (num % s != 0) : num / s) + 1;
    /* a ceil_mode window must start inside the input or its left padding */
    if (ceil_mode && (o - 1) * s >= in + sa->pb[i]) o--;
    *out = o;
    return ERT_OK;
}
