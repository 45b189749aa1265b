/* Every real and generated model on the GPU against the CPU backend (label
 * `gpu`).
 *
 *   test_zoo_cuda [--python PY --make-models SCRIPT --work DIR]
 *   (or ERT_ZOO_PYTHON, ERT_ZOO_MAKE_MODELS, ERT_ZOO_WORK in the environment;
 *   ERT_ZOO_MODELS=DIR: use the .onnx files in DIR, made beforehand)
 *
 * Models: the generated zoo (scripts/zoo/make_models.py, written to DIR/models
 * by PY when the test finds a GPU; tests/cuda/CMakeLists.txt sets the three), the
 * benchmark zoo when ERT_ZOO_BENCH_DIR names a directory that
 * bench/zoo/export_zoo.py filled (torchvision, timm, Ultralytics exports), the
 * PaddleOCR classifier and detector (fp32 and fp16 exports) in
 * <shared>/models/ppocr, and <shared>/models/{mnist_8,super_resolution_10}
 * (<shared> from ERT_SHARED_DIR or ../shared). Missing ones are listed and
 * left out; nothing at all: SKIPPED.
 *
 * Per model: a fresh random input (uniform [-1, 1]; the detector gets a
 * photograph of text (photo_page) on its first run and a synthetic text page
 * on its second: on noise it answers ~1e-7 everywhere, below f16's normal
 * range), one CPU f32 session as the reference, then
 *   - a CUDA session with precision F32: every output within relative L2
 *     TOL_F32 of the CPU's,
 *   - a CUDA session with precision F16 (f32 inputs/outputs, f16 weights and
 *     activations): within the model's f16 tolerance of the CPU f32 output,
 * each with a placement policy taken in turn from AUTO, DEVICE, UNIFIED,
 * MAPPED (F16 two steps further on), so every policy meets several models
 * in each precision. Both CUDA sessions run twice with new inputs (the
 * second run replays the captured CUDA graph). One line per model, precision
 * and output: "model prec placement output rel_l2 tol ok".
 *
 * relative L2 = ||gpu - cpu||_2 / ||cpu||_2 over an output, in float64.
 * Without a GPU or the CUDA backend: 77 (ctest SKIPPED). */
#include "edgert.h"
#include "runtime_internal.h" /* ert_session_plan_check */
#include "testutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#ifndef ERT_TEST_HAVE_CUDA
int main(void) { return ert_test_skip("zoo_cuda", "this build has no CUDA backend (ERT_CUDA=OFF)"); }
#else

#define TOL_F32 1e-4
/* f16 activations and weights against f32 arithmetic: 11 significant bits
 * (unit roundoff 4.9e-4) compounded over the depth of the net. */
#define TOL_F16 2e-2
/* The PaddleOCR detector: deep, ending in a steep sigmoid probability map;
 * onnxruntime's own fp16 export differs from its fp32 one by ~9e-2 there
 * (scripts/zoo/run_zoo.py, TOL_EXPORTS). */
#define TOL_F16_DET 0.15
/* The benchmark zoo (ERT_ZOO_BENCH_DIR): random-weight nets up to ViT-B's
 * depth. A model's f16 tolerance is read from DIR/f16_tol.txt ("NAME TOL"
 * lines) that bench/zoo/run_zoo_gpu.py writes from a measurement: twice the
 * relative L2 between PyTorch's own f16 and f32 runs of that model (so edgert
 * f16 may be at most twice as far from f32 as PyTorch's f16 is), at least
 * TOL_F16. A model without a line gets TOL_F16_BENCH. */
#define TOL_F16_BENCH 5e-2

#define MAX_MODELS 128
#define MAX_IO 8

static ert_context *ctx;
static ert_test_rng rng;
/* --cpu-selfcheck: the "GPU" sessions are CPU sessions (which ignore
 * precision and placement): checks this file's model list, shapes, inputs
 * and comparisons on a machine without a GPU. */
static ert_device gpu_dev = ERT_DEVICE_CUDA;

typedef struct model_entry {
    char name[96];
    char path[1536];
    double tol16; /* 0: TOL_F16 (TOL_F16_DET for ppocr/det) */
} model_entry;
static model_entry models[MAX_MODELS];
static int n_models;

