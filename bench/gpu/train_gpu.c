/* train_gpu: time edgert training steps (bench/gpu/bench_train_gpu.sh).
 *
 *   train_gpu MODEL --batch B [--device cuda|cpu] [--optim adam|sgd] [--lr X]
 *             [--head PATTERN] [--precision f32|f16|bf16] [--amp-conv-only 0|1] [--steps 200] [--warmup 20]
 *             [--profile N] [--debug 1] [--ws-slack MiB] [--keep-bn 1]
 *
 * MODEL is `small-cnn` (the network of `edgert train small-cnn`: conv3x3
 * 1->16, relu, maxpool2, conv3x3 16->32, relu, maxpool2, fc 1568->64, relu,
 * fc 64->10 on 28x28 images, built here with the builder API) or an ONNX
 * file whose input 0 is (N, C, H, W) and output 0 logits (N, classes).
 * --head PATTERN trains only the weights matching it (BatchNorm frozen:
 * head-only fine-tuning). Random inputs and labels (step time does not
 * depend on values) written through the trainer's input/target pointers
 * before every step. Each step is timed on the wall clock (the step returns
 * with the loss on the host: copies in, whole step, copies back); prints one
 * JSON line: p50/mean/min ms over the timed steps, arena bytes, first and
 * last loss. --profile N: afterwards one step timed node by node
 * (ert_trainer_profile), the time per op and the N slowest nodes on stderr.
 * --ws-slack MiB: ert_trainer_options.workspace_slack (-1: no limit).
 * --keep-bn 1: ert_trainer_options.keep_bn_outputs (no recompute).
 * --debug 1: the library's DEBUG log on stderr (the trainer's plan: the
 * tensors live at the activation peak, the big workspaces).
 * Exit status 0 on success. */
#define _POSIX_C_SOURCE 200809L
#include "edgert.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_s = 0x1234567ull;
static double urand(void) {
    rng_s = rng_s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_s >> 11) * 0x1.0p-53;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int32_t param(ert_context *ctx, ert_builder *b, const char *nm, int nd, const int64_t *d, int fan_in) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    float *w = malloc((size_t)n * sizeof(float));
    double lim = fan_in > 0 ? 1.0 / sqrt((double)fan_in) : 0.0;
    for (int64_t i = 0; i < n; i++) w[i] = (float)((urand() * 2 - 1) * lim);
    int32_t id = -1;
    if (ert_builder_weight(b, nm, ERT_DTYPE_F32, nd, d, w, &id) != ERT_OK)
        fprintf(stderr, "train_gpu: %s\n", ert_last_error(ctx));
    free(w);
    return id;
}

static ert_model *small_cnn(ert_context *ctx) {
    ert_builder *b = NULL;
    if (ert_builder_create(ctx, &b) != ERT_OK) return NULL;
    int64_t xd[4] = {-1, 1, 28, 28}, w1[4] = {16, 1, 3, 3}, b1[1] = {16}, w2[4] = {32, 16, 3, 3}, b2[1] = {32};
    int64_t f1[2] = {64, 1568}, fb1[1] = {64}, f2[2] = {10, 64}, fb2[1] = {10};
    int32_t x, c1, r1, p1, c2, r2, p2, fl, h, rh, o;
    ert_model *m = NULL;
    bool ok = ert_builder_input(b, "image", ERT_DTYPE_F32, 4, xd, &x) == ERT_OK &&
              ert_builder_conv2d(b, x, param(ctx, b, "conv1.w", 4, w1, 9), param(ctx, b, "conv1.b", 1, b1, 0), 1, 1, 1,
                                 1, &c1) == ERT_OK &&
              ert_builder_unary(b, "Relu", c1, &r1) == ERT_OK && ert_builder_maxpool2d(b, r1, 2, 2, 0, &p1) == ERT_OK &&
              ert_builder_conv2d(b, p1, param(ctx, b, "conv2.w", 4, w2, 144), param(ctx, b, "conv2.b", 1, b2, 0), 1, 1,
                                 1, 1, &c2) == ERT_OK &&
              ert_builder_unary(b, "Relu", c2, &r2) == ERT_OK && ert_builder_maxpool2d(b, r2, 2, 2, 0, &p2) == ERT_OK &&
              ert_builder_unary(b, "Flatten", p2, &fl) == ERT_OK &&
              ert_builder_linear(b, fl, param(ctx, b, "fc1.w", 2, f1, 1568), param(ctx, b, "fc1.b", 1, fb1, 0), &h) ==
                  ERT_OK &&
              ert_builder_unary(b, "Relu", h, &rh) == ERT_OK &&
              ert_builder_linear(b, rh, param(ctx, b, "fc2.w", 2, f2, 64), param(ctx, b, "fc2.b", 1, fb2, 0), &o) ==
                  ERT_OK &&
              ert_builder_output(b, o, "logits") == ERT_OK && ert_builder_finish(b, &m) == ERT_OK;
    if (!ok) fprintf(stderr, "train_gpu: building small-cnn: %s\n", ert_last_error(ctx));
    ert_builder_free(b);
    return ok ? m : NULL;
}

