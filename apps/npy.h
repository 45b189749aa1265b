/*
 * npy.h - read and write NumPy .npy files (format versions 1, 2 and 3).
 *
 * Supported: little-endian (or byte-order-free) '<f4' '<f2' '<i8' '<i4' '|u1'
 * '|i1' '|b1', and '<f8' read as f32 (from_f64 set: the caller says so), C order, rank 0..ERT_MAX_DIMS. Everything else is rejected with
 * a message that says why (Fortran order, big-endian, object arrays, other
 * dtypes). Files are treated as hostile: every length is checked before use.
 *
 * Part of the apps, not of the library: it uses edgert.h only for ert_dtype.
 */
#ifndef ERT_APPS_NPY_H
#define ERT_APPS_NPY_H

#include "edgert.h"

#include <stddef.h>
#include <stdint.h>

typedef struct npy_array {
    ert_dtype dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    void *data;   /* malloc'd, C order, little-endian; free with npy_free */
    size_t bytes; /* element bytes */
    int from_f64; /* the file held '<f8': data was narrowed to f32 */
} npy_array;

/* Parse a whole .npy image held in memory. On failure returns -1 and writes a
 * message (no trailing newline) to err; *out is left zeroed. */
int npy_parse(const void *buf, size_t size, npy_array *out, char *err, size_t err_size);
/* Read and parse a file. */
int npy_read_file(const char *path, npy_array *out, char *err, size_t err_size);
void npy_free(npy_array *a);

/* The header (magic .. padding .. '\n') for an array, into buf. Returns its
 * length, or 0 if the dtype has no .npy equivalent (bf16) or buf is too small. */
size_t npy_header(char *buf, size_t buf_size, ert_dtype dtype, int ndim, const int64_t *dims);

/* Write atomically (ert_file_writer_open: links followed, devices refused). bytes must equal
 * the element bytes of the shape. Returns 0, or -1 with a message in err. */
int npy_write_file(const char *path, ert_dtype dtype, int ndim, const int64_t *dims,
                   const void *data, size_t bytes, char *err, size_t err_size);

/* '<f4' etc. for a dtype, NULL if none. */
const char *npy_descr(ert_dtype dtype);

#endif
