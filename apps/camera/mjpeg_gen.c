/*
 * edgert-mjpeg-gen - write a test MJPEG stream (concatenated JPEGs).
 *
 *   edgert-mjpeg-gen --width W --height H --frames N [--from DIR] [--corrupt-every K]
 *                    [--quality Q] [--seed S] OUT.mjpeg
 *   edgert-mjpeg-gen --from-idx IMAGES.gz [--idx-labels LABELS.gz [--labels-out FILE]
 *                    [--idx-class K]] [--frames N] [--corrupt-every K] [--quality Q] OUT.mjpeg
 *
 * Frames are the photographs in DIR (JPEG, cycled, resized bilinearly to
 * WxH and shifted a little each frame so consecutive frames differ), or
 * without --from synthetic gradients with noise and moving boxes. With
 * --corrupt-every K, every K-th frame is followed by a corrupt one (alternately
 * truncated and with garbage entropy data). Prints one line: frames written,
 * corrupt ones, bytes.
 *
 * --from-idx renders the first N images of an IDX image file (MNIST /
 * Fashion-MNIST, gzip'd or not; N defaults to all) at their own size (e.g.
 * 28x28 gray, written as RGB with R = G = B; --width/--height are ignored).
 * With --idx-labels and --labels-out, the labels of the frames written go to
 * FILE, one integer per line, in stream order (corrupt frames have none), so
 * a consumer can score its answers. --idx-class K renders only the images
 * labelled K (a camera looking at one kind of object: the fine-tune demo
 * collects such streams into an ImageFolder). Needs zlib at build time
 * (ERT_GEN_IDX).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "cli_util.h"
#include "edgert.h"
#include "source.h"
#ifdef ERT_GEN_IDX
#include "idx.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void resize_u8(const uint8_t *s, int sw, int sh, uint8_t *d, int dw, int dh, int shift) {
    for (int y = 0; y < dh; y++) {
        double sy = (y + 0.5) * sh / dh - 0.5;
        sy = sy < 0 ? 0 : sy > sh - 1 ? sh - 1 : sy;
        int y0 = (int)sy, y1 = y0 + 1 < sh ? y0 + 1 : y0;
        double wy = sy - y0;
        for (int x = 0; x < dw; x++) {
            double sx = (x + 0.5) * sw / dw - 0.5 + shift;
            sx = sx < 0 ? 0 : sx > sw - 1 ? sw - 1 : sx;
            int x0 = (int)sx, x1 = x0 + 1 < sw ? x0 + 1 : x0;
            double wx = sx - x0;
            for (int c = 0; c < 3; c++) {
                double a = s[((size_t)y0 * sw + x0) * 3 + c] * (1 - wx) + s[((size_t)y0 * sw + x1) * 3 + c] * wx;
                double b = s[((size_t)y1 * sw + x0) * 3 + c] * (1 - wx) + s[((size_t)y1 * sw + x1) * 3 + c] * wx;
                d[((size_t)y * dw + x) * 3 + c] = (uint8_t)(a * (1 - wy) + b * wy + 0.5);
            }
        }
    }
}

static void usage(FILE *f) {
    fputs("usage: edgert-mjpeg-gen [options] OUT.mjpeg\n"
          "  --width W --height H  frame size (default 640x480; ignored with --from-idx)\n"
          "  --frames N            frames to write (default 100; with --from-idx: all images)\n"
          "  --from DIR            photographs (JPEG) in DIR, cycled and resized (default: synthetic frames)\n"
          "  --from-idx IMAGES     the images of an IDX file (MNIST / Fashion-MNIST, .gz or not) at their own size\n"
          "  --idx-labels LABELS   the IDX labels that go with --from-idx\n"
          "  --labels-out FILE     the labels of the frames written, one per line in stream order (needs --idx-labels)\n"
          "  --idx-class K         only the images labelled K (needs --idx-labels)\n"
          "  --corrupt-every K     a corrupt frame after every K-th good one (default 0: none)\n"
          "  --quality Q           JPEG quality, 1..100 (default 85)\n"
          "  --seed S              noise seed of the synthetic frames (default 1)\n",
          f);
}

int main(int argc, char **argv) {
    int w = 640, h = 480, frames = 100, every = 0, quality = 85;
    unsigned long long seed = 1;
    const char *from = NULL, *out = NULL, *from_idx = NULL, *idx_labels = NULL, *labels_out = NULL;
    int frames_given = 0, idx_class = -1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return cli_stdout_finish("edgert-mjpeg-gen", 0, 0);
        }
        else if (strcmp(argv[i], "--width") == 0) w = atoi(v), i++;
        else if (strcmp(argv[i], "--height") == 0) h = atoi(v), i++;
        else if (strcmp(argv[i], "--frames") == 0) frames = atoi(v), frames_given = 1, i++;
        else if (strcmp(argv[i], "--from-idx") == 0) from_idx = v, i++;
        else if (strcmp(argv[i], "--idx-labels") == 0) idx_labels = v, i++;
        else if (strcmp(argv[i], "--labels-out") == 0) labels_out = v, i++;
        else if (strcmp(argv[i], "--idx-class") == 0) idx_class = atoi(v), i++;
        else if (strcmp(argv[i], "--corrupt-every") == 0) every = atoi(v), i++;
        else if (strcmp(argv[i], "--quality") == 0) quality = atoi(v), i++;
        else if (strcmp(argv[i], "--seed") == 0) seed = strtoull(v, NULL, 0), i++;
        else if (strcmp(argv[i], "--from") == 0) from = v, i++;
        else if (argv[i][0] != '-' && !out) out = argv[i];
        else { usage(stderr); return 2; }
    }
    if (!out || w < 1 || h < 1 || frames < 1 || quality < 1 || quality > 100) {
        usage(stderr);
        return 2;
    }
    if ((idx_labels || labels_out) && !from_idx) {
        fprintf(stderr, "edgert-mjpeg-gen: --idx-labels and --labels-out go with --from-idx\n");
        return 2;
    }
    if (labels_out && !idx_labels) {
        fprintf(stderr, "edgert-mjpeg-gen: --labels-out needs --idx-labels\n");
        return 2;
    }
    if (idx_class >= 0 && !idx_labels) {
        fprintf(stderr, "edgert-mjpeg-gen: --idx-class needs --idx-labels\n");
        return 2;
    }
    /* IDX images (and labels), read whole. */
    const uint8_t *idx_px = NULL, *idx_lab = NULL;
    int64_t *sel = NULL; /* the IDX images rendered, in order */
