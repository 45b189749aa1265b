/*
 * edgert-demo - the library in one page: build a small CNN with the C builder
 * API, save it as .ert, load it back, run both on the same batch, check the
 * outputs are identical, show the arena plan, run with a caller-provided
 * arena, and show the error a too-small arena gives.
 *
 *   usage: edgert-demo [MODEL.ert]     (default /tmp/edgert-demo.ert)
 *
 * Network (x is (N, 3, 32, 32), NCHW):
 *   conv3x3 16 -> relu -> maxpool 2x2/2   (N, 16, 16, 16)
 *   conv3x3 32 -> relu -> global avg pool (N, 32, 1, 1)
 *   flatten -> linear 10 -> softmax       (N, 10)
 * Weights are random (fixed seed), so the "classes" mean nothing.
 */
#define _POSIX_C_SOURCE 200809L
#include "edgert.h"

#include "cli_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 4
#define NCLASS 10

static ert_context *g_ctx;

/* Report a failed call with the library's detailed message. */
static int check(ert_status st, const char *what) {
    if (st == ERT_OK) return 0;
    fprintf(stderr, "edgert-demo: %s failed: %s\n  %s\n", what, ert_status_str(st), ert_last_error(g_ctx));
    return -1;
}

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        if (check((call), #call) != 0) goto fail;                                                                      \
    } while (0)

/* A weight of the given shape, uniform in +-sqrt(6 / fan_in) (He init, so
 * activations neither vanish nor blow up through the layers). */
static ert_status add_weight(ert_builder *b, cli_rng *rng, const char *name, int ndim, const int64_t *dims,
                             int64_t fan_in, int32_t *id) {
    int64_t n = cli_numel(ndim, dims);
    float *w = malloc((size_t)n * sizeof *w);
    if (!w) return ERT_E_NOMEM;
    float a = fan_in > 0 ? sqrtf(6.0f / (float)fan_in) : 0.1f;
    for (int64_t i = 0; i < n; i++) w[i] = cli_rng_uniform(rng, -a, a);
    ert_status st = ert_builder_weight(b, name, ERT_DTYPE_F32, ndim, dims, w, id);
    free(w);
    return st;
}

static ert_status conv_relu(ert_builder *b, cli_rng *rng, const char *name, int32_t x, int cin, int cout,
                            int32_t *y) {
    char wn[64], bn[64];
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    int64_t wd[4] = {cout, cin, 3, 3}, bd[1] = {cout};
    int32_t w, bias, c;
    ert_status st;
    if ((st = add_weight(b, rng, wn, 4, wd, (int64_t)cin * 9, &w)) != ERT_OK) return st;
    if ((st = add_weight(b, rng, bn, 1, bd, 0, &bias)) != ERT_OK) return st;
    if ((st = ert_builder_conv2d(b, x, w, bias, 1, 1, 1, 1, &c)) != ERT_OK) return st;
    return ert_builder_unary(b, "Relu", c, y);
}

static ert_status build(ert_context *ctx, ert_model **out) {
    ert_builder *b = NULL;
    ert_status st = ert_builder_create(ctx, &b);
    if (st != ERT_OK) return st;
    cli_rng rng;
    cli_rng_seed(&rng, 42);
    int64_t in_dims[4] = {-1, 3, 32, 32}; /* dynamic batch */
    int64_t fc_w[2] = {NCLASS, 32}, fc_b[1] = {NCLASS};
    int32_t x, h, fw, fb;
    if ((st = ert_builder_input(b, "input", ERT_DTYPE_F32, 4, in_dims, &x)) != ERT_OK) goto done;
    if ((st = conv_relu(b, &rng, "conv1", x, 3, 16, &h)) != ERT_OK) goto done;   /* (N,16,32,32) */
    if ((st = ert_builder_maxpool2d(b, h, 2, 2, 0, &h)) != ERT_OK) goto done;     /* (N,16,16,16) */
    if ((st = conv_relu(b, &rng, "conv2", h, 16, 32, &h)) != ERT_OK) goto done;  /* (N,32,16,16) */
    if ((st = ert_builder_unary(b, "GlobalAveragePool", h, &h)) != ERT_OK) goto done; /* (N,32,1,1) */
    if ((st = ert_builder_unary(b, "Flatten", h, &h)) != ERT_OK) goto done;       /* (N,32) */
    if ((st = add_weight(b, &rng, "fc.weight", 2, fc_w, 32, &fw)) != ERT_OK) goto done;
    if ((st = add_weight(b, &rng, "fc.bias", 1, fc_b, 0, &fb)) != ERT_OK) goto done;
    if ((st = ert_builder_linear(b, h, fw, fb, &h)) != ERT_OK) goto done;         /* (N,10) */
    if ((st = ert_builder_unary(b, "Softmax", h, &h)) != ERT_OK) goto done;
    if ((st = ert_builder_output(b, h, "probs")) != ERT_OK) goto done;
    st = ert_builder_finish(b, out);
done:
    ert_builder_free(b);
    return st;
}

static void print_model(const ert_model *m) {
    char sh[128];
    ert_tensor_info t;
    printf("model: %d nodes, %lld parameters\n", ert_model_n_nodes(m), (long long)ert_model_n_params(m));
    for (int i = 0; i < ert_model_n_inputs(m); i++)
        if (ert_model_input_info(m, i, &t) == ERT_OK)
            printf("  input  %-8s %s %s\n", t.name, ert_dtype_name(t.dtype), cli_shape_str(sh, sizeof sh, t.ndim, t.dims));
    for (int i = 0; i < ert_model_n_nodes(m); i++) {
        const char *nm = ert_model_node_name(m, i);
        printf("  node %2d %-18s %s\n", i, ert_model_node_op(m, i), nm ? nm : "");
    }
    for (int i = 0; i < ert_model_n_outputs(m); i++) {
        if (ert_model_output_info(m, i, &t) != ERT_OK) continue;
        if (t.dtype == ERT_DTYPE_UNDEFINED) /* shape inference runs at session create */
            printf("  output %-8s (dtype and shape inferred when a session is created)\n", t.name);
        else
            printf("  output %-8s %s %s\n", t.name, ert_dtype_name(t.dtype), cli_shape_str(sh, sizeof sh, t.ndim, t.dims));
    }
}

static void print_report(const ert_memory_report *r) {
    char b[32];
    printf("arena (batch %d):\n", BATCH);
    printf("  weights      %10zu  %s\n", r->weights_bytes, cli_bytes_str(b, sizeof b, r->weights_bytes));
    printf("  activations  %10zu  %s  (planned peak)\n", r->activations_bytes, cli_bytes_str(b, sizeof b, r->activations_bytes));
    printf("               %10zu  %s  (lower bound: most bytes live at once)\n", r->activations_lower_bound,
           cli_bytes_str(b, sizeof b, r->activations_lower_bound));
    printf("  workspace    %10zu  %s  (inside activations)\n", r->workspace_bytes, cli_bytes_str(b, sizeof b, r->workspace_bytes));
    printf("  io           %10zu  %s\n", r->io_bytes, cli_bytes_str(b, sizeof b, r->io_bytes));
    printf("  total        %10zu  %s\n", r->total_bytes, cli_bytes_str(b, sizeof b, r->total_bytes));
    printf("  mapped (not in arena) %zu bytes of weights used in place\n", r->mapped_weights_bytes);
}

/* Create a session, feed `x`, run, copy the output into `y`. */
static int run_once(const ert_model *m, const ert_session_options *so, const float *x, size_t x_bytes, float *y,
                    size_t y_bytes, ert_memory_report *mem) {
    ert_session *s = NULL;
    CHECK(ert_session_create(m, so, &s));
    CHECK(ert_session_set_input(s, 0, x, x_bytes));
    CHECK(ert_session_run(s));
    CHECK(ert_session_get_output(s, 0, y, y_bytes));
    if (mem) CHECK(ert_session_memory(s, mem));
    ert_session_free(s);
    return 0;
fail:
    ert_session_free(s);
    return -1;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "/tmp/edgert-demo.ert";
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: edgert-demo [MODEL.ert]   (default /tmp/edgert-demo.ert)\n");
        return 2;
    }
    int rc = 1;
    ert_model *built = NULL, *loaded = NULL;
    void *arena = NULL;
    enum { X_N = BATCH * 3 * 32 * 32, Y_N = BATCH * NCLASS };
    static float x[X_N], y1[Y_N], y2[Y_N], y3[Y_N];

    printf("edgert %s demo\n", ert_version());
    if (ert_context_create(NULL, &g_ctx) != ERT_OK) return 1;
    CHECK(build(g_ctx, &built));
    print_model(built);

    CHECK(ert_model_save(built, path));
    printf("saved %s\n", path);
    CHECK(ert_model_load_file(g_ctx, path, &loaded));
    printf("loaded %s: %d nodes\n", path, ert_model_n_nodes(loaded));

    cli_rng rng;
    cli_rng_seed(&rng, 7);
    for (int i = 0; i < X_N; i++) x[i] = cli_rng_uniform(&rng, -1, 1);

    ert_session_options so = {0};
    so.batch = BATCH;
    ert_memory_report mem;
    if (run_once(built, &so, x, sizeof x, y1, sizeof y1, &mem) != 0) goto fail;
    if (run_once(loaded, &so, x, sizeof x, y2, sizeof y2, NULL) != 0) goto fail;
    if (memcmp(y1, y2, sizeof y1) != 0) {
        fprintf(stderr, "edgert-demo: outputs of the built and the reloaded model differ\n");
        goto fail;
    }
    printf("built and reloaded model: outputs identical (%d values)\n", Y_N);
    print_report(&mem);

    for (int n = 0; n < BATCH; n++) {
        const float *p = y1 + n * NCLASS;
        int best = 0;
        double sum = 0;
        for (int c = 0; c < NCLASS; c++) {
            sum += p[c];
            if (p[c] > p[best]) best = c;
        }
        printf("image %d: top-1 class %d (p=%.4f, sum of probabilities %.4f)\n", n, best, p[best], sum);
    }

    /* Caller-provided arena: ask for the exact size, then hand it over. */
    ert_memory_report plan;
    CHECK(ert_session_plan(loaded, &so, &plan));
    size_t cap = (plan.total_bytes + 63) / 64 * 64;
    arena = aligned_alloc(64, cap ? cap : 64);
    if (!arena) goto fail;
    so.arena = arena;
    so.arena_bytes = plan.total_bytes;
    if (run_once(loaded, &so, x, sizeof x, y3, sizeof y3, NULL) != 0) goto fail;
    if (memcmp(y1, y3, sizeof y1) != 0) {
        fprintf(stderr, "edgert-demo: output with a caller-provided arena differs\n");
        goto fail;
    }
    printf("caller-provided arena of %zu bytes: outputs identical\n", plan.total_bytes);

    /* One byte short must be refused with ERT_E_ARENA and the size needed. */
    so.arena_bytes = plan.total_bytes - 1;
    ert_session *s = NULL;
    ert_status st = ert_session_create(loaded, &so, &s);
    if (st != ERT_E_ARENA) {
        fprintf(stderr, "edgert-demo: a %zu-byte arena gave %s, expected ERT_E_ARENA\n", so.arena_bytes,
                ert_status_str(st));
        ert_session_free(s);
        goto fail;
    }
    printf("arena of %zu bytes refused as expected: %s\n  %s\n", so.arena_bytes, ert_status_str(st),
           ert_last_error(g_ctx));
    printf("demo ok\n");
    rc = 0;
fail:
    free(arena);
    ert_model_free(loaded);
    ert_model_free(built);
    ert_context_free(g_ctx);
    return cli_stdout_finish("edgert-demo", rc, 0);
}
