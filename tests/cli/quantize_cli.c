/* `edgert quantize` end to end (the CLI binary is argv[2]).
 *
 *   quantize_cli cli EDGERT      a model built here, calibration folders of
 *       PPM/JPEG images with corrupt files (skipped and counted), an empty
 *       folder (error), a .npy with a NaN (error naming the sample),
 *       --keep-float and --max-drop in the JSON report, and the quantized
 *       .ert run by `edgert run`.
 *   quantize_cli ort EDGERT PYTHON SCRIPT   the QDQ ONNX file the CLI writes
 *       is loaded and run by onnxruntime (SCRIPT), and edgert's CPU run of
 *       the same file agrees within one quantization step of the last
 *       layer's input (its scale times the largest row sum of |W|).
 *       onnxruntime runs with its QDQ fusions on, or off (float-simulated
 *       QDQ) on x86 CPUs without VNNI, where its fused u8s8 kernels
 *       saturate; SCRIPT's line says which.
 *   quantize_cli fmnist EDGERT   the small CNN `edgert train` makes on
 *       Fashion-MNIST (1 epoch on 12,000 images; ERT_HEAVY=1: 60,000, 2
 *       epochs), quantized with the first 500 training images: top-1 on
 *       the 10,000 test images, float vs int8, drop <= 0.5 points.
 * Each mode skips (77) when its tools or data are missing. */
#define _POSIX_C_SOURCE 200809L
#include "ert_internal.h"
#include "npy.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ert_context *ctx;
static ert_test_rng rng;
static char tmp[64];
static char out_buf[1 << 20], err_buf[1 << 16];

/* Run a shell command; stdout and stderr into out_buf / err_buf. */
static int run(const char *fmt, ...) {
    char cmd[4096], full[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "%s > %s/stdout 2> %s/stderr", cmd, tmp, tmp);
    int rc = system(full);
    rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    char p[128];
    const char *names[2] = {"stdout", "stderr"};
    char *bufs[2] = {out_buf, err_buf};
    size_t caps[2] = {sizeof out_buf, sizeof err_buf};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", tmp, names[k]);
        FILE *f = fopen(p, "rb");
        size_t n = f ? fread(bufs[k], 1, caps[k] - 1, f) : 0;
        bufs[k][n] = 0;
        if (f) fclose(f);
    }
    printf("$ %s\n-> %d\n%s%s", cmd, rc, err_buf, strlen(out_buf) < 2000 ? out_buf : "(long stdout)\n");
    return rc;
}

/* The number after "key": inside the JSON object that follows `within` (or anywhere). */
static double json_num(const char *within, const char *key) {
    const char *s = within ? strstr(out_buf, within) : out_buf;
    char k[128];
    snprintf(k, sizeof k, "\"%s\": ", key);
    s = s ? strstr(s, k) : NULL;
    return s ? strtod(s + strlen(k), NULL) : NAN;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n, "writing %s", path);
    if (f) fclose(f);
}

