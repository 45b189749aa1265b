/* Frozen prefix planned like inference (runtime/train/frozen.c), CPU:
 *   - head-only training of a small CNN (conv+BN+relu blocks, BN frozen):
 *     its BatchNorms are folded into the convs, the Relus fused, the
 *     residual Add (+ Relu) made the last conv's epilogue; the loss
 *     and the head's gradients equal those of the same model trained in full
 *     (nothing folded there: the conv weights train) on the same batch
 *     (rel 1e-4), and its arena is smaller;
 *   - a ResNet-18-shaped model (random weights, batch 8, 224x224), planned
 *     only: head-only fine-tuning needs at most 0.30x the arena of full
 *     training (0.25x, the goal, before full training stopped
 *     saving Relu inputs). */
#include "testutil.h"
#include "trainer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static ert_test_rng rng;
static int n_w;

static int32_t weight(ert_builder *b, int nd, const int64_t *d, float s, float base) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    float *w = malloc((size_t)n * 4 + 4);
    ert_test_fill(&rng, w, n, base - s, base + s);
    char nm[32];
    snprintf(nm, sizeof nm, "w%d", n_w++);
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, nm, ERT_DTYPE_F32, nd, d, w, &id), ctx);
    free(w);
    return id;
}

/* conv (no bias) + BN (random frozen statistics) [+ relu] */
static int32_t cbr(ert_builder *b, int32_t x, int64_t cin, int64_t cout, int k, int stride, bool relu) {
    int64_t wd[4] = {cout, cin, k, k}, c[1] = {cout};
    int32_t y, z;
    CHECK_OK(ert_builder_conv2d(b, x, weight(b, 4, wd, 1.0f / sqrtf((float)(cin * k * k)), 0), -1, stride, k / 2, 1,
                                1, &y), ctx);
    int32_t in[5] = {y, weight(b, 1, c, 0.2f, 1.0f), weight(b, 1, c, 0.1f, 0.0f), weight(b, 1, c, 0.1f, 0.0f),
                     weight(b, 1, c, 0.2f, 1.0f)};
    char nm[32];
    snprintf(nm, sizeof nm, "bn%d", n_w);
    CHECK_OK(ert_builder_node(b, "BatchNormalization", nm, in, 5, NULL, 0, &z, 1), ctx);
    if (!relu) return z;
    CHECK_OK(ert_builder_unary(b, "Relu", z, &y), ctx);
    return y;
}

static ert_model *finish(ert_builder *b, int32_t x, int64_t c, int64_t classes) {
    int32_t g, f, o;
    int64_t fw[2] = {classes, c}, fb[1] = {classes};
    CHECK_OK(ert_builder_unary(b, "GlobalAveragePool", x, &g), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", g, &f), ctx);
    int32_t w = weight(b, 2, fw, 0.2f, 0), bias = weight(b, 1, fb, 0.1f, 0);
    CHECK_OK(ert_builder_linear(b, f, w, bias, &o), ctx);
    CHECK_OK(ert_builder_output(b, o, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

static ert_model *small(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 3, 12, 12};
    int32_t x, p, s, r;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, cbr(b, x, 3, 8, 3, 1, true), 2, 2, 0, &p), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", cbr(b, cbr(b, p, 8, 8, 3, 1, true), 8, 8, 3, 1, false), p, &s), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", s, &r), ctx);
    return finish(b, r, 8, 4);
}

static ert_model *resnet18(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 3, 224, 224};
    int32_t x, h;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, cbr(b, x, 3, 64, 7, 2, true), 3, 2, 1, &h), ctx);
    int64_t c = 64;
    for (int l = 0; l < 4; l++)
        for (int k = 0; k < 2; k++) {
            int64_t co = 64 << l;
            int st = l > 0 && k == 0 ? 2 : 1;
            int32_t y = cbr(b, cbr(b, h, c, co, 3, st, true), co, co, 3, 1, false), sc = h, s;
            if (st != 1 || co != c) sc = cbr(b, h, c, co, 1, st, false);
            CHECK_OK(ert_builder_binary(b, "Add", y, sc, &s), ctx);
            CHECK_OK(ert_builder_unary(b, "Relu", s, &h), ctx);
            c = co;
        }
    return finish(b, h, 512, 1000);
}

static int count_op(const ert_trainer *t, ert_op op, bool relu_fused) {
    int n = 0;
    for (int k = 0; k < t->fwd_end; k++)
        n += t->g.n[k].op == op && (!relu_fused || t->g.n[k].params.conv.act.kind == ERT_ACT_RELU);
    return n;
}

