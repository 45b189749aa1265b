/*
 * `edgert quantize MODEL --calib DIR|IDX|NPY... --out OUT.ert|OUT.onnx`
 *
 * Loads a calibration set for the model's one input, calls
 * ert_model_quantize (include/edgert.h: method, per-channel weights,
 * keep-float patterns, sensitivity and --max-drop) and saves the QDQ model
 * as .ert or, by extension, ONNX. Optionally (--eval) runs the float and the
 * quantized model on a second set and reports both top-1 accuracies.
 *
 * Calibration sources (--calib, repeatable, read in the order given):
 * - a folder: every file in it and in its sub-folders (one level, the
 *   ImageFolder layout), in byte order of the names, decoded and
 *   preprocessed exactly as `edgert run -i x=IMAGE` does (cli_image_load:
 *   bilinear resize to the input, v/255, (v - mean) / std, --bgr, --nhwc,
 *   --fit); a file that cannot be decoded (corrupt, truncated, not an
 *   image) is skipped and counted;
 * - an IDX file of u8 images (N, H, W) (MNIST/Fashion-MNIST, gzip or not),
 *   matching the input's H x W (1 or 3 channels): v/255, (v - mean) / std,
 *   as `edgert train` and the camera demo normalise;
 * - a .npy file of f32 (or f64) samples: (N, ...) or one (...) sample of
 *   the input's shape without the batch dim.
 * --calib-labels / --eval-labels: IDX u8 or .npy integer class indices, one
 * per sample (before --limit). --limit N keeps the first N samples.
 * An empty set (nothing readable) is an error.
 */
#define _POSIX_C_SOURCE 200809L
#include "quantize_cmd.h"

#include "cli_io.h"
#include "cli_util.h"
#include "edgert.h"
#include "idx.h"
#include "npy.h"

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define Q_MAX_CALIB 64

typedef struct qopts {
    const char *model, *out, *method, *keep_float, *labels, *eval, *eval_labels, *shape;
    const char *calib[Q_MAX_CALIB];
    int n_calib;
    long limit, threads;
    double max_drop, percentile;
    int per_tensor, asym, json, verbose, have_max_drop;
    int equalize, bias_correct;  /* 1 on, -1 off, 0 the library's default */
    cli_image_options img;
} qopts;

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("edgert quantize: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static int usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("edgert quantize: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nsee `edgert quantize --help`\n", stderr);
    va_end(ap);
    return 2;
}

