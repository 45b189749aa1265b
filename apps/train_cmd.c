/*
 * `edgert train MODEL --data DIR [options]`
 *
 * Trains a classifier with ert_trainer on an IDX dataset (MNIST / Fashion-
 * MNIST layout: DIR/train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte) or an ImageFolder of
 * JPEG/PGM/PPM images (DIR/<class>/<file>, or DIR/train/<class> +
 * DIR/test/<class>; apps/imgfolder.c: JPEG through the library's TurboJPEG
 * codec when built with it, gray, resized to the first image's size,
 * unreadable or corrupt files skipped and counted). MODEL is a model file
 * (.ert or ONNX) with one input (N, 1, H, W) and logits (N, classes), or the
 * word `small-cnn` (2 conv + 2 FC, built here with the builder API).
 *
 * Steps: load the data (pixels scaled to [0, 1] then standardised with
 * mean 0.286, std 0.353), hold out the last --val-split of the training set,
 * create the trainer, optionally --resume from a checkpoint (step count and
 * everything else restored; the epoch and position follow from the step,
 * and the per-epoch shuffle is seeded by (seed, epoch) so the order is the
 * same as in an uninterrupted run), train with a progress line (epoch, step,
 * loss, accuracy, images/s, ETA) on stderr or --json lines on stdout, save a
 * checkpoint after each epoch (--checkpoint), validate, and finally report
 * the test accuracy; --export writes the trained model as .ert.
 * --max-steps N stops (with a checkpoint) once the step count reaches N: an
 * interruption on purpose, for resume tests and time-boxed runs.
 * Evaluation (validation, test) counts every held-out sample: the trainer's
 * batch is fixed, so the last partial batch is padded with copies of a real
 * sample and only the real ones are scored (eval runs BatchNorm on running
 * statistics, so the padding cannot change them); loss and accuracy come
 * from the logits, per sample. An empty set is reported as "n/a" (JSON
 * null); training data with fewer than two classes is refused.
 * Limits: no PNG decoder; ImageFolder images are made gray (1-channel
 * models); training samples that do not fill a whole batch at the end of an
 * epoch are left out of that epoch.
 */
#define _POSIX_C_SOURCE 200809L
#include "train_cmd.h"

#include "cli_io.h"
#include "cli_util.h"
#include "edgert.h"
#include "idx.h"
#include "imgfolder.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRAIN_MAX_SHAPES 16

typedef struct topts {
    const char *shapes[TRAIN_MAX_SHAPES];
    int n_shapes;
    const char *model, *data, *ckpt, *resume, *export_path, *optim, *schedule, *device, *classes;
    long epochs, batch, threads, limit, last_n, warmup, seed, max_steps;
    double lr, momentum, wd, val_split;
    int json;
} topts;

static void vsay(const char *fmt, va_list ap, const char *tail) {
    fputs("edgert train: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(tail, stderr);
}

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap, "\n");
    va_end(ap);
    return 1;
}

static int parse_double(const char *s, double lo, double hi, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

static const char *HELP_TRAIN =
    "usage: edgert train MODEL|small-cnn --data DIR [options]\n"
    "\n"
    "Trains a classifier on an IDX dataset (MNIST/Fashion-MNIST layout) or an\n"
    "ImageFolder (DIR/<class>/*.jpg|pgm|ppm, or DIR/train + DIR/test). MODEL\n"
    "(.ert/.onnx, one (N, 1, H, W) input, (N, classes) logits) is fine-tuned;\n"
    "small-cnn is built in (2 conv + 2 FC). Progress on stderr, or JSON lines on\n"
    "stdout with --json; validation accuracy per epoch, test accuracy at the end.\n"
    "\n"
    "  --data DIR          the dataset (required)\n"
    "  --epochs N          default 1\n"
    "  --batch N           default 32\n"
    "  --lr F              default 0.05 for sgd, 0.002 for adam/adamw\n"
    "  --optim O           sgd, adam or adamw (default adam)\n"
    "  --momentum F        default 0.9 for sgd, 0 otherwise\n"
    "  --weight-decay F    default 0\n"
    "  --schedule S        constant or cosine (default cosine)\n"
    "  --warmup N          linear warm-up steps (default 0)\n"
    "  --val-split F       held-out part of the training images (default 0.1)\n"
    "  --limit N           use only the first N training images (default all)\n"
    "  --last-n N          train only the last N layers with parameters (default all)\n"
    "  --classes LIST      IDX data: keep labels 0-7 or 1,3,5 (the head keeps all)\n"
    "  --shape NAME=DIMS   fix a dynamic model input, e.g. x=32x1x28x28 (repeatable)\n"
    "  --checkpoint FILE   written after every epoch (default none)\n"
    "  --resume FILE       continue from a checkpoint\n"
    "  --export OUT.ert    save the trained model\n"
    "  --threads N         CPU worker threads (default 1)\n"
    "  --seed N            default 1\n"
    "  --max-steps N       stop (with a checkpoint) at step N (default: no limit)\n"
    "  --device D          cpu, cuda or auto (cuda when this build and machine have\n"
    "                      it, else cpu); default cpu; checkpoints work on both\n"
    "  --json              JSON lines on stdout\n";

/* One line naming the option, the value and what is allowed. */
static int usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap, "\nsee `edgert train --help`\n");
    va_end(ap);
    return 2;
}

