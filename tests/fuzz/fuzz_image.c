/* libFuzzer target for the image loaders (tests/fuzz/CMakeLists.txt): the bytes
 * as a JPEG (header, then a decode into a buffer of exactly the size the
 * header gives, in RGB or grey), as a PGM/PPM, and through the MJPEG stream
 * splitter's frame boundaries (each frame decoded too). Sizes over 2^22
 * pixels are only header-checked to keep each run fast. */
#include "edgert.h"
#include "source.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void try_jpeg(ert_jpeg *j, const uint8_t *d, size_t n, int gray) {
    int w, h, c;
    if (ert_jpeg_info(j, d, n, &w, &h, &c) != ERT_OK) return;
    if ((uint64_t)w * (uint64_t)h > (1u << 22)) return;
    size_t bytes = (size_t)w * h * (gray ? 1 : 3);
    uint8_t *dst = malloc(bytes);
    if (!dst) return;
    (void)ert_jpeg_decode(j, d, n, gray ? ERT_PIXEL_GRAY : ERT_PIXEL_RGB, dst, bytes, 0, NULL, NULL);
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ert_context *ctx;
    ert_jpeg *j = NULL;
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 0;
    if (ert_jpeg_create(ctx, &j) == ERT_OK) {
        try_jpeg(j, data, size, size & 1);
        size_t off = 0, s, e;
        int frames = 0;
        while (off < size && frames < 8 && cam_mjpeg_split(data + off, size - off, 1, &s, &e)) {
            if (e <= s || off + e > size) __builtin_trap(); /* splitter contract */
            try_jpeg(j, data + off + s, e - s, 0);
            off += e;
            frames++;
        }
        ert_jpeg_free(j);
    }
    int w, h, c;
    uint8_t *px = NULL;
    if (ert_image_decode_pnm(ctx, data, size, &w, &h, &c, &px) == ERT_OK) ert_free(px);
    ert_context_free(ctx);
    return 0;
}