#ifdef ERT_GEN_IDX
    idx_array ia = {0}, la = {0};
    if (from_idx) {
        char e[256];
        if (idx_load(from_idx, &ia, e, sizeof e)) { fprintf(stderr, "edgert-mjpeg-gen: %s\n", e); return 1; }
        if (ia.ndim != 3) { fprintf(stderr, "edgert-mjpeg-gen: %s: not an image file (N, H, W)\n", from_idx); return 1; }
        if (idx_labels) {
            if (idx_load(idx_labels, &la, e, sizeof e)) { fprintf(stderr, "edgert-mjpeg-gen: %s\n", e); return 1; }
            if (la.ndim != 1 || la.dims[0] != ia.dims[0]) {
                fprintf(stderr, "edgert-mjpeg-gen: %s: not %lld labels\n", idx_labels, (long long)ia.dims[0]);
                return 1;
            }
            idx_lab = la.data;
        }
        idx_px = ia.data;
        h = (int)ia.dims[1];
        w = (int)ia.dims[2];
        sel = malloc((size_t)ia.dims[0] * sizeof *sel);
        if (!sel) { fprintf(stderr, "edgert-mjpeg-gen: out of memory\n"); return 1; }
        int64_t n_sel = 0;
        for (int64_t k = 0; k < ia.dims[0]; k++)
            if (idx_class < 0 || idx_lab[k] == idx_class) sel[n_sel++] = k;
        if (n_sel == 0) { fprintf(stderr, "edgert-mjpeg-gen: no image labelled %d\n", idx_class); return 1; }
        if (!frames_given || frames > n_sel) frames = (int)n_sel;
    }
#else
    (void)frames_given;
    if (from_idx) {
        fprintf(stderr, "edgert-mjpeg-gen: --from-idx needs a build with zlib\n");
        return 1;
    }