static const char *HELP_QUANTIZE =
    "usage: edgert quantize MODEL --calib DIR|IDX|NPY... --out OUT.ert|OUT.onnx [options]\n"
    "\n"
    "Post-training int8 quantization: runs the float model on a calibration set,\n"
    "picks a range per activation, and writes the model in QDQ form (int8 weights,\n"
    "QuantizeLinear/DequantizeLinear pairs) as .ert or ONNX (by OUT's extension).\n"
    "Weights: int8 symmetric, per output channel; activations: int8 symmetric,\n"
    "or uint8 with a zero point (--asymmetric).\n"
    "Layers: Conv, Gemm and MatMul with constant weights, Add of two activations.\n"
    "\n"
    "  --calib PATH        calibration data (repeatable): a folder of JPEG/PPM/PGM\n"
    "                      images (and its sub-folders), preprocessed like `edgert\n"
    "                      run` (corrupt files skipped and counted); an IDX file of\n"
    "                      u8 images (N, H, W); or a .npy of samples (N, ...)\n"
    "  --calib-labels FILE class index per calibration sample (IDX u8 or .npy):\n"
    "                      accuracy instead of top-1 agreement in the drop\n"
    "  --limit N           use the first N calibration samples (default all)\n"
    "  --method M          minmax, percentile, entropy or mse (default minmax); mse:\n"
    "                      the range with the least squared quantization error\n"
    "  --percentile P      for percentile, in (0, 100] (default 99.99)\n"
    "  --per-channel       one weight scale per output channel (default)\n"
    "  --per-tensor        one weight scale per weight tensor\n"
    "  --asymmetric        activations uint8 with a zero point over the clipped\n"
    "                      [min, max] (onnxruntime's default form): twice the\n"
    "                      resolution on tensors that are never negative\n"
    "  --equalize          cross-layer equalisation of Conv -> [Relu] -> Conv pairs\n"
    "                      before calibration (default; --no-equalize: off)\n"
    "  --bias-correct      correct each quantized layer's bias by its mean output\n"
    "                      error on the set (one pass per layer; default off,\n"
    "                      --no-bias-correct)\n"
    "  --keep-float PAT    leave layers whose node name matches the glob PAT float\n"
    "                      (comma-separated list; a pattern matching none is an error)\n"
    "  --max-drop X        measure each layer alone, then return the worst layers to\n"
    "                      float until the drop on the calibration set is <= X: top-1\n"
    "                      points (accuracy with labels, else changed top-1 classes)\n"
    "                      for (N, classes) outputs, else 100 x relative L2 error\n"
    "  --eval PATH         after quantizing, run float and int8 on this set (same\n"
    "                      forms as --calib) and report both; --eval-labels FILE\n"
    "  --shape NAME=DIMS   fix dynamic input dims (batch 1), e.g. x=1x3x640x640\n"
    "image preprocessing (as `edgert run`):\n"
    "  --size WxH          network input size (default: the input's H and W)\n"
    "  --mean R,G,B        per-channel mean after v/255 (default 0; one value: all)\n"
    "  --std R,G,B         per-channel std (default 1)\n"
    "  --bgr, --nhwc       channel order BGR; input (N, H, W, C)\n"
    "  --fit MODE          stretch, letterbox or crop (default stretch)\n"
    "\n"
    "  --out FILE          the quantized model, .ert or .onnx (required)\n"
    "  --threads N         CPU threads of the calibration runs (default 1)\n"
    "  --json              one JSON object on stdout: ranges, per-layer errors,\n"
    "                      kept-float layers, accuracy (also measures every layer)\n"
    "  -v, --verbose       library progress on stderr\n";

