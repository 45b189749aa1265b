/* prepare() of Softmax and LogSoftmax (ONNX semantics, newest opset). */
#include "nn_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ Softmax / LogSoftmax */

ert_status ert_prepare_softmax(ert_prep *p) {
    ert_axis_params *ap = &p->params->axis;
    memset(ap, 0, sizeof *ap);
    ert_status st;
    if ((st = ert_nn_need_f32(p, 0))) return st;
    const ert_tinfo *x = &p->in[0];
    int64_t axis = ert_attr_int(ert_nn_node_of(p), "axis", -1);
    if (x->ndim < 1 || axis < -x->ndim || axis >= x->ndim)
        return ert_prep_error(p, ERT_E_SHAPE, "axis %lld out of range for rank %d", (long long)axis,
                              x->ndim);
    if (axis < 0) axis += x->ndim;
    ap->axis = axis;
    ert_nn_set_out(p, x->ndim, x->dims);
    return ERT_OK;
}
