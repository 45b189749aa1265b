/* GPU preprocessing (ert_preprocessor_*) against the camera app's CPU path
 * (cam_yuyv_to_rgb + cam_preprocess) on random frames of odd sizes: every
 * fit (stretch, letterbox, centre crop) x frame format (RGB, YUYV) x layout
 * (NCHW, NHWC, BGR, gray), up- and downscaling, padded source rows, poisoned
 * outputs. Max abs error <= 1e-5. SKIPPED (77) without CUDA or a GPU. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "proc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void one(ert_test_rng *r, int w, int h, int ow, int oh, int fit, int yuyv, int layout) {
    ert_preprocess_options po = {.out_w = ow, .out_h = oh, .fit = (ert_fit)fit, .pad = 114};
    cam_pre_options co = {.out_w = ow, .out_h = oh, .fit = (cam_fit)fit, .pad = 114};
    float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    memcpy(po.mean, mean, sizeof mean);
    memcpy(po.std, sd, sizeof sd);
    memcpy(co.mean, mean, sizeof mean);
    memcpy(co.std, sd, sizeof sd);
    po.nhwc = co.nhwc = layout == 1;
    po.bgr = co.bgr = layout == 2;
    po.gray = co.gray = layout == 3;
    size_t row = yuyv ? (size_t)(w + 1) / 2 * 4 : (size_t)w * 3, stride = row + (size_t)ert_test_int(r, 0, 5);
    uint8_t *frame = malloc(stride * h), *rgb = malloc((size_t)w * h * 3);
    size_t n = (size_t)ow * oh * (po.gray ? 1 : 3);
    float *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    for (size_t i = 0; i < stride * h; i++) frame[i] = (uint8_t)ert_test_int(r, 0, 255);
    if (yuyv) cam_yuyv_to_rgb(frame, w, h, stride, rgb);
    cam_preprocess(yuyv ? rgb : frame, w, h, yuyv ? (size_t)w * 3 : stride, &co, ref, NULL);
    ert_test_poison(got, (int64_t)n);
    ert_preprocessor *pp = NULL;
    ert_status st = ert_preprocessor_create(w + 3, h + 1, &po, &pp);
    CHECK(st == ERT_OK, "create: %s", ert_status_str(st));
    if (st == ERT_OK) {
        CHECK(ert_preprocessor_output_bytes(pp) == n * sizeof(float), "output bytes");
        st = ert_preprocessor_run(pp, frame, w, h, stride, yuyv ? ERT_FRAME_YUYV : ERT_FRAME_RGB, got);
        CHECK(st == ERT_OK, "run: %s", ert_status_str(st));
        double worst = 0;
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)got[i] - ref[i]);
            if (!(d <= worst)) { worst = d; at = i; } /* NaN (poison left) counts */
        }
        CHECK(worst <= 1e-5, "%dx%d -> %dx%d fit %d %s layout %d: max err %g at %zu (gpu %g cpu %g)", w, h, ow,
              oh, fit, yuyv ? "yuyv" : "rgb", layout, worst, at, got[at], ref[at]);
        /* Argument checks: a frame over the maximum is refused. */
        CHECK(ert_preprocessor_run(pp, frame, w + 4, h, stride + 16, ERT_FRAME_RGB, got) == ERT_E_ARG, "max_w");
        ert_preprocessor_free(pp);
    }
    free(frame);
    free(rgb);
    free(ref);
    free(got);
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "gpu_preprocess");
    ert_preprocess_options po = {.out_w = 8, .out_h = 8};
    ert_preprocessor *pp = NULL;
    ert_status st = ert_preprocessor_create(16, 16, &po, &pp);
    if (st == ERT_E_UNSUPPORTED) return ert_test_skip("gpu_preprocess", "edgert built without CUDA");
    if (st == ERT_E_CUDA) return ert_test_skip("gpu_preprocess", "no usable GPU");
    CHECK(st == ERT_OK, "create: %s", ert_status_str(st));
    ert_preprocessor_free(pp);
    ert_preprocessor_free(NULL);
    CHECK(ert_preprocessor_create(0, 16, &po, &pp) == ERT_E_ARG, "max_w 0");

    static const int sizes[][4] = {{37, 23, 17, 13}, {13, 29, 31, 19}, {641, 479, 224, 224},
                                   {99, 101, 320, 257}, {1, 1, 5, 3},  {257, 3, 11, 7}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int fit = 0; fit < 3; fit++)
            for (int yuyv = 0; yuyv < 2; yuyv++)
                for (int layout = 0; layout < 4; layout++)
                    one(&r, sizes[k][0], sizes[k][1], sizes[k][2], sizes[k][3], fit, yuyv, layout);
    return ert_test_finish("gpu_preprocess");
}
