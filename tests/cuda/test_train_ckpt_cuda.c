/* Checkpoints and export of a CUDA trainer (label `gpu`): the CUDA twin of
 * test_train.c's checkpoint test, plus moving checkpoints between devices.
 *   - CUDA: 5 steps, save, 3 more (losses la); a fresh CUDA trainer that took
 *     a step of its own loads the file: step count 5, the next 3 losses = la
 *     (rel 1e-4: cuDNN's backward-filter algorithms may sum in another order);
 *   - the same CUDA-saved file loaded by a CPU trainer: the next 3 losses =
 *     la (rel 1e-3, CPU vs CUDA);
 *   - a CPU-saved checkpoint loaded by a CUDA trainer: next-step loss = the
 *     CPU's (rel 1e-3);
 *   - export from the CUDA trainer: every trainable weight of the model equals
 *     the trainer's current value;
 *   - f16 mixed precision: the loss scale comes back with the checkpoint; a
 *     CPU (f32) trainer refuses that file (its loss scaler is state).
 * Without a GPU, or in a build without CUDA: returns 77 (ctest SKIPPED). */
#include "testutil.h"
#include "trainer_internal.h" /* ert_trainer_param_copy */

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef ERT_TEST_HAVE_CUDA
int main(void) { return ert_test_skip("train_ckpt_cuda", "this build has no CUDA backend (ERT_CUDA=OFF)"); }
#else
#include <cuda_runtime_api.h>

#include "cuda_alloc_count.h"

static ert_context *ctx;
static ert_test_rng rng;

static int32_t weight(ert_builder *b, const char *nm, int nd, const int64_t *d, float s, float base) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    float *w = malloc((size_t)n * 4 + 4);
    ert_test_fill(&rng, w, n, base - s, base + s);
    int32_t id = -1;
    CHECK_OK(ert_builder_weight(b, nm, ERT_DTYPE_F32, nd, d, w, &id), ctx);
    free(w);
    return id;
}