static void add_model(const char *name, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        printf("  (missing: %s)\n", path);
        return;
    }
    if (n_models == MAX_MODELS) return;
    snprintf(models[n_models].name, sizeof models[n_models].name, "%s", name);
    snprintf(models[n_models].path, sizeof models[n_models].path, "%s", path);
    n_models++;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const model_entry *)a)->name, ((const model_entry *)b)->name);
}

/* The generated zoo: run make_models.py into work/models (it writes the same
 * files on every run: fixed seeds). ERT_ZOO_MODELS names a directory of
 * models made beforehand instead (a GPU machine without onnx or network:
 * `python scripts/zoo/make_models.py DIR` on the host, DIR carried along). */
/* Every DIR/NAME.onnx as "PREFIX/NAME" (sorted), with f16 tolerance tol16. */
static void add_dir(const char *dir, const char *prefix, double tol16) {
    DIR *d = opendir(dir);
    if (!d) {
        printf("  %s zoo: no directory %s: left out\n", prefix, dir);
        return;
    }
    int first = n_models;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".onnx") != 0) continue;
        char name[96], path[1280];
        snprintf(name, sizeof name, "%s/%.*s", prefix, (int)(n - 5), e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        add_model(name, path);
        if (n_models > first && !strcmp(models[n_models - 1].name, name)) models[n_models - 1].tol16 = tol16;
    }
    closedir(d);
    qsort(models + first, (size_t)(n_models - first), sizeof models[0], cmp_entry);
}

/* The benchmark zoo: its models, then the measured f16 tolerances. */
static void add_bench_zoo(const char *dir) {
    int first = n_models;
    add_dir(dir, "bench", TOL_F16_BENCH);
    char path[1200], name[96];
    snprintf(path, sizeof path, "%s/f16_tol.txt", dir);
    FILE *f = fopen(path, "r");
    double tol;
    while (f && fscanf(f, "%95s %lf", name, &tol) == 2)
        for (int k = first; k < n_models; k++)
            if (!strcmp(models[k].name + 6, name) && tol > 0) models[k].tol16 = tol > TOL_F16 ? tol : TOL_F16;
    if (f) fclose(f);
    printf("  bench zoo: %d models in %s (f16 tolerances %s)\n", n_models - first, dir,
           f ? "from f16_tol.txt" : "default: no f16_tol.txt");
}

static void add_zoo(const char *py, const char *script, const char *work) {
    char dir[1024 - 16], cmd[4096];
    const char *given = getenv("ERT_ZOO_MODELS");
    if (given && *given) {
        snprintf(dir, sizeof dir, "%s", given);
        printf("  generated zoo: the models in %s (ERT_ZOO_MODELS)\n", dir);
    } else if (!py || !script || !work) {
        printf("  generated zoo: not configured (no --python/--make-models/--work, no ERT_ZOO_MODELS): left out\n");
        return;
    } else {
        snprintf(dir, sizeof dir, "%s/models", work);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && '%s' '%s' '%s' > '%s/make_models.log' 2>&1", work, py, script,
                 dir, work);
        int rc = system(cmd);
        if (rc != 0)
            printf("  generated zoo: '%s' failed (exit %d; is onnx installed for that Python? scripts/setup.sh; "
                   "or set ERT_ZOO_MODELS): see %s/make_models.log; models already in %s (if any) are used\n",
                   cmd, WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, work, dir);
    }
    add_dir(dir, "zoo", 0);
}