/* Returns 0, an exit status, or -1 (help printed: exit 0). */
static int parse(int argc, char **argv, topts *o) {
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long l;
        double d;
#define NEED()                                                      \
    do {                                                            \
        if (!v) return usage("%s needs a value", a);                \
        i++;                                                        \
    } while (0)
#define INT(field, lo, hi)                                                                               \
    do {                                                                                                 \
        NEED();                                                                                          \
        if (cli_parse_int(v, lo, hi, &l)) return usage("%s '%s': expected an integer in [%ld, %ld]", a, v, (long)(lo), (long)(hi)); \
        o->field = l;                                                                                    \
    } while (0)
#define DBL(field, lo, hi)                                                                               \
    do {                                                                                                 \
        NEED();                                                                                          \
        if (parse_double(v, lo, hi, &d)) return usage("%s '%s': expected a number in [%g, %g]", a, v, (double)(lo), (double)(hi)); \
        o->field = d;                                                                                    \
    } while (0)
#define CHOICE(field, list, ...)                                                                         \
    do {                                                                                                 \
        NEED();                                                                                          \
        static const char *const ok_[] = {__VA_ARGS__};                                                  \
        int hit_ = 0;                                                                                    \
        for (size_t k_ = 0; k_ < sizeof ok_ / sizeof ok_[0]; k_++) hit_ |= strcmp(v, ok_[k_]) == 0;     \
        if (!hit_) return usage("%s '%s': expected one of %s", a, v, list);                              \
        o->field = v;                                                                                    \
    } while (0)
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return fputs(HELP_TRAIN, stdout), -1;
        else if (strcmp(a, "--data") == 0) { NEED(); o->data = v; }
        else if (strcmp(a, "--checkpoint") == 0) { NEED(); o->ckpt = v; }
        else if (strcmp(a, "--resume") == 0) { NEED(); o->resume = v; }
        else if (strcmp(a, "--export") == 0) { NEED(); o->export_path = v; }
        else if (strcmp(a, "--optim") == 0) CHOICE(optim, "sgd, adam, adamw", "sgd", "adam", "adamw");
        else if (strcmp(a, "--schedule") == 0) CHOICE(schedule, "constant, cosine", "constant", "cosine");
        else if (strcmp(a, "--device") == 0) CHOICE(device, "cpu, cuda, auto", "cpu", "cuda", "auto");
        else if (strcmp(a, "--classes") == 0) { NEED(); o->classes = v; }
        else if (strcmp(a, "--shape") == 0) {
            NEED();
            if (o->n_shapes == TRAIN_MAX_SHAPES) return usage("--shape given more than %d times", TRAIN_MAX_SHAPES);
            o->shapes[o->n_shapes++] = v;
        }
        else if (strcmp(a, "--epochs") == 0) INT(epochs, 1, 1000);
        else if (strcmp(a, "--batch") == 0) INT(batch, 1, 65536);
        else if (strcmp(a, "--threads") == 0) INT(threads, 1, 256);
        else if (strcmp(a, "--limit") == 0) INT(limit, 1, 1L << 30);
        else if (strcmp(a, "--last-n") == 0) INT(last_n, 1, 1 << 20);
        else if (strcmp(a, "--warmup") == 0) INT(warmup, 0, 1 << 30);
        else if (strcmp(a, "--seed") == 0) INT(seed, 0, 1L << 30);
        else if (strcmp(a, "--max-steps") == 0) INT(max_steps, 1, 1L << 40);
        else if (strcmp(a, "--lr") == 0) DBL(lr, 0, 10);
        else if (strcmp(a, "--momentum") == 0) DBL(momentum, 0, 0.999);
        else if (strcmp(a, "--weight-decay") == 0) DBL(wd, 0, 1);
        else if (strcmp(a, "--val-split") == 0) DBL(val_split, 0, 0.9);
        else if (strcmp(a, "--json") == 0) o->json = 1;
        else if (a[0] == '-') return usage("unknown option '%s'", a);
        else if (!o->model) o->model = a;
        else return usage("unexpected argument '%s' (takes one MODEL)", a);
#undef NEED
#undef INT
#undef DBL
#undef CHOICE
    }
    if (!o->model || !o->data) return usage("needs MODEL (a file or small-cnn) and --data DIR");
    return 0;
}

