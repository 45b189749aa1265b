#define _POSIX_C_SOURCE 200809L
#include "cli_io.h"

#include "cli_util.h"
#include "npy.h"
#include "proc.h" /* apps/camera: the CPU twin of the library's GPU preprocessing */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

const char *cli_file_kind(const char *path) {
    FILE *f = cli_fopen_regular(path);
    if (!f) return NULL;
    unsigned char m[8] = {0};
    size_t got = fread(m, 1, sizeof m, f);
    fclose(f);
    if (got >= 6 && memcmp(m, "\x93NUMPY", 6) == 0) return "npy";
    if (got >= 3 && m[0] == 0xff && m[1] == 0xd8 && m[2] == 0xff) return "jpeg";
    if (got >= 2 && m[0] == 'P' && (m[1] == '5' || m[1] == '6')) return "pnm";
    if (got >= 8 && memcmp(m, "\x89PNG\r\n\x1a\n", 8) == 0) return "png";
    return NULL;
}

int cli_tensor_load(ert_context *ctx, cli_tensor *t, char *err, size_t n) {
    /* opened first for a plain message on a missing file or a FIFO */
    FILE *f = cli_fopen_regular(t->path);
    if (!f) return fail(err, n, "file '%s': %s", t->path, cli_fopen_why(errno));
    fclose(f);
    const char *kind = cli_file_kind(t->path);
    if (kind && strcmp(kind, "npy") == 0) {
        npy_array a;
        if (npy_read_file(t->path, &a, err, n) != 0) return -1;
        t->dtype = a.dtype;
        t->ndim = a.ndim;
        memcpy(t->dims, a.dims, sizeof a.dims);
        t->data = a.data;
        t->bytes = a.bytes;
        t->from_f64 = a.from_f64;
        return 0;
    }
    if (kind) return fail(err, n, "'%s' looks like a %s image, not a tensor (.npy or .pb)", t->path, kind);
    ert_tensor_info info;
    void *data = NULL;
    size_t bytes = 0;
    ert_status st = ert_tensor_load_pb(ctx, t->path, &info, &data, &bytes);
    if (st != ERT_OK)
        return fail(err, n, "'%s' is neither .npy nor a readable TensorProto .pb: %s [%s]", t->path, ert_last_error(ctx),
                    ert_status_str(st));
    t->dtype = info.dtype;
    t->ndim = info.ndim;
    memcpy(t->dims, info.dims, sizeof info.dims);
    t->data = data;
    t->bytes = bytes;
    t->from_pb = 1;
    t->file_name = info.name && *info.name ? info.name : NULL;
    return 0;
}

void cli_tensor_free(cli_tensor *t) {
    if (t->from_pb)
        ert_free(t->data);
    else
        free(t->data);
    t->data = NULL;
}

/* Whole file into memory. */
static unsigned char *read_all(const char *path, size_t *size, char *err, size_t n) {
    FILE *f = cli_fopen_regular(path);
    if (!f) return fail(err, n, "file '%s': %s", path, cli_fopen_why(errno)), NULL;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    int oom = 0;
    for (;;) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 1 << 16;
            unsigned char *nb = realloc(buf, nc);
            if (!nb) {
                oom = 1;
                break;
            }
            buf = nb, cap = nc;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f) || oom;
    fclose(f);
    if (bad || !buf) {
        free(buf);
        return fail(err, n, "cannot read '%s'", path), NULL;
    }
    *size = len;
    return buf;
}

