/* CUDA backend on bad input and failures (label `gpu`), through the public API.
 *
 * Cases, each printed with its status and message:
 * - arena larger than the GPU: a batch of a Relu chain that makes the plan
 *   > 2x the device memory gives ERT_E_NOMEM or ERT_E_ARENA naming the byte count (placement
 *   DEVICE; UNIFIED may oversubscribe and MAPPED would pin host memory until
 *   the host runs out, so neither is asked for more than exists); nothing is
 *   kept: 50 such failures
 *   plus 50 good create/run/free cycles leave cudaMemGetInfo's free memory
 *   within LEAK_SLACK of where it was after a warm-up;
 * - every device/pinned/managed allocation of session create failing in turn
 *   (fault injection through the --wrap of tests/cuda/CMakeLists.txt): ERT_E_NOMEM
 *   for edgert's own allocations (ERT_E_CUDA where the failure is inside
 *   cuBLAS/cuDNN handle creation), never a crash, and again no memory kept;
 * - a caller arena (cudaMalloc) one block too small: ERT_E_ARENA with the
 *   bytes needed;
 * - inputs of the wrong size at run (set_input) and wrong shapes at create
 *   (input_shapes): ERT_E_SHAPE naming the input; the session still runs and
 *   agrees with a CPU session afterwards;
 * - a failed run (cudaGraphLaunch or the final cudaStreamSynchronize made to
 *   fail once): ERT_E_CUDA naming the call; the next run succeeds and agrees
 *   with the CPU session again.
 * Without a GPU (or without the CUDA backend) it returns 77 (ctest SKIPPED). */
#include "edgert.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#ifndef ERT_TEST_HAVE_CUDA
int main(void) { return ert_test_skip("cuda_bad", "this build has no CUDA backend (ERT_CUDA=OFF)"); }
#else
#include <cuda_runtime_api.h>

#define MIB (1024.0 * 1024.0)
/* Free device memory may move by a little between two reads (the driver's
 * own bookkeeping); a leaked arena, cuBLAS or cuDNN handle is far larger. */
#define LEAK_SLACK ((size_t)8 << 20)

/* ------------------------------------------------------------------ fault injection */

/* fail_at > 0: the fail_at-th wrapped call from now fails (with fail_err). */
static long n_calls, fail_at;
static bool inject(void) {
    n_calls++;
    return fail_at > 0 && n_calls == fail_at;
}
cudaError_t __real_cudaMalloc(void **p, size_t n);
cudaError_t __real_cudaMallocManaged(void **p, size_t n, unsigned flags);
cudaError_t __real_cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t __real_cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s);
cudaError_t __real_cudaStreamSynchronize(cudaStream_t s);
cudaError_t __wrap_cudaMalloc(void **p, size_t n);
cudaError_t __wrap_cudaMallocManaged(void **p, size_t n, unsigned flags);
cudaError_t __wrap_cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t __wrap_cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s);
cudaError_t __wrap_cudaStreamSynchronize(cudaStream_t s);
/* allocation wrappers count only while alloc_armed; run wrappers while run_armed */
static bool alloc_armed, launch_armed, sync_armed;
cudaError_t __wrap_cudaMalloc(void **p, size_t n) {
    if (alloc_armed && inject()) return cudaErrorMemoryAllocation;
    return __real_cudaMalloc(p, n);
}
cudaError_t __wrap_cudaMallocManaged(void **p, size_t n, unsigned f) {
    if (alloc_armed && inject()) return cudaErrorMemoryAllocation;
    return __real_cudaMallocManaged(p, n, f);
}
cudaError_t __wrap_cudaHostAlloc(void **p, size_t n, unsigned f) {
    if (alloc_armed && inject()) return cudaErrorMemoryAllocation;
    return __real_cudaHostAlloc(p, n, f);
}
cudaError_t __wrap_cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s) {
    if (launch_armed && inject()) return cudaErrorLaunchFailure;
    return __real_cudaGraphLaunch(g, s);
}
cudaError_t __wrap_cudaStreamSynchronize(cudaStream_t s) {
    cudaError_t e = __real_cudaStreamSynchronize(s);
    if (sync_armed && inject()) return cudaErrorLaunchFailure;
    return e;
}
static void disarm(void) {
    alloc_armed = launch_armed = sync_armed = false;
    fail_at = 0;
    n_calls = 0;
}

