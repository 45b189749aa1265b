/* GPU preprocessing (ert_preprocessor_*) against the camera app's CPU path
 * (cam_yuyv_to_rgb + cam_preprocess) on random frames of odd sizes: every
 * fit (stretch, letterbox, centre crop) x frame format (RGB, YUYV) x layout
 * (NCHW, NHWC, BGR, gray), up- and downscaling, padded source rows, poisoned
 * outputs. Max abs error <= 1e-5. Then straight into a session's GPU input
 * (ERT_SESSION_DEVICE_INPUTS + ert_preprocessor_run_device): for every
 * placement, the output equals a session fed through host memory, with the
 * host view of the input poisoned (so run cannot have read it), and
 * ert_session_sync_inputs carries a CPU-written input over; with
 * ERT_SESSION_DEVICE_OUTPUTS too, run leaves the host view of the output
 * untouched (poisoned) on DEVICE placement and get_output/output_data copy
 * the right values down on demand. SKIPPED (77)
 * without CUDA or a GPU. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "proc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ert_context *g_ctx; /* every preprocessor reports on it */

/* layout: 0 NCHW, 1 NHWC, 2 BGR, 3 gray, 4 NCHW f16, 5 gray f16 */
static void one(ert_test_rng *r, int w, int h, int ow, int oh, int fit, int yuyv, int layout) {
    ert_preprocessor_options po = {.out_w = ow, .out_h = oh, .fit = (ert_fit)fit, .pad = 114};
    cam_pre_options co = {.out_w = ow, .out_h = oh, .fit = (cam_fit)fit, .pad = 114};
    float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    memcpy(po.mean, mean, sizeof mean);
    memcpy(po.std, sd, sizeof sd);
    memcpy(co.mean, mean, sizeof mean);
    memcpy(co.std, sd, sizeof sd);
    po.nhwc = co.nhwc = layout == 1;
    po.bgr = co.bgr = layout == 2;
    po.gray = co.gray = layout == 3 || layout == 5;
    po.f16 = co.f16 = layout >= 4;
    size_t row = yuyv ? (size_t)(w + 1) / 2 * 4 : (size_t)w * 3, stride = row + (size_t)ert_test_int(r, 0, 5);
    uint8_t *frame = malloc(stride * h), *rgb = malloc((size_t)w * h * 3);
    size_t n = (size_t)ow * oh * (po.gray ? 1 : 3);
    float *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    for (size_t i = 0; i < stride * h; i++) frame[i] = (uint8_t)ert_test_int(r, 0, 255);
    if (yuyv) cam_yuyv_to_rgb(frame, w, h, stride, rgb);
    cam_preprocess(yuyv ? rgb : frame, w, h, yuyv ? (size_t)w * 3 : stride, &co, ref, NULL);
    memset(got, 0xff, n * sizeof *got); /* NaN as f32 and as f16 */
    ert_preprocessor *pp = NULL;
    ert_status st = ert_preprocessor_create(g_ctx, w + 3, h + 1, &po, &pp);
    CHECK(st == ERT_OK, "create: %s", ert_status_str(st));
    if (st == ERT_OK) {
        CHECK(ert_preprocessor_output_bytes(pp) == n * (po.f16 ? 2 : sizeof(float)), "output bytes");
        st = ert_preprocessor_run(pp, frame, w, h, stride, yuyv ? ERT_PIXEL_YUYV : ERT_PIXEL_RGB, got);
        CHECK(st == ERT_OK, "run: %s", ert_status_str(st));
        double worst = 0;
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            /* f16: both sides round values equal within 1e-5 to half: equal,
             * or one half-ulp step apart when the f32 values straddle a tie */
            double g = po.f16 ? ert_test_half_to_double(((uint16_t *)got)[i]) : got[i];
            double c = po.f16 ? ert_test_half_to_double(((uint16_t *)ref)[i]) : ref[i];
            double d = fabs(g - c), tol = po.f16 ? 1e-5 + fabs(c) * ldexp(1, -10) + ldexp(1, -24) : 1e-5;
            d = d / tol * 1e-5;
            if (!(d <= worst)) { worst = d; at = i; } /* NaN (poison left) counts */
        }
        CHECK(worst <= 1e-5, "%dx%d -> %dx%d fit %d %s layout %d: max err %g (relative to tolerance) at %zu", w,
              h, ow, oh, fit, yuyv ? "yuyv" : "rgb", layout, worst, at);
        /* Argument checks: a frame over the maximum is refused. */
        CHECK(ert_preprocessor_run(pp, frame, w + 4, h, stride + 16, ERT_PIXEL_RGB, got) == ERT_E_ARG &&
                  strstr(ert_last_error(g_ctx), "frame"), "max_w: %s", ert_last_error(g_ctx));
        /* ert_pixel_format is the API's one pixel enum: the JPEG layouts are refused here */
        CHECK(ert_preprocessor_run(pp, frame, w, h, stride, ERT_PIXEL_BGR, got) == ERT_E_ARG &&
                  strstr(ert_last_error(g_ctx), "pixel format"), "BGR frame: %s", ert_last_error(g_ctx));
        ert_preprocessor_free(pp);
    }
    free(frame);
    free(rgb);
    free(ref);
    free(got);
}

