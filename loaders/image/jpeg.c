/* JPEG decode/encode through the TurboJPEG API of libjpeg-turbo.
 *
 * Uses the TurboJPEG 2 functions (tjInitDecompress, tjDecompressHeader3,
 * tjDecompress2, tjCompress2): libjpeg-turbo 2.1 has only these, and 3.x keeps
 * them as its backward-compatible API, so one code path compiles on both.
 * Flags that only newer versions have are used when their macros exist.
 *
 * Hostile input: the header is parsed first, the image size checked against
 * the caller's buffer and a pixel limit before any pixel is written; libjpeg
 * warnings (premature end of data, corrupt entropy data) stop the decode and
 * are reported as ERT_E_FORMAT like fatal errors (a camera frame that decodes
 * half-grey is a corrupt frame). Progressive files are limited in scans when
 * the library supports it (TJFLAG_LIMITSCANS), which bounds decode time.
 *
 * Without ERT_HAVE_JPEG the same functions exist and report
 * ERT_E_UNSUPPORTED, so callers link either way. */
#include "ert_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#ifdef ERT_HAVE_JPEG
#include <turbojpeg.h>

/* Images larger than this (pixels) are refused before decoding: 2^28 is a
 * 16k x 16k frame, far past any camera, and keeps w*h*4 inside an int. */
#define ERT_JPEG_MAX_PIXELS (1u << 28)

struct ert_jpeg {
    ert_context *ctx;
    tjhandle dec, enc;
};

int ert_jpeg_available(void) { return 1; }

static int tj_format(ert_pixel_format f) {
    switch (f) {
    case ERT_PIXEL_RGB: return TJPF_RGB;
    case ERT_PIXEL_BGR: return TJPF_BGR;
    case ERT_PIXEL_GRAY: return TJPF_GRAY;
    case ERT_PIXEL_RGBA: return TJPF_RGBA;
    case ERT_PIXEL_BGRA: return TJPF_BGRA;
    default: return -1;
    }
}

static int tj_dec_flags(void) {
    int fl = TJFLAG_STOPONWARNING;
#ifdef TJFLAG_LIMITSCANS
    fl |= TJFLAG_LIMITSCANS;
#endif
    return fl;
}

ert_status ert_jpeg_create(ert_context *ctx, ert_jpeg **out) {
    if (!out) return ert_set_error(ctx, ERT_E_ARG, "jpeg_create: NULL out");
    ert_jpeg *j = calloc(1, sizeof *j);
    if (!j) return ert_set_error(ctx, ERT_E_NOMEM, "jpeg_create: out of memory");
    j->ctx = ctx;
    j->dec = tjInitDecompress();
    j->enc = tjInitCompress();
    if (!j->dec || !j->enc) {
        ert_jpeg_free(j);
        return ert_set_error(ctx, ERT_E_NOMEM, "jpeg_create: TurboJPEG init failed");
    }
    *out = j;
    return ERT_OK;
}

void ert_jpeg_free(ert_jpeg *j) {
    if (!j) return;
    if (j->dec) tjDestroy(j->dec);
    if (j->enc) tjDestroy(j->enc);
    free(j);
}

/* A failed header read or decode can leave the TurboJPEG 2.1 decompressor
 * half-way through a file (its error path does not always abort the libjpeg
 * state; the next valid file then fails with e.g. "Bogus DQT index"). After
 * any failure the handle is replaced: errors are rare, so this costs nothing
 * per good frame. The message is taken before the old handle goes. */
static ert_status jpeg_fail(ert_jpeg *j, const char *what) {
    ert_status st = ert_set_error(j->ctx, ERT_E_FORMAT, "jpeg: %s: %s", what, tjGetErrorStr2(j->dec));
    tjhandle fresh = tjInitDecompress();
    if (fresh) {
        tjDestroy(j->dec);
        j->dec = fresh;
    }
    return st;
}

/* Header of data, checked: sizes positive and under the pixel limit. */
static ert_status jpeg_header(ert_jpeg *j, const void *data, size_t size, int *w, int *h,
                              int *subsamp, int *colorspace) {
    if (!data || size == 0) return ert_set_error(j->ctx, ERT_E_FORMAT, "jpeg: empty data");
    const uint8_t *p = data;
    /* SOI first: tjDecompressHeader3 would also refuse it, but this gives the
     * common mistake (a PNG, a text file) a plain message. */
    if (size < 4 || p[0] != 0xFF || p[1] != 0xD8)
        return ert_set_error(j->ctx, ERT_E_FORMAT, "jpeg: not a JPEG (no SOI marker)");
    if (size > ULONG_MAX) return ert_set_error(j->ctx, ERT_E_FORMAT, "jpeg: too large");
    if (tjDecompressHeader3(j->dec, (const unsigned char *)data, (unsigned long)size, w, h,
                            subsamp, colorspace) != 0)
        return jpeg_fail(j, "bad header");
    if (*w < 1 || *h < 1 || (uint64_t)*w * (uint64_t)*h > ERT_JPEG_MAX_PIXELS)
        return ert_set_error(j->ctx, ERT_E_FORMAT, "jpeg: image size %dx%d out of range", *w, *h);
    return ERT_OK;
}