/* x (N, 3, 12, 12) -> conv1 3x3 (4) -> relu -> maxpool 2 -> flatten -> fc (144 -> 5) */
static ert_model *model(void) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, 3, 12, 12}, wd[4] = {4, 3, 3, 3}, bd[1] = {4}, fd[2] = {5, 144}, fb[1] = {5};
    float w[4 * 27], bias[4], fw[5 * 144], fbias[5];
    ert_test_fill(&rng, w, 4 * 27, -0.5f, 0.5f);
    ert_test_fill(&rng, bias, 4, -0.1f, 0.1f);
    ert_test_fill(&rng, fw, 5 * 144, -0.3f, 0.3f);
    ert_test_fill(&rng, fbias, 5, -0.1f, 0.1f);
    int32_t x, wi, bi, fwi, fbi, c = -1, r = -1, p = -1, f = -1, y = -1;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_weight(b, "conv1.w", ERT_DTYPE_F32, 4, wd, w, &wi), ctx);
    CHECK_OK(ert_builder_weight(b, "conv1.b", ERT_DTYPE_F32, 1, bd, bias, &bi), ctx);
    CHECK_OK(ert_builder_weight(b, "fc.w", ERT_DTYPE_F32, 2, fd, fw, &fwi), ctx);
    CHECK_OK(ert_builder_weight(b, "fc.b", ERT_DTYPE_F32, 1, fb, fbias, &fbi), ctx);
    int64_t pads[4] = {1, 1, 1, 1}, k2[2] = {2, 2};
    ert_attr ca = ERT_ATTR_IS("pads", pads, 4), pa[2] = {ERT_ATTR_IS("kernel_shape", k2, 2), ERT_ATTR_IS("strides", k2, 2)};
    int32_t ci[3] = {x, wi, bi};
    CHECK_OK(ert_builder_node(b, "Conv", "conv1", ci, 3, &ca, 1, &c, 1), ctx);
    CHECK_OK(ert_builder_node(b, "Relu", "relu1", &c, 1, NULL, 0, &r, 1), ctx);
    CHECK_OK(ert_builder_node(b, "MaxPool", "pool1", &r, 1, pa, 2, &p, 1), ctx);
    CHECK_OK(ert_builder_node(b, "Flatten", "flat", &p, 1, NULL, 0, &f, 1), ctx);
    int32_t gi[3] = {f, fwi, fbi};
    ert_attr ga = ERT_ATTR_I("transB", 1);
    CHECK_OK(ert_builder_node(b, "Gemm", "fc", gi, 3, &ga, 1, &y, 1), ctx);
    CHECK_OK(ert_builder_output(b, y, "logits"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

static void write_samples(const char *path, int n, int nan_at) {
    size_t per = 3 * 12 * 12;
    float *x = malloc((size_t)n * per * sizeof *x);
    ert_test_fill(&rng, x, (int64_t)(n * per), -1, 1);
    if (nan_at >= 0) x[(size_t)nan_at * per + 7] = NAN;
    int64_t dims[4] = {n, 3, 12, 12};
    char err[256];
    CHECK(npy_write_file(path, ERT_DTYPE_F32, 4, dims, x, (size_t)n * per * sizeof *x, err, sizeof err) == 0, "%s", err);
    free(x);
}

static int mode_cli(const char *cli) {
    char p[512], dir[256];
    ert_model *m = model();
    snprintf(p, sizeof p, "%s/m.ert", tmp);
    CHECK_OK(ert_model_save(m, p), ctx);
    ert_model_free(m);
    /* calib/a, calib/b: good PPM images (any size: resized like `edgert run`), a JPEG, corrupt files */
    int good = 0;
    for (int k = 0; k < 6; k++) {
        int w = 10 + 3 * k, h = 12 + k;
        uint8_t *px = malloc((size_t)w * (size_t)h * 3);
        for (int i = 0; i < w * h * 3; i++) px[i] = (uint8_t)ert_test_int(&rng, 0, 255);
        snprintf(dir, sizeof dir, "%s/calib/%c", tmp, k < 3 ? 'a' : 'b');
        mkdir(dir, 0755);
        snprintf(p, sizeof p, "%s/img%d.ppm", dir, k);
        CHECK_OK(ert_image_write_pnm(ctx, p, px, w, h, 3), ctx);
        good++;
        if (k == 5 && ert_jpeg_available()) {
            ert_jpeg *j = NULL;
            size_t cap = ert_jpeg_encode_bound(w, h), n = 0;
            uint8_t *jp = malloc(cap);
            CHECK_OK(ert_jpeg_create(ctx, &j), ctx);
            CHECK_OK(ert_jpeg_encode(j, px, w, h, 0, ERT_PIXEL_RGB, 90, jp, cap, &n), ctx);
            snprintf(p, sizeof p, "%s/photo.jpg", dir);
            write_file(p, jp, n);
            ert_jpeg_free(j);
            free(jp);
            good++;
        }
        free(px);
    }
    const char trunc[] = "P6\n12 12\n255\n\x01\x02\x03";
    snprintf(p, sizeof p, "%s/calib/a/trunc.ppm", tmp);
    write_file(p, trunc, sizeof trunc - 1);
    uint8_t garbage[300] = {0xFF, 0xD8, 0xFF, 0xE0};
    for (int i = 4; i < 300; i++) garbage[i] = (uint8_t)ert_test_int(&rng, 0, 255);
    snprintf(p, sizeof p, "%s/calib/b/garbage.jpg", tmp);
    write_file(p, garbage, sizeof garbage);
    snprintf(p, sizeof p, "%s/calib/notes.txt", tmp);
    write_file(p, "not an image\n", 13);
    const int skipped = 3;

    int rc = run("%s quantize %s/m.ert --calib %s/calib --mean 0.5 --std 0.25 --json --out %s/q.ert", cli, tmp, tmp, tmp);
    CHECK(rc == 0, "quantize on the image folder: exit %d", rc);
    CHECK(json_num(NULL, "n_samples") == good && json_num(NULL, "skipped") == skipped,
          "n_samples %g (want %d), skipped %g (want %d)", json_num(NULL, "n_samples"), good, json_num(NULL, "skipped"),
          skipped);
    CHECK(strstr(out_buf, "\"kept_float\": []") && strstr(out_buf, "\"node\": \"conv1\"") &&
              strstr(out_buf, "\"tensor\": \"x\""),
          "JSON lacks the layers, ranges or kept_float");
    CHECK(isfinite(json_num("\"node\": \"fc\"", "rel_l2")), "--json did not measure fc alone");
    /* the quantized .ert runs in the CLI */
    snprintf(p, sizeof p, "%s/one.npy", tmp);
    write_samples(p, 1, -1);
    rc = run("%s run %s/q.ert -i x=%s", cli, tmp, p);
    CHECK(rc == 0 && strstr(out_buf, "logits"), "edgert run on the quantized .ert: exit %d", rc);

    rc = run("%s quantize %s/m.ert --calib %s/calib --keep-float 'conv*' --json --out %s/q2.ert", cli, tmp, tmp, tmp);
    CHECK(rc == 0 && strstr(out_buf, "\"kept_float\": [\"conv1\"]"), "--keep-float conv*: exit %d", rc);
    rc = run("%s quantize %s/m.ert --calib %s/calib --keep-float 'nothing' --out %s/q3.ert", cli, tmp, tmp, tmp);
    CHECK(rc == 1 && strstr(err_buf, "nothing"), "--keep-float matching nothing: exit %d", rc);
    rc = run("%s quantize %s/m.ert --calib %s/calib --max-drop 0 --json --out %s/q4.ert", cli, tmp, tmp, tmp);
    CHECK(rc == 0 && json_num("\"calib\"", "drop") == 0, "--max-drop 0: exit %d, drop %g", rc,
          json_num("\"calib\"", "drop"));

    /* the method and switches of options version 3; -v names what each did */
    rc = run("%s quantize %s/m.ert --calib %s/calib --method mse --asymmetric --bias-correct --equalize -v --out %s/q7.ert",
             cli, tmp, tmp, tmp);
    CHECK(rc == 0 && strstr(err_buf, "bias correction on") && strstr(out_buf, "mse"),
          "--method mse --bias-correct: exit %d (%s)", rc, err_buf);
    rc = run("%s quantize %s/m.ert --calib %s/calib --no-equalize --no-bias-correct -v --out %s/q7.ert", cli, tmp, tmp, tmp);
    CHECK(rc == 0 && !strstr(err_buf, "bias correction on") && !strstr(err_buf, "equalisation"),
          "--no-equalize --no-bias-correct: exit %d (%s)", rc, err_buf);
    rc = run("%s quantize %s/m.ert --calib %s/calib --method kl --out %s/q7.ert", cli, tmp, tmp, tmp);
    CHECK(rc == 2 && strstr(err_buf, "mse"), "--method kl: exit %d (%s)", rc, err_buf);

    snprintf(dir, sizeof dir, "%s/empty", tmp);
    mkdir(dir, 0755);
    rc = run("%s quantize %s/m.ert --calib %s --out %s/q5.ert", cli, tmp, dir, tmp);
    CHECK(rc == 1 && strstr(err_buf, "empty"), "empty folder: exit %d", rc);
    snprintf(p, sizeof p, "%s/calib/a/trunc.ppm", tmp);
    rc = run("%s quantize %s/m.ert --calib %s --out %s/q5.ert", cli, tmp, p, tmp);
    CHECK(rc == 1 && strstr(err_buf, "empty") && strstr(err_buf, "1 files skipped"), "only a corrupt image: exit %d", rc);
    snprintf(p, sizeof p, "%s/nan.npy", tmp);
    write_samples(p, 4, 2);
    rc = run("%s quantize %s/m.ert --calib %s --out %s/q6.ert", cli, tmp, p, tmp);
    CHECK(rc == 1 && strstr(err_buf, "NaN") && strstr(err_buf, "sample 2"), "NaN in sample 2: exit %d", rc);
    struct stat st;
    snprintf(p, sizeof p, "%s/q6.ert", tmp);
    CHECK(stat(p, &st) != 0, "a failed run left %s", p);
    return 0;
}

/* One quantization step of the last layer's input through it: the scale of
 * the DQ feeding the Gemm that makes output 0, times max_j sum_k |W[j,k]|. */
static double one_step(const ert_model *m) {
    const ert_node *g = NULL;
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].out[0] == m->outputs[0]) g = &m->nodes[i];
    if (!g || g->op != ERT_OP_GEMM) return NAN;
    const ert_node *dx = NULL, *dw = NULL;
    for (int i = 0; i < m->n_nodes; i++) {
        if (m->nodes[i].out[0] == g->in[0]) dx = &m->nodes[i];
        if (m->nodes[i].out[0] == g->in[1]) dw = &m->nodes[i];
    }
    if (!dx || !dw || dx->op != ERT_OP_DEQUANTIZE_LINEAR || dw->op != ERT_OP_DEQUANTIZE_LINEAR) return NAN;
    double sx = *(const float *)m->tensors[dx->in[1]].data;
    const ert_tensor *wq = &m->tensors[dw->in[0]], *ws = &m->tensors[dw->in[1]];
    const int8_t *q = wq->data;
    int64_t rows = wq->dims[0], cols = wq->dims[1], ns = ws->ndim ? ws->dims[0] : 1;
    double worst = 0;
    for (int64_t j = 0; j < rows; j++) {
        double s = ((const float *)ws->data)[ns == rows ? j : 0], sum = 0;
        for (int64_t k = 0; k < cols; k++) sum += fabs(q[j * cols + k] * s);
        worst = fmax(worst, sum);
    }
    return sx * worst;
}