/* One step of `full` and `head` on the same fresh batch (nx floats per
 * image, classes 0..3): the losses agree (rel 1e-5) and so do the gradients
 * of the two named head tensors (1e-4 of their largest magnitude). */
static void same_step(ert_trainer *full, ert_trainer *head, int batch, int64_t nx, const char *w, const char *bias,
                      const char *what) {
    float *xf, *xh;
    int64_t *yf, *yh;
    ert_trainer_input_data(full, 0, (void **)&xf);
    ert_trainer_input_data(head, 0, (void **)&xh);
    ert_trainer_target_data(full, (void **)&yf);
    ert_trainer_target_data(head, (void **)&yh);
    ert_test_fill(&rng, xf, batch * nx, -1, 1);
    memcpy(xh, xf, (size_t)(batch * nx) * sizeof(float));
    for (int i = 0; i < batch; i++) yf[i] = yh[i] = ert_test_int(&rng, 0, 3);
    float lf = 0, lh = 0;
    CHECK_OK(ert_trainer_step(full, &lf), ctx);
    CHECK_OK(ert_trainer_step(head, &lh), ctx);
    CHECK(fabsf(lf - lh) <= 1e-5f * fabsf(lf), "loss full %.7g, head-only (%s) %.7g", (double)lf, what, (double)lh);
    const char *names[2] = {w, bias};
    for (int k = 0; k < 2; k++) {
        float a[64], g[64];
        int64_t na = 0, ng = 0;
        CHECK_OK(ert_trainer_param_copy(full, names[k], NULL, a, &na), ctx);
        CHECK_OK(ert_trainer_param_copy(head, names[k], NULL, g, &ng), ctx);
        double mx = 1e-6, worst = 0;
        for (int64_t i = 0; i < na; i++) mx = fabs(a[i]) > mx ? fabs(a[i]) : mx;
        for (int64_t i = 0; i < na && na == ng; i++) worst = fmax(worst, fabs((double)a[i] - g[i]) / mx);
        CHECK(na == ng && na > 0 && worst <= 1e-4, "gradient of '%s': full vs head-only (%s) rel %.3g", names[k], what,
              worst);
    }
}

/* Cross-entropy, SGD at lr 0.1, the given batch and BatchNorm mode. */
static ert_trainer_options ce_sgd(int batch, ert_bn_mode bn) {
    ert_trainer_options o = {0};
    o.session.batch = batch;
    o.loss.kind = ERT_LOSS_CROSS_ENTROPY;
    o.optim.kind = ERT_OPTIM_SGD;
    o.optim.lr = 0.1f;
    o.bn = bn;
    return o;
}

static void small_case(void) {
    ert_model *m = small();
    if (!m) return;
    ert_trainer_options o = ce_sgd(6, ERT_BN_FROZEN);
    ert_trainer *full = NULL, *head = NULL;
    CHECK_OK(ert_trainer_create(m, &o, &full), ctx);
    o.trainable = ERT_TRAIN_PATTERN;
    o.pattern = "w1[56]"; /* the fc weight and bias: the last two weights made */
    CHECK_OK(ert_trainer_create(m, &o, &head), ctx);
    if (!full || !head) goto out;
    CHECK(ert_trainer_n_trainable(head) == 2, "head-only trains %d tensors", ert_trainer_n_trainable(head));
    CHECK(count_op(full, ERT_OP_BATCHNORM, false) == 3, "full training: %d BatchNorms, want 3 (no folding)",
          count_op(full, ERT_OP_BATCHNORM, false));
    CHECK(count_op(head, ERT_OP_BATCHNORM, false) == 0 && count_op(head, ERT_OP_RELU, false) == 0 &&
              count_op(head, ERT_OP_ADD, false) == 0 && count_op(head, ERT_OP_CONV, true) == 3,
          "head-only: %d BatchNorms, %d Relus, %d Adds, %d conv+relu (want 0, 0, 0: the block's Add and Relu are "
          "the last conv's residual epilogue, 3)",
          count_op(head, ERT_OP_BATCHNORM, false), count_op(head, ERT_OP_RELU, false),
          count_op(head, ERT_OP_ADD, false), count_op(head, ERT_OP_CONV, true));
    same_step(full, head, 6, 3 * 144, "w15", "w16", "folded");
    ert_memory_report rf, rh;
    ert_trainer_memory(full, &rf);
    ert_trainer_memory(head, &rh);
    CHECK(rh.activations_bytes < rf.activations_bytes, "head-only activations %zu vs full %zu", rh.activations_bytes,
          rf.activations_bytes);
    printf("  small CNN: head-only (BN folded, relu fused) loss and head gradients = full training's; arena %zu vs "
           "%zu bytes\n", rh.total_bytes, rf.total_bytes);
out:
    ert_trainer_free(full);
    ert_trainer_free(head);
    ert_model_free(m);
}

