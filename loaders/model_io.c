/*
 * The public load/save entry points (edgert.h: ert_model_load_file,
 * ert_model_load_memory, ert_model_save, ert_model_save_opts): sniff the
 * bytes and dispatch to the .ert or ONNX reader, or write .ert. They sit on
 * the loaders/ floor because they call the format readers and writers;
 * core/model.c holds the IR they fill.
 */
#include "loaders.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ loading */

static const char *base_dir(const char *path, char *buf, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ".";
    size_t n = (size_t)(slash - path);
    if (n == 0) return "/";
    if (n >= cap) return NULL;
    memcpy(buf, path, n);
    buf[n] = 0;
    return buf;
}

/* A file that is not a model at all, or an ONNX file cut short, gets a
 * message that says so instead of the protobuf reader's first complaint.
 * Only consulted after the ONNX reader failed, so no model is refused. */
static const char *non_model_kind(const unsigned char *p, size_t n) {
    if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) return "a JPEG image";
    if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0) return "a PNG image";
    if (n >= 6 && memcmp(p, "\x93NUMPY", 6) == 0) return "a NumPy .npy array";
    if (n >= 2 && p[0] == 'P' && p[1] >= '1' && p[1] <= '6') return "a PPM/PGM image";
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b) return "a gzip file";
    if (n >= 4 && memcmp(p, "PK\x03\x04", 4) == 0) return "a zip archive (a PyTorch .pt/.pth checkpoint?)";
    if (n >= 4 && memcmp(p, "\x7f" "ELF", 4) == 0) return "an executable";
    size_t k = 0, look = n < 256 ? n : 256;
    while (k < look && ((p[k] >= 0x20 && p[k] < 0x7f) || p[k] == '\n' || p[k] == '\r' || p[k] == '\t')) k++;
    if (look >= 16 && k == look) return "a text file";
    return NULL;
}

/* Walk ModelProto's top-level fields: the byte a length-delimited field
 * would need past the end of the file, or 0 if every field fits. */
static uint64_t onnx_truncated_need(const unsigned char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint64_t tag = 0, v = 0;
        for (int sh = 0;; sh += 7) {
            if (i >= n || sh > 63) return i >= n ? (uint64_t)n + 1 : 0;
            tag |= (uint64_t)(p[i] & 0x7f) << sh;
            if (!(p[i++] & 0x80)) break;
        }
        unsigned wt = (unsigned)(tag & 7);
        if (wt == 0 || wt == 2) {
            for (int sh = 0;; sh += 7) {
                if (i >= n || sh > 63) return i >= n ? (uint64_t)n + 1 : 0;
                v |= (uint64_t)(p[i] & 0x7f) << sh;
                if (!(p[i++] & 0x80)) break;
            }
            if (wt == 2) {
                if (v > (uint64_t)(n - i)) return (uint64_t)i + v;
                i += (size_t)v;
            }
        } else if (wt == 1 || wt == 5) {
            size_t w = wt == 1 ? 8 : 4;
            if (n - i < w) return (uint64_t)i + w;
            i += w;
        } else {
            return 0; /* not protobuf: nothing to say about truncation */
        }
    }
    return 0;
}

static ert_status explain_bad_model(ert_context *ctx, ert_status st, const char *path, const unsigned char *p, size_t n) {
    if (st != ERT_E_FORMAT) return st;
    char orig[512];
    snprintf(orig, sizeof orig, "%s", ert_last_error(ctx));
    const char *kind = non_model_kind(p, n);
    if (kind) return ert_set_error(ctx, st, "'%s' looks like %s, not a model (.ert or ONNX)", path, kind);
    uint64_t need = onnx_truncated_need(p, n);
    if (need > n)
        return ert_set_error(ctx, st, "'%s' is truncated at byte %zu of at least %llu (%s)", path, n,
                             (unsigned long long)need, orig);
    return st;
}

