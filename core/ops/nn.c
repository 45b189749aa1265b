/* prepare() of the neural-network ops (ONNX semantics, newest opset): Conv,
 * ConvTranspose, BatchNormalization, MatMul, Gemm, MaxPool/AveragePool,
 * GlobalAveragePool/GlobalMaxPool, LayerNormalization, InstanceNormalization,
 * Softmax/LogSoftmax.
 *
 * Each one: parse attributes into typed params (rejecting malformed values
 * with ERT_E_FORMAT), check dtypes (f32 only for now: ERT_E_UNSUPPORTED) and
 * shapes (ERT_E_SHAPE, the message names the numbers), infer the output
 * shape with overflow-checked arithmetic, and size the CPU workspace.
 * Messages do not repeat the op or node: the session prefixes both.
 * Workspace sizes come from the CPU SGEMM's own sizing function (reached
 * through ert_prep.gemm_workspace, which runtime/ fills from the CPU backend
 * table, so core/ includes no kernel header) so the two cannot drift apart. */
#include "ert_internal.h"

#include <math.h>
#include <string.h>

static const ert_node k_empty_node; /* attribute source when prep has no node */

static const ert_node *node_of(const ert_prep *p) { return p->node ? p->node : &k_empty_node; }

static bool has_in(const ert_prep *p, int i) { return i < p->n_in && p->in[i].dtype != ERT_DTYPE_UNDEFINED; }

/* Was optional output i requested (present and not an omitted "" output)? */
static bool wants_out(const ert_prep *p, int i) {
    if (i >= p->n_out) return false;
    return !p->node || !p->node->out || p->node->out[i] >= 0;
}

static ert_status need_f32(ert_prep *p, int i) {
    if (has_in(p, i) && p->in[i].dtype != ERT_DTYPE_F32)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "input %d has dtype %s, only f32 is supported", i,
                              ert_dtype_name(p->in[i].dtype));
    return ERT_OK;
}

static void set_out_k(ert_prep *p, int k, int ndim, const int64_t *dims) {
    ert_tinfo *o = &p->out[k];
    o->dtype = ERT_DTYPE_F32;
    o->ndim = ndim;
    for (int i = 0; i < ndim; i++) o->dims[i] = dims[i];
    o->const_data = NULL;
}

static void set_out(ert_prep *p, int ndim, const int64_t *dims) { set_out_k(p, 0, ndim, dims); }

static ert_status check_nelems(ert_prep *p, int ndim, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (dims[i] < 0 || __builtin_mul_overflow(n, dims[i], &n) || n > (INT64_MAX >> 4))
            return ert_prep_error(p, ERT_E_SHAPE, "output shape overflows");
    return ERT_OK;
}

/* The CPU SGEMM's scratch, through the caller's hook (ert_prep.gemm_workspace). */
static size_t gemm_ws(const ert_prep *p, int64_t M, int64_t N, int64_t K, int n_threads) {
    return p->gemm_workspace ? p->gemm_workspace(M, N, K, n_threads) : 0;
}

static ert_status set_workspace(ert_prep *p, size_t bytes) {
    if (bytes == SIZE_MAX) return ert_prep_error(p, ERT_E_SHAPE, "workspace size overflows");
    p->workspace_bytes = bytes;
    return ERT_OK;
}

