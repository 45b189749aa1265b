/*
 * idx.h - read IDX files (the MNIST / Fashion-MNIST format), plain or gzip.
 *
 * Layout: 2 zero bytes, a type byte, a rank byte, rank big-endian u32 dims,
 * then the elements big-endian, C order. Only unsigned bytes (type 0x08) are
 * supported: that is what the image and label files hold. The file is
 * treated as hostile: type, rank (1..4), every dim (>= 1), the product
 * (overflow-checked, at most 1 GiB) and the exact length (no truncation, no
 * trailing bytes) are checked. gzip is read through zlib (a plain file is
 * read as is, so both work).
 *
 * Part of the apps, not of the library.
 */
#ifndef ERT_APPS_IDX_H
#define ERT_APPS_IDX_H

#include <stddef.h>
#include <stdint.h>

typedef struct idx_array {
    int ndim;
    int64_t dims[4];
    uint8_t *data; /* malloc'd; free with idx_free */
    size_t n;      /* elements */
} idx_array;

/* Read a whole file. On failure returns -1, writes a message (no trailing
 * newline) to err and leaves *out zeroed. */
int idx_load(const char *path, idx_array *out, char *err, size_t err_size);
/* Parse an uncompressed IDX image held in memory (same checks). */
int idx_parse(const uint8_t *buf, size_t size, idx_array *out, char *err, size_t err_size);
void idx_free(idx_array *a);

#endif
