/* ONNX loader at scale: a 200k-node chain and a 200k-node-wide graph must
 * load (iteratively: no stack growth with depth) in reasonable time. Kept out
 * of test_onnx so that one stays fast under sanitizers and qemu. The chain
 * also creates a session (passes + memory plan; the planner was quadratic,
 * issue 13 item 17) and runs it: Relu applied 200k times is Relu. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "runtime_internal.h"
#include "onnx_enc.h"
#include "testutil.h"

#include <time.h>

#define N_NODES 200000

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* chain: x -> Relu -> t1 -> Relu -> ... -> y, nodes written in reverse order
 * so the loader's topological sort has real work. wide: N Relu nodes all
 * reading x; only the last one's output is the graph output (the rest are
 * dead but must still load). */
static pbuf build(bool chain) {
    oxg g = {0};
    int64_t d[1] = {4};
    char in[32], out[32];
    for (int k = N_NODES - 1; k >= 0; k--) {
        if (chain) {
            snprintf(in, sizeof in, k == 0 ? "x" : "t%d", k);
            snprintf(out, sizeof out, k == N_NODES - 1 ? "y" : "t%d", k + 1);
        } else {
            snprintf(in, sizeof in, "x");
            snprintf(out, sizeof out, k == N_NODES - 1 ? "y" : "w%d", k);
        }
        const char *ins[2] = {in, NULL}, *outs[2] = {out, NULL};
        ox_g_node(&g, ox_node("Relu", NULL, NULL, ins, outs, NULL, 0));
    }
    ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d));
    ox_g_output(&g, ox_value_info("y", OX_FLOAT, 1, d));
    return ox_model(&g, 13);
}

static void create_and_run(ert_context *ctx, ert_model *mod) {
    ert_session *s = NULL;
    double t0 = now_s();
    CHECK_OK(ert_session_create(mod, NULL, &s), ctx);
    double dt = now_s() - t0;
    printf("chain: session created in %.3f s\n", dt);
    if (!s) return;
    ert_memory_report rep;
    CHECK_OK(ert_session_memory(s, &rep), ctx);
    /* neighbours alternate between two offsets: the plan meets the bound */
    CHECK(rep.activations_bytes == rep.activations_lower_bound, "planned %zu bytes, lower bound %zu",
          rep.activations_bytes, rep.activations_lower_bound);
    ert_test_rng rng;
    ert_test_rng_init(&rng, "onnx_big");
    float x[4], y[4];
    for (int i = 0; i < 4; i++) x[i] = (float)ert_test_uniform(&rng, -1, 1);
    CHECK_OK(ert_session_set_input(s, 0, x, sizeof x), ctx);
    CHECK_OK(ert_session_run(s), ctx);
    CHECK_OK(ert_session_get_output(s, 0, y, sizeof y), ctx);
    for (int i = 0; i < 4; i++) CHECK(y[i] == (x[i] > 0 ? x[i] : 0), "y[%d] = %g for x %g", i, y[i], x[i]);
    CHECK(dt < 60.0, "create took %.1f s", dt);
    ert_session_free(s);
}

int main(void) {
    ert_context *ctx;
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    for (int chain = 1; chain >= 0; chain--) {
        pbuf m = build(chain);
        double t0 = now_s();
        ert_model *mod = NULL;
        CHECK_OK(ert_onnx_read(ctx, m.p, m.n, NULL, &mod), ctx);
        double dt = now_s() - t0;
        printf("%s: %d nodes, %.1f MB, loaded in %.3f s\n", chain ? "chain" : "wide", N_NODES, m.n / 1e6, dt);
        if (mod) {
            CHECK(mod->n_nodes == N_NODES, "nodes %d", mod->n_nodes);
            if (chain) {
                /* sorted: node k reads node k-1's output */
                int bad = 0;
                for (int k = 1; k < mod->n_nodes; k++) bad += mod->nodes[k].in[0] != mod->nodes[k - 1].out[0];
                CHECK(bad == 0, "%d chain links out of order", bad);
            }
            if (chain) create_and_run(ctx, mod);
            ert_model_free(mod);
        }
        /* generous: ~0.1 s natively; sanitizers and qemu are 10-50x slower */
        CHECK(dt < 60.0, "load took %.1f s", dt);
        pb_free(&m);
    }
    ert_context_free(ctx);
    return ert_test_finish("onnx_big");
}
