/* apps/camera CPU pre/postprocessing against plain float64 references:
 * YUYV->RGB, bilinear resize (stretch / letterbox / centre crop) with
 * mean/std normalisation into NCHW and NHWC, batched, BGR; top-k softmax;
 * NMS; YOLO decoding in both layouts mapped back through a letterbox; DB
 * text-detection boxes on a synthetic probability map; 1-channel (gray)
 * output for models like the README demo's Fashion-MNIST CNN. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "proc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_yuyv(ert_test_rng *r) {
    int w = 7, h = 5;
    size_t stride = 16 + 3; /* padded rows; odd width uses a trailing U/V */
    uint8_t yuyv[5 * 19], rgb[5 * 7 * 3];
    for (size_t i = 0; i < sizeof yuyv; i++) yuyv[i] = (uint8_t)ert_test_int(r, 0, 255);
    cam_yuyv_to_rgb(yuyv, w, h, stride, rgb);
    int worst = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *s = yuyv + y * stride;
            double Y = s[x * 2], U = s[(x & ~1) * 2 + 1] - 128.0, V = s[(x & ~1) * 2 + 3] - 128.0;
            double ref[3] = {1.164 * (Y - 16) + 1.596 * V, 1.164 * (Y - 16) - 0.392 * U - 0.813 * V,
                             1.164 * (Y - 16) + 2.017 * U};
            for (int c = 0; c < 3; c++) {
                double v = ref[c] < 0 ? 0 : ref[c] > 255 ? 255 : ref[c];
                int d = abs(rgb[(y * w + x) * 3 + c] - (int)lround(v));
                if (d > worst) worst = d;
            }
        }
    CHECK(worst <= 1, "yuyv->rgb off by %d", worst);
}

/* Reference: geometry and bilinear sampling written out in double. */
static double ref_sample(const uint8_t *img, int w, int h, size_t stride, double sx, double sy, int c) {
    sx = sx < 0 ? 0 : sx > w - 1 ? w - 1 : sx;
    sy = sy < 0 ? 0 : sy > h - 1 ? h - 1 : sy;
    int x0 = (int)floor(sx), y0 = (int)floor(sy);
    int x1 = x0 + 1 < w ? x0 + 1 : x0, y1 = y0 + 1 < h ? y0 + 1 : y0;
    double ax = sx - x0, ay = sy - y0;
#define P(xx, yy) ((double)img[(size_t)(yy) * stride + (size_t)(xx) * 3 + c])
    return (1 - ay) * ((1 - ax) * P(x0, y0) + ax * P(x1, y0)) + ay * ((1 - ax) * P(x0, y1) + ax * P(x1, y1));
#undef P
}

static void ref_pre(const uint8_t *img, int w, int h, size_t stride, const cam_pre_options *o, double *out) {
    int W = o->out_w, H = o->out_h;
    double sx0 = 0, sy0 = 0, sw = w, sh = h, dx0 = 0, dy0 = 0, dw = W, dh = H;
    if (o->fit == CAM_FIT_LETTERBOX) {
        double s = fmin((double)W / w, (double)H / h);
        dw = floor(w * s + 0.5); dh = floor(h * s + 0.5);
        dx0 = floor((W - dw) / 2); dy0 = floor((H - dh) / 2);
    } else if (o->fit == CAM_FIT_CENTER_CROP) {
        double s = fmax((double)W / w, (double)H / h);
        sw = W / s; sh = H / s; sx0 = (w - sw) / 2; sy0 = (h - sh) / 2;
    }
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++) {
                int sc = o->bgr ? 2 - c : c; /* source channel for output channel c */
                double v;
                if (x < dx0 || x >= dx0 + dw || y < dy0 || y >= dy0 + dh) v = o->pad;
                else v = ref_sample(img, w, h, stride, sx0 + (x - dx0 + 0.5) * sw / dw - 0.5,
                                    sy0 + (y - dy0 + 0.5) * sh / dh - 0.5, sc);
                double sd = o->std[sc] ? o->std[sc] : 1;
                double val = (v * (o->scale ? o->scale : 1 / 255.0) - o->mean[sc]) / sd;
                out[o->nhwc ? ((size_t)y * W + x) * 3 + c : (size_t)c * W * H + (size_t)y * W + x] = val;
            }
}

