/* CumSum (opset 11+): shape inference.
 * Inputs: x (any rank >= 1; f32, f16/bf16 (widened to f32 on the CPU), i32,
 * i64) and axis (a 0-D or one-element 1-D i32/i64 constant in [-rank, rank)).
 * Attributes: exclusive (y[j] excludes x[j]), reverse (sums run from the
 * end). The output has x's dtype and shape. The axis must be known at create
 * (every exporter emits it as an initializer); a computed axis is refused
 * with ERT_E_UNSUPPORTED naming the input. */
#include "ert_internal.h"

#include <string.h>

ert_status ert_prepare_cumsum(ert_prep *p) {
    ert_cumsum_params *cp = &p->params->cumsum;
    memset(cp, 0, sizeof *cp);
    const ert_tinfo *x = &p->in[0], *ax = &p->in[1];
    if (x->dtype != ERT_DTYPE_F32 && x->dtype != ERT_DTYPE_F16 && x->dtype != ERT_DTYPE_BF16 &&
        x->dtype != ERT_DTYPE_I32 && x->dtype != ERT_DTYPE_I64)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "x has dtype %s (f32, f16, bf16, i32 or i64 expected)",
                              ert_dtype_name(x->dtype));
    if (x->ndim < 1) return ert_prep_error(p, ERT_E_SHAPE, "x must have rank >= 1 (it is a scalar)");
    if (ax->dtype != ERT_DTYPE_I32 && ax->dtype != ERT_DTYPE_I64)
        return ert_prep_error(p, ERT_E_SHAPE, "axis (input 1) has dtype %s, expected i32 or i64", ert_dtype_name(ax->dtype));
    if (ax->ndim > 1 || (ax->ndim == 1 && ax->dims[0] != 1))
        return ert_prep_error(p, ERT_E_SHAPE, "axis (input 1) must hold one value (0-D or 1-D of length 1)");
    if (!ax->const_data) return ert_prep_error(p, ERT_E_UNSUPPORTED, "axis (input 1) must be a constant");
    int64_t a;
    if (ert_tinfo_ints(ax, &a, 1) != 1) return ert_prep_error(p, ERT_E_SHAPE, "axis (input 1) must hold one value");
    if (a < -x->ndim || a >= x->ndim)
        return ert_prep_error(p, ERT_E_ARG, "axis %lld out of range [-%d, %d)", (long long)a, x->ndim, x->ndim);
    cp->axis = a < 0 ? a + x->ndim : a;
    int64_t ex = p->node ? ert_attr_int(p->node, "exclusive", 0) : 0;
    int64_t rv = p->node ? ert_attr_int(p->node, "reverse", 0) : 0;
    if ((ex != 0 && ex != 1) || (rv != 0 && rv != 1))
        return ert_prep_error(p, ERT_E_FORMAT, "exclusive and reverse must be 0 or 1 (got %lld, %lld)", (long long)ex,
                              (long long)rv);
    cp->exclusive = ex;
    cp->reverse = rv;
    return ert_prep_out_as_in0(p);
}
