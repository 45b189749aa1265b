/* Fine-tuning an ONNX model.
 *
 * The ONNX file is made here with the test protobuf encoder, the way an
 * exporter writes a small CNN: Conv, BatchNormalization, Relu, MaxPool,
 * Conv, Relu, GlobalAveragePool, a Shape/Gather/Unsqueeze/Concat/Reshape
 * flatten chain (folded by the trainer: constants, not parameters) and
 * Gemm(transB=1). Steps:
 *   1. load it (ert_model_load_memory), train everything (BN on batch
 *      statistics) on 8x8 bar images (horizontal / vertical / diagonal);
 *   2. export the weights, then train only the head (last parametrised
 *      layer, BN frozen) on a new task (labels rotated by one): held-out
 *      accuracy on the new task rises from near 0, the loss falls, and the
 *      arena is much smaller than for full training;
 *   3. save the fine-tuned model as ONNX, load it back with the ONNX loader:
 *      an inference session gives the trainer's output. */
#define _POSIX_C_SOURCE 200809L
#include "onnx_enc.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ert_context *ctx;
static ert_test_rng rng;

static pbuf init(const char *name, int nd, const int64_t *d, float lo, float hi) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    float *w = malloc((size_t)n * 4);
    ert_test_fill(&rng, w, n, lo, hi);
    pbuf t = ox_tensor(name, OX_FLOAT, nd, d, w, (size_t)n * 4);
    free(w);
    return t;
}

static pbuf onnx_cnn(void) {
    oxg g = {0};
    int64_t xd[4] = {-1, 1, 8, 8}, w1[4] = {8, 1, 3, 3}, c8[1] = {8}, w2[4] = {12, 8, 3, 3}, c12[1] = {12};
    int64_t w3[2] = {3, 12}, c3[1] = {3}, one[1] = {1}, yd[2] = {-1, 3};
    ox_g_input(&g, ox_value_info("x", OX_FLOAT, 4, xd));
    ox_g_init(&g, init("conv1.weight", 4, w1, -0.5f, 0.5f));
    ox_g_init(&g, init("conv1.bias", 1, c8, -0.1f, 0.1f));
    ox_g_init(&g, init("bn1.weight", 1, c8, 0.8f, 1.2f));
    ox_g_init(&g, init("bn1.bias", 1, c8, -0.1f, 0.1f));
    ox_g_init(&g, init("bn1.running_mean", 1, c8, -0.1f, 0.1f));
    ox_g_init(&g, init("bn1.running_var", 1, c8, 0.9f, 1.1f));
    ox_g_init(&g, init("conv2.weight", 4, w2, -0.3f, 0.3f));
    ox_g_init(&g, init("conv2.bias", 1, c12, -0.1f, 0.1f));
    ox_g_init(&g, init("fc.weight", 2, w3, -0.3f, 0.3f));
    ox_g_init(&g, init("fc.bias", 1, c3, -0.1f, 0.1f));
    int64_t zero = 0, minus1 = -1;
    ox_g_init(&g, ox_tensor("idx0", OX_INT64, 0, NULL, &zero, 8));
    ox_g_init(&g, ox_tensor("axes0", OX_INT64, 1, one, &zero, 8));
    ox_g_init(&g, ox_tensor("minus1", OX_INT64, 1, one, &minus1, 8));
    int64_t k3[2] = {3, 3}, p1[4] = {1, 1, 1, 1}, k2[2] = {2, 2};
    pbuf a1[2] = {ox_attr_is("kernel_shape", k3, 2, 1), ox_attr_is("pads", p1, 4, 1)};
    ox_g_node(&g, ox_node("Conv", "conv1", NULL, (const char *[]){"x", "conv1.weight", "conv1.bias", NULL},
                          (const char *[]){"c1", NULL}, a1, 2));
    pbuf abn[1] = {ox_attr_f("epsilon", 1e-5f)};
    ox_g_node(&g, ox_node("BatchNormalization", "bn1", NULL,
                          (const char *[]){"c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var", NULL},
                          (const char *[]){"b1", NULL}, abn, 1));
    ox_g_node(&g, ox_node("Relu", "relu1", NULL, (const char *[]){"b1", NULL}, (const char *[]){"r1", NULL}, NULL, 0));
    pbuf ap[2] = {ox_attr_is("kernel_shape", k2, 2, 1), ox_attr_is("strides", k2, 2, 1)};
    ox_g_node(&g, ox_node("MaxPool", "pool1", NULL, (const char *[]){"r1", NULL}, (const char *[]){"p1", NULL}, ap, 2));
    pbuf a2[2] = {ox_attr_is("kernel_shape", k3, 2, 1), ox_attr_is("pads", p1, 4, 1)};
    ox_g_node(&g, ox_node("Conv", "conv2", NULL, (const char *[]){"p1", "conv2.weight", "conv2.bias", NULL},
                          (const char *[]){"c2", NULL}, a2, 2));
    ox_g_node(&g, ox_node("Relu", "relu2", NULL, (const char *[]){"c2", NULL}, (const char *[]){"r2", NULL}, NULL, 0));
    ox_g_node(&g, ox_node("GlobalAveragePool", "gap", NULL, (const char *[]){"r2", NULL}, (const char *[]){"g", NULL}, NULL, 0));
    ox_g_node(&g, ox_node("Shape", "shape", NULL, (const char *[]){"g", NULL}, (const char *[]){"gs", NULL}, NULL, 0));
    pbuf ag[1] = {ox_attr_i("axis", 0)};
    ox_g_node(&g, ox_node("Gather", "gather", NULL, (const char *[]){"gs", "idx0", NULL}, (const char *[]){"n", NULL}, ag, 1));
    ox_g_node(&g, ox_node("Unsqueeze", "unsq", NULL, (const char *[]){"n", "axes0", NULL}, (const char *[]){"n1", NULL}, NULL, 0));
    pbuf ac[1] = {ox_attr_i("axis", 0)};
    ox_g_node(&g, ox_node("Concat", "cat", NULL, (const char *[]){"n1", "minus1", NULL}, (const char *[]){"shp", NULL}, ac, 1));
    ox_g_node(&g, ox_node("Reshape", "flatten", NULL, (const char *[]){"g", "shp", NULL}, (const char *[]){"f", NULL}, NULL, 0));
    pbuf agm[1] = {ox_attr_i("transB", 1)};
    ox_g_node(&g, ox_node("Gemm", "fc", NULL, (const char *[]){"f", "fc.weight", "fc.bias", NULL},
                          (const char *[]){"logits", NULL}, agm, 1));
    ox_g_output(&g, ox_value_info("logits", OX_FLOAT, 2, yd));
    return ox_model(&g, 13);
}

