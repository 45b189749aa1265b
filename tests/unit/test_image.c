#define _POSIX_C_SOURCE 200809L
/* loaders/image: PNM read/write; JPEG encode/decode round trip, strides,
 * buffer checks, and hostile input (non-JPEG, truncated at every length
 * class, bit flips, random bytes): always a status, never a crash (ASan in
 * CI). Decoding the real photographs against a reference decoder is
 * test_image_ref.c. Without JPEG support the PNM part runs and the test
 * reports SKIPPED. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ert_context *ctx;

static void synth(uint8_t *px, int w, int h, int c, ert_test_rng *r) {
    /* Smooth gradients plus a little noise: JPEG-friendly, not constant. */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) {
                int v = (x * 255 / (w > 1 ? w - 1 : 1) * (k + 1) + y * 255 / (h > 1 ? h - 1 : 1) * (3 - k)) / 4;
                v += ert_test_int(r, -4, 4);
                px[((size_t)y * w + x) * c + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n) {
    double se = 0;
    for (size_t i = 0; i < n; i++) se += (double)(a[i] - b[i]) * (a[i] - b[i]);
    if (se == 0) return 99;
    return 10 * log10(255.0 * 255.0 / (se / (double)n));
}

static void test_pnm(ert_test_rng *r) {
    char path[] = "/tmp/ert_test_pnm_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    for (int c = 1; c <= 3; c += 2) {
        int w = 37, h = 11;
        uint8_t px[37 * 11 * 3];
        synth(px, w, h, c, r);
        CHECK_OK(ert_image_write_pnm(ctx, path, px, w, h, c), ctx);
        int w2 = 0, h2 = 0, c2 = 0;
        uint8_t *got = NULL;
        CHECK_OK(ert_image_read_pnm(ctx, path, &w2, &h2, &c2, &got), ctx);
        CHECK(w2 == w && h2 == h && c2 == c && got && memcmp(got, px, (size_t)w * h * c) == 0,
              "pnm round trip c=%d", c);
        ert_free(got);
    }
    unlink(path);
    /* Comments in the header, and hostile headers. */
    const char ok[] = "P5\n# a comment\n2 1\n255\n\x01\x02";
    int w, h, c;
    uint8_t *px = NULL;
    CHECK_OK(ert_image_decode_pnm(ctx, ok, sizeof ok - 1, &w, &h, &c, &px), ctx);
    CHECK(px && w == 2 && h == 1 && c == 1 && px[1] == 2, "pnm with comment");
    ert_free(px);
    const char *bad[] = {"P3\n1 1\n255\n0 0 0", "P5\n2 1\n255\n\x01", "P6\n99999 1\n255\n",
                         "P5\n0 1\n255\n", "P5\n1 1\n65535\n\x00\x00", "P5\n1 1\n255", "P5", "",
                         "P6\n32768 32768\n255\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        px = NULL;
        ert_status st = ert_image_decode_pnm(ctx, bad[i], strlen(bad[i]), &w, &h, &c, &px);
        CHECK(st == ERT_E_FORMAT && px == NULL, "bad pnm %zu -> %s", i, ert_status_str(st));
        CHECK(ert_last_error(ctx)[0] != 0, "bad pnm %zu has a message", i);
    }
    CHECK(ert_image_read_pnm(ctx, "/nonexistent/x.ppm", &w, &h, &c, &px) == ERT_E_IO, "missing file");
    /* not a regular file: refused at once (a FIFO without a writer used to
     * block the open; /dev/zero was read up to the 3 GB size bound) */
    char fifo[] = "/tmp/ert_image_fifo_XXXXXX";
    int tfd = mkstemp(fifo);
    if (tfd >= 0) close(tfd);
    CHECK(tfd >= 0 && unlink(fifo) == 0 && mkfifo(fifo, 0600) == 0, "mkfifo");
    const char *irregular[] = {fifo, "/dev/zero", "/tmp"};
    for (int i = 0; i < 3; i++) {
        px = NULL;
        ert_status st = ert_image_read_pnm(ctx, irregular[i], &w, &h, &c, &px);
        CHECK(st == ERT_E_IO && px == NULL && strstr(ert_last_error(ctx), "not a regular file"), "%s: %s: %s",
              irregular[i], ert_status_str(st), ert_last_error(ctx));
    }
    unlink(fifo);
}

/* Every decode of hostile data must give OK or FORMAT and never write past
 * the buffer (ASan watches the heap buffer of exactly the right size). */