/* ------------------------------------------------------------------ small CNN */

static int32_t param(ert_builder *b, cli_rng *r, const char *nm, int nd, const int64_t *d, int fan_in) {
    int64_t n = cli_numel(nd, d);
    float *w = calloc((size_t)n, sizeof *w);
    int32_t id = -1;
    if (!w) return -1;
    float s = fan_in ? sqrtf(6.0f / (float)fan_in) : 0.0f;
    for (int64_t i = 0; i < n && fan_in; i++) w[i] = cli_rng_uniform(r, -s, s);
    if (ert_builder_weight(b, nm, ERT_DTYPE_F32, nd, d, w, &id) != ERT_OK) id = -1;
    free(w);
    return id;
}

/* conv3x3(1->16) relu maxpool2 conv3x3(16->32) relu maxpool2 fc(32*H/4*W/4 -> 64) relu fc(64 -> classes) */
static ert_model *small_cnn(ert_context *ctx, int64_t H, int64_t W, int64_t classes, uint64_t seed) {
    cli_rng r;
    cli_rng_seed(&r, seed);
    ert_builder *b = NULL;
    if (ert_builder_create(ctx, &b) != ERT_OK) return NULL;
    int64_t xd[4] = {-1, 1, H, W}, w1[4] = {16, 1, 3, 3}, b1[1] = {16}, w2[4] = {32, 16, 3, 3}, b2[1] = {32};
    int64_t flat = 32 * (H / 4) * (W / 4), f1[2] = {64, flat}, fb1[1] = {64}, f2[2] = {classes, 64}, fb2[1] = {classes};
    int32_t x, c1, r1, p1, c2, r2, p2, fl, h, rh, o;
    ert_model *m = NULL;
    bool ok = ert_builder_input(b, "image", ERT_DTYPE_F32, 4, xd, &x) == ERT_OK &&
              ert_builder_conv2d(b, x, param(b, &r, "conv1.w", 4, w1, 9), param(b, &r, "conv1.b", 1, b1, 0), 1, 1, 1, 1, &c1) == ERT_OK &&
              ert_builder_unary(b, "Relu", c1, &r1) == ERT_OK && ert_builder_maxpool2d(b, r1, 2, 2, 0, &p1) == ERT_OK &&
              ert_builder_conv2d(b, p1, param(b, &r, "conv2.w", 4, w2, 144), param(b, &r, "conv2.b", 1, b2, 0), 1, 1, 1, 1, &c2) == ERT_OK &&
              ert_builder_unary(b, "Relu", c2, &r2) == ERT_OK && ert_builder_maxpool2d(b, r2, 2, 2, 0, &p2) == ERT_OK &&
              ert_builder_unary(b, "Flatten", p2, &fl) == ERT_OK &&
              ert_builder_linear(b, fl, param(b, &r, "fc1.w", 2, f1, (int)flat), param(b, &r, "fc1.b", 1, fb1, 0), &h) == ERT_OK &&
              ert_builder_unary(b, "Relu", h, &rh) == ERT_OK &&
              ert_builder_linear(b, rh, param(b, &r, "fc2.w", 2, f2, 64), param(b, &r, "fc2.b", 1, fb2, 0), &o) == ERT_OK &&
              ert_builder_output(b, o, "logits") == ERT_OK && ert_builder_finish(b, &m) == ERT_OK;
    if (!ok) fprintf(stderr, "edgert train: building small-cnn: %s\n", ert_last_error(ctx));
    ert_builder_free(b);
    return ok ? m : NULL;
}

/* ------------------------------------------------------------------ data */

typedef struct dataset {
    idx_array img[2], lab[2]; /* train, test */
    int64_t H, W, classes;
} dataset;

/* An imgfolder as idx arrays (ownership moves). */
static void from_folder(imgfolder *f, idx_array *img, idx_array *lab) {
    *img = (idx_array){.ndim = 3, .dims = {f->n, f->h, f->w}, .data = f->pixels, .n = (size_t)(f->n * f->h * f->w)};
    *lab = (idx_array){.ndim = 1, .dims = {f->n}, .data = f->labels, .n = (size_t)f->n};
    f->pixels = f->labels = NULL;
}

/* ImageFolder: DIR/train and DIR/test when both exist, else DIR itself (the
 * validation part then doubles as the test set). The training list is
 * shuffled once with a fixed seed so the held-out tail mixes classes. */
