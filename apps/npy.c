/*
 * .npy reader/writer. Format (numpy/lib/format.py):
 *   "\x93NUMPY" major minor  header_len (u16 LE for v1, u32 LE for v2/v3)
 *   header: a Python dict literal, e.g.
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *   padded with spaces and ended by '\n' so the data starts 64-byte aligned.
 * The parser accepts exactly the three keys in any order, single or double
 * quotes, and the literal forms numpy writes; it does not evaluate Python.
 * Limits: no structured dtypes, no big-endian, no Fortran order, no pickles.
 */
#define _POSIX_C_SOURCE 200809L
#include "npy.h"
#include "cli_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* numpy itself refuses headers above this size (it guards against DoS). */
#define NPY_MAX_HEADER 100000u

static int fail(char *err, size_t n, const char *fmt, ...) {
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const struct {
    const char *descr;
    ert_dtype dtype;
} DESCRS[] = {
    {"<f4", ERT_DTYPE_F32}, {"<f2", ERT_DTYPE_F16}, {"<i8", ERT_DTYPE_I64},
    {"<i4", ERT_DTYPE_I32}, {"|u1", ERT_DTYPE_U8},  {"|i1", ERT_DTYPE_I8},
    {"|b1", ERT_DTYPE_BOOL},
};

const char *npy_descr(ert_dtype dtype) {
    for (size_t i = 0; i < sizeof DESCRS / sizeof DESCRS[0]; i++)
        if (DESCRS[i].dtype == dtype) return DESCRS[i].descr;
    return NULL;
}

/* Map a descr string to a dtype, or explain why not. */
static int descr_dtype(const char *d, ert_dtype *dt, char *err, size_t n) {
    size_t len = strlen(d);
    for (size_t i = 0; len >= 2 && i < sizeof DESCRS / sizeof DESCRS[0]; i++) {
        const char *s = DESCRS[i].descr;
        if (strcmp(d + 1, s + 1) != 0) continue;
        /* one-byte types have no byte order, so any prefix is fine; '=' is
         * native order, which is little-endian on every target we build for */
        if (s[0] == '|' ? strchr("<>=|", d[0]) != NULL : (d[0] == '<' || d[0] == '=')) {
            *dt = DESCRS[i].dtype;
            return 0;
        }
    }
    if (d[0] == '>')
        return fail(err, n, "big-endian dtype '%s' is not supported (convert with a.astype('<%s'))", d, d + 1);
    if (strchr(d, 'O'))
        return fail(err, n, "object arrays ('%s') are not supported", d);
    return fail(err, n, "dtype '%s' is not supported (supported: <f4 <f2 <f8 (read as f32) <i8 <i4 |u1 |i1 |b1)", d);
}

/* ---------------------------------------------------------------- header parser */

typedef struct {
    const char *p, *end;
} cur;

static void skip_ws(cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int eat(cur *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes (numpy never writes any in these keys). */
static int parse_str(cur *c, char *out, size_t out_size) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return -1;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || k + 1 >= out_size) return -1;
        out[k++] = *c->p++;
    }
    if (c->p >= c->end) return -1;
    c->p++;
    out[k] = 0;
    return 0;
}

