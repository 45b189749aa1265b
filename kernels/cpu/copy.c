/* Identity-like ops: the output has the input's bytes (possibly another shape).
 * Dropout (inference) also writes its optional mask output: all true. */
#include "cpu_kernels.h"

#include <string.h>

ert_status ert_cpu_copy(const ert_kargs *a) {
    size_t n = (size_t)a->in[0].n_elems * ert_dtype_size(a->in[0].dtype);
    if (a->out[0].data != a->in[0].data && n) memmove(a->out[0].data, a->in[0].data, n);
    if (a->op == ERT_OP_DROPOUT && a->n_out > 1 && a->out[1].data)
        memset(a->out[1].data, 1, (size_t)a->out[1].n_elems);
    return ERT_OK;
}
