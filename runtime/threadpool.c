/* Fixed thread pool: n_threads-1 pthread workers made at create, the caller
 * thread is worker 0.
 *
 * Protocol (all shared fields are guarded by `mu`):
 *   1. parallel_for publishes a job (fn, arg, n, chunk), bumps `gen` and
 *      broadcasts `work_cv`.
 *   2. Each worker that sees a new `gen` claims chunks from the atomic
 *      counter `next` and runs them outside the lock, then increments
 *      `n_done` and signals `done_cv` when it is the last one.
 *   3. The caller claims chunks the same way, then waits until n_done ==
 *      n_workers; only then is the job slot free again, so fn/arg never
 *      outlive the call.
 * Chunks are claimed, not assigned: on a loaded machine a worker that wakes
 * late finds the work already done by the others instead of stalling the
 * call. There are up to 4 chunks per thread (never smaller than `grain`).
 * The counter only hands out indices; the chunks' results are published to
 * the caller by the mutex around n_done.
 * A parallel_for issued while a job is in flight (a nested call from inside
 * fn, or a second caller thread) runs inline: correct, never deadlocks.
 * Nothing is allocated after create. */
#include "ert_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct ert_threadpool;

typedef struct ert_tp_worker {
    struct ert_threadpool *tp;
    int id;                  /* 1..n-1; the caller is 0 */
    pthread_t th;
} ert_tp_worker;

struct ert_threadpool {
    int n;                   /* threads including the caller */
    int n_started;           /* workers actually running (for shutdown) */
    ert_tp_worker *workers;  /* n-1 entries */
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    uint64_t gen;            /* job generation, bumped per parallel_for */
    bool busy;               /* a job is in flight */
    bool stop;
    int n_done;              /* workers finished with the current generation */
    /* current job */
    ert_par_fn fn;
    void *arg;
    int64_t n_items, chunk, n_chunks;
    atomic_llong next;       /* next chunk to claim */
};

static void run_chunks(struct ert_threadpool *tp, ert_par_fn fn, void *arg, int64_t n, int64_t chunk, int64_t n_chunks) {
    for (;;) {
        int64_t c = atomic_fetch_add_explicit(&tp->next, 1, memory_order_relaxed);
        if (c >= n_chunks) return;
        int64_t b = c * chunk;
        fn(arg, b, n - b < chunk ? n : b + chunk);
    }
}

static void *worker_main(void *p) {
    ert_tp_worker *w = p;
    struct ert_threadpool *tp = w->tp;
    uint64_t seen = 0;
    pthread_mutex_lock(&tp->mu);
    for (;;) {
        while (!tp->stop && tp->gen == seen) pthread_cond_wait(&tp->work_cv, &tp->mu);
        if (tp->stop) break;
        seen = tp->gen;
        ert_par_fn fn = tp->fn;
        void *arg = tp->arg;
        int64_t n = tp->n_items, chunk = tp->chunk, n_chunks = tp->n_chunks;
        pthread_mutex_unlock(&tp->mu);
        run_chunks(tp, fn, arg, n, chunk, n_chunks);
        pthread_mutex_lock(&tp->mu);
        if (++tp->n_done == tp->n_started) pthread_cond_signal(&tp->done_cv);
    }
    pthread_mutex_unlock(&tp->mu);
    return NULL;
}

static void shutdown_workers(struct ert_threadpool *tp) {
    pthread_mutex_lock(&tp->mu);
    tp->stop = true;
    pthread_cond_broadcast(&tp->work_cv);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 0; i < tp->n_started; i++) pthread_join(tp->workers[i].th, NULL);
}

ert_status ert_threadpool_create(int n_threads, struct ert_threadpool **out) {
    if (!out) return ERT_E_ARG;
    *out = NULL;
    struct ert_threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return ERT_E_NOMEM;
    tp->n = n_threads < 1 ? 1 : n_threads;
    if (tp->n > 1) {
        tp->workers = calloc((size_t)(tp->n - 1), sizeof *tp->workers);
        if (!tp->workers) {
            free(tp);
            return ERT_E_NOMEM;
        }
    }
    if (pthread_mutex_init(&tp->mu, NULL) != 0) goto fail_mu;
    if (pthread_cond_init(&tp->work_cv, NULL) != 0) goto fail_work;
    if (pthread_cond_init(&tp->done_cv, NULL) != 0) goto fail_done;
    for (int i = 0; i < tp->n - 1; i++) {
        tp->workers[i].tp = tp;
        tp->workers[i].id = i + 1;
        /* n_started is only read by workers after the first job, which
         * cannot be published before create returns. */
        if (pthread_create(&tp->workers[i].th, NULL, worker_main, &tp->workers[i]) != 0) {
            shutdown_workers(tp);
            pthread_cond_destroy(&tp->done_cv);
            goto fail_done;
        }
        pthread_mutex_lock(&tp->mu);
        tp->n_started++;
        pthread_mutex_unlock(&tp->mu);
    }
    *out = tp;
    return ERT_OK;
fail_done:
    pthread_cond_destroy(&tp->work_cv);
fail_work:
    pthread_mutex_destroy(&tp->mu);
fail_mu:
    free(tp->workers);
    free(tp);
    return ERT_E_NOMEM;
}

void ert_threadpool_free(struct ert_threadpool *tp) {
    if (!tp) return;
    shutdown_workers(tp);
    pthread_cond_destroy(&tp->done_cv);
    pthread_cond_destroy(&tp->work_cv);
    pthread_mutex_destroy(&tp->mu);
    free(tp->workers);
    free(tp);
}

int ert_threadpool_size(const struct ert_threadpool *tp) { return tp ? tp->n : 1; }

void ert_parallel_for(struct ert_threadpool *tp, int64_t n, int64_t grain, ert_par_fn fn, void *arg) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!tp || tp->n_started == 0 || n <= grain) {
        fn(arg, 0, n);
        return;
    }
    int64_t max_chunks = 4 * (int64_t)(tp->n_started + 1);
    int64_t chunk = (n + max_chunks - 1) / max_chunks;
    if (chunk < grain) chunk = grain;
    int64_t n_chunks = (n + chunk - 1) / chunk;
    pthread_mutex_lock(&tp->mu);
    if (tp->busy) { /* nested or concurrent call: run inline */
        pthread_mutex_unlock(&tp->mu);
        fn(arg, 0, n);
        return;
    }
    tp->busy = true;
    tp->fn = fn;
    tp->arg = arg;
    tp->n_items = n;
    tp->chunk = chunk;
    tp->n_chunks = n_chunks;
    atomic_store_explicit(&tp->next, 0, memory_order_relaxed);
    tp->n_done = 0;
    tp->gen++;
    pthread_cond_broadcast(&tp->work_cv);
    pthread_mutex_unlock(&tp->mu);

    run_chunks(tp, fn, arg, n, chunk, n_chunks);

    pthread_mutex_lock(&tp->mu);
    while (tp->n_done < tp->n_started) pthread_cond_wait(&tp->done_cv, &tp->mu);
    tp->busy = false;
    pthread_mutex_unlock(&tp->mu);
}