static int parse_dbl(const char *s, double lo, double hi, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

static int parse(int argc, char **argv, qopts *o) {
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = strcmp(a, "--calib") == 0 || strcmp(a, "--out") == 0 || strcmp(a, "--method") == 0 ||
                     strcmp(a, "--keep-float") == 0 || strcmp(a, "--calib-labels") == 0 || strcmp(a, "--eval") == 0 ||
                     strcmp(a, "--eval-labels") == 0 || strcmp(a, "--shape") == 0 || strcmp(a, "--limit") == 0 ||
                     strcmp(a, "--threads") == 0 || strcmp(a, "--max-drop") == 0 || strcmp(a, "--percentile") == 0 ||
                     strcmp(a, "--size") == 0 || strcmp(a, "--mean") == 0 || strcmp(a, "--std") == 0 ||
                     strcmp(a, "--fit") == 0;
        if (takes && !v) return usage("%s needs a value", a);
        if (takes) i++;
        long l;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return fputs(HELP_QUANTIZE, stdout), -1;
        else if (strcmp(a, "--calib") == 0) {
            if (o->n_calib == Q_MAX_CALIB) return usage("--calib given more than %d times", Q_MAX_CALIB);
            o->calib[o->n_calib++] = v;
        } else if (strcmp(a, "--out") == 0) o->out = v;
        else if (strcmp(a, "--method") == 0) {
            if (strcmp(v, "minmax") && strcmp(v, "percentile") && strcmp(v, "entropy") && strcmp(v, "mse"))
                return usage("--method '%s': expected minmax, percentile, entropy or mse", v);
            o->method = v;
        } else if (strcmp(a, "--keep-float") == 0) o->keep_float = v;
        else if (strcmp(a, "--calib-labels") == 0) o->labels = v;
        else if (strcmp(a, "--eval") == 0) o->eval = v;
        else if (strcmp(a, "--eval-labels") == 0) o->eval_labels = v;
        else if (strcmp(a, "--shape") == 0) o->shape = v;
        else if (strcmp(a, "--limit") == 0) {
            if (cli_parse_int(v, 1, 1L << 30, &l)) return usage("--limit '%s': expected an integer >= 1", v);
            o->limit = l;
        } else if (strcmp(a, "--threads") == 0) {
            if (cli_parse_int(v, 1, 256, &l)) return usage("--threads '%s': expected an integer in [1, 256]", v);
            o->threads = l;
        } else if (strcmp(a, "--max-drop") == 0) {
            if (parse_dbl(v, 0, 100, &o->max_drop)) return usage("--max-drop '%s': expected a number in [0, 100]", v);
            o->have_max_drop = 1;
        } else if (strcmp(a, "--percentile") == 0) {
            if (parse_dbl(v, 1e-9, 100, &o->percentile) || o->percentile <= 0)
                return usage("--percentile '%s': expected a number in (0, 100]", v);
        } else if (strcmp(a, "--size") == 0) {
            int nd = 0;
            int64_t d[ERT_MAX_DIMS];
            if (cli_parse_dims(v, &nd, d) || nd != 2 || d[0] <= 0 || d[1] <= 0 || d[0] > 16384 || d[1] > 16384)
                return usage("--size '%s': expected WxH", v);
            o->img.w = (int)d[0];
            o->img.h = (int)d[1];
        } else if (strcmp(a, "--mean") == 0) {
            if (cli_parse_floats3(v, o->img.mean)) return usage("--mean '%s': expected R,G,B or one number", v);
        } else if (strcmp(a, "--std") == 0) {
            if (cli_parse_floats3(v, o->img.std)) return usage("--std '%s': expected R,G,B or one number", v);
        } else if (strcmp(a, "--fit") == 0) {
            if (strcmp(v, "stretch") == 0) o->img.fit = ERT_FIT_STRETCH;
            else if (strcmp(v, "letterbox") == 0) o->img.fit = ERT_FIT_LETTERBOX;
            else if (strcmp(v, "crop") == 0) o->img.fit = ERT_FIT_CENTER_CROP;
            else return usage("--fit '%s': expected stretch, letterbox or crop", v);
        } else if (strcmp(a, "--per-channel") == 0) o->per_tensor = 0;
        else if (strcmp(a, "--per-tensor") == 0) o->per_tensor = 1;
        else if (strcmp(a, "--asymmetric") == 0) o->asym = 1;
        else if (strcmp(a, "--equalize") == 0) o->equalize = 1;
        else if (strcmp(a, "--no-equalize") == 0) o->equalize = -1;
        else if (strcmp(a, "--bias-correct") == 0) o->bias_correct = 1;
        else if (strcmp(a, "--no-bias-correct") == 0) o->bias_correct = -1;
        else if (strcmp(a, "--bgr") == 0) o->img.bgr = 1;
        else if (strcmp(a, "--nhwc") == 0) o->img.nhwc = 1;
        else if (strcmp(a, "--json") == 0) o->json = 1;
        else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) o->verbose = 1;
        else if (a[0] == '-') return usage("unknown option '%s'", a);
        else if (!o->model) o->model = a;
        else return usage("unexpected argument '%s' (takes one MODEL)", a);
    }
    if (!o->model) return usage("needs MODEL");
    if (!o->n_calib) return usage("needs --calib DIR|IDX|NPY");
    if (!o->out) return usage("needs --out OUT.ert|OUT.onnx");
    if (o->eval_labels && !o->eval) return usage("--eval-labels needs --eval");
    return 0;
}

/* ------------------------------------------------------------------ data */

/* Samples of the model's one input at batch 1, as f32. */
typedef struct qset {
    float *x;
    int64_t n, cap, limit;
    size_t per;               /* floats per sample */
    int64_t skipped;          /* files that could not be read as an image */
    int64_t *labels;
    int64_t n_labels;
} qset;

typedef struct qinput {
    ert_context *ctx;
    ert_tensor_info mi;       /* resolved dims (batch 1) */
    const qopts *o;
} qinput;

static bool full(const qset *s) { return s->limit && s->n >= s->limit; }

static float *grow(qset *s) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 64;
        float *x = realloc(s->x, (size_t)cap * s->per * sizeof *x);
        if (!x) return NULL;
        s->x = x;
        s->cap = cap;
    }
    return s->x + (size_t)s->n++ * s->per;
}

