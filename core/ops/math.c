/* Math ops the exporters emit outside the common families: shape inference.
 * Sin, Cos (opset 7+): f32 x, y of x's shape (f16/bf16 are widened to f32 on
 * the CPU like every float op).
 * Mod (opset 10+): a and b of one dtype (f32, i32, i64), numpy broadcasting;
 * attribute fmod: 0 (default) gives the integer remainder with the divisor's
 * sign (Python's %), 1 the C fmod (the dividend's sign). Floats require
 * fmod = 1, as ONNX says. (torchvision's ViT and Swin compute indices with
 * it; the sessions usually fold it at create.) */
#include "ert_internal.h"

#include <string.h>

ert_status ert_prep_out_as_in0(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    int64_t n;
    if (!ert_dims_nelems(x->ndim, x->dims, &n)) return ert_prep_error(p, ERT_E_SHAPE, "input 0's size overflows");
    p->out[0].dtype = x->dtype;
    p->out[0].ndim = x->ndim;
    memcpy(p->out[0].dims, x->dims, sizeof p->out[0].dims);
    return ERT_OK;
}

ert_status ert_prepare_trig(ert_prep *p) {
    if (p->in[0].dtype != ERT_DTYPE_F32)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "x has dtype %s, expected f32", ert_dtype_name(p->in[0].dtype));
    return ert_prep_out_as_in0(p);
}

ert_status ert_prepare_mod(ert_prep *p) {
    const ert_tinfo *a = &p->in[0], *b = &p->in[1];
    ert_mod_params *mp = &p->params->mod;
    memset(mp, 0, sizeof *mp);
    if (a->dtype != b->dtype)
        return ert_prep_error(p, ERT_E_SHAPE, "a is %s, b is %s: Mod needs one dtype", ert_dtype_name(a->dtype),
                              ert_dtype_name(b->dtype));
    if (a->dtype != ERT_DTYPE_F32 && a->dtype != ERT_DTYPE_I32 && a->dtype != ERT_DTYPE_I64)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "dtype %s (f32, i32 or i64 expected)", ert_dtype_name(a->dtype));
    int64_t f = p->node ? ert_attr_int(p->node, "fmod", 0) : 0;
    if (f != 0 && f != 1) return ert_prep_error(p, ERT_E_FORMAT, "fmod must be 0 or 1 (got %lld)", (long long)f);
    if (a->dtype == ERT_DTYPE_F32 && f != 1)
        return ert_prep_error(p, ERT_E_FORMAT, "fmod must be 1 for floating-point inputs");
    mp->fmod = f == 1;
    int nd;
    int64_t dims[ERT_MAX_DIMS], n;
    if (!ert_broadcast_shape(a->ndim, a->dims, b->ndim, b->dims, &nd, dims))
        return ert_prep_error(p, ERT_E_SHAPE, "shapes of a and b do not broadcast");
    if (!ert_dims_nelems(nd, dims, &n)) return ert_prep_error(p, ERT_E_SHAPE, "output size overflows");
    p->out[0].dtype = a->dtype;
    p->out[0].ndim = nd;
    memcpy(p->out[0].dims, dims, sizeof dims);
    return ERT_OK;
}