/* Decode to packed RGB u8 (malloc'd). */
static uint8_t *decode_rgb(ert_context *ctx, const char *path, const char *kind, int *w, int *h, char *err, size_t n) {
    if (strcmp(kind, "pnm") == 0) {
        int c = 0;
        uint8_t *px = NULL;
        ert_status st = ert_image_read_pnm(ctx, path, w, h, &c, &px);
        if (st != ERT_OK) return fail(err, n, "image '%s': %s [%s]", path, ert_last_error(ctx), ert_status_str(st)), NULL;
        uint8_t *rgb = malloc((size_t)*w * (size_t)*h * 3);
        if (rgb)
            for (size_t i = 0; i < (size_t)*w * (size_t)*h; i++)
                for (int k = 0; k < 3; k++) rgb[3 * i + (size_t)k] = px[c == 1 ? i : 3 * i + (size_t)k];
        ert_free(px);
        if (!rgb) fail(err, n, "out of memory");
        return rgb;
    }
    if (strcmp(kind, "jpeg") != 0) return fail(err, n, "image '%s': %s is not supported (JPEG, PPM, PGM are)", path, kind), NULL;
    if (!ert_jpeg_available())
        return fail(err, n, "image '%s': this build has no JPEG codec (TurboJPEG); use a PPM/PGM file", path), NULL;
    size_t size = 0;
    unsigned char *file = read_all(path, &size, err, n);
    if (!file) return NULL;
    ert_jpeg *j = NULL;
    uint8_t *rgb = NULL;
    int c;
    ert_status st = ert_jpeg_create(ctx, &j);
    if (st == ERT_OK) st = ert_jpeg_info(j, file, size, w, h, &c);
    if (st == ERT_OK) {
        size_t bytes = (size_t)*w * (size_t)*h * 3;
        rgb = malloc(bytes);
        if (!rgb) st = ERT_E_NOMEM;
        else st = ert_jpeg_decode(j, file, size, ERT_PIXEL_RGB, rgb, bytes, 0, NULL, NULL);
    }
    if (st != ERT_OK) {
        fail(err, n, "image '%s': %s [%s]", path, ert_last_error(ctx), ert_status_str(st));
        free(rgb);
        rgb = NULL;
    }
    ert_jpeg_free(j);
    free(file);
    return rgb;
}

int cli_image_load(ert_context *ctx, const ert_tensor_info *mi, const cli_image_options *o, int batch,
                   cli_tensor *t, int *used_gpu, char *err, size_t n) {
    *used_gpu = 0;
    const char *kind = cli_file_kind(t->path);
    if (mi->ndim != 4)
        return fail(err, n, "it has %d dims: an image needs a (N, C, H, W) or, with --nhwc, (N, H, W, C) input", mi->ndim);
    if (mi->dtype != ERT_DTYPE_F32 && mi->dtype != ERT_DTYPE_F16)
        return fail(err, n, "it is %s: an image fills f32 or f16 inputs", ert_dtype_name(mi->dtype));
    int cdim = o->nhwc ? 3 : 1, hdim = o->nhwc ? 1 : 2, wdim = hdim + 1;
    int64_t c = mi->dims[cdim];
    if (c < 0) c = 3;
    if (c != 1 && c != 3)
        return fail(err, n, "it has %lld channels at dim %d: an image gives 1 or 3%s", (long long)c, cdim,
                    o->nhwc ? "" : " (an NHWC input needs --nhwc)");
    int ow = o->w ? o->w : (int)mi->dims[wdim], oh = o->h ? o->h : (int)mi->dims[hdim];
    if (ow <= 0 || oh <= 0)
        return fail(err, n, "its height or width is dynamic: give --size WxH");
    if ((mi->dims[wdim] > 0 && mi->dims[wdim] != ow) || (mi->dims[hdim] > 0 && mi->dims[hdim] != oh))
        return fail(err, n, "--size %dx%d, but the model fixes it at %lldx%lld (WxH)", ow, oh, (long long)mi->dims[wdim],
                    (long long)mi->dims[hdim]);
    int64_t nb = mi->dims[0] > 0 ? mi->dims[0] : batch > 0 ? batch : 1;
    int w = 0, h = 0;
    uint8_t *rgb = decode_rgb(ctx, t->path, kind ? kind : "unknown", &w, &h, err, n);
    if (!rgb) return -1;
    size_t es = mi->dtype == ERT_DTYPE_F16 ? 2 : 4, one = (size_t)ow * (size_t)oh * (size_t)c * es;
    t->data = malloc(one * (size_t)nb);
    if (!t->data) {
        free(rgb);
        return fail(err, n, "out of memory");
    }
    ert_preprocessor_options po = {.out_w = ow, .out_h = oh, .fit = (ert_fit)o->fit, .nhwc = o->nhwc, .bgr = o->bgr,
                                   .gray = c == 1, .f16 = es == 2};
    memcpy(po.mean, o->mean, sizeof po.mean);
    memcpy(po.std, o->std, sizeof po.std);
    ert_preprocessor *pp = NULL;
    /* its own quiet context: without a GPU the CPU path below is the answer, not an error to log */
    ert_context *pctx = NULL;
    if (ert_context_create(NULL, &pctx) == ERT_OK && ert_preprocessor_create(pctx, w, h, &po, &pp) == ERT_OK &&
        ert_preprocessor_run(pp, rgb, w, h, (size_t)w * 3, ERT_PIXEL_RGB, t->data) == ERT_OK) {
        *used_gpu = 1;
    } else {
        cam_pre_options co = {.out_w = ow, .out_h = oh, .fit = (cam_fit)o->fit, .nhwc = o->nhwc, .bgr = o->bgr,
                              .gray = c == 1, .f16 = es == 2};
        memcpy(co.mean, o->mean, sizeof co.mean);
        memcpy(co.std, o->std, sizeof co.std);
        cam_preprocess(rgb, w, h, (size_t)w * 3, &co, t->data, NULL);
    }
    ert_preprocessor_free(pp);
    ert_context_free(pctx);
    free(rgb);
    for (int64_t b = 1; b < nb; b++) memcpy((char *)t->data + (size_t)b * one, t->data, one);
    t->dtype = mi->dtype;
    t->ndim = 4;
    t->dims[0] = nb;
    t->dims[cdim] = c;
    t->dims[hdim] = oh;
    t->dims[wdim] = ow;
    t->bytes = one * (size_t)nb;
    t->is_image = 1;
    return 0;
}

