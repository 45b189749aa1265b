/* STUB: to be implemented. */
#include "cpu_kernels.h"

ert_status ert_cpu_pool(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_global_pool(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

