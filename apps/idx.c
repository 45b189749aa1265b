/* IDX reader (see idx.h). The whole (decompressed) file is read into memory
 * first, growing the buffer geometrically up to a fixed cap, then parsed. */
#include "idx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define IDX_MAX_BYTES ((size_t)1 << 30)

void idx_free(idx_array *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

int idx_parse(const uint8_t *buf, size_t size, idx_array *out, char *err, size_t cap) {
    memset(out, 0, sizeof *out);
    if (size < 4) return snprintf(err, cap, "IDX: %zu bytes, shorter than the 4-byte magic", size), -1;
    if (buf[0] != 0 || buf[1] != 0) return snprintf(err, cap, "IDX: bad magic (first bytes %02x %02x)", buf[0], buf[1]), -1;
    if (buf[2] != 0x08) return snprintf(err, cap, "IDX: element type 0x%02x unsupported (only 0x08 unsigned byte)", buf[2]), -1;
    int nd = buf[3];
    if (nd < 1 || nd > 4) return snprintf(err, cap, "IDX: rank %d outside [1, 4]", nd), -1;
    size_t head = 4 + 4 * (size_t)nd;
    if (size < head) return snprintf(err, cap, "IDX: truncated header (%zu bytes, %zu needed)", size, head), -1;
    size_t n = 1;
    for (int i = 0; i < nd; i++) {
        const uint8_t *p = buf + 4 + 4 * i;
        uint32_t d = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (d == 0) return snprintf(err, cap, "IDX: dim %d is 0", i), -1;
        if (__builtin_mul_overflow(n, (size_t)d, &n) || n > IDX_MAX_BYTES)
            return snprintf(err, cap, "IDX: more than %zu elements", IDX_MAX_BYTES), -1;
        out->dims[i] = d;
    }
    if (size - head != n) {
        memset(out, 0, sizeof *out);
        return snprintf(err, cap, "IDX: %zu data bytes, the header says %zu (%s)", size - head, n,
                        size - head < n ? "truncated" : "trailing bytes"), -1;
    }
    out->data = malloc(n);
    if (!out->data) {
        memset(out, 0, sizeof *out);
        return snprintf(err, cap, "IDX: out of memory (%zu bytes)", n), -1;
    }
    memcpy(out->data, buf + head, n);
    out->ndim = nd;
    out->n = n;
    return 0;
}

int idx_load(const char *path, idx_array *out, char *err, size_t cap) {
    memset(out, 0, sizeof *out);
    gzFile f = gzopen(path, "rb");
    if (!f) return snprintf(err, cap, "%s: cannot open", path), -1;
    size_t len = 0, room = 1 << 20;
    uint8_t *buf = malloc(room);
    int rc = -1;
    while (buf) {
        if (len == room) {
            if (room >= IDX_MAX_BYTES + 64) {
                snprintf(err, cap, "%s: larger than %zu bytes", path, IDX_MAX_BYTES);
                goto done;
            }
            uint8_t *nb = realloc(buf, room * 2);
            if (!nb) break;
            buf = nb;
            room *= 2;
        }
        size_t want = room - len > (1u << 30) ? (1u << 30) : room - len;
        int r = gzread(f, buf + len, (unsigned)want);
        if (r < 0) {
            int zerr;
            snprintf(err, cap, "%s: %s", path, gzerror(f, &zerr));
            goto done;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    if (!buf) {
        snprintf(err, cap, "%s: out of memory", path);
        goto done;
    }
    if (!gzeof(f)) { /* loop left by a failed realloc */
        snprintf(err, cap, "%s: out of memory", path);
        goto done;
    }
    rc = idx_parse(buf, len, out, err, cap);
    if (rc != 0) {
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s", err);
        snprintf(err, cap, "%s: %s", path, tmp);
    }
done:
    free(buf);
    gzclose(f);
    return rc;
}