/* ------------------------------------------------------------------ model */

static ert_context *ctx;
static ert_test_rng rng;

enum { CIN = 8, COUT = 16, HW = 32 };

/* y = Relu(Conv3x3(x)), x (N, 8, 32, 32) with a dynamic N: 128 KiB of f32
 * input per sample, 512 KiB of output. */
static ert_model *build_model(void) {
    ert_builder *b = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    if (!b) return NULL;
    static float w[COUT * CIN * 9], bias[COUT];
    ert_test_fill(&rng, w, COUT * CIN * 9, -0.3f, 0.3f);
    ert_test_fill(&rng, bias, COUT, -0.1f, 0.1f);
    int64_t xd[4] = {-1, CIN, HW, HW}, wd[4] = {COUT, CIN, 3, 3}, bd[1] = {COUT};
    int32_t x, wi, bi, c, y;
    ert_model *m = NULL;
    if (ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x) == ERT_OK &&
        ert_builder_weight(b, "w", ERT_DTYPE_F32, 4, wd, w, &wi) == ERT_OK &&
        ert_builder_weight(b, "b", ERT_DTYPE_F32, 1, bd, bias, &bi) == ERT_OK &&
        ert_builder_conv2d(b, x, wi, bi, 1, 1, 1, 1, &c) == ERT_OK && ert_builder_unary(b, "Relu", c, &y) == ERT_OK &&
        ert_builder_output(b, y, "y") == ERT_OK)
        CHECK_OK(ert_builder_finish(b, &m), ctx);
    CHECK(m != NULL, "model: %s", ert_last_error(ctx));
    ert_builder_free(b);
    return m;
}

/* x (N, 1024, 1024) -> Relu -> Relu -> Relu -> y: 4 MiB per sample and
 * tensor, no cuDNN/cuBLAS (whose descriptors cap a tensor at 2^31
 * elements and would refuse a huge batch before any allocation). */
static ert_model *build_chain(void) {
    ert_builder *b = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    if (!b) return NULL;
    int64_t xd[3] = {-1, 1024, 1024};
    int32_t t;
    ert_model *m = NULL;
    bool ok = ert_builder_input(b, "x", ERT_DTYPE_F32, 3, xd, &t) == ERT_OK;
    for (int k = 0; ok && k < 3; k++) ok = ert_builder_unary(b, "Relu", t, &t) == ERT_OK;
    if (ok && ert_builder_output(b, t, "y") == ERT_OK) CHECK_OK(ert_builder_finish(b, &m), ctx);
    CHECK(m != NULL, "chain model: %s", ert_last_error(ctx));
    ert_builder_free(b);
    return m;
}

static size_t free_mem(void) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) cudaGetLastError();
    return f;
}

static bool msg_has_bytes(size_t bytes) {
    char num[32];
    snprintf(num, sizeof num, "%zu", bytes);
    return strstr(ert_last_error(ctx), num) != NULL;
}

/* One batch-2 create/run/compare/free cycle on CUDA (placement pl) against a
 * CPU session; returns false on any failure. */
