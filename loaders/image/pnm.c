/* Binary PGM (P5) / PPM (P6) read and write, maxval 255: the lossless image
 * format of the tests. The reader treats the bytes as hostile: every number is
 * bounded, the pixel bytes must all be there. */
#include "ert_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ERT_PNM_MAX_DIM 32768

int ert_pixel_channels(ert_pixel_format fmt) {
    switch (fmt) {
    case ERT_PIXEL_RGB: case ERT_PIXEL_BGR: return 3;
    case ERT_PIXEL_GRAY: return 1;
    case ERT_PIXEL_RGBA: case ERT_PIXEL_BGRA: return 4;
    case ERT_PIXEL_YUYV: return 2;
    default: return 0;
    }
}

/* Skips whitespace and '#' comments, then reads a decimal number <= limit. */
static bool pnm_number(const uint8_t *p, size_t n, size_t *pos, long limit, long *out) {
    size_t i = *pos;
    for (;;) {
        while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r' ||
                         p[i] == '\v' || p[i] == '\f'))
            i++;
        if (i < n && p[i] == '#') {
            while (i < n && p[i] != '\n') i++;
            continue;
        }
        break;
    }
    if (i >= n || p[i] < '0' || p[i] > '9') return false;
    long v = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        v = v * 10 + (p[i] - '0');
        if (v > limit) return false;
        i++;
    }
    *pos = i;
    *out = v;
    return true;
}

ert_status ert_image_decode_pnm(ert_context *ctx, const void *data, size_t size,
                                int *width, int *height, int *channels,
                                uint8_t **pixels) {
    if (!data || !width || !height || !channels || !pixels)
        return ert_set_error(ctx, ERT_E_ARG, "decode_pnm: NULL argument");
    const uint8_t *p = data;
    if (size < 2 || p[0] != 'P' || (p[1] != '5' && p[1] != '6'))
        return ert_set_error(ctx, ERT_E_FORMAT, "pnm: not a binary PGM/PPM (P5/P6)");
    int ch = p[1] == '5' ? 1 : 3;
    size_t pos = 2;
    long w, h, maxval;
    if (!pnm_number(p, size, &pos, ERT_PNM_MAX_DIM, &w) ||
        !pnm_number(p, size, &pos, ERT_PNM_MAX_DIM, &h) ||
        !pnm_number(p, size, &pos, 65535, &maxval))
        return ert_set_error(ctx, ERT_E_FORMAT, "pnm: bad or oversized header (width/height <= %d)",
                             ERT_PNM_MAX_DIM);
    if (w < 1 || h < 1) return ert_set_error(ctx, ERT_E_FORMAT, "pnm: empty image %ldx%ld", w, h);
    if (maxval != 255)
        return ert_set_error(ctx, ERT_E_FORMAT, "pnm: maxval %ld unsupported (only 255)", maxval);
    /* Exactly one whitespace byte separates the header from the pixels. */
    if (pos >= size) return ert_set_error(ctx, ERT_E_FORMAT, "pnm: truncated header");
    pos++;
    size_t need;
    if (ert_mul_ovf((size_t)w * (size_t)h, (size_t)ch, &need))
        return ert_set_error(ctx, ERT_E_FORMAT, "pnm: size overflows");
    if (size - pos < need)
        return ert_set_error(ctx, ERT_E_FORMAT, "pnm: truncated: %zu pixel bytes of %zu",
                             size - pos, need);
    uint8_t *px = malloc(need);
    if (!px) return ert_set_error(ctx, ERT_E_NOMEM, "pnm: %zu bytes", need);
    memcpy(px, p + pos, need);
    *width = (int)w;
    *height = (int)h;
    *channels = ch;
    *pixels = px;
    return ERT_OK;
}

ert_status ert_image_read_pnm(ert_context *ctx, const char *path, int *width,
                              int *height, int *channels, uint8_t **pixels) {
    if (!path) return ert_set_error(ctx, ERT_E_ARG, "read_pnm: NULL path");
    /* a regular file only, opened without blocking: a FIFO would wait for a
     * writer, /dev/zero would be read up to the size bound (3 GB) */
    int fd = -1;
    uint64_t fsize = 0;
    ert_status ost = ert_file_open_read(ctx, path, &fd, &fsize);
    if (ost != ERT_OK) return ost;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return ert_set_error(ctx, ERT_E_IO, "%s: %s", path, strerror(errno));
    }
    /* Largest valid file: header + 32768^2 * 3; read what is there, bounded. */
    size_t cap = 1 << 16, n = 0;
    const size_t max = (size_t)ERT_PNM_MAX_DIM * ERT_PNM_MAX_DIM * 3 + 4096;
    uint8_t *buf = malloc(cap);
    ert_status st = ERT_OK;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap >= max) { st = ert_set_error(ctx, ERT_E_FORMAT, "%s: file too large", path); break; }
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    if (!buf) st = ert_set_error(ctx, ERT_E_NOMEM, "%s: out of memory", path);
    else if (st == ERT_OK && ferror(f)) st = ert_set_error(ctx, ERT_E_IO, "%s: read error", path);
    fclose(f);
    if (st == ERT_OK) {
        st = ert_image_decode_pnm(ctx, buf, n, width, height, channels, pixels);
        if (st != ERT_OK) {
            char msg[ERT_ERRMSG_SIZE];
            snprintf(msg, sizeof msg, "%s", ert_last_error(ctx));
            ert_set_error(ctx, st, "%s: %s", path, msg);
        }
    }
    free(buf);
    return st;
}

ert_status ert_image_write_pnm(ert_context *ctx, const char *path, const uint8_t *pixels,
                               int width, int height, int channels) {
    if (!path || !pixels || width < 1 || height < 1 || (channels != 1 && channels != 3))
        return ert_set_error(ctx, ERT_E_ARG, "write_pnm: bad arguments (%dx%d, %d channels)",
                             width, height, channels);
    /* the one atomic write (core/fileio.c): a FIFO or device at `path` is
     * refused, a symlink's target replaced, a crash leaves the old file */
    char head[64];
    int hn = snprintf(head, sizeof head, "P%c\n%d %d\n255\n", channels == 1 ? '5' : '6', width, height);
    size_t n = (size_t)width * (size_t)height * (size_t)channels;
    ert_file_writer *w = NULL;
    ert_status st = ert_file_writer_open(ctx, path, &w);
    if (st == ERT_OK && (st = ert_file_writer_write(w, head, (size_t)hn)) == ERT_OK)
        st = ert_file_writer_write(w, pixels, n);
    if (st != ERT_OK) {
        ert_file_writer_abort(w);
        return st;
    }
    return ert_file_writer_commit(w);
}
