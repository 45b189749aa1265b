/* Splitting a stream of concatenated JPEGs into frames (see cam_mjpeg_split
 * in source.h). The markers are followed, not just searched: an EXIF
 * thumbnail is a whole JPEG (SOI..EOI) inside an APP1 segment, so a plain
 * search for FF D9 would cut a frame in two. Inside entropy-coded data FF is
 * always followed by 00 (stuffing), D0-D7 (restart) or a real marker. */
#include "source.h"

#include <string.h>

static int is_soi(const uint8_t *b, size_t i, size_t n) {
    return i + 2 < n && b[i] == 0xFF && b[i + 1] == 0xD8 && b[i + 2] == 0xFF;
}

static size_t find_soi(const uint8_t *b, size_t from, size_t n) {
    while (from + 2 < n) {
        const uint8_t *ff = memchr(b + from, 0xFF, n - 2 - from);
        if (!ff) return n;
        from = (size_t)(ff - b);
        if (is_soi(b, from, n)) return from;
        from++;
    }
    return n;
}

int cam_mjpeg_split(const uint8_t *b, size_t n, int eof, size_t *start, size_t *end) {
    size_t s = find_soi(b, 0, n);
    if (s >= n) {
        /* No SOI: all but a possible partial marker at the end can go. */
        *start = eof || n < 2 ? n : n - 2;
        return 0;
    }
    size_t p = s + 2;
    for (;;) {
        if (p >= n) goto need;
        if (b[p] != 0xFF) goto broken;
        while (p < n && b[p] == 0xFF) p++; /* fill bytes */
        if (p >= n) goto need;
        uint8_t m = b[p++];
        if (m == 0xD9) { /* EOI */
            *start = s;
            *end = p;
            return 1;
        }
        if (m == 0xD8) { /* a new SOI: this frame was cut short */
            *start = s;
            *end = p - 2;
            return 1;
        }
        if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) goto broken;
        if (p + 2 > n) goto need;
        size_t len = (size_t)b[p] << 8 | b[p + 1];
        if (len < 2) goto broken;
        /* A table or frame header never holds an SOI; if it seems to, the
         * length came from a cut-off frame and would skip over the next
         * frame's start: end this frame there. (APPn/COM may hold a whole
         * thumbnail JPEG.) */
        if (!(m >= 0xE0 && m <= 0xEF) && m != 0xFE) {
            size_t lim = p + len < n ? p + len : n;
            size_t q = find_soi(b, p, lim + 2 < n ? lim + 2 : n);
            if (q < lim) {
                *start = s;
                *end = q;
                return 1;
            }
        }
        if (p + len > n) goto need;
        p += len;
        if (m != 0xDA) continue;
        /* SOS: entropy-coded data up to the next real marker. */
        for (;;) {
            const uint8_t *ff = p < n ? memchr(b + p, 0xFF, n - p) : NULL;
            if (!ff) goto need;
            p = (size_t)(ff - b);
            if (p + 1 >= n) goto need;
            uint8_t x = b[p + 1];
            if (x == 0x00 || (x >= 0xD0 && x <= 0xD7)) { p += 2; continue; }
            if (x == 0xFF) { p += 1; continue; }
            break; /* a marker: EOI, or DHT/SOS of a progressive file */
        }
    }
broken: {
        /* Not a JPEG structure any more: the frame ends where the next one
         * starts (or, at the end of the data, where the data ends). */
        size_t q = find_soi(b, p, n);
        if (q < n) {
            *start = s;
            *end = q;
            return 1;
        }
    }
need:
    if (eof) {
        *start = s;
        *end = n;
        return 1;
    }
    *start = s;
    return 0;
}