static bool good_cycle(ert_model *m, ert_placement pl, bool verbose) {
    ert_session_options go = {.device = ERT_DEVICE_CUDA, .batch = 2, .placement = pl};
    ert_session_options co = {.device = ERT_DEVICE_CPU, .batch = 2};
    ert_session *g = NULL, *c = NULL;
    bool ok = ert_session_create(m, &go, &g) == ERT_OK;
    CHECK(ok, "good session (placement %d): %s", (int)pl, ert_last_error(ctx));
    ok = ok && ert_session_create(m, &co, &c) == ERT_OK;
    enum { NI = 2 * CIN * HW * HW, NO = 2 * COUT * HW * HW };
    static float x[NI], got[NO], want[NO];
    static double wd[NO];
    ert_test_fill(&rng, x, NI, -1, 1);
    ok = ok && ert_session_set_input(g, 0, x, sizeof x) == ERT_OK && ert_session_set_input(c, 0, x, sizeof x) == ERT_OK;
    ok = ok && ert_session_run(g) == ERT_OK && ert_session_run(c) == ERT_OK;
    ok = ok && ert_session_get_output(g, 0, got, sizeof got) == ERT_OK &&
         ert_session_get_output(c, 0, want, sizeof want) == ERT_OK;
    CHECK(ok, "good cycle (placement %d): %s", (int)pl, ert_last_error(ctx));
    if (ok) {
        for (int i = 0; i < NO; i++) wd[i] = want[i];
        ok = ert_test_close("CUDA vs CPU", got, wd, NO, 1e-4, 1e-4);
        CHECK(ok, "CUDA output differs from the CPU's (placement %d)", (int)pl);
        if (verbose) printf("  good cycle, placement %d: output agrees with the CPU session\n", (int)pl);
    }
    ert_session_free(g);
    ert_session_free(c);
    return ok;
}

/* ------------------------------------------------------------------ cases */

/* A batch whose plan is about twice the device memory. */
static int huge_batch(ert_model *m, ert_memory_report *rep) {
    ert_session_options o = {.device = ERT_DEVICE_CUDA, .batch = 1};
    ert_memory_report r1;
    CHECK_OK(ert_session_plan(m, &o, &r1), ctx);
    size_t per = r1.io_bytes + r1.activations_bytes; /* per sample, roughly: weights do not grow */
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    size_t want = 2 * t;
    size_t b = want / (per ? per : 1) + 1;
    if (b > 0x7fffffff) b = 0x7fffffff;
    o.batch = (int)b;
    CHECK_OK(ert_session_plan(m, &o, rep), ctx);
    CHECK(rep->total_bytes > t, "batch %zu plans %zu bytes, not more than the GPU's %zu", b, rep->total_bytes, t);
    return (int)b;
}

static void test_huge_arena(ert_model *m) {
    printf("== arena larger than the GPU\n");
    ert_model *chain = build_chain();
    if (!chain) return;
    ert_memory_report rep;
    int batch = huge_batch(chain, &rep);
    /* DEVICE explicitly, and AUTO (DEVICE on a discrete GPU; on an
     * integrated one the arena is managed memory: not asked there) */
    int integrated = 0;
    if (cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, 0) != cudaSuccess) cudaGetLastError();
    static const ert_placement pls[2] = {ERT_PLACEMENT_DEVICE, ERT_PLACEMENT_AUTO};
    for (int k = 0; k < (integrated ? 1 : 2); k++) {
        ert_session_options o = {.device = ERT_DEVICE_CUDA, .placement = pls[k], .batch = batch};
        ert_memory_report r;
        CHECK_OK(ert_session_plan(chain, &o, &r), ctx);
        ert_session *s = NULL;
        ert_status st = ert_session_create(chain, &o, &s);
        printf("  placement %d, batch %d, plan %.1f GiB: %s: %s\n", (int)pls[k], o.batch,
               (double)r.total_bytes / (MIB * 1024), ert_status_str(st), ert_last_error(ctx));
        CHECK(st == ERT_E_NOMEM || st == ERT_E_ARENA, "huge arena (placement %d): %s", (int)pls[k],
              ert_status_str(st));
        CHECK(s == NULL, "a session came back with the failure");
        CHECK(msg_has_bytes(r.total_bytes), "message does not give the %zu bytes: %s", r.total_bytes,
              ert_last_error(ctx));
        ert_session_free(s);
    }
    /* after the failures the GPU still works */
    good_cycle(m, ERT_PLACEMENT_DEVICE, true);

    /* no leak: 50 failures and 50 good cycles */
    size_t f0 = free_mem();
    int fails = 0;
    for (int i = 0; i < 50; i++) {
        ert_session_options o = {.device = ERT_DEVICE_CUDA, .placement = ERT_PLACEMENT_DEVICE, .batch = batch};
        ert_session *s = NULL;
        ert_status st = ert_session_create(chain, &o, &s);
        fails += st != ERT_E_NOMEM && st != ERT_E_ARENA;
        ert_session_free(s);
        fails += !good_cycle(m, (ert_placement)(i % 4), false);
    }
    size_t f1 = free_mem();
    double d = ((double)f0 - (double)f1) / MIB;
    printf("  50 x (failed create + good create/run/free): free device memory %.1f -> %.1f MiB (%+.2f MiB)\n",
           f0 / MIB, f1 / MIB, -d);
    CHECK(fails == 0, "%d of the 100 cycles misbehaved", fails);
    CHECK(f1 + LEAK_SLACK >= f0, "device memory leaked: %.2f MiB", d);
    ert_model_free(chain);
}

