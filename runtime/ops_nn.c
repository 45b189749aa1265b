/* STUB: to be implemented. */
#include "ert_internal.h"

ert_status ert_prepare_conv(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_conv_transpose(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_batchnorm(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_matmul(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_gemm(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_pool(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_global_pool(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_layernorm(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_softmax(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

