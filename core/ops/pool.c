/* prepare() of MaxPool/AveragePool and GlobalAveragePool/GlobalMaxPool
 * (ONNX semantics, newest opset). */
#include "nn_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ pools */

ert_status ert_prepare_pool(ert_prep *p) {
    ert_pool_params *pp = &p->params->pool;
    memset(pp, 0, sizeof *pp);
    ert_status st;
    bool is_max = p->node && p->node->op == ERT_OP_MAXPOOL;
    if ((st = ert_nn_need_f32(p, 0))) return st;
    if (is_max && ert_nn_wants_out(p, 1))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "the Indices output is not supported");
    const ert_tinfo *x = &p->in[0];
    if (x->ndim < 3 || x->ndim > 5)
        return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected 3 to 5", x->ndim);
    int nsp = x->ndim - 2;
    ert_spatial sa;
    if ((st = ert_nn_read_spatial(p, nsp, &sa))) return st;
    if (!sa.have_k) return ert_prep_error(p, ERT_E_FORMAT, "kernel_shape is required");
    if (ert_attr_int(ert_nn_node_of(p), "storage_order", 0) != 0)
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "storage_order=1 is not supported");
    pp->ceil_mode = ert_attr_int(ert_nn_node_of(p), "ceil_mode", 0) != 0;
    pp->count_include_pad = !is_max && ert_attr_int(ert_nn_node_of(p), "count_include_pad", 0) != 0;
    int64_t od[ERT_MAX_DIMS] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < nsp; i++)
        if ((st = ert_nn_fwd_out(p, &sa, i, x->dims[2 + i], pp->ceil_mode, &od[2 + i]))) return st;
    pp->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        pp->kernel[i] = sa.k[i];
        pp->stride[i] = sa.s[i];
        pp->dilation[i] = sa.d[i];
        pp->pad_begin[i] = sa.pb[i];
        pp->pad_end[i] = sa.pe[i];
    }
    ert_nn_set_out(p, x->ndim, od);
    return ERT_OK;
}

ert_status ert_prepare_global_pool(ert_prep *p) {
    ert_status st;
    if ((st = ert_nn_need_f32(p, 0))) return st;
    const ert_tinfo *x = &p->in[0];
    if (x->ndim < 2) return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected >= 2", x->ndim);
    int64_t od[ERT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) od[i] = i < 2 ? x->dims[i] : 1;
    ert_nn_set_out(p, x->ndim, od);
    return ERT_OK;
}