/* Every allocation that session create makes, failing in turn. */
static void test_alloc_faults(ert_model *m) {
    printf("== allocations failing at create\n");
    for (int pl = ERT_PLACEMENT_DEVICE; pl <= ERT_PLACEMENT_MAPPED; pl++) {
        /* how many allocations does a create make? */
        ert_session_options o = {.device = ERT_DEVICE_CUDA, .batch = 2, .placement = (ert_placement)pl};
        ert_session *s = NULL;
        disarm();
        alloc_armed = true;
        ert_status st = ert_session_create(m, &o, &s);
        long n = n_calls;
        disarm();
        ert_session_free(s);
        CHECK(st == ERT_OK, "placement %d: %s", pl, ert_last_error(ctx));
        size_t f0 = free_mem();
        int bad = 0;
        for (long k = 1; k <= n; k++) {
            s = NULL;
            alloc_armed = true;
            fail_at = k;
            st = ert_session_create(m, &o, &s);
            disarm();
            printf("  placement %d, allocation %ld of %ld fails: %s: %s\n", pl, k, n, ert_status_str(st),
                   ert_last_error(ctx));
            if ((st != ERT_E_NOMEM && st != ERT_E_CUDA) || s != NULL) bad++;
            ert_session_free(s);
        }
        CHECK(bad == 0, "placement %d: %d injected allocation failures not reported as ERT_E_NOMEM/ERT_E_CUDA", pl, bad);
        size_t f1 = free_mem();
        CHECK(f1 + LEAK_SLACK >= f0, "placement %d: failed creates leaked %.2f MiB", pl, ((double)f0 - f1) / MIB);
        good_cycle(m, (ert_placement)pl, false);
    }
}

static void test_caller_arena_small(ert_model *m) {
    printf("== caller arena too small\n");
    ert_session_options o = {.device = ERT_DEVICE_CUDA, .batch = 2};
    ert_memory_report r;
    CHECK_OK(ert_session_plan(m, &o, &r), ctx);
    void *arena = NULL;
    if (cudaMalloc(&arena, r.total_bytes) != cudaSuccess) {
        CHECK(false, "cudaMalloc(%zu) for the caller arena", r.total_bytes);
        return;
    }
    size_t sizes[3] = {r.total_bytes - 256, 1, 0};
    for (int k = 0; k < 3; k++) {
        o.arena = arena;
        o.arena_bytes = sizes[k];
        ert_session *s = NULL;
        ert_status st = ert_session_create(m, &o, &s);
        printf("  %zu of %zu bytes: %s: %s\n", sizes[k], r.total_bytes, ert_status_str(st), ert_last_error(ctx));
        if (sizes[k] == 0) { /* arena given, size 0: refused either as too small or as a bad argument */
            CHECK(st == ERT_E_ARENA || st == ERT_E_ARG, "arena of 0 bytes: %s", ert_status_str(st));
        } else {
            CHECK(st == ERT_E_ARENA, "arena of %zu bytes: %s", sizes[k], ert_status_str(st));
            CHECK(msg_has_bytes(r.total_bytes), "message lacks the %zu bytes needed", r.total_bytes);
        }
        CHECK(s == NULL, "a session came back");
        ert_session_free(s);
    }
    /* the exact size works */
    o.arena_bytes = r.total_bytes;
    ert_session *s = NULL;
    CHECK_OK(ert_session_create(m, &o, &s), ctx);
    if (s) CHECK_OK(ert_session_run(s), ctx);
    ert_session_free(s);
    cudaFree(arena);
}

