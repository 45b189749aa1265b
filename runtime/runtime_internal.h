/* runtime/'s internal contracts on top of core/ (ert_internal.h): the lower
 * floors it uses (the CPU backend table, the loaders), the CUDA backend
 * lookup, and session introspection for tests. */
#ifndef ERT_RUNTIME_INTERNAL_H
#define ERT_RUNTIME_INTERNAL_H
#include "ert_internal.h"
#include "cpu_backend.h"
#include "loaders.h"

/* Returns the CUDA backend if this build has one, else NULL (runtime/backends.c). */
const ert_backend *ert_cuda_backend_get(void);
/* The plan cache key's model part (runtime/plan_sig.c). */
uint64_t ert_plan_signature(const ert_model *m, const ert_session_options *o);

/* Session introspection for tests (runtime/session.c). */
bool ert_session_plan_check(const ert_session *s, char *why, size_t cap);
/* The planned blocks (activation roots, then workspaces), for the planner oracle. */
const struct ert_plan_block *ert_session_plan_blocks(const ert_session *s, int *n);
int ert_session_n_scheduled(const ert_session *s);
/* Output dtypes/shapes of m at `batch` (plan only, nothing allocated past return). */
ert_status ert_session_output_shapes(const ert_model *m, int batch, ert_tensor_info *out);
ert_op ert_session_scheduled_op(const ert_session *s, int k);

#endif /* ERT_RUNTIME_INTERNAL_H */