static int load_folder(const char *dir, dataset *ds, bool *test_is_val, ert_jpeg *jpeg) {
    char tr[4096], te[4096], err[1024];
    if (snprintf(tr, sizeof tr, "%s/train", dir) >= (int)sizeof tr || snprintf(te, sizeof te, "%s/test", dir) >= (int)sizeof te)
        return fail("%s: path too long", dir);
    struct stat st;
    bool split = stat(tr, &st) == 0 && S_ISDIR(st.st_mode) && stat(te, &st) == 0 && S_ISDIR(st.st_mode);
    imgfolder f[2];
    memset(f, 0, sizeof f);
    if (imgfolder_load(split ? tr : dir, 0, 0, jpeg, &f[0], err, sizeof err) != 0) return fail("%s", err);
    fprintf(stderr, "%s: %lld images in %d classes, %lldx%lld; skipped %lld unreadable/corrupt and %lld of other types\n",
            split ? tr : dir, (long long)f[0].n, f[0].n_classes, (long long)f[0].h, (long long)f[0].w,
            (long long)f[0].n_corrupt, (long long)f[0].n_unsupported);
    if (split) {
        if (imgfolder_load(te, f[0].h, f[0].w, jpeg, &f[1], err, sizeof err) != 0) {
            imgfolder_free(&f[0]);
            return fail("%s", err);
        }
        if (f[1].n_classes != f[0].n_classes) {
            imgfolder_free(&f[0]);
            imgfolder_free(&f[1]);
            return fail("%s: %d classes, %s has %d", te, f[1].n_classes, tr, f[0].n_classes);
        }
        fprintf(stderr, "%s: %lld images; skipped %lld unreadable/corrupt and %lld of other types\n", te,
                (long long)f[1].n, (long long)f[1].n_corrupt, (long long)f[1].n_unsupported);
    }
    cli_rng r;
    cli_rng_seed(&r, 12345);
    const int64_t px = f[0].h * f[0].w;
    uint8_t *tmp = malloc((size_t)px);
    for (int64_t i = f[0].n - 1; tmp && i > 0; i--) {
        int64_t j = (int64_t)(cli_rng_next(&r) % (uint64_t)(i + 1));
        memcpy(tmp, f[0].pixels + i * px, (size_t)px);
        memcpy(f[0].pixels + i * px, f[0].pixels + j * px, (size_t)px);
        memcpy(f[0].pixels + j * px, tmp, (size_t)px);
        uint8_t l = f[0].labels[i];
        f[0].labels[i] = f[0].labels[j], f[0].labels[j] = l;
    }
    free(tmp);
    ds->classes = f[0].n_classes;
    from_folder(&f[0], &ds->img[0], &ds->lab[0]);
    *test_is_val = !split;
    if (split) from_folder(&f[1], &ds->img[1], &ds->lab[1]);
    ds->H = ds->img[0].dims[1];
    ds->W = ds->img[0].dims[2];
    return 0;
}

static int load_data(const char *dir, dataset *ds) {
    const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                            "t10k-labels-idx1-ubyte"};
    idx_array *dst[4] = {&ds->img[0], &ds->lab[0], &ds->img[1], &ds->lab[1]};
    char path[4096], err[1024];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s.gz", dir, names[i]);
        if (access(path, R_OK) != 0) snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (idx_load(path, dst[i], err, sizeof err) != 0) return fail("%s", err);
    }
    for (int s = 0; s < 2; s++) {
        if (ds->img[s].ndim != 3 || ds->lab[s].ndim != 1 || ds->lab[s].dims[0] != ds->img[s].dims[0])
            return fail("%s: images must be (N, H, W) and labels (N) with the same N", dir);
        if (ds->img[s].dims[1] != ds->img[0].dims[1] || ds->img[s].dims[2] != ds->img[0].dims[2])
            return fail("%s: train and test images differ in size", dir);
    }
    ds->H = ds->img[0].dims[1];
    ds->W = ds->img[0].dims[2];
    int mx = 0;
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < ds->lab[s].n; i++) mx = ds->lab[s].data[i] > mx ? ds->lab[s].data[i] : mx;
    ds->classes = mx + 1;
    return 0;
}

/* --classes LIST (IDX data): keep only the samples whose label is in LIST
 * ("0-7", "1,3,5"); the class count (the head's size) stays that of the
 * whole data set, so a model trained on part of the classes can later be
 * fine-tuned on all of them. */