static void test_shapes(ert_model *m) {
    printf("== wrong input shapes\n");
    ert_session_options o = {.device = ERT_DEVICE_CUDA, .batch = 2};
    ert_session *s = NULL;
    CHECK_OK(ert_session_create(m, &o, &s), ctx);
    if (!s) return;
    size_t want = (size_t)2 * CIN * HW * HW * sizeof(float);
    float *x = malloc(want + 64);
    ert_test_fill(&rng, x, (int64_t)(want / 4) + 16, -1, 1);
    size_t sizes[3] = {want - 4, want + 4, want / 2};
    for (int k = 0; k < 3; k++) {
        ert_status st = ert_session_set_input(s, 0, x, sizes[k]);
        printf("  set_input with %zu of %zu bytes: %s: %s\n", sizes[k], want, ert_status_str(st), ert_last_error(ctx));
        CHECK(st == ERT_E_SHAPE, "set_input(%zu bytes): %s", sizes[k], ert_status_str(st));
        CHECK(strstr(ert_last_error(ctx), "'x'") != NULL, "message does not name the input: %s", ert_last_error(ctx));
    }
    CHECK(ert_session_set_input(s, 1, x, want) == ERT_E_ARG, "input index 1 accepted");
    CHECK(ert_session_set_input(s, -1, x, want) == ERT_E_ARG, "input index -1 accepted");
    CHECK_OK(ert_session_set_input(s, 0, x, want), ctx);
    CHECK_OK(ert_session_run(s), ctx);
    ert_session_free(s);
    free(x);
    /* shapes fixed at create that contradict the model */
    static const ert_input_shape bad[3] = {
        {.name = "x", .ndim = 3, .dims = {2, CIN, HW}},           /* rank */
        {.name = "x", .ndim = 4, .dims = {2, CIN + 1, HW, HW}},   /* a fixed dim */
        {.name = "nope", .ndim = 4, .dims = {2, CIN, HW, HW}},    /* no such input */
    };
    for (int k = 0; k < 3; k++) {
        ert_session_options so = {.device = ERT_DEVICE_CUDA, .input_shapes = &bad[k], .n_input_shapes = 1};
        s = NULL;
        ert_status st = ert_session_create(m, &so, &s);
        printf("  input_shapes case %d: %s: %s\n", k, ert_status_str(st), ert_last_error(ctx));
        CHECK(st == (k == 2 ? ERT_E_NOT_FOUND : ERT_E_SHAPE), "input_shapes case %d: %s", k, ert_status_str(st));
        CHECK(s == NULL, "a session came back");
        ert_session_free(s);
    }
    /* the session machinery is fine afterwards */
    good_cycle(m, ERT_PLACEMENT_DEVICE, true);
}