static void add_shared(void) {
    const char *sh = ert_test_shared_dir();
    if (!sh) {
        printf("  shared models: no shared directory (set ERT_SHARED_DIR): left out\n");
        return;
    }
    static const char *const files[][2] = {
        {"ppocr/cls", "models/ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx"},
        {"ppocr/cls_fp16", "models/ppocr/ch_ppocr_mobile_v2.0_cls_infer_fp16.onnx"},
        {"ppocr/det", "models/ppocr/en_PP-OCRv3_det_infer.onnx"},
        {"ppocr/det_fp16", "models/ppocr/en_PP-OCRv3_det_infer_fp16.onnx"},
        {"mnist_8", "models/mnist_8/model.onnx"},
        {"super_resolution_10", "models/super_resolution_10/model.onnx"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", sh, files[i][1]);
        add_model(files[i][0], path);
    }
}

/* ------------------------------------------------------------------ inputs */

/* Shapes for dynamic dims: the batch dim 2, the rest by model. */
static void fix_dims(const char *name, const ert_tensor_info *ti, ert_input_shape *is) {
    is->name = ti->name;
    is->ndim = ti->ndim;
    for (int d = 0; d < ti->ndim; d++) {
        int64_t v = ti->dims[d];
        if (v < 0) {
            if (d == 0) v = 2;
            else if (strstr(name, "odd_sizes")) v = d == 2 ? 67 : 45;
            else if (strstr(name, "ppocr/det")) v = d == 2 ? 224 : 320;
            else if (strstr(name, "ppocr/cls")) v = d == 2 ? 48 : 192;
            else v = 64;
        }
        is->dims[d] = v;
    }
}

/* A synthetic text page as PaddleOCR sees it: dark word-like stroke groups
 * on a light, slightly noisy background, normalised to (p - 0.5) / 0.5;
 * x is (N, C, H, W). */
static void text_page(float *x, const int64_t *dims) {
    int64_t n = dims[0], c = dims[1], h = dims[2], w = dims[3];
    float *img = malloc((size_t)(h * w) * sizeof *img);
    for (int64_t b = 0; b < n; b++) {
        for (int64_t i = 0; i < h * w; i++) img[i] = (float)(0.9 + ert_test_uniform(&rng, -0.05, 0.05));
        for (int64_t y = 4; y + 20 < h;) {
            int th = ert_test_int(&rng, 8, 13);
            for (int64_t x0 = 4; x0 + 20 < w;) {
                int step = ert_test_int(&rng, 4, 9), len = ert_test_int(&rng, 20, 59);
                int sw = step / 2 > 2 ? step / 2 : 2;
                for (int64_t k = x0; k < x0 + len && k < w - 4; k += step)
                    for (int64_t yy = y; yy < y + th && yy < h; yy++)
                        for (int64_t kk = k; kk < k + sw && kk < w; kk++) img[yy * w + kk] = 0.1f;
                x0 += len + ert_test_int(&rng, 8, 19);
            }
            y += th + ert_test_int(&rng, 8, 15);
        }
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < h * w; i++) {
                float p = img[i] < 0 ? 0 : img[i] > 1 ? 1 : img[i];
                x[(b * c + ch) * h * w + i] = (p - 0.5f) / 0.5f;
            }
    }
    free(img);
}

/* A photograph for the detector: <shared>/images/img_12.jpg (a page with
 * real text) nearest-resized to the input, normalised as PaddleOCR does
 * ((p / 255 - 0.5) / 0.5). The synthetic page alone let a wrong f16 session
 * pass: ppocr/det_fp16 keeps one BatchNormalization in f32 (running variance
 * up to 2.2e7), which lowered to f16 gave an all-zero map on this photo but
 * a near-constant, tolerable one on the synthetic page. false without JPEG
 * support or the file (the page is used). */
static bool photo_page(float *x, const int64_t *dims) {
    const char *sh = ert_test_shared_dir();
    char path[1024];
    if (!sh || !ert_jpeg_available()) return false;
    snprintf(path, sizeof path, "%s/images/img_12.jpg", sh);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    static unsigned char buf[4 << 20];
    size_t nb = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ert_jpeg *j = NULL;
    int w = 0, h = 0, c = 0;
    bool ok = ert_jpeg_create(ctx, &j) == ERT_OK && ert_jpeg_info(j, buf, nb, &w, &h, &c) == ERT_OK;
    unsigned char *rgb = ok ? malloc((size_t)w * (size_t)h * 3) : NULL;
    ok = rgb && ert_jpeg_decode(j, buf, nb, ERT_PIXEL_RGB, rgb, (size_t)w * (size_t)h * 3, 0, NULL, NULL) == ERT_OK;
    ert_jpeg_free(j);
    if (ok) {
        int64_t n = dims[0], ch = dims[1], H = dims[2], W = dims[3];
        for (int64_t b = 0; b < n; b++)
            for (int64_t k = 0; k < ch; k++)
                for (int64_t y = 0; y < H; y++)
                    for (int64_t xx = 0; xx < W; xx++) {
                        int64_t sy = y * h / H, sx = xx * w / W;
                        float p = rgb[((size_t)sy * (size_t)w + (size_t)sx) * 3 + (size_t)(k % 3)] / 255.0f;
                        x[((b * ch + k) * H + y) * W + xx] = (p - 0.5f) / 0.5f;
                    }
    }
    free(rgb);
    return ok;
}

