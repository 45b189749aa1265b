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

ert_status ert_model_load_file(ert_context *ctx, const char *path, ert_model **out) {
    if (!ctx || !path || !out) return ert_set_error(ctx, ERT_E_ARG, "ert_model_load_file: NULL argument");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ert_set_error(ctx, ERT_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ert_set_error(ctx, ERT_E_IO, "'%s' is not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
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
        for (int64_t k = 0; k < ne; k++) h[k] = ert_f32_to_f16(f[k]);
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
