/*
 * onnx_pb.c - protobuf wire-format reader, TensorProto decoder, external data
 * and ert_tensor_load_pb.
 *
 * Steps
 *   1. ert_pb_next reads one field: tag varint -> (field number, wire type),
 *      then the payload. Every read is checked against the window's end, so a
 *      truncated file fails at the first field that runs past it.
 *   2. TensorProto is read in two passes over its bytes: pass 1 takes dims,
 *      data_type, name, raw_data, external_data and counts the typed values
 *      (float_data, int32_data, int64_data); pass 2, once the element count is
 *      known and checked, converts the typed values straight into the output.
 *   3. External data is read from a file named relative to the model's
 *      directory; see read_external for the checks.
 *
 * Limits
 *   - Varints longer than 10 bytes or with bits past 64 are errors (protobuf
 *     itself would truncate silently; a hostile file gets no such slack).
 *   - Wire types 3/4 (groups) are errors; unknown fields of the other wire
 *     types are skipped.
 *   - There is no recursion here: nested messages are handled by callers, one
 *     fixed level each (ONNX needs at most model -> graph -> node -> attribute
 *     -> tensor; subgraphs are refused by the loader).
 *   - The host must be little-endian (raw_data is copied as is); the build
 *     targets (x86-64, aarch64) all are. A static check below enforces it.
 *   - DOUBLE, UINT16/32/64, INT16, STRING, complex and float8 tensors are
 *     ERT_E_UNSUPPORTED: converting DOUBLE to f32 silently would change results.
 */
#include "onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX loader copies little-endian raw_data as is: big-endian hosts need byte swapping"
#endif

/* ------------------------------------------------------------ wire format */

/* Returns 0 ok, -1 truncated, -2 overflow (more than 10 bytes, or the 10th
 * byte carries bits past bit 63). */
int ert_pb_varint(ert_pb *b, uint64_t *v) {
    uint64_t r = 0;
    for (int i = 0; i < 10; i++) {
        if (b->p >= b->end) return -1;
        uint8_t c = *b->p++;
        if (i == 9 && (c & 0xfe)) return -2;
        r |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -2;
}

int ert_pb_next(ert_pb *b, ert_pb_field *f, const char **why) {
    if (b->p >= b->end) return 0;
    f->off = ert_pb_off(b);
    uint64_t tag;
    int r = ert_pb_varint(b, &tag);
    if (r) {
        *why = r == -1 ? "truncated field tag" : "field tag varint overflows 64 bits";
        return -1;
    }
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff) {
        *why = "invalid field number";
        return -1;
    }
    f->num = (uint32_t)(tag >> 3);
    f->wt = (int)(tag & 7);
    f->v = 0;
    f->sub.base = b->base;
    f->sub.p = f->sub.end = b->p;
    size_t left = (size_t)(b->end - b->p);
    switch (f->wt) {
    case ERT_PB_VARINT:
        r = ert_pb_varint(b, &f->v);
        if (r) {
            *why = r == -1 ? "truncated varint" : "varint overflows 64 bits";
            return -1;
        }
        return 1;
    case ERT_PB_I64:
        if (left < 8) {
            *why = "truncated fixed64";
            return -1;
        }
        for (int i = 0; i < 8; i++) f->v |= (uint64_t)b->p[i] << (8 * i);
        b->p += 8;
        return 1;
    case ERT_PB_I32:
        if (left < 4) {
            *why = "truncated fixed32";
            return -1;
        }
        for (int i = 0; i < 4; i++) f->v |= (uint64_t)b->p[i] << (8 * i);
        b->p += 4;
        return 1;
    case ERT_PB_LEN: {
        uint64_t len;
        r = ert_pb_varint(b, &len);
        if (r) {
            *why = r == -1 ? "truncated length" : "length varint overflows 64 bits";
            return -1;
        }
        if (len > (uint64_t)(b->end - b->p)) {
            *why = "length runs past the end of the enclosing message";
            return -1;
        }
        f->sub.p = b->p;
        f->sub.end = b->p + len;
        b->p += len;
        return 1;
    }
    default:
        *why = "unsupported wire type (group or invalid)";
        return -1;
    }
}

int64_t ert_pb_count_varints(ert_pb sub) {
    int64_t n = 0;
    uint64_t v;
    while (sub.p < sub.end) {
        if (ert_pb_varint(&sub, &v)) return -1;
        n++;
    }
    return n;
}