static void bars_batch(float *x, int64_t *y, int n, int shift) {
    for (int i = 0; i < n; i++) {
        float *im = x + i * 64;
        for (int p = 0; p < 64; p++) im[p] = (float)ert_test_uniform(&rng, -0.3, 0.3);
        int k = ert_test_int(&rng, 0, 2), pos = ert_test_int(&rng, 1, 6);
        for (int j = 0; j < 8; j++) {
            if (k == 0) im[pos * 8 + j] += 1.0f;
            else if (k == 1) im[j * 8 + pos] += 1.0f;
            else im[j * 8 + j] += 1.0f;
        }
        y[i] = (k + shift) % 3;
    }
}

static double accuracy(ert_trainer *t, int shift) {
    float *x;
    int64_t *y;
    const float *z;
    ert_trainer_input_data(t, 0, (void **)&x);
    ert_trainer_target_data(t, (void **)&y);
    ert_trainer_output_data(t, (const void **)&z);
    int ok = 0, n = 0;
    for (int r = 0; r < 16; r++) {
        bars_batch(x, y, 16, shift);
        CHECK_OK(ert_trainer_eval(t, NULL), ctx);
        for (int i = 0; i < 16; i++, n++) {
            int b = 0;
            for (int c = 1; c < 3; c++)
                if (z[3 * i + c] > z[3 * i + b]) b = c;
            ok += b == y[i];
        }
    }
    return (double)ok / n;
}

/* Train for `steps`; returns mean loss of the first and last 10 steps. */
static void train(ert_trainer *t, int steps, int shift, float *first, float *last) {
    float *x;
    int64_t *y;
    ert_trainer_input_data(t, 0, (void **)&x);
    ert_trainer_target_data(t, (void **)&y);
    *first = *last = 0;
    for (int s = 0; s < steps; s++) {
        bars_batch(x, y, 16, shift);
        float l = 0;
        CHECK_OK(ert_trainer_step(t, &l), ctx);
        if (s < 10) *first += l / 10;
        if (s >= steps - 10) *last += l / 10;
    }
}

/* The fine-tuned model back to ONNX: loaded again by the ONNX loader, an
 * inference session on it gives the trainer's eval output. */
/* (aarch64 gcc 12 -O3 crashes vectorising the max-|logit| reduction in
 * here: internal compiler error in vect_transform_reduction, as in
 * test_quantize.c's gemm_arith.) */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