static int keep_classes(dataset *ds, const char *list) {
    bool keep[256] = {false};
    const char *p = list;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0 || a > 255) return fail("--classes: bad list '%s' (e.g. 0-7 or 1,3,5)", list);
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a || b > 255) return fail("--classes: bad range in '%s'", list);
            p = end;
        }
        for (long c = a; c <= b; c++) keep[c] = true;
        if (*p == ',') p++;
        else if (*p) return fail("--classes: bad list '%s' (e.g. 0-7 or 1,3,5)", list);
    }
    const int64_t px = ds->H * ds->W;
    for (int s = 0; s < 2; s++) {
        int64_t n = 0;
        for (int64_t i = 0; i < ds->img[s].dims[0]; i++) {
            if (!keep[ds->lab[s].data[i]]) continue;
            memmove(ds->img[s].data + n * px, ds->img[s].data + i * px, (size_t)px);
            ds->lab[s].data[n++] = ds->lab[s].data[i];
        }
        if (n == 0) return fail("--classes %s: no %s sample has one of these labels", list, s ? "test" : "training");
        ds->img[s].dims[0] = ds->lab[s].dims[0] = n;
        ds->img[s].n = (size_t)(n * px);
        ds->lab[s].n = (size_t)n;
    }
    return 0;
}

static void put_batch(const dataset *ds, int set, const int64_t *idx, int B, float *x, int64_t *y) {
    const int64_t px = ds->H * ds->W;
    for (int k = 0; k < B; k++) {
        const uint8_t *im = ds->img[set].data + idx[k] * px;
        for (int64_t q = 0; q < px; q++) x[k * px + q] = (im[q] / 255.0f - 0.286f) / 0.353f;
        y[k] = ds->lab[set].data[idx[k]];
    }
}

/* Accuracy and mean cross-entropy over every sample [lo, hi) of a set; the
 * last batch, when partial, is padded with copies of sample lo and only its
 * real samples are scored. NAN for an empty range. */
static int evaluate(ert_trainer *t, const dataset *ds, int set, int64_t lo, int64_t hi, int B, double *acc, double *loss) {
    float *x;
    int64_t *y, idx[65536];
    const float *z;
    ert_trainer_input_data(t, 0, (void **)&x);
    ert_trainer_target_data(t, (void **)&y);
    ert_trainer_output_data(t, (const void **)&z);
    int64_t ok = 0, n = 0;
    double ls = 0;
    const int64_t C = ds->classes;
    for (int64_t s = lo; s < hi; s += B) {
        int real = hi - s < B ? (int)(hi - s) : B;
        for (int k = 0; k < B; k++) idx[k] = k < real ? s + k : lo;
        put_batch(ds, set, idx, B, x, y);
        float l;
        if (ert_trainer_eval(t, &l) != ERT_OK) return -1;
        for (int k = 0; k < real; k++, n++) {
            const float *zk = z + k * C;
            int best = 0;
            double mx = zk[0], se = 0;
            for (int c = 1; c < C; c++) {
                if (zk[c] > zk[best]) best = c;
                if (zk[c] > mx) mx = zk[c];
            }
            for (int c = 0; c < C; c++) se += exp((double)zk[c] - mx);
            ls += mx + log(se) - (double)zk[y[k]]; /* -log softmax(z)[y] */
            ok += best == y[k];
        }
    }
    *acc = n ? (double)ok / (double)n : NAN;
    *loss = n ? ls / (double)n : NAN;
    return 0;
}

/* "0.8125" or "n/a" (human) / "0.8125" or "null" (JSON) for a metric of a
 * possibly empty set. */
static const char *metric_str(char *buf, size_t n, double v, int digits, bool json) {
    if (isnan(v)) snprintf(buf, n, "%s", json ? "null" : "n/a");
    else snprintf(buf, n, "%.*f", digits, v);
    return buf;
}

/* ------------------------------------------------------------------ command */