/* x (N, 2, 12, 12): conv (no bias) BN relu maxpool conv (bias) relu GAP fc -> 5 */
static ert_model *cnn(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 2, 12, 12}, w1[4] = {8, 2, 3, 3}, w2[4] = {12, 8, 3, 3}, c8[1] = {8}, c12[1] = {12};
    int64_t fw[2] = {5, 12}, fb[1] = {5};
    int32_t x, c1, bn, r1, p1, c2, r2, g, f, o;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, weight(b, "conv1.w", 4, w1, 0.5f, 0), -1, 1, 1, 1, 1, &c1), ctx);
    int32_t bin[5] = {c1, weight(b, "bn1.scale", 1, c8, 0.1f, 1), weight(b, "bn1.bias", 1, c8, 0.1f, 0),
                      weight(b, "bn1.mean", 1, c8, 0.0f, 0), weight(b, "bn1.var", 1, c8, 0.0f, 1)};
    CHECK_OK(ert_builder_node(b, "BatchNormalization", "bn1", bin, 5, NULL, 0, &bn, 1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", bn, &r1), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, r1, 2, 2, 0, &p1), ctx);
    CHECK_OK(ert_builder_conv2d(b, p1, weight(b, "conv2.w", 4, w2, 0.3f, 0), weight(b, "conv2.b", 1, c12, 0.1f, 0), 1,
                                1, 1, 1, &c2), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", c2, &r2), ctx);
    CHECK_OK(ert_builder_unary(b, "GlobalAveragePool", r2, &g), ctx);
    CHECK_OK(ert_builder_unary(b, "Flatten", g, &f), ctx);
    CHECK_OK(ert_builder_linear(b, f, weight(b, "fc.w", 2, fw, 0.3f, 0), weight(b, "fc.b", 1, fb, 0.1f, 0), &o), ctx);
    CHECK_OK(ert_builder_output(b, o, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

enum { B = 8, XN = 2 * 144 };

static ert_trainer *trainer(ert_model *m, ert_device dev, ert_dtype prec) {
    ert_trainer_options o = {0};
    o.session.device = dev;
    o.session.batch = B;
    o.session.precision = prec;
    o.loss.kind = ERT_LOSS_CROSS_ENTROPY;
    o.optim.kind = ERT_OPTIM_ADAM;
    o.optim.lr = 1e-2f;
    o.loss_scale = 4096.0f;
    o.loss_scale_interval = 2;
    ert_trainer *t = NULL;
    CHECK_OK(ert_trainer_create(m, &o, &t), ctx);
    return t;
}

/* Batch k: the same values on every device and run. */
static void batch_k(ert_trainer *t, int k) {
    float *x;
    int64_t *y;
    ert_trainer_input_data(t, 0, (void **)&x);
    ert_trainer_target_data(t, (void **)&y);
    ert_test_rng r = {.s = 0x9e3779b9ull + (uint64_t)k * 7919u};
    for (int i = 0; i < B; i++) {
        y[i] = ert_test_int(&r, 0, 4);
        for (int j = 0; j < XN; j++) x[i * XN + j] = (float)ert_test_uniform(&r, -1, 1) + 0.3f * (float)(y[i] == j % 5);
    }
}

static void steps(ert_trainer *t, int k0, int k1, float *loss) {
    for (int k = k0; k < k1; k++) {
        batch_k(t, k);
        float l = 0;
        CHECK_OK(ert_trainer_step(t, &l), ctx);
        if (loss) loss[k - k0] = l;
    }
}

static bool close3(const float *a, const float *b, double tol) {
    bool ok = true;
    for (int i = 0; i < 3; i++) ok = ok && fabs((double)a[i] - b[i]) <= tol * fmax(1.0, fabs((double)a[i]));
    return ok;
}

static void run(const char *dir) {
    char p1[512], p2[512], p3[512];
    snprintf(p1, sizeof p1, "%s/ckpt_cuda_%d.ert", dir, (int)getpid());
    snprintf(p2, sizeof p2, "%s/ckpt_cpu_%d.ert", dir, (int)getpid());
    snprintf(p3, sizeof p3, "%s/ckpt_amp_%d.ert", dir, (int)getpid());
    ert_model *m = cnn();
    ert_trainer *a = m ? trainer(m, ERT_DEVICE_CUDA, ERT_DTYPE_F32) : NULL;
    ert_trainer *b = m ? trainer(m, ERT_DEVICE_CUDA, ERT_DTYPE_F32) : NULL;
    ert_trainer *c = m ? trainer(m, ERT_DEVICE_CPU, ERT_DTYPE_F32) : NULL;
    if (!a || !b || !c) goto out;
    steps(a, 0, 5, NULL);
    CHECK_OK(ert_trainer_save_checkpoint(a, p1), ctx);
    float la[3], lb[3], lc[3];
    steps(a, 5, 8, la);
    steps(b, 100, 101, NULL); /* other state first */
    CHECK_OK(ert_trainer_load_checkpoint(b, p1), ctx);
    CHECK(ert_trainer_step_count(b) == 5, "CUDA resumed step count %lld", (long long)ert_trainer_step_count(b));
    steps(b, 5, 8, lb);
    CHECK(close3(la, lb, 1e-4), "CUDA resume: %.7g %.7g %.7g vs uninterrupted %.7g %.7g %.7g", lb[0], lb[1], lb[2],
          la[0], la[1], la[2]);
    CHECK_OK(ert_trainer_load_checkpoint(c, p1), ctx);
    CHECK(ert_trainer_step_count(c) == 5, "CPU resumed step count %lld", (long long)ert_trainer_step_count(c));
    steps(c, 5, 8, lc);
    CHECK(close3(la, lc, 1e-3), "CUDA-saved checkpoint on the CPU: %.7g %.7g %.7g vs CUDA %.7g %.7g %.7g", lc[0], lc[1],
          lc[2], la[0], la[1], la[2]);
    printf("  CUDA save -> CUDA load: %.6f %.6f %.6f; -> CPU load: %.6f %.6f %.6f; uninterrupted %.6f %.6f %.6f\n",
           lb[0], lb[1], lb[2], lc[0], lc[1], lc[2], la[0], la[1], la[2]);
    /* CPU -> CUDA */
    CHECK_OK(ert_trainer_save_checkpoint(c, p2), ctx);
    CHECK_OK(ert_trainer_load_checkpoint(b, p2), ctx);
    float l1 = 0, l2 = 0;
    batch_k(c, 9);
    batch_k(b, 9);
    CHECK_OK(ert_trainer_step(c, &l1), ctx);
    CHECK_OK(ert_trainer_step(b, &l2), ctx);
    CHECK(fabs((double)l1 - l2) <= 1e-3 * fmax(1.0, fabs((double)l1)), "CPU-saved on CUDA: next loss %.7g vs CPU %.7g",
          (double)l2, (double)l1);
    /* export from CUDA */
    ert_model *em = NULL;
    CHECK_OK(ert_trainer_export(b, &em), ctx);
    for (int k = 0; em && k < b->n_params; k++) {
        const char *nm = b->g.t[b->params[k]].name;
        int64_t n = 0;
        float *v = malloc(b->g.t[b->params[k]].nbytes + 4);
        CHECK_OK(ert_trainer_param_copy(b, nm, v, NULL, &n), ctx);
        int32_t id = ert_model_find_tensor(em, nm);
        CHECK(id >= 0 && memcmp(em->tensors[id].data, v, (size_t)n * 4) == 0,
              "exported '%s' differs from the CUDA trainer's value", nm);
        free(v);
    }
    ert_model_free(em);
    /* f16: the loss scale is state */
    ert_trainer *h1 = trainer(m, ERT_DEVICE_CUDA, ERT_DTYPE_F16), *h2 = trainer(m, ERT_DEVICE_CUDA, ERT_DTYPE_F16);
    if (h1 && h2) {
        steps(h1, 0, 5, NULL); /* interval 2: the scale grew */
        float s1 = ert_trainer_loss_scale(h1);
        CHECK(s1 > 4096.0f, "f16 scale after 5 steps with interval 2: %g", (double)s1);
        CHECK_OK(ert_trainer_save_checkpoint(h1, p3), ctx);
        CHECK_OK(ert_trainer_load_checkpoint(h2, p3), ctx);
        CHECK(ert_trainer_loss_scale(h2) == s1 && ert_trainer_step_count(h2) == ert_trainer_step_count(h1),
              "f16 resume: scale %g (saved %g)", (double)ert_trainer_loss_scale(h2), (double)s1);
        float x1[3], x2[3];
        steps(h1, 5, 8, x1);
        steps(h2, 5, 8, x2);
        CHECK(close3(x1, x2, 5e-3), "f16 resume: %.6g %.6g %.6g vs %.6g %.6g %.6g", x2[0], x2[1], x2[2], x1[0], x1[1],
              x1[2]);
        ert_status st = ert_trainer_load_checkpoint(c, p3);
        CHECK(st == ERT_E_ARG, "f16 checkpoint into a CPU f32 trainer: %s", ert_status_str(st));
    }
    ert_trainer_free(h1);
    ert_trainer_free(h2);
out:
    unlink(p1);
    unlink(p2);
    unlink(p3);
    ert_trainer_free(a);
    ert_trainer_free(b);
    ert_trainer_free(c);
    ert_model_free(m);
}

int main(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return ert_test_skip("train_ckpt_cuda", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    ert_test_rng_init(&rng, "train_ckpt_cuda");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    const char *tmp = getenv("TMPDIR");
    run(tmp && *tmp ? tmp : "/tmp");
    ert_context_free(ctx);
    return ert_test_finish("train_ckpt_cuda");
}
#endif
