/* One session (and one trainer) driven from two threads at once (issue 13
 * item 6): the header forbids it, the library detects it. Every call either
 * returns ERT_OK with a correct result or ERT_E_STATE ("already running in
 * another thread"); never a corrupted ERT_OK.
 *
 * Session: two threads each loop set_input(own x) -> run -> get_output on one
 * session. The other thread may legally set its input between our set_input
 * and our run (each call is exclusive, the sequence is not), so a correct
 * output is bitwise the single-threaded output for x_A or for x_B; a run that
 * raced another run gives a mixture of neither.
 * Trainer: two threads call ert_trainer_step on fixed data; the parameters
 * after them equal, bitwise, those of a fresh trainer that took as many steps
 * (the OK ones) on one thread. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "testutil.h"
#include "trainer_internal.h" /* ert_trainer_param_copy */

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 4096, DEPTH = 24 };

static ert_context *ctx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* h = x; DEPTH times: h = Tanh(h * w_k + b_k); y = h. x, y are (1, N). The
 * intermediates share a few arena blocks, so concurrent runs overwrite each
 * other. */
static ert_model *build_chain(ert_test_rng *r) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t dims[2] = {1, N};
    int32_t h;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, dims, &h), ctx);
    float *v = malloc(N * sizeof *v);
    for (int k = 0; k < DEPTH; k++) {
        int32_t w, c, in[2];
        for (int i = 0; i < N; i++) v[i] = (float)ert_test_uniform(r, 0.5, 1.5);
        CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, 2, dims, v, &w), ctx);
        for (int i = 0; i < N; i++) v[i] = (float)ert_test_uniform(r, -0.5, 0.5);
        CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, 2, dims, v, &c), ctx);
        in[0] = h, in[1] = w;
        CHECK_OK(ert_builder_node(b, "Mul", NULL, in, 2, NULL, 0, &h, 1), ctx);
        in[0] = h, in[1] = c;
        CHECK_OK(ert_builder_node(b, "Add", NULL, in, 2, NULL, 0, &h, 1), ctx);
        CHECK_OK(ert_builder_node(b, "Tanh", NULL, &h, 1, NULL, 0, &h, 1), ctx);
    }
    free(v);
    CHECK_OK(ert_builder_output(b, h, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

typedef struct {
    ert_session *s;
    const float *x, *ref_a, *ref_b;
    atomic_int *stop;
    long ok, busy, other, corrupt;
} sworker;

static void *session_worker(void *p) {
    sworker *w = p;
    float *y = malloc(N * sizeof *y);
    while (!atomic_load(w->stop)) {
        ert_status st = ert_session_set_input(w->s, 0, w->x, N * sizeof(float));
        if (st == ERT_OK) st = ert_session_run(w->s);
        if (st == ERT_OK) st = ert_session_get_output(w->s, 0, y, N * sizeof(float));
        if (st == ERT_E_STATE) {
            w->busy++;
        } else if (st != ERT_OK) {
            w->other++;
        } else {
            w->ok++;
            if (memcmp(y, w->ref_a, N * sizeof *y) && memcmp(y, w->ref_b, N * sizeof *y)) w->corrupt++;
        }
    }
    free(y);
    return NULL;
}

static void session_two_threads(ert_test_rng *r) {
    ert_model *m = build_chain(r);
    ert_session *s = NULL;
    if (m) CHECK_OK(ert_session_create(m, NULL, &s), ctx);
    if (!s) {
        ert_model_free(m);
        return;
    }
    float *x[2], *ref[2];
    for (int k = 0; k < 2; k++) {
        x[k] = malloc(N * sizeof(float));
        ref[k] = malloc(N * sizeof(float));
        for (int i = 0; i < N; i++) x[k][i] = (float)ert_test_uniform(r, -2, 2);
        CHECK_OK(ert_session_set_input(s, 0, x[k], N * sizeof(float)), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, ref[k], N * sizeof(float)), ctx);
    }
    CHECK(memcmp(ref[0], ref[1], N * sizeof(float)) != 0, "two inputs give the same output: the test cannot tell");
    atomic_int stop;
    atomic_init(&stop, 0);
    sworker w[2] = {{.s = s, .x = x[0], .ref_a = ref[0], .ref_b = ref[1], .stop = &stop},
                    {.s = s, .x = x[1], .ref_a = ref[0], .ref_b = ref[1], .stop = &stop}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, session_worker, &w[k]);
    /* at least 2 s and until the threads have collided a few times (on a
     * loaded machine they may take turns for a while); at most 30 s */
    double t0 = now_s();
    while (now_s() - t0 < 30 && (now_s() - t0 < 2 || w[0].busy + w[1].busy < 10)) {
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
    }
    atomic_store(&stop, 1);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    long ok = w[0].ok + w[1].ok, busy = w[0].busy + w[1].busy;
    printf("session: %ld sequences OK, %ld refused with ERT_E_STATE\n", ok, busy);
    CHECK(w[0].corrupt + w[1].corrupt == 0, "%ld of %ld OK outputs corrupted", w[0].corrupt + w[1].corrupt, ok);
    CHECK(w[0].other + w[1].other == 0, "%ld calls failed with another status", w[0].other + w[1].other);
    CHECK(busy > 0, "the threads never collided in 30 s: the flag went untested");
    CHECK(ok > 0, "no sequence ever succeeded");
    /* the flag is released on every path: the session works single-threaded */
    float y[N];
    CHECK_OK(ert_session_set_input(s, 0, x[1], sizeof y), ctx);
    CHECK_OK(ert_session_run(s), ctx);
    CHECK_OK(ert_session_get_output(s, 0, y, sizeof y), ctx);
    CHECK(memcmp(y, ref[1], sizeof y) == 0, "single-threaded run after the race differs");
    /* ...including the error paths */
    CHECK(ert_session_set_input(s, 0, x[1], 3) == ERT_E_SHAPE, "bad size");
    CHECK(ert_session_get_output(s, 7, y, sizeof y) == ERT_E_ARG, "bad index");
    CHECK_OK(ert_session_run(s), ctx);
    for (int k = 0; k < 2; k++) {
        free(x[k]);
        free(ref[k]);
    }
    ert_session_free(s);
    ert_model_free(m);
}

/* y = x * w (w (64) trainable), MSE against a fixed target, SGD. */
static ert_trainer *make_trainer(ert_model *m, const float *x, const float *tgt) {
    ert_trainer_options to = {0};
    to.loss.kind = ERT_LOSS_MSE;
    to.optim.kind = ERT_OPTIM_SGD;
    to.optim.lr = 0.05f;
    to.optim.momentum = 0.9f;
    ert_trainer *t = NULL;
    CHECK_OK(ert_trainer_create(m, &to, &t), ctx);
    if (!t) return NULL;
    float *xi, *ti;
    CHECK_OK(ert_trainer_input_data(t, 0, (void **)&xi), ctx);
    CHECK_OK(ert_trainer_target_data(t, (void **)&ti), ctx);
    memcpy(xi, x, 64 * sizeof *x);
    memcpy(ti, tgt, 64 * sizeof *tgt);
    return t;
}

typedef struct {
    ert_trainer *t;
    int steps;
    long ok, busy, other;
} tworker;

static void *trainer_worker(void *p) {
    tworker *w = p;
    for (int i = 0; i < w->steps; i++) {
        ert_status st = ert_trainer_step(w->t, NULL);
        if (st == ERT_OK) w->ok++;
        else if (st == ERT_E_STATE) w->busy++;
        else w->other++;
    }
    return NULL;
}

static void trainer_two_threads(ert_test_rng *r) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t dims[1] = {64};
    float x[64], tgt[64], w0[64];
    for (int i = 0; i < 64; i++) {
        x[i] = (float)ert_test_uniform(r, -1, 1);
        tgt[i] = (float)ert_test_uniform(r, -1, 1);
        w0[i] = (float)ert_test_uniform(r, -1, 1);
    }
    int32_t xi, wi, y, in[2];
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 1, dims, &xi), ctx);
    CHECK_OK(ert_builder_weight(b, "w", ERT_DTYPE_F32, 1, dims, w0, &wi), ctx);
    in[0] = xi, in[1] = wi;
    CHECK_OK(ert_builder_node(b, "Mul", NULL, in, 2, NULL, 0, &y, 1), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    ert_trainer *t = m ? make_trainer(m, x, tgt) : NULL;
    long ok = 0, busy = 0;
    /* rounds of two racing threads until they have collided (or 30 s) */
    double t0 = now_s();
    int rounds = 0;
    while (t && (rounds < 3 || busy == 0) && now_s() - t0 < 30) {
        tworker w[2] = {{.t = t, .steps = 2000}, {.t = t, .steps = 2000}};
        pthread_t th[2];
        for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, trainer_worker, &w[k]);
        for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
        ok += w[0].ok + w[1].ok;
        busy += w[0].busy + w[1].busy;
        CHECK(w[0].other + w[1].other == 0, "%ld steps failed with another status", w[0].other + w[1].other);
        rounds++;
    }
    printf("trainer: %ld steps OK, %ld refused with ERT_E_STATE\n", ok, busy);
    CHECK(busy > 0, "the threads never collided in 30 s: the flag went untested");
    ert_trainer *ref = m ? make_trainer(m, x, tgt) : NULL;
    for (long i = 0; ref && i < ok; i++) CHECK_OK(ert_trainer_step(ref, NULL), ctx);
    float wa[64], wb[64];
    int64_t n = 64;
    if (t && ref) {
        CHECK_OK(ert_trainer_param_copy(t, "w", wa, NULL, &n), ctx);
        CHECK_OK(ert_trainer_param_copy(ref, "w", wb, NULL, &n), ctx);
        CHECK(memcmp(wa, wb, sizeof wa) == 0, "weights after %ld racing steps differ from %ld steps on one thread", ok,
              ok);
    }
    ert_trainer_free(ref);
    ert_trainer_free(t);
    ert_model_free(m);
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "busy");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    session_two_threads(&r);
    trainer_two_threads(&r);
    ert_context_free(ctx);
    return ert_test_finish("busy");
}