int edgert_cmd_train(int argc, char **argv) {
    topts o = {.epochs = 1, .batch = 32, .threads = 1, .lr = -1, .optim = "adam", .schedule = "cosine", .seed = 1,
               .device = "cpu",
               .val_split = 0.1};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    dataset ds;
    memset(&ds, 0, sizeof ds);
    ert_context *ctx = NULL;
    ert_model *m = NULL;
    ert_trainer *t = NULL;
    int64_t *perm = NULL;
    rc = 1;
    bool test_is_val = false;
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/train-labels-idx1-ubyte", o.data);
    bool is_idx = access(probe, R_OK) == 0;
    snprintf(probe, sizeof probe, "%s/train-labels-idx1-ubyte.gz", o.data);
    is_idx = is_idx || access(probe, R_OK) == 0;
    if (ert_context_create(NULL, &ctx) != ERT_OK) {
        fail("out of memory");
        goto done;
    }
    ert_jpeg *jpeg = NULL; /* JPEG images in an ImageFolder need the library's codec */
    if (!is_idx && ert_jpeg_available() && ert_jpeg_create(ctx, &jpeg) != ERT_OK) jpeg = NULL;
    int ld = is_idx ? load_data(o.data, &ds) : load_folder(o.data, &ds, &test_is_val, jpeg);
    ert_jpeg_free(jpeg);
    if (ld) goto done;
    if (o.classes && !is_idx) {
        fail("--classes applies to IDX data (an ImageFolder's classes are its folders)");
        goto done;
    }
    if (o.classes && keep_classes(&ds, o.classes)) goto done;
    if (strcmp(o.model, "small-cnn") == 0) m = small_cnn(ctx, ds.H, ds.W, ds.classes, (uint64_t)o.seed);
    else if (ert_model_load_file(ctx, o.model, &m) != ERT_OK) fail("%s: %s", o.model, ert_last_error(ctx));
    if (!m) goto done;
    int64_t n_all = (int64_t)ds.img[0].dims[0];
    if (o.limit && o.limit < n_all) n_all = o.limit;
    int64_t n_val = (int64_t)(n_all * o.val_split), n_train = n_all - n_val;
    const int B = (int)o.batch;
    int64_t spe = n_train / B; /* steps per epoch */
    if (spe < 1) {
        fail("%lld training samples: fewer than one batch of %d", (long long)n_train, B);
        goto done;
    }
    {
        bool seen_class[256] = {false};
        int n_seen = 0;
        for (int64_t i = 0; i < n_train; i++)
            if (!seen_class[ds.lab[0].data[i]]) seen_class[ds.lab[0].data[i]] = true, n_seen++;
        if (n_seen < 2) {
            fail("%s: the training data has %d class%s: a classifier needs at least 2 (one folder per class, or "
                 "--classes with two or more labels)", o.data, n_seen, n_seen == 1 ? "" : "es");
            goto done;
        }
    }
    ert_trainer_options to = {0};
    to.session.batch = B;
    to.session.n_threads = (int)o.threads;
    ert_input_shape shapes[TRAIN_MAX_SHAPES];
    int n_shapes = 0;
    for (int k = 0; k < o.n_shapes; k++) {
        char err[1024];
        if (cli_shape_resolve(m, o.shapes[k], shapes, &n_shapes, err, sizeof err) != 0) {
            rc = usage("%s", err);
            goto done;
        }
    }
    to.session.input_shapes = n_shapes ? shapes : NULL;
    to.session.n_input_shapes = n_shapes;
    /* values checked by parse() */
    to.session.device = strcmp(o.device, "cuda") == 0 ? ERT_DEVICE_CUDA
                        : strcmp(o.device, "auto") == 0 ? ERT_DEVICE_AUTO
                                                        : ERT_DEVICE_CPU;
    to.optim.kind = strcmp(o.optim, "sgd") == 0 ? ERT_OPTIM_SGD : strcmp(o.optim, "adam") == 0 ? ERT_OPTIM_ADAM : ERT_OPTIM_ADAMW;
    to.optim.lr = o.lr >= 0 ? (float)o.lr : to.optim.kind == ERT_OPTIM_SGD ? 0.05f : 2e-3f;
    to.optim.momentum = (float)(o.momentum ? o.momentum : (to.optim.kind == ERT_OPTIM_SGD ? 0.9 : 0));
    to.optim.weight_decay = (float)o.wd;
    if (strcmp(o.schedule, "cosine") == 0) {
        to.lr.kind = ERT_LR_COSINE;
        to.lr.total_steps = (int)(spe * o.epochs - o.warmup > 0 ? spe * o.epochs - o.warmup : 1);
    } else if (strcmp(o.schedule, "constant") != 0) {
        rc = 2;
        fprintf(stderr, "edgert train: --schedule must be constant or cosine\n");
        goto done;
    }
    to.lr.warmup_steps = (int)o.warmup;
    to.seed = (uint64_t)o.seed;
    if (o.last_n) to.trainable = ERT_TRAIN_LAST_N, to.last_n = (int)o.last_n;
    if (ert_trainer_create(m, &to, &t) != ERT_OK) {
        fail("cannot create the trainer: %s", ert_last_error(ctx));
        goto done;
    }
    ert_tensor_info ii, oi;
    ert_trainer_input_info(t, 0, &ii);
    ert_trainer_output_info(t, &oi);
    if (ert_trainer_n_inputs(t) != 1 || cli_numel(ii.ndim, ii.dims) != (int64_t)B * ds.H * ds.W || oi.ndim != 2 ||
        oi.dims[1] != ds.classes) {
        fail("the model must take one (N, 1, %lld, %lld) input and give (N, %lld) logits", (long long)ds.H,
             (long long)ds.W, (long long)ds.classes);
        goto done;
    }
    if (o.resume && ert_trainer_load_checkpoint(t, o.resume) != ERT_OK) {
        fail("--resume: %s", ert_last_error(ctx));
        goto done;
    }
    ert_memory_report mr;
    ert_trainer_memory(t, &mr);
    char b1[32];
    if (o.json) {
        printf("{\"event\":\"start\",\"device\":\"%s\",\"train\":%lld,\"val\":%lld,\"test\":%lld,\"batch\":%d,\"epochs\":%ld,\"trainable\":%lld,"
               "\"arena_bytes\":%zu,\"step\":%lld}\n", ert_trainer_device(t) == ERT_DEVICE_CUDA ? "cuda" : "cpu", (long long)n_train, (long long)n_val, (long long)(test_is_val ? n_val : ds.img[1].dims[0]), B,
               o.epochs, (long long)ert_trainer_n_trainable_elems(t), mr.total_bytes,
               (long long)ert_trainer_step_count(t));
    } else {
        fprintf(stderr, "training on %s: %lld images (%lld validation), batch %d, %ld epoch(s), %lld trainable parameters, arena %s\n",
                ert_trainer_device(t) == ERT_DEVICE_CUDA ? "cuda" : "cpu", (long long)n_train, (long long)n_val, B, o.epochs,
                (long long)ert_trainer_n_trainable_elems(t), cli_bytes_str(b1, sizeof b1, mr.total_bytes));
    }
    perm = malloc((size_t)n_train * sizeof *perm);
    if (!perm) {
        fail("out of memory");
        goto done;
    }
    float *x;
    int64_t *y;
    const float *z;
    ert_trainer_input_data(t, 0, (void **)&x);
    ert_trainer_target_data(t, (void **)&y);
    ert_trainer_output_data(t, (const void **)&z);
    bool tty = !o.json && isatty(2);
    int64_t total = spe * o.epochs, step = ert_trainer_step_count(t);
    double t0 = cli_now(), last_print = 0;
    int64_t done_here = 0;
    for (long ep = step / spe; ep < o.epochs; ep++) {
        /* per-epoch shuffle seeded by (seed, epoch): a resumed run sees the same order */
        cli_rng r;
        cli_rng_seed(&r, (uint64_t)o.seed * 1000003u + (uint64_t)ep);
        for (int64_t i = 0; i < n_train; i++) perm[i] = i;
        for (int64_t i = n_train - 1; i > 0; i--) {
            int64_t j = (int64_t)(cli_rng_next(&r) % (uint64_t)(i + 1)), tmp = perm[i];
            perm[i] = perm[j], perm[j] = tmp;
        }
        double lsum = 0;
        int64_t ok = 0, seen = 0;
        for (int64_t s = step % spe; s < spe; s++) {
            put_batch(&ds, 0, perm + s * B, B, x, y);
            float l;
            if (ert_trainer_step(t, &l) != ERT_OK) {
                fail("step %lld: %s", (long long)ert_trainer_step_count(t), ert_last_error(ctx));
                goto done;
            }
            for (int k = 0; k < B; k++) { /* accuracy of the forward just run (before the update) */
                int best = 0;
                for (int c = 1; c < ds.classes; c++)
                    if (z[k * ds.classes + c] > z[k * ds.classes + best]) best = c;
                ok += best == y[k];
            }
            seen += B;
            lsum += l;
            done_here++;
            step = ert_trainer_step_count(t);
            if (o.max_steps && step >= o.max_steps) { /* an interruption on purpose: checkpoint and stop */
                if (o.ckpt && ert_trainer_save_checkpoint(t, o.ckpt) != ERT_OK) {
                    fail("checkpoint: %s", ert_last_error(ctx));
                    goto done;
                }
                if (o.json) printf("{\"event\":\"stopped\",\"step\":%lld}\n", (long long)step);
                else fprintf(stderr, "%sstopped at step %lld (--max-steps)\n", tty ? "\n" : "", (long long)step);
                rc = 0;
                goto done;
            }
            double el = cli_now() - t0, ips = done_here * B / el, eta = (double)(total - step) * B / ips;
            if (o.json && (step % 50 == 0 || s == spe - 1)) {
                printf("{\"event\":\"step\",\"epoch\":%ld,\"step\":%lld,\"loss\":%.5f,\"acc\":%.4f,\"lr\":%.6g,"
                       "\"images_per_s\":%.1f}\n", ep + 1, (long long)step, lsum / (double)(seen / B),
                       (double)ok / (double)seen, (double)ert_trainer_lr(t), ips);
            } else if (tty && (el - last_print > 0.2 || s == spe - 1)) {
                last_print = el;
                int w = 24, fill = (int)(w * (double)(s + 1) / (double)spe);
                char bar[32];
                for (int k = 0; k < w; k++) bar[k] = k < fill ? '#' : '.';
                bar[w] = 0;
                fprintf(stderr, "\repoch %ld/%ld [%s] step %lld/%lld loss %.4f acc %.3f %.0f img/s ETA %02d:%02d ", ep + 1,
                        o.epochs, bar, (long long)step, (long long)total, lsum / (double)(seen / B),
                        (double)ok / (double)seen, ips, (int)(eta / 60), (int)fmod(eta, 60));
            }
        }
        if (tty) fputc('\n', stderr);
        double vacc = NAN, vloss = NAN;
        char m1[16], m2[16];
        if (n_val > 0 && evaluate(t, &ds, 0, n_train, n_all, B, &vacc, &vloss) != 0) {
            fail("validation: %s", ert_last_error(ctx));
            goto done;
        }
        if (o.ckpt && ert_trainer_save_checkpoint(t, o.ckpt) != ERT_OK) {
            fail("checkpoint: %s", ert_last_error(ctx));
            goto done;
        }
        if (o.json)
            printf("{\"event\":\"epoch\",\"epoch\":%ld,\"step\":%lld,\"train_loss\":%.5f,\"train_acc\":%.4f,\"val_loss\":%s,"
                   "\"val_acc\":%s,\"val\":%lld}\n", ep + 1, (long long)step, seen ? lsum / (double)(seen / B) : 0.0,
                   seen ? (double)ok / (double)seen : 0.0, metric_str(m1, sizeof m1, vloss, 5, true),
                   metric_str(m2, sizeof m2, vacc, 4, true), (long long)n_val);
        else if (n_val == 0)
            fprintf(stderr, "epoch %ld: train loss %.4f acc %.4f, validation n/a (no validation images)%s\n", ep + 1,
                    seen ? lsum / (double)(seen / B) : 0.0, seen ? (double)ok / (double)seen : 0.0,
                    o.ckpt ? " (checkpoint saved)" : "");
        else
            fprintf(stderr, "epoch %ld: train loss %.4f acc %.4f, validation loss %s acc %s (%lld images)%s\n", ep + 1,
                    seen ? lsum / (double)(seen / B) : 0.0, seen ? (double)ok / (double)seen : 0.0,
                    metric_str(m1, sizeof m1, vloss, 4, false), metric_str(m2, sizeof m2, vacc, 4, false), (long long)n_val,
                    o.ckpt ? " (checkpoint saved)" : "");
        fflush(stdout);
    }
    double el = cli_now() - t0, tacc = NAN, tloss = NAN;
    const int64_t n_test = test_is_val ? n_val : (int64_t)ds.img[1].dims[0];
    if (test_is_val ? evaluate(t, &ds, 0, n_train, n_all, B, &tacc, &tloss) != 0
                    : evaluate(t, &ds, 1, 0, (int64_t)ds.img[1].dims[0], B, &tacc, &tloss) != 0) {
        fail("test: %s", ert_last_error(ctx));
        goto done;
    }
    if (o.export_path) {
        ert_model *e = NULL;
        if (ert_trainer_export(t, &e) != ERT_OK || ert_model_save(e, o.export_path) != ERT_OK) {
            ert_model_free(e);
            fail("--export: %s", ert_last_error(ctx));
            goto done;
        }
        ert_model_free(e);
    }
    double ips = done_here ? done_here * B / el : 0;
    char m1[16], m2[16];
    if (o.json)
        printf("{\"event\":\"done\",\"steps\":%lld,\"seconds\":%.3f,\"images_per_s\":%.1f,\"test_loss\":%s,"
               "\"test_acc\":%s,\"test\":%lld}\n", (long long)step, el, ips, metric_str(m1, sizeof m1, tloss, 5, true),
               metric_str(m2, sizeof m2, tacc, 4, true), (long long)n_test);
    else
        printf("test accuracy %s (loss %s, %lld images) after %lld steps; %.1f s, %.0f images/s\n",
               metric_str(m2, sizeof m2, tacc, 4, false), metric_str(m1, sizeof m1, tloss, 4, false), (long long)n_test,
               (long long)step, el, ips);
    rc = 0;
done:
    free(perm);
    ert_trainer_free(t);
    ert_model_free(m);
    ert_context_free(ctx);
    for (int s = 0; s < 2; s++) {
        idx_free(&ds.img[s]);
        idx_free(&ds.lab[s]);
    }
    return rc;
}
