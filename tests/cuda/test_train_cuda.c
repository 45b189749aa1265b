/* CUDA trainer against the CPU trainer (label `gpu`). The CPU trainer is the
 * oracle (tests/train/test_grad.c checks its gradients by finite differences).
 *
 * Small models from the builder: a CNN (Conv+bias, BatchNorm, Relu,
 * MaxPool, AveragePool, Conv, GlobalAveragePool, Flatten, Gemm), an MLP
 * (Dropout, Sigmoid) under each loss (cross-entropy with label smoothing and
 * class weights, MSE, BCE with logits), a residual MLP (Add, Mul by a
 * broadcast parameter). Per model: one step on fresh random data on both
 * devices, the loss and every parameter's gradient compared (relative to the
 * gradient's largest magnitude, 1e-4); then 20 steps of each optimizer
 * (SGD + momentum, SGD + Nesterov + weight decay, Adam, AdamW with clipping,
 * an LR schedule) and the parameters compared (1e-3 of each tensor's largest
 * magnitude: 20 updates amplify the summation-order differences). Eval loss
 * on both devices.
 * Then: no cudaMalloc/cudaHostAlloc/... during 100 steps (the link wraps
 * them, as for test_cuda; tests/cuda/CMakeLists.txt), the step captured as a
 * CUDA graph (the backend logs when it cannot), a NaN input skips the update
 * on device and is reported, and a model whose weight gradient cuDNN cannot
 * take (asymmetric conv pads) fails create with ERT_E_UNSUPPORTED naming it,
 * while AUTO falls back to the CPU. A ViT-style block (LayerNorm, MatMul,
 * Gelu) is among the compared models.
 *
 * Without a GPU, or in a build without CUDA: returns 77 (ctest SKIPPED). */
#include "testutil.h"
#include "trainer_internal.h" /* ert_trainer_param_copy, ert_trainer_device */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef ERT_TEST_HAVE_CUDA
int main(void) { return ert_test_skip("train_cuda", "this build has no CUDA backend (ERT_CUDA=OFF)"); }
#else
#include <cuda_runtime_api.h>

#include "cuda_alloc_count.h"

static ert_context *ctx;
static ert_test_rng rng;
static int n_no_graph;
/* --cpu-selfcheck: the "CUDA" side runs on the CPU too (checks this file's
 * harness on a machine without a GPU). */
static ert_device gdev = ERT_DEVICE_CUDA;

static void on_log(void *user, ert_log_level level, const char *msg) {
    (void)user;
    if (level == ERT_LOG_INFO && strstr(msg, "graph capture not possible")) {
        n_no_graph++;
        printf("  backend: %s\n", msg);
    }
}

/* ------------------------------------------------------------------ models */

static int32_t weight(ert_builder *b, const char *nm, int nd, const int64_t *d, float s) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    float *w = malloc((size_t)n * 4 + 4);
    ert_test_fill(&rng, w, n, -s, s);
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, nm, ERT_DTYPE_F32, nd, d, w, &id), ctx);
    free(w);
    return id;
}

static int32_t constant(ert_builder *b, const char *nm, int64_t n, float v) {
    float *w = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) w[i] = v;
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, nm, ERT_DTYPE_F32, 1, &n, w, &id), ctx);
    free(w);
    return id;
}