/* A stem big enough to be chunked (runtime/train/stem.c chunk_stem: a chain
 * tensor of 4 MiB or more): x (8, 3, 96, 96) -> conv 3->64 /2 + BN + relu
 * (8x64x48x48 f32: 4.7 MB) -> maxpool 3/2 -> conv + BN + relu -> GAP -> fc.
 * Head-only (fc) vs full training with the same frozen BatchNorms: the
 * head-only trainer runs the stem in batch chunks (one Concat), full
 * training cannot (its conv is trainable); the loss and the fc gradients
 * agree, and the head-only activations are a fraction of full training's. */
static void stem_chunk_case(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 3, 96, 96};
    int32_t x, p;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, cbr(b, x, 3, 64, 3, 2, true), 3, 2, 1, &p), ctx);
    ert_model *m = finish(b, cbr(b, p, 64, 16, 3, 1, true), 16, 4);
    if (!m) return;
    char fcw[16], fcb[16];
    snprintf(fcw, sizeof fcw, "w%d", n_w - 2);
    snprintf(fcb, sizeof fcb, "w%d", n_w - 1);
    ert_trainer_options o = ce_sgd(8, ERT_BN_FROZEN);
    ert_trainer *full = NULL, *head = NULL;
    CHECK_OK(ert_trainer_create(m, &o, &full), ctx);
    o.trainable = ERT_TRAIN_LAST_N;
    o.last_n = 1;
    CHECK_OK(ert_trainer_create(m, &o, &head), ctx);
    if (!full || !head) goto out;
    int concat_h = 0, concat_f = 0;
    for (int k = 0; k < head->fwd_end; k++) concat_h += head->g.n[k].op == ERT_OP_CONCAT;
    for (int k = 0; k < full->fwd_end; k++) concat_f += full->g.n[k].op == ERT_OP_CONCAT;
    CHECK(concat_h == 1 && concat_f == 0, "stem chunked: head-only %d Concat (want 1), full %d (want 0)", concat_h,
          concat_f);
    same_step(full, head, 8, 3 * 96 * 96, fcw, fcb, "chunked stem");
    ert_memory_report rf, rh;
    ert_trainer_memory(full, &rf);
    ert_trainer_memory(head, &rh);
    printf("  stem in 4 batch chunks: head-only loss and fc gradients = full training's; activations %zu vs full "
           "%zu bytes\n", rh.activations_bytes, rf.activations_bytes);
    CHECK(rh.activations_bytes * 3 < rf.activations_bytes, "head-only activations %zu vs full %zu",
          rh.activations_bytes, rf.activations_bytes);
out:
    ert_trainer_free(full);
    ert_trainer_free(head);
    ert_model_free(m);
}

static int count_replays(const ert_trainer *t) {
    int n = 0;
    for (int k = t->fwd_end; k < t->g.nn; k++) n += t->g.n[k].op == ERT_OP_BATCHNORM_TRAIN && t->g.n[k].params.grad.replay;
    return n;
}

/* BatchNorm (batch statistics) + Relu fused (runtime/train/frozen.c fuse_bn_relu)
 * vs the two nodes (bn_relu_unfused): the same math in the same order on the
 * CPU, so the loss and every gradient agree exactly, two steps running (the
 * second also checks the running statistics feed nothing wrong).
 * recompute: the default trainer (BatchNorm outputs the backward reads are
 * recomputed there, trainer.c recompute) vs keep_bn_outputs: exactly equal too,
 * with replay nodes in the backward and fewer bytes saved. */