int cli_parse_dims(const char *s, int *ndim, int64_t *dims) {
    int k = 0;
    const char *p = s;
    if (!*p) return -1;
    for (;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > (1LL << 40) || k == ERT_MAX_DIMS) return -1;
        dims[k++] = v;
        if (*end == 0) break;
        if (*end != 'x' && *end != ',') return -1;
        p = end + 1;
    }
    *ndim = k;
    return 0;
}

const char *cli_input_names(const ert_model *m, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    ert_tensor_info mi;
    for (int i = 0; i < ert_model_n_inputs(m) && k < n; i++)
        if (ert_model_input_info(m, i, &mi) == ERT_OK) k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", mi.name);
    return buf;
}

int cli_shape_resolve(const ert_model *m, const char *spec, ert_input_shape *shapes, int *n, char *err, size_t n_err) {
    const char *eq = strrchr(spec, '=');
    ert_tensor_info mi;
    char names[512], s1[160], s2[160];
    cli_input_names(m, names, sizeof names);
    int idx = -1;
    if (eq) {
        for (int i = 0; i < ert_model_n_inputs(m) && idx < 0; i++)
            if (ert_model_input_info(m, i, &mi) == ERT_OK && strlen(mi.name) == (size_t)(eq - spec) &&
                strncmp(mi.name, spec, (size_t)(eq - spec)) == 0)
                idx = i;
        if (idx < 0) return fail(err, n_err, "--shape '%s': the model has no such input (its inputs: %s)", spec, names);
    } else if (ert_model_n_inputs(m) == 1) {
        idx = 0;
        ert_model_input_info(m, 0, &mi);
    } else {
        return fail(err, n_err, "--shape '%s': give NAME=DIMS (the model's inputs: %s)", spec, names);
    }
    ert_input_shape sh = {.name = mi.name};
    if (cli_parse_dims(eq ? eq + 1 : spec, &sh.ndim, sh.dims) != 0)
        return fail(err, n_err, "--shape '%s': expected NAME=DIMS, DIMS like 1x3x224x224 (integers >= 0)", spec);
    int bad = sh.ndim != mi.ndim;
    for (int d = 0; d < mi.ndim && !bad; d++) bad = mi.dims[d] >= 0 && mi.dims[d] != sh.dims[d];
    if (bad)
        return fail(err, n_err, "--shape '%s': input '%s' is declared %s; only its dynamic (?) dims may be set", spec,
                    mi.name, cli_shape_str(s1, sizeof s1, mi.ndim, mi.dims));
    for (int j = 0; j < *n; j++)
        if (strcmp(shapes[j].name, mi.name) == 0)
            return fail(err, n_err, "--shape '%s': input '%s' already has shape %s", spec, mi.name,
                        cli_shape_str(s2, sizeof s2, shapes[j].ndim, shapes[j].dims));
    shapes[(*n)++] = sh;
    return 0;
}

