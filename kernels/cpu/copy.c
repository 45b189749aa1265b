/* Identity-like ops: the output has the input's bytes (possibly another shape). */
#include "cpu_kernels.h"

#include <string.h>

ert_status ert_cpu_copy(const ert_kargs *a) {
    size_t n = (size_t)a->in[0].n_elems * ert_dtype_size(a->in[0].dtype);
    if (a->out[0].data != a->in[0].data) memmove(a->out[0].data, a->in[0].data, n);
    return ERT_OK;
}
