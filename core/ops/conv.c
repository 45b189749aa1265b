/* prepare() of Conv and ConvTranspose (ONNX semantics, newest opset); the
 * common checks are in nn_common.c. */
#include "nn_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ Conv */

ert_status ert_prepare_conv(ert_prep *p) {
    ert_conv_params *cp = &p->params->conv;
    memset(cp, 0, sizeof *cp);
    ert_status st;
    for (int i = 0; i < 4; i++)
        if ((st = ert_nn_need_f32(p, i))) return st;
    const ert_tinfo *x = &p->in[0], *w = &p->in[1];
    if (x->ndim < 3 || x->ndim > 5)
        return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected 3 to 5 (N, C, spatial...)", x->ndim);
    if (w->ndim != x->ndim)
        return ert_prep_error(p, ERT_E_SHAPE, "weight has rank %d, input has rank %d", w->ndim, x->ndim);
    int nsp = x->ndim - 2;
    ert_spatial sa;
    if ((st = ert_nn_read_spatial(p, nsp, &sa))) return st;
    int64_t group = ert_attr_int(ert_nn_node_of(p), "group", 1);
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
        if ((st = ert_nn_fwd_out(p, &sa, i, x->dims[2 + i], false, &od[2 + i]))) return st;
    if (ert_nn_has_in(p, 2) && !(p->in[2].ndim == 1 && p->in[2].dims[0] == M))
        return ert_prep_error(p, ERT_E_SHAPE, "bias must have shape (%lld)", (long long)M);
    if (ert_nn_has_in(p, 3)) {
        const ert_tinfo *r = &p->in[3];
        bool same = r->ndim == x->ndim;
        for (int i = 0; same && i < x->ndim; i++) same = r->dims[i] == od[i];
        if (!same) return ert_prep_error(p, ERT_E_SHAPE, "residual input must have the output's shape");
    }
    if ((st = ert_nn_check_nelems(p, x->ndim, od))) return st;
    cp->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        cp->kernel[i] = sa.k[i];
        cp->stride[i] = sa.s[i];
        cp->dilation[i] = sa.d[i];
        cp->pad_begin[i] = sa.pb[i];
        cp->pad_end[i] = sa.pe[i];
    }
    cp->group = group;
    cp->has_bias = ert_nn_has_in(p, 2);
    cp->has_residual = ert_nn_has_in(p, 3);
    if ((st = ert_nn_read_act(p, &cp->act))) return st;
    ert_nn_set_out(p, x->ndim, od);
    int64_t out_sz = 1, k_sz = 1;
    for (int i = 0; i < nsp; i++) out_sz *= od[2 + i], k_sz *= sa.k[i];
    if (Cg == 1 && group > 1) return ert_nn_set_workspace(p, 0); /* depthwise: direct */
    int64_t Kg;
    if (__builtin_mul_overflow(Cg, k_sz, &Kg)) return ert_nn_set_workspace(p, SIZE_MAX);
    return ert_nn_set_workspace(p, ert_nn_gemm_ws(p, M / group, out_sz, Kg, p->n_threads));
}

/* ------------------------------------------------------------ ConvTranspose */

ert_status ert_prepare_conv_transpose(ert_prep *p) {
    ert_conv_params *cp = &p->params->conv;
    memset(cp, 0, sizeof *cp);
    ert_status st;
    for (int i = 0; i < 3; i++)
        if ((st = ert_nn_need_f32(p, i))) return st;
    const ert_tinfo *x = &p->in[0], *w = &p->in[1];
    if (x->ndim < 3 || x->ndim > 5)
        return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected 3 to 5", x->ndim);
    if (w->ndim != x->ndim)
        return ert_prep_error(p, ERT_E_SHAPE, "weight has rank %d, input has rank %d", w->ndim, x->ndim);
    int nsp = x->ndim - 2;
    ert_spatial sa;
    if ((st = ert_nn_read_spatial(p, nsp, &sa))) return st;
    int64_t group = ert_attr_int(ert_nn_node_of(p), "group", 1);
    if (group < 1) return ert_prep_error(p, ERT_E_FORMAT, "group is %lld", (long long)group);
    int64_t C = x->dims[1], Mg = w->dims[1];
    if (C != w->dims[0] || C % group)
        return ert_prep_error(p, ERT_E_SHAPE, "input has %lld channels, weight expects %lld (group %lld)",
                              (long long)C, (long long)w->dims[0], (long long)group);
    if (Mg < 1 || C < 1) return ert_prep_error(p, ERT_E_SHAPE, "empty channel dim");
    int64_t M;
    if (__builtin_mul_overflow(Mg, group, &M)) return ert_prep_error(p, ERT_E_SHAPE, "channels overflow");
    int64_t opad[3] = {0}, oshape[5] = {0};
    if ((st = ert_nn_read_ints(p, "output_padding", nsp, 0, opad, NULL))) return st;
    int n_os = ert_attr_ints(ert_nn_node_of(p), "output_shape", oshape, 5);
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
        else if (sa.auto_pad == ERT_AUTO_PAD_SAME_UPPER || sa.auto_pad == ERT_AUTO_PAD_SAME_LOWER) {
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
            if (sa.auto_pad == ERT_AUTO_PAD_SAME_UPPER) sa.pb[i] = half, sa.pe[i] = total - half;
            else sa.pb[i] = total - half, sa.pe[i] = half;
            od[2 + i] = want;
        } else {
            if (sa.auto_pad == ERT_AUTO_PAD_VALID) sa.pb[i] = sa.pe[i] = 0;
            if (__builtin_sub_overflow(full, sa.pb[i], &od[2 + i]) || __builtin_sub_overflow(od[2 + i], sa.pe[i], &od[2 + i]) ||
                od[2 + i] < 1)
                return ert_prep_error(p, ERT_E_SHAPE, "pads %lld+%lld leave no output in spatial dim %d",
                                      (long long)sa.pb[i], (long long)sa.pe[i], i);
        }
    }
    if (ert_nn_has_in(p, 2) && !(p->in[2].ndim == 1 && p->in[2].dims[0] == M))
        return ert_prep_error(p, ERT_E_SHAPE, "bias must have shape (%lld)", (long long)M);
    if ((st = ert_nn_check_nelems(p, x->ndim, od))) return st;
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
    cp->has_bias = ert_nn_has_in(p, 2);
    if ((st = ert_nn_read_act(p, &cp->act))) return st;
    ert_nn_set_out(p, x->ndim, od);
    /* workspace: cols (Mg*k, in_sz) + SGEMM scratch for (Mg*k) x in_sz x Cg */
    size_t k_sz = 1, in_sz = 1, kc, cols, gws, total;
    for (int i = 0; i < nsp; i++) k_sz *= (size_t)sa.k[i], in_sz *= (size_t)x->dims[2 + i];
    if (ert_mul_ovf((size_t)Mg, k_sz, &kc) || ert_mul_ovf(kc, in_sz, &cols) || ert_mul_ovf(cols, 4, &cols))
        return ert_nn_set_workspace(p, SIZE_MAX);
    cols = ert_align_up(cols, 64);
    gws = ert_nn_gemm_ws(p, (int64_t)kc, (int64_t)in_sz, C / group, p->n_threads);
    if (gws == SIZE_MAX || ert_add_ovf(cols, gws, &total)) return ert_nn_set_workspace(p, SIZE_MAX);
    return ert_nn_set_workspace(p, total);
}
