/* Logical ops on bool tensors: shape inference. Not (opset 1+): x bool, y
 * bool of x's shape. (EdgeNeXt's positional encoding computes its mask with
 * Not over a constant, so sessions usually fold it at create.) */
#include "ert_internal.h"


ert_status ert_prepare_not(ert_prep *p) {
    const ert_tinfo *x = &p->in[0];
    if (x->dtype != ERT_DTYPE_BOOL)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "x has dtype %s, Not takes bool", ert_dtype_name(x->dtype));
    return ert_prep_out_as_in0(p);
}