static int parse_word(cur *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

static int parse_header(const char *h, size_t len, npy_array *a, char *err, size_t n) {
    cur c = {h, h + len};
    int have_descr = 0, have_fo = 0, have_shape = 0;
    if (!eat(&c, '{')) return fail(err, n, "bad .npy header: expected '{'");
    for (;;) {
        if (eat(&c, '}')) break;
        char key[32];
        if (parse_str(&c, key, sizeof key) != 0 || !eat(&c, ':'))
            return fail(err, n, "bad .npy header: expected 'key':");
        if (strcmp(key, "descr") == 0) {
            char d[32];
            if (have_descr++ || parse_str(&c, d, sizeof d) != 0)
                return fail(err, n, "bad .npy header: 'descr' must be one dtype string (structured dtypes are not supported)");
            /* float64 has no ert dtype: read as f32 (npy_parse narrows it) */
            a->from_f64 = strcmp(d, "<f8") == 0 || strcmp(d, "=f8") == 0;
            if (a->from_f64) a->dtype = ERT_DTYPE_F32;
            else if (descr_dtype(d, &a->dtype, err, n) != 0) return -1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_fo++) return fail(err, n, "bad .npy header: 'fortran_order' given twice");
            if (parse_word(&c, "True"))
                return fail(err, n, "fortran_order=True is not supported: save a C-ordered array (np.ascontiguousarray)");
            if (!parse_word(&c, "False")) return fail(err, n, "bad .npy header: fortran_order must be True or False");
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape++ || !eat(&c, '(')) return fail(err, n, "bad .npy header: 'shape' must be a tuple");
            a->ndim = 0;
            for (;;) {
                if (eat(&c, ')')) break;
                skip_ws(&c);
                int64_t v = 0;
                int digits = 0;
                while (c.p < c.end && *c.p >= '0' && *c.p <= '9') {
                    if (v > (INT64_MAX - 9) / 10) return fail(err, n, "bad .npy header: dimension too large");
                    v = v * 10 + (*c.p++ - '0');
                    digits++;
                }
                if (c.p < c.end && *c.p == 'L') c.p++; /* Python 2 longs */
                if (!digits) return fail(err, n, "bad .npy header: shape entries must be non-negative integers");
                if (a->ndim >= ERT_MAX_DIMS) return fail(err, n, "array has more than %d dimensions", ERT_MAX_DIMS);
                a->dims[a->ndim++] = v;
                if (!eat(&c, ',')) {
                    if (!eat(&c, ')')) return fail(err, n, "bad .npy header: unterminated shape tuple");
                    break;
                }
            }
        } else {
            return fail(err, n, "bad .npy header: unexpected key '%s'", key);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}')) return fail(err, n, "bad .npy header: expected ',' or '}'");
            break;
        }
    }
    if (!have_descr || !have_fo || !have_shape)
        return fail(err, n, "bad .npy header: missing %s", !have_descr ? "'descr'" : !have_fo ? "'fortran_order'" : "'shape'");
    skip_ws(&c);
    if (c.p != c.end) return fail(err, n, "bad .npy header: trailing characters after the dict");
    return 0;
}

int npy_parse(const void *buf, size_t size, npy_array *out, char *err, size_t n) {
    const unsigned char *b = buf;
    npy_array a;
    memset(&a, 0, sizeof a);
    memset(out, 0, sizeof *out);
    if (size < NPY_MAGIC_LEN + 2 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return fail(err, n, "not a .npy file (bad magic)");
    unsigned major = b[6];
    size_t pre, hlen;
    if (major == 1) {
        if (size < 10) return fail(err, n, "truncated .npy header");
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        pre = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) return fail(err, n, "truncated .npy header");
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        pre = 12;
    } else {
        return fail(err, n, ".npy format version %u.%u is not supported (1, 2, 3 are)", major, b[7]);
    }
    if (hlen > NPY_MAX_HEADER) return fail(err, n, ".npy header too long (%zu bytes)", hlen);
    if (hlen > size - pre) return fail(err, n, "truncated .npy header (%zu bytes announced, %zu present)", hlen, size - pre);
    if (parse_header((const char *)b + pre, hlen, &a, err, n) != 0) return -1;
    size_t count = 1, bytes;
    for (int i = 0; i < a.ndim; i++)
        if ((uint64_t)a.dims[i] > SIZE_MAX || __builtin_mul_overflow(count, (size_t)a.dims[i], &count))
            return fail(err, n, "array too large");
    size_t esize = a.from_f64 ? 8 : ert_dtype_size(a.dtype);
    if (__builtin_mul_overflow(count, esize, &bytes)) return fail(err, n, "array too large");
    size_t have = size - pre - hlen;
    if (have < bytes) return fail(err, n, "truncated .npy data: shape needs %zu bytes, file has %zu", bytes, have);
    if (have > bytes) return fail(err, n, ".npy file has %zu bytes after the data (not a single array?)", have - bytes);
    a.data = malloc(bytes ? bytes : 1);
    if (!a.data) return fail(err, n, "out of memory (%zu bytes)", bytes);
    if (a.from_f64) { /* narrow to f32, round to nearest (the caller says so) */
        for (size_t i = 0; i < count; i++) {
            double v;
            memcpy(&v, b + pre + hlen + 8 * i, 8);
            ((float *)a.data)[i] = (float)v;
        }
        bytes = count * 4;
    } else {
        memcpy(a.data, b + pre + hlen, bytes);
    }
    a.bytes = bytes;
    *out = a;
    return 0;
}

