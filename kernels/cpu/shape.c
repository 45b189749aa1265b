/* STUB: to be implemented. */
#include "cpu_kernels.h"

ert_status ert_cpu_transpose(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_concat(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_split(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_slice(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_gather(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_pad(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_expand(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_cast(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_shape(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_constant_of_shape(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

ert_status ert_cpu_range(const ert_kargs *a) {
    (void)a;
    return ERT_E_UNSUPPORTED;
}