static int add_image(const qinput *in, qset *s, const char *path) {
    cli_tensor t = {.path = path};
    char err[512];
    int gpu = 0;
    if (in->mi.dtype != ERT_DTYPE_F32) return fail("input '%s' is %s: images fill f32 inputs", in->mi.name, ert_dtype_name(in->mi.dtype));
    if (cli_image_load(in->ctx, &in->mi, &in->o->img, 1, &t, &gpu, err, sizeof err) != 0) {
        s->skipped++;
        if (in->o->verbose) fprintf(stderr, "edgert quantize: skipped %s: %s\n", path, err);
        cli_tensor_free(&t);
        return 0;
    }
    float *dst = t.bytes == s->per * sizeof(float) ? grow(s) : NULL;
    if (dst) memcpy(dst, t.data, t.bytes);
    cli_tensor_free(&t);
    return dst ? 0 : fail("%s: out of memory or unexpected size", path);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted entries of a folder (malloc'd paths). */
static char **list_dir(const char *dir, int *n) {
    DIR *d = opendir(dir);
    *n = 0;
    if (!d) return NULL;
    char **v = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) break;
            v = nv;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(v[*n] = malloc(len))) break;
        snprintf(v[*n], len, "%s/%s", dir, e->d_name);
        (*n)++;
    }
    closedir(d);
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v;
}

static int add_folder(const qinput *in, qset *s, const char *dir, int depth) {
    int n = 0, rc = 0;
    char **v = list_dir(dir, &n);
    for (int i = 0; i < n && rc == 0 && !full(s); i++) {
        struct stat st;
        if (stat(v[i], &st) != 0) s->skipped++;
        else if (S_ISDIR(st.st_mode)) rc = depth < 1 ? add_folder(in, s, v[i], depth + 1) : 0;
        else if (S_ISREG(st.st_mode)) rc = add_image(in, s, v[i]);
    }
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
    return rc;
}

static int add_idx(const qinput *in, qset *s, const idx_array *a, const char *path) {
    const ert_tensor_info *mi = &in->mi;
    int nhwc = in->o->img.nhwc, cd = nhwc ? 3 : 1, hd = nhwc ? 1 : 2, wd = hd + 1;
    if (a->ndim != 3 || mi->ndim != 4 || mi->dtype != ERT_DTYPE_F32 || mi->dims[hd] != a->dims[1] ||
        mi->dims[wd] != a->dims[2] || (mi->dims[cd] != 1 && mi->dims[cd] != 3))
        return fail("%s: IDX images (%lld dims) do not fit input '%s' (f32 (1, C, H, W), C 1 or 3, H x W as the images)",
                    path, (long long)a->ndim, mi->name);
    int64_t c = mi->dims[cd], hw = a->dims[1] * a->dims[2];
    const float *mean = in->o->img.mean, *sd = in->o->img.std;
    for (int64_t k = 0; k < a->dims[0] && !full(s); k++) {
        float *dst = grow(s);
        if (!dst) return fail("out of memory");
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t p = 0; p < hw; p++) {
                float v = (a->data[k * hw + p] / 255.0f - mean[ch]) / (sd[ch] != 0 ? sd[ch] : 1.0f);
                dst[nhwc ? p * c + ch : ch * hw + p] = v;
            }
    }
    return 0;
}

static int add_npy(const qinput *in, qset *s, const npy_array *a, const char *path) {
    const ert_tensor_info *mi = &in->mi;
    bool batched = a->ndim == mi->ndim, ok = a->dtype == ERT_DTYPE_F32 && (batched || a->ndim == mi->ndim - 1);
    for (int d = 1; ok && d < mi->ndim; d++) ok = a->dims[batched ? d : d - 1] == mi->dims[d];
    if (!ok)
        return fail("%s: a .npy of f32 samples shaped like input '%s' without its batch dim, (N, ...) or (...)", path,
                    mi->name);
    int64_t n = batched ? a->dims[0] : 1;
    for (int64_t k = 0; k < n && !full(s); k++) {
        float *dst = grow(s);
        if (!dst) return fail("out of memory");
        memcpy(dst, (const float *)a->data + (size_t)k * s->per, s->per * sizeof *dst);
    }
    return 0;
}