/* A small conv net on a 3 x 24 x 32 input (weights random). */
static ert_model *small_net(ert_test_rng *r) {
    ert_context *ctx = NULL;
    ert_builder *b = NULL;
    ert_model *m = NULL;
    ert_context_create(NULL, &ctx);
    if (!ctx || ert_builder_create(ctx, &b) != ERT_OK) return NULL;
    int64_t xd[4] = {1, 3, 24, 32}, wd[4] = {8, 3, 3, 3}, bd[1] = {8};
    float w[8 * 27], bias[8];
    ert_test_fill(r, w, 8 * 27, -0.5f, 0.5f);
    ert_test_fill(r, bias, 8, -0.1f, 0.1f);
    int32_t x, wi, bi, c, y, g;
    bool ok = ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x) == ERT_OK &&
              ert_builder_weight(b, "w", ERT_DTYPE_F32, 4, wd, w, &wi) == ERT_OK &&
              ert_builder_weight(b, "b", ERT_DTYPE_F32, 1, bd, bias, &bi) == ERT_OK &&
              ert_builder_conv2d(b, x, wi, bi, 1, 1, 1, 1, &c) == ERT_OK && ert_builder_unary(b, "Relu", c, &y) == ERT_OK &&
              ert_builder_unary(b, "GlobalAveragePool", y, &g) == ERT_OK && ert_builder_output(b, g, "y") == ERT_OK &&
              ert_builder_finish(b, &m) == ERT_OK;
    CHECK(ok, "small net: %s", ert_last_error(ctx));
    ert_builder_free(b);
    /* the model keeps its context; freed with it at exit by the OS (test only) */
    return m;
}