static void test_pre(ert_test_rng *r) {
    const int src[][2] = {{64, 48}, {33, 71}, {5, 3}, {640, 480}};
    const int dst[][2] = {{32, 32}, {40, 24}, {17, 29}, {224, 224}};
    for (int si = 0; si < 4; si++)
        for (int fit = 0; fit < 3; fit++)
            for (int lay = 0; lay < 2; lay++) {
                int w = src[si][0], h = src[si][1];
                size_t stride = (size_t)w * 3 + (size_t)(si & 1) * 4;
                uint8_t *img = malloc(stride * h);
                for (size_t i = 0; i < stride * h; i++) img[i] = (uint8_t)ert_test_int(r, 0, 255);
                cam_pre_options o = {.out_w = dst[si][0], .out_h = dst[si][1], .fit = (cam_fit)fit, .pad = 114,
                                     .nhwc = lay, .bgr = si & 1,
                                     .mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}};
                size_t n = (size_t)o.out_w * o.out_h * 3;
                /* Batch of 2 (NCHW: image b at b*3*H*W): the second slot
                 * gets this image, the first is left poisoned-then-filled
                 * by a different image so slots cannot bleed. */
                float *got = malloc(2 * n * sizeof *got);
                double *ref = malloc(n * sizeof *ref);
                ert_test_poison(got, (int64_t)(2 * n));
                cam_xform xf;
                cam_preprocess(img, w, h, stride, &o, got + n, &xf);
                ref_pre(img, w, h, stride, &o, ref);
                char what[96];
                snprintf(what, sizeof what, "pre %dx%d->%dx%d fit %d nhwc %d", w, h, o.out_w, o.out_h, fit, lay);
                CHECK(ert_test_close(what, got + n, ref, (int64_t)n, 1e-4, 1e-5), "%s", what);
                int poisoned = 1;
                for (size_t i = 0; i < n; i++) poisoned &= isnan(got[i]);
                CHECK(poisoned, "%s: batch slot 0 untouched", what);
                free(img); free(got); free(ref);
            }
}

/* gray: one plane of luma (BT.601) normalised with mean[0]/std[0]; with equal
 * input and output size (the demo's 28x28 frames) the resize is the identity. */
static void test_gray(ert_test_rng *r) {
    enum { W = 28, H = 28 };
    uint8_t img[H * W * 3];
    for (int q = 0; q < W * H; q++) {
        int g = ert_test_int(r, 0, 255);
        int colour = q % 7 == 0; /* some coloured pixels: luma weights matter */
        img[3 * q] = (uint8_t)(colour ? ert_test_int(r, 0, 255) : g);
        img[3 * q + 1] = (uint8_t)(colour ? ert_test_int(r, 0, 255) : g);
        img[3 * q + 2] = (uint8_t)(colour ? ert_test_int(r, 0, 255) : g);
    }
    float got[W * H + 1];
    got[W * H] = 12345.0f; /* nothing past the one plane */
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        cam_pre_options o = {.out_w = W, .out_h = H, .fit = CAM_FIT_CENTER_CROP, .gray = 1, .nhwc = nhwc,
                             .mean = {0.286f, 0.9f, 0.9f}, .std = {0.353f, 5, 5}};
        cam_preprocess(img, W, H, (size_t)W * 3, &o, got, NULL);
        double worst = 0;
        for (int q = 0; q < W * H; q++) {
            double lum = 0.299 * img[3 * q] + 0.587 * img[3 * q + 1] + 0.114 * img[3 * q + 2];
            double ref = (lum / 255.0 - 0.286) / 0.353, d = fabs(got[q] - ref);
            if (d > worst) worst = d;
        }
        CHECK(worst < 1e-4, "gray (nhwc %d): off by %g", nhwc, worst);
        CHECK(got[W * H] == 12345.0f, "gray wrote past one plane");
    }
}

/* ert_f32_to_f16 gives the nearest half (ties to even) for normal,
 * subnormal, overflowing and special values; f16 preprocessing equals the
 * f32 output rounded that way. */
