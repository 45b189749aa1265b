/* STUB: to be implemented. */
#include "ert_internal.h"

ert_status ert_prepare_where(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_reduce(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

/* Initial versions (extend): unary float ops and broadcasting binary ops. */
ert_status ert_prepare_unary(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    if (x->dtype != ERT_DTYPE_F32)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "input 0 has dtype %s, only f32 is supported", ert_dtype_name(x->dtype));
    p->out[0] = *x;
    p->out[0].const_data = NULL;
    return ERT_OK;
}

ert_status ert_prepare_binary(ert_prep *p) {
    const ert_tinfo *a = &p->in[0], *b = &p->in[1];
    if (a->dtype != b->dtype)
        return ert_prep_error(p, ERT_E_SHAPE, "inputs have dtypes %s and %s", ert_dtype_name(a->dtype), ert_dtype_name(b->dtype));
    ert_tinfo *o = &p->out[0];
    if (!ert_broadcast_shape(a->ndim, a->dims, b->ndim, b->dims, &o->ndim, o->dims))
        return ert_prep_error(p, ERT_E_SHAPE, "shapes cannot be broadcast together");
    o->dtype = a->dtype;
    o->const_data = NULL;
    return ERT_OK;
}

ert_status ert_prepare_identity(ert_prep *p) {
    for (int i = 0; i < p->n_out; i++) {
        p->out[i] = p->in[0];
        p->out[i].const_data = NULL;
        if (i == 1) p->out[1].dtype = ERT_DTYPE_BOOL; /* Dropout mask */
    }
    return ERT_OK;
}