/* ------------------------------------------------------------ dtypes */

const char *ert_onnx_dtype_name(int t) {
    static const char *names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32",
                                  "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64",
                                  "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
                                  "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4",
                                  "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
    if (t >= 0 && (size_t)t < sizeof names / sizeof names[0]) return names[t];
    return "?";
}

/* ------------------------------------------------------------ external data */

/* Reads `bytes` bytes of tensor data from dir/location at `offset`.
 * Checks: location is relative, has no ".." component, is non-empty and has no
 * NUL; after resolving symlinks (realpath) the file must lie under the
 * model's directory (itself resolved); the range [offset, offset+length) must
 * lie inside the file, and length (when given) must equal the bytes the
 * tensor's shape needs. */
static ert_status read_external(ert_context *ctx, const char *dir, const char *what, const uint8_t *loc,
                                size_t loc_len, uint64_t off, bool has_len, uint64_t len,
                                void **out, size_t bytes) {
    if (!dir) return ert_set_error(ctx, ERT_E_UNSUPPORTED, "%s: external data needs the model's directory (load from a file)", what);
    if (loc_len == 0 || loc_len > 4096 || memchr(loc, 0, loc_len))
        return ert_set_error(ctx, ERT_E_FORMAT, "%s: external_data location is empty, too long or has a NUL byte", what);
    if (loc[0] == '/' || loc[0] == '\\')
        return ert_set_error(ctx, ERT_E_FORMAT, "%s: external_data location '%.*s' is absolute", what, (int)loc_len, (const char *)loc);
    /* reject ".." as any path component (both separators: models are made on Windows too) */
    for (size_t i = 0; i < loc_len; i++) {
        bool start = i == 0 || loc[i - 1] == '/' || loc[i - 1] == '\\';
        if (start && i + 1 < loc_len && loc[i] == '.' && loc[i + 1] == '.' &&
            (i + 2 == loc_len || loc[i + 2] == '/' || loc[i + 2] == '\\'))
            return ert_set_error(ctx, ERT_E_FORMAT, "%s: external_data location '%.*s' leaves the model's directory", what,
                                 (int)loc_len, (const char *)loc);
    }
    if (has_len && len != bytes)
        return ert_set_error(ctx, ERT_E_FORMAT, "%s: external_data length %llu, the shape needs %zu bytes", what,
                             (unsigned long long)len, bytes);
    size_t dl = strlen(dir);
    char *path = malloc(dl + loc_len + 2);
    char *rdir = NULL, *rfile = NULL;
    ert_status st = ERT_OK;
    int fd = -1;
    if (!path) return ert_set_error(ctx, ERT_E_NOMEM, "%s: out of memory", what);
    memcpy(path, dir, dl);
    path[dl] = '/';
    memcpy(path + dl + 1, loc, loc_len);
    path[dl + 1 + loc_len] = 0;
    rdir = realpath(dir, NULL);
    rfile = realpath(path, NULL);
    if (!rdir || !rfile) {
        st = ert_set_error(ctx, ERT_E_IO, "%s: external data file '%s': %s", what, path, strerror(errno));
        goto done;
    }
    size_t rl = strlen(rdir);
    /* "/" as the directory is the one case where the prefix has its own slash */
    if (!(strncmp(rfile, rdir, rl) == 0 && (rfile[rl] == '/' || (rl == 1 && rdir[0] == '/')))) {
        st = ert_set_error(ctx, ERT_E_FORMAT, "%s: external data file '%.*s' resolves outside the model's directory", what,
                           (int)loc_len, (const char *)loc);
        goto done;
    }
    fd = open(rfile, O_RDONLY | O_NONBLOCK); /* a FIFO is refused below, not waited on */
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        st = ert_set_error(ctx, ERT_E_IO, "%s: cannot open external data '%s': %s", what, rfile, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = ert_set_error(ctx, ERT_E_FORMAT, "%s: external data '%s' is not a regular file", what, rfile);
        goto done;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    if (off > fsize || bytes > fsize - off) {
        st = ert_set_error(ctx, ERT_E_FORMAT, "%s: external data range [%llu, +%zu) runs past the end of '%.*s' (%llu bytes)",
                           what, (unsigned long long)off, bytes, (int)loc_len, (const char *)loc, (unsigned long long)fsize);
        goto done;
    }
    char *dst = malloc(bytes ? bytes : 1);
    if (!dst) {
        st = ert_set_error(ctx, ERT_E_NOMEM, "%s: out of memory (%zu bytes)", what, bytes);
        goto done;
    }
    size_t got = 0;
    while (got < bytes) {
        ssize_t r = pread(fd, dst + got, bytes - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            st = ert_set_error(ctx, ERT_E_IO, "%s: reading external data '%s' failed", what, rfile);
            free(dst);
            goto done;
        }
        got += (size_t)r;
    }
    *out = dst;
done:
    if (fd >= 0) close(fd);
    free(path);
    free(rdir);
    free(rfile);
    return st;
}

/* ------------------------------------------------------------ TensorProto */

enum { T_DIMS = 1, T_DATA_TYPE = 2, T_SEGMENT = 3, T_FLOAT = 4, T_INT32 = 5, T_STRING = 6, T_INT64 = 7,
       T_NAME = 8, T_RAW = 9, T_DOUBLE = 10, T_UINT64 = 11, T_EXTERNAL = 13, T_LOCATION = 14 };

/* Converts one int32_data value into element i of the destination (the spec
 * stores every narrow type, fp16/bf16 bits and bool in int32_data). */
static void put_i32(ert_dtype dt, void *dst, int64_t i, uint64_t v) {
    int32_t x = (int32_t)(uint32_t)v;
    switch (dt) {
    case ERT_DTYPE_I32: ((int32_t *)dst)[i] = x; break;
    case ERT_DTYPE_I8: ((int8_t *)dst)[i] = (int8_t)x; break;
    case ERT_DTYPE_U8: ((uint8_t *)dst)[i] = (uint8_t)x; break;
    case ERT_DTYPE_BOOL: ((uint8_t *)dst)[i] = x != 0; break;
    case ERT_DTYPE_F16: case ERT_DTYPE_BF16: ((uint16_t *)dst)[i] = (uint16_t)x; break;
    default: break;
    }
}

#define TFAIL(code, ...) do { st = ert_set_error(ctx, (code), __VA_ARGS__); goto fail; } while (0)

ert_status ert_onnx_decode_tensor(ert_context *ctx, ert_pb b, const char *dir, const char *what,
                                  ert_onnx_tensor *t) {
    memset(t, 0, sizeof *t);
    ert_status st = ERT_OK;
    ert_pb_field f;
    const char *why = NULL;
    int r;
    int ndim = 0;
    bool has_raw = false, external = false, has_len = false;
    ert_pb raw = {0};
    const uint8_t *loc = NULL;
    size_t loc_len = 0;
    uint64_t ext_off = 0, ext_len = 0;
    int64_t n_typed = 0;   /* values in float_data / int32_data / int64_data */
    int typed_field = 0;   /* which of those held values */
    void *data = NULL;

    /* The name first, so every message below can say which tensor. */
    char named[300];
    ert_pb it = b;
    while (ert_pb_next(&it, &f, &why) == 1)
        if (f.num == T_NAME && f.wt == ERT_PB_LEN && f.sub.end > f.sub.p) {
            size_t nl = (size_t)(f.sub.end - f.sub.p);
            snprintf(named, sizeof named, "%s ('%.*s')", what, (int)(nl > 200 ? 200 : nl), (const char *)f.sub.p);
            what = named;
            break;
        }

    /* pass 1 */
    it = b;
    while ((r = ert_pb_next(&it, &f, &why)) == 1) {
        switch (f.num) {
        case T_DIMS: {
            /* packed (LEN of varints, validated by the count) or one varint */
            ert_pb s = f.sub;
            int64_t cnt = 1;
            if (f.wt == ERT_PB_LEN) {
                cnt = ert_pb_count_varints(s);
                if (cnt < 0) TFAIL(ERT_E_FORMAT, "%s: malformed packed dims at offset %zu", what, f.off);
            } else if (f.wt != ERT_PB_VARINT) {
                TFAIL(ERT_E_FORMAT, "%s: dims has wire type %d", what, f.wt);
            }
            for (int64_t k = 0; k < cnt; k++) {
                uint64_t v = f.v;
                if (f.wt == ERT_PB_LEN) (void)ert_pb_varint(&s, &v);
                int64_t d = (int64_t)v;
                if (d < 0) TFAIL(ERT_E_FORMAT, "%s: negative dim %lld", what, (long long)d);
                if (ndim >= ERT_MAX_DIMS) TFAIL(ERT_E_UNSUPPORTED, "%s: more than %d dims", what, ERT_MAX_DIMS);
                t->dims[ndim++] = d;
            }
            break;
        }
        case T_DATA_TYPE:
            if (f.wt != ERT_PB_VARINT) TFAIL(ERT_E_FORMAT, "%s: data_type has wire type %d", what, f.wt);
            t->onnx_type = (int)(int32_t)(uint32_t)f.v;
            break;
        case T_NAME:
            if (f.wt != ERT_PB_LEN) TFAIL(ERT_E_FORMAT, "%s: name has wire type %d", what, f.wt);
            t->name = f.sub.p;
            t->name_len = (size_t)(f.sub.end - f.sub.p);
            break;
        case T_RAW:
            if (f.wt != ERT_PB_LEN) TFAIL(ERT_E_FORMAT, "%s: raw_data has wire type %d", what, f.wt);
            has_raw = true;
            raw = f.sub;
            break;
        case T_FLOAT: case T_INT32: case T_INT64: {
            int64_t c;
            if (f.wt == ERT_PB_LEN) {
                if (f.num == T_FLOAT) {
                    size_t l = (size_t)(f.sub.end - f.sub.p);
                    if (l % 4) TFAIL(ERT_E_FORMAT, "%s: packed float_data length %zu is not a multiple of 4", what, l);
                    c = (int64_t)(l / 4);
                } else {
                    c = ert_pb_count_varints(f.sub);
                    if (c < 0) TFAIL(ERT_E_FORMAT, "%s: malformed packed int data at offset %zu", what, f.off);
                }
            } else if ((f.num == T_FLOAT && f.wt == ERT_PB_I32) || (f.num != T_FLOAT && f.wt == ERT_PB_VARINT)) {
                c = 1;
            } else {
                TFAIL(ERT_E_FORMAT, "%s: field %u has wire type %d", what, f.num, f.wt);
            }
            if (typed_field && typed_field != (int)f.num)
                TFAIL(ERT_E_FORMAT, "%s: data in more than one typed field", what);
            typed_field = (int)f.num;
            n_typed += c;
            break;
        }
        case T_STRING:
            TFAIL(ERT_E_UNSUPPORTED, "%s: string tensors are not supported", what);
        case T_SEGMENT:
            TFAIL(ERT_E_UNSUPPORTED, "%s: segmented tensors are not supported", what);
        case T_DOUBLE: case T_UINT64:
            /* only valid with DOUBLE/UINT64/COMPLEX128, refused below by dtype */
            break;
        case T_LOCATION:
            if (f.wt != ERT_PB_VARINT) TFAIL(ERT_E_FORMAT, "%s: data_location has wire type %d", what, f.wt);
            if (f.v > 1) TFAIL(ERT_E_FORMAT, "%s: unknown data_location %llu", what, (unsigned long long)f.v);
            external = f.v == 1;
            break;
        case T_EXTERNAL: {
            if (f.wt != ERT_PB_LEN) TFAIL(ERT_E_FORMAT, "%s: external_data has wire type %d", what, f.wt);
            /* StringStringEntryProto: key = 1, value = 2 */
            ert_pb e = f.sub;
            ert_pb_field g;
            const uint8_t *k = NULL, *v = NULL;
            size_t kl = 0, vl = 0;
            while ((r = ert_pb_next(&e, &g, &why)) == 1) {
                if (g.wt != ERT_PB_LEN) continue;
                if (g.num == 1) k = g.sub.p, kl = (size_t)(g.sub.end - g.sub.p);
                if (g.num == 2) v = g.sub.p, vl = (size_t)(g.sub.end - g.sub.p);
            }
            if (r < 0) TFAIL(ERT_E_FORMAT, "%s: external_data entry: %s", what, why);
            if (!k) break;
            if (kl == 8 && memcmp(k, "location", 8) == 0) {
                loc = v ? v : (const uint8_t *)"";
                loc_len = vl;
            } else if ((kl == 6 && memcmp(k, "offset", 6) == 0) || (kl == 6 && memcmp(k, "length", 6) == 0)) {
                uint64_t x = 0;
                if (vl == 0 || vl > 20) TFAIL(ERT_E_FORMAT, "%s: external_data %.*s is not a number", what, (int)kl, (const char *)k);
                for (size_t i = 0; i < vl; i++) {
                    if (v[i] < '0' || v[i] > '9' || x > (UINT64_MAX - (uint64_t)(v[i] - '0')) / 10)
                        TFAIL(ERT_E_FORMAT, "%s: external_data %.*s is not a number below 2^64", what, (int)kl, (const char *)k);
                    x = x * 10 + (uint64_t)(v[i] - '0');
                }
                if (k[0] == 'o') ext_off = x; /* absent offset: 0 */
                else has_len = true, ext_len = x;
            }
            break;
        }
        default:
            break; /* doc_string, metadata_props, unknown: skipped */
        }
    }
    if (r < 0) TFAIL(ERT_E_FORMAT, "%s: %s at offset %zu", what, why, ert_pb_off(&it));

    t->ndim = ndim;
    if (t->onnx_type == 0) TFAIL(ERT_E_FORMAT, "%s: data_type is missing (UNDEFINED)", what);
    t->dtype = ert_onnx_dtype(t->onnx_type);
    if (t->dtype == ERT_DTYPE_UNDEFINED) {
        if (strcmp(ert_onnx_dtype_name(t->onnx_type), "?") == 0)
            TFAIL(ERT_E_FORMAT, "%s: unknown data_type %d", what, t->onnx_type);
        TFAIL(ERT_E_UNSUPPORTED, "%s: data_type %s is not supported", what, ert_onnx_dtype_name(t->onnx_type));
    }
    if (!ert_dims_nelems(ndim, t->dims, &t->n_elems) ||
        ert_mul_ovf((size_t)t->n_elems, ert_dtype_size(t->dtype), &t->bytes) || t->bytes > (size_t)PTRDIFF_MAX)
        TFAIL(ERT_E_FORMAT, "%s: element count overflows", what);
    if (!external && !has_raw && typed_field == 0 && t->n_elems > 0)
        TFAIL(ERT_E_FORMAT, "%s: no data for %lld elements", what, (long long)t->n_elems);
    /* Every size check happens before the allocation, so a tiny hostile file
     * cannot make us allocate terabytes. */
    if (!external && has_raw && (size_t)(raw.end - raw.p) != t->bytes)
        TFAIL(ERT_E_FORMAT, "%s: raw_data has %zu bytes, shape and dtype need %zu", what, (size_t)(raw.end - raw.p), t->bytes);
    if (!external && !has_raw && t->n_elems > 0) {
        int want = t->dtype == ERT_DTYPE_F32 ? T_FLOAT : t->dtype == ERT_DTYPE_I64 ? T_INT64 : T_INT32;
        if (typed_field != want)
            TFAIL(ERT_E_FORMAT, "%s: %s data stored in the wrong field (%d)", what, ert_onnx_dtype_name(t->onnx_type), typed_field);
        if (n_typed != t->n_elems)
            TFAIL(ERT_E_FORMAT, "%s: %lld values, shape needs %lld", what, (long long)n_typed, (long long)t->n_elems);
    }

    if (external) {
        st = read_external(ctx, dir, what, loc, loc ? loc_len : 0, ext_off, has_len, ext_len, &data, t->bytes);
        if (st != ERT_OK) goto fail;
        t->data = data;
        return ERT_OK;
    }
    data = malloc(t->bytes ? t->bytes : 1);
    if (!data) TFAIL(ERT_E_NOMEM, "%s: out of memory (%zu bytes)", what, t->bytes);
    if (has_raw) {
        if (t->bytes) memcpy(data, raw.p, t->bytes);
    } else if (t->n_elems > 0) {
        /* pass 2: convert */
        int64_t i = 0;
        it = b;
        while ((r = ert_pb_next(&it, &f, &why)) == 1) {
            if ((int)f.num != typed_field) continue;
            if (f.wt == ERT_PB_LEN) {
                ert_pb s = f.sub;
                if (typed_field == T_FLOAT) {
                    size_t l = (size_t)(s.end - s.p);
                    memcpy((float *)data + i, s.p, l);
                    i += (int64_t)(l / 4);
                } else {
                    while (s.p < s.end) {
                        uint64_t v = 0;
                        if (ert_pb_varint(&s, &v)) TFAIL(ERT_E_INTERNAL, "%s: varint", what);
                        if (typed_field == T_INT64) ((int64_t *)data)[i] = (int64_t)v;
                        else put_i32(t->dtype, data, i, v);
                        i++;
                    }
                }
            } else if (typed_field == T_FLOAT) {
                uint32_t u = (uint32_t)f.v;
                memcpy((float *)data + i, &u, 4);
                i++;
            } else {
                if (typed_field == T_INT64) ((int64_t *)data)[i] = (int64_t)f.v;
                else put_i32(t->dtype, data, i, f.v);
                i++;
            }
        }
    }
    t->data = data;
    return ERT_OK;
fail:
    free(data);
    {
        const uint8_t *name = t->name; /* kept: the caller names the node that reads it */
        size_t name_len = t->name_len;
        memset(t, 0, sizeof *t);
        t->name = name, t->name_len = name_len;
    }
    return st;
}

/* ------------------------------------------------------------ file helpers */

/* Reads a whole regular file into malloc'd memory. Used for .pb test data
 * (model files are read by the lead's ert_model_load_file). */
static ert_status read_file(ert_context *ctx, const char *path, uint8_t **data, size_t *size) {
    int fd = -1;
    uint64_t fsize = 0;
    ert_status ost = ert_file_open_read(ctx, path, &fd, &fsize); /* core/fileio.c: a FIFO is refused, not waited on */
    if (ost != ERT_OK) return ost;
    if (fsize > (uint64_t)PTRDIFF_MAX / 2) {
        close(fd);
        return ert_set_error(ctx, ERT_E_IO, "'%s' is too large (%llu bytes)", path, (unsigned long long)fsize);
    }
    size_t n = (size_t)fsize, got = 0;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return ert_set_error(ctx, ERT_E_NOMEM, "out of memory reading '%s' (%zu bytes)", path, n);
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            close(fd);
            return ert_set_error(ctx, ERT_E_IO, "reading '%s' failed", path);
        }
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *size = n;
    return ERT_OK;
}