static void test_failed_run(ert_model *m) {
    printf("== a run that fails\n");
    for (int which = 0; which < 2; which++) {
        ert_session_options go = {.device = ERT_DEVICE_CUDA, .batch = 2}, co = {.device = ERT_DEVICE_CPU, .batch = 2};
        ert_session *g = NULL, *c = NULL;
        CHECK_OK(ert_session_create(m, &go, &g), ctx);
        CHECK_OK(ert_session_create(m, &co, &c), ctx);
        if (!g || !c) {
            ert_session_free(g);
            ert_session_free(c);
            return;
        }
        enum { NI = 2 * CIN * HW * HW, NO = 2 * COUT * HW * HW };
        static float x[NI], got[NO], want[NO];
        static double wd[NO];
        CHECK_OK(ert_session_run(g), ctx); /* captures the graph */
        disarm();
        if (which == 0) launch_armed = true;
        else sync_armed = true;
        fail_at = 1;
        ert_status st = ert_session_run(g);
        bool fired = n_calls > 0;
        disarm();
        const char *call = which == 0 ? "cudaGraphLaunch" : "cudaErrorLaunchFailure";
        printf("  %s made to fail: %s: %s\n", which == 0 ? "cudaGraphLaunch" : "cudaStreamSynchronize",
               ert_status_str(st), ert_last_error(ctx));
        CHECK(fired, "the injected failure was never reached (%s)", call);
        CHECK(st == ERT_E_CUDA, "failed run: %s", ert_status_str(st));
        CHECK(strstr(ert_last_error(ctx), call) != NULL, "message does not name %s: %s", call, ert_last_error(ctx));
        /* the next runs work and agree with the CPU */
        for (int rep = 0; rep < 2; rep++) {
            ert_test_fill(&rng, x, NI, -1, 1);
            CHECK_OK(ert_session_set_input(g, 0, x, sizeof x), ctx);
            CHECK_OK(ert_session_set_input(c, 0, x, sizeof x), ctx);
            CHECK_OK(ert_session_run(g), ctx);
            CHECK_OK(ert_session_run(c), ctx);
            CHECK_OK(ert_session_get_output(g, 0, got, sizeof got), ctx);
            CHECK_OK(ert_session_get_output(c, 0, want, sizeof want), ctx);
            for (int i = 0; i < NO; i++) wd[i] = want[i];
            CHECK(ert_test_close("run after a failed run vs CPU", got, wd, NO, 1e-4, 1e-4), "run %d after", rep);
        }
        printf("  the next 2 runs agree with the CPU session\n");
        ert_session_free(g);
        ert_session_free(c);
    }
}

int main(void) {
    ert_test_rng_init(&rng, "cuda_bad");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    ert_model *m = build_model();
    if (!m) return ert_test_finish("cuda_bad");
    ert_session_options o = {.device = ERT_DEVICE_CUDA, .batch = 1};
    ert_session *s = NULL;
    ert_status st = ert_session_create(m, &o, &s);
    if (st == ERT_E_CUDA) {
        char why[600];
        snprintf(why, sizeof why, "%s", ert_last_error(ctx));
        ert_model_free(m);
        ert_context_free(ctx);
        return ert_test_skip("cuda_bad", why);
    }
    CHECK(st == ERT_OK, "probe session: %s (%s)", ert_status_str(st), ert_last_error(ctx));
    ert_session_free(s);
    /* warm-up: the first run loads the kernels' modules (lazy loading keeps
     * them) and the first managed/mapped allocation sets up the driver's
     * side of those, so free memory is measured from a steady state */
    for (int pl = ERT_PLACEMENT_AUTO; pl <= ERT_PLACEMENT_MAPPED; pl++) good_cycle(m, (ert_placement)pl, false);
    size_t f_start = free_mem();
    test_huge_arena(m);
    test_alloc_faults(m);
    test_caller_arena_small(m);
    test_shapes(m);
    test_failed_run(m);
    size_t f_end = free_mem();
    printf("free device memory: %.1f MiB at start, %.1f MiB at the end\n", f_start / MIB, f_end / MIB);
    CHECK(f_end + LEAK_SLACK >= f_start, "device memory leaked over the whole test: %.2f MiB",
          ((double)f_start - f_end) / MIB);
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish("cuda_bad");
}
#endif
