/* The PaddleOCR text detector (../shared/models/ppocr/en_PP-OCRv3_det_infer.onnx)
 * through the camera pipeline on ../shared/images/img_10.jpg: decode,
 * preprocess (stretch to 640x384, ImageNet mean/std, NCHW), our session,
 * DB postprocessing -> boxes. The same input tensor goes through onnxruntime
 * (tests/camera/ppocr_ort.py, with $ERT_TEST_PYTHON) and its probability map through
 * the same postprocessing; the boxes must agree (same count, each IoU >= 0.9)
 * and the maps closely. SKIPPED without JPEG, ../shared, or a Python with
 * onnxruntime and numpy (scripts/setup.sh makes .deps/venv). */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "npy.h"
#include "proc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { IN_W = 640, IN_H = 384 };

static float box_iou(const cam_box *a, const cam_box *b) {
    float ix = fminf(a->x1, b->x1) - fmaxf(a->x0, b->x0), iy = fminf(a->y1, b->y1) - fmaxf(a->y0, b->y0);
    if (ix <= 0 || iy <= 0) return 0;
    float in = ix * iy;
    return in / ((a->x1 - a->x0) * (a->y1 - a->y0) + (b->x1 - b->x0) * (b->y1 - b->y0) - in);
}

int main(void) {
    if (!ert_jpeg_available()) return ert_test_skip("camera_ppocr", "built without JPEG support");
    const char *shared = ert_test_shared_dir();
    const char *py = getenv("ERT_TEST_PYTHON");
    if (!shared) return ert_test_skip("camera_ppocr", "../shared not found");
    if (!py || !*py || access(py, X_OK) != 0)
        return ert_test_skip("camera_ppocr", "no Python with onnxruntime (ERT_TEST_PYTHON; scripts/setup.sh makes .deps/venv)");
    char cmd[8192], model[4200], img[4200];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import onnxruntime, numpy' 2>/dev/null", py);
    if (system(cmd) != 0) return ert_test_skip("camera_ppocr", "onnxruntime/numpy not importable");
    snprintf(model, sizeof model, "%s/models/ppocr/en_PP-OCRv3_det_infer.onnx", shared);
    snprintf(img, sizeof img, "%s/images/img_10.jpg", shared);
    if (access(model, R_OK) != 0 || access(img, R_OK) != 0) return ert_test_skip("camera_ppocr", "model or image missing");

    ert_context *ctx;
    ert_jpeg *j;
    if (ert_context_create(NULL, &ctx) != ERT_OK || ert_jpeg_create(ctx, &j) != ERT_OK) return 1;
    /* Decode + preprocess. */
    FILE *f = fopen(img, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc((size_t)n);
    if (fread(data, 1, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    int w, h;
    CHECK_OK(ert_jpeg_info(j, data, (size_t)n, &w, &h, NULL), ctx);
    uint8_t *rgb = malloc((size_t)w * h * 3);
    CHECK_OK(ert_jpeg_decode(j, data, (size_t)n, ERT_PIXEL_RGB, rgb, (size_t)w * h * 3, 0, NULL, NULL), ctx);
    cam_pre_options pre = {.out_w = IN_W, .out_h = IN_H, .fit = CAM_FIT_STRETCH,
                           .mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}};
    float *x = malloc(sizeof(float) * 3 * IN_W * IN_H);
    cam_xform xf;
    cam_preprocess(rgb, w, h, (size_t)w * 3, &pre, x, &xf);

    /* Ours. */
    ert_model *m = NULL;
    ert_session *s = NULL;
    CHECK_OK(ert_model_load_file(ctx, model, &m), ctx);
    ert_tensor_info ii;
    if (!m || ert_model_input_info(m, 0, &ii) != ERT_OK) return ert_test_finish("camera_ppocr");
    ert_input_shape shape = {.name = ii.name, .ndim = 4, .dims = {1, 3, IN_H, IN_W}};
    ert_session_options so = {.n_threads = 2, .input_shapes = &shape, .n_input_shapes = 1};
    CHECK_OK(ert_session_create(m, &so, &s), ctx);
    if (!s) return ert_test_finish("camera_ppocr");
    CHECK_OK(ert_session_set_input(s, 0, x, sizeof(float) * 3 * IN_W * IN_H), ctx);
    CHECK_OK(ert_session_run(s), ctx);
    const float *ours;
    ert_session_output_data(s, 0, (const void **)&ours);
    int *work = malloc(sizeof(int) * 2 * IN_W * IN_H);
    cam_box a[64], b[64];
    int na = cam_db_boxes(ours, IN_W, IN_H, NULL, &xf, work, a, 64);

    /* onnxruntime on the same tensor. */
    char dir[] = "/tmp/ert_ppocr_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char in_path[64], out_path[64], err[256];
    snprintf(in_path, sizeof in_path, "%s/x.npy", dir);
    snprintf(out_path, sizeof out_path, "%s/y.npy", dir);
    int64_t dims[4] = {1, 3, IN_H, IN_W};
    CHECK(npy_write_file(in_path, ERT_DTYPE_F32, 4, dims, x, sizeof(float) * 3 * IN_W * IN_H, err, sizeof err) == 0,
          "npy write: %s", err);
    const char *src_dir = getenv("ERT_TEST_SRC_DIR");
    snprintf(cmd, sizeof cmd, "'%s' '%s/ppocr_ort.py' '%s' '%s' '%s'", py, src_dir ? src_dir : "tests", model, in_path,
             out_path);
    CHECK(system(cmd) == 0, "%s", cmd);
    npy_array ref = {0};
    CHECK(npy_read_file(out_path, &ref, err, sizeof err) == 0, "npy read: %s", err);
    if (ref.data && ref.bytes == sizeof(float) * IN_W * IN_H) {
        const float *rp = ref.data;
        double worst = 0;
        for (int i = 0; i < IN_W * IN_H; i++) worst = fmax(worst, fabs((double)rp[i] - ours[i]));
        CHECK(worst < 2e-3, "probability maps differ by %g", worst);
        int nb = cam_db_boxes(rp, IN_W, IN_H, NULL, &xf, work, b, 64);
        printf("camera_ppocr: %d boxes (onnxruntime: %d), max |prob diff| %.2g\n", na, nb, worst);
        CHECK(na == nb && na >= 3, "box count %d vs onnxruntime %d", na, nb);
        for (int i = 0; i < na; i++) {
            float best = 0;
            for (int k = 0; k < nb; k++) best = fmaxf(best, box_iou(&a[i], &b[k]));
            printf("  box (%.0f,%.0f)-(%.0f,%.0f) score %.3f, IoU with onnxruntime's %.3f\n", a[i].x0, a[i].y0, a[i].x1,
                   a[i].y1, a[i].score, best);
            CHECK(best >= 0.9f, "box %d IoU %.3f", i, best);
        }
    } else {
        CHECK(0, "onnxruntime output has %zu bytes", ref.bytes);
    }
    npy_free(&ref);
    unlink(in_path);
    unlink(out_path);
    rmdir(dir);
    free(work); free(x); free(rgb); free(data);
    ert_session_free(s);
    ert_model_free(m);
    ert_jpeg_free(j);
    ert_context_free(ctx);
    return ert_test_finish("camera_ppocr");
}