ert_status ert_tensor_load_pb(ert_context *ctx, const char *path, ert_tensor_info *info, void **data,
                              size_t *bytes) {
    if (!path || !info || !data || !bytes) return ert_set_error(ctx, ERT_E_ARG, "ert_tensor_load_pb: NULL argument");
    uint8_t *file = NULL;
    size_t size = 0;
    ert_status st = read_file(ctx, path, &file, &size);
    if (st != ERT_OK) return st;
    /* external data of a .pb resolves next to the .pb */
    size_t pl = strlen(path);
    char *dir = malloc(pl + 2);
    if (!dir) {
        free(file);
        return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    }
    memcpy(dir, path, pl + 1);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else strcpy(dir, ".");
    ert_onnx_tensor t;
    ert_pb b = {file, file + size, file};
    char what[64];
    snprintf(what, sizeof what, "TensorProto");
    st = ert_onnx_decode_tensor(ctx, b, dir, what, &t);
    free(dir);
    if (st != ERT_OK) {
        free(file);
        return st;
    }
    if (t.name_len && memchr(t.name, 0, t.name_len)) {
        free(t.data);
        free(file);
        return ert_set_error(ctx, ERT_E_FORMAT, "%s: tensor name has a NUL byte", path);
    }
    size_t total;
    uint8_t *out = NULL;
    if (ert_add_ovf(t.bytes, t.name_len + 1, &total) || !(out = realloc(t.data, total))) {
        free(t.data);
        free(file);
        return ert_set_error(ctx, ERT_E_NOMEM, "%s: out of memory", path);
    }
    if (t.name_len) memcpy(out + t.bytes, t.name, t.name_len);
    out[t.bytes + t.name_len] = 0;
    free(file);
    memset(info, 0, sizeof *info);
    info->name = (const char *)out + t.bytes;
    info->dtype = t.dtype;
    info->ndim = t.ndim;
    for (int i = 0; i < t.ndim; i++) info->dims[i] = t.dims[i];
    *data = out;
    *bytes = t.bytes;
    return ERT_OK;
}
