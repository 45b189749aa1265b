/* Batch strips (runtime/strips.c): CPU sessions of batch N > 1 run runs of
 * batch-separable nodes image by image. */
#ifndef ERT_STRIPS_INTERNAL_H
#define ERT_STRIPS_INTERNAL_H
#include "graph.h"

typedef struct ert_strip {
    int a, b; /* schedule steps, both included */
} ert_strip;

/* The run list: the scheduled nodes' arguments, with each strip's nodes
 * repeated per image on per-image arguments (args, views). */
typedef struct ert_strip_run {
    ert_kargs **run;
    int *step;      /* the schedule step of run[i] */
    int64_t *image; /* its image, -1: the whole batch */
    int n_run;
    ert_kargs *args;
    ert_tview *views;
} ert_strip_run;

/* Plans the activation blocks (ert_graph_plan_blocks' outputs), with strips
 * where they pay and the peak stays within ERT_STRIP_MEM of the plan without
 * them: *strips (malloc'ed, steps of sched as given) and *n_strips, 0 none;
 * *internal (malloc'ed, per tensor): 1 for a tensor that holds one image. */
ert_status ert_strips_plan(ert_graph *g, const int32_t *sched, int n_sched, int64_t N, ert_strip **strips,
                           int *n_strips, uint8_t **internal, size_t *peak, size_t *lb, size_t *ws_max);
/* The run list, once the nodes' arguments (kptr, per schedule step) are final. */
ert_status ert_strips_bind(const ert_graph *g, const int32_t *sched, int n_sched, ert_kargs *const *kptr, int64_t N,
                           const ert_strip *strips, int n_strips, const uint8_t *internal, ert_strip_run *r);
void ert_strips_free(ert_strip_run *r);

#endif /* ERT_STRIPS_INTERNAL_H */