ert_status ert_jpeg_info(ert_jpeg *j, const void *data, size_t size,
                         int *width, int *height, int *channels) {
    if (!j) return ERT_E_ARG;
    int w, h, ss, cs;
    ert_status st = jpeg_header(j, data, size, &w, &h, &ss, &cs);
    if (st != ERT_OK) return st;
    if (width) *width = w;
    if (height) *height = h;
    if (channels) *channels = cs == TJCS_GRAY ? 1 : 3;
    return ERT_OK;
}

ert_status ert_jpeg_decode(ert_jpeg *j, const void *data, size_t size,
                           ert_pixel_format fmt, void *dst, size_t dst_bytes,
                           size_t dst_stride, int *width, int *height) {
    return ert_jpeg_decode_scaled(j, data, size, 1, fmt, dst, dst_bytes, dst_stride, width, height);
}

ert_status ert_jpeg_decode_scaled(ert_jpeg *j, const void *data, size_t size, int denom,
                                  ert_pixel_format fmt, void *dst, size_t dst_bytes,
                                  size_t dst_stride, int *width, int *height) {
    if (!j) return ERT_E_ARG;
    int pf = tj_format(fmt);
    if (pf < 0 || !dst) return ert_set_error(j->ctx, ERT_E_ARG, "jpeg_decode: bad format or NULL dst");
    if (denom != 1 && denom != 2 && denom != 4 && denom != 8)
        return ert_set_error(j->ctx, ERT_E_ARG, "jpeg_decode: scale 1/%d: use 1, 2, 4 or 8", denom);
    int w, h, ss, cs;
    ert_status st = jpeg_header(j, data, size, &w, &h, &ss, &cs);
    if (st != ERT_OK) return st;
    /* TurboJPEG picks the IDCT scaling factor from the size asked for;
     * 1/2, 1/4 and 1/8 are always among its factors. */
    ert_jpeg_scaled_size(w, h, denom, &w, &h);
    size_t row = (size_t)w * (size_t)ert_pixel_channels(fmt);
    size_t stride = dst_stride ? dst_stride : row;
    if (stride < row || stride > INT_MAX)
        return ert_set_error(j->ctx, ERT_E_ARG, "jpeg_decode: stride %zu < row of %zu bytes", stride, row);
    size_t need = stride * (size_t)(h - 1) + row;
    if (dst_bytes < need)
        return ert_set_error(j->ctx, ERT_E_ARG, "jpeg_decode: %dx%d image needs %zu bytes, buffer has %zu",
                             w, h, need, dst_bytes);
    if (tjDecompress2(j->dec, (const unsigned char *)data, (unsigned long)size, (unsigned char *)dst,
                      w, (int)stride, h, pf, tj_dec_flags()) != 0)
        return jpeg_fail(j, "corrupt data");
    if (width) *width = w;
    if (height) *height = h;
    return ERT_OK;
}

void ert_jpeg_scaled_size(int width, int height, int denom, int *sw, int *sh) {
    if (denom < 1) denom = 1;
    if (sw) *sw = (int)(((int64_t)width + denom - 1) / denom);
    if (sh) *sh = (int)(((int64_t)height + denom - 1) / denom);
}

size_t ert_jpeg_encode_bound(int width, int height) {
    if (width < 1 || height < 1 || (uint64_t)width * (uint64_t)height > ERT_JPEG_MAX_PIXELS) return 0;
    /* 4:2:0 pads to 16x16 MCUs, so for tiny images it can need more than
     * 4:4:4: the bound is the largest over the subsamplings encode uses. */
    unsigned long n = tjBufSize(width, height, TJSAMP_444);
    unsigned long n420 = tjBufSize(width, height, TJSAMP_420);
    if (n == (unsigned long)-1 || n420 == (unsigned long)-1) return 0;
    return (size_t)(n420 > n ? n420 : n);
}

