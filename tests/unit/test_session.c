/* Session pipeline through the public API: builder -> plan -> create -> run,
 * constant folding, dead-node removal, caller arenas, and bad input. Uses only
 * element-wise ops so it stays independent of the heavy kernels (those have
 * their own tests and the model tests). */
#include "runtime_internal.h"
#include "plan_oracle.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static ert_context *ctx;

static void check_plan(ert_session *s) {
    char why[256] = "";
    CHECK(ert_session_plan_check(s, why, sizeof why), "plan: %s", why);
    int nb;
    const ert_plan_block *blk = ert_session_plan_blocks(s, &nb);
    CHECK(ert_plan_matches_oracle(blk, nb, why, sizeof why), "plan vs oracle: %s", why);
}

/* y = Relu(a + b), z = Identity(y); a, b are (-1, 5, 7) inputs */
static ert_model *build_relu_add(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t dims[3] = {-1, 5, 7};
    int32_t a, c, s, y, z;
    CHECK_OK(ert_builder_input(b, "a", ERT_DTYPE_F32, 3, dims, &a), ctx);
    CHECK_OK(ert_builder_input(b, "b", ERT_DTYPE_F32, 3, dims, &c), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", a, c, &s), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", s, &y), ctx);
    CHECK_OK(ert_builder_unary(b, "Identity", y, &z), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    CHECK_OK(ert_builder_output(b, z, "z"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

static void run_relu_add(ert_test_rng *r, ert_model *m, int batch) {
    ert_session_options o = {.batch = batch};
    ert_session *s = NULL;
    CHECK_OK(ert_session_create(m, &o, &s), ctx);
    if (!s) return;
    check_plan(s);
    ert_tensor_info ti;
    CHECK_OK(ert_session_input_info(s, 0, &ti), ctx);
    CHECK(ti.ndim == 3 && ti.dims[0] == batch && ti.dims[1] == 5 && ti.dims[2] == 7, "input shape");
    int64_t n = (int64_t)batch * 35;
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    double *ref = malloc((size_t)n * 8);
    for (int rep = 0; rep < 3; rep++) {
        ert_test_fill(r, a, n, -1, 1);
        ert_test_fill(r, b, n, -1, 1);
        for (int64_t i = 0; i < n; i++) ref[i] = fmax(0.0, (double)a[i] + (double)b[i]);
        float *in0;
        CHECK_OK(ert_session_input_data(s, 0, (void **)&in0), ctx);
        memcpy(in0, a, (size_t)n * 4);
        CHECK_OK(ert_session_set_input(s, 1, b, (size_t)n * 4), ctx);
        const float *y, *z;
        CHECK_OK(ert_session_output_data(s, 0, (const void **)&y), ctx);
        CHECK_OK(ert_session_output_data(s, 1, (const void **)&z), ctx);
        ert_test_poison((float *)y, n);
        ert_test_poison((float *)z, n);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK(ert_test_close("y", y, ref, n, 1e-6, 1e-6), "relu(a+b) batch %d", batch);
        CHECK(ert_test_close("z", z, ref, n, 1e-6, 1e-6), "identity batch %d", batch);
    }
    int idx = -1;
    CHECK(ert_session_find_output(s, "z", &idx) == ERT_OK && idx == 1, "find z");
    CHECK(ert_session_find_input(s, "nope", &idx) == ERT_E_NOT_FOUND, "find missing");
    /* bad calls: status, no crash */
    CHECK(ert_session_set_input(s, 0, a, 12) == ERT_E_SHAPE, "short input");
    CHECK(strstr(ert_last_error(ctx), "bytes") != NULL, "message: %s", ert_last_error(ctx));
    CHECK(ert_session_set_input(s, 2, a, (size_t)n * 4) == ERT_E_ARG, "index");
    CHECK(ert_session_set_input(s, 0, NULL, 4) == ERT_E_ARG, "null");
    CHECK(ert_session_output_data(s, -1, (const void **)&a) == ERT_E_ARG, "neg index");
    CHECK(ert_session_get_output(s, 0, b, 3) == ERT_E_SHAPE, "get_output size");
    free(a);
    free(b);
    free(ref);
    ert_session_free(s);
}

static void arena_cases(ert_model *m) {
    ert_session_options o = {.batch = 2};
    ert_memory_report rep;
    CHECK_OK(ert_session_plan(m, &o, &rep), ctx);
    CHECK(rep.total_bytes == rep.weights_bytes + rep.io_bytes + rep.activations_bytes, "total is the sum");
    CHECK(rep.io_bytes >= 4 * 2 * 35 * 4, "io holds a, b, y, z: %zu", rep.io_bytes);
    CHECK(rep.activations_bytes >= rep.activations_lower_bound, "peak >= lower bound");
    size_t need = rep.total_bytes;
    void *buf = aligned_alloc(256, need + 256);
    o.arena = buf;
    o.arena_bytes = need - 1;
    ert_session *s = NULL;
    CHECK(ert_session_create(m, &o, &s) == ERT_E_ARENA && s == NULL, "small arena");
    char want[64];
    snprintf(want, sizeof want, "%zu needed", need);
    CHECK(strstr(ert_last_error(ctx), want) != NULL, "message names the need: %s", ert_last_error(ctx));
    o.arena_bytes = need;
    CHECK_OK(ert_session_create(m, &o, &s), ctx);
    if (s) {
        void *p;
        ert_session_input_data(s, 1, &p);
        CHECK((char *)p >= (char *)buf && (char *)p < (char *)buf + need, "input lives in the caller's arena");
        check_plan(s);
        ert_session_free(s);
    }
    o.arena = (char *)buf + 8; /* misaligned */
    CHECK(ert_session_create(m, &o, &s) == ERT_E_ARG, "misaligned arena");
    free(buf);
}

/* Weights-only sub-graphs fold away; unused nodes are dropped. */
static void folding(ert_test_rng *r) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t dims[2] = {3, 4};
    float w1[12], w2[12];
    ert_test_fill(r, w1, 12, -1, 1);
    ert_test_fill(r, w2, 12, -1, 1);
    int32_t x, a, c, s, rl, y, dead;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, dims, &x), ctx);
    CHECK_OK(ert_builder_weight(b, "w1", ERT_DTYPE_F32, 2, dims, w1, &a), ctx);
    CHECK_OK(ert_builder_weight(b, "w2", ERT_DTYPE_F32, 2, dims, w2, &c), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", a, c, &s), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", s, &rl), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", x, rl, &y), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", x, &dead), ctx); /* output unused */
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    if (!m) return;
    CHECK(ert_model_n_nodes(m) == 4, "model keeps 4 nodes");
    CHECK(ert_model_n_params(m) == 24, "params %lld", (long long)ert_model_n_params(m));
    ert_session *s2 = NULL;
    CHECK_OK(ert_session_create(m, NULL, &s2), ctx);
    if (s2) {
        CHECK(ert_session_n_scheduled(s2) == 1, "scheduled %d nodes, want 1", ert_session_n_scheduled(s2));
        ert_memory_report rep;
        ert_session_memory(s2, &rep);
        CHECK(rep.weights_bytes >= 48, "folded constant lives in the arena: %zu", rep.weights_bytes);
        float xin[12], out[12];
        double ref[12];
        ert_test_fill(r, xin, 12, -1, 1);
        for (int i = 0; i < 12; i++) ref[i] = xin[i] + fmax(0.0, (double)w1[i] + w2[i]);
        CHECK_OK(ert_session_set_input(s2, 0, xin, sizeof xin), ctx);
        CHECK_OK(ert_session_run(s2), ctx);
        CHECK_OK(ert_session_get_output(s2, 0, out, sizeof out), ctx);
        CHECK(ert_test_close("folded", out, ref, 12, 1e-6, 1e-6), "folded graph output");
        check_plan(s2);
        ert_session_free(s2);
    }
    ert_model_free(m);
}

