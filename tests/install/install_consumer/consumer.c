/* A program of a user of the installed library: only <edgert.h>. Built three
 * ways: through find_package(edgert) and pkg-config against an install
 * (tests/install/install_consumer/run.cmake), and with -static against the build's
 * libedgert.a (tests/install/CMakeLists.txt), the way firmware embeds it.
 *
 * y = Relu(x @ w^T + b) on fresh random data, x (3, 37), w (5, 37): built
 * with the builder, planned, run, and checked against a float64 reference
 * computed here. Once on ERT_DEVICE_CUDA, once on ERT_DEVICE_AUTO, each line
 * saying what happened, so the test can tell a GPU run, a CPU fallback and a
 * build without CUDA apart:
 *   consumer: cuda: ok (max rel err ...)
 *   consumer: cuda: unavailable: ERT_E_CUDA: no CUDA device: no NVIDIA driver/GPU found (...)
 *   consumer: log: no CUDA device (...): using the CPU
 *   consumer: auto: ok (max rel err ...)
 * Exit 0 when every session that was created computed the right answer, the
 * AUTO one was created, and the CUDA one did what ERT_CONSUMER_CUDA says:
 *   built   a CUDA build: ran, or was refused because this machine has no
 *           NVIDIA driver/GPU (any other refusal fails: a missing library...)
 *   none    a CPU-only build: refused, naming the missing backend
 *   unset   anything goes (a user running it by hand). */
#include <edgert.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 3, K = 37, M = 5 };

static void log_cb(void *user, ert_log_level level, const char *msg) {
    (void)user, (void)level;
    printf("consumer: log: %s\n", msg);
}

static uint64_t rng_state;
static float uniform(void) { /* [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Returns 0 when the session ran and matched, 1 when it was refused
 * (message printed), 2 on a wrong answer or an error after create. */
static int run_on(ert_context *ctx, const ert_model *model, ert_device dev, const char *what, const float *x,
                  const double *ref, const double *scale, char *why, size_t why_n) {
    ert_session_options so = {0};
    so.device = dev;
    ert_session *s = NULL;
    ert_status st = ert_session_create(model, &so, &s);
    if (st != ERT_OK) {
        printf("consumer: %s: unavailable: %s: %s\n", what, ert_status_str(st), ert_last_error(ctx));
        snprintf(why, why_n, "%s", ert_last_error(ctx));
        return 1;
    }
    float y[N * M];
    for (int i = 0; i < N * M; i++) y[i] = NAN; /* unwritten outputs show */
    int rc = 2;
    if ((st = ert_session_set_input(s, 0, x, sizeof(float) * N * K)) != ERT_OK ||
        (st = ert_session_run(s)) != ERT_OK || (st = ert_session_get_output(s, 0, y, sizeof y)) != ERT_OK) {
        printf("consumer: %s: run failed: %s: %s\n", what, ert_status_str(st), ert_last_error(ctx));
    } else {
        double worst = 0;
        for (int i = 0; i < N * M; i++) {
            /* relative to the size of the terms summed, not of the sum: a sum
             * that cancels to near zero carries float32 rounding of the terms */
            double e = fabs((double)y[i] - ref[i]) / scale[i];
            if (!(e <= worst)) worst = e; /* NaN counts as the worst */
        }
        rc = worst < 1e-5 ? 0 : 2; /* float32 over K = 37 terms: a few 1e-7 */
        printf("consumer: %s: %s (max rel err %.3g)\n", what, rc ? "WRONG" : "ok", worst);
    }
    ert_session_free(s);
    return rc;
}

int main(void) {
    if (strcmp(ert_version(), ERT_VERSION_STRING) != 0) {
        printf("consumer: header %s, library %s\n", ERT_VERSION_STRING, ert_version());
        return 1;
    }
    const char *seed = getenv("ERT_CONSUMER_SEED"); /* replays a printed seed */
    rng_state = seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL);
    printf("consumer: edgert %s, seed %llu\n", ert_version(), (unsigned long long)rng_state);
    float x[N * K], w[M * K], b[M];
    for (int i = 0; i < N * K; i++) x[i] = uniform();
    for (int i = 0; i < M * K; i++) w[i] = uniform();
    for (int i = 0; i < M; i++) b[i] = uniform();
    double ref[N * M], scale[N * M];
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++) {
            double acc = b[m], mag = fabs((double)b[m]);
            for (int k = 0; k < K; k++) {
                acc += (double)x[n * K + k] * w[m * K + k];
                mag += fabs((double)x[n * K + k] * w[m * K + k]);
            }
            ref[n * M + m] = acc > 0 ? acc : 0;
            scale[n * M + m] = mag > 1e-30 ? mag : 1e-30;
        }

    ert_context_options co = {0};
    co.log = log_cb;
    co.log_level = ERT_LOG_INFO;
    ert_context *ctx = NULL;
    if (ert_context_create(&co, &ctx) != ERT_OK) return 1;
    ert_builder *bld = NULL;
    ert_model *model = NULL;
    static const int64_t xd[2] = {N, K}, wd[2] = {M, K}, bd[1] = {M};
    int32_t xi, wi, bi, li, yi;
    ert_status st;
    if ((st = ert_builder_create(ctx, &bld)) != ERT_OK || (st = ert_builder_input(bld, "x", ERT_DTYPE_F32, 2, xd, &xi)) ||
        (st = ert_builder_weight(bld, "w", ERT_DTYPE_F32, 2, wd, w, &wi)) ||
        (st = ert_builder_weight(bld, "b", ERT_DTYPE_F32, 1, bd, b, &bi)) ||
        (st = ert_builder_linear(bld, xi, wi, bi, &li)) || (st = ert_builder_unary(bld, "Relu", li, &yi)) ||
        (st = ert_builder_output(bld, yi, "y")) || (st = ert_builder_finish(bld, &model))) {
        printf("consumer: building the model: %s: %s\n", ert_status_str(st), ert_last_error(ctx));
        ert_builder_free(bld);
        ert_context_free(ctx);
        return 1;
    }
    ert_builder_free(bld);

    char why[512] = "", why_auto[512] = "";
    int cuda = run_on(ctx, model, ERT_DEVICE_CUDA, "cuda", x, ref, scale, why, sizeof why);
    int aut = run_on(ctx, model, ERT_DEVICE_AUTO, "auto", x, ref, scale, why_auto, sizeof why_auto);
    ert_model_free(model);
    ert_context_free(ctx);
    const char *want = getenv("ERT_CONSUMER_CUDA");
    int bad = cuda == 2 || aut != 0;
    if (want && strcmp(want, "built") == 0 && cuda == 1 && !strstr(why, "no NVIDIA driver/GPU found") &&
        !strstr(why, "no NVIDIA GPU found")) {
        printf("consumer: FAIL: a CUDA build refused a CUDA session for another reason than a missing GPU\n");
        bad = 1;
    }
    if (want && strcmp(want, "none") == 0 && (cuda != 1 || !strstr(why, "no CUDA backend"))) {
        printf("consumer: FAIL: a build without CUDA did not say so\n");
        bad = 1;
    }
    return bad;
}
