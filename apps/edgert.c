/*
 * edgert - command-line front end of the library: info, run, convert, bench
 * (and train, apps/train_cmd.c).
 *
 * Conventions: human-readable output on stdout by default, --json prints one
 * JSON object instead; errors go to stderr as "edgert: error: ..." with the
 * library's ert_last_error() message, notes as "edgert: note: ...". Exit
 * status: 0 success, 1 failure (library, file or data error, a failed
 * --expect, or stdout not written), 2 bad usage (one line naming the option,
 * the value and what is allowed, then "see `edgert CMD --help`").
 * Uses only the public header edgert.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "edgert.h"

#include "cli_io.h"
#include "cli_util.h"
#include "npy.h"
#include "proc.h" /* apps/camera: top-k and labels */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef EDGERT_HAVE_TRAIN_CMD /* apps/train_cmd.c, built when zlib is found */
#include "train_cmd.h"
#include "quantize_cmd.h" /* apps/quantize_cmd.c: its IDX sets need zlib too */
#else
#define EDGERT_TRAIN_SYNOPSIS ""
#define EDGERT_QUANTIZE_SYNOPSIS ""
#endif

#define EXIT_USAGE 2
#define MAX_INPUTS 64

#define SYN_INFO "  info MODEL [--shape NAME=DIMS]... [--batch N] [--threads N] [--json]\n"
#define SYN_RUN                                                                                            \
    "  run MODEL --input NAME=FILE... [--shape NAME=DIMS]... [--device cpu|cuda|auto]\n"                  \
    "             [--precision f32|f16|bf16] [--iters N] [--batch N] [--threads N]\n"                      \
    "             [--size WxH] [--mean R,G,B] [--std R,G,B] [--bgr] [--nhwc] [--fit MODE]\n"              \
    "             [--topk K] [--labels FILE] [--expect NAME=FILE]... [--tol ATOL[,RTOL]]\n"                \
    "             [--output-dir DIR] [--check-finite] [--plan-cache DIR|off] [--create-mode fast|tuned]\n" \
    "             [--json]\n"
#define SYN_CONVERT "  convert IN OUT.ert|OUT.onnx [--fp16]\n"
#define SYN_BENCH                                                                                          \
    "  bench MODEL [--input NAME=FILE]... [--shape NAME=DIMS]... [--device cpu|cuda|auto]\n"              \
    "              [--precision f32|f16|bf16] [--iters N] [--warmup N] [--batch N] [--threads N]\n"       \
    "              [--nhwc|--no-nhwc] [--gemm1x1] [--conv-graph|--no-conv-graph] [--no-conv-transforms]\n" \
    "              [--plan-cache DIR|off] [--create-mode fast|tuned] [--no-strips]\n"                     \
    "              [--profile] [--profile-nodes] [--json]\n"

static const char *USAGE =
    "usage: edgert <command> [options]     (edgert <command> --help for details)\n"
    "\n"
    "commands:\n"
    SYN_INFO
    "      inputs, outputs, op histogram, node and parameter counts, planned arena\n"
    SYN_RUN
    "      run on inputs from .npy, ONNX TensorProto .pb or image files; print,\n"
    "      check (--expect) or save (--output-dir) the outputs\n"
    SYN_CONVERT
    "      save any supported model as .ert or ONNX (by OUT's extension)\n"
    SYN_BENCH
    "      time ert_session_run: p50/p90/mean/min latency, throughput, arena\n"
    EDGERT_TRAIN_SYNOPSIS
    EDGERT_QUANTIZE_SYNOPSIS
    "\n"
    "options:\n"
    "  -h, --help     this text (after a command: that command's)\n"
    "  --version      library and CLI version\n"
    "  -v, --verbose  library log messages (info level) on stderr; twice: debug level\n"
    "\n"
    "exit status: 0 ok, 1 error (message on stderr), 2 bad usage\n";

#define HELP_SHAPE                                                                                         \
    "  --shape NAME=DIMS   fix a dynamic input's shape, e.g. x=1x3x736x1280\n"                          \
    "                      (repeatable; NAME= may be left out for a one-input model)\n"
#define HELP_DEVICE                                                                                        \
    "  --device D          cpu, cuda or auto (cuda when this build and machine have it,\n"               \
    "                      else cpu); default cpu\n"
#define HELP_PRECISION                                                                                     \
    "  --precision P       f32, f16 or bf16: CUDA compute precision (default f32);\n"                     \
    "                      the CPU always computes in f32, and says so\n"
#define HELP_PLAN                                                                                          \
    "  --plan-cache DIR    where CUDA sessions keep what create measured (algorithms, fused\n"           \
    "                      plans, layouts), one file per GPU, library versions and model;\n"          \
    "                      a second create takes its answers from there; 'off' measures\n"            \
    "                      every time (default $XDG_CACHE_HOME/edgert, else ~/.cache/edgert)\n"        \
    "  --create-mode M     tuned (default: measure every choice) or fast (heuristics\n"             \
    "                      only, nothing timed: quicker create, maybe slower runs)\n"

static const char *HELP_INFO =
    "usage: edgert info MODEL [options]\n"
    "\n"
    "Inputs and outputs (dtype, shape; ? marks a dynamic dim), op histogram, node\n"
    "and parameter counts, and the arena a CPU session would need (ert_session_plan).\n"
    "\n"
    HELP_SHAPE
    "  --batch N           batch for a dynamic leading dim (default 1)\n"
    "  --threads N         CPU worker threads (default 1)\n"
    "  --json              one JSON object on stdout\n";

static const char *HELP_RUN =
    "usage: edgert run MODEL --input NAME=FILE... [options]\n"
    "\n"
    "Runs the model on the given inputs and prints each output (dtype, shape, first\n"
    "values). FILE is a .npy (an <f8 array is cast to f32, with a note), an ONNX\n"
    "TensorProto .pb, or an image (JPEG, PPM, PGM) preprocessed for the input.\n"
    "NAME= may be left out for a one-input model or a .pb that names its tensor.\n"
    "Inputs the model uses as shape-like operands (Reshape shape, Resize scales,\n"
    "axes, pads, Clip bounds...) are fixed at session create.\n"
    "\n"
    "  -i, --input NAME=FILE  an input (repeatable; every model input is needed)\n"
    HELP_SHAPE
    HELP_DEVICE
    HELP_PRECISION
    HELP_PLAN
    "  --iters N           run N times on one session, print p50/min/max (default 1)\n"
    "  --batch N           batch for a dynamic leading dim no file fixes (default 1)\n"
    "  --threads N         CPU worker threads (default 1)\n"
    "image inputs (bilinear resize, v/255, then (v - mean) / std):\n"
    "  --size WxH          network input size (default: the input's fixed H and W)\n"
    "  --mean R,G,B        per-channel mean (default 0,0,0; one value: all channels)\n"
    "  --std R,G,B         per-channel std (default 1,1,1)\n"
    "  --bgr               channel order BGR (default RGB)\n"
    "  --nhwc              the input is (N, H, W, C) (default (N, C, H, W))\n"
    "  --fit MODE          stretch, letterbox or crop (default stretch)\n"
    "outputs:\n"
    "  --topk K            the K best classes of each row of an (N, C) output\n"
    "  --labels FILE       class names for --topk, one a line\n"
    "  --expect NAME=FILE  compare output NAME with a .npy/.pb reference; exit 1 on a\n"
    "                      mismatch (repeatable; NAME= optional for one output)\n"
    "  --tol ATOL[,RTOL]   |got - ref| <= ATOL + RTOL |ref| (default 1e-5,1e-3);\n"
    "                      integers and bools must be equal\n"
    "  --output-dir DIR    write DIR/<output>.npy (atomically; bf16 as <f4)\n"
    "  --check-finite      run node by node (CPU oracle) and stop at the first node\n"
    "                      whose output holds a NaN or an infinity: node, op, output,\n"
    "                      count, first index; exit 1 (default off)\n"
    "  --json              one JSON object on stdout\n";

static const char *HELP_CONVERT =
    "usage: edgert convert IN OUT [--fp16]\n"
    "\n"
    "Loads any supported model (.ert, ONNX) and saves it in the format OUT's\n"
    "extension names, in any case: .ert (ert_model_save_opts) or .onnx\n"
    "(ert_model_save_onnx); any other extension is refused. Both writes are atomic.\n"
    "\n"
    "  --fp16              .ert only: store f32 weights as f16 (about half the file;\n"
    "                      computed in f32); default off\n";

static const char *HELP_BENCH =
    "usage: edgert bench MODEL [options]\n"
    "\n"
    "Times ert_session_run on one session: inputs from --input files, the rest\n"
    "random (fixed seed); p50/p90 (nearest rank), mean, min, max latency in ms,\n"
    "throughput (batch x runs per second), create time, arena bytes.\n"
    "\n"
    "  -i, --input NAME=FILE  an input from a .npy/.pb/image file (repeatable; images\n"
    "                      resized to the input, v/255, no mean/std)\n"
    HELP_SHAPE
    HELP_DEVICE
    HELP_PRECISION
    HELP_PLAN
    "  --iters N           timed runs (default 20)\n"
    "  --warmup N          untimed runs first (default 3)\n"
    "  --batch N           batch for a dynamic leading dim (default 1)\n"
    "  --threads N         CPU worker threads (default 1)\n"
    "  --nhwc, --no-nhwc   CUDA f16/bf16: channels-last activations always / never\n"
    "                      (default: when cuDNN measures it faster)\n"
    "  --gemm1x1           CUDA: channels-last 1x1 convs as cuBLASLt GEMMs\n"
    "                      (default off)\n"
    "  --conv-graph, --no-conv-graph  CUDA: conv + epilogue as one cuDNN graph\n"
    "                      whenever cuDNN runs it / never (default: where faster)\n"
    "  --no-conv-transforms  CUDA f32: no FFT/Winograd conv algorithms (exact\n"
    "                      inf/NaN propagation: ERT_SESSION_NO_CONV_TRANSFORMS)\n"
    "  --no-strips         CPU, batch > 1: every node over the whole batch (no batch\n"
    "                      strips: ERT_SESSION_NO_STRIPS)\n"
    "  --profile           then one run node by node (ert_session_profile): time per\n"
    "                      op type of the session's nodes, after fusion (CUDA: device\n"
    "                      time per node, eager, so the sum exceeds a graphed run)\n"
    "  --profile-nodes     --profile, run 10 times, and every node's fastest time\n"
    "                      listed in schedule order (name, op, ms; JSON: \"nodes\")\n"
    "  --json              one JSON object on stdout\n";