static void bad_input(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t dims[2] = {2, -1};
    int32_t x, y, ids[1];
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, dims, &x), ctx);
    CHECK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, dims, &y) == ERT_E_ARG, "duplicate name");
    CHECK(ert_builder_unary(b, "NoSuchOp", x, &y) == ERT_E_UNSUPPORTED, "unknown op");
    CHECK(strstr(ert_last_error(ctx), "NoSuchOp") != NULL, "message names the op: %s", ert_last_error(ctx));
    CHECK(ert_builder_unary(b, "Relu", 99, &y) == ERT_E_ARG, "bad id");
    CHECK(ert_builder_node(b, "Add", NULL, &x, 1, NULL, 0, ids, 1) == ERT_E_FORMAT, "arity");
    CHECK(ert_builder_input(b, "z", (ert_dtype)99, 2, dims, &y) == ERT_E_ARG, "bad dtype");
    CHECK(ert_builder_finish(b, NULL) == ERT_E_ARG, "null out");
    ert_model *m = NULL;
    CHECK(ert_builder_finish(b, &m) == ERT_E_FORMAT, "no outputs");
    CHECK_OK(ert_builder_unary(b, "Relu", x, &y), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    CHECK(ert_builder_unary(b, "Relu", x, &y) == ERT_E_STATE, "builder used after finish");
    ert_builder_free(b);
    ert_session *s = NULL;
    CHECK(ert_session_create(m, NULL, &s) == ERT_E_SHAPE, "dynamic inner dim without shape");
    CHECK(strstr(ert_last_error(ctx), "input_shapes") != NULL, "message says how: %s", ert_last_error(ctx));
    ert_input_shape is = {.name = "x", .ndim = 2, .dims = {2, 9}};
    ert_session_options o = {.input_shapes = &is, .n_input_shapes = 1};
    CHECK_OK(ert_session_create(m, &o, &s), ctx);
    ert_tensor_info ti;
    if (s) {
        CHECK_OK(ert_session_output_info(s, 0, &ti), ctx);
        CHECK(ti.dims[1] == 9, "shape flows to the output");
        ert_session_free(s);
        s = NULL;
    }
    is.dims[0] = 3; /* contradicts the static dim */
    CHECK(ert_session_create(m, &o, &s) == ERT_E_SHAPE, "contradicting static dim");
    is.name = "nope";
    CHECK(ert_session_create(m, &o, &s) == ERT_E_NOT_FOUND, "unknown input name");
    o.n_input_shapes = -1;
    CHECK(ert_session_create(m, &o, &s) == ERT_E_ARG, "bad options");
    ert_session_options cu = {.device = ERT_DEVICE_CUDA};
    CHECK(ert_session_create(m, &cu, &s) != ERT_OK && s == NULL, "no CUDA in this build");
    CHECK(ert_session_create(NULL, NULL, &s) == ERT_E_ARG, "null model");
    CHECK(ert_model_input_info(m, 5, &ti) == ERT_E_ARG, "model input index");
    ert_model_free(m);
    ert_session_free(NULL);
    ert_model_free(NULL);
}

