/* Fixed thread pool: n_threads-1 pthread workers made at create; the caller
 * thread takes part in every parallel_for.
 *
 * Protocol:
 *   1. parallel_for (holding `mu`) publishes the job (fn, arg, n, chunk,
 *      n_chunks), bumps the 32-bit generation `gen`, sets the claim word
 *      `claim` = gen << 32 | 0, and broadcasts `work_cv`.
 *   2. Threads claim chunk indices by CAS on `claim`; a claim succeeds only
 *      while the word still carries the generation the thread read with the
 *      job under `mu`, so a worker that wakes late can never run a chunk of
 *      a newer job with an older job's fn/arg.
 *   3. Whoever finishes a chunk adds 1 to `n_done` (release); the one that
 *      finishes the last chunk signals `done_cv` under `mu`. The caller
 *      claims chunks too, then waits under `mu` until n_done == n_chunks
 *      (acquire), so every chunk's writes are visible when it returns.
 * The caller never waits for a worker that claimed nothing: on a loaded
 * machine a worker that wakes late just finds no chunk left.
 * Spinning: a CNN issues one parallel_for per layer, a few hundred per run,
 * each a fraction of a millisecond; waking a sleeping worker through the
 * condition variable costs tens of microseconds on a VM, so at 2 threads
 * the wake-ups ate much of the gain. A worker that finished a job therefore
 * polls `gen_pub` (the generation, published atomically) for about SPIN_NS
 * before it sleeps, and the caller polls `n_done` as long before it sleeps;
 * both take the mutex only to read the job or to sleep, as before. There are up
 * to 4 chunks per thread, never smaller than `grain`.
 * A parallel_for issued while a job is in flight (a nested call from inside
 * fn, or a second caller thread) runs inline: correct, never deadlocks.
 * Nothing is allocated after create. */
#include "ert_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct ert_threadpool;

typedef struct ert_tp_worker {
    struct ert_threadpool *tp;
    pthread_t th;
} ert_tp_worker;

struct ert_threadpool {
    int n;                   /* threads including the caller */
    int n_started;           /* workers actually running (for shutdown) */
    ert_tp_worker *workers;  /* n-1 entries */
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    uint32_t gen;            /* job generation (mu) */
    atomic_uint gen_pub;     /* == gen, readable without mu (spinning workers) */
    atomic_bool stop_pub;    /* == stop, likewise */
    bool busy;               /* a job is in flight (mu) */
    bool stop;               /* (mu) */
    /* current job (written under mu before gen is bumped) */
    ert_par_fn fn;
    void *arg;
    int64_t n_items, chunk, n_chunks;
    atomic_uint_least64_t claim; /* gen << 32 | next chunk index */
    atomic_llong n_done;     /* chunks finished */
};

typedef struct job_view {
    ert_par_fn fn;
    void *arg;
    int64_t n, chunk, n_chunks;
    uint32_t gen;
} job_view;

/* Claims and runs chunks of job `j` until none is left (or the job is gone). */
static void run_chunks(struct ert_threadpool *tp, const job_view *j) {
    for (;;) {
        uint_least64_t w = atomic_load_explicit(&tp->claim, memory_order_relaxed);
        int64_t c;
        do {
            c = (int64_t)(w & 0xffffffffu);
            if ((uint32_t)(w >> 32) != j->gen || c >= j->n_chunks) return;
        } while (!atomic_compare_exchange_weak_explicit(&tp->claim, &w, w + 1, memory_order_relaxed,
                                                        memory_order_relaxed));
        int64_t b = c * j->chunk;
        j->fn(j->arg, b, j->n - b < j->chunk ? j->n : b + j->chunk);
        if (atomic_fetch_add_explicit(&tp->n_done, 1, memory_order_acq_rel) + 1 == j->n_chunks) {
            pthread_mutex_lock(&tp->mu);
            pthread_cond_signal(&tp->done_cv);
            pthread_mutex_unlock(&tp->mu);
        }
    }
}

/* How long a worker polls for the next job, and the caller for the end of
 * its job, before sleeping on the condition variable. */
#define SPIN_NS 200000

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Polls until done() or about SPIN_NS have passed (the clock is read every
 * 256 polls, so polling stays cheap). */
#define SPIN_UNTIL(done)                                                                                            \
    do {                                                                                                            \
        int64_t t_end_ = 0;                                                                                         \
        for (unsigned i_ = 0; !(done); i_++) {                                                                      \
            cpu_relax();                                                                                            \
            if ((i_ & 255) == 0) {                                                                                  \
                int64_t t_ = now_ns();                                                                              \
                if (!t_end_) t_end_ = t_ + SPIN_NS;                                                                 \
                else if (t_ > t_end_) break;                                                                        \
            }                                                                                                       \
        }                                                                                                           \
    } while (0)

static void *worker_main(void *p) {
    ert_tp_worker *w = p;
    struct ert_threadpool *tp = w->tp;
    uint32_t seen = 0;
    for (;;) {
        SPIN_UNTIL(atomic_load_explicit(&tp->gen_pub, memory_order_relaxed) != seen ||
                   atomic_load_explicit(&tp->stop_pub, memory_order_relaxed));
        pthread_mutex_lock(&tp->mu);
        while (!tp->stop && tp->gen == seen) pthread_cond_wait(&tp->work_cv, &tp->mu);
        if (tp->stop) break;
        seen = tp->gen;
        job_view j = {tp->fn, tp->arg, tp->n_items, tp->chunk, tp->n_chunks, tp->gen};
        pthread_mutex_unlock(&tp->mu);
        run_chunks(tp, &j);
    }
    pthread_mutex_unlock(&tp->mu);
    return NULL;
}

static void shutdown_workers(struct ert_threadpool *tp) {
    pthread_mutex_lock(&tp->mu);
    tp->stop = true;
    atomic_store_explicit(&tp->stop_pub, true, memory_order_relaxed);
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
    atomic_init(&tp->claim, 0);
    atomic_init(&tp->n_done, 0);
    atomic_init(&tp->gen_pub, 0);
    atomic_init(&tp->stop_pub, false);
    if (pthread_mutex_init(&tp->mu, NULL) != 0) goto fail_mu;
    if (pthread_cond_init(&tp->work_cv, NULL) != 0) goto fail_work;
    if (pthread_cond_init(&tp->done_cv, NULL) != 0) goto fail_done;
    for (int i = 0; i < tp->n - 1; i++) {
        tp->workers[i].tp = tp;
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
    tp->gen++;
    atomic_store_explicit(&tp->n_done, 0, memory_order_relaxed);
    atomic_store_explicit(&tp->claim, (uint_least64_t)tp->gen << 32, memory_order_relaxed);
    atomic_store_explicit(&tp->gen_pub, tp->gen, memory_order_relaxed);
    job_view j = {fn, arg, n, chunk, n_chunks, tp->gen};
    pthread_cond_broadcast(&tp->work_cv);
    pthread_mutex_unlock(&tp->mu);

    run_chunks(tp, &j);

    SPIN_UNTIL(atomic_load_explicit(&tp->n_done, memory_order_acquire) >= n_chunks);
    pthread_mutex_lock(&tp->mu);
    while (atomic_load_explicit(&tp->n_done, memory_order_acquire) < n_chunks) pthread_cond_wait(&tp->done_cv, &tp->mu);
    tp->busy = false;
    pthread_mutex_unlock(&tp->mu);
}
