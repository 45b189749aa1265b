/* Logical ops on bool tensors (one byte per element, 0 or 1). Not: y = !x
 * (any nonzero byte counts as true). */
#include "cpu_kernels.h"

#include <stdint.h>

ert_status ert_cpu_not(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    if (x->dtype != ERT_DTYPE_BOOL || y->dtype != ERT_DTYPE_BOOL || x->n_elems != y->n_elems) return ERT_E_UNSUPPORTED;
    const uint8_t *xp = x->data;
    uint8_t *yp = y->data;
    for (int64_t i = 0; i < x->n_elems; i++) yp[i] = xp[i] == 0;
    return ERT_OK;
}
