/* Initial version (extend): f32 Relu and same-shape Add only. */
#include "cpu_kernels.h"

ert_status ert_cpu_unary(const ert_kargs *a) {
    if (a->op != ERT_OP_RELU) return ERT_E_UNSUPPORTED;
    const float *x = a->in[0].data;
    float *y = a->out[0].data;
    for (int64_t i = 0; i < a->out[0].n_elems; i++) y[i] = x[i] > 0 ? x[i] : 0;
    return ERT_OK;
}

ert_status ert_cpu_binary(const ert_kargs *a) {
    if (a->op != ERT_OP_ADD || a->in[0].n_elems != a->in[1].n_elems) return ERT_E_UNSUPPORTED;
    const float *x = a->in[0].data, *z = a->in[1].data;
    float *y = a->out[0].data;
    for (int64_t i = 0; i < a->out[0].n_elems; i++) y[i] = x[i] + z[i];
    return ERT_OK;
}

ert_status ert_cpu_where(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}