static void test_f16(ert_test_rng *r) {
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        float v;
        switch (i % 4) {
        case 0: v = (float)ert_test_uniform(r, -4, 4); break;
        case 1: v = (float)ldexp(ert_test_uniform(r, -1, 1), ert_test_int(r, -26, -14)); break; /* subnormals */
        case 2: v = (float)ldexp(ert_test_uniform(r, -1, 1), ert_test_int(r, 10, 17)); break;   /* near overflow */
        default: { uint16_t h = (uint16_t)ert_test_int(r, 0, 0x7bff); v = (float)ert_test_half_to_double(h); } /* exact */
        }
        uint16_t h = ert_f32_to_f16(v);
        double g = ert_test_half_to_double(h), err = fabs(g - v);
        if (fabs((double)v) >= 65520.0) { bad += !isinf(g) || (g > 0) != (v > 0); continue; }
        /* the neighbours (same sign) are no closer; on a tie the even one */
        for (int d = -1; d <= 1; d += 2) {
            int hn = (int)(h & 0x7fff) + d;
            if (hn < 0 || hn > 0x7bff) continue;
            double nb = ert_test_half_to_double((uint16_t)((h & 0x8000) | hn)), en = fabs(nb - v);
            if (en < err || (en == err && (h & 1))) bad++;
        }
    }
    CHECK(bad == 0, "ert_f32_to_f16: %d values not rounded to the nearest half (ties to even)", bad);
    uint16_t hn = ert_f32_to_f16(NAN);
    CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff), "NaN stays NaN: %04x", hn);
    CHECK(ert_f32_to_f16(INFINITY) == 0x7c00 && ert_f32_to_f16(-0.0f) == 0x8000, "inf, -0");
    int w = 37, h = 29;
    uint8_t *img = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) img[i] = (uint8_t)ert_test_int(r, 0, 255);
    for (int gray = 0; gray < 2; gray++) {
        cam_pre_options o = {.out_w = 20, .out_h = 17, .fit = CAM_FIT_LETTERBOX, .pad = 114, .gray = gray,
                             .mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}};
        size_t n = (size_t)20 * 17 * (gray ? 1 : 3);
        float *f = malloc(n * sizeof *f);
        uint16_t *hv = malloc(n * sizeof *hv);
        cam_preprocess(img, w, h, (size_t)w * 3, &o, f, NULL);
        o.f16 = 1;
        memset(hv, 0xff, n * sizeof *hv);
        cam_preprocess(img, w, h, (size_t)w * 3, &o, hv, NULL);
        int diff = 0;
        for (size_t i = 0; i < n; i++) diff += hv[i] != ert_f32_to_f16(f[i]);
        CHECK(diff == 0, "f16 preprocessing (gray %d): %d values differ from the f32 output rounded", gray, diff);
        free(f);
        free(hv);
    }
    free(img);
}

static void test_topk(ert_test_rng *r) {
    int n = 1000;
    float *l = malloc(n * sizeof *l);
    ert_test_fill(r, l, n, -5, 5);
    l[123] = 9; l[7] = 8.5f; l[999] = 8.5f; /* tie: lower index first */
    int idx[5];
    float p[5];
    CHECK(cam_topk(l, n, 5, 1, idx, p) == 5, "k");
    CHECK(idx[0] == 123 && idx[1] == 7 && idx[2] == 999, "order %d %d %d", idx[0], idx[1], idx[2]);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)l[i] - 9);
    CHECK(fabs(p[0] - 1 / sum) < 1e-6, "softmax p %g vs %g", p[0], 1 / sum);
    for (int i = 3; i < 5; i++) {
        int larger = 0;
        for (int j = 0; j < n; j++) larger += l[j] > l[idx[i]];
        CHECK(larger == i, "rank %d has %d larger", i, larger);
    }
    free(l);
}

static void test_nms_yolo(void) {
    cam_box b[4] = {{0, 0, 10, 10, 0.9f, 0}, {1, 1, 11, 11, 0.8f, 0}, {1, 1, 11, 11, 0.7f, 1}, {20, 20, 30, 30, 0.5f, 0}};
    int k = cam_nms(b, 4, 0.5f, 0);
    CHECK(k == 3 && b[0].score == 0.9f && b[1].score == 0.7f && b[2].score == 0.5f, "nms kept %d", k);
    k = cam_nms(b, 3, 0.5f, 1);
    CHECK(k == 2, "agnostic nms kept %d", k);

    /* 640x480 frame letterboxed into 320x320: scale 0.5, pad 40 rows on top. */
    cam_pre_options o = {.out_w = 320, .out_h = 320, .fit = CAM_FIT_LETTERBOX};
    cam_xform xf = cam_pre_xform(640, 480, &o);
    CHECK(xf.dx0 == 0 && xf.dy0 == 40 && xf.dh == 240, "letterbox xform %g %g %g", xf.dx0, xf.dy0, xf.dh);
    /* 3 classes, 6 anchors: a strong box (class 2) at frame (100,80)-(300,280),
     * a duplicate, a weak one, and noise. In input pixels: cx = 100, cy = 130,
     * w = h = 100. */
    enum { NA = 6, NV = 8 };
    float v5[NA][NV] = {{100, 130, 100, 100, 0.9f, 0.1f, 0.1f, 0.95f},
                        {102, 131, 100, 100, 0.8f, 0.1f, 0.1f, 0.9f},
                        {250, 200, 40, 20, 0.6f, 0.9f, 0.1f, 0.1f},
                        {10, 10, 5, 5, 0.1f, 0.9f, 0.1f, 0.1f},
                        {50, 60, 10, 10, 0.9f, 0.2f, 0.2f, 0.2f},
                        {0, 0, 0, 0, 0, 0, 0, 0}};
    cam_box out[8];
    int n = cam_yolo_decode(&v5[0][0], NA, NV, 0, 0.4f, 0.45f, &xf, out, 8);
    CHECK(n == 2, "yolov5 boxes %d", n);
    CHECK(n >= 1 && out[0].cls == 2 && fabsf(out[0].x0 - 100) < 1e-3f && fabsf(out[0].y0 - 80) < 1e-3f &&
              fabsf(out[0].x1 - 300) < 1e-3f && fabsf(out[0].y1 - 280) < 1e-3f && fabsf(out[0].score - 0.855f) < 1e-4f,
          "v5 box (%g,%g)-(%g,%g) c%d s%g", out[0].x0, out[0].y0, out[0].x1, out[0].y1, out[0].cls, out[0].score);
    CHECK(n >= 2 && out[1].cls == 0, "second box class 0");
    /* The same as YOLOv8 (4+C, N), no objectness. */
    float v8[NV - 1][NA];
    for (int a = 0; a < NA; a++)
        for (int k2 = 0, kk = 0; k2 < NV; k2++) {
            if (k2 == 4) continue;
            v8[kk++][a] = v5[a][k2];
        }
    n = cam_yolo_decode(&v8[0][0], NV - 1, NA, 1, 0.4f, 0.45f, &xf, out, 8);
    CHECK(n == 3 && out[0].cls == 2 && fabsf(out[0].score - 0.95f) < 1e-6f && fabsf(out[0].y1 - 280) < 1e-3f,
          "yolov8 boxes %d", n);
}