/* Fused epilogue attributes (see ert_internal.h). */
static ert_status read_act(ert_prep *p, ert_act_params *act) {
    const ert_node *n = node_of(p);
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

enum { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID };

typedef struct spatial {
    int nsp;
    int64_t k[3], s[3], d[3], pb[3], pe[3];
    bool have_k;
    int auto_pad;
} spatial;

/* Reads an INTS attribute of exactly `want` entries, each >= lo; absent keeps out. */
static ert_status read_ints(ert_prep *p, const char *name, int want, int64_t lo, int64_t *out, bool *present) {
    int64_t tmp[6];
    int n = ert_attr_ints(node_of(p), name, tmp, 6);
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

static ert_status read_spatial(ert_prep *p, int nsp, spatial *sa) {
    memset(sa, 0, sizeof *sa);
    sa->nsp = nsp;
    for (int i = 0; i < 3; i++) sa->s[i] = sa->d[i] = 1;
    ert_status st;
    if ((st = read_ints(p, "kernel_shape", nsp, 1, sa->k, &sa->have_k))) return st;
    if ((st = read_ints(p, "strides", nsp, 1, sa->s, NULL))) return st;
    if ((st = read_ints(p, "dilations", nsp, 1, sa->d, NULL))) return st;
    int64_t pads[6] = {0};
    if ((st = read_ints(p, "pads", 2 * nsp, 0, pads, NULL))) return st;
    for (int i = 0; i < nsp; i++) {
        sa->pb[i] = pads[i];
        sa->pe[i] = pads[nsp + i];
    }
    const char *ap = ert_attr_str(node_of(p), "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0) sa->auto_pad = PAD_NOTSET;
    else if (strcmp(ap, "SAME_UPPER") == 0) sa->auto_pad = PAD_SAME_UPPER;
    else if (strcmp(ap, "SAME_LOWER") == 0) sa->auto_pad = PAD_SAME_LOWER;
    else if (strcmp(ap, "VALID") == 0) sa->auto_pad = PAD_VALID;
    else return ert_prep_error(p, ERT_E_FORMAT, "unknown auto_pad '%s'", ap);
    return ERT_OK;
}

/* Output size of spatial dim i of a forward window op (Conv, pools); also
 * resolves auto_pad into sa->pb/pe. */
static ert_status fwd_out(ert_prep *p, spatial *sa, int i, int64_t in, bool ceil_mode, int64_t *out) {
    int64_t k = sa->k[i], s = sa->s[i], d = sa->d[i], eff, padded;
    if (__builtin_mul_overflow(k - 1, d, &eff) || __builtin_add_overflow(eff, 1, &eff))
        return ert_prep_error(p, ERT_E_FORMAT, "kernel %lld with dilation %lld overflows",
                              (long long)k, (long long)d);
    if (sa->auto_pad == PAD_SAME_UPPER || sa->auto_pad == PAD_SAME_LOWER) {
        int64_t o = in / s + (in % s != 0), total;
        if (__builtin_mul_overflow(o > 0 ? o - 1 : 0, s, &total) || __builtin_add_overflow(total, eff - in, &total))
            return ert_prep_error(p, ERT_E_FORMAT, "padding overflows");
        if (total < 0) total = 0;
        sa->pb[i] = sa->auto_pad == PAD_SAME_UPPER ? total / 2 : total - total / 2;
        sa->pe[i] = total - sa->pb[i];
        *out = o;
        return ERT_OK;
    }
    if (sa->auto_pad == PAD_VALID) sa->pb[i] = sa->pe[i] = 0;
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

/* ------------------------------------------------------------ Conv */

ert_status ert_prepare_conv(ert_prep *p) {
    ert_conv_params *cp = &p->params->conv;
    memset(cp, 0, sizeof *cp);
    ert_status st;
    for (int i = 0; i < 4; i++)
        if ((st = need_f32(p, i))) return st;
    const ert_tinfo *x = &p->in[0], *w = &p->in[1];
    if (x->ndim < 3 || x->ndim > 5)
        return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected 3 to 5 (N, C, spatial...)", x->ndim);
    if (w->ndim != x->ndim)
        return ert_prep_error(p, ERT_E_SHAPE, "weight has rank %d, input has rank %d", w->ndim, x->ndim);
    int nsp = x->ndim - 2;
    spatial sa;
    if ((st = read_spatial(p, nsp, &sa))) return st;
    int64_t group = ert_attr_int(node_of(p), "group", 1);
    if (group < 1) return ert_prep_error(p, ERT_E_FORMAT, "group is %lld, must be >= 1", (long long)group);
    int64_t C = x->dims[1], M = w->dims[0], Cg = w->dims[1];
    if (Cg < 1 || M < 1) return ert_prep_error(p, ERT_E_SHAPE, "weight has an empty channel dim");
    int64_t C_want;
    if (__builtin_mul_overflow(Cg, group, &C_want)) C_want = -1;
    if (C != C_want)
        return ert_prep_error(p, ERT_E_SHAPE, "input has %lld channels, weight expects %lld (group %lld)",
                              (long long)C, (long long)C_want, (long long)group);
    if (M % group)
        return ert_prep_error(p, ERT_E_SHAPE, "weight has %lld output channels, not divisible by group %lld",
                              (long long)M, (long long)group);
    for (int i = 0; i < nsp; i++) {
        if (w->dims[2 + i] < 1)
            return ert_prep_error(p, ERT_E_SHAPE, "weight kernel dim %d is %lld", i, (long long)w->dims[2 + i]);
        if (sa.have_k && sa.k[i] != w->dims[2 + i])
            return ert_prep_error(p, ERT_E_SHAPE, "kernel_shape[%d] is %lld but the weight has %lld", i,
                                  (long long)sa.k[i], (long long)w->dims[2 + i]);
        sa.k[i] = w->dims[2 + i];
    }
    int64_t od[ERT_MAX_DIMS] = {x->dims[0], M};
    for (int i = 0; i < nsp; i++)
        if ((st = fwd_out(p, &sa, i, x->dims[2 + i], false, &od[2 + i]))) return st;
    if (has_in(p, 2) && !(p->in[2].ndim == 1 && p->in[2].dims[0] == M))
        return ert_prep_error(p, ERT_E_SHAPE, "bias must have shape (%lld)", (long long)M);
    if (has_in(p, 3)) {
        const ert_tinfo *r = &p->in[3];
        bool same = r->ndim == x->ndim;
        for (int i = 0; same && i < x->ndim; i++) same = r->dims[i] == od[i];
        if (!same) return ert_prep_error(p, ERT_E_SHAPE, "residual input must have the output's shape");
    }
    if ((st = check_nelems(p, x->ndim, od))) return st;
    cp->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        cp->kernel[i] = sa.k[i];
        cp->stride[i] = sa.s[i];
        cp->dilation[i] = sa.d[i];
        cp->pad_begin[i] = sa.pb[i];
        cp->pad_end[i] = sa.pe[i];
    }
    cp->group = group;
    cp->has_bias = has_in(p, 2);
    cp->has_residual = has_in(p, 3);
    if ((st = read_act(p, &cp->act))) return st;
    set_out(p, x->ndim, od);
    int64_t out_sz = 1, k_sz = 1;
    for (int i = 0; i < nsp; i++) out_sz *= od[2 + i], k_sz *= sa.k[i];
    if (Cg == 1 && group > 1) return set_workspace(p, 0); /* depthwise: direct */
    int64_t Kg;
    if (__builtin_mul_overflow(Cg, k_sz, &Kg)) return set_workspace(p, SIZE_MAX);
    return set_workspace(p, gemm_ws(p, M / group, out_sz, Kg, p->n_threads));
}

/* ------------------------------------------------------------ ConvTranspose */

ert_status ert_prepare_conv_transpose(ert_prep *p) {
    ert_conv_params *cp = &p->params->conv;
    memset(cp, 0, sizeof *cp);
    ert_status st;
    for (int i = 0; i < 3; i++)
        if ((st = need_f32(p, i))) return st;
    const ert_tinfo *x = &p->in[0], *w = &p->in[1];
    if (x->ndim < 3 || x->ndim > 5)
        return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected 3 to 5", x->ndim);
    if (w->ndim != x->ndim)
        return ert_prep_error(p, ERT_E_SHAPE, "weight has rank %d, input has rank %d", w->ndim, x->ndim);
    int nsp = x->ndim - 2;
    spatial sa;
    if ((st = read_spatial(p, nsp, &sa))) return st;
    int64_t group = ert_attr_int(node_of(p), "group", 1);
    if (group < 1) return ert_prep_error(p, ERT_E_FORMAT, "group is %lld", (long long)group);
    int64_t C = x->dims[1], Mg = w->dims[1];
    if (C != w->dims[0] || C % group)
        return ert_prep_error(p, ERT_E_SHAPE, "input has %lld channels, weight expects %lld (group %lld)",
                              (long long)C, (long long)w->dims[0], (long long)group);
    if (Mg < 1 || C < 1) return ert_prep_error(p, ERT_E_SHAPE, "empty channel dim");
    int64_t M;
    if (__builtin_mul_overflow(Mg, group, &M)) return ert_prep_error(p, ERT_E_SHAPE, "channels overflow");
    int64_t opad[3] = {0}, oshape[5] = {0};
    if ((st = read_ints(p, "output_padding", nsp, 0, opad, NULL))) return st;
    int n_os = ert_attr_ints(node_of(p), "output_shape", oshape, 5);
    if (n_os >= 0 && n_os != nsp && n_os != nsp + 2)
        return ert_prep_error(p, ERT_E_FORMAT, "output_shape has %d values, expected %d", n_os, nsp);
    int64_t od[ERT_MAX_DIMS] = {x->dims[0], M};
    for (int i = 0; i < nsp; i++) {
        int64_t k = w->dims[2 + i], s = sa.s[i], d = sa.d[i], in = x->dims[2 + i];
        if (k < 1) return ert_prep_error(p, ERT_E_SHAPE, "weight kernel dim %d is %lld", i, (long long)k);
        if (sa.have_k && sa.k[i] != k)
            return ert_prep_error(p, ERT_E_SHAPE, "kernel_shape[%d] is %lld but the weight has %lld", i,
                                  (long long)sa.k[i], (long long)k);
        sa.k[i] = k;
        if (opad[i] >= (s > d ? s : d))
            return ert_prep_error(p, ERT_E_FORMAT, "output_padding[%d]=%lld must be below the stride or dilation",
                                  i, (long long)opad[i]);
        /* full = s*(in-1) + output_padding + (k-1)*d + 1: the unpadded output size */
        int64_t full, eff;
        if (in < 1 || __builtin_mul_overflow(k - 1, d, &eff) || __builtin_mul_overflow(s, in - 1, &full) ||
            __builtin_add_overflow(full, opad[i] + eff + 1, &full))
            return ert_prep_error(p, ERT_E_SHAPE, "output size overflows in spatial dim %d", i);
        int64_t want = -1;
        if (n_os >= 0) want = oshape[n_os == nsp ? i : i + 2];
        else if (sa.auto_pad == PAD_SAME_UPPER || sa.auto_pad == PAD_SAME_LOWER) {
            if (__builtin_mul_overflow(in, s, &want)) return ert_prep_error(p, ERT_E_SHAPE, "overflow");
        }
        if (want >= 0) {
            if (want < 1 || want - full > 1024 * 1024)
                return ert_prep_error(p, ERT_E_SHAPE, "output_shape[%d]=%lld is not reachable", i,
                                      (long long)want);
            int64_t total = full - want; /* may be negative: output grows past the last tap (zeros + bias) */
            /* ONNX's formula divides with floor (Python //), not C's truncation: a
             * negative total must grow the end, not shift the start */
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
            if (sa.auto_pad == PAD_SAME_UPPER) sa.pb[i] = half, sa.pe[i] = total - half;
            else sa.pb[i] = total - half, sa.pe[i] = half;
            od[2 + i] = want;
        } else {
            if (sa.auto_pad == PAD_VALID) sa.pb[i] = sa.pe[i] = 0;
            if (__builtin_sub_overflow(full, sa.pb[i], &od[2 + i]) || __builtin_sub_overflow(od[2 + i], sa.pe[i], &od[2 + i]) ||
                od[2 + i] < 1)
                return ert_prep_error(p, ERT_E_SHAPE, "pads %lld+%lld leave no output in spatial dim %d",
                                      (long long)sa.pb[i], (long long)sa.pe[i], i);
        }
    }
    if (has_in(p, 2) && !(p->in[2].ndim == 1 && p->in[2].dims[0] == M))
        return ert_prep_error(p, ERT_E_SHAPE, "bias must have shape (%lld)", (long long)M);
    if ((st = check_nelems(p, x->ndim, od))) return st;
    cp->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        cp->kernel[i] = sa.k[i];
        cp->stride[i] = sa.s[i];
        cp->dilation[i] = sa.d[i];
        cp->pad_begin[i] = sa.pb[i];
        cp->pad_end[i] = sa.pe[i];
        cp->out_pad[i] = opad[i];
    }
    cp->group = group;
    cp->has_bias = has_in(p, 2);
    if ((st = read_act(p, &cp->act))) return st;
    set_out(p, x->ndim, od);
    /* workspace: cols (Mg*k, in_sz) + SGEMM scratch for (Mg*k) x in_sz x Cg */
    size_t k_sz = 1, in_sz = 1, kc, cols, gws, total;
    for (int i = 0; i < nsp; i++) k_sz *= (size_t)sa.k[i], in_sz *= (size_t)x->dims[2 + i];
    if (ert_mul_ovf((size_t)Mg, k_sz, &kc) || ert_mul_ovf(kc, in_sz, &cols) || ert_mul_ovf(cols, 4, &cols))
        return set_workspace(p, SIZE_MAX);
    cols = ert_align_up(cols, 64);
    gws = gemm_ws(p, (int64_t)kc, (int64_t)in_sz, C / group, p->n_threads);
    if (gws == SIZE_MAX || ert_add_ovf(cols, gws, &total)) return set_workspace(p, SIZE_MAX);
    return set_workspace(p, total);
}

/* ------------------------------------------------------------ BatchNormalization */

/* Inputs 1 .. n-1 (BatchNorm's scale, B, mean, var; InstanceNorm's scale, B)
 * hold one value per channel of x = input 0 (rank >= 2): shape (C). */
static ert_status per_channel(ert_prep *p, int n, const char *const *names) {
    int64_t C = p->in[0].dims[1];
    for (int i = 1; i < n; i++) {
        const ert_tinfo *t = &p->in[i];
        if (t->ndim != 1 || t->dims[0] != C)
            return ert_prep_error(p, ERT_E_SHAPE, "%s must have shape (%lld), the input's channels; got rank %d, dim 0 = %lld",
                                  names[i], (long long)C, t->ndim, (long long)(t->ndim ? t->dims[0] : 0));
    }
    return ERT_OK;
}

ert_status ert_prepare_batchnorm(ert_prep *p) {
    ert_norm_params *np = &p->params->norm;
    memset(np, 0, sizeof *np);
    ert_status st;
    for (int i = 0; i < 5; i++)
        if ((st = need_f32(p, i))) return st;
    np->training = ert_attr_int(node_of(p), "training_mode", 0) != 0;
    /* opset 14+: the running mean/var outputs exist only in training mode */
    if (!np->training && (wants_out(p, 1) || wants_out(p, 2)))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "running mean/var outputs without training_mode=1 are not supported");
    const ert_tinfo *x = &p->in[0];
    if (x->ndim < 2) return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected >= 2", x->ndim);
    static const char *names[] = {"", "scale", "B", "mean", "var"};
    if ((st = per_channel(p, 5, names))) return st;
    np->epsilon = ert_attr_float(node_of(p), "epsilon", 1e-5f);
    np->momentum = ert_attr_float(node_of(p), "momentum", 0.9f);
    if (!(np->epsilon >= 0)) return ert_prep_error(p, ERT_E_FORMAT, "epsilon must be >= 0");
    set_out(p, x->ndim, x->dims);
    for (int k = 1; k < p->n_out; k++) set_out_k(p, k, 1, &x->dims[1]); /* running mean/var: (C) */
    return ERT_OK;
}

/* InstanceNormalization (opset 6+): x is (N, C, D1, ...), rank >= 3; each
 * (n, c) plane is normalised with its own mean and biased variance, then
 * scale[c], B[c]. Rank 2 (no spatial dims) is refused: ONNX's shape
 * inference requires spatial dims, and the result would be B alone. */
ert_status ert_prepare_instancenorm(ert_prep *p) {
    ert_norm_params *np = &p->params->norm;
    memset(np, 0, sizeof *np);
    ert_status st;
    for (int i = 0; i < 3; i++)
        if ((st = need_f32(p, i))) return st;
    const ert_tinfo *x = &p->in[0];
    if (x->ndim < 3) return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected >= 3 (N, C, D1, ...)", x->ndim);
    static const char *names[] = {"", "scale", "B"};
    if ((st = per_channel(p, 3, names))) return st;
    np->epsilon = ert_attr_float(node_of(p), "epsilon", 1e-5f);
    if (!(np->epsilon >= 0)) return ert_prep_error(p, ERT_E_FORMAT, "epsilon must be >= 0");
    set_out(p, x->ndim, x->dims);
    return ERT_OK;
}

/* ------------------------------------------------------------ MatMul */

ert_status ert_prepare_matmul(ert_prep *p) {
    ert_gemm_params *gp = &p->params->gemm;
    memset(gp, 0, sizeof *gp);
    gp->alpha = 1.0f;
    ert_status st;
    for (int i = 0; i < 2; i++)
        if ((st = need_f32(p, i))) return st;
    const ert_tinfo *a = &p->in[0], *b = &p->in[1];
    if (a->ndim < 1 || b->ndim < 1) return ert_prep_error(p, ERT_E_SHAPE, "inputs must have rank >= 1");
    int64_t M = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1, K = a->dims[a->ndim - 1];
    int64_t Kb = b->ndim >= 2 ? b->dims[b->ndim - 2] : b->dims[0], N = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
    if (K != Kb)
        return ert_prep_error(p, ERT_E_SHAPE, "inner dims differ: a has K=%lld, b has K=%lld", (long long)K,
                              (long long)Kb);
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim > 2 ? b->ndim - 2 : 0, nd;
    int64_t od[ERT_MAX_DIMS + 2];
    if (!ert_broadcast_shape(na, a->dims, nb, b->dims, &nd, od))
        return ert_prep_error(p, ERT_E_SHAPE, "batch dims cannot be broadcast");
    if (a->ndim >= 2) od[nd++] = M;
    if (b->ndim >= 2) od[nd++] = N;
    if (nd > ERT_MAX_DIMS) return ert_prep_error(p, ERT_E_SHAPE, "output rank %d too large", nd);
    if ((st = check_nelems(p, nd, od))) return st;
    if ((st = read_act(p, &gp->act))) return st;
    set_out(p, nd, od);
    return set_workspace(p, gemm_ws(p, M, N, K, p->n_threads));
}

/* ------------------------------------------------------------ Gemm */

ert_status ert_prepare_gemm(ert_prep *p) {
    ert_gemm_params *gp = &p->params->gemm;
    memset(gp, 0, sizeof *gp);
    ert_status st;
    for (int i = 0; i < 3; i++)
        if ((st = need_f32(p, i))) return st;
    const ert_tinfo *a = &p->in[0], *b = &p->in[1];
    if (a->ndim != 2 || b->ndim != 2)
        return ert_prep_error(p, ERT_E_SHAPE, "A and B must be 2-D (ranks %d and %d)", a->ndim, b->ndim);
    const ert_node *n = node_of(p);
    gp->alpha = ert_attr_float(n, "alpha", 1.0f);
    gp->beta = ert_attr_float(n, "beta", 1.0f);
    gp->trans_a = ert_attr_int(n, "transA", 0) != 0;
    gp->trans_b = ert_attr_int(n, "transB", 0) != 0;
    int64_t M = a->dims[gp->trans_a ? 1 : 0], K = a->dims[gp->trans_a ? 0 : 1];
    int64_t Kb = b->dims[gp->trans_b ? 1 : 0], N = b->dims[gp->trans_b ? 0 : 1];
    if (K != Kb)
        return ert_prep_error(p, ERT_E_SHAPE, "inner dims differ: op(A) is (%lld,%lld), op(B) is (%lld,%lld)",
                              (long long)M, (long long)K, (long long)Kb, (long long)N);
    if (has_in(p, 2)) {
        const ert_tinfo *c = &p->in[2];
        bool ok = c->ndim <= 2;
        int64_t want[2] = {M, N};
        for (int i = 0; ok && i < c->ndim; i++) {
            int64_t dc = c->dims[i], dw = want[2 - c->ndim + i];
            ok = dc == dw || dc == 1;
        }
        if (!ok) return ert_prep_error(p, ERT_E_SHAPE, "C cannot be broadcast to (%lld,%lld)", (long long)M, (long long)N);
        gp->has_c = true;
    }
    int64_t od[2] = {M, N};
    if ((st = check_nelems(p, 2, od))) return st;
    if ((st = read_act(p, &gp->act))) return st;
    set_out(p, 2, od);
    return set_workspace(p, gemm_ws(p, M, N, K, p->n_threads));
}

/* ------------------------------------------------------------ pools */

ert_status ert_prepare_pool(ert_prep *p) {
    ert_pool_params *pp = &p->params->pool;
    memset(pp, 0, sizeof *pp);
    ert_status st;
    bool is_max = p->node && p->node->op == ERT_OP_MAXPOOL;
    if ((st = need_f32(p, 0))) return st;
    if (is_max && wants_out(p, 1))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "the Indices output is not supported");
    const ert_tinfo *x = &p->in[0];
    if (x->ndim < 3 || x->ndim > 5)
        return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected 3 to 5", x->ndim);
    int nsp = x->ndim - 2;
    spatial sa;
    if ((st = read_spatial(p, nsp, &sa))) return st;
    if (!sa.have_k) return ert_prep_error(p, ERT_E_FORMAT, "kernel_shape is required");
    if (ert_attr_int(node_of(p), "storage_order", 0) != 0)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "storage_order=1 is not supported");
    pp->ceil_mode = ert_attr_int(node_of(p), "ceil_mode", 0) != 0;
    pp->count_include_pad = !is_max && ert_attr_int(node_of(p), "count_include_pad", 0) != 0;
    int64_t od[ERT_MAX_DIMS] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < nsp; i++)
        if ((st = fwd_out(p, &sa, i, x->dims[2 + i], pp->ceil_mode, &od[2 + i]))) return st;
    pp->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        pp->kernel[i] = sa.k[i];
        pp->stride[i] = sa.s[i];
        pp->dilation[i] = sa.d[i];
        pp->pad_begin[i] = sa.pb[i];
        pp->pad_end[i] = sa.pe[i];
    }
    set_out(p, x->ndim, od);
    return ERT_OK;
}