static void device_inputs(ert_test_rng *r) {
    ert_model *m = small_net(r);
    if (!m) return;
    int w = 71, h = 53;
    uint8_t *frame = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) frame[i] = (uint8_t)ert_test_int(r, 0, 255);
    ert_preprocessor_options po = {.out_w = 32, .out_h = 24, .fit = ERT_FIT_LETTERBOX, .pad = 114,
                                   .mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}};
    cam_pre_options co = {.out_w = 32, .out_h = 24, .fit = CAM_FIT_LETTERBOX, .pad = 114,
                          .mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}};
    ert_preprocessor *pp = NULL;
    CHECK(ert_preprocessor_create(g_ctx, w, h, &po, &pp) == ERT_OK, "create");
    const ert_placement pl[4] = {ERT_PLACEMENT_AUTO, ERT_PLACEMENT_DEVICE, ERT_PLACEMENT_UNIFIED, ERT_PLACEMENT_MAPPED};
    for (int k = 0; k < 4 && pp; k++) {
        ert_session_options ro = {.device = ERT_DEVICE_CUDA, .placement = pl[k]};
        ert_session_options dro = ro;
        dro.flags = ERT_SESSION_DEVICE_INPUTS;
        ert_session *ref = NULL, *dev = NULL;
        CHECK(ert_session_create(m, &ro, &ref) == ERT_OK, "placement %d: reference session", (int)pl[k]);
        CHECK(ert_session_create(m, &dro, &dev) == ERT_OK, "placement %d: device-input session", (int)pl[k]);
        if (!ref || !dev) {
            ert_session_free(ref);
            ert_session_free(dev);
            continue;
        }
        float *in_ref = NULL, *in_host = NULL, *in_dev = NULL;
        const float *y_ref = NULL, *y_dev = NULL;
        ert_session_input_data(ref, 0, (void **)&in_ref);
        ert_session_input_data(dev, 0, (void **)&in_host);
        CHECK(ert_session_input_device(dev, 0, (void **)&in_dev) == ERT_OK && in_dev, "input_device");
        for (int rep = 0; rep < 3 && in_dev; rep++) {
            for (int i = 0; i < w * h * 3; i++) frame[i] = (uint8_t)ert_test_int(r, 0, 255);
            CHECK(ert_preprocessor_run(pp, frame, w, h, (size_t)w * 3, ERT_PIXEL_RGB, in_ref) == ERT_OK, "run host");
            CHECK(ert_session_run(ref) == ERT_OK, "ref run");
            ert_session_output_data(ref, 0, (const void **)&y_ref);
            /* DEVICE placement: the host view is a separate mirror, poisoned to
             * prove run reads only the GPU copy (UNIFIED/MAPPED: the same
             * memory, written by the kernel after the poison). */
            ert_test_poison(in_host, 32 * 24 * 3);
            CHECK(ert_preprocessor_run_device(pp, frame, w, h, (size_t)w * 3, ERT_PIXEL_RGB, in_dev) == ERT_OK,
                  "run_device");
            CHECK(ert_session_run(dev) == ERT_OK, "dev run");
            ert_session_output_data(dev, 0, (const void **)&y_dev);
            double worst = 0;
            for (int i = 0; i < 8; i++) worst = fmax(worst, fabs((double)y_dev[i] - y_ref[i])) + (isnan(y_dev[i]) ? 1e9 : 0);
            CHECK(worst <= 1e-6, "placement %d rep %d: device-input output off by %g", (int)pl[k], rep, worst);
            /* the CPU fallback: host view written, then synced */
            cam_preprocess(frame, w, h, (size_t)w * 3, &co, in_host, NULL);
            CHECK(ert_session_sync_inputs(dev) == ERT_OK, "sync_inputs");
            CHECK(ert_session_run(dev) == ERT_OK, "dev run after sync");
            ert_session_output_data(dev, 0, (const void **)&y_dev);
            worst = 0;
            for (int i = 0; i < 8; i++) worst = fmax(worst, fabs((double)y_dev[i] - y_ref[i])) + (isnan(y_dev[i]) ? 1e9 : 0);
            CHECK(worst <= 1e-4, "placement %d rep %d: synced CPU input off by %g", (int)pl[k], rep, worst);
        }
        /* device outputs: nothing copied down by run, everything on demand */
        ert_session_options doo = ro;
        doo.flags = ERT_SESSION_DEVICE_INPUTS | ERT_SESSION_DEVICE_OUTPUTS;
        ert_session *dout = NULL;
        CHECK(ert_session_create(m, &doo, &dout) == ERT_OK, "placement %d: device-output session", (int)pl[k]);
        float *o_host = NULL, *o_in = NULL, got[8];
        ert_tensor_info oi;
        if (dout && ert_session_input_device(dout, 0, (void **)&o_in) == ERT_OK &&
            ert_session_output_info(dout, 0, &oi) == ERT_OK && oi.dims[1] == 8) {
            ert_session_output_data(dout, 0, (const void **)&o_host);
            for (int rep = 0; rep < 2 && o_host; rep++) {
                for (int i = 0; i < w * h * 3; i++) frame[i] = (uint8_t)ert_test_int(r, 0, 255);
                CHECK(ert_preprocessor_run(pp, frame, w, h, (size_t)w * 3, ERT_PIXEL_RGB, in_ref) == ERT_OK, "run host");
                CHECK(ert_session_run(ref) == ERT_OK, "ref run");
                ert_session_output_data(ref, 0, (const void **)&y_ref);
                CHECK(ert_preprocessor_run_device(pp, frame, w, h, (size_t)w * 3, ERT_PIXEL_RGB, o_in) == ERT_OK,
                      "run_device");
                ert_test_poison(o_host, 8);
                CHECK(ert_session_run(dout) == ERT_OK, "device-output run");
                int poisoned = 0;
                for (int i = 0; i < 8; i++) poisoned += isnan(o_host[i]);
                /* DEVICE: a separate host mirror that run must not have written */
                if (pl[k] == ERT_PLACEMENT_DEVICE)
                    CHECK(poisoned == 8, "placement DEVICE: run copied %d of 8 outputs down", 8 - poisoned);
                ert_test_poison(got, 8);
                CHECK(ert_session_get_output(dout, 0, got, sizeof got) == ERT_OK, "get_output: %s",
                      ert_last_error(g_ctx));
                const float *viewed = NULL;
                CHECK(ert_session_output_data(dout, 0, (const void **)&viewed) == ERT_OK && viewed == o_host,
                      "output_data");
                double worst = 0;
                for (int i = 0; i < 8; i++)
                    worst = fmax(worst, fmax(fabs((double)got[i] - y_ref[i]), fabs((double)o_host[i] - y_ref[i]))) +
                            (isnan(got[i]) || isnan(o_host[i]) ? 1e9 : 0);
                CHECK(worst <= 1e-6, "placement %d rep %d: device-output values off by %g", (int)pl[k], rep, worst);
            }
        } else
            CHECK(0, "placement %d: device-output session's input/output", (int)pl[k]);
        ert_session_free(dout);
        ert_session_free(ref);
        ert_session_free(dev);
    }
    ert_preprocessor_free(pp);
    free(frame);
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "gpu_preprocess");
    if (ert_context_create(NULL, &g_ctx) != ERT_OK) return 1;
    ert_preprocessor_options po = {.out_w = 8, .out_h = 8};
    ert_preprocessor *pp = NULL;
    ert_status st = ert_preprocessor_create(g_ctx, 16, 16, &po, &pp);
    if (st == ERT_E_UNSUPPORTED) return ert_test_skip("gpu_preprocess", "edgert built without CUDA");
    if (st == ERT_E_CUDA) return ert_test_skip("gpu_preprocess", "no usable GPU");
    CHECK(st == ERT_OK, "create: %s", ert_status_str(st));
    ert_preprocessor_free(pp);
    ert_preprocessor_free(NULL);
    CHECK(ert_preprocessor_create(g_ctx, 0, 16, &po, &pp) == ERT_E_ARG && strstr(ert_last_error(g_ctx), "1..16384"),
          "max_w 0: %s", ert_last_error(g_ctx));
    CHECK(ert_preprocessor_create(NULL, 16, 16, &po, &pp) == ERT_E_ARG && !pp, "NULL context");

    static const int sizes[][4] = {{37, 23, 17, 13}, {13, 29, 31, 19}, {641, 479, 224, 224},
                                   {99, 101, 320, 257}, {1, 1, 5, 3},  {257, 3, 11, 7}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int fit = 0; fit < 3; fit++)
            for (int yuyv = 0; yuyv < 2; yuyv++)
                for (int layout = 0; layout < 6; layout++)
                    one(&r, sizes[k][0], sizes[k][1], sizes[k][2], sizes[k][3], fit, yuyv, layout);
    device_inputs(&r);
    ert_context_free(g_ctx);
    return ert_test_finish("gpu_preprocess");
}
