/* prepare() for Resize (opsets 11-19; the opset-10 form Resize(X, scales) too).
 *
 * Inputs: X, roi (read only for tf_crop_and_resize: constant f32, a start
 * and an end per resized axis, [starts..., ends...]),
 * scales (f32) or sizes (i64), one of them constant and non-empty (exporters
 * pass an empty tensor for the unused one). The opset-18 "axes" attribute
 * restricts scales/sizes to those axes; others keep scale 1.
 * Supported: mode nearest (any dtype, the four nearest_mode roundings),
 * linear (f32, N-D multilinear) and cubic (f32, separable 4-tap Keys kernel
 * with cubic_coeff_a and exclude_outside, at most 4 resized dims);
 * coordinate_transformation_mode half_pixel, asymmetric, align_corners,
 * pytorch_half_pixel, half_pixel_symmetric, and tf_crop_and_resize (f32, with
 * sizes; extrapolation_value for source coordinates outside the input).
 * Refused (ERT_E_UNSUPPORTED): antialias=1, keep_aspect_ratio_policy other
 * than stretch, tf_crop_and_resize with scales (ONNX's text sizes the output
 * as floor(in * (roi_end - roi_start) * scale), its reference as
 * floor(in * scale): neither is guessed), or on non-f32 data.
 * Params: resize.scale[d] = output/input per dim (the given scale when scales
 * are given, sizes/in otherwise, as ONNX defines it); cubic_a, exclude_outside.
 * Workspace: ERT_RESIZE_WS_PER_COORD bytes per output coordinate of every dim
 * (the kernel's per-dim tables of 4 source indices and 4 weights). */
#include "ert_internal.h"

#include <math.h>
#include <string.h>

#define ERT_RESIZE_MAX_DIM ((int64_t)1 << 40) /* refuse absurd output dims before they overflow */

static const ert_tinfo *given(const ert_prep *p, int k) {
    if (k >= p->n_in || p->in[k].dtype == ERT_DTYPE_UNDEFINED) return NULL;
    int64_t n;
    if (!ert_dims_nelems(p->in[k].ndim, p->in[k].dims, &n) || n == 0) return NULL;
    return &p->in[k];
}

static int pick(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

/* tf_crop_and_resize: roi (input 1) gives [start, end] per axis, normalised
 * to the input; dims outside axes keep the whole input (0, 1). */
static ert_status read_roi(ert_prep *p, ert_resize_params *rp, const int64_t *axes, int na, bool scales) {
    if (p->in[0].dtype != ERT_DTYPE_F32)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "tf_crop_and_resize Resize of %s (only f32)", ert_dtype_name(p->in[0].dtype));
    if (scales)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "tf_crop_and_resize with scales (give sizes: ONNX's text and reference "
                                                    "disagree on the output size)");
    const ert_attr_val *ev = ert_node_attr(p->node, "extrapolation_value");
    if (ev && ev->type != ERT_ATTR_FLOAT) return ert_prep_error(p, ERT_E_ARG, "Resize extrapolation_value must be a FLOAT");
    rp->extrapolation = ev ? ev->f : 0.0f;
    for (int d = 0; d < ERT_MAX_DIMS; d++) rp->roi_start[d] = 0, rp->roi_end[d] = 1;
    const ert_tinfo *roi = p->n_in > 2 ? given(p, 1) : NULL;
    int64_t n;
    if (!roi) return ert_prep_error(p, ERT_E_ARG, "tf_crop_and_resize needs roi (input 1)");
    if (!roi->const_data) return ert_prep_error(p, ERT_E_UNSUPPORTED, "roi must be a constant");
    if (roi->dtype != ERT_DTYPE_F32) return ert_prep_error(p, ERT_E_UNSUPPORTED, "roi of %s (only f32)", ert_dtype_name(roi->dtype));
    if (roi->ndim != 1 || !ert_dims_nelems(roi->ndim, roi->dims, &n) || n != 2 * (int64_t)na)
        return ert_prep_error(p, ERT_E_SHAPE, "roi must be 1-D with %d values (a start and an end per axis)", 2 * na);
    for (int i = 0; i < na; i++) {
        float lo, hi; /* memcpy: constant data need not be aligned */
        memcpy(&lo, (const char *)roi->const_data + (size_t)i * sizeof lo, sizeof lo);
        memcpy(&hi, (const char *)roi->const_data + (size_t)(na + i) * sizeof hi, sizeof hi);
        if (!isfinite(lo) || !isfinite(hi))
            return ert_prep_error(p, ERT_E_ARG, "roi for axis %lld is not finite", (long long)axes[i]);
        rp->roi_start[axes[i]] = lo;
        rp->roi_end[axes[i]] = hi;
    }
    return ERT_OK;
}

