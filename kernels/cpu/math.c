/* Sin, Cos (f32 in, f32 out, computed in double and rounded once) and Mod
 * (core/ops/math.c): the oracle, plain loops.
 * Mod broadcasts numpy-style: each output index is unravelled and mapped into
 * a and b (stride 0 on broadcast dims). Integer division by zero is undefined
 * in ONNX; here it gives 0 rather than a trap (bad input never crashes). */
#include "cpu_kernels.h"

#include <math.h>
#include <stdint.h>

ert_status ert_cpu_trig(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    if (x->dtype != ERT_DTYPE_F32 || y->dtype != ERT_DTYPE_F32 || x->n_elems != y->n_elems) return ERT_E_UNSUPPORTED;
    const float *xp = x->data;
    float *yp = y->data;
    bool is_sin = a->op == ERT_OP_SIN;
    for (int64_t i = 0; i < x->n_elems; i++) yp[i] = (float)(is_sin ? sin((double)xp[i]) : cos((double)xp[i]));
    return ERT_OK;
}

/* Offset into t (broadcast to the output's rank nd) of output multi-index idx. */
static int64_t bcast_offset(const ert_tview *t, int nd, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) {
        int64_t i = idx[nd - t->ndim + d];
        off = off * t->dims[d] + (t->dims[d] == 1 ? 0 : i);
    }
    return off;
}

static int64_t imod(int64_t x, int64_t m, bool fmod_) {
    if (m == 0) return 0;
    if (m == -1) return 0; /* INT64_MIN % -1 would trap */
    int64_t r = x % m;     /* C: the dividend's sign */
    if (!fmod_ && r != 0 && ((r < 0) != (m < 0))) r += m;
    return r;
}

ert_status ert_cpu_mod(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *m = &a->in[1], *y = &a->out[0];
    bool f = a->params->mod.fmod;
    if (x->dtype != m->dtype || x->dtype != y->dtype) return ERT_E_UNSUPPORTED;
    int64_t idx[ERT_MAX_DIMS];
    for (int64_t i = 0; i < y->n_elems; i++) {
        int64_t r = i;
        for (int d = y->ndim - 1; d >= 0; d--) {
            idx[d] = r % y->dims[d];
            r /= y->dims[d];
        }
        int64_t ia = bcast_offset(x, y->ndim, idx), ib = bcast_offset(m, y->ndim, idx);
        switch (x->dtype) {
        case ERT_DTYPE_F32:
            ((float *)y->data)[i] = fmodf(((const float *)x->data)[ia], ((const float *)m->data)[ib]);
            break;
        case ERT_DTYPE_I32:
            ((int32_t *)y->data)[i] =
                (int32_t)imod(((const int32_t *)x->data)[ia], ((const int32_t *)m->data)[ib], f);
            break;
        case ERT_DTYPE_I64:
            ((int64_t *)y->data)[i] = imod(((const int64_t *)x->data)[ia], ((const int64_t *)m->data)[ib], f);
            break;
        default: return ERT_E_UNSUPPORTED;
        }
    }
    return ERT_OK;
}