static void test_db(ert_test_rng *r) {
    int w = 96, h = 64;
    float *p = malloc((size_t)w * h * sizeof *p);
    for (int i = 0; i < w * h; i++) p[i] = (float)ert_test_uniform(r, 0, 0.2);
    /* Two text-like blocks and speckles (too small), a faint block (low score). */
    for (int y = 10; y < 20; y++) for (int x = 8; x < 48; x++) p[y * w + x] = 0.9f;
    for (int y = 40; y < 50; y++) for (int x = 50; x < 90; x++) p[y * w + x] = 0.8f;
    for (int y = 30; y < 36; y++) for (int x = 10; x < 30; x++) p[y * w + x] = 0.35f;
    p[60 * w + 5] = 0.99f; p[61 * w + 6] = 0.99f;
    int *work = malloc(2 * (size_t)w * h * sizeof *work);
    cam_box b[8];
    /* Frame 192x128 stretched into 96x64: boxes scale by 2. */
    cam_pre_options o = {.out_w = w, .out_h = h};
    cam_xform xf = cam_pre_xform(192, 128, &o);
    int n = cam_db_boxes(p, w, h, NULL, &xf, work, b, 8);
    CHECK(n == 2, "db boxes %d", n);
    /* Block 1: 40x10 -> d = 400*1.5/100 = 6: x 2..54, y 4..26, in frame x2. */
    if (n >= 1)
        CHECK(fabsf(b[0].x0 - 4) < 1e-3f && fabsf(b[0].y0 - 8) < 1e-3f && fabsf(b[0].x1 - 108) < 1e-3f &&
                  fabsf(b[0].y1 - 52) < 1e-3f && fabsf(b[0].score - 0.9f) < 1e-5f,
              "db box (%g,%g)-(%g,%g) %g", b[0].x0, b[0].y0, b[0].x1, b[0].y1, b[0].score);
    if (n >= 2) CHECK(fabsf(b[1].x1 - 192) < 1e-3f, "clamped to the map edge: %g", b[1].x1);
    free(p); free(work);
}

static void test_labels(void) {
    char path[] = "/tmp/ert_labels_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    const char text[] = "tench\r\ngoldfish\n\ngreat white shark"; /* CRLF, an empty line, no final newline */
    CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1), "write");
    close(fd);
    char **l = NULL;
    int n = cam_labels_load(path, &l);
    CHECK(n == 4 && strcmp(l[0], "tench") == 0 && strcmp(l[1], "goldfish") == 0 && l[2][0] == 0 &&
              strcmp(l[3], "great white shark") == 0, "labels: %d", n);
    cam_labels_free(l, n);
    unlink(path);
    CHECK(cam_labels_load("/nonexistent/labels.txt", &l) == 0, "missing labels file");
    /* /dev/zero never ends: its 1023-byte "lines" grew until memory ran out */
    CHECK(cam_labels_load("/dev/zero", &l) == 0, "/dev/zero as a labels file");
    CHECK(cam_labels_load("/tmp", &l) == 0, "a folder as a labels file");
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "camera_proc");
    test_yuyv(&r);
    test_pre(&r);
    test_gray(&r);
    test_topk(&r);
    test_f16(&r);
    test_nms_yolo();
    test_db(&r);
    test_labels();
    return ert_test_finish("camera_proc");
}