/* ------------------------------------------------------------------ one model */

static const char *pl_name(ert_placement p) {
    static const char *const n[] = {"auto", "device", "unified", "mapped"};
    return (unsigned)p < 4 ? n[p] : "?";
}

typedef struct io_set {
    int n_in, n_out;
    float *in[MAX_IO];
    size_t in_bytes[MAX_IO];
    int64_t in_dims[MAX_IO][ERT_MAX_DIMS];
    float *ref[MAX_IO];
    int64_t out_n[MAX_IO];
} io_set;

static int64_t nel(const ert_tensor_info *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->dims[d];
    return n;
}

static int n_fail_models;

/* CUDA session with `prec`/`pl`, two runs with fresh inputs, each compared
 * with a CPU session fed the same inputs. */
static bool check_gpu(const model_entry *me, ert_model *m, const ert_session_options *base, ert_session *cpu,
                      ert_dtype prec, ert_placement pl, double tol, io_set *io) {
    ert_session_options o = *base;
    o.device = gpu_dev;
    o.precision = prec;
    o.placement = pl;
    ert_session *g = NULL;
    ert_status st = ert_session_create(m, &o, &g);
    if (st != ERT_OK) {
        printf("  %-28s %-4s %-8s create: %s: %s  FAIL\n", me->name, ert_dtype_name(prec), pl_name(pl),
               ert_status_str(st), ert_last_error(ctx));
        CHECK(false, "%s %s: create: %s", me->name, ert_dtype_name(prec), ert_last_error(ctx));
        return false;
    }
    /* the memory plan: blocks apart, every tensor in the arena, views
     * (Concat/Split/Slice in place) inside their root, no two live roots
     * sharing bytes */
    char why[256];
    bool plan_ok = ert_session_plan_check(g, why, sizeof why);
    CHECK(plan_ok, "%s %s placement %s: memory plan: %s", me->name, ert_dtype_name(prec), pl_name(pl), why);
    bool ok = plan_ok;
    for (int rep = 0; rep < 2 && ok; rep++) {
        for (int i = 0; i < io->n_in; i++) {
            int64_t n = (int64_t)(io->in_bytes[i] / sizeof(float));
            if (strstr(me->name, "ppocr/det")) {
                if (rep == 1 || io->in_dims[i][1] != 3 || !photo_page(io->in[i], io->in_dims[i]))
                    text_page(io->in[i], io->in_dims[i]);
            }
            else ert_test_fill(&rng, io->in[i], n, -1, 1);
            CHECK_OK(ert_session_set_input(g, i, io->in[i], io->in_bytes[i]), ctx);
            CHECK_OK(ert_session_set_input(cpu, i, io->in[i], io->in_bytes[i]), ctx);
        }
        if ((st = ert_session_run(cpu)) != ERT_OK) {
            printf("  %-28s cpu reference run: %s: %s  FAIL\n", me->name, ert_status_str(st), ert_last_error(ctx));
            CHECK(false, "%s: CPU run", me->name);
            ok = false;
            break;
        }
        if ((st = ert_session_run(g)) != ERT_OK) {
            printf("  %-28s %-4s %-8s run %d: %s: %s  FAIL\n", me->name, ert_dtype_name(prec), pl_name(pl), rep,
                   ert_status_str(st), ert_last_error(ctx));
            CHECK(false, "%s %s: run: %s", me->name, ert_dtype_name(prec), ert_last_error(ctx));
            ok = false;
            break;
        }
        for (int j = 0; j < io->n_out; j++) {
            const float *got = NULL;
            ert_tensor_info oi;
            CHECK_OK(ert_session_output_info(g, j, &oi), ctx);
            CHECK_OK(ert_session_output_data(g, j, (const void **)&got), ctx);
            CHECK_OK(ert_session_get_output(cpu, j, io->ref[j], (size_t)io->out_n[j] * sizeof(float)), ctx);
            if (!got) {
                ok = false;
                continue;
            }
            double e2 = 0, r2 = 0;
            bool finite = true;
            for (int64_t k = 0; k < io->out_n[j]; k++) {
                double gv = got[k], rv = io->ref[j][k];
                if (!isfinite(gv)) finite = false;
                e2 += (gv - rv) * (gv - rv);
                r2 += rv * rv;
            }
            double rel = r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
            bool good = finite && rel <= tol;
            if (rep == 1 || !good)
                printf("  %-28s %-4s %-8s %-16s run %d rel L2 %.2e (tol %.2g)%s  %s\n", me->name, ert_dtype_name(prec),
                       pl_name(pl), oi.name, rep, rel, tol, finite ? "" : " NON-FINITE", good ? "ok" : "FAIL");
            CHECK(good, "%s %s placement %s output %s: rel L2 %.3g > %.3g%s", me->name, ert_dtype_name(prec),
                  pl_name(pl), oi.name, rel, tol, finite ? "" : " (non-finite values)");
            ok = ok && good;
        }
    }
    ert_session_free(g);
    return ok;
}