static int load_source(const qinput *in, qset *s, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return fail("%s: no such file or folder", path);
    if (S_ISDIR(st.st_mode)) return add_folder(in, s, path, 0);
    const char *kind = cli_file_kind(path);
    char err[512];
    if (kind && strcmp(kind, "npy") == 0) {
        npy_array a;
        if (npy_read_file(path, &a, err, sizeof err) != 0) return fail("%s: %s", path, err);
        int rc = add_npy(in, s, &a, path);
        npy_free(&a);
        return rc;
    }
    if (kind && (strcmp(kind, "jpeg") == 0 || strcmp(kind, "pnm") == 0)) return add_image(in, s, path);
    idx_array a;
    if (idx_load(path, &a, err, sizeof err) != 0) return fail("%s: not a folder, .npy, image or IDX file (%s)", path, err);
    int rc = add_idx(in, s, &a, path);
    idx_free(&a);
    return rc;
}

/* Class indices from an IDX u8 (N) or a .npy of integers (N). */
static int load_labels(const char *path, qset *s) {
    char err[512];
    const char *kind = cli_file_kind(path);
    int64_t n = 0;
    if (kind && strcmp(kind, "npy") == 0) {
        npy_array a;
        if (npy_read_file(path, &a, err, sizeof err) != 0) return fail("%s: %s", path, err);
        bool ok = a.ndim == 1 && (a.dtype == ERT_DTYPE_I64 || a.dtype == ERT_DTYPE_I32 || a.dtype == ERT_DTYPE_U8);
        n = ok ? a.dims[0] : 0;
        s->labels = ok ? malloc((size_t)(n ? n : 1) * sizeof *s->labels) : NULL;
        for (int64_t i = 0; s->labels && i < n; i++)
            s->labels[i] = a.dtype == ERT_DTYPE_I64 ? ((int64_t *)a.data)[i]
                           : a.dtype == ERT_DTYPE_I32 ? ((int32_t *)a.data)[i]
                                                      : ((uint8_t *)a.data)[i];
        npy_free(&a);
        if (!ok) return fail("%s: labels must be a 1-D .npy of int64, int32 or uint8", path);
    } else {
        idx_array a;
        if (idx_load(path, &a, err, sizeof err) != 0) return fail("%s: %s", path, err);
        bool ok = a.ndim == 1;
        n = ok ? a.dims[0] : 0;
        s->labels = ok ? malloc((size_t)(n ? n : 1) * sizeof *s->labels) : NULL;
        for (int64_t i = 0; s->labels && i < n; i++) s->labels[i] = a.data[i];
        idx_free(&a);
        if (!ok) return fail("%s: labels must be a 1-D IDX file", path);
    }
    if (!s->labels) return fail("out of memory");
    s->n_labels = n;
    return 0;
}

static int load_set(const qinput *in, qset *s, const char *const *paths, int n_paths, const char *labels, long limit) {
    s->limit = limit;
    for (int i = 0; i < n_paths && !full(s); i++)
        if (load_source(in, s, paths[i])) return 1;
    if (s->n == 0)
        return fail("the set %s%s is empty: no readable sample (%lld files skipped)", paths[0], n_paths > 1 ? ", ..." : "",
                    (long long)s->skipped);
    if (labels) {
        if (load_labels(labels, s)) return 1;
        if (s->skipped || (s->n_labels != s->n && !(limit && s->n_labels >= s->n)))
            return fail("%s: %lld labels for %lld samples (%lld skipped)", labels, (long long)s->n_labels,
                        (long long)s->n, (long long)s->skipped);
    }
    return 0;
}

static void set_free(qset *s) {
    free(s->x);
    free(s->labels);
}

/* ------------------------------------------------------------------ eval */

typedef struct evalres {
    double top1_f, top1_q, agree, rel_l2;
    int64_t n;
} evalres;

static int64_t argmax(const float *y, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (y[i] > y[b]) b = i;
    return b;
}

