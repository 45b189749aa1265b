/* STUB: to be implemented. */
#include "ert_internal.h"

ert_status ert_prepare_flatten(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_reshape(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_squeeze(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_unsqueeze(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_transpose(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_concat(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_split(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_slice(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_gather(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_pad(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_resize(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_expand(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_cast(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_shape(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_constant_of_shape(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

ert_status ert_prepare_range(ert_prep *p) {
    return ert_prep_error(p, ERT_E_UNSUPPORTED, "op not implemented yet");
}