static int g_verbose;
static const char *g_cmd; /* the command being run, for usage errors */

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif
static int usage_error(const char *fmt, ...) CLI_PRINTF(1, 2);
static int error(const char *fmt, ...) CLI_PRINTF(1, 2);
static void note(const char *fmt, ...) CLI_PRINTF(1, 2);

/* One line saying what is wrong, then where the help is. */
static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "edgert%s%s: ", g_cmd ? " " : "", g_cmd ? g_cmd : "");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nsee `edgert%s%s --help`\n", g_cmd ? " " : "", g_cmd ? g_cmd : "");
    va_end(ap);
    return EXIT_USAGE;
}

static void vsay(const char *prefix, const char *fmt, va_list ap) {
    fputs(prefix, stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

static int error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay("edgert: error: ", fmt, ap);
    va_end(ap);
    return 1;
}

static void note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay("edgert: note: ", fmt, ap);
    va_end(ap);
}

/* A failed library call: what we were doing, then the library's own detail. */
static int lib_error(const ert_context *ctx, ert_status st, const char *what) {
    const char *msg = ert_last_error(ctx);
    if (msg && *msg)
        return error("%s: %s [%s]", what, msg, ert_status_str(st));
    return error("%s: %s", what, ert_status_str(st));
}

/* stdout is where results go: a failed write (full disk, closed pipe) is a
 * failure, never exit 0 with the output lost. The first failure's errno is
 * kept for the message. */
static int g_stdout_errno;

static void flush_stdout(void) {
    errno = 0;
    if (fflush(stdout) != 0 && !g_stdout_errno) g_stdout_errno = errno ? errno : EIO;
}

static int finish_stdout(int rc) { return cli_stdout_finish("edgert: error", rc, g_stdout_errno); }

static void log_cb(void *user, ert_log_level lvl, const char *msg) {
    (void)user;
    static const char *names[] = {"error", "warn", "info", "debug"};
    /* errors are reported once, by the command that failed */
    if (lvl == ERT_LOG_ERROR && !g_verbose) return;
    fprintf(stderr, "edgert: [%s] %s\n", (unsigned)lvl < 4 ? names[lvl] : "?", msg);
}

static ert_context *make_context(void) {
    ert_context_options co = {0};
    co.log = log_cb;
    co.log_level = g_verbose > 1 ? ERT_LOG_DEBUG : g_verbose ? ERT_LOG_INFO : ERT_LOG_WARN;
    ert_context *ctx = NULL;
    if (ert_context_create(&co, &ctx) != ERT_OK) {
        error("cannot create a context (out of memory)");
        return NULL;
    }
    return ctx;
}

/* ---------------------------------------------------------------- option parsing */

typedef struct opt_parser {
    int argc, i;
    char **argv;
    const char *val; /* value of the option just matched */
    int err;         /* set on a usage error (message printed) */
} opt_parser;

/* Matches "--name VALUE" and "--name=VALUE" (has_val) or "--name" (flag). */
static int opt_match(opt_parser *p, const char *name, int has_val) {
    const char *a = p->argv[p->i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == 0) {
        if (!has_val) return 1;
        if (p->i + 1 >= p->argc) {
            p->err = usage_error("option %s needs a value", name);
            return 1;
        }
        p->val = p->argv[++p->i];
        return 1;
    }
    if (a[n] == '=' && has_val) {
        p->val = a + n + 1;
        return 1;
    }
    return 0;
}

static int opt_int(opt_parser *p, const char *name, long lo, long hi, long *out) {
    if (p->err) return 0;
    if (cli_parse_int(p->val, lo, hi, out) != 0) {
        p->err = usage_error("%s '%s': expected an integer in [%ld, %ld]", name, p->val, lo, hi);
        return 0;
    }
    return 1;
}

/* One of `allowed` ("a|b|c"), else a usage error listing them. */
static int opt_choice(opt_parser *p, const char *name, const char *allowed, const char **out) {
    if (p->err) return 0;
    size_t n = strlen(p->val);
    for (const char *a = allowed; *a;) {
        const char *bar = strchr(a, '|');
        size_t l = bar ? (size_t)(bar - a) : strlen(a);
        if (l == n && strncmp(a, p->val, n) == 0) {
            *out = p->val;
            return 1;
        }
        a += l + (bar ? 1 : 0);
    }
    char list[128];
    size_t k = 0;
    for (const char *c = allowed; *c && k + 3 < sizeof list; c++) {
        if (*c == '|') list[k++] = ',', list[k++] = ' ';
        else list[k++] = *c;
    }
    list[k] = 0;
    p->err = usage_error("%s '%s': expected one of %s", name, p->val, list);
    return 0;
}

typedef struct common_opts {
    long batch, threads, iters, warmup, topk;
    int json, fp16, no_nhwc, nhwc, gemm1x1, conv_graph, no_conv_graph, no_transforms, bgr, check_finite;
    int profile, profile_nodes, no_strips;
    const char *device;
    const char *precision;
    const char *plan_cache, *create_mode;
    const char *output_dir;
    const char *labels;
    const char *fit;
    const char *inputs[MAX_INPUTS];
    int n_inputs;
    const char *shapes[MAX_INPUTS];
    int n_shapes;
    const char *expects[MAX_INPUTS];
    int n_expects;
    double atol, rtol;
    int size_w, size_h;
    float mean[3], std[3];
    const char *pos[4];
    int n_pos;
} common_opts;

enum {
    O_BATCH = 1 << 0, O_THREADS = 1 << 1, O_JSON = 1 << 2, O_DEVICE = 1 << 3, O_ITERS = 1 << 4, O_WARMUP = 1 << 5,
    O_INPUT = 1 << 6, O_OUTDIR = 1 << 7, O_PRECISION = 1 << 8, O_FP16 = 1 << 9, O_CUDA_LAYOUT = 1 << 10,
    O_SHAPE = 1 << 11, O_IMAGE = 1 << 12, O_CHECK = 1 << 13, O_CHECK_FINITE = 1 << 14, O_PLAN = 1 << 15,
    O_PROFILE = 1 << 16,
};

/* Append a repeatable option's value. */
static int opt_push(opt_parser *p, const char *name, const char **list, int *n) {
    if (p->err) return 0;
    if (*n == MAX_INPUTS) {
        p->err = usage_error("%s given more than %d times", name, MAX_INPUTS);
        return 0;
    }
    list[(*n)++] = p->val;
    return 1;
}

/* Parse argv[2..] of a command; `allowed` is a mask of O_*; `npos` the exact
 * number of positional arguments; `help` the command's --help text.
 * Returns 0, or an exit status (-1: help printed, exit 0). */
static int parse_opts(int argc, char **argv, unsigned allowed, int npos, const char *help, common_opts *o) {
    opt_parser p = {argc, 2, argv, NULL, 0};
    for (; p.i < argc && !p.err; p.i++) {
        const char *a = argv[p.i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(help, stdout);
            return -1;
        } else if (strcmp(a, "--version") == 0) {
            printf("edgert %s (library %s)\n", ERT_VERSION_STRING, ert_version());
            return -1;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            g_verbose++;
        } else if ((allowed & O_BATCH) && opt_match(&p, "--batch", 1)) {
            opt_int(&p, "--batch", 1, 1 << 20, &o->batch);
        } else if ((allowed & O_THREADS) && opt_match(&p, "--threads", 1)) {
            opt_int(&p, "--threads", 1, 1024, &o->threads);
        } else if ((allowed & O_ITERS) && opt_match(&p, "--iters", 1)) {
            opt_int(&p, "--iters", 1, 100000000, &o->iters);
        } else if ((allowed & O_WARMUP) && opt_match(&p, "--warmup", 1)) {
            opt_int(&p, "--warmup", 0, 100000000, &o->warmup);
        } else if ((allowed & O_JSON) && opt_match(&p, "--json", 0)) {
            o->json = 1;
        } else if ((allowed & O_CUDA_LAYOUT) && opt_match(&p, "--no-nhwc", 0)) {
            o->no_nhwc = 1;
        } else if ((allowed & (O_CUDA_LAYOUT | O_IMAGE)) && opt_match(&p, "--nhwc", 0)) {
            o->nhwc = 1;
        } else if ((allowed & O_CUDA_LAYOUT) && opt_match(&p, "--gemm1x1", 0)) {
            o->gemm1x1 = 1;
        } else if ((allowed & O_CUDA_LAYOUT) && opt_match(&p, "--conv-graph", 0)) {
            o->conv_graph = 1;
        } else if ((allowed & O_CUDA_LAYOUT) && opt_match(&p, "--no-conv-transforms", 0)) {
            o->no_transforms = 1;
        } else if ((allowed & O_CUDA_LAYOUT) && opt_match(&p, "--no-conv-graph", 0)) {
            o->no_conv_graph = 1;
        } else if ((allowed & O_PROFILE) && opt_match(&p, "--no-strips", 0)) {
            o->no_strips = 1;
        } else if ((allowed & O_PROFILE) && opt_match(&p, "--profile-nodes", 0)) {
            o->profile = o->profile_nodes = 1;
        } else if ((allowed & O_PROFILE) && opt_match(&p, "--profile", 0)) {
            o->profile = 1;
        } else if ((allowed & O_CHECK_FINITE) && opt_match(&p, "--check-finite", 0)) {
            o->check_finite = 1;
        } else if ((allowed & O_FP16) && opt_match(&p, "--fp16", 0)) {
            o->fp16 = 1;
        } else if ((allowed & O_DEVICE) && opt_match(&p, "--device", 1)) {
            opt_choice(&p, "--device", "cpu|cuda|auto", &o->device);
        } else if ((allowed & O_PRECISION) && opt_match(&p, "--precision", 1)) {
            opt_choice(&p, "--precision", "f32|f16|bf16", &o->precision);
        } else if ((allowed & O_PLAN) && opt_match(&p, "--plan-cache", 1)) {
            if (!p.err) o->plan_cache = p.val;
        } else if ((allowed & O_PLAN) && opt_match(&p, "--create-mode", 1)) {
            opt_choice(&p, "--create-mode", "fast|tuned", &o->create_mode);
        } else if ((allowed & O_OUTDIR) && opt_match(&p, "--output-dir", 1)) {
            if (!p.err) o->output_dir = p.val;
        } else if ((allowed & O_INPUT) && (opt_match(&p, "--input", 1) || opt_match(&p, "-i", 1))) {
            opt_push(&p, "--input", o->inputs, &o->n_inputs);
        } else if ((allowed & O_SHAPE) && opt_match(&p, "--shape", 1)) {
            opt_push(&p, "--shape", o->shapes, &o->n_shapes);
        } else if ((allowed & O_CHECK) && opt_match(&p, "--expect", 1)) {
            opt_push(&p, "--expect", o->expects, &o->n_expects);
        } else if ((allowed & O_CHECK) && opt_match(&p, "--tol", 1)) {
            if (p.err) break;
            char *end;
            double at = strtod(p.val, &end), rt = o->rtol;
            if (end != p.val && *end == ',') {
                const char *r = end + 1;
                rt = strtod(r, &end);
                if (end == r) end = (char *)"x";
            }
            if (end == p.val || *end || !(at >= 0) || !(rt >= 0) || !isfinite(at) || !isfinite(rt))
                return usage_error("--tol '%s': expected ATOL or ATOL,RTOL, numbers >= 0 (e.g. 1e-5,1e-3)", p.val);
            o->atol = at, o->rtol = rt;
        } else if ((allowed & O_CHECK) && opt_match(&p, "--topk", 1)) {
            opt_int(&p, "--topk", 1, 1000, &o->topk);
        } else if ((allowed & O_CHECK) && opt_match(&p, "--labels", 1)) {
            if (!p.err) o->labels = p.val;
        } else if ((allowed & O_IMAGE) && opt_match(&p, "--size", 1)) {
            if (p.err) break;
            int nd;
            int64_t d[ERT_MAX_DIMS];
            if (cli_parse_dims(p.val, &nd, d) != 0 || nd != 2 || d[0] < 1 || d[1] < 1 || d[0] > 32768 || d[1] > 32768)
                return usage_error("--size '%s': expected WxH, each in [1, 32768] (e.g. 224x224)", p.val);
            o->size_w = (int)d[0], o->size_h = (int)d[1];
        } else if ((allowed & O_IMAGE) && (opt_match(&p, "--mean", 1) || opt_match(&p, "--std", 1))) {
            if (p.err) break;
            int is_std = strncmp(a, "--std", 5) == 0;
            float *v = is_std ? o->std : o->mean;
            if (cli_parse_floats3(p.val, v) != 0 || (is_std && !(v[0] > 0 && v[1] > 0 && v[2] > 0)))
                return usage_error("%s '%s': expected 3 comma-separated numbers%s (or one for all channels)",
                                   is_std ? "--std" : "--mean", p.val, is_std ? " > 0" : "");
        } else if ((allowed & O_IMAGE) && opt_match(&p, "--bgr", 0)) {
            o->bgr = 1;
        } else if ((allowed & O_IMAGE) && opt_match(&p, "--fit", 1)) {
            opt_choice(&p, "--fit", "stretch|letterbox|crop", &o->fit);
        } else if (a[0] == '-' && a[1] != 0) {
            return usage_error("unknown option '%s'", a);
        } else {
            if (o->n_pos == npos) return usage_error("unexpected argument '%s' (takes %d)", a, npos);
            o->pos[o->n_pos++] = a;
        }
    }
    if (p.err) return p.err;
    if (o->n_pos != npos) return usage_error("needs %d argument%s, got %d", npos, npos == 1 ? "" : "s", o->n_pos);
    return 0;
}