/* Float and quantized models over a set, output 0. */
static int evaluate(ert_context *ctx, const ert_model *fm, const ert_model *qm, const ert_session_options *so,
                    const qset *s, evalres *r) {
    ert_session *a = NULL, *b = NULL;
    int rc = 0;
    if (ert_session_create(fm, so, &a) != ERT_OK || ert_session_create(qm, so, &b) != ERT_OK) {
        rc = fail("eval session: %s", ert_last_error(ctx));
        goto done;
    }
    ert_tensor_info oi;
    ert_session_output_info(a, 0, &oi);
    int64_t n_out = 1;
    for (int d = 0; d < oi.ndim; d++) n_out *= oi.dims[d];
    int64_t classes = oi.ndim == 2 ? oi.dims[1] : 0;
    double num = 0, den = 0;
    int64_t hf = 0, hq = 0, same = 0;
    for (int64_t k = 0; k < s->n; k++) {
        const float *x = s->x + (size_t)k * s->per;
        const void *yf, *yq;
        if (ert_session_set_input(a, 0, x, s->per * sizeof *x) != ERT_OK || ert_session_run(a) != ERT_OK ||
            ert_session_set_input(b, 0, x, s->per * sizeof *x) != ERT_OK || ert_session_run(b) != ERT_OK) {
            rc = fail("eval sample %lld: %s", (long long)k, ert_last_error(ctx));
            goto done;
        }
        ert_session_output_data(a, 0, &yf);
        ert_session_output_data(b, 0, &yq);
        const float *f = yf, *q = yq;
        for (int64_t i = 0; i < n_out; i++) {
            num += ((double)q[i] - f[i]) * ((double)q[i] - f[i]);
            den += (double)f[i] * f[i];
        }
        if (classes > 1) {
            int64_t cf = argmax(f, classes), cq = argmax(q, classes);
            same += cf == cq;
            if (s->labels) hf += cf == s->labels[k], hq += cq == s->labels[k];
        }
    }
    r->n = s->n;
    r->rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    r->agree = classes > 1 ? 100.0 * (double)same / (double)s->n : NAN;
    r->top1_f = classes > 1 && s->labels ? 100.0 * (double)hf / (double)s->n : NAN;
    r->top1_q = classes > 1 && s->labels ? 100.0 * (double)hq / (double)s->n : NAN;
done:
    ert_session_free(a);
    ert_session_free(b);
    return rc;
}

/* ------------------------------------------------------------------ output */

static void json_num(const char *key, double v, bool comma) {
    if (isfinite(v)) printf("\"%s\": %.9g%s", key, v, comma ? ", " : "");
    else printf("\"%s\": null%s", key, comma ? ", " : "");
}

static const char *state_name(ert_quant_keep k) {
    return k == ERT_QUANT_QUANTIZED ? "int8" : k == ERT_QUANT_KEEP_PATTERN ? "float (--keep-float)" : "float (--max-drop)";
}

static void print_json(const qopts *o, const qset *cs, const ert_quantize_report *r, const evalres *ev, double secs) {
    printf("{\"model\": ");
    cli_json_str(stdout, o->model);
    printf(", \"out\": ");
    cli_json_str(stdout, o->out);
    printf(", \"method\": \"%s\", \"per_channel\": %s, \"activations\": \"%s\", ", o->method,
           o->per_tensor ? "false" : "true", o->asym ? "u8" : "s8");
    printf("\"n_samples\": %d, \"skipped\": %lld, ", r->n_samples, (long long)cs->skipped);
    json_num("max_drop", o->have_max_drop ? o->max_drop : NAN, true);
    printf("\"calib\": {");
    json_num("float_top1", r->float_top1, true);
    json_num("quant_top1", r->quant_top1, true);
    json_num("rel_l2", r->rel_l2, true);
    json_num("drop", r->drop, false);
    printf("}, \"ranges\": [");
    for (int k = 0; k < r->n_ranges; k++) {
        const ert_quant_range *g = &r->ranges[k];
        printf("%s{\"tensor\": ", k ? ", " : "");
        cli_json_str(stdout, g->tensor);
        printf(", ");
        json_num("min", g->min, true);
        json_num("max", g->max, true);
        json_num("amax", g->amax, true);
        json_num("lo", g->lo, true);
        json_num("hi", g->hi, true);
        json_num("scale", g->scale, true);
        printf("\"zero_point\": %d", g->zero_point);
        printf("}");
    }
    printf("], \"layers\": [");
    for (int k = 0; k < r->n_layers; k++) {
        const ert_quant_layer *l = &r->layers[k];
        printf("%s{\"node\": ", k ? ", " : "");
        cli_json_str(stdout, l->node);
        printf(", \"op\": \"%s\", \"int8\": %s, ", l->op, l->state == ERT_QUANT_QUANTIZED ? "true" : "false");
        json_num("rel_l2", l->rel_l2, true);
        json_num("drop", l->drop, false);
        printf("}");
    }
    printf("], \"kept_float\": [");
    for (int k = 0, c = 0; k < r->n_layers; k++)
        if (r->layers[k].state != ERT_QUANT_QUANTIZED) {
            printf("%s", c++ ? ", " : "");
            cli_json_str(stdout, r->layers[k].node);
        }
    printf("]");
    if (ev) {
        printf(", \"eval\": {\"n\": %lld, ", (long long)ev->n);
        json_num("float_top1", ev->top1_f, true);
        json_num("quant_top1", ev->top1_q, true);
        json_num("agreement", ev->agree, true);
        json_num("rel_l2", ev->rel_l2, false);
        printf("}");
    }
    printf(", \"seconds\": %.3f}\n", secs);
}

