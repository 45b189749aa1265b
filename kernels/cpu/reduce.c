/* STUB: to be implemented. */
#include "cpu_kernels.h"

ert_status ert_cpu_reduce(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