static void export_onnx(ert_trainer *t) {
    ert_model *e = NULL, *back = NULL;
    CHECK_OK(ert_trainer_export(t, &e), ctx);
    char path[256];
    snprintf(path, sizeof path, "%s/finetune_%d.onnx", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    if (e) CHECK_OK(ert_model_save_onnx(e, path), ctx);
    CHECK_OK(ert_model_load_file(ctx, path, &back), ctx);
    unlink(path);
    ert_session_options so = {.batch = 16};
    ert_session *s = NULL;
    if (back) CHECK_OK(ert_session_create(back, &so, &s), ctx);
    if (s) {
        float *x, *sx;
        int64_t *y;
        const float *z, *sy;
        ert_trainer_input_data(t, 0, (void **)&x);
        ert_trainer_target_data(t, (void **)&y);
        ert_trainer_output_data(t, (const void **)&z);
        bars_batch(x, y, 16, 1);
        CHECK_OK(ert_trainer_eval(t, NULL), ctx);
        ert_session_input_data(s, 0, (void **)&sx);
        memcpy(sx, x, 16 * 64 * sizeof(float));
        CHECK_OK(ert_session_run(s), ctx);
        ert_session_output_data(s, 0, (const void **)&sy);
        /* the session folds the frozen BN into conv1 its own way: the same
         * math rounded differently, so the outputs differ by a few ulp of the
         * largest logit (20 to 110 after fine-tuning), not of each one; 1e-4
         * absolute reached 0.3 of itself on a logit of -0.009 */
        double ref[48], sc = 1;
        for (int i = 0; i < 48; i++) ref[i] = z[i], sc = fmax(sc, fabs(ref[i]));
        CHECK(ert_test_close("ONNX round trip vs trainer eval", sy, ref, 48, 1e-4 * sc, 1e-4), "ONNX export");
    }
    ert_session_free(s);
    ert_model_free(back);
    ert_model_free(e);
    /* an op without a plain ONNX form is refused, and no file appears */
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t d[2] = {-1, 4};
    int32_t x, y;
    ert_model *m = NULL;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, d, &x), ctx);
    CHECK_OK(ert_builder_unary(b, "Silu", x, &y), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    if (m) {
        ert_status st = ert_model_save_onnx(m, path);
        CHECK(st == ERT_E_UNSUPPORTED && access(path, F_OK) != 0, "Silu exported to ONNX: %s", ert_status_str(st));
    }
    ert_model_free(m);
}

int main(void) {
    ert_test_rng_init(&rng, "finetune");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    pbuf bytes = onnx_cnn();
    ert_model *m = NULL;
    CHECK_OK(ert_model_load_memory(ctx, bytes.p, bytes.n, 0, &m), ctx);
    pb_free(&bytes);
    if (!m) return ert_test_finish("finetune");
    ert_trainer_options to = {0};
    to.session.batch = 16;
    to.optim.kind = ERT_OPTIM_SGD;
    to.optim.lr = 0.05f;
    to.optim.momentum = 0.9f;
    /* cosine to 0 over the 200 steps: at a constant 0.05 (momentum 0.9) the
     * converged model still took single-batch loss spikes (BN on batch
     * statistics), and one in the last steps left seed 1795559114846679581
     * at held-out accuracy 0.859 (1.000 after 100 or 300 steps) */
    to.lr.kind = ERT_LR_COSINE;
    to.lr.total_steps = 200;
    ert_trainer *t = NULL;
    CHECK_OK(ert_trainer_create(m, &to, &t), ctx);
    ert_model *e = NULL;
    ert_memory_report full;
    if (t) {
        ert_trainer_memory(t, &full);
        CHECK(ert_trainer_n_trainable(t) == 8, "ONNX CNN: %d trainable tensors (conv, bn affine, conv, fc)",
              ert_trainer_n_trainable(t));
        float f, l;
        train(t, 200, 0, &f, &l);
        double acc = accuracy(t, 0);
        printf("full training of the ONNX model: loss %.3f -> %.3f, held-out accuracy %.3f\n", f, l, acc);
        CHECK(acc >= 0.9, "pre-training accuracy %.3f", acc);
        CHECK_OK(ert_trainer_export(t, &e), ctx);
    }
    ert_trainer_free(t);
    t = NULL;
    if (e) {
        ert_trainer_options ft = to;
        ft.lr = (ert_lr_options){.kind = ERT_LR_CONSTANT};
        ft.trainable = ERT_TRAIN_LAST_N;
        ft.last_n = 1;
        ft.bn = ERT_BN_FROZEN;
        ft.optim.lr = 0.05f;
        CHECK_OK(ert_trainer_create(e, &ft, &t), ctx);
    }
    if (t) {
        ert_memory_report head;
        ert_trainer_memory(t, &head);
        CHECK(ert_trainer_n_trainable(t) == 2, "head only: %d trainable tensors", ert_trainer_n_trainable(t));
        double before = accuracy(t, 1);
        float f, l;
        train(t, 150, 1, &f, &l);
        double after = accuracy(t, 1);
        printf("head-only fine-tuning on rotated labels: loss %.3f -> %.3f, accuracy %.3f -> %.3f; arena %zu vs %zu bytes "
               "(%.2fx), gradients %zu vs %zu, saved %zu vs %zu\n", f, l, before, after, head.total_bytes,
               full.total_bytes, (double)head.total_bytes / full.total_bytes, head.gradients_bytes, full.gradients_bytes,
               head.saved_bytes, full.saved_bytes);
        CHECK(l < 0.5 * f, "fine-tune loss %.3f -> %.3f", f, l);
        CHECK(before < 0.4 && after >= 0.85, "fine-tune accuracy %.3f -> %.3f", before, after);
        CHECK(head.total_bytes * 10 < full.total_bytes * 6, "head-only arena %zu vs full %zu", head.total_bytes,
              full.total_bytes);
        export_onnx(t);
    }
    ert_trainer_free(t);
    ert_model_free(e);
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish("finetune");
}
