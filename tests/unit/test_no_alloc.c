/* Zero allocation after create: malloc/calloc/realloc/free/aligned_alloc/
 * posix_memalign are wrapped at link time (tests/common/CMakeLists.txt) and counted
 * while a CNN session runs 100 times, single- and multi-threaded, once with
 * the CPU backend's own choices, once with its 3x3 convs forced onto
 * Winograd (kernels/cpu/winograd.c: transformed filter and scratch planned
 * at create) and once with the SGEMM capped at AVX2 (x86; NEON on aarch64),
 * where the 1x1 conv takes kernels/cpu/pwconv.c (an AVX-512 CPU otherwise
 * keeps it on the SGEMM); then on 256x256 images at batch 8, where the
 * session runs its first layers image by image (batch strips,
 * runtime/strips.c: the run list and per-image arguments made at create). */
#include "session_internal.h" /* n_strips */
#include "cpu_gemm.h" /* ERT_CPU_GEMM_* */
#include "ert_internal.h" /* ert_context_set_kernel_choice */
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

static int32_t weight(ert_builder *b, ert_test_rng *r, int nd, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    float *w = malloc((size_t)n * 4);
    ert_test_fill(r, w, n, -0.3f, 0.3f);
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, NULL, ERT_DTYPE_F32, nd, d, w, &id), ctx);
    free(w);
    return id;
}

/* conv3x3(3->8) relu maxpool conv3x3(8->8)+residual relu, conv1x1(8->8)
 * (pwconv.c) + residual relu, depthwise conv3x3
 * stride 2 (dwconv.c) with SiLU as Sigmoid*Mul (act_vec.h), GAP flatten
 * gemm(8->5) softmax */
static ert_model *cnn(ert_test_rng *r, int64_t H) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 3, H, H}, w1d[4] = {8, 3, 3, 3}, w2d[4] = {8, 8, 3, 3}, bd[1] = {8}, fd[2] = {5, 8}, fbd[1] = {5};
    int64_t wdd[4] = {8, 1, 3, 3};
    int64_t wpd[4] = {8, 8, 1, 1};
    int32_t x, c1, r1, p1, c2, s2, r2, c3, s3, r3, dw, sg, sl, g, f, o, sm;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, weight(b, r, 4, w1d), weight(b, r, 1, bd), 1, 1, 1, 1, &c1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", c1, &r1), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, r1, 2, 2, 0, &p1), ctx);
    CHECK_OK(ert_builder_conv2d(b, p1, weight(b, r, 4, w2d), weight(b, r, 1, bd), 1, 1, 1, 1, &c2), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", c2, p1, &s2), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", s2, &r2), ctx);
    CHECK_OK(ert_builder_conv2d(b, r2, weight(b, r, 4, wpd), weight(b, r, 1, bd), 1, 0, 1, 1, &c3), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", c3, r2, &s3), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", s3, &r3), ctx);
    CHECK_OK(ert_builder_conv2d(b, r3, weight(b, r, 4, wdd), weight(b, r, 1, bd), 2, 1, 1, 8, &dw), ctx);
    CHECK_OK(ert_builder_unary(b, "Sigmoid", dw, &sg), ctx);
    CHECK_OK(ert_builder_binary(b, "Mul", dw, sg, &sl), ctx);
    CHECK_OK(ert_builder_unary(b, "GlobalAveragePool", sl, &g), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", g, &f), ctx);
    CHECK_OK(ert_builder_linear(b, f, weight(b, r, 2, fd), weight(b, r, 1, fbd), &o), ctx);
    CHECK_OK(ert_builder_unary(b, "Softmax", o, &sm), ctx);
    CHECK_OK(ert_builder_output(b, sm, "prob"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "no_alloc");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    ert_model *m = cnn(&r, 12), *big = cnn(&r, 256);
    /* sanity: the wrapper sees allocations at all */
    atomic_store(&counting, 1);
    void *volatile probe = malloc(16); /* volatile: the compiler may not elide the pair */
    free(probe);
    atomic_store(&counting, 0);
    CHECK(atomic_load(&n_calls) == 2, "wrapper counted %ld calls for malloc+free", atomic_load(&n_calls));
    for (int run = 0; m && big && run < 8; run++) {
        const int threads = 1 + run % 2;
        const bool strips = run >= 6; /* 6, 7: batch strips */
        const int64_t H = strips ? 256 : 12, N = strips ? 8 : 2;
        /* runs 2, 3: Winograd for every eligible conv (its packed filter and scratch);
         * 4, 5: the SGEMM capped where pwconv.c runs */
        ert_kernel_choice kc = ert_kernel_choice_of(NULL);
        kc.wino = run / 2 == 1;
#if defined(__aarch64__)
        if (run / 2 == 2) kc.gemm_cap = ERT_CPU_GEMM_NEON;
#else
        if (run / 2 == 2) kc.gemm_cap = ERT_CPU_GEMM_AVX2;
#endif
        ert_context_set_kernel_choice(ctx, &kc);
        ert_session_options o = {.batch = N, .n_threads = threads};
        ert_session *s = NULL;
        CHECK_OK(ert_session_create(strips ? big : m, &o, &s), ctx);
        if (!s) break;
        CHECK(!strips || s->n_strips > 0, "the 256x256 batch-8 session has no batch strip");
        float *in;
        ert_session_input_data(s, 0, (void **)&in);
        ert_test_fill(&r, in, N * 3 * H * H, -1, 1);
        atomic_store(&n_calls, 0);
        atomic_store(&counting, 1);
        ert_status st = ERT_OK;
        for (int i = 0; i < (strips ? 10 : 100) && st == ERT_OK; i++) st = ert_session_run(s);
        atomic_store(&counting, 0);
        CHECK(st == ERT_OK, "run: %s", ert_last_error(ctx));
        CHECK(atomic_load(&n_calls) == 0, "%ld allocator calls during the runs with %d threads%s", atomic_load(&n_calls),
              threads, strips ? ", batch strips" : "");
        const float *p;
        ert_session_output_data(s, 0, (const void **)&p);
        for (int64_t b = 0; b < N; b++) {
            double sum = 0;
            for (int i = 0; i < 5; i++) sum += p[b * 5 + i];
            CHECK(fabs(sum - 1.0) < 1e-5, "softmax of image %lld sums to %g", (long long)b, sum);
        }
        ert_session_free(s);
    }
    ert_model_free(m);
    ert_model_free(big);
    ert_context_free(ctx);
    return ert_test_finish("no_alloc");
}
