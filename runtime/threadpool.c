/* STUB (serial): to be replaced by the fixed worker pool. */
#include "ert_internal.h"

#include <stdlib.h>

struct ert_threadpool {
    int n;
};

ert_status ert_threadpool_create(int n_threads, struct ert_threadpool **out) {
    struct ert_threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return ERT_E_NOMEM;
    tp->n = n_threads < 1 ? 1 : n_threads;
    *out = tp;
    return ERT_OK;
}

void ert_threadpool_free(struct ert_threadpool *tp) { free(tp); }

int ert_threadpool_size(const struct ert_threadpool *tp) { return tp ? tp->n : 1; }

void ert_parallel_for(struct ert_threadpool *tp, int64_t n, int64_t grain, ert_par_fn fn, void *arg) {
    (void)tp;
    (void)grain;
    if (n > 0) fn(arg, 0, n);
}
