/* STUB: to be implemented. */
#include "cpu_kernels.h"

ert_status ert_cpu_conv(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_conv_transpose(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