static int mode_ort(const char *cli, const char *py, const char *script) {
    if (!py || !*py || access(py, X_OK) != 0) return ert_test_skip("quantize_ort", "no Python with onnxruntime");
    char p[256], cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -c 'import onnxruntime, onnx, numpy' 2>/dev/null", py);
    if (system(cmd) != 0) return ert_test_skip("quantize_ort", "the Python lacks onnxruntime/onnx/numpy");
    ert_model *m = model();
    snprintf(p, sizeof p, "%s/m.ert", tmp);
    CHECK_OK(ert_model_save(m, p), ctx);
    ert_model_free(m);
    const int n = 16;
    snprintf(p, sizeof p, "%s/x.npy", tmp);
    write_samples(p, n, -1);
    static const char *const flags[4] = {"--per-channel", "--per-tensor", "--per-channel --asymmetric",
                                         "--asymmetric --method mse --bias-correct --no-equalize"};
    for (int pt = 0; pt < 4; pt++) {
        int rc = run("%s quantize %s/m.ert --calib %s/x.npy %s --out %s/q.onnx", cli, tmp, tmp, flags[pt], tmp);
        CHECK(rc == 0, "quantize to ONNX: exit %d", rc);
        rc = run("%s %s %s/q.onnx %s/x.npy %s/y_ort.npy", py, script, tmp, tmp, tmp);
        CHECK(rc == 0, "onnxruntime on the QDQ ONNX file: exit %d", rc);
        ert_model *q = NULL;
        snprintf(p, sizeof p, "%s/q.onnx", tmp);
        CHECK_OK(ert_model_load_file(ctx, p, &q), ctx);
        npy_array x = {0}, yo = {0};
        char err[256];
        snprintf(p, sizeof p, "%s/x.npy", tmp);
        CHECK(npy_read_file(p, &x, err, sizeof err) == 0, "%s", err);
        snprintf(p, sizeof p, "%s/y_ort.npy", tmp);
        CHECK(npy_read_file(p, &yo, err, sizeof err) == 0, "%s", err);
        ert_session_options so = {.batch = n};
        ert_session *s = NULL;
        if (q) CHECK_OK(ert_session_create(q, &so, &s), ctx);
        if (s && x.data && yo.data && yo.bytes == (size_t)n * 5 * sizeof(float)) {
            CHECK_OK(ert_session_set_input(s, 0, x.data, x.bytes), ctx);
            CHECK_OK(ert_session_run(s), ctx);
            const void *y;
            ert_session_output_data(s, 0, &y);
            double step = one_step(q), worst = 0;
            for (int i = 0; i < n * 5; i++) worst = fmax(worst, fabs(((const float *)y)[i] - ((const float *)yo.data)[i]));
            printf("%s: edgert vs onnxruntime max |diff| %.3g, one step %.3g\n", flags[pt], worst, step);
            /* --asymmetric: every activation QuantizeLinear writes uint8 (zero point in its dtype) */
            int q8[2] = {0, 0};
            for (int i = 0; i < q->n_nodes; i++)
                if (q->nodes[i].op == ERT_OP_QUANTIZE_LINEAR && q->nodes[i].n_in > 2)
                    q8[q->tensors[q->nodes[i].in[2]].dtype == ERT_DTYPE_U8]++;
            CHECK(q8[pt >= 2] > 0 && q8[pt < 2] == 0, "%s: %d int8 and %d uint8 activation QuantizeLinear nodes",
                  flags[pt], q8[0], q8[1]);
            CHECK(isfinite(step) && worst <= step + 1e-5, "edgert vs onnxruntime: %.3g > one step %.3g", worst, step);
        } else {
            CHECK(0, "no comparison made (session or files missing)");
        }
        ert_session_free(s);
        ert_model_free(q);
        npy_free(&x);
        npy_free(&yo);
    }
    return 0;
}

