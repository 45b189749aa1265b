/* Backend lookup. The CUDA backend object is linked only when ERT_CUDA is on
 * (it defines ert_cuda_backend in kernels/cuda); otherwise there is none. */
#include "runtime_internal.h"

#ifdef ERT_HAVE_CUDA
extern const ert_backend ert_cuda_backend;
const ert_backend *ert_cuda_backend_get(void) { return &ert_cuda_backend; }
#else
const ert_backend *ert_cuda_backend_get(void) { return NULL; }
#endif