/* A shape operand given as a graph input: refused without a value, runs when
 * the value is fixed at create (ert_session_options.input_values). */
static void input_values(ert_test_rng *r) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[2] = {4, 6}, sd[1] = {3};
    int32_t x, shp, y, z;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, xd, &x), ctx);
    CHECK_OK(ert_builder_input(b, "shape", ERT_DTYPE_I64, 1, sd, &shp), ctx);
    int32_t in[2] = {x, shp};
    CHECK_OK(ert_builder_node(b, "Reshape", NULL, in, 2, NULL, 0, &y, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", y, &z), ctx);
    CHECK_OK(ert_builder_output(b, z, "z"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    if (!m) return;
    ert_session *s = NULL;
    CHECK(ert_session_create(m, NULL, &s) == ERT_E_UNSUPPORTED && !s, "shape input without a value");
    int64_t target[3] = {2, 3, 4};
    ert_input_value iv = {.name = "shape", .dtype = ERT_DTYPE_I64, .ndim = 1, .dims = {3}, .data = target};
    ert_session_options o = {.input_values = &iv, .n_input_values = 1};
    CHECK_OK(ert_session_create(m, &o, &s), ctx);
    target[0] = 99; /* the session copied the value */
    if (s) {
        CHECK(ert_session_n_inputs(s) == 1, "the fixed input is no longer listed: %d inputs", ert_session_n_inputs(s));
        ert_tensor_info ti;
        CHECK_OK(ert_session_output_info(s, 0, &ti), ctx);
        CHECK(ti.ndim == 3 && ti.dims[0] == 2 && ti.dims[1] == 3 && ti.dims[2] == 4, "output shape from the value");
        float xv[24], out[24];
        double ref[24];
        ert_test_fill(r, xv, 24, -1, 1);
        for (int i = 0; i < 24; i++) ref[i] = fmax(0.0, xv[i]);
        CHECK_OK(ert_session_set_input(s, 0, xv, sizeof xv), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, out, sizeof out), ctx);
        CHECK(ert_test_close("reshape(relu)", out, ref, 24, 1e-7, 1e-7), "values");
        check_plan(s);
        ert_session_free(s);
        s = NULL;
    }
    iv.name = "nope";
    CHECK(ert_session_create(m, &o, &s) == ERT_E_NOT_FOUND, "unknown input name");
    iv.name = "shape";
    iv.dtype = ERT_DTYPE_I32;
    CHECK(ert_session_create(m, &o, &s) == ERT_E_SHAPE, "wrong dtype");
    iv.dtype = ERT_DTYPE_I64;
    iv.dims[0] = 4;
    CHECK(ert_session_create(m, &o, &s) == ERT_E_SHAPE, "wrong dims");
    o.n_input_values = -1;
    CHECK(ert_session_create(m, &o, &s) == ERT_E_ARG, "negative count");
    ert_model_free(m);
}

/* An arena the machine cannot give: a batch that plans ~2^55 bytes (beyond
 * any 48-bit address space, so it fails whatever the overcommit policy) is
 * ERT_E_NOMEM naming the bytes, with this failure's reason, not the message a
 * previous failure left in the context. Not under ASan, whose allocator
 * aborts on such a size instead of returning NULL. */
static void arena_oom(void) {
#if defined(__SANITIZE_ADDRESS__)
    printf("arena_oom: skipped under ASan\n");
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    printf("arena_oom: skipped under ASan\n");
#else
#define ERT_TEST_ARENA_OOM
#endif
#else
#define ERT_TEST_ARENA_OOM
#endif
#ifdef ERT_TEST_ARENA_OOM
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t dims[3] = {-1, 1024, 1024};
    int32_t x, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 3, dims, &x), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", x, &y), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    if (!m) return;
    ert_session_options o = {.batch = 0x7fffffff};
    ert_memory_report rep;
    CHECK_OK(ert_session_plan(m, &o, &rep), ctx);
    /* leave an unrelated message behind */
    ert_session_options bad = {.batch = -1};
    ert_session *s = NULL;
    CHECK(ert_session_create(m, &bad, &s) == ERT_E_ARG, "batch -1 accepted");
    ert_status st = ert_session_create(m, &o, &s);
    const char *msg = ert_last_error(ctx);
    char want[96];
    snprintf(want, sizeof want, "cannot allocate the %zu-byte arena on cpu", rep.total_bytes);
    CHECK(st == ERT_E_NOMEM && s == NULL, "arena of %zu bytes: %s (%s)", rep.total_bytes, ert_status_str(st), msg);
    CHECK(strstr(msg, want) && strstr(msg, "out of memory") && !strstr(msg, "invalid session options"),
          "message: %s", msg);
    ert_session_free(s);
    ert_model_free(m);
#undef ERT_TEST_ARENA_OOM
#endif
}

/* Size reads only its input's shape: it folds at create although x is a
 * graph input (its dynamic batch dim fixed by the session), and so does the
 * Cast after it; y = x * numel(x) runs as one Mul. */
static void size_folding(ert_test_rng *r) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t dims[3] = {-1, 3, 5};
    int32_t x, sz, szf, y;
    ert_attr to = ERT_ATTR_I("to", 1); /* ONNX FLOAT */
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 3, dims, &x), ctx);
    CHECK_OK(ert_builder_unary(b, "Size", x, &sz), ctx);
    CHECK_OK(ert_builder_node(b, "Cast", NULL, &sz, 1, &to, 1, &szf, 1), ctx);
    CHECK_OK(ert_builder_binary(b, "Mul", x, szf, &y), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    if (!m) return;
    for (int batch = 1; batch <= 4; batch += 3) {
        ert_session *s = NULL;
        ert_session_options o = {.batch = batch};
        CHECK_OK(ert_session_create(m, &o, &s), ctx);
        if (!s) continue;
        CHECK(ert_session_n_scheduled(s) == 1, "batch %d: scheduled %d nodes, want 1 (Size folded)", batch,
              ert_session_n_scheduled(s));
        float xin[60], out[60];
        double ref[60];
        int n = batch * 15;
        ert_test_fill(r, xin, n, -1, 1);
        for (int i = 0; i < n; i++) ref[i] = (double)xin[i] * n;
        CHECK_OK(ert_session_set_input(s, 0, xin, (size_t)n * sizeof xin[0]), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, out, (size_t)n * sizeof out[0]), ctx);
        CHECK(ert_test_close("size fold", out, ref, n, 1e-6, 1e-6), "batch %d: y = x * numel(x)", batch);
        ert_session_free(s);
    }
    ert_model_free(m);
}