ert_status ert_prepare_resize(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    const ert_node *node = p->node;
    int64_t nx;
    if (x->ndim < 1 || x->ndim > ERT_MAX_DIMS || !ert_dims_nelems(x->ndim, x->dims, &nx) || ert_dtype_size(x->dtype) == 0)
        return ert_prep_error(p, ERT_E_SHAPE, "input 0 has an invalid shape or dtype");
    int r = x->ndim;
    ert_resize_params *rp = &p->params->resize;
    memset(rp, 0, sizeof *rp);

    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                         "tf_crop_and_resize", "half_pixel_symmetric"};
    static const char *const nmodes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const char *s = ert_attr_str(node, "mode", "nearest");
    rp->mode = pick(s, modes, 3);
    if (rp->mode < 0) return ert_prep_error(p, ERT_E_UNSUPPORTED, "Resize mode \"%.32s\"", s);
    const ert_attr_val *ca = ert_node_attr(node, "cubic_coeff_a"), *eo = ert_node_attr(node, "exclude_outside");
    if ((ca && ca->type != ERT_ATTR_FLOAT) || (eo && eo->type != ERT_ATTR_INT))
        return ert_prep_error(p, ERT_E_ARG, "Resize cubic_coeff_a must be a FLOAT and exclude_outside an INT");
    rp->cubic_a = ca ? ca->f : -0.75f;
    rp->exclude_outside = eo && eo->i != 0;
    if (!isfinite(rp->cubic_a)) return ert_prep_error(p, ERT_E_ARG, "Resize cubic_coeff_a is not finite");
    s = ert_attr_str(node, "coordinate_transformation_mode", "half_pixel");
    rp->coord = pick(s, coords, 6);
    if (rp->coord < 0)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "Resize coordinate_transformation_mode \"%.32s\"", s);
    s = ert_attr_str(node, "nearest_mode", "round_prefer_floor");
    rp->nearest_mode = pick(s, nmodes, 4);
    if (rp->nearest_mode < 0) return ert_prep_error(p, ERT_E_UNSUPPORTED, "Resize nearest_mode \"%.32s\"", s);
    if (ert_attr_int(node, "antialias", 0) != 0) return ert_prep_error(p, ERT_E_UNSUPPORTED, "Resize antialias=1");
    s = ert_attr_str(node, "keep_aspect_ratio_policy", "stretch");
    if (strcmp(s, "stretch") != 0) return ert_prep_error(p, ERT_E_UNSUPPORTED, "Resize keep_aspect_ratio_policy \"%.32s\"", s);
    if (rp->mode != 0 && x->dtype != ERT_DTYPE_F32)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "%s Resize of %s (only f32)", modes[rp->mode], ert_dtype_name(x->dtype));

    int64_t axes[ERT_MAX_DIMS];
    int na = ert_attr_ints(node, "axes", axes, ERT_MAX_DIMS);
    if (na > ERT_MAX_DIMS) return ert_prep_error(p, ERT_E_ARG, "too many axes");
    bool seen[ERT_MAX_DIMS] = {false};
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    for (int i = 0; i < na; i++) {
        if (axes[i] < -r || axes[i] >= r) return ert_prep_error(p, ERT_E_ARG, "axis %lld out of range", (long long)axes[i]);
        if (axes[i] < 0) axes[i] += r;
        if (seen[axes[i]]) return ert_prep_error(p, ERT_E_ARG, "axis %lld repeated", (long long)axes[i]);
        seen[axes[i]] = true;
    }

    const ert_tinfo *sc = p->n_in == 2 ? given(p, 1) : given(p, 2), *sz = p->n_in == 2 ? NULL : given(p, 3);
    if ((sc == NULL) == (sz == NULL)) return ert_prep_error(p, ERT_E_ARG, "exactly one of scales and sizes must be given");
    const ert_tinfo *t = sc ? sc : sz;
    int64_t n;
    if (!t->const_data) return ert_prep_error(p, ERT_E_UNSUPPORTED, "%s must be a constant", sc ? "scales" : "sizes");
    if (t->ndim != 1 || !ert_dims_nelems(t->ndim, t->dims, &n) || n != na)
        return ert_prep_error(p, ERT_E_SHAPE, "%s must have %d values", sc ? "scales" : "sizes", na);
    int64_t dims[ERT_MAX_DIMS];
    for (int d = 0; d < r; d++) {
        rp->scale[d] = 1.0;
        dims[d] = x->dims[d];
    }
    int64_t sizes[ERT_MAX_DIMS];
    if (sz && (sz->dtype != ERT_DTYPE_I64 || ert_tinfo_ints(sz, sizes, ERT_MAX_DIMS) != na))
        return ert_prep_error(p, ERT_E_SHAPE, "sizes must be i64");
    if (sc && sc->dtype != ERT_DTYPE_F32) return ert_prep_error(p, ERT_E_SHAPE, "scales must be f32");
    if (rp->coord == 4) {
        ert_status st = read_roi(p, rp, axes, na, sc != NULL);
        if (st) return st;
    }
    for (int i = 0; i < na; i++) {
        int64_t d = axes[i], in = x->dims[d];
        if (sc) {
            float f;
            memcpy(&f, (const char *)sc->const_data + (size_t)i * sizeof f, sizeof f);
            double o = floor((double)f * (double)in);
            if (!(f > 0) || !isfinite(f) || o > (double)ERT_RESIZE_MAX_DIM)
                return ert_prep_error(p, ERT_E_ARG, "scale %g for axis %lld is invalid", (double)f, (long long)d);
            rp->scale[d] = f;
            dims[d] = (int64_t)o;
        } else {
            if (sizes[i] < 0 || sizes[i] > ERT_RESIZE_MAX_DIM || (in == 0 && sizes[i] != 0))
                return ert_prep_error(p, ERT_E_ARG, "size %lld for axis %lld is invalid", (long long)sizes[i], (long long)d);
            dims[d] = sizes[i];
            rp->scale[d] = in ? (double)sizes[i] / (double)in : 1.0;
        }
    }
    /* the kernel combines the taps of every resized dim but the last: 4^3 combinations at most */
    int n_rs = 0;
    for (int d = 0; d + 1 < r; d++)
        n_rs += rp->scale[d] != 1.0 || (rp->coord == 4 && (rp->roi_start[d] != 0 || rp->roi_end[d] != 1));
    if (rp->mode == 2 && n_rs > 3)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "cubic Resize of more than 4 dims");
    int64_t total;
    size_t ws = 0;
    if (!ert_dims_nelems(r, dims, &total)) return ert_prep_error(p, ERT_E_SHAPE, "output element count overflows");
    for (int d = 0; d < r; d++)
        if (ert_add_ovf(ws, (size_t)dims[d], &ws)) return ert_prep_error(p, ERT_E_SHAPE, "output too large");
    if (ert_mul_ovf(ws, ERT_RESIZE_WS_PER_COORD, &p->workspace_bytes)) return ert_prep_error(p, ERT_E_SHAPE, "output too large");
    ert_tinfo *o = &p->out[0];
    memset(o, 0, sizeof *o);
    o->dtype = x->dtype;
    o->ndim = r;
    memcpy(o->dims, dims, sizeof dims);
    return ERT_OK;
}