static ert_device device_of(const char *s) {
    return strcmp(s, "cuda") == 0 ? ERT_DEVICE_CUDA : strcmp(s, "auto") == 0 ? ERT_DEVICE_AUTO : ERT_DEVICE_CPU;
}

static ert_dtype precision_of(const char *s) {
    return strcmp(s, "f16") == 0 ? ERT_DTYPE_F16 : strcmp(s, "bf16") == 0 ? ERT_DTYPE_BF16 : ERT_DTYPE_F32;
}

/* ---------------------------------------------------------------- shared bits */

/* inferred: an output the file does not declare, shaped by a session. */
static void print_info_line(const ert_tensor_info *t, int inferred) {
    char sh[160];
    if (t->dtype == ERT_DTYPE_UNDEFINED) { /* outputs of a graph without value_info, no session made */
        printf("  %-24s (not declared in the file: inferred when a session is created)\n", t->name ? t->name : "?");
        return;
    }
    printf("  %-24s %-5s %s%s\n", t->name ? t->name : "?", ert_dtype_name(t->dtype), cli_shape_str(sh, sizeof sh, t->ndim, t->dims),
           inferred ? "  (not declared in the file: inferred for the plan below)" : "");
}

/* Output i as the file declares it, or, where it does not, as session s
 * (if any) inferred it. */
static void output_info(const ert_model *m, const ert_session *s, int i, ert_tensor_info *t, int *inferred) {
    int k;
    *inferred = 0;
    if (ert_model_output_info(m, i, t) != ERT_OK) memset(t, 0, sizeof *t);
    if (t->dtype == ERT_DTYPE_UNDEFINED && s && t->name && ert_session_find_output(s, t->name, &k) == ERT_OK &&
        ert_session_output_info(s, k, t) == ERT_OK)
        *inferred = 1;
}

static void json_info(const ert_tensor_info *t, int inferred) {
    printf("{\"name\": ");
    cli_json_str(stdout, t->name);
    if (t->dtype == ERT_DTYPE_UNDEFINED) {
        printf(", \"dtype\": null, \"shape\": null}");
        return;
    }
    /* dynamic dims are -1 */
    printf(", \"dtype\": \"%s\", \"shape\": [", ert_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim; d++) printf("%s%lld", d ? ", " : "", (long long)t->dims[d]);
    printf("]%s}", inferred ? ", \"inferred\": true" : "");
}

static void print_memory(const ert_memory_report *m) {
    char b[64];
    printf("  %-22s %14zu  %s\n", "weights", m->weights_bytes, cli_bytes_str(b, sizeof b, m->weights_bytes));
    printf("  %-22s %14zu  %s\n", "activations (peak)", m->activations_bytes, cli_bytes_str(b, sizeof b, m->activations_bytes));
    printf("  %-22s %14zu  %s", "  lower bound", m->activations_lower_bound, cli_bytes_str(b, sizeof b, m->activations_lower_bound));
    if (m->activations_lower_bound)
        printf("  (peak is %+.1f%%)", 100.0 * ((double)m->activations_bytes / (double)m->activations_lower_bound - 1.0));
    printf("\n");
    printf("  %-22s %14zu  %s\n", "  of which workspace", m->workspace_bytes, cli_bytes_str(b, sizeof b, m->workspace_bytes));
    printf("  %-22s %14zu  %s\n", "io", m->io_bytes, cli_bytes_str(b, sizeof b, m->io_bytes));
    if (m->gradients_bytes || m->optimizer_bytes || m->saved_bytes) {
        printf("  %-22s %14zu\n", "gradients", m->gradients_bytes);
        printf("  %-22s %14zu\n", "optimizer state", m->optimizer_bytes);
        printf("  %-22s %14zu\n", "saved activations", m->saved_bytes);
    }
    printf("  %-22s %14zu  %s\n", "total (arena)", m->total_bytes, cli_bytes_str(b, sizeof b, m->total_bytes));
    printf("  %-22s %14zu  %s\n", "mapped weights", m->mapped_weights_bytes, cli_bytes_str(b, sizeof b, m->mapped_weights_bytes));
}

static void json_memory(const ert_memory_report *m) {
    printf("{\"weights_bytes\": %zu, \"activations_bytes\": %zu, \"activations_lower_bound\": %zu, "
           "\"workspace_bytes\": %zu, \"io_bytes\": %zu, \"gradients_bytes\": %zu, \"optimizer_bytes\": %zu, "
           "\"saved_bytes\": %zu, \"mapped_weights_bytes\": %zu, \"total_bytes\": %zu}",
           m->weights_bytes, m->activations_bytes, m->activations_lower_bound, m->workspace_bytes, m->io_bytes,
           m->gradients_bytes, m->optimizer_bytes, m->saved_bytes, m->mapped_weights_bytes, m->total_bytes);
}

static int load_model(ert_context *ctx, const char *path, ert_model **m) {
    ert_status st = ert_model_load_file(ctx, path, m);
    if (st != ERT_OK) {
        char what[512];
        snprintf(what, sizeof what, "cannot load model '%s'", path);
        return lib_error(ctx, st, what);
    }
    return 0;
}

/* "NAME=FILE": NAME into name (cut to fit), returns the '=' (NULL if none). */
static const char *spec_name(const char *spec, char *name, size_t n) {
    const char *eq = strchr(spec, '=');
    if (!eq) return NULL;
    size_t nl = (size_t)(eq - spec) < n - 1 ? (size_t)(eq - spec) : n - 1;
    memcpy(name, spec, nl);
    name[nl] = 0;
    return eq;
}

static int find_model_input(const ert_model *m, const char *name, ert_tensor_info *mi) {
    for (int i = 0; i < ert_model_n_inputs(m); i++)
        if (ert_model_input_info(m, i, mi) == ERT_OK && strcmp(mi->name, name) == 0) return i;
    return -1;
}

/* --shape specs -> ert_input_shape entries appended to shapes[*n]. */
static int parse_shapes(const ert_model *m, const common_opts *o, ert_input_shape *shapes, int *n) {
    char err[1024];
    for (int k = 0; k < o->n_shapes; k++)
        if (cli_shape_resolve(m, o->shapes[k], shapes, n, err, sizeof err) != 0) return usage_error("%s", err);
    return 0;
}

/* Before planning: an input with a dynamic dim other than the batch that no
 * --shape (or file) fixes gets a message a CLI user can act on. */
static int check_dynamic(const ert_model *m, const ert_input_shape *shapes, int n_shapes) {
    for (int i = 0; i < ert_model_n_inputs(m); i++) {
        ert_tensor_info mi;
        if (ert_model_input_info(m, i, &mi) != ERT_OK) continue;
        int fixed = 0, dyn = 0;
        for (int j = 0; j < n_shapes; j++) fixed |= strcmp(shapes[j].name, mi.name) == 0;
        for (int d = 1; d < mi.ndim; d++) dyn |= mi.dims[d] < 0;
        if (dyn && !fixed) {
            char s[160], ex[160];
            size_t k = 0;
            for (int d = 0; d < mi.ndim && k < sizeof ex; d++) {
                if (mi.dims[d] >= 0) k += (size_t)snprintf(ex + k, sizeof ex - k, "%s%lld", d ? "x" : "", (long long)mi.dims[d]);
                else k += (size_t)snprintf(ex + k, sizeof ex - k, "%s%s", d ? "x" : "", d == 0 ? "1" : "N");
            }
            return error("input '%s' has dynamic dims %s: fix them with --shape %s=%s (N: the size wanted)", mi.name,
                         cli_shape_str(s, sizeof s, mi.ndim, mi.dims), mi.name, ex);
        }
    }
    return 0;
}