static int hostile_decode(ert_jpeg *j, const uint8_t *data, size_t n, uint8_t *dst, size_t dst_bytes) {
    ert_status st = ert_jpeg_decode(j, data, n, ERT_PIXEL_RGB, dst, dst_bytes, 0, NULL, NULL);
    CHECK(st == ERT_OK || st == ERT_E_FORMAT || st == ERT_E_ARG, "hostile -> %s", ert_status_str(st));
    return st == ERT_OK;
}

static void test_jpeg(ert_test_rng *r) {
    ert_jpeg *j = NULL;
    CHECK_OK(ert_jpeg_create(ctx, &j), ctx);
    if (!j) return;
    const int sizes[][2] = {{64, 48}, {33, 17}, {1, 1}, {640, 480}};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int w = sizes[si][0], h = sizes[si][1];
        for (int gray = 0; gray < 2; gray++) {
            int c = gray ? 1 : 3;
            ert_pixel_format fmt = gray ? ERT_PIXEL_GRAY : ERT_PIXEL_RGB;
            size_t n = (size_t)w * h * c;
            uint8_t *px = malloc(n), *back = malloc(n);
            synth(px, w, h, c, r);
            size_t cap = ert_jpeg_encode_bound(w, h), len = 0;
            uint8_t *jpg = malloc(cap);
            CHECK_OK(ert_jpeg_encode(j, px, w, h, 0, fmt, 95, jpg, cap, &len), ctx);
            CHECK(len > 0 && len <= cap && jpg[0] == 0xFF && jpg[1] == 0xD8, "encoded %zu bytes", len);
            int iw = 0, ih = 0, ic = 0;
            CHECK_OK(ert_jpeg_info(j, jpg, len, &iw, &ih, &ic), ctx);
            CHECK(iw == w && ih == h && ic == c, "info %dx%dx%d want %dx%dx%d", iw, ih, ic, w, h, c);
            int dw = 0, dh = 0;
            CHECK_OK(ert_jpeg_decode(j, jpg, len, fmt, back, n, 0, &dw, &dh), ctx);
            double p = psnr(px, back, n);
            CHECK(dw == w && dh == h && p > 30, "%dx%d c=%d round trip PSNR %.1f dB", w, h, c, p);
            /* Too small a buffer: refused before writing. */
            CHECK(ert_jpeg_decode(j, jpg, len, fmt, back, n - 1, 0, NULL, NULL) == ERT_E_ARG,
                  "short dst refused");
            CHECK(ert_jpeg_encode(j, px, w, h, 0, fmt, 95, jpg, 10, &len) == ERT_E_ARG || w * h == 1,
                  "short out refused");
            /* YUYV (camera frames, ert_preprocessor_run) is no JPEG layout */
            CHECK(ert_jpeg_decode(j, jpg, len, ERT_PIXEL_YUYV, back, n, 0, NULL, NULL) == ERT_E_ARG &&
                      ert_jpeg_encode(j, px, w, h, 0, ERT_PIXEL_YUYV, 95, jpg, cap, &len) == ERT_E_ARG,
                  "YUYV refused by the JPEG calls");
            if (!gray && si == 0) {
                /* Strided decode into a wider buffer leaves the padding alone;
                 * BGR is RGB reversed; RGBA has alpha 255. */
                size_t stride = (size_t)w * 3 + 5;
                uint8_t *wide = malloc(stride * h);
                memset(wide, 0xAB, stride * h);
                CHECK_OK(ert_jpeg_decode(j, jpg, len, ERT_PIXEL_RGB, wide, stride * h, stride, NULL, NULL), ctx);
                int pad_ok = 1, px_ok = 1;
                for (int y = 0; y < h; y++) {
                    pad_ok &= wide[y * stride + (size_t)w * 3] == 0xAB;
                    px_ok &= memcmp(wide + y * stride, back + (size_t)y * w * 3, (size_t)w * 3) == 0;
                }
                CHECK(pad_ok && px_ok, "strided decode");
                uint8_t *bgr = malloc(n), *rgba = malloc((size_t)w * h * 4);
                CHECK_OK(ert_jpeg_decode(j, jpg, len, ERT_PIXEL_BGR, bgr, n, 0, NULL, NULL), ctx);
                CHECK_OK(ert_jpeg_decode(j, jpg, len, ERT_PIXEL_RGBA, rgba, (size_t)w * h * 4, 0, NULL, NULL), ctx);
                int bgr_ok = 1, rgba_ok = 1;
                for (int i = 0; i < w * h; i++) {
                    bgr_ok &= bgr[i * 3] == back[i * 3 + 2] && bgr[i * 3 + 2] == back[i * 3];
                    rgba_ok &= rgba[i * 4] == back[i * 3] && rgba[i * 4 + 3] == 255;
                }
                CHECK(bgr_ok && rgba_ok, "BGR/RGBA decode agree with RGB");
                free(wide); free(bgr); free(rgba);
                /* Hostile: every truncation length, bit flips, garbage. */
                int n_ok = 0;
                for (size_t cut = 0; cut < len; cut += (cut < 700 ? 1 : 37))
                    n_ok += hostile_decode(j, jpg, cut, back, n);
                CHECK(n_ok == 0, "%d truncated JPEGs decoded as OK", n_ok);
                CHECK(ert_jpeg_decode(j, jpg, len / 2, ERT_PIXEL_RGB, back, n, 0, NULL, NULL) == ERT_E_FORMAT &&
                          ert_last_error(ctx)[0], "truncated -> FORMAT with message (%s)", ert_last_error(ctx));
                uint8_t *mut = malloc(len);
                for (int t = 0; t < 400; t++) {
                    memcpy(mut, jpg, len);
                    int flips = ert_test_int(r, 1, 8);
                    for (int f = 0; f < flips; f++) mut[ert_test_int(r, 0, (int)len - 1)] ^= (uint8_t)(1u << ert_test_int(r, 0, 7));
                    hostile_decode(j, mut, len, back, n);
                }
                for (int t = 0; t < 50; t++) {
                    for (size_t i = 2; i < len; i++) mut[i] = (uint8_t)ert_test_u64(r);
                    mut[0] = 0xFF; mut[1] = 0xD8;
                    hostile_decode(j, mut, len, back, n);
                }
                free(mut);
                const char png[] = "\x89PNG\r\n\x1a\n0000000000000000";
                CHECK(ert_jpeg_decode(j, png, sizeof png - 1, ERT_PIXEL_RGB, back, n, 0, NULL, NULL) == ERT_E_FORMAT,
                      "PNG refused");
                CHECK(strstr(ert_last_error(ctx), "not a JPEG") != NULL, "message: %s", ert_last_error(ctx));
                CHECK(ert_jpeg_decode(j, NULL, 0, ERT_PIXEL_RGB, back, n, 0, NULL, NULL) == ERT_E_FORMAT, "empty");
                CHECK(ert_jpeg_decode(j, jpg, len, (ert_pixel_format)99, back, n, 0, NULL, NULL) == ERT_E_ARG,
                      "bad format");
                CHECK(ert_jpeg_encode(j, px, w, h, 0, fmt, 0, jpg, cap, &len) == ERT_E_ARG, "quality 0");
                /* Scaled decode: size rounds up, bad denominators refused,
                 * the buffer is checked against the scaled size. */
                CHECK_OK(ert_jpeg_encode(j, px, w, h, 0, fmt, 95, jpg, cap, &len), ctx);
                int sw = 0, sh = 0, ew, eh;
                ert_jpeg_scaled_size(w, h, 4, &ew, &eh);
                CHECK(ew == 16 && eh == 12, "scaled size %dx%d", ew, eh);
                CHECK_OK(ert_jpeg_decode_scaled(j, jpg, len, 4, ERT_PIXEL_RGB, back, (size_t)ew * eh * 3, 0, &sw, &sh), ctx);
                CHECK(sw == ew && sh == eh, "scaled decode %dx%d", sw, sh);
                CHECK(ert_jpeg_decode_scaled(j, jpg, len, 3, ERT_PIXEL_RGB, back, n, 0, NULL, NULL) == ERT_E_ARG, "1/3");
                CHECK(ert_jpeg_decode_scaled(j, jpg, len, 2, ERT_PIXEL_RGB, back, (size_t)32 * 24 * 3 - 1, 0, NULL, NULL) == ERT_E_ARG,
                      "short scaled dst");
            }
            free(px); free(back); free(jpg);
        }
    }
    ert_jpeg_free(j);
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "image");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    test_pnm(&r);
    CHECK(ert_pixel_channels(ERT_PIXEL_RGBA) == 4 && ert_pixel_channels(ERT_PIXEL_YUYV) == 2 &&
              ert_pixel_channels(ERT_PIXEL_COUNT) == 0, "channels");
    if (!ert_jpeg_available()) {
        ert_jpeg *j = NULL;
        CHECK(ert_jpeg_create(ctx, &j) == ERT_E_UNSUPPORTED && j == NULL, "create without JPEG");
        ert_context_free(ctx);
        if (ert_test_fail) return ert_test_finish("image");
        return ert_test_skip("image", "built without JPEG support (ERT_JPEG off or libturbojpeg missing); PNM part passed");
    }
    test_jpeg(&r);
    ert_context_free(ctx);
    return ert_test_finish("image");
}
