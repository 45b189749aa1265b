/* Lifetime-based arena planner (planner.c). */
#ifndef ERT_PLANNER_INTERNAL_H
#define ERT_PLANNER_INTERNAL_H
#include "runtime_internal.h"

#include <stdio.h>

/* One block to place: live from step `first` to step `last` inclusive. */
typedef struct ert_plan_block {
    size_t size;   /* in; rounded up to the alignment on return */
    int first, last;
    size_t offset; /* out */
} ert_plan_block;

/* Greedy best-fit, largest first. *peak = bytes the plan needs, *lower_bound =
 * max over steps of live bytes. ERT_E_NOMEM / ERT_E_ARENA (size overflow). */
ert_status ert_plan_offsets(ert_plan_block *blk, int n, size_t align, size_t *peak, size_t *lower_bound);
/* True if no two blocks overlap in both time and space; else writes why. */
bool ert_plan_check(const ert_plan_block *blk, int n, char *why, size_t why_cap);

#endif