static void on_log(void *user, ert_log_level level, const char *msg) {
    (void)user, (void)level;
    fprintf(stderr, "edgert: %s\n", msg);
}

static int cmp_entry(const void *a, const void *b) {
    double x = ((const ert_profile_entry *)a)->ms, y = ((const ert_profile_entry *)b)->ms;
    return x > y ? -1 : x < y;
}

/* One step timed node by node: ms per op (with node counts), then the top
 * nodes. The second profiled step is the one printed (the first warms the
 * eager path). */
static int profile(ert_trainer *t, int top) {
    int n = 0;
    float loss;
    if (ert_trainer_profile(t, NULL, 0, &n, &loss) != ERT_OK) return 1;
    ert_profile_entry *e = calloc((size_t)n + 1, sizeof *e);
    if (!e || ert_trainer_profile(t, e, n, &n, &loss) != ERT_OK) return 1;
    double total = 0;
    for (int k = 0; k < n; k++) total += e[k].ms;
    fprintf(stderr, "profile: %d nodes, %.3f ms summed (eager, event-timed)\n", n, total);
    const char *ops[128];
    double ops_ms[128];
    int ops_n[128], nops = 0;
    for (int k = 0; k < n; k++) {
        int j = 0;
        while (j < nops && strcmp(ops[j], e[k].op)) j++;
        if (j == nops) {
            if (nops == 128) continue;
            ops[nops] = e[k].op, ops_ms[nops] = 0, ops_n[nops++] = 0;
        }
        ops_ms[j] += e[k].ms, ops_n[j]++;
    }
    for (int a = 0; a < nops; a++) /* by time, descending */
        for (int b = a + 1; b < nops; b++)
            if (ops_ms[b] > ops_ms[a]) {
                const char *o = ops[a]; double m = ops_ms[a]; int c = ops_n[a];
                ops[a] = ops[b], ops_ms[a] = ops_ms[b], ops_n[a] = ops_n[b];
                ops[b] = o, ops_ms[b] = m, ops_n[b] = c;
            }
    for (int j = 0; j < nops; j++)
        fprintf(stderr, "  %-22s %4d nodes %8.3f ms %5.1f%%\n", ops[j], ops_n[j], ops_ms[j], 100 * ops_ms[j] / total);
    qsort(e, (size_t)n, sizeof *e, cmp_entry);
    for (int k = 0; k < n && k < top; k++)
        fprintf(stderr, "  #%-3d %-48s %-20s %.3f ms\n", k + 1, e[k].node, e[k].op, e[k].ms);
    free(e);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: train_gpu MODEL --batch B [--device cuda|cpu] [--optim adam|sgd] [--lr X] "
                        "[--head PATTERN] [--precision f32|f16|bf16] [--amp-conv-only 0|1] [--steps N] [--warmup N] [--profile N] [--debug 1] [--ws-slack MiB] [--keep-bn 1]\n");
        return 2;
    }
    const char *model = argv[1], *device = "cuda", *optim = "sgd", *head = NULL, *prec = "f32";
    int batch = 32, steps = 200, warmup = 20, conv_only = 0, prof = 0, debug = 0, keep_bn = 0;
    double slack = 0;
    double lr = -1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--optim")) optim = argv[i + 1];
        else if (!strcmp(argv[i], "--lr")) lr = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--head")) head = argv[i + 1];
        else if (!strcmp(argv[i], "--precision")) prec = argv[i + 1];
        else if (!strcmp(argv[i], "--amp-conv-only")) conv_only = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--profile")) prof = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--debug")) debug = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ws-slack")) slack = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--keep-bn")) keep_bn = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "train_gpu: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (batch < 1 || steps < 1 || warmup < 0) return 2;
    ert_context *ctx = NULL;
    ert_context_options co = {.log = debug ? on_log : NULL, .log_level = ERT_LOG_DEBUG};
    if (ert_context_create(&co, &ctx) != ERT_OK) return 1;
    ert_model *m = NULL;
    if (!strcmp(model, "small-cnn")) m = small_cnn(ctx);
    else if (ert_model_load_file(ctx, model, &m) != ERT_OK) fprintf(stderr, "train_gpu: %s\n", ert_last_error(ctx));
    if (!m) return 1;
    ert_trainer_options to = {0};
    to.session.batch = batch;
    to.session.device = !strcmp(device, "cpu") ? ERT_DEVICE_CPU : !strcmp(device, "auto") ? ERT_DEVICE_AUTO : ERT_DEVICE_CUDA;
    to.session.n_threads = 1;
    /* mixed precision: f16 with the default dynamic loss scaling (65536, x2 every 2000 good steps) */
    to.amp_conv_only = conv_only;
    to.keep_bn_outputs = keep_bn;
    to.workspace_slack = slack < 0 ? -1 : (int64_t)(slack * 1048576.0);
    to.session.precision = !strcmp(prec, "f16") ? ERT_DTYPE_F16 : !strcmp(prec, "bf16") ? ERT_DTYPE_BF16 : ERT_DTYPE_F32;
    to.loss.kind = ERT_LOSS_CROSS_ENTROPY;
    if (!strcmp(optim, "adam")) {
        to.optim.kind = ERT_OPTIM_ADAM;
        to.optim.lr = lr > 0 ? (float)lr : 2e-3f;
    } else {
        to.optim.kind = ERT_OPTIM_SGD;
        to.optim.lr = lr > 0 ? (float)lr : 0.01f;
        to.optim.momentum = 0.9f;
    }
    if (head) {
        to.trainable = ERT_TRAIN_PATTERN;
        to.pattern = head;
        to.bn = ERT_BN_FROZEN;
    }
    double t0 = now_ms();
    ert_trainer *t = NULL;
    if (ert_trainer_create(m, &to, &t) != ERT_OK) {
        fprintf(stderr, "train_gpu: create: %s\n", ert_last_error(ctx));
        return 1;
    }
    double create_ms = now_ms() - t0;
    ert_tensor_info xi, yi, oi;
    void *xp = NULL, *yp = NULL;
    ert_trainer_input_info(t, 0, &xi);
    ert_trainer_target_info(t, &yi);
    ert_trainer_output_info(t, &oi);
    ert_trainer_input_data(t, 0, &xp);
    ert_trainer_target_data(t, &yp);
    int64_t nx = 1, classes = oi.ndim == 2 ? oi.dims[1] : 1;
    for (int i = 0; i < xi.ndim; i++) nx *= xi.dims[i];
    double *ms = malloc((size_t)steps * sizeof(double));
    float loss = 0, first = 0;
    for (int s = 0; s < warmup + steps; s++) {
        float *x = xp;
        int64_t *y = yp;
        for (int64_t i = 0; i < nx; i++) x[i] = (float)(urand() * 2 - 1);
        for (int i = 0; i < batch; i++) y[i] = (int64_t)(urand() * (double)classes) % classes;
        double a = now_ms();
        if (ert_trainer_step(t, &loss) != ERT_OK) {
            fprintf(stderr, "train_gpu: step %d: %s\n", s, ert_last_error(ctx));
            return 1;
        }
        if (s == 0) first = loss;
        if (s >= warmup) ms[s - warmup] = now_ms() - a;
    }
    double sum = 0;
    for (int i = 0; i < steps; i++) sum += ms[i];
    qsort(ms, (size_t)steps, sizeof *ms, cmp_d);
    ert_memory_report r;
    ert_trainer_memory(t, &r);
    printf("{\"runtime\":\"edgert\",\"model\":\"%s\",\"device\":\"%s\",\"batch\":%d,\"head_only\":%s,\"optim\":\"%s\","
           "\"precision\":\"%s%s\",\"steps\":%d,\"p50_ms\":%.4f,\"mean_ms\":%.4f,\"min_ms\":%.4f,\"p90_ms\":%.4f,\"create_ms\":%.1f,"
           "\"arena_bytes\":%zu,\"activations_bytes\":%zu,\"saved_bytes\":%zu,\"workspace_bytes\":%zu,"
           "\"weights_bytes\":%zu,\"gradients_bytes\":%zu,\"optimizer_bytes\":%zu,\"io_bytes\":%zu,\"trainable\":%d,\"loss_first\":%.5f,\"loss_last\":%.5f,"
           "\"loss_scale\":%g,\"skipped\":%lld,\"ws_slack_mib\":%g,\"keep_bn\":%d}\n",
           model, device, batch, head ? "true" : "false", optim, prec, conv_only ? "-convs-only" : "", steps, ms[steps / 2], sum / steps, ms[0],
           ms[(steps * 9) / 10], create_ms, r.total_bytes, r.activations_bytes, r.saved_bytes, r.workspace_bytes,
           r.weights_bytes, r.gradients_bytes, r.optimizer_bytes, r.io_bytes, ert_trainer_n_trainable(t),
           (double)first, (double)loss, (double)ert_trainer_loss_scale(t), (long long)ert_trainer_skipped_steps(t),
           slack, keep_bn);
    free(ms);
    if (prof > 0 && profile(t, prof) != 0) return 1;
    ert_trainer_free(t);
    ert_model_free(m);
    ert_context_free(ctx);
    return 0;
}
