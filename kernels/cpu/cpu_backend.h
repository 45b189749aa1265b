/* The CPU backend as the floors above see it: its table (the door runtime/
 * uses), the direct dispatch of one node, and a Gather helper for messages.
 * Kernels' own entry points are in cpu_kernels.h. */
#ifndef ERT_CPU_BACKEND_H
#define ERT_CPU_BACKEND_H
#include "ert_internal.h"

/* kernels/cpu/cpu_backend.c */
extern const ert_backend ert_cpu_backend;
/* Direct CPU kernel dispatch (also used for constant folding). */
ert_status ert_cpu_run_node(const ert_kargs *a);
/* A Gather node's first index out of range (host-visible indices): its
 * position, value and the size of the gathered axis, for error messages;
 * false if every index is in range. */
bool ert_gather_bad_index(const ert_kargs *a, int64_t *pos, int64_t *val, int64_t *dim);

#endif /* ERT_CPU_BACKEND_H */
