/* QuantizeLinear / DequantizeLinear: the plain reference (the oracle of the
 * integer paths). Arithmetic as onnxruntime's CPU kernels do it, so the
 * results agree bit for bit:
 *   Q:  y = clamp(round_half_even(x / scale) + zp, qmin, qmax), the quotient
 *       in f32; NaN gives the zero point.
 *   DQ: y = (float)((int32)x - zp) * scale, in f32.
 * x is (outer, D, inner) around the per-axis dim D (D = 1, inner = n per
 * tensor); scale[D], zp[D] (zp NULL: 0). */
#include "cpu_kernels.h"

#include <math.h>

/* outer/D/inner split of x around params axis (-1: per tensor) */
static void split_axis(const ert_tview *x, int64_t axis, int64_t *d, int64_t *inner) {
    *d = 1;
    *inner = x->n_elems;
    if (axis < 0) return;
    *d = x->dims[axis];
    *inner = 1;
    for (int k = (int)axis + 1; k < x->ndim; k++) *inner *= x->dims[k];
}

static int32_t zp_at(const ert_tview *z, int64_t i) {
    if (!z || !z->data) return 0;
    switch (z->dtype) {
    case ERT_DTYPE_I8: return ((const int8_t *)z->data)[i];
    case ERT_DTYPE_U8: return ((const uint8_t *)z->data)[i];
    case ERT_DTYPE_I32: return ((const int32_t *)z->data)[i];
    default: return 0;
    }
}

int32_t ert_cpu_quantize1(float x, float scale, int32_t zp, int32_t qmin, int32_t qmax) {
    float q = x / scale;
    if (isnan(q)) q = 0.0f;
    /* clamp in float first so the conversion below is always defined */
    float lo = (float)(qmin - zp), hi = (float)(qmax - zp);
    q = q < lo ? lo : q > hi ? hi : q;
    return (int32_t)nearbyintf(q) + zp;
}

ert_status ert_cpu_quantize(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *s = &a->in[1], *z = a->n_in > 2 ? &a->in[2] : NULL;
    ert_tview *y = &a->out[0];
    int64_t d, inner;
    split_axis(x, a->params->quant.axis, &d, &inner);
    const float *xp = x->data, *sp = s->data;
    bool u8 = y->dtype == ERT_DTYPE_U8;
    int32_t qmin = u8 ? 0 : -128, qmax = u8 ? 255 : 127;
    for (int64_t i = 0; i < x->n_elems;)
        for (int64_t c = 0; c < d; c++) {
            float sc = sp[c];
            int32_t zp = zp_at(z, c);
            for (int64_t k = 0; k < inner; k++, i++) {
                int32_t v = ert_cpu_quantize1(xp[i], sc, zp, qmin, qmax);
                if (u8) ((uint8_t *)y->data)[i] = (uint8_t)v;
                else ((int8_t *)y->data)[i] = (int8_t)v;
            }
        }
    return ERT_OK;
}

ert_status ert_cpu_dequantize(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *s = &a->in[1], *z = a->n_in > 2 ? &a->in[2] : NULL;
    float *yp = a->out[0].data;
    int64_t d, inner;
    split_axis(x, a->params->quant.axis, &d, &inner);
    const float *sp = s->data;
    for (int64_t i = 0; i < x->n_elems;)
        for (int64_t c = 0; c < d; c++) {
            float sc = sp[c];
            int32_t zp = zp_at(z, c);
            for (int64_t k = 0; k < inner; k++, i++) yp[i] = (float)(zp_at(x, i) - zp) * sc;
        }
    return ERT_OK;
}