static void print_human(const qopts *o, const qset *cs, const ert_quantize_report *r, const evalres *ev, double secs) {
    printf("quantized %s -> %s (%s, %s weights, %s activations) in %.2f s\n", o->model, o->out, o->method,
           o->per_tensor ? "per-tensor" : "per-channel", o->asym ? "u8 asymmetric" : "s8 symmetric", secs);
    printf("calibration: %d samples", r->n_samples);
    if (cs->skipped) printf(", %lld files skipped (unreadable or corrupt)", (long long)cs->skipped);
    printf("\n%d layers int8, %d float\n", r->n_layers - r->n_kept_float, r->n_kept_float);
    for (int k = 0; k < r->n_layers; k++) {
        const ert_quant_layer *l = &r->layers[k];
        printf("  %-32s %-8s %-22s", l->node, l->op, state_name(l->state));
        if (isfinite(l->rel_l2)) printf(" alone: rel L2 %.3g, drop %.3g", l->rel_l2, l->drop);
        printf("\n");
    }
    if (isfinite(r->float_top1)) printf("calibration set top-1: float %.2f%%, int8 %.2f%%\n", r->float_top1, r->quant_top1);
    printf("calibration set output error: rel L2 %.4g, drop %.4g\n", r->rel_l2, r->drop);
    if (ev) {
        if (isfinite(ev->top1_f))
            printf("eval (%lld samples) top-1: float %.2f%%, int8 %.2f%% (drop %.2f points)\n", (long long)ev->n,
                   ev->top1_f, ev->top1_q, ev->top1_f - ev->top1_q);
        if (isfinite(ev->agree)) printf("eval top-1 agreement %.2f%%, ", ev->agree);
        printf("eval rel L2 %.4g\n", ev->rel_l2);
    }
}

/* ------------------------------------------------------------------ main */