/* Gather with indices from a graph input: an index out of range at run is
 * ERT_E_ARG with a message naming the index, its position and the range, and
 * the session runs again with good indices. */
static void gather_bad_index(ert_test_rng *r) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[2] = {5, 3}, id[1] = {4};
    int32_t x, idx, y;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, xd, &x), ctx);
    CHECK_OK(ert_builder_input(b, "idx", ERT_DTYPE_I64, 1, id, &idx), ctx);
    int32_t in[2] = {x, idx};
    CHECK_OK(ert_builder_node(b, "Gather", NULL, in, 2, NULL, 0, &y, 1), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    ert_session *s = NULL;
    if (m) CHECK_OK(ert_session_create(m, NULL, &s), ctx);
    if (s) {
        float xv[15], out[12];
        ert_test_fill(r, xv, 15, -1, 1);
        CHECK_OK(ert_session_set_input(s, 0, xv, sizeof xv), ctx);
        int pos = (int)ert_test_int(r, 0, 3);
        int64_t bad = ert_test_int(r, 0, 1) ? 5 + ert_test_int(r, 0, 9) : -6 - ert_test_int(r, 0, 9);
        int64_t iv[4] = {0, 1, -1, 2};
        iv[pos] = bad;
        CHECK_OK(ert_session_set_input(s, 1, iv, sizeof iv), ctx);
        char want[96];
        snprintf(want, sizeof want, "index %lld (at position %d) out of range [-5, 5)", (long long)bad, pos);
        CHECK(ert_session_run(s) == ERT_E_ARG && strstr(ert_last_error(ctx), want) != NULL,
              "gather index %lld at %d: %s", (long long)bad, pos, ert_last_error(ctx));
        iv[pos] = pos;
        CHECK_OK(ert_session_set_input(s, 1, iv, sizeof iv), ctx);
        CHECK_OK(ert_session_run(s), ctx);
        CHECK_OK(ert_session_get_output(s, 0, out, sizeof out), ctx);
        int wrong = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) wrong += out[i * 3 + j] != xv[((iv[i] + 5) % 5) * 3 + j];
        CHECK(wrong == 0, "gather after the refused run: %d wrong", wrong);
        ert_session_free(s);
    }
    ert_model_free(m);
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "session");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    ert_model *m = build_relu_add();
    if (m) {
        ert_tensor_info mi;
        CHECK_OK(ert_model_output_info(m, 1, &mi), ctx);
        CHECK(mi.dtype == ERT_DTYPE_F32 && mi.ndim == 3 && mi.dims[0] == -1 && mi.dims[1] == 5 && mi.dims[2] == 7,
              "builder infers output z as f32 (-1,5,7): %s ndim %d", ert_dtype_name(mi.dtype), mi.ndim);
        run_relu_add(&r, m, 1);
        run_relu_add(&r, m, 3);
        arena_cases(m);
        /* GPU-input calls on a CPU session: a clear refusal, and sync is a no-op */
        ert_session_options co = {.flags = ERT_SESSION_DEVICE_INPUTS};
        ert_session *cs = NULL;
        CHECK_OK(ert_session_create(m, &co, &cs), ctx);
        if (cs) {
            void *dev = NULL;
            CHECK(ert_session_input_device(cs, 0, &dev) == ERT_E_UNSUPPORTED && !dev,
                  "input_device on a CPU session: %s", ert_last_error(ctx));
            CHECK(strstr(ert_last_error(ctx), "no GPU memory") != NULL, "message: %s", ert_last_error(ctx));
            CHECK(ert_session_input_device(cs, 99, &dev) == ERT_E_ARG, "input_device index");
            CHECK_OK(ert_session_sync_inputs(cs), ctx);
            CHECK_OK(ert_session_run(cs), ctx);
            ert_session_free(cs);
        }
        /* ERT_SESSION_DEVICE_OUTPUTS on a CPU session: no effect, outputs as usual */
        co.flags = ERT_SESSION_DEVICE_OUTPUTS;
        cs = NULL;
        ert_session *plain = NULL;
        CHECK_OK(ert_session_create(m, &co, &cs), ctx);
        CHECK_OK(ert_session_create(m, &(ert_session_options){0}, &plain), ctx);
        if (cs && plain) {
            for (int k = 0; k < ert_session_n_inputs(cs); k++) {
                ert_tensor_info ii;
                CHECK_OK(ert_session_input_info(cs, k, &ii), ctx);
                size_t n = 1;
                for (int d = 0; d < ii.ndim; d++) n *= (size_t)ii.dims[d];
                float *x = malloc(n * sizeof *x);
                for (size_t i = 0; x && i < n; i++) x[i] = (float)ert_test_uniform(&r, -2, 2);
                if (x) {
                    CHECK_OK(ert_session_set_input(cs, k, x, n * sizeof *x), ctx);
                    CHECK_OK(ert_session_set_input(plain, k, x, n * sizeof *x), ctx);
                }
                free(x);
            }
            CHECK_OK(ert_session_run(cs), ctx);
            CHECK_OK(ert_session_run(plain), ctx);
            const float *ya = NULL, *yb = NULL;
            ert_tensor_info oi;
            CHECK_OK(ert_session_output_info(cs, 0, &oi), ctx);
            size_t no = 1;
            for (int d = 0; d < oi.ndim; d++) no *= (size_t)oi.dims[d];
            CHECK_OK(ert_session_output_data(cs, 0, (const void **)&ya), ctx);
            CHECK_OK(ert_session_output_data(plain, 0, (const void **)&yb), ctx);
            CHECK(ya && yb && memcmp(ya, yb, no * sizeof *ya) == 0, "DEVICE_OUTPUTS CPU session: outputs differ");
        }
        ert_session_free(cs);
        ert_session_free(plain);
        {
        }
        ert_model_free(m);
    }
    folding(&r);
    size_folding(&r);
    gather_bad_index(&r);
    input_values(&r);
    bad_input();
    arena_oom();
    ert_context_free(ctx);
    return ert_test_finish("session");
}