static int mode_fmnist(const char *cli) {
    const char *shared = ert_test_shared_dir();
    char data[512];
    snprintf(data, sizeof data, "%s/data/fashion-mnist", shared ? shared : "../shared");
    char probe[600];
    snprintf(probe, sizeof probe, "%s/t10k-labels-idx1-ubyte.gz", data);
    if (access(probe, R_OK) != 0) return ert_test_skip("quantize_fmnist", "no ../shared/data/fashion-mnist");
    bool heavy = getenv("ERT_HEAVY") && atoi(getenv("ERT_HEAVY"));
    int rc = run("%s train small-cnn --data %s --epochs %d --limit %d --export %s/fm.ert", cli, data, heavy ? 2 : 1,
                 heavy ? 60000 : 12000, tmp);
    CHECK(rc == 0, "edgert train: exit %d", rc);
    if (rc) return 0;
    rc = run("%s quantize %s/fm.ert --calib %s/train-images-idx3-ubyte.gz --calib-labels %s/train-labels-idx1-ubyte.gz "
             "--limit 500 --mean 0.286 --std 0.353 --eval %s/t10k-images-idx3-ubyte.gz --eval-labels "
             "%s/t10k-labels-idx1-ubyte.gz --json --out %s/fm.int8.ert",
             cli, tmp, data, data, data, data, tmp);
    CHECK(rc == 0, "edgert quantize: exit %d", rc);
    double f = json_num("\"eval\"", "float_top1"), q = json_num("\"eval\"", "quant_top1"), n = json_num("\"eval\"", "n");
    printf("Fashion-MNIST small CNN, %g test images: top-1 float %.2f%%, int8 %.2f%%, drop %.2f points\n", n, f, q, f - q);
    CHECK(n == 10000 && f > 70 && f - q <= 0.5, "top-1 float %.2f%%, int8 %.2f%% on %g images: drop over 0.5 points", f,
          q, n);
    struct stat a, b;
    char pa[128], pb[128];
    snprintf(pa, sizeof pa, "%s/fm.ert", tmp);
    snprintf(pb, sizeof pb, "%s/fm.int8.ert", tmp);
    CHECK(stat(pa, &a) == 0 && stat(pb, &b) == 0 && b.st_size * 3 < a.st_size, "int8 file %lld bytes, float %lld",
          (long long)b.st_size, (long long)a.st_size);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return ert_test_skip("quantize_cli", "usage: quantize_cli cli|ort|fmnist EDGERT [PYTHON SCRIPT]");
    ert_test_rng_init(&rng, "quantize_cli");
    CHECK_OK(ert_context_create(NULL, &ctx), ctx);
    snprintf(tmp, sizeof tmp, "/tmp/ert_qcli_XXXXXX");
    if (!mkdtemp(tmp)) return ert_test_skip("quantize_cli", "cannot make a temporary folder");
    char calib[128];
    snprintf(calib, sizeof calib, "%s/calib", tmp);
    mkdir(calib, 0755);
    int rc = strcmp(argv[1], "cli") == 0      ? mode_cli(argv[2])
             : strcmp(argv[1], "ort") == 0    ? mode_ort(argv[2], argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL)
             : strcmp(argv[1], "fmnist") == 0 ? mode_fmnist(argv[2])
                                              : ert_test_skip("quantize_cli", "unknown mode");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    ert_context_free(ctx);
    if (rc) return rc;
    return ert_test_finish(argv[1]);
}