static void log_stderr(void *user, ert_log_level lvl, const char *msg) {
    (void)user;
    (void)lvl;
    fprintf(stderr, "edgert quantize: %s\n", msg);
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The input's shape at batch 1: --shape, then --size for an image's H, W. */
static int resolve_input(const ert_model *m, const qopts *o, ert_tensor_info *mi) {
    if (ert_model_n_inputs(m) != 1)
        return fail("the model has %d inputs: `edgert quantize` calibrates one-input models (the API takes more)",
                    ert_model_n_inputs(m));
    ert_model_input_info(m, 0, mi);
    if (o->shape) {
        ert_input_shape sh[1];
        int n = 0;
        char err[256];
        if (cli_shape_resolve(m, o->shape, sh, &n, err, sizeof err)) return usage("--shape: %s", err);
        memcpy(mi->dims, sh[0].dims, sizeof mi->dims);
    }
    if (mi->ndim >= 1 && mi->dims[0] < 0) mi->dims[0] = 1;
    if (mi->ndim >= 1 && mi->dims[0] != 1) return fail("input '%s' has batch %lld: samples are batch 1", mi->name, (long long)mi->dims[0]);
    if (mi->ndim == 4 && (o->img.w || o->img.h)) {
        int hd = o->img.nhwc ? 1 : 2;
        if (mi->dims[hd] < 0) mi->dims[hd] = o->img.h;
        if (mi->dims[hd + 1] < 0) mi->dims[hd + 1] = o->img.w;
    }
    for (int d = 0; d < mi->ndim; d++)
        if (mi->dims[d] < 0) return usage("input '%s' dim %d is dynamic: give --shape (or --size for images)", mi->name, d);
    return 0;
}

int edgert_cmd_quantize(int argc, char **argv) {
    qopts o = {.method = "minmax", .threads = 1, .img = {.std = {1, 1, 1}}};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    ert_context_options co = {.log = o.verbose ? log_stderr : NULL, .log_level = ERT_LOG_INFO};
    ert_context *ctx = NULL;
    ert_model *m = NULL, *q = NULL;
    qset cs = {0}, es = {0};
    ert_quantize_report rep = {0};
    evalres ev;
    rc = 1;
    double t0 = cli_now();
    if (ert_context_create(&co, &ctx) != ERT_OK) return fail("out of memory");
    if (ert_model_load_file(ctx, o.model, &m) != ERT_OK) {
        fail("%s: %s", o.model, ert_last_error(ctx));
        goto done;
    }
    qinput in = {.ctx = ctx, .o = &o};
    if ((rc = resolve_input(m, &o, &in.mi)) != 0) goto done;
    rc = 1;
    cs.per = es.per = 1;
    for (int d = 0; d < in.mi.ndim; d++) cs.per = es.per *= (size_t)in.mi.dims[d];
    if (load_set(&in, &cs, o.calib, o.n_calib, o.labels, o.limit)) goto done;
    if (cs.skipped) fprintf(stderr, "edgert quantize: %lld calibration files skipped (unreadable or corrupt)\n", (long long)cs.skipped);
    ert_input_shape shape = {.name = in.mi.name, .ndim = in.mi.ndim};
    memcpy(shape.dims, in.mi.dims, sizeof shape.dims);
    const void *data[1] = {cs.x};
    ert_quantize_options qo = {
        .version = ERT_QUANTIZE_OPTIONS_VERSION,
        .method = strcmp(o.method, "percentile") == 0 ? ERT_CALIB_PERCENTILE
                  : strcmp(o.method, "entropy") == 0  ? ERT_CALIB_ENTROPY
                  : strcmp(o.method, "mse") == 0      ? ERT_CALIB_MSE
                                                      : ERT_CALIB_MINMAX,
        .percentile = (float)o.percentile,
        .per_tensor = o.per_tensor,
        .asymmetric = o.asym,
        .equalize = o.equalize,
        .bias_correct = o.bias_correct,
        .keep_float = o.keep_float,
        /* --max-drop 0 asks for no drop at all: the smallest budget the API takes */
        .max_drop = o.have_max_drop ? (o.max_drop > 0 ? (float)o.max_drop : FLT_MIN) : 0,
        .sensitivity = o.json,
        .n_samples = (int)cs.n,
        .calib_data = data,
        .labels = cs.labels,
        .input_shapes = &shape,
        .n_input_shapes = 1,
        .n_threads = (int)o.threads,
        .report = &rep,
    };
    if (cs.n > INT32_MAX) {
        fail("too many calibration samples");
        goto done;
    }
    ert_status st = ert_model_quantize(m, &qo, &q);
    if (st != ERT_OK) {
        fail("%s [%s]", ert_last_error(ctx), ert_status_str(st));
        goto done;
    }
    st = ends_with(o.out, ".onnx") ? ert_model_save_onnx(q, o.out) : ert_model_save(q, o.out);
    if (st != ERT_OK) {
        fail("saving %s: %s [%s]", o.out, ert_last_error(ctx), ert_status_str(st));
        goto done;
    }
    evalres *evp = NULL;
    if (o.eval) {
        const char *ep[1] = {o.eval};
        if (load_set(&in, &es, ep, 1, o.eval_labels, 0)) goto done;
        ert_session_options so = {.batch = 1, .n_threads = (int)o.threads, .input_shapes = &shape, .n_input_shapes = 1};
        if (evaluate(ctx, m, q, &so, &es, &ev)) goto done;
        evp = &ev;
    }
    double secs = cli_now() - t0;
    if (o.json) print_json(&o, &cs, &rep, evp, secs);
    else print_human(&o, &cs, &rep, evp, secs);
    rc = fflush(stdout) == 0 ? 0 : fail("cannot write to standard output");
done:
    ert_quantize_report_free(&rep);
    set_free(&cs);
    set_free(&es);
    ert_model_free(q);
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}
