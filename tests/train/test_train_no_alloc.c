/* Zero allocation in ert_trainer_step/eval: the allocator is wrapped at link
 * time (tests/common/CMakeLists.txt) and counted while a CNN with BatchNorm
 * and Dropout trains for 50 steps, single- and multi-threaded. */
#include "testutil.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long n_calls;
static atomic_int counting;

void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
void __real_free(void *);
void *__real_aligned_alloc(size_t, size_t);
int __real_posix_memalign(void **, size_t, size_t);

#define COUNT() do { if (atomic_load(&counting)) atomic_fetch_add(&n_calls, 1); } while (0)
void *__wrap_malloc(size_t n) { COUNT(); return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { COUNT(); return __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { COUNT(); return __real_realloc(p, n); }
void __wrap_free(void *p) { if (p) COUNT(); __real_free(p); }
void *__wrap_aligned_alloc(size_t a, size_t n) { COUNT(); return __real_aligned_alloc(a, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { COUNT(); return __real_posix_memalign(p, a, n); }

static ert_context *ctx;

static int32_t weight(ert_builder *b, ert_test_rng *r, int nd, const int64_t *d, float lo, float hi) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    float *w = malloc((size_t)n * 4);
    ert_test_fill(r, w, n, lo, hi);
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, nd, d, w, &id), ctx);
    free(w);
    return id;
}

/* conv3x3(3->8) BN relu maxpool conv3x3(8->8)+residual relu GAP flatten dropout gemm(8->5) */
static ert_model *cnn(ert_test_rng *r) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 3, 12, 12}, w1d[4] = {8, 3, 3, 3}, w2d[4] = {8, 8, 3, 3}, bd[1] = {8}, fd[2] = {5, 8}, fbd[1] = {5};
    int32_t x, c1, n1, r1, p1, c2, s2, r2, g, f, d, o;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, weight(b, r, 4, w1d, -0.3f, 0.3f), -1, 1, 1, 1, 1, &c1), ctx);
    int32_t bn_in[5] = {c1, weight(b, r, 1, bd, 0.5f, 1.5f), weight(b, r, 1, bd, -0.1f, 0.1f),
                        weight(b, r, 1, bd, -0.1f, 0.1f), weight(b, r, 1, bd, 0.5f, 1.5f)};
    CHECK_OK(ert_builder_node(b, "BatchNormalization", "bn", bn_in, 5, NULL, 0, &n1, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", n1, &r1), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, r1, 2, 2, 0, &p1), ctx);
    CHECK_OK(ert_builder_conv2d(b, p1, weight(b, r, 4, w2d, -0.3f, 0.3f), weight(b, r, 1, bd, -0.3f, 0.3f), 1, 1, 1, 1, &c2), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", c2, p1, &s2), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", s2, &r2), ctx);
    CHECK_OK(ert_builder_unary(b, "GlobalAveragePool", r2, &g), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", g, &f), ctx);
    float ratio = 0.3f;
    int32_t rt, din[2];
    CHECK_OK(ert_builder_weight(b, "ratio", ERT_DTYPE_F32, 0, NULL, &ratio, &rt), ctx);
    din[0] = f, din[1] = rt;
    CHECK_OK(ert_builder_node(b, "Dropout", "drop", din, 2, NULL, 0, &d, 1), ctx);
    CHECK_OK(ert_builder_linear(b, d, weight(b, r, 2, fd, -0.3f, 0.3f), weight(b, r, 1, fbd, -0.3f, 0.3f), &o), ctx);
    CHECK_OK(ert_builder_output(b, o, "logits"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "train_no_alloc");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    ert_model *m = cnn(&r);
    atomic_store(&counting, 1);
    void *volatile probe = malloc(16);
    free(probe);
    atomic_store(&counting, 0);
    CHECK(atomic_load(&n_calls) == 2, "wrapper counted %ld calls for malloc+free", atomic_load(&n_calls));
    for (int threads = 1; m && threads <= 2; threads++) {
        ert_trainer_options o = {0};
        o.session.batch = 4;
        o.session.n_threads = threads;
        o.optim.kind = ERT_OPTIM_ADAMW;
        o.optim.lr = 1e-2f;
        o.optim.weight_decay = 0.01f;
        o.optim.clip_grad_norm = 1.0f;
        o.lr.kind = ERT_LR_COSINE;
        o.lr.total_steps = 50;
        o.lr.warmup_steps = 5;
        ert_trainer *t = NULL;
        CHECK_OK(ert_trainer_create(m, &o, &t), ctx);
        if (!t) break;
        float *in;
        int64_t *y;
        ert_trainer_input_data(t, 0, (void **)&in);
        ert_trainer_target_data(t, (void **)&y);
        ert_test_fill(&r, in, 4 * 3 * 12 * 12, -1, 1);
        for (int i = 0; i < 4; i++) y[i] = ert_test_int(&r, 0, 4);
        atomic_store(&n_calls, 0);
        atomic_store(&counting, 1);
        ert_status st = ERT_OK;
        /* eval losses (no Dropout noise) before and after, to see it learn */
        float before = 0, after = 0;
        st = ert_trainer_eval(t, &before);
        for (int i = 0; i < 50 && st == ERT_OK; i++) st = ert_trainer_step(t, NULL);
        if (st == ERT_OK) st = ert_trainer_eval(t, &after);
        atomic_store(&counting, 0);
        CHECK(st == ERT_OK, "step: %s", ert_last_error(ctx));
        CHECK(atomic_load(&n_calls) == 0, "%ld allocator calls during 50 steps with %d threads", atomic_load(&n_calls),
              threads);
        CHECK(after < before, "eval loss on the fixed batch did not fall: %g -> %g", before, after);
        ert_trainer_free(t);
    }
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish("train_no_alloc");
}