ert_status ert_jpeg_encode(ert_jpeg *j, const void *src, int width, int height,
                           size_t src_stride, ert_pixel_format fmt, int quality,
                           void *out, size_t out_cap, size_t *out_bytes) {
    if (!j) return ERT_E_ARG;
    int pf = tj_format(fmt);
    if (pf < 0 || !src || !out || !out_bytes || quality < 1 || quality > 100)
        return ert_set_error(j->ctx, ERT_E_ARG, "jpeg_encode: bad format, quality %d or NULL buffer", quality);
    size_t bound = ert_jpeg_encode_bound(width, height);
    if (bound == 0) return ert_set_error(j->ctx, ERT_E_ARG, "jpeg_encode: bad size %dx%d", width, height);
    size_t row = (size_t)width * (size_t)ert_pixel_channels(fmt);
    size_t stride = src_stride ? src_stride : row;
    if (stride < row || stride > INT_MAX)
        return ert_set_error(j->ctx, ERT_E_ARG, "jpeg_encode: stride %zu < row of %zu bytes", stride, row);
    int subsamp = fmt == ERT_PIXEL_GRAY ? TJSAMP_GRAY : TJSAMP_420;
    /* With TJFLAG_NOREALLOC TurboJPEG writes into `out` and fails instead of
     * growing it, so it needs its own bound for this subsampling. */
    unsigned long need = tjBufSize(width, height, subsamp);
    if (out_cap < need)
        return ert_set_error(j->ctx, ERT_E_ARG, "jpeg_encode: output buffer %zu bytes < %lu needed",
                             out_cap, need);
    unsigned char *buf = out;
    unsigned long len = (unsigned long)out_cap;
    if (tjCompress2(j->enc, (const unsigned char *)src, width, (int)stride, height, pf, &buf, &len,
                    subsamp, quality, TJFLAG_NOREALLOC) != 0)
    {
        /* As for decode: a failed compressor is replaced, not reused. */
        ert_status st = ert_set_error(j->ctx, ERT_E_FORMAT, "jpeg_encode: %s", tjGetErrorStr2(j->enc));
        tjhandle fresh = tjInitCompress();
        if (fresh) {
            tjDestroy(j->enc);
            j->enc = fresh;
        }
        return st;
    }
    *out_bytes = (size_t)len;
    return ERT_OK;
}

#else /* !ERT_HAVE_JPEG */

struct ert_jpeg { int unused; };

int ert_jpeg_available(void) { return 0; }

ert_status ert_jpeg_create(ert_context *ctx, ert_jpeg **out) {
    (void)out;
    return ert_set_error(ctx, ERT_E_UNSUPPORTED, "JPEG support not built (configure with -DERT_JPEG=ON and libturbojpeg)");
}
void ert_jpeg_free(ert_jpeg *j) { (void)j; }
ert_status ert_jpeg_info(ert_jpeg *j, const void *data, size_t size, int *width, int *height, int *channels) {
    (void)j; (void)data; (void)size; (void)width; (void)height; (void)channels;
    return ERT_E_ARG;
}
ert_status ert_jpeg_decode(ert_jpeg *j, const void *data, size_t size, ert_pixel_format fmt, void *dst,
                           size_t dst_bytes, size_t dst_stride, int *width, int *height) {
    (void)j; (void)data; (void)size; (void)fmt; (void)dst; (void)dst_bytes; (void)dst_stride;
    (void)width; (void)height;
    return ERT_E_ARG;
}
ert_status ert_jpeg_decode_scaled(ert_jpeg *j, const void *data, size_t size, int denom, ert_pixel_format fmt,
                                  void *dst, size_t dst_bytes, size_t dst_stride, int *width, int *height) {
    (void)j; (void)data; (void)size; (void)denom; (void)fmt; (void)dst; (void)dst_bytes; (void)dst_stride;
    (void)width; (void)height;
    return ERT_E_ARG;
}
void ert_jpeg_scaled_size(int width, int height, int denom, int *sw, int *sh) {
    if (denom < 1) denom = 1;
    if (sw) *sw = (int)(((int64_t)width + denom - 1) / denom);
    if (sh) *sh = (int)(((int64_t)height + denom - 1) / denom);
}
size_t ert_jpeg_encode_bound(int width, int height) { (void)width; (void)height; return 0; }
ert_status ert_jpeg_encode(ert_jpeg *j, const void *src, int width, int height, size_t src_stride,
                           ert_pixel_format fmt, int quality, void *out, size_t out_cap, size_t *out_bytes) {
    (void)j; (void)src; (void)width; (void)height; (void)src_stride; (void)fmt; (void)quality;
    (void)out; (void)out_cap; (void)out_bytes;
    return ERT_E_ARG;
}

#endif