#endif
    FILE *lf = NULL;
    if (labels_out && !(lf = fopen(labels_out, "w"))) { perror(labels_out); return 1; }
    ert_context *ctx;
    ert_jpeg *j;
    if (ert_context_create(NULL, &ctx) != ERT_OK || ert_jpeg_create(ctx, &j) != ERT_OK) {
        fprintf(stderr, "edgert-mjpeg-gen: no JPEG support in this build\n");
        return 1;
    }
    /* Source photographs, decoded once. */
    uint8_t *photos[64];
    int pw[64], ph[64], n_photos = 0;
    if (from) {
        char err[256];
        cam_source *src;
        if (cam_source_open(from, NULL, &src, err, sizeof err) != CAM_OK) { fprintf(stderr, "%s\n", err); return 1; }
        cam_frame f;
        while (n_photos < 64 && cam_source_next(src, &f) == CAM_OK) {
            int iw, ih;
            if (f.kind != CAM_FRAME_JPEG || ert_jpeg_info(j, f.data, f.bytes, &iw, &ih, NULL) != ERT_OK) continue;
            uint8_t *px = malloc((size_t)iw * ih * 3);
            if (px && ert_jpeg_decode(j, f.data, f.bytes, ERT_PIXEL_RGB, px, (size_t)iw * ih * 3, 0, NULL, NULL) == ERT_OK) {
                photos[n_photos] = px; pw[n_photos] = iw; ph[n_photos] = ih; n_photos++;
            } else free(px);
        }
        cam_source_close(src);
        if (!n_photos) { fprintf(stderr, "edgert-mjpeg-gen: no decodable JPEG in %s\n", from); return 1; }
    }
    FILE *f = fopen(out, "wb");
    if (!f) { perror(out); return 1; }
    cli_rng r;
    cli_rng_seed(&r, seed);
    uint8_t *px = malloc((size_t)w * h * 3);
    size_t cap = ert_jpeg_encode_bound(w, h), len, total = 0;
    uint8_t *jpg = malloc(cap);
    int n_corrupt = 0;
    for (int i = 0; i < frames; i++) {
        if (idx_px) {
            const uint8_t *g = idx_px + (size_t)sel[i] * w * h;
            for (size_t q = 0; q < (size_t)w * h; q++) px[3 * q] = px[3 * q + 1] = px[3 * q + 2] = g[q];
            if (lf) fprintf(lf, "%d\n", idx_lab[sel[i]]);
        } else if (n_photos) {
            int k = i % n_photos;
            resize_u8(photos[k], pw[k], ph[k], px, w, h, (i / n_photos) % 16);
        } else {
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    uint8_t *p = px + ((size_t)y * w + x) * 3;
                    int n = (int)(cli_rng_next(&r) & 15);
                    p[0] = (uint8_t)((x * 255 / w + n + i * 3) & 255);
                    p[1] = (uint8_t)(y * 255 / h + n / 2);
                    p[2] = (uint8_t)(((x + y + i * 5) * 128 / (w + h)) + n);
                    int bx = (i * 7) % (w > 64 ? w - 64 : 1), by = (i * 5) % (h > 64 ? h - 64 : 1);
                    if (x >= bx && x < bx + 64 && y >= by && y < by + 64) p[0] = 250, p[1] = 40, p[2] = 40;
                }
        }
        if (ert_jpeg_encode(j, px, w, h, 0, ERT_PIXEL_RGB, quality, jpg, cap, &len) != ERT_OK) {
            fprintf(stderr, "encode: %s\n", ert_last_error(ctx));
            return 1;
        }
        if (fwrite(jpg, 1, len, f) != len) break; /* reported at the close */
        total += len;
        if (every > 0 && i % every == every - 1) {
            if (n_corrupt % 2 == 0) {
                fwrite(jpg, 1, len / 3, f); /* truncated */
                total += len / 3;
            } else {
                fwrite(jpg, 1, len / 4, f); /* headers + some data, then garbage, then EOI */
                for (size_t k = 0; k < len / 4; k++) fputc((int)(cli_rng_next(&r) % 255), f);
                fputc(0xFF, f);
                fputc(0xD9, f);
                total += len / 2 + 2;
            }
            n_corrupt++;
        }
    }
    if (ferror(f) | fclose(f)) { perror(out); return 1; }
    if (lf && fclose(lf) != 0) { perror(labels_out); return 1; }
    printf("%d frames (%dx%d), %d corrupt, %zu bytes -> %s\n", frames, w, h, n_corrupt, total, out);
    for (int k = 0; k < n_photos; k++) free(photos[k]);
    free(px);
    free(jpg);
    free(sel);
    ert_jpeg_free(j);
    ert_context_free(ctx);
#ifdef ERT_GEN_IDX
    idx_free(&ia);
    idx_free(&la);
#endif
    return cli_stdout_finish("edgert-mjpeg-gen", 0, 0);
}