int npy_read_file(const char *path, npy_array *out, char *err, size_t n) {
    memset(out, 0, sizeof *out);
    FILE *f = cli_fopen_regular(path);
    if (!f) return fail(err, n, "%s: %s", path, cli_fopen_why(errno));
    char *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                fclose(f);
                return fail(err, n, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + size, 1, cap - size, f);
        size += got;
        if (got == 0) break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        free(buf);
        return fail(err, n, "%s: read error", path);
    }
    char msg[256];
    int rc = npy_parse(buf, size, out, msg, sizeof msg);
    free(buf);
    if (rc != 0) return fail(err, n, "%s: %s", path, msg);
    return 0;
}

void npy_free(npy_array *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------- writer */

size_t npy_header(char *buf, size_t buf_size, ert_dtype dtype, int ndim, const int64_t *dims) {
    const char *d = npy_descr(dtype);
    if (!d || ndim < 0 || ndim > ERT_MAX_DIMS) return 0;
    char dict[512];
    int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", d);
    for (int i = 0; i < ndim; i++)
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld,%s", (long long)dims[i], i + 1 < ndim ? " " : "");
    k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
    /* numpy writes (n,) for rank 1 and (a, b) otherwise: drop a trailing comma for rank >= 2 */
    if (ndim >= 2) {
        char *t = strstr(dict, ",), }");
        if (t) memmove(t, t + 1, strlen(t + 1) + 1), k--;
    }
    /* like numpy >= 1.x: room for the first dim to grow in place (appending
     * writers), so our files are byte-identical to np.save's */
    if (ndim > 0) {
        char d0[32];
        int l0 = snprintf(d0, sizeof d0, "%lld", (long long)dims[0]);
        for (int i = l0; i < 21 && (size_t)k + 1 < sizeof dict; i++) dict[k++] = ' ';
        dict[k] = 0;
    }
    size_t hl = (size_t)k + 1; /* + '\n' */
    size_t total = 10 + hl;
    total = (total + 63) / 64 * 64; /* data 64-byte aligned, as numpy does */
    if (total > buf_size || total - 10 > 65535) return 0;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    size_t hlen = total - 10;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)k);
    memset(buf + 10 + k, ' ', total - 10 - (size_t)k - 1);
    buf[total - 1] = '\n';
    return total;
}


int npy_write_file(const char *path, ert_dtype dtype, int ndim, const int64_t *dims,
                   const void *data, size_t bytes, char *err, size_t n) {
    char hdr[1024];
    size_t hl = npy_header(hdr, sizeof hdr, dtype, ndim, dims);
    if (!hl) return fail(err, n, "%s: dtype %s cannot be stored in .npy", path, ert_dtype_name(dtype));
    size_t count = 1;
    for (int i = 0; i < ndim; i++) count *= (size_t)dims[i];
    if (count * ert_dtype_size(dtype) != bytes) return fail(err, n, "%s: data size does not match shape", path);
    /* the library's one atomic write: links followed, devices/FIFOs refused */
    ert_context *ctx = NULL;
    ert_context_options co = {0};
    if (ert_context_create(&co, &ctx) != ERT_OK) return fail(err, n, "out of memory");
    ert_file_writer *w = NULL;
    ert_status st = ert_file_writer_open(ctx, path, &w);
    if (st == ERT_OK) {
        st = ert_file_writer_write(w, hdr, hl);
        if (st == ERT_OK) st = ert_file_writer_write(w, data, bytes);
        if (st == ERT_OK) st = ert_file_writer_commit(w);
        else ert_file_writer_abort(w);
    }
    int rc = st == ERT_OK ? 0 : fail(err, n, "%s", ert_last_error(ctx));
    ert_context_free(ctx);
    return rc;
}