/* --batch that a model's fixed leading dim (or an input file's shape) makes
 * pointless is said, not silently dropped. */
static void batch_notes(const ert_model *m, long batch, const ert_input_shape *shapes, int n_shapes) {
    if (batch <= 0) return;
    for (int i = 0; i < ert_model_n_inputs(m); i++) {
        ert_tensor_info mi;
        char s[160];
        if (ert_model_input_info(m, i, &mi) != ERT_OK || mi.ndim == 0) continue;
        if (mi.dims[0] >= 0 && mi.dims[0] != batch) {
            note("--batch %ld ignored for input '%s': the model file fixes its shape %s", batch, mi.name,
                 cli_shape_str(s, sizeof s, mi.ndim, mi.dims));
            continue;
        }
        for (int j = 0; j < n_shapes; j++)
            if (strcmp(shapes[j].name, mi.name) == 0 && shapes[j].ndim && shapes[j].dims[0] != batch)
                note("--batch %ld ignored for input '%s': its shape %s comes from a file or --shape", batch, mi.name,
                     cli_shape_str(s, sizeof s, shapes[j].ndim, shapes[j].dims));
    }
}

/* The leading dim the first input gets from the model, a --shape or --batch. */
static long planned_batch(const ert_model *m, long batch, const ert_input_shape *shapes, int n_shapes) {
    ert_tensor_info mi;
    if (ert_model_n_inputs(m) < 1 || ert_model_input_info(m, 0, &mi) != ERT_OK || mi.ndim == 0) return batch;
    if (mi.dims[0] >= 0) return (long)mi.dims[0];
    for (int j = 0; j < n_shapes; j++)
        if (strcmp(shapes[j].name, mi.name) == 0 && shapes[j].ndim) return (long)shapes[j].dims[0];
    return batch;
}

/* The leading dim of the session's first input: the batch it really runs. */
static long session_batch(const ert_session *s) {
    ert_tensor_info ti;
    if (ert_session_n_inputs(s) > 0 && ert_session_input_info(s, 0, &ti) == ERT_OK && ti.ndim > 0) return (long)ti.dims[0];
    return 1;
}

/* Create a session; `device` is cpu, cuda or auto (CUDA when it can be used,
 * else the CPU: *used says which). Models that take shape-like operands
 * (Reshape's shape, axes, pads, Resize scales, Clip bounds) as graph inputs
 * need those values at create: when the session says so, the given inputs
 * after the first are fixed (ert_session_options.input_values), integer
 * inputs and scalars first, then every one of them; frozen[k] marks those,
 * which are then not set at run time. */
static ert_status create_session(ert_context *ctx, const ert_model *m, ert_session_options *so, const char *device,
                                 const cli_tensor *ins, int n_ins, int *frozen, ert_session **s, ert_device *used) {
    ert_device devs[2];
    int nd = 0;
    ert_device want = device_of(device);
    if (want == ERT_DEVICE_AUTO) devs[nd++] = ERT_DEVICE_CUDA, devs[nd++] = ERT_DEVICE_CPU;
    else devs[nd++] = want;
    ert_input_value vals[MAX_INPUTS];
    ert_status st = ERT_E_ARG;
    for (int di = 0; di < nd; di++) {
        so->device = devs[di];
        so->input_values = NULL;
        so->n_input_values = 0;
        for (int k = 0; k < n_ins; k++) frozen[k] = 0;
        st = ert_session_create(m, so, s);
        for (int pass = 0; pass < 2 && st == ERT_E_UNSUPPORTED && strstr(ert_last_error(ctx), "must be a constant"); pass++) {
            int nv = 0;
            for (int k = 0; k < n_ins; k++) {
                ert_tensor_info mi;
                frozen[k] = 0;
                if (ins[k].is_image || find_model_input(m, ins[k].name, &mi) < 1) continue; /* never the first input */
                int64_t ne = cli_numel(ins[k].ndim, ins[k].dims);
                if (pass == 0 && !(ins[k].dtype == ERT_DTYPE_I64 || ins[k].dtype == ERT_DTYPE_I32 || ne <= 1)) continue;
                ert_input_value v = {.name = ins[k].name, .dtype = ins[k].dtype, .ndim = ins[k].ndim, .data = ins[k].data};
                memcpy(v.dims, ins[k].dims, sizeof v.dims);
                vals[nv++] = v;
                frozen[k] = 1;
            }
            if (!nv) continue; /* nothing of this kind: try the next pass */
            so->input_values = vals;
            so->n_input_values = nv;
            st = ert_session_create(m, so, s);
        }
        if (st == ERT_OK) {
            *used = devs[di];
            for (int k = 0; k < n_ins && g_verbose; k++)
                if (frozen[k]) note("input '%s' fixed at session create (the model uses it as a shape-like operand)", ins[k].name);
            so->input_values = NULL; /* vals is local */
            so->n_input_values = 0;
            return ERT_OK;
        }
        if (di + 1 < nd && g_verbose) note("--device auto: CUDA not used (%s); trying the CPU", ert_last_error(ctx));
    }
    so->input_values = NULL;
    so->n_input_values = 0;
    return st;
}

static int create_error(ert_context *ctx, ert_status st, const char *device) {
    if (strcmp(device, "cuda") == 0 && (st == ERT_E_CUDA || st == ERT_E_UNSUPPORTED))
        return lib_error(ctx, st, "--device cuda: cannot create a CUDA session (try --device auto or cpu)");
    return lib_error(ctx, st, "cannot create a session");
}

/* --plan-cache and --create-mode into the session options (buf holds the
 * default folder). */
static void plan_options(const common_opts *o, ert_session_options *so, char *buf, size_t n) {
    so->plan_cache_dir = cli_plan_cache_dir(o->plan_cache, buf, n);
    so->create_mode = o->create_mode && strcmp(o->create_mode, "fast") == 0 ? ERT_CREATE_FAST : ERT_CREATE_TUNED;
}

/* The precision a session really computes in: the CPU always uses f32. */
static const char *effective_precision(ert_device used, const char *asked) {
    return used == ERT_DEVICE_CPU ? "f32" : asked;
}

static void precision_note(ert_device used, const char *asked) {
    if (used == ERT_DEVICE_CPU && strcmp(asked, "f32") != 0)
        note("--precision %s applies to CUDA sessions; this one runs on the CPU, which computes in f32", asked);
}

/* Match --input specs to model inputs and load them. ins[k].name is set to
 * the model input's name; dynamic inputs' shapes go to shapes[*n_shapes]
 * (a --shape for the same input must agree). */
static int load_inputs(ert_context *ctx, const ert_model *m, const common_opts *o, cli_tensor *ins,
                       ert_input_shape *shapes, int *n_shapes) {
    int nmi = ert_model_n_inputs(m);
    char names[512], err[1024], s1[160], s2[160];
    cli_image_options io = {.w = o->size_w, .h = o->size_h, .bgr = o->bgr, .nhwc = o->nhwc};
    memcpy(io.mean, o->mean, sizeof io.mean);
    memcpy(io.std, o->std, sizeof io.std);
    io.fit = !o->fit || strcmp(o->fit, "stretch") == 0 ? ERT_FIT_STRETCH
             : strcmp(o->fit, "letterbox") == 0        ? ERT_FIT_LETTERBOX
                                                       : ERT_FIT_CENTER_CROP;
    int n_given_shapes = *n_shapes;
    for (int k = 0; k < o->n_inputs; k++) {
        const char *spec = o->inputs[k];
        ert_tensor_info mi;
        int found = -1;
        char name[256];
        const char *eq = spec_name(spec, name, sizeof name);
        if (eq) found = find_model_input(m, name, &mi);
        if (found >= 0) {
            ins[k].path = eq + 1;
        } else if (nmi == 1 && o->n_inputs == 1 && (!eq || access(spec, F_OK) == 0)) {
            /* one input: NAME= may be left out (and a path may contain '=') */
            found = 0;
            ins[k].path = spec;
        } else if (!eq) {
            /* a .pb names its tensor (ONNX test data does): match on that */
            ins[k].path = spec;
            if (cli_tensor_load(ctx, &ins[k], err, sizeof err) != 0) return error("input %s", err);
            if (ins[k].file_name) found = find_model_input(m, ins[k].file_name, &mi);
        }
        if (found < 0) {
            if (eq) return error("model has no input named '%s' (its inputs: %s)", name, cli_input_names(m, names, sizeof names));
            return error("--input '%s': give NAME=FILE (the model's inputs: %s)", spec, cli_input_names(m, names, sizeof names));
        }
        ert_model_input_info(m, found, &mi);
        for (int j = 0; j < k; j++)
            if (strcmp(ins[j].name, mi.name) == 0) return error("input '%s' given twice", mi.name);
        ins[k].name = mi.name;
        const char *kind = cli_file_kind(ins[k].path);
        if (!ins[k].data && kind && strcmp(kind, "npy") != 0) {
            /* an image: its shape follows the model (or --size / --shape) */
            ert_tensor_info want = mi;
            for (int j = 0; j < n_given_shapes; j++)
                if (strcmp(shapes[j].name, mi.name) == 0) memcpy(want.dims, shapes[j].dims, sizeof want.dims);
            int gpu = 0;
            if (cli_image_load(ctx, &want, &io, (int)o->batch, &ins[k], &gpu, err, sizeof err) != 0)
                return error("input '%s': %s", mi.name, err);
            if (g_verbose) note("image '%s' preprocessed on the %s", ins[k].path, gpu ? "GPU (ert_preprocessor)" : "CPU");
        } else if (!ins[k].data && cli_tensor_load(ctx, &ins[k], err, sizeof err) != 0) {
            return error("input %s", err);
        }
        if (ins[k].from_f64) note("input '%s': '%s' holds float64 (<f8): cast to f32", mi.name, ins[k].path);
        /* bf16 has no numpy dtype: accept f32 files and convert */
        if (mi.dtype == ERT_DTYPE_BF16 && ins[k].dtype == ERT_DTYPE_F32) {
            size_t ne = ins[k].bytes / 4;
            unsigned char *p = ins[k].data;
            for (size_t i = 0; i < ne; i++) { /* in place, forward: writes stay behind reads */
                float f;
                memcpy(&f, p + 4 * i, 4);
                uint16_t h = cli_f32_to_bf16(f);
                memcpy(p + 2 * i, &h, 2);
            }
            ins[k].bytes = ne * 2;
            ins[k].dtype = ERT_DTYPE_BF16;
        }
        if (ins[k].dtype != mi.dtype)
            return error("input '%s' is %s, file '%s' holds %s", mi.name, ert_dtype_name(mi.dtype), ins[k].path,
                         ert_dtype_name(ins[k].dtype));
        int dynamic = 0, mismatch = ins[k].ndim != mi.ndim;
        for (int d = 0; d < mi.ndim && !mismatch; d++) {
            if (mi.dims[d] < 0) dynamic = 1;
            else if (mi.dims[d] != ins[k].dims[d]) mismatch = 1;
        }
        if (mismatch)
            return error("input '%s' has shape %s, file '%s' holds %s", mi.name, cli_shape_str(s1, sizeof s1, mi.ndim, mi.dims),
                         ins[k].path, cli_shape_str(s2, sizeof s2, ins[k].ndim, ins[k].dims));
        int have = -1;
        for (int j = 0; j < *n_shapes; j++)
            if (strcmp(shapes[j].name, mi.name) == 0) have = j;
        if (have >= 0) {
            int same = shapes[have].ndim == ins[k].ndim;
            for (int d = 0; same && d < ins[k].ndim; d++) same = shapes[have].dims[d] == ins[k].dims[d];
            if (!same)
                return error("input '%s': --shape %s but file '%s' holds %s", mi.name,
                             cli_shape_str(s1, sizeof s1, shapes[have].ndim, shapes[have].dims), ins[k].path,
                             cli_shape_str(s2, sizeof s2, ins[k].ndim, ins[k].dims));
        } else if (dynamic) {
            ert_input_shape *sh = &shapes[(*n_shapes)++];
            memset(sh, 0, sizeof *sh);
            sh->name = mi.name;
            sh->ndim = ins[k].ndim;
            memcpy(sh->dims, ins[k].dims, sizeof sh->dims);
        }
    }
    return 0;
}