int cli_parse_floats3(const char *s, float *v) {
    const char *p = s;
    int k = 0;
    for (; k < 3; k++) {
        char *end;
        errno = 0;
        double d = strtod(p, &end);
        if (end == p || errno || !isfinite(d)) return -1;
        v[k] = (float)d;
        if (*end == 0) break;
        if (*end != ',') return -1;
        p = end + 1;
    }
    if (k == 0) v[1] = v[2] = v[0]; /* one value for every channel */
    else if (k != 2) return -1;
    return 0;
}

static int is_float(ert_dtype dt) { return dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16; }

int cli_tensor_compare(const ert_tensor_info *gi, const void *got, const cli_tensor *ref, double atol, double rtol,
                       char *msg, size_t n) {
    char s1[160], s2[160];
    if (gi->dtype != ref->dtype) {
        snprintf(msg, n, "dtype %s, reference '%s' is %s", ert_dtype_name(gi->dtype), ref->path, ert_dtype_name(ref->dtype));
        return 0;
    }
    int same = gi->ndim == ref->ndim;
    for (int d = 0; same && d < gi->ndim; d++) same = gi->dims[d] == ref->dims[d];
    if (!same) {
        snprintf(msg, n, "shape %s, reference '%s' is %s", cli_shape_str(s1, sizeof s1, gi->ndim, gi->dims), ref->path,
                 cli_shape_str(s2, sizeof s2, ref->ndim, ref->dims));
        return 0;
    }
    int64_t ne = cli_numel(gi->ndim, gi->dims), worst = -1, bad = 0;
    double worst_ratio = 0, max_err = 0;
    int fl = is_float(gi->dtype);
    for (int64_t i = 0; i < ne; i++) {
        double g = cli_elem(gi->dtype, got, (size_t)i), e = cli_elem(ref->dtype, ref->data, (size_t)i), err, ratio;
        if (isnan(g) || isnan(e)) err = isnan(g) && isnan(e) ? 0 : INFINITY;
        else if (isinf(g) || isinf(e)) err = g == e ? 0 : INFINITY;
        else err = fabs(g - e);
        ratio = fl ? err / (atol + rtol * (isfinite(e) ? fabs(e) : 0)) : (err > 0 ? INFINITY : 0);
        if (err > max_err) max_err = err;
        if (ratio > 1) {
            bad++;
            if (worst < 0 || ratio > worst_ratio) worst = i, worst_ratio = ratio;
        }
    }
    if (worst >= 0) {
        snprintf(msg, n, "%lld of %lld values differ from '%s' (max |err| %.3g); worst at [%lld]: got %.7g, expected %.7g",
                 (long long)bad, (long long)ne, ref->path, max_err, (long long)worst,
                 cli_elem(gi->dtype, got, (size_t)worst), cli_elem(ref->dtype, ref->data, (size_t)worst));
        return 0;
    }
    snprintf(msg, n, "%lld values match '%s' (max |err| %.3g)", (long long)ne, ref->path, max_err);
    return 1;
}