static ert_model *finish(ert_builder *b, int32_t out) {
    CHECK_OK(ert_builder_output(b, out, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

/* x (N, 2, 11, 11) -> 5 classes (odd planes: the BatchNorm kernels' scalar
 * path, a MaxPool that drops the last row and column) */
static ert_model *cnn(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 2, 11, 11}, w1[4] = {8, 2, 3, 3}, w2[4] = {12, 8, 3, 3}, c12[1] = {12};
    int64_t fw[2] = {5, 12}, fb[1] = {5};
    int32_t x, c1, bn, r1, p1, a1, c2, r2, g, f, o;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    /* no bias before BatchNorm (as in real networks): its true gradient is 0,
     * and Adam would turn the rounding noise of either device into +-lr steps */
    CHECK_OK(ert_builder_conv2d(b, x, weight(b, "conv1.w", 4, w1, 0.5f), -1, 1, 1, 1, 1, &c1), ctx);
    int32_t bin[5] = {c1, constant(b, "bn1.scale", 8, 1.0f), constant(b, "bn1.bias", 8, 0.0f),
                      constant(b, "bn1.mean", 8, 0.0f), constant(b, "bn1.var", 8, 1.0f)};
    CHECK_OK(ert_builder_node(b, "BatchNormalization", "bn1", bin, 5, NULL, 0, &bn, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", bn, &r1), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, r1, 2, 2, 0, &p1), ctx); /* (N, 8, 5, 5) */
    int64_t k3[2] = {3, 3}, s1[2] = {1, 1}, pd[4] = {1, 1, 1, 1};
    ert_attr ap[3] = {ERT_ATTR_IS("kernel_shape", k3, 2), ERT_ATTR_IS("strides", s1, 2), ERT_ATTR_IS("pads", pd, 4)};
    CHECK_OK(ert_builder_node(b, "AveragePool", "avg", &p1, 1, ap, 3, &a1, 1), ctx);
    CHECK_OK(ert_builder_conv2d(b, a1, weight(b, "conv2.w", 4, w2, 0.3f), weight(b, "conv2.b", 1, c12, 0.1f), 2, 1, 1, 1,
                                &c2), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", c2, &r2), ctx);
    CHECK_OK(ert_builder_unary(b, "GlobalAveragePool", r2, &g), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", g, &f), ctx);
    CHECK_OK(ert_builder_linear(b, f, weight(b, "fc.w", 2, fw, 0.3f), weight(b, "fc.b", 1, fb, 0.1f), &o), ctx);
    return finish(b, o);
}

/* x (N, 6) -> 16 -> Sigmoid -> Dropout -> C outputs */
static ert_model *mlp(int classes) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[2] = {-1, 6}, w1[2] = {16, 6}, b1[1] = {16}, w2[2] = {classes, 16}, b2[1] = {classes};
    int32_t x, h, a, d, o, r;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, xd, &x), ctx);
    CHECK_OK(ert_builder_linear(b, x, weight(b, "fc1.w", 2, w1, 0.7f), weight(b, "fc1.b", 1, b1, 0.1f), &h), ctx);
    CHECK_OK(ert_builder_unary(b, "Sigmoid", h, &a), ctx);
    float ratio = 0.25f;
    CHECK_OK(ert_builder_weight(b, "ratio", ERT_DTYPE_F32, 0, NULL, &ratio, &r), ctx);
    int32_t in[2] = {a, r};
    CHECK_OK(ert_builder_node(b, "Dropout", "drop", in, 2, NULL, 0, &d, 1), ctx);
    CHECK_OK(ert_builder_linear(b, d, weight(b, "fc2.w", 2, w2, 0.4f), weight(b, "fc2.b", 1, b2, 0.1f), &o), ctx);
    return finish(b, o);
}

/* x (N, 8): h = relu(x W1^T + b1); y = (h W2^T + x) * s (s (1, 8), a
 * parameter broadcast over the batch); out = y W3^T + b3, 4 classes. */
static ert_model *residual(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[2] = {-1, 8}, w[2] = {8, 8}, b8[1] = {8}, sd[2] = {1, 8}, w3[2] = {4, 8}, b4[1] = {4};
    int32_t x, h, r, h2, y, ys, o;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, xd, &x), ctx);
    CHECK_OK(ert_builder_linear(b, x, weight(b, "fc1.w", 2, w, 0.5f), weight(b, "fc1.b", 1, b8, 0.1f), &h), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", h, &r), ctx);
    CHECK_OK(ert_builder_linear(b, r, weight(b, "fc2.w", 2, w, 0.5f), -1, &h2), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", h2, x, &y), ctx);
    CHECK_OK(ert_builder_binary(b, "Mul", y, weight(b, "scale", 2, sd, 1.0f), &ys), ctx);
    CHECK_OK(ert_builder_linear(b, ys, weight(b, "fc3.w", 2, w3, 0.4f), weight(b, "fc3.b", 1, b4, 0.1f), &o), ctx);
    return finish(b, o);
}

/* A ViT-style block: x (N, 5, 12) -> h = x + MatMul(LayerNorm(x), W1) ->
 * LayerNorm -> Gelu -> Flatten -> C classes. LayerNorm's gradient (dx,
 * dscale, dB) on CUDA. */
static ert_model *layernorm_model(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[3] = {-1, 5, 12}, w1[2] = {12, 12}, fw[2] = {3, 60}, c12[1] = {12};
    int32_t x, n1, m1, h, n2, gl, f, o;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 3, xd, &x), ctx);
    ert_attr ax[1] = {ERT_ATTR_I("axis", -1)};
    int32_t l1[3] = {x, weight(b, "ln1.g", 1, c12, 0.2f), weight(b, "ln1.b", 1, c12, 0.1f)};
    CHECK_OK(ert_builder_node(b, "LayerNormalization", "ln1", l1, 3, ax, 1, &n1, 1), ctx);
    CHECK_OK(ert_builder_binary(b, "MatMul", n1, weight(b, "w1", 2, w1, 0.3f), &m1), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", m1, x, &h), ctx);
    int32_t l2[3] = {h, weight(b, "ln2.g", 1, c12, 0.2f), weight(b, "ln2.b", 1, c12, 0.1f)};
    CHECK_OK(ert_builder_node(b, "LayerNormalization", "ln2", l2, 3, ax, 1, &n2, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Gelu", n2, &gl), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", gl, &f), ctx);
    CHECK_OK(ert_builder_linear(b, f, weight(b, "fc.w", 2, fw, 0.3f), -1, &o), ctx);
    return finish(b, o);
}

/* x (N, 2, 6, 6) -> Conv with asymmetric pads (cuDNN cannot take its weight
 * gradient) -> Flatten -> 2. */
static ert_model *asym_conv_model(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 2, 6, 6}, wd[4] = {3, 2, 3, 3}, fw[2] = {2, 108}, k3[2] = {3, 3}, pd[4] = {0, 0, 2, 2};
    int32_t x, c, f, o;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    ert_attr at[2] = {ERT_ATTR_IS("kernel_shape", k3, 2), ERT_ATTR_IS("pads", pd, 4)};
    int32_t in[2] = {x, weight(b, "conv.w", 4, wd, 0.3f)};
    CHECK_OK(ert_builder_node(b, "Conv", "conv", in, 2, at, 2, &c, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", c, &f), ctx);
    CHECK_OK(ert_builder_linear(b, f, weight(b, "fc.w", 2, fw, 0.3f), -1, &o), ctx);
    return finish(b, o);
}

/* ------------------------------------------------------------------ harness */

typedef struct pair {
    ert_trainer *cpu, *gpu;
} pair;

static bool make_pair(ert_model *m, const ert_trainer_options *base, int batch, pair *p) {
    ert_trainer_options o = *base;
    o.session.batch = batch;
    o.seed = 1234;
    p->cpu = p->gpu = NULL;
    o.session.device = ERT_DEVICE_CPU;
    CHECK_OK(ert_trainer_create(m, &o, &p->cpu), ctx);
    o.session.device = gdev;
    CHECK_OK(ert_trainer_create(m, &o, &p->gpu), ctx);
    if (p->gpu) CHECK(ert_trainer_device(p->gpu) == gdev, "CUDA trainer reports another device");
    return p->cpu && p->gpu;
}

static void free_pair(pair *p) {
    ert_trainer_free(p->cpu);
    ert_trainer_free(p->gpu);
}

/* Same fresh batch into both trainers. */
static void fill_batch(pair *p, int loss_kind, int classes) {
    ert_tensor_info xi, ti;
    void *xc, *xg, *tc, *tg;
    ert_trainer_input_info(p->cpu, 0, &xi);
    ert_trainer_target_info(p->cpu, &ti);
    ert_trainer_input_data(p->cpu, 0, &xc);
    ert_trainer_input_data(p->gpu, 0, &xg);
    ert_trainer_target_data(p->cpu, &tc);
    ert_trainer_target_data(p->gpu, &tg);
    int64_t nx = 1, nt = 1;
    for (int i = 0; i < xi.ndim; i++) nx *= xi.dims[i];
    for (int i = 0; i < ti.ndim; i++) nt *= ti.dims[i];
    ert_test_fill(&rng, xc, nx, -1.0f, 1.0f);
    memcpy(xg, xc, (size_t)nx * sizeof(float));
    if (loss_kind == ERT_LOSS_CROSS_ENTROPY) {
        for (int64_t i = 0; i < nt; i++) ((int64_t *)tc)[i] = ert_test_int(&rng, 0, classes - 1);
        memcpy(tg, tc, (size_t)nt * sizeof(int64_t));
    } else {
        ert_test_fill(&rng, tc, nt, loss_kind == ERT_LOSS_MSE ? -1.0f : 0.0f, 1.0f);
        memcpy(tg, tc, (size_t)nt * sizeof(float));
    }
}

/* max |a - b| / max(max |a|, floor) over every trainable parameter's value
 * (grads false) or gradient. */
static bool compare_params(const char *what, pair *p, bool grads, double tol) {
    bool ok = true;
    ert_trainer *c = p->cpu;
    for (int k = 0; k < c->n_params; k++) {
        const char *nm = c->g.t[c->params[k]].name;
        int64_t n = c->g.t[c->params[k]].nbytes / sizeof(float), n1 = 0, n2 = 0;
        float *a = malloc((size_t)n * sizeof(float) + 4), *g = malloc((size_t)n * sizeof(float) + 4);
        ert_status s1 = ert_trainer_param_copy(p->cpu, nm, grads ? NULL : a, grads ? a : NULL, &n1);
        ert_status s2 = ert_trainer_param_copy(p->gpu, nm, grads ? NULL : g, grads ? g : NULL, &n2);
        CHECK(s1 == ERT_OK && s2 == ERT_OK && n1 == n && n2 == n, "%s: cannot read '%s' (%s)", what, nm,
              ert_last_error(ctx));
        if (s1 == ERT_OK && s2 == ERT_OK) {
            double mx = 1e-3, worst = 0;
            int64_t wi = 0;
            for (int64_t i = 0; i < n; i++) mx = fabs(a[i]) > mx ? fabs(a[i]) : mx;
            for (int64_t i = 0; i < n; i++) {
                double d = fabs((double)a[i] - g[i]) / mx;
                if (!(d <= worst)) worst = d, wi = i; /* NaN counts as worst */
            }
            if (!(worst <= tol)) {
                ok = false;
                CHECK(false, "%s: %s of '%s' differ: rel %.3g at %lld (cpu %.8g cuda %.8g, max %.3g)", what,
                      grads ? "gradient" : "value", nm, worst, (long long)wi, (double)a[wi], (double)g[wi], mx);
            }
        }
        free(a);
        free(g);
    }
    return ok;
}

static bool close_rel(float a, float b, double tol) { return fabs((double)a - b) <= tol * (fabs((double)a) > 1 ? fabs((double)a) : 1); }

/* One step: loss and every gradient; then `steps` - 1 more, the values. */
static void check_model(const char *name, ert_model *m, const ert_trainer_options *o, int batch, int classes,
                        int steps, double vtol) {
    pair p;
    if (!m) return;
    if (!make_pair(m, o, batch, &p)) {
        free_pair(&p);
        return;
    }
    char what[160];
    for (int s = 0; s < steps; s++) {
        fill_batch(&p, o->loss.kind, classes);
        float lc = 0, lg = 0;
        ert_status s1 = ert_trainer_step(p.cpu, &lc), s2 = ert_trainer_step(p.gpu, &lg);
        CHECK(s1 == ERT_OK && s2 == ERT_OK, "%s step %d: cpu %s, cuda %s (%s)", name, s, ert_status_str(s1),
              ert_status_str(s2), ert_last_error(ctx));
        if (s1 || s2) break;
        snprintf(what, sizeof what, "%s step %d", name, s);
        CHECK(close_rel(lc, lg, 1e-4), "%s: loss cpu %.8g cuda %.8g", what, (double)lc, (double)lg);
        if (s == 0) compare_params(what, &p, true, 1e-4);
    }
    snprintf(what, sizeof what, "%s after %d steps", name, steps);
    compare_params(what, &p, false, vtol);
    /* eval: running statistics, no dropout */
    fill_batch(&p, o->loss.kind, classes);
    float ec = 0, eg = 0;
    CHECK_OK(ert_trainer_eval(p.cpu, &ec), ctx);
    CHECK_OK(ert_trainer_eval(p.gpu, &eg), ctx);
    CHECK(close_rel(ec, eg, 1e-4), "%s: eval loss cpu %.8g cuda %.8g", name, (double)ec, (double)eg);
    printf("  %-44s compared over %d steps\n", name, steps);
    free_pair(&p);
}

static ert_trainer_options opts(int loss, int optim) {
    ert_trainer_options o = {0};
    o.loss.kind = loss;
    o.optim.kind = optim;
    o.optim.lr = optim == ERT_OPTIM_SGD ? 0.05f : 3e-3f;
    return o;
}

/* ------------------------------------------------------------------ cases */

static void equivalence(void) {
    ert_model *m = cnn();
    const char *onames[] = {"SGD+momentum", "SGD+nesterov+wd", "Adam+wd", "AdamW+clip+cosine"};
    for (int k = 0; k < 4; k++) {
        ert_trainer_options o = opts(ERT_LOSS_CROSS_ENTROPY, k == 0 || k == 1 ? ERT_OPTIM_SGD : k == 2 ? ERT_OPTIM_ADAM : ERT_OPTIM_ADAMW);
        if (k < 2) o.optim.momentum = 0.9f;
        if (k == 1) o.optim.nesterov = 1, o.optim.weight_decay = 1e-3f;
        if (k == 2) o.optim.weight_decay = 1e-3f;
        if (k == 3) {
            o.optim.weight_decay = 0.05f;
            o.optim.clip_grad_norm = 0.5f;
            o.lr.kind = ERT_LR_COSINE;
            o.lr.warmup_steps = 3;
            o.lr.total_steps = 17;
        }
        char nm[96];
        snprintf(nm, sizeof nm, "cnn CE %s", onames[k]);
        check_model(nm, m, &o, 16, 5, 20, 1e-3);
    }
    ert_model_free(m);

    float cw[3] = {0.5f, 2.0f, 1.0f};
    m = mlp(3);
    ert_trainer_options o = opts(ERT_LOSS_CROSS_ENTROPY, ERT_OPTIM_ADAM);
    o.loss.label_smoothing = 0.1f;
    o.loss.class_weights = cw;
    o.loss.n_class_weights = 3;
    check_model("mlp CE smoothing+class weights, Adam", m, &o, 24, 3, 20, 1e-3);
    ert_model_free(m);
    m = mlp(5);
    o = opts(ERT_LOSS_MSE, ERT_OPTIM_SGD);
    o.optim.momentum = 0.5f;
    check_model("mlp MSE, SGD+momentum", m, &o, 24, 5, 20, 1e-3);
    o = opts(ERT_LOSS_BCE_LOGITS, ERT_OPTIM_ADAMW);
    check_model("mlp BCE-with-logits, AdamW", m, &o, 24, 5, 20, 1e-3);
    ert_model_free(m);
    m = residual();
    o = opts(ERT_LOSS_CROSS_ENTROPY, ERT_OPTIM_SGD);
    check_model("residual Add + broadcast Mul, SGD", m, &o, 20, 4, 20, 1e-3);
    ert_model_free(m);
    m = layernorm_model();
    o = opts(ERT_LOSS_CROSS_ENTROPY, ERT_OPTIM_ADAMW);
    check_model("ViT-style LayerNorm + MatMul + Gelu, AdamW", m, &o, 12, 3, 20, 1e-3);
    ert_model_free(m);
}

static void no_alloc_and_nan(void) {
    ert_model *m = cnn();
    ert_trainer_options o = opts(ERT_LOSS_CROSS_ENTROPY, ERT_OPTIM_ADAM);
    o.session.device = gdev;
    o.session.batch = 32;
    ert_trainer *t = NULL;
    CHECK_OK(ert_trainer_create(m, &o, &t), ctx);
    if (!t) {
        ert_model_free(m);
        return;
    }
    ert_memory_report r;
    ert_trainer_memory(t, &r);
    printf("  cuda trainer arena %zu bytes (weights %zu, grads %zu, optimizer %zu, io %zu, activations %zu)\n",
           r.total_bytes, r.weights_bytes, r.gradients_bytes, r.optimizer_bytes, r.io_bytes, r.activations_bytes);
    float *x;
    int64_t *y;
    ert_trainer_input_data(t, 0, (void **)&x);
    ert_trainer_target_data(t, (void **)&y);
    int graphs_before = n_no_graph;
    long before = n_allocs;
    /* a learnable task: the class sets the two channels' mean brightness
     * (channel 0: 0.3 * (y % 3), channel 1: 0.3 * (y / 3)) under noise; the
     * loss is averaged over the first and the last 10 steps */
    float loss = 0, first = 0, last = 0;
    for (int s = 0; s < 100; s++) {
        for (int i = 0; i < 32; i++) {
            y[i] = ert_test_int(&rng, 0, 4);
            for (int j = 0; j < 2 * 121; j++)
                x[i * 242 + j] = (float)ert_test_uniform(&rng, -0.3, 0.3) +
                                 0.3f * (float)(j < 121 ? y[i] % 3 : y[i] / 3);
        }
        ert_status st = ert_trainer_step(t, &loss);
        if (st != ERT_OK) {
            CHECK(false, "step %d: %s", s, ert_last_error(ctx));
            break;
        }
        if (s < 10) first += loss / 10;
        if (s >= 90) last += loss / 10;
    }
    CHECK(n_allocs == before, "%ld device/pinned allocations during 100 CUDA training steps (must be 0)",
          n_allocs - before);
    CHECK(n_no_graph == graphs_before, "the training step was not captured as a CUDA graph");
    CHECK(last < 0.8f * first, "100 Adam steps did not lower the loss by 20%% (mean of the first 10 %g, last 10 %g)",
          (double)first, (double)last);
    CHECK(ert_trainer_step_count(t) == 100, "step count %lld", (long long)ert_trainer_step_count(t));
    printf("  100 CUDA steps: mean loss %.4f (first 10) -> %.4f (last 10), %ld allocations\n", (double)first,
           (double)last, n_allocs - before);

    /* NaN in the input: reported, the update skipped on device, step count kept */
    const char *pn = t->g.t[t->params[0]].name;
    int64_t n = t->g.t[t->params[0]].nbytes / 4, got = 0;
    float *w0 = malloc((size_t)n * 4), *w1 = malloc((size_t)n * 4);
    ert_trainer_param_copy(t, pn, w0, NULL, &got);
    x[5] = NAN;
    ert_status st = ert_trainer_step(t, &loss);
    CHECK(st == ERT_E_ARG && strstr(ert_last_error(ctx), "skipped"), "NaN step: %s (%s)", ert_status_str(st),
          ert_last_error(ctx));
    ert_trainer_param_copy(t, pn, w1, NULL, &got);
    CHECK(memcmp(w0, w1, (size_t)n * 4) == 0, "a skipped step changed '%s'", pn);
    CHECK(ert_trainer_step_count(t) == 100, "a skipped step counted");
    x[5] = 0.0f;
    CHECK_OK(ert_trainer_step(t, &loss), ctx);
    CHECK(ert_trainer_step_count(t) == 101, "the step after a skipped one did not count");
    free(w0);
    free(w1);
    ert_trainer_free(t);
    ert_model_free(m);
}

static void bad_input(void) {
    if (gdev != ERT_DEVICE_CUDA) return;
    ert_model *m = asym_conv_model();
    if (!m) return;
    ert_trainer_options o = opts(ERT_LOSS_CROSS_ENTROPY, ERT_OPTIM_SGD);
    o.session.batch = 4;
    o.session.device = ERT_DEVICE_CUDA;
    ert_trainer *t = NULL;
    ert_status st = ert_trainer_create(m, &o, &t);
    CHECK(st == ERT_E_UNSUPPORTED && strstr(ert_last_error(ctx), "ConvGradWeight"),
          "asymmetric-pad conv on CUDA: %s (%s), want ERT_E_UNSUPPORTED naming ConvGradWeight", ert_status_str(st),
          ert_last_error(ctx));
    printf("  asymmetric-pad conv on CUDA: %s\n", ert_last_error(ctx));
    ert_trainer_free(t);
    t = NULL;
    o.session.device = ERT_DEVICE_AUTO;
    CHECK_OK(ert_trainer_create(m, &o, &t), ctx);
    CHECK(t && ert_trainer_device(t) == ERT_DEVICE_CPU, "AUTO with a gradient CUDA cannot take did not fall back to the CPU");
    ert_trainer_free(t);
    ert_model_free(m);
}

int main(int argc, char **argv) {
    int n = 0;
    if (argc > 1 && !strcmp(argv[1], "--cpu-selfcheck")) gdev = ERT_DEVICE_CPU;
    cudaError_t e = gdev == ERT_DEVICE_CPU ? cudaSuccess : cudaGetDeviceCount(&n);
    if (gdev == ERT_DEVICE_CUDA && (e != cudaSuccess || n == 0))
        return ert_test_skip("train_cuda", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    ert_test_rng_init(&rng, "train_cuda");
    ert_context_options co = {.log = on_log, .log_level = ERT_LOG_INFO};
    if (ert_context_create(&co, &ctx) != ERT_OK) return 1;
    equivalence();
    no_alloc_and_nan();
    bad_input();
    ert_context_free(ctx);
    return ert_test_finish("train_cuda");
}
#endif