/* Give the session the loaded inputs (those not fixed at create). */
static int set_inputs(ert_context *ctx, ert_session *s, const cli_tensor *ins, int n, const int *frozen) {
    for (int k = 0; k < n; k++) {
        int idx;
        ert_status st;
        if (frozen[k]) continue;
        if ((st = ert_session_find_input(s, ins[k].name, &idx)) != ERT_OK ||
            (st = ert_session_set_input(s, idx, ins[k].data, ins[k].bytes)) != ERT_OK) {
            char what[300];
            snprintf(what, sizeof what, "cannot set input '%s'", ins[k].name);
            return lib_error(ctx, st, what);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- info */

typedef struct op_count {
    const char *op;
    int n;
} op_count;

static int cmp_op_count(const void *a, const void *b) {
    const op_count *x = a, *y = b;
    if (x->n != y->n) return y->n - x->n;
    return strcmp(x->op, y->op);
}

static int cmd_info(int argc, char **argv) {
    common_opts o = {.batch = 0, .threads = 1};
    int rc = parse_opts(argc, argv, O_BATCH | O_THREADS | O_JSON | O_SHAPE, 1, HELP_INFO, &o);
    if (rc) return rc < 0 ? 0 : rc;
    ert_context *ctx = make_context();
    if (!ctx) return 1;
    ert_model *m = NULL;
    op_count *hist = NULL;
    ert_input_shape shapes[MAX_INPUTS];
    int n_shapes = 0;
    if ((rc = load_model(ctx, o.pos[0], &m)) != 0) goto out;
    if ((rc = parse_shapes(m, &o, shapes, &n_shapes)) != 0) goto out;

    int nn = ert_model_n_nodes(m);
    hist = calloc((size_t)(nn > 0 ? nn : 1), sizeof *hist);
    int nh = 0;
    if (!hist) {
        rc = error("out of memory");
        goto out;
    }
    for (int i = 0; i < nn; i++) {
        const char *op = ert_model_node_op(m, i);
        if (!op) op = "?";
        int k = 0;
        while (k < nh && strcmp(hist[k].op, op) != 0) k++;
        if (k == nh) hist[nh++].op = op;
        hist[k].n++;
    }
    qsort(hist, (size_t)nh, sizeof *hist, cmp_op_count);

    ert_session_options so = {0};
    batch_notes(m, o.batch, shapes, n_shapes);
    if (!o.batch) o.batch = 1;
    so.batch = (int)o.batch;
    so.n_threads = (int)o.threads;
    so.input_shapes = n_shapes ? shapes : NULL;
    so.n_input_shapes = n_shapes;
    long batch = planned_batch(m, o.batch, shapes, n_shapes); /* what the plan is for */
    ert_memory_report mem;
    memset(&mem, 0, sizeof mem);
    /* a dynamic dim nobody fixed: say which --shape is missing instead of planning */
    int dyn_rc = 0;
    ert_status pst = ERT_OK;
    for (int i = 0; i < ert_model_n_inputs(m) && pst == ERT_OK; i++) {
        ert_tensor_info mi;
        int fixed = 0, dyn = 0;
        if (ert_model_input_info(m, i, &mi) != ERT_OK) continue;
        for (int j = 0; j < n_shapes; j++) fixed |= strcmp(shapes[j].name, mi.name) == 0;
        for (int d = 1; d < mi.ndim; d++) dyn |= mi.dims[d] < 0;
        if (dyn && !fixed) pst = ERT_E_SHAPE, dyn_rc = 1;
    }
    if (pst == ERT_OK) pst = ert_session_plan(m, &so, &mem);
    /* outputs the file does not declare: a session (CPU, the planned shapes)
     * infers them; if it cannot be made, they are listed as undeclared */
    ert_session *sess = NULL;
    for (int i = 0; i < ert_model_n_outputs(m) && pst == ERT_OK && !sess; i++) {
        ert_tensor_info ot;
        if (ert_model_output_info(m, i, &ot) == ERT_OK && ot.dtype == ERT_DTYPE_UNDEFINED &&
            ert_session_create(m, &so, &sess) != ERT_OK)
            break;
    }

    int ni = ert_model_n_inputs(m), no = ert_model_n_outputs(m);
    ert_tensor_info t;
    if (o.json) {
        printf("{\"model\": ");
        cli_json_str(stdout, o.pos[0]);
        printf(", \"inputs\": [");
        for (int i = 0; i < ni; i++)
            if (ert_model_input_info(m, i, &t) == ERT_OK) printf("%s", i ? ", " : ""), json_info(&t, 0);
        printf("], \"outputs\": [");
        for (int i = 0; i < no; i++) {
            int inf;
            output_info(m, sess, i, &t, &inf);
            printf("%s", i ? ", " : ""), json_info(&t, inf);
        }
        printf("], \"nodes\": %d, \"parameters\": %lld, \"ops\": {", nn, (long long)ert_model_n_params(m));
        for (int k = 0; k < nh; k++) {
            printf("%s", k ? ", " : "");
            cli_json_str(stdout, hist[k].op);
            printf(": %d", hist[k].n);
        }
        printf("}, \"batch\": %ld, \"threads\": %ld, \"shapes\": {", batch, o.threads);
        for (int j = 0; j < n_shapes; j++) {
            printf("%s", j ? ", " : "");
            cli_json_str(stdout, shapes[j].name);
            printf(": [");
            for (int d = 0; d < shapes[j].ndim; d++) printf("%s%lld", d ? ", " : "", (long long)shapes[j].dims[d]);
            printf("]");
        }
        printf("}, \"arena\": ");
        if (pst == ERT_OK)
            json_memory(&mem);
        else if (dyn_rc)
            printf("null, \"plan_error\": \"dynamic input dims: give --shape NAME=DIMS\"");
        else
            printf("null, \"plan_error\": "), cli_json_str(stdout, ert_last_error(ctx));
        printf("}\n");
    } else {
        printf("model: %s\n", o.pos[0]);
        printf("inputs (%d):\n", ni);
        for (int i = 0; i < ni; i++)
            if (ert_model_input_info(m, i, &t) == ERT_OK) print_info_line(&t, 0);
        printf("outputs (%d):\n", no);
        for (int i = 0; i < no; i++) {
            int inf;
            output_info(m, sess, i, &t, &inf);
            print_info_line(&t, inf);
        }
        printf("nodes: %d\nparameters: %lld\nops:", nn, (long long)ert_model_n_params(m));
        for (int k = 0; k < nh; k++) printf("%s %s x%d", k ? "," : "", hist[k].op, hist[k].n);
        printf("\n");
        if (pst == ERT_OK) {
            printf("arena plan (batch %ld, %ld thread%s, cpu", batch, o.threads, o.threads == 1 ? "" : "s");
            for (int j = 0; j < n_shapes; j++) {
                char s[160];
                printf(", %s %s", shapes[j].name, cli_shape_str(s, sizeof s, shapes[j].ndim, shapes[j].dims));
            }
            printf("):\n");
            print_memory(&mem);
        }
    }
    flush_stdout();
    if (dyn_rc) rc = check_dynamic(m, shapes, n_shapes);
    else if (pst != ERT_OK) {
        int shape_like = strstr(ert_last_error(ctx), "must be a constant") != NULL;
        rc = lib_error(ctx, pst, "cannot plan a session");
        if (shape_like)
            note("the model takes a shape-like operand as a graph input: `edgert run` fixes such inputs at create from "
                 "the files given with --input");
    }
    ert_session_free(sess);
out:
    free(hist);
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- run */

static void print_values(const ert_tensor_info *t, const void *data, size_t n) {
    size_t show = n < 8 ? n : 8;
    printf("[");
    for (size_t i = 0; i < show; i++) printf("%s%.6g", i ? ", " : "", cli_elem(t->dtype, data, i));
    printf("%s]", n > show ? ", ..." : "");
}

/* mkdir -p */
static int make_dirs(const char *dir) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    }
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

/* --check-finite found node nf: say which, on stdout (it is the result),
 * and fail. */
static int report_nonfinite(const char *model, const ert_nonfinite *nf, int json) {
    const char *what = isnan(nf->first_value) ? "nan" : nf->first_value > 0 ? "inf" : "-inf";
    if (json) {
        printf("{\"model\": "), cli_json_str(stdout, model);
        printf(", \"finite\": false, \"node\": "), cli_json_str(stdout, nf->node);
        printf(", \"op\": "), cli_json_str(stdout, nf->op);
        printf(", \"output\": "), cli_json_str(stdout, nf->output);
        printf(", \"node_index\": %d, \"count\": %lld, \"first_index\": %lld, \"first_value\": \"%s\"}\n",
               nf->node_index, (long long)nf->count, (long long)nf->first_index, what);
    } else {
        printf("not finite: node '%s' (%s, #%d in run order), output '%s': %lld non-finite value%s, the first (%s) "
               "at index %lld\n",
               nf->node, nf->op, nf->node_index, nf->output, (long long)nf->count, nf->count == 1 ? "" : "s", what,
               (long long)nf->first_index);
    }
    flush_stdout();
    return 1;
}

/* Top-k of each row of an (N, C) float output, best first, as scores. */
static void print_topk(const ert_tensor_info *t, const void *data, long k, char **labels, int n_labels, int json) {
    int64_t rows = t->ndim == 2 ? t->dims[0] : 1, cols = t->dims[t->ndim - 1];
    int kk = (int)(k < cols ? k : cols);
    float *row = malloc((size_t)cols * sizeof *row);
    int *idx = malloc((size_t)kk * sizeof *idx);
    float *score = malloc((size_t)kk * sizeof *score);
    if (json) printf(", \"topk\": [");
    for (int64_t r = 0; row && idx && score && r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) row[c] = (float)cli_elem(t->dtype, data, (size_t)(r * cols + c));
        int got = cam_topk(row, (int)cols, kk, 0, idx, score);
        if (json) printf("%s[", r ? ", " : "");
        else printf("    top-%d of row %lld:", kk, (long long)r);
        for (int j = 0; j < got; j++) {
            const char *lab = idx[j] < n_labels ? labels[idx[j]] : NULL;
            if (json) {
                printf("%s{\"class\": %d, \"score\": %.7g, \"label\": ", j ? ", " : "", idx[j], score[j]);
                if (lab) cli_json_str(stdout, lab);
                else printf("null");
                printf("}");
            } else {
                printf("%s %d%s%s%s %.5g", j ? "," : "", idx[j], lab ? " (" : "", lab ? lab : "", lab ? ")" : "", score[j]);
            }
        }
        printf(json ? "]" : "\n");
    }
    if (json) printf("]");
    free(row);
    free(idx);
    free(score);
}

/* --expect specs resolved to output indices, references loaded. */
typedef struct expect_ref {
    cli_tensor t;
    int output;
} expect_ref;

static int load_expects(ert_context *ctx, ert_session *s, const common_opts *o, expect_ref *ex) {
    char err[1024];
    int no = ert_session_n_outputs(s);
    for (int k = 0; k < o->n_expects; k++) {
        const char *spec = o->expects[k];
        int idx = -1;
        char name[256];
        const char *eq = spec_name(spec, name, sizeof name);
        if (eq) {
            if (ert_session_find_output(s, name, &idx) == ERT_OK) ex[k].t.path = eq + 1;
            else idx = -1;
        }
        if (idx < 0 && (!eq || access(spec, F_OK) == 0)) {
            ex[k].t.path = spec;
            if (cli_tensor_load(ctx, &ex[k].t, err, sizeof err) != 0) return error("--expect %s", err);
            if (ex[k].t.file_name && ert_session_find_output(s, ex[k].t.file_name, &idx) != ERT_OK) idx = -1;
            if (idx < 0 && no == 1) idx = 0;
        }
        if (idx < 0)
            return error("--expect '%s': give OUTPUT=FILE with one of the model's outputs%s", spec,
                         eq ? " (no output has that name)" : "");
        if (!ex[k].t.data && cli_tensor_load(ctx, &ex[k].t, err, sizeof err) != 0) return error("--expect %s", err);
        ex[k].output = idx;
    }
    return 0;
}

static int write_output_npy(const ert_tensor_info *t, const void *data, const char *path) {
    int64_t n = cli_numel(t->ndim, t->dims);
    void *conv = NULL;
    ert_dtype wdt = t->dtype;
    const void *wdata = data;
    size_t wbytes = (size_t)n * ert_dtype_size(t->dtype);
    if (t->dtype == ERT_DTYPE_BF16) { /* no numpy bf16: widen to f32 */
        conv = malloc((size_t)n * 4 + 1);
        if (!conv) return error("out of memory");
        for (int64_t e = 0; e < n; e++) ((float *)conv)[e] = cli_bf16_to_f32(((const uint16_t *)data)[e]);
        wdt = ERT_DTYPE_F32, wdata = conv, wbytes = (size_t)n * 4;
    }
    char err[512];
    int rc = npy_write_file(path, wdt, t->ndim, t->dims, wdata, wbytes, err, sizeof err) != 0 ? error("%s", err) : 0;
    free(conv);
    return rc;
}

static int cmd_run(int argc, char **argv) {
    common_opts o = {.batch = 0, .threads = 1, .iters = 1, .device = "cpu", .precision = "f32", .atol = 1e-5, .rtol = 1e-3,
                     .std = {1, 1, 1}};
    int rc = parse_opts(argc, argv,
                        O_BATCH | O_THREADS | O_JSON | O_INPUT | O_OUTDIR | O_SHAPE | O_DEVICE | O_PRECISION | O_ITERS |
                            O_IMAGE | O_CHECK | O_CHECK_FINITE | O_PLAN,
                        1, HELP_RUN, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.labels && !o.topk) return usage_error("--labels '%s' needs --topk K", o.labels);
    ert_context *ctx = make_context();
    if (!ctx) return 1;
    ert_model *m = NULL;
    ert_session *s = NULL;
    cli_tensor ins[MAX_INPUTS];
    expect_ref ex[MAX_INPUTS];
    int frozen[MAX_INPUTS] = {0};
    ert_input_shape shapes[MAX_INPUTS];
    int n_shapes = 0;
    double *times = NULL;
    char **labels = NULL;
    int n_labels = 0;
    char(*files)[256] = NULL;
    memset(ins, 0, sizeof ins);
    memset(ex, 0, sizeof ex);
    if ((rc = load_model(ctx, o.pos[0], &m)) != 0) goto out;
    if ((rc = parse_shapes(m, &o, shapes, &n_shapes)) != 0) goto out;
    if ((rc = load_inputs(ctx, m, &o, ins, shapes, &n_shapes)) != 0) goto out;
    for (int i = 0; i < ert_model_n_inputs(m); i++) {
        ert_tensor_info mi;
        ert_model_input_info(m, i, &mi);
        int given = 0;
        for (int k = 0; k < o.n_inputs; k++) given |= strcmp(ins[k].name, mi.name) == 0;
        if (!given) {
            rc = error("input '%s' not given (use --input %s=FILE)", mi.name, mi.name);
            goto out;
        }
    }
    if (o.labels && (n_labels = cam_labels_load(o.labels, &labels)) == 0) {
        rc = error("--labels '%s': cannot read it, or it is empty", o.labels);
        goto out;
    }
    batch_notes(m, o.batch, shapes, n_shapes);

    ert_session_options so = {0};
    so.batch = (int)o.batch;
    so.n_threads = (int)o.threads;
    so.precision = precision_of(o.precision);
    so.input_shapes = n_shapes ? shapes : NULL;
    so.n_input_shapes = n_shapes;
    char plan_dir[1024];
    plan_options(&o, &so, plan_dir, sizeof plan_dir);
    ert_device used = ERT_DEVICE_CPU;
    ert_status st = create_session(ctx, m, &so, o.device, ins, o.n_inputs, frozen, &s, &used);
    if (st != ERT_OK) {
        rc = create_error(ctx, st, o.device);
        goto out;
    }
    precision_note(used, o.precision);
    if ((rc = set_inputs(ctx, s, ins, o.n_inputs, frozen)) != 0) goto out;
    if ((rc = load_expects(ctx, s, &o, ex)) != 0) goto out;
    times = malloc(sizeof *times * (size_t)o.iters);
    if (!times) {
        rc = error("out of memory");
        goto out;
    }
    for (long it = 0; it < o.iters; it++) {
        double t0 = cli_now();
        ert_nonfinite nf;
        st = o.check_finite ? ert_session_run_check_finite(s, &nf) : ert_session_run(s);
        times[it] = (cli_now() - t0) * 1e3;
        if (st == ERT_E_NUMERIC && o.check_finite) {
            rc = report_nonfinite(o.pos[0], &nf, o.json);
            goto out;
        }
        if (st != ERT_OK) {
            rc = lib_error(ctx, st, "run failed");
            goto out;
        }
    }
    cli_stats stt = cli_stats_compute(times, (int)o.iters);
    if (o.output_dir && make_dirs(o.output_dir) != 0) {
        rc = error("cannot create output directory '%s': %s", o.output_dir, strerror(errno));
        goto out;
    }

    int no = ert_session_n_outputs(s);
    files = calloc((size_t)(no > 0 ? no : 1), sizeof *files);
    if (!files) {
        rc = error("out of memory");
        goto out;
    }
    const char *dev = used == ERT_DEVICE_CUDA ? "cuda" : "cpu", *prec = effective_precision(used, o.precision);
    if (o.json) {
        printf("{\"model\": ");
        cli_json_str(stdout, o.pos[0]);
        printf(", \"device\": \"%s\", \"precision\": \"%s\", \"iters\": %ld, \"run_ms\": %.3f, \"p50_ms\": %.4f, "
               "\"min_ms\": %.4f, \"max_ms\": %.4f,%s \"outputs\": [",
               dev, prec, o.iters, stt.p50, stt.p50, stt.min, stt.max, o.check_finite ? " \"finite\": true," : "");
    } else if (o.iters > 1) {
        printf("ran %s on %s (%s) %ld times: p50 %.3f ms  min %.3f  max %.3f\n", o.pos[0], dev, prec, o.iters, stt.p50,
               stt.min, stt.max);
    } else {
        printf("ran %s on %s (%s) in %.3f ms%s\n", o.pos[0], dev, prec, stt.p50,
               o.check_finite ? " (node by node: every output finite)" : "");
    }
    for (int i = 0; i < no && !rc; i++) {
        ert_tensor_info t;
        const void *data;
        if ((st = ert_session_output_info(s, i, &t)) != ERT_OK || (st = ert_session_output_data(s, i, &data)) != ERT_OK) {
            rc = lib_error(ctx, st, "cannot read an output");
            break;
        }
        int64_t n = cli_numel(t.ndim, t.dims);
        char path[4096] = "";
        if (o.output_dir) {
            /* sanitised names may collide ("a/b" and "a_b"): suffix the index */
            cli_sanitize_name(files[i], 200, t.name);
            for (int j = 0; j < i; j++)
                if (strcmp(files[j], files[i]) == 0) {
                    size_t l = strlen(files[i]);
                    snprintf(files[i] + l, sizeof files[i] - l, "_%d", i);
                    break;
                }
            snprintf(path, sizeof path, "%s/%s.npy", o.output_dir, files[i]);
            if ((rc = write_output_npy(&t, data, path)) != 0) break;
        }
        int topk = o.topk && (t.ndim == 2 || t.ndim == 1) && t.dims[t.ndim - 1] > 0;
        char sh[160];
        if (o.json) {
            printf("%s{\"name\": ", i ? ", " : "");
            cli_json_str(stdout, t.name);
            printf(", \"dtype\": \"%s\", \"shape\": [", ert_dtype_name(t.dtype));
            for (int d = 0; d < t.ndim; d++) printf("%s%lld", d ? ", " : "", (long long)t.dims[d]);
            printf("], \"first_values\": [");
            for (int64_t e = 0; e < n && e < 8; e++) {
                double v = cli_elem(t.dtype, data, (size_t)e);
                if (isfinite(v)) printf("%s%.9g", e ? ", " : "", v);
                else printf("%snull", e ? ", " : ""); /* JSON has no nan/inf */
            }
            printf("], \"file\": ");
            if (o.output_dir) cli_json_str(stdout, path); else printf("null");
            if (topk) print_topk(&t, data, o.topk, labels, n_labels, 1);
            printf("}");
        } else {
            printf("  %-20s %-5s %-18s ", t.name, ert_dtype_name(t.dtype), cli_shape_str(sh, sizeof sh, t.ndim, t.dims));
            print_values(&t, data, (size_t)n);
            if (o.output_dir) printf("  -> %s", path);
            printf("\n");
            if (topk) print_topk(&t, data, o.topk, labels, n_labels, 0);
        }
    }
    if (o.topk && !rc) {
        int any = 0;
        for (int i = 0; i < no; i++) {
            ert_tensor_info t;
            if (ert_session_output_info(s, i, &t) == ERT_OK) any |= (t.ndim == 2 || t.ndim == 1);
        }
        if (!any) note("--topk: no output is (N, C) or (C,); nothing ranked");
    }
    /* --expect: every reference checked, all mismatches listed */
    int mismatches = 0;
    if (o.json && !rc) printf("], \"expect\": [");
    for (int k = 0; k < o.n_expects && !rc; k++) {
        ert_tensor_info t;
        const void *data;
        char msg[1024];
        if (ert_session_output_info(s, ex[k].output, &t) != ERT_OK || ert_session_output_data(s, ex[k].output, &data) != ERT_OK)
            continue;
        int ok = cli_tensor_compare(&t, data, &ex[k].t, o.atol, o.rtol, msg, sizeof msg);
        mismatches += !ok;
        if (o.json) {
            printf("%s{\"output\": ", k ? ", " : "");
            cli_json_str(stdout, t.name);
            printf(", \"ok\": %s, \"detail\": ", ok ? "true" : "false");
            cli_json_str(stdout, msg);
            printf("}");
        } else {
            printf("expect %s: %s: %s\n", t.name, ok ? "ok" : "MISMATCH", msg);
        }
        if (!ok) fprintf(stderr, "edgert: error: --expect %s: %s\n", t.name, msg);
    }
    if (o.json && !rc) printf("]}\n");
    if (!rc && mismatches) rc = 1;
out:
    free(files);
    free(times);
    if (labels) cam_labels_free(labels, n_labels);
    for (int k = 0; k < o.n_inputs; k++) cli_tensor_free(&ins[k]);
    for (int k = 0; k < o.n_expects; k++) cli_tensor_free(&ex[k].t);
    ert_session_free(s);
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- convert */

/* The format is the output's extension: a user typing OUT.onnx expects ONNX. */
static const char *ext_of(const char *path) {
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    return dot && (!slash || dot > slash) ? dot : "";
}

static int cmd_convert(int argc, char **argv) {
    common_opts o = {0};
    int rc = parse_opts(argc, argv, O_FP16, 2, HELP_CONVERT, &o);
    if (rc) return rc < 0 ? 0 : rc;
    const char *ext = ext_of(o.pos[1]);
    int onnx = strcasecmp(ext, ".onnx") == 0;
    if (!onnx && strcasecmp(ext, ".ert") != 0)
        return usage_error("output '%s': extension '%s' names no format; use .ert or .onnx", o.pos[1], ext);
    if (onnx && o.fp16) return usage_error("--fp16 applies to .ert output, not '%s'", o.pos[1]);
    ert_context *ctx = make_context();
    if (!ctx) return 1;
    ert_model *m = NULL;
    if ((rc = load_model(ctx, o.pos[0], &m)) == 0) {
        ert_save_options so = {.weights_dtype = o.fp16 ? ERT_DTYPE_F16 : ERT_DTYPE_UNDEFINED};
        ert_status st = onnx ? ert_model_save_onnx(m, o.pos[1]) : ert_model_save_opts(m, o.pos[1], &so);
        if (st != ERT_OK) {
            char what[600];
            snprintf(what, sizeof what, "cannot save '%s' as %s", o.pos[1], onnx ? "ONNX" : ".ert");
            rc = lib_error(ctx, st, what);
        } else {
            struct stat sb;
            long long size = stat(o.pos[1], &sb) == 0 ? (long long)sb.st_size : -1;
            printf("wrote %s (%s, %lld bytes, %d nodes, %lld parameters)\n", o.pos[1], onnx ? "ONNX" : ".ert", size,
                   ert_model_n_nodes(m), (long long)ert_model_n_params(m));
        }
    }
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- bench */

/* --profile: one ert_session_profile run, summed per op type, slowest first;
 * --profile-nodes: `runs` runs, each node's fastest time kept (pr->e, pr->best:
 * the schedule, freed by prof_free). */
#define PROF_OPS 64
typedef struct prof_op {
    char name[48];
    double ms;
    int count;
} prof_op;
typedef struct prof_ops {
    prof_op op[PROF_OPS];
    int n, nodes;
    double total_ms;
    ert_profile_entry *e; /* with --profile-nodes: the nodes, best[k] the fastest of node k */
    double *best;
} prof_ops;

static void prof_free(prof_ops *pr) {
    free(pr->e);
    free(pr->best);
    pr->e = NULL;
    pr->best = NULL;
}

static int profile_ops(ert_context *ctx, ert_session *s, prof_ops *pr, int runs, int keep_nodes) {
    int n = 0;
    memset(pr, 0, sizeof *pr);
    /* a first run counts the nodes (and warms the profiling path up) */
    ert_status st = ert_session_profile(s, NULL, 0, &n);
    if (st != ERT_OK) return lib_error(ctx, st, "profiling run failed");
    const int cap = n > 0 ? n : 1;
    ert_profile_entry *e = malloc((size_t)cap * sizeof *e);
    double *best = malloc((size_t)cap * sizeof *best);
    if (!e || !best) {
        free(e);
        free(best);
        return error("out of memory");
    }
    for (int r = 0; r < runs; r++) {
        if ((st = ert_session_profile(s, e, cap, &n)) != ERT_OK || n > cap) {
            free(e);
            free(best);
            return st != ERT_OK ? lib_error(ctx, st, "profiling run failed") : error("the schedule changed between runs");
        }
        for (int i = 0; i < n; i++)
            if (r == 0 || e[i].ms < best[i]) best[i] = e[i].ms;
    }
    pr->nodes = n;
    for (int i = 0; i < n; i++) {
        const char *op = e[i].op ? e[i].op : "?";
        int k = 0;
        while (k < pr->n && strcmp(pr->op[k].name, op) != 0) k++;
        if (k == pr->n && pr->n < PROF_OPS) snprintf(pr->op[pr->n++].name, sizeof pr->op[0].name, "%s", op);
        if (k < pr->n) pr->op[k].ms += best[i], pr->op[k].count++;
        pr->total_ms += best[i];
    }
    if (keep_nodes) {
        pr->e = e; /* names and ops stay valid for the session's life */
        pr->best = best;
    } else {
        free(e);
        free(best);
    }
    for (int i = 1; i < pr->n; i++) /* slowest first */
        for (int j = i; j > 0 && pr->op[j].ms > pr->op[j - 1].ms; j--) {
            prof_op tmp = pr->op[j];
            pr->op[j] = pr->op[j - 1];
            pr->op[j - 1] = tmp;
        }
    return 0;
}

static int cmd_bench(int argc, char **argv) {
    common_opts o = {.batch = 0, .threads = 1, .iters = 20, .warmup = 3, .device = "cpu", .precision = "f32",
                     .std = {1, 1, 1}};
    int rc = parse_opts(argc, argv,
                        O_BATCH | O_THREADS | O_JSON | O_DEVICE | O_ITERS | O_WARMUP | O_PRECISION | O_CUDA_LAYOUT |
                            O_SHAPE | O_INPUT | O_PLAN | O_PROFILE,
                        1, HELP_BENCH, &o);
    if (rc) return rc < 0 ? 0 : rc;
    ert_context *ctx = make_context();
    if (!ctx) return 1;
    ert_model *m = NULL;
    ert_session *s = NULL;
    double *t = NULL;
    prof_ops prof = {0};
    cli_tensor ins[MAX_INPUTS];
    int frozen[MAX_INPUTS] = {0};
    ert_input_shape shapes[MAX_INPUTS];
    int n_shapes = 0;
    memset(ins, 0, sizeof ins);
    if ((rc = load_model(ctx, o.pos[0], &m)) != 0) goto out;
    if ((rc = parse_shapes(m, &o, shapes, &n_shapes)) != 0) goto out;
    if ((rc = load_inputs(ctx, m, &o, ins, shapes, &n_shapes)) != 0) goto out;
    if ((rc = check_dynamic(m, shapes, n_shapes)) != 0) goto out;
    batch_notes(m, o.batch, shapes, n_shapes);
    ert_session_options so = {0};
    so.batch = (int)(o.batch ? o.batch : 1);
    so.n_threads = (int)o.threads;
    so.precision = precision_of(o.precision);
    so.input_shapes = n_shapes ? shapes : NULL;
    so.n_input_shapes = n_shapes;
    if (o.no_nhwc) so.flags |= ERT_SESSION_NO_NHWC;
    if (o.nhwc) so.flags |= ERT_SESSION_NHWC;
    if (o.gemm1x1) so.flags |= ERT_SESSION_GEMM_1X1;
    if (o.conv_graph) so.flags |= ERT_SESSION_CONV_GRAPH;
    if (o.no_conv_graph) so.flags |= ERT_SESSION_NO_CONV_GRAPH;
    if (o.no_strips) so.flags |= ERT_SESSION_NO_STRIPS;
    if (o.no_transforms) so.flags |= ERT_SESSION_NO_CONV_TRANSFORMS;
    char plan_dir[1024];
    plan_options(&o, &so, plan_dir, sizeof plan_dir);
    ert_device used = ERT_DEVICE_CPU;
    double create0 = cli_now();
    ert_status st = create_session(ctx, m, &so, o.device, ins, o.n_inputs, frozen, &s, &used);
    double create_ms = (cli_now() - create0) * 1e3;
    if (st != ERT_OK) {
        rc = create_error(ctx, st, o.device);
        goto out;
    }
    precision_note(used, o.precision);
    /* random inputs, fixed seed: the same numbers on every run and machine;
     * then the files given with --input */
    cli_rng rng;
    cli_rng_seed(&rng, 0x5eed);
    int ni = ert_session_n_inputs(s);
    for (int i = 0; i < ni; i++) {
        ert_tensor_info ti;
        void *p;
        if ((st = ert_session_input_info(s, i, &ti)) != ERT_OK || (st = ert_session_input_data(s, i, &p)) != ERT_OK) {
            rc = lib_error(ctx, st, "cannot access an input");
            goto out;
        }
        cli_fill_random(&rng, ti.dtype, p, (size_t)cli_numel(ti.ndim, ti.dims) * ert_dtype_size(ti.dtype));
    }
    if ((rc = set_inputs(ctx, s, ins, o.n_inputs, frozen)) != 0) goto out;
    t = malloc(sizeof *t * (size_t)o.iters);
    if (!t) {
        rc = error("out of memory");
        goto out;
    }
    int tty = isatty(STDERR_FILENO);
    double last_progress = 0, start = cli_now();
    long total = o.warmup + o.iters;
    for (long k = 0; k < total; k++) {
        double t0 = cli_now();
        st = ert_session_run(s);
        double t1 = cli_now();
        if (st != ERT_OK) {
            if (tty) fprintf(stderr, "\r\033[K");
            rc = lib_error(ctx, st, "run failed");
            goto out;
        }
        if (k >= o.warmup) t[k - o.warmup] = (t1 - t0) * 1e3;
        /* progress only for people watching, and only on long runs */
        if (tty && t1 - start > 1.0 && t1 - last_progress > 0.1) {
            fprintf(stderr, "\rbench: %s %ld/%ld", k < o.warmup ? "warm-up" : "iteration", k + 1, total);
            last_progress = t1;
        }
    }
    if (tty && last_progress > 0) fprintf(stderr, "\r\033[K");
    ert_memory_report mem;
    memset(&mem, 0, sizeof mem);
    ert_session_memory(s, &mem);
    cli_stats stt = cli_stats_compute(t, (int)o.iters);
    long batch = session_batch(s); /* what ran, whatever --batch said */
    double thr = stt.mean > 0 ? (double)batch * 1e3 / stt.mean : 0;
    /* create again (the first session freed): with a plan cache, this is the
     * warm create a second process would see */
    ert_create_stats cs[2];
    memset(cs, 0, sizeof cs);
    ert_session_create_stats(s, &cs[0]);
    int n_fallback = ert_session_n_cpu_fallback(s);
    ert_session_free(s);
    s = NULL;
    if ((st = create_session(ctx, m, &so, used == ERT_DEVICE_CUDA ? "cuda" : "cpu", ins, o.n_inputs, frozen, &s, &used)) != ERT_OK) {
        rc = create_error(ctx, st, o.device);
        goto out;
    }
    ert_session_create_stats(s, &cs[1]);
    /* on the second session: its node names stay valid until it is freed, below */
    if (o.profile && (rc = profile_ops(ctx, s, &prof, o.profile_nodes ? 10 : 1, o.profile_nodes)) != 0) goto out;
    const char *dev = used == ERT_DEVICE_CUDA ? "cuda" : "cpu", *prec = effective_precision(used, o.precision);
    if (o.json) {
        printf("{\"model\": ");
        cli_json_str(stdout, o.pos[0]);
        printf(", \"version\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"precision_requested\": \"%s\", "
               "\"batch\": %ld, \"threads\": %ld, \"iters\": %ld, \"warmup\": %ld, "
               "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"mean_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, "
               "\"throughput_items_per_s\": %.3f, \"create_ms\": %.1f, \"arena_bytes\": %zu, \"cpu_fallback_nodes\": %d, \"memory\": ",
               ert_version(), dev, prec, o.precision, batch, o.threads, o.iters, o.warmup, stt.p50, stt.p90, stt.mean,
               stt.min, stt.max, thr, create_ms, mem.total_bytes, n_fallback);
        json_memory(&mem);
        printf(", \"create\": {\"mode\": \"%s\", \"plan_cache_dir\": ", cs[0].mode == ERT_CREATE_FAST ? "fast" : "tuned");
        if (so.plan_cache_dir) cli_json_str(stdout, so.plan_cache_dir);
        else printf("null");
        for (int k = 0; k < 2; k++)
            printf(", \"%s\": {\"ms\": %.1f, \"plan_cache\": \"%s\", \"searches\": %d, \"cached\": %d, "
                   "\"init_ms\": %.1f, \"graph_ms\": %.1f, \"upload_ms\": %.1f, \"bind_ms\": %.1f, "
                   "\"measure_ms\": %.1f, \"finalize_ms\": %.1f}",
                   k ? "second" : "first", cs[k].create_ms, cli_plan_cache_state_str(cs[k].plan_cache), cs[k].n_searches,
                   cs[k].n_cached, cs[k].init_ms, cs[k].graph_ms, cs[k].upload_ms, cs[k].bind_ms, cs[k].measure_ms,
                   cs[k].finalize_ms);
        printf("}");
        if (o.profile) {
            printf(", \"profile\": {\"total_ms\": %.4f, \"nodes\": %d, \"ops\": [", prof.total_ms, prof.nodes);
            for (int k = 0; k < prof.n; k++) {
                printf("%s[", k ? ", " : "");
                cli_json_str(stdout, prof.op[k].name);
                printf(", %.4f, %d]", prof.op[k].ms, prof.op[k].count);
            }
            printf("]");
            if (prof.e) {
                printf(", \"nodes\": [");
                for (int k = 0; k < prof.nodes; k++) {
                    printf("%s[", k ? ", " : "");
                    cli_json_str(stdout, prof.e[k].node ? prof.e[k].node : "?");
                    printf(", ");
                    cli_json_str(stdout, prof.e[k].op ? prof.e[k].op : "?");
                    printf(", %.4f]", prof.best[k]);
                }
                printf("]");
            }
            printf("}");
        }
        printf("}\n");
    } else {
        char b[64];
        printf("model: %s  device: %s  precision: %s  batch: %ld  threads: %ld  iters: %ld (+%ld warm-up)\n", o.pos[0],
               dev, prec, batch, o.threads, o.iters, o.warmup);
        printf("latency ms: p50 %.3f  p90 %.3f  mean %.3f  min %.3f  max %.3f\n", stt.p50, stt.p90, stt.mean, stt.min, stt.max);
        printf("throughput: %.1f items/s\n", thr);
        for (int k = 0; k < 2; k++)
            printf("session create%s: %.1f ms (%s; plan cache %s; %d measured, %d from the cache; init %.1f, graph %.1f, "
                   "upload %.1f, bind %.1f; measuring %.1f, fused plans %.1f)\n",
                   k ? " again" : "", cs[k].create_ms, cs[k].mode == ERT_CREATE_FAST ? "fast" : "tuned",
                   cli_plan_cache_state_str(cs[k].plan_cache), cs[k].n_searches, cs[k].n_cached, cs[k].init_ms,
                   cs[k].graph_ms, cs[k].upload_ms, cs[k].bind_ms, cs[k].measure_ms, cs[k].finalize_ms);
        if (n_fallback) printf("cpu fallback: %d nodes (no CUDA kernel)\n", n_fallback);
        printf("arena: %zu bytes (%s); activations %zu, lower bound %zu\n", mem.total_bytes,
               cli_bytes_str(b, sizeof b, mem.total_bytes), mem.activations_bytes, mem.activations_lower_bound);
        if (o.profile) {
            printf("profile: %.3f ms over %d nodes, by op:\n", prof.total_ms, prof.nodes);
            for (int k = 0; k < prof.n; k++)
                printf("  %-24s %9.3f ms  %4d nodes\n", prof.op[k].name, prof.op[k].ms, prof.op[k].count);
            if (prof.e) {
                printf("nodes (fastest of 10 profiling runs, schedule order):\n");
                for (int k = 0; k < prof.nodes; k++)
                    printf("  %s\t%s\t%.4f\n", prof.e[k].node ? prof.e[k].node : "?", prof.e[k].op ? prof.e[k].op : "?",
                           prof.best[k]);
            }
        }
    }
out:
    free(t);
    prof_free(&prof);
    for (int k = 0; k < o.n_inputs; k++) cli_tensor_free(&ins[k]);
    ert_session_free(s);
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- main */

static int dispatch(int argc, char **argv) {
    /* global options before the command */
    while (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--verbose") == 0)) {
        g_verbose++;
        argv[1] = argv[0];
        argv++, argc--;
    }
    if (argc < 2) {
        fprintf(stderr, "edgert: no command given\n\n%s", USAGE);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("edgert %s (library %s)\n", ERT_VERSION_STRING, ert_version());
        return 0;
    }
    g_cmd = cmd;
    if (strcmp(cmd, "info") == 0) return cmd_info(argc, argv);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc, argv);
    if (strcmp(cmd, "convert") == 0) return cmd_convert(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc, argv);
#ifdef EDGERT_HAVE_TRAIN_CMD
    if (strcmp(cmd, "train") == 0) return edgert_cmd_train(argc, argv);
    if (strcmp(cmd, "quantize") == 0) return edgert_cmd_quantize(argc, argv);
#endif
    g_cmd = NULL;
    return usage_error(cmd[0] == '-' ? "unknown option '%s'" : "unknown command '%s' (commands: info, run, convert, bench"
#ifdef EDGERT_HAVE_TRAIN_CMD
                                                               ", train, quantize"
#endif
                                                               ")",
                       cmd);
}

int main(int argc, char **argv) { return finish_stdout(dispatch(argc, argv)); }