ert_status ert_model_load_file(ert_context *ctx, const char *path, ert_model **out) {
    if (!ctx || !path || !out) return ert_set_error(ctx, ERT_E_ARG, "ert_model_load_file: NULL argument");
    int fd = -1;
    uint64_t fsize = 0;
    ert_status ost = ert_file_open_read(ctx, path, &fd, &fsize); /* core/fileio.c: a FIFO is refused, not waited on */
    if (ost != ERT_OK) return ost;
    if (fsize > (uint64_t)SIZE_MAX) {
        close(fd);
        return ert_set_error(ctx, ERT_E_IO, "'%s' is too large to map (%llu bytes)", path, (unsigned long long)fsize);
    }
    size_t size = (size_t)fsize;
    if (size == 0) {
        close(fd);
        return ert_set_error(ctx, ERT_E_FORMAT, "'%s' is empty", path);
    }
    /* MAP_POPULATE: the CRC check reads every page anyway; faulting them in one
     * call is several times cheaper than one fault per 64 KiB on first touch */
#ifdef MAP_POPULATE
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
#else
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
#endif
    close(fd);
    if (map == MAP_FAILED) return ert_set_error(ctx, ERT_E_IO, "cannot map '%s': %s", path, strerror(errno));
    ert_model *m = NULL;
    ert_status st;
    if (ert_format_sniff(map, size)) {
        st = ert_format_read(ctx, map, size, true, &m);
        if (st == ERT_OK) {
            m->map_base = map;
            m->map_size = size;
            *out = m;
            return ERT_OK;
        }
    } else {
        char dbuf[4096];
        const char *dir = base_dir(path, dbuf, sizeof dbuf);
        st = ert_onnx_read(ctx, map, size, dir, &m);
        if (st == ERT_OK) *out = m; /* the ONNX loader copies what it keeps */
        else st = explain_bad_model(ctx, st, path, map, size);
    }
    munmap(map, size);
    return st;
}

ert_status ert_model_load_memory(ert_context *ctx, const void *data, size_t size, unsigned flags, ert_model **out) {
    if (!ctx || !data || !out) return ert_set_error(ctx, ERT_E_ARG, "ert_model_load_memory: NULL argument");
    if (ert_format_sniff(data, size)) {
        bool borrow = (flags & ERT_LOAD_NO_COPY) != 0;
        if (borrow && ((uintptr_t)data % ERT_HOST_ALIGN))
            return ert_set_error(ctx, ERT_E_ARG, "ERT_LOAD_NO_COPY needs 64-byte aligned data");
        return ert_format_read(ctx, data, size, borrow, out);
    }
    return ert_onnx_read(ctx, data, size, NULL, out);
}

ert_status ert_model_save(const ert_model *m, const char *path) {
    if (!m || !path) return ERT_E_ARG;
    return ert_format_write(m, path);
}

/* Weights worth storing as f16: f32, at least 16 elements (small ones are
 * op parameters whose exact value matters more than 2 bytes each), every
 * value finite and within f16's range (a huge mask constant must not turn
 * into inf). */
static bool f16_candidate(const ert_tensor *t, int64_t *ne) {
    if (t->role != ERT_ROLE_WEIGHT || t->dtype != ERT_DTYPE_F32 || !t->data) return false;
    if (!ert_dims_nelems(t->ndim, t->dims, ne) || *ne < 16) return false;
    const float *f = t->data;
    for (int64_t i = 0; i < *ne; i++)
        if (!(fabsf(f[i]) <= 65504.0f)) return false; /* also false for NaN */
    return true;
}

ert_status ert_model_save_opts(const ert_model *m, const char *path, const ert_save_options *opts) {
    if (!m || !path) return ERT_E_ARG;
    ert_dtype wd = opts ? opts->weights_dtype : ERT_DTYPE_UNDEFINED;
    if (wd == ERT_DTYPE_UNDEFINED) return ert_format_write(m, path);
    if (wd != ERT_DTYPE_F16)
        return ert_set_error(m->ctx, ERT_E_UNSUPPORTED, "ert_model_save_opts: weights_dtype %s (only f16)",
                             ert_dtype_name(wd));
    /* A shallow copy whose tensor table points at converted data; the writer
     * only reads, so names, nodes and the graph lists are shared. */
    ert_model c = *m;
    c.tensors = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *c.tensors);
    if (!c.tensors) return ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory");
    ert_status st = ERT_OK;
    for (int i = 0; i < m->n_tensors; i++) {
        ert_tensor *t = &c.tensors[i];
        *t = m->tensors[i];
        t->data_owned = false;
        int64_t ne;
        if (st != ERT_OK || !f16_candidate(t, &ne)) continue;
        uint16_t *h = malloc((size_t)ne * sizeof *h);
        if (!h) {
            st = ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory converting '%s' to f16", t->name);
            continue;
        }
        const float *f = t->data;
        ert_f32_to_f16_n(h, f, (size_t)ne);
        t->data = h;
        t->dtype = ERT_DTYPE_F16;
        t->data_owned = true; /* here: converted by us, freed below */
    }
    if (st == ERT_OK) st = ert_format_write(&c, path);
    for (int i = 0; i < m->n_tensors; i++)
        if (c.tensors[i].data_owned) free((void *)c.tensors[i].data);
    free(c.tensors);
    return st;
}
