/* Batch strips (runtime/strips.c): CPU sessions of batch N > 1 run runs of
 * batch-separable nodes image by image. */
#ifndef ERT_STRIPS_INTERNAL_H
#define ERT_STRIPS_INTERNAL_H
#include "graph.h"

typedef struct ert_strip {
    int a, b; /* schedule steps, both included */
} ert_strip;

/* How a session with strips runs: its schedule in order, each strip's nodes
 * once per image (image 0's nodes, then image 1's, ...), a strip node's
 * arguments (one slot per node) moved to the image as it comes up. */
typedef struct ert_strip_run {
    const ert_strip *strips;
    int n_strips, n_sched;
    int64_t N;
    int n_entries;   /* nodes run: n_sched + (N - 1) per strip node; 0: no strips */
    int *strip_of;   /* per schedule step: its strip, or -1 */
    int *slot;       /* per schedule step in a strip: its args slot */
    ert_kargs *args; /* per strip node */
    ert_tview *views;
    size_t *vstep;   /* per view: bytes from one image to the next (0: stays) */
    void **vbase;    /* per view: image 0's data */
} ert_strip_run;

typedef struct ert_strip_it {
    int k;     /* next schedule step */
    int64_t i; /* its image (inside a strip) */
} ert_strip_it;

/* Plans the activation blocks (ert_graph_plan_blocks' outputs), with strips
 * where they pay and the peak stays within ERT_STRIP_MEM of the plan without
 * them: *strips (malloc'ed, steps of sched as given) and *n_strips, 0 none;
 * *internal (malloc'ed, per tensor): 1 for a tensor that holds one image. */
ert_status ert_strips_plan(ert_graph *g, const int32_t *sched, int n_sched, int64_t N, ert_strip **strips,
                           int *n_strips, uint8_t **internal, size_t *peak, size_t *lb, size_t *ws_max);
/* The strip nodes' argument slots, once the nodes' arguments are final. */
ert_status ert_strips_bind(const ert_graph *g, const int32_t *sched, int n_sched, int64_t N, const ert_strip *strips,
                           int n_strips, const uint8_t *internal, ert_strip_run *r);
/* The next node to run from it (start at {0, 0}): its arguments *a (kptr[k]
 * outside strips), schedule step *k and image *image (-1: the whole batch);
 * false at the end. Allocates nothing. */
bool ert_strips_next(ert_strip_run *r, ert_strip_it *it, ert_kargs *const *kptr, ert_kargs **a, int *k,
                     int64_t *image);
void ert_strips_free(ert_strip_run *r);

#endif /* ERT_STRIPS_INTERNAL_H */