static void bn_relu_case(bool recompute) {
    ert_model *m = small();
    if (!m) return;
    ert_trainer_options o = ce_sgd(6, ERT_BN_TRAIN);
    o.optim.momentum = 0.9f;
    ert_trainer *tf = NULL, *tu = NULL;
    CHECK_OK(ert_trainer_create(m, &o, &tf), ctx);
    if (recompute) o.keep_bn_outputs = 1;
    else o.bn_relu_unfused = 1;
    CHECK_OK(ert_trainer_create(m, &o, &tu), ctx);
    if (!tf || !tu) goto out;
    if (recompute) {
        ert_memory_report rf, ru;
        ert_trainer_memory(tf, &rf);
        ert_trainer_memory(tu, &ru);
        CHECK(count_replays(tf) >= 2 && count_replays(tu) == 0 && rf.saved_bytes < ru.saved_bytes,
              "recompute: %d replays (saved %zu bytes), kept: %d replays (saved %zu)", count_replays(tf),
              rf.saved_bytes, count_replays(tu), ru.saved_bytes);
    } else
        CHECK(count_op(tf, ERT_OP_RELU, false) == 1 && count_op(tu, ERT_OP_RELU, false) == 3,
              "Relus fused %d (want 1: the block end's, after an Add), unfused %d (want 3)",
              count_op(tf, ERT_OP_RELU, false), count_op(tu, ERT_OP_RELU, false));
    for (int step = 0; step < 2; step++) {
        float *xf, *xu;
        int64_t *yf, *yu;
        ert_trainer_input_data(tf, 0, (void **)&xf);
        ert_trainer_input_data(tu, 0, (void **)&xu);
        ert_trainer_target_data(tf, (void **)&yf);
        ert_trainer_target_data(tu, (void **)&yu);
        ert_test_fill(&rng, xf, 6 * 3 * 144, -1, 1);
        memcpy(xu, xf, 6 * 3 * 144 * sizeof(float));
        for (int i = 0; i < 6; i++) yf[i] = yu[i] = ert_test_int(&rng, 0, 3);
        float lf = 0, lu = 0;
        CHECK_OK(ert_trainer_step(tf, &lf), ctx);
        CHECK_OK(ert_trainer_step(tu, &lu), ctx);
        CHECK(lf == lu, "step %d: loss fused %.9g, unfused %.9g", step, (double)lf, (double)lu);
        for (int k = 0; k < n_w; k++) {
            char nm[32];
            static float a[4096], g[4096];
            int64_t na = 4096, ng = 4096;
            snprintf(nm, sizeof nm, "w%d", k);
            if (ert_trainer_param_copy(tf, nm, NULL, NULL, &na) != ERT_OK || na > 4096) continue; /* running stats */
            CHECK_OK(ert_trainer_param_copy(tf, nm, NULL, a, &na), ctx);
            CHECK_OK(ert_trainer_param_copy(tu, nm, NULL, g, &ng), ctx);
            CHECK(na == ng && !memcmp(a, g, (size_t)na * sizeof(float)), "step %d: gradient of '%s' fused != unfused",
                  step, nm);
        }
    }
    printf("  %s\n", recompute ? "BatchNorm outputs recomputed in the backward: loss and gradients equal the "
                                   "trainer keeping them"
                                 : "BatchNorm+Relu fused: loss and gradients equal the unfused trainer's");
out:
    ert_trainer_free(tf);
    ert_trainer_free(tu);
    ert_model_free(m);
}

static void resnet_case(void) {
    ert_model *m = resnet18();
    if (!m) return;
    ert_trainer_options o = ce_sgd(8, ERT_BN_TRAIN); /* plans only: lr does not matter */
    o.optim.momentum = 0.9f;
    ert_memory_report full, head;
    CHECK_OK(ert_trainer_plan(m, &o, &full), ctx);
    o.trainable = ERT_TRAIN_LAST_N;
    o.last_n = 1;
    o.bn = ERT_BN_FROZEN;
    CHECK_OK(ert_trainer_plan(m, &o, &head), ctx);
    double r = (double)head.total_bytes / (double)full.total_bytes;
    /* The goal: head-only <= 0.25x of full training's arena. Full
     * training keeps neither the Relu inputs nor the BatchNorm outputs
     * (recomputed in the backward); head-only reads the frozen filters in
     * place (the BatchNorm folded into a per-channel scale, no copy) and runs
     * the stem in batch chunks. */
    CHECK(r <= 0.25, "ResNet-18 head-only arena %zu vs full %zu: %.3fx (goal <= 0.25x)", head.total_bytes,
          full.total_bytes, r);
    printf("  ResNet-18 b8 plan: full %.1f MiB (activations %.1f, weights %.1f), head-only %.1f MiB (activations %.1f, "
           "weights %.1f, io %.1f): %.3fx\n",
           full.total_bytes / 1048576.0, full.activations_bytes / 1048576.0, full.weights_bytes / 1048576.0,
           head.total_bytes / 1048576.0, head.activations_bytes / 1048576.0, head.weights_bytes / 1048576.0,
           head.io_bytes / 1048576.0, r);
    ert_model_free(m);
}

int main(void) {
    ert_test_rng_init(&rng, "train_frozen");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    small_case();
    bn_relu_case(false);
    bn_relu_case(true);
    stem_chunk_case();
    resnet_case();
    ert_context_free(ctx);
    return ert_test_finish("train_frozen");
}