ert_status ert_prepare_global_pool(ert_prep *p) {
    ert_status st;
    if ((st = need_f32(p, 0))) return st;
    const ert_tinfo *x = &p->in[0];
    if (x->ndim < 2) return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected >= 2", x->ndim);
    int64_t od[ERT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) od[i] = i < 2 ? x->dims[i] : 1;
    set_out(p, x->ndim, od);
    return ERT_OK;
}

/* ------------------------------------------------------------ LayerNormalization */

ert_status ert_prepare_layernorm(ert_prep *p) {
    ert_norm_params *np = &p->params->norm;
    memset(np, 0, sizeof *np);
    ert_status st;
    for (int i = 0; i < 3; i++)
        if ((st = need_f32(p, i))) return st;
    const ert_tinfo *x = &p->in[0];
    int64_t axis = ert_attr_int(node_of(p), "axis", -1);
    if (axis < -x->ndim || axis >= x->ndim || x->ndim == 0)
        return ert_prep_error(p, ERT_E_SHAPE, "axis %lld out of range for rank %d", (long long)axis,
                              x->ndim);
    if (axis < 0) axis += x->ndim;
    np->axis = axis;
    np->epsilon = ert_attr_float(node_of(p), "epsilon", 1e-5f);
    if (!(np->epsilon >= 0)) return ert_prep_error(p, ERT_E_FORMAT, "epsilon must be >= 0");
    int nn = x->ndim - (int)axis;
    for (int k = 1; k < 3; k++) {
        if (!has_in(p, k)) continue;
        const ert_tinfo *s = &p->in[k];
        int64_t ne = 1;
        for (int i = 0; i < s->ndim; i++) ne *= s->dims[i];
        if (ne == 1) continue; /* one value for every element */
        /* otherwise it must match the normalised shape (leading 1s allowed) */
        bool ok = true;
        for (int i = 0; ok && i < s->ndim; i++) {
            int j = i - (s->ndim - nn);
            ok = j >= 0 ? (s->dims[i] == x->dims[axis + j] || s->dims[i] == 1) : s->dims[i] == 1;
        }
        int64_t inner = 1;
        for (int i = (int)axis; i < x->ndim; i++) inner *= x->dims[i];
        if (ok && ne != inner) /* valid ONNX (partial broadcast), not handled by the kernel */
            return ert_prep_error(p, ERT_E_UNSUPPORTED, "%s broadcasts over part of the normalised shape",
                                  k == 1 ? "scale" : "bias");
        if (!ok)
            return ert_prep_error(p, ERT_E_SHAPE, "%s does not match the normalised shape (axis %lld)",
                                  k == 1 ? "scale" : "bias", (long long)axis);
    }
    set_out(p, x->ndim, x->dims);
    /* Mean, InvStdDev: x's shape with the normalised dims [axis, ndim) set to
     * 1; f32 whatever stash_type says (the kernel accumulates in double) */
    int64_t sd[ERT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) sd[i] = i < axis ? x->dims[i] : 1;
    for (int k = 1; k < p->n_out; k++) set_out_k(p, k, x->ndim, sd);
    return ERT_OK;
}

/* ------------------------------------------------------------ Softmax / LogSoftmax */

ert_status ert_prepare_softmax(ert_prep *p) {
    ert_axis_params *ap = &p->params->axis;
    memset(ap, 0, sizeof *ap);
    ert_status st;
    if ((st = need_f32(p, 0))) return st;
    const ert_tinfo *x = &p->in[0];
    int64_t axis = ert_attr_int(node_of(p), "axis", -1);
    if (x->ndim < 1 || axis < -x->ndim || axis >= x->ndim)
        return ert_prep_error(p, ERT_E_SHAPE, "axis %lld out of range for rank %d", (long long)axis,
                              x->ndim);
    if (axis < 0) axis += x->ndim;
    ap->axis = axis;
    set_out(p, x->ndim, x->dims);
    return ERT_OK;
}