static void run_model(const model_entry *me, int k) {
    ert_model *m = NULL;
    ert_status st = ert_model_load_file(ctx, me->path, &m);
    if (st != ERT_OK) {
        printf("  %-28s load: %s: %s  FAIL\n", me->name, ert_status_str(st), ert_last_error(ctx));
        CHECK(false, "%s: load", me->name);
        n_fail_models++;
        return;
    }
    /* shapes for the dynamic dims, the same for every session */
    ert_input_shape shapes[MAX_IO];
    int n_shapes = 0;
    for (int i = 0;; i++) {
        ert_tensor_info ti;
        if (ert_model_input_info(m, i, &ti) != ERT_OK) break;
        if (n_shapes == MAX_IO) break;
        fix_dims(me->name, &ti, &shapes[n_shapes++]);
    }
    ert_session_options base = {.input_shapes = shapes, .n_input_shapes = n_shapes, .n_threads = 2};
    ert_session_options co = base;
    co.device = ERT_DEVICE_CPU;
    ert_session *cpu = NULL;
    if ((st = ert_session_create(m, &co, &cpu)) != ERT_OK) {
        printf("  %-28s cpu session: %s: %s  FAIL\n", me->name, ert_status_str(st), ert_last_error(ctx));
        CHECK(false, "%s: CPU session", me->name);
        n_fail_models++;
        ert_model_free(m);
        return;
    }
    char why[256];
    CHECK(ert_session_plan_check(cpu, why, sizeof why), "%s: CPU memory plan: %s", me->name, why);
    io_set io = {.n_in = ert_session_n_inputs(cpu), .n_out = ert_session_n_outputs(cpu)};
    bool usable = io.n_in <= MAX_IO && io.n_out <= MAX_IO;
    for (int i = 0; usable && i < io.n_in; i++) {
        ert_tensor_info ti;
        CHECK_OK(ert_session_input_info(cpu, i, &ti), ctx);
        if (ti.dtype != ERT_DTYPE_F32) {
            printf("  %-28s input '%s' is %s: only f32 inputs are drawn here  FAIL\n", me->name, ti.name,
                   ert_dtype_name(ti.dtype));
            usable = false;
            break;
        }
        io.in_bytes[i] = (size_t)nel(&ti) * sizeof(float);
        memcpy(io.in_dims[i], ti.dims, sizeof io.in_dims[i]);
        io.in[i] = malloc(io.in_bytes[i] ? io.in_bytes[i] : 1);
    }
    for (int j = 0; usable && j < io.n_out; j++) {
        ert_tensor_info ti;
        CHECK_OK(ert_session_output_info(cpu, j, &ti), ctx);
        if (ti.dtype != ERT_DTYPE_F32) {
            printf("  %-28s output '%s' is %s: only f32 outputs are compared  FAIL\n", me->name, ti.name,
                   ert_dtype_name(ti.dtype));
            usable = false;
            break;
        }
        io.out_n[j] = nel(&ti);
        io.ref[j] = malloc((size_t)(io.out_n[j] ? io.out_n[j] : 1) * sizeof(float));
    }
    CHECK(usable, "%s: inputs/outputs not all f32 (or more than %d)", me->name, MAX_IO);
    bool ok = usable;
    if (usable) {
        char dims[128] = "";
        for (int d = 0; d < shapes[0].ndim && n_shapes; d++)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? "x" : "", (long long)shapes[0].dims[d]);
        printf("%s (%s, %d input%s, %d output%s)\n", me->name, dims, io.n_in, io.n_in == 1 ? "" : "s", io.n_out,
               io.n_out == 1 ? "" : "s");
        double tol16 = me->tol16 > 0 ? me->tol16 : strstr(me->name, "ppocr/det") ? TOL_F16_DET : TOL_F16;
        ok = check_gpu(me, m, &base, cpu, ERT_DTYPE_F32, (ert_placement)(k % 4), TOL_F32, &io) && ok;
        ok = check_gpu(me, m, &base, cpu, ERT_DTYPE_F16, (ert_placement)((k + 2) % 4), tol16, &io) && ok;
    }
    if (!ok) n_fail_models++;
    for (int i = 0; i < MAX_IO; i++) {
        free(io.in[i]);
        free(io.ref[i]);
    }
    ert_session_free(cpu);
    ert_model_free(m);
}

int main(int argc, char **argv) {
    const char *py = getenv("ERT_ZOO_PYTHON"), *script = getenv("ERT_ZOO_MAKE_MODELS"), *work = getenv("ERT_ZOO_WORK");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu-selfcheck")) {
            gpu_dev = ERT_DEVICE_CPU;
            continue;
        }
        if (i + 1 == argc) break;
        if (!strcmp(argv[i], "--python")) py = argv[++i];
        else if (!strcmp(argv[i], "--make-models")) script = argv[++i];
        else if (!strcmp(argv[i], "--work")) work = argv[++i];
    }
    ert_test_rng_init(&rng, "zoo_cuda");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    /* GPU present? (a one-node model, no files needed) */
    ert_builder *b = NULL;
    ert_model *probe = NULL;
    int64_t d[1] = {4};
    int32_t x, y;
    if (ert_builder_create(ctx, &b) == ERT_OK && ert_builder_input(b, "x", ERT_DTYPE_F32, 1, d, &x) == ERT_OK &&
        ert_builder_unary(b, "Relu", x, &y) == ERT_OK && ert_builder_output(b, y, "y") == ERT_OK)
        ert_builder_finish(b, &probe);
    ert_builder_free(b);
    ert_session_options po = {.device = gpu_dev};
    ert_session *s = NULL;
    ert_status st = probe ? ert_session_create(probe, &po, &s) : ERT_E_INTERNAL;
    ert_session_free(s);
    ert_model_free(probe);
    if (st == ERT_E_CUDA) {
        char why[600];
        snprintf(why, sizeof why, "%s", ert_last_error(ctx));
        ert_context_free(ctx);
        return ert_test_skip("zoo_cuda", why);
    }
    CHECK(st == ERT_OK, "probe session: %s (%s)", ert_status_str(st), ert_last_error(ctx));

    printf("models:\n");
    add_zoo(py, script, work);
    const char *bench_dir = getenv("ERT_ZOO_BENCH_DIR");
    if (bench_dir && *bench_dir) add_bench_zoo(bench_dir);
    add_shared();
    if (n_models == 0) {
        ert_context_free(ctx);
        return ert_test_skip("zoo_cuda", "no models: neither the generated zoo nor the shared models were found");
    }
    printf("%d models; f32 tolerance %.0e, f16 %.0e (ppocr/det %.2g); relative L2 against the CPU f32 session\n",
           n_models, TOL_F32, TOL_F16, TOL_F16_DET);
    for (int k = 0; k < n_models; k++) run_model(&models[k], k);
    printf("%d of %d models failed\n", n_fail_models, n_models);
    ert_context_free(ctx);
    return ert_test_finish("zoo_cuda");
}
#endif
