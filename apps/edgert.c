/*
 * edgert - command-line front end of the library: info, run, convert, bench.
 *
 * Conventions: human-readable output on stdout by default, --json prints one
 * JSON object instead; errors go to stderr as "edgert: error: ..." with the
 * library's ert_last_error() message. Exit status: 0 success, 1 failure
 * (library, file or data error), 2 bad usage (usage text on stderr).
 * Uses only the public header edgert.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "edgert.h"

#include "cli_util.h"
#include "npy.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef EDGERT_HAVE_TRAIN_CMD /* apps/train_cmd.c, built when zlib is found */
#include "train_cmd.h"
#else
#define EDGERT_TRAIN_USAGE ""
#endif

#define EXIT_USAGE 2
#define MAX_INPUTS 64

static const char *USAGE =
    "usage: edgert <command> [options]\n"
    "\n"
    "commands:\n"
    "  info MODEL [--batch N] [--threads N] [--json]\n"
    "      inputs, outputs, op histogram, node and parameter counts, and the\n"
    "      planned arena by category for batch N (default 1)\n"
    "  run MODEL --input NAME=FILE ... [--output-dir DIR] [--threads N] [--batch N] [--json]\n"
    "      run once on inputs from .npy or ONNX TensorProto .pb files; with\n"
    "      --output-dir writes DIR/<output>.npy; NAME= may be left out when the\n"
    "      model has one input, or for a .pb that names its tensor\n"
    "  convert IN OUT.ert [--fp16]\n"
    "      load any supported model (.ert, ONNX) and save it as .ert; --fp16\n"
    "      stores f32 weights as f16 (about half the file; computed in f32)\n"
    "  bench MODEL [--batch N] [--threads N] [--device cpu|cuda] [--iters N]\n"
    "              [--warmup N] [--precision f32|f16|bf16] [--nhwc|--no-nhwc] [--gemm1x1]\n"
    "              [--conv-graph|--no-conv-graph] [--json]\n"
    "      time ert_session_run on random inputs (fixed seed): p50/p90/mean/min\n"
    "      latency, throughput, arena bytes (defaults: --iters 20 --warmup 3);\n"
    "      --nhwc/--no-nhwc: f16/bf16 CUDA activations channels-last always/never\n"
    "      (default: when cuDNN measures it faster); --gemm1x1: channels-last 1x1\n"
    "      convs as cuBLASLt GEMMs (ERT_SESSION_GEMM_1X1); --conv-graph/--no-conv-graph:\n"
    "      channels-last conv + epilogue as one cuDNN graph whenever cuDNN runs it/never\n"
    "      (default: where it measures faster)\n"
    EDGERT_TRAIN_USAGE
    "\n"
    "options:\n"
    "  -h, --help     this text          --version   library and CLI version\n"
    "  -v, --verbose  library log messages (info level) on stderr; twice: debug level\n"
    "\n"
    "exit status: 0 ok, 1 error (message on stderr), 2 bad usage\n";

static int g_verbose;

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif
static int usage_error(const char *fmt, ...) CLI_PRINTF(1, 2);
static int error(const char *fmt, ...) CLI_PRINTF(1, 2);

static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "edgert: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n%s", USAGE);
    va_end(ap);
    return EXIT_USAGE;
}

static int error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "edgert: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

/* A failed library call: what we were doing, then the library's own detail. */
static int lib_error(const ert_context *ctx, ert_status st, const char *what) {
    const char *msg = ert_last_error(ctx);
    if (msg && *msg)
        return error("%s: %s [%s]", what, msg, ert_status_str(st));
    return error("%s: %s", what, ert_status_str(st));
}

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

static int opt_int(opt_parser *p, long lo, long hi, long *out) {
    if (p->err) return 0;
    if (cli_parse_int(p->val, lo, hi, out) != 0) {
        p->err = usage_error("%s: expected an integer in [%ld, %ld], got '%s'", p->argv[p->i], lo, hi, p->val);
        return 0;
    }
    return 1;
}

typedef struct common_opts {
    long batch, threads, iters, warmup;
    int json, fp16, no_nhwc, nhwc, gemm1x1, conv_graph, no_conv_graph;
    const char *device;
    const char *precision;
    const char *output_dir;
    const char *inputs[MAX_INPUTS];
    int n_inputs;
    const char *pos[4];
    int n_pos;
} common_opts;

enum { O_BATCH = 1, O_THREADS = 2, O_JSON = 4, O_DEVICE = 8, O_ITERS = 16, O_WARMUP = 32, O_INPUT = 64, O_OUTDIR = 128,
       O_PRECISION = 256, O_FP16 = 512, O_NO_NHWC = 1024 };

/* Parse argv[2..] of a command; `allowed` is a mask of O_*; `npos` the exact
 * number of positional arguments. Returns 0 or an exit status. */
static int parse_opts(int argc, char **argv, unsigned allowed, int npos, common_opts *o) {
    opt_parser p = {argc, 2, argv, NULL, 0};
    for (; p.i < argc && !p.err; p.i++) {
        const char *a = argv[p.i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(USAGE, stdout);
            exit(0);
        } else if (strcmp(a, "--version") == 0) {
            printf("edgert %s (library %s)\n", ERT_VERSION_STRING, ert_version());
            exit(0);
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            g_verbose++;
        } else if ((allowed & O_BATCH) && opt_match(&p, "--batch", 1)) {
            opt_int(&p, 1, 1 << 20, &o->batch);
        } else if ((allowed & O_THREADS) && opt_match(&p, "--threads", 1)) {
            opt_int(&p, 1, 1024, &o->threads);
        } else if ((allowed & O_ITERS) && opt_match(&p, "--iters", 1)) {
            opt_int(&p, 1, 100000000, &o->iters);
        } else if ((allowed & O_WARMUP) && opt_match(&p, "--warmup", 1)) {
            opt_int(&p, 0, 100000000, &o->warmup);
        } else if ((allowed & O_JSON) && opt_match(&p, "--json", 0)) {
            o->json = 1;
        } else if ((allowed & O_NO_NHWC) && opt_match(&p, "--no-nhwc", 0)) {
            o->no_nhwc = 1;
        } else if ((allowed & O_NO_NHWC) && opt_match(&p, "--nhwc", 0)) {
            o->nhwc = 1;
        } else if ((allowed & O_NO_NHWC) && opt_match(&p, "--gemm1x1", 0)) {
            o->gemm1x1 = 1;
        } else if ((allowed & O_NO_NHWC) && opt_match(&p, "--conv-graph", 0)) {
            o->conv_graph = 1;
        } else if ((allowed & O_NO_NHWC) && opt_match(&p, "--no-conv-graph", 0)) {
            o->no_conv_graph = 1;
        } else if ((allowed & O_FP16) && opt_match(&p, "--fp16", 0)) {
            o->fp16 = 1;
        } else if ((allowed & O_DEVICE) && opt_match(&p, "--device", 1)) {
            if (!p.err) o->device = p.val;
        } else if ((allowed & O_PRECISION) && opt_match(&p, "--precision", 1)) {
            if (!p.err) o->precision = p.val;
        } else if ((allowed & O_OUTDIR) && opt_match(&p, "--output-dir", 1)) {
            if (!p.err) o->output_dir = p.val;
        } else if ((allowed & O_INPUT) && (opt_match(&p, "--input", 1) || opt_match(&p, "-i", 1))) {
            if (p.err) break;
            if (o->n_inputs == MAX_INPUTS) return usage_error("too many --input options (max %d)", MAX_INPUTS);
            o->inputs[o->n_inputs++] = p.val;
        } else if (a[0] == '-' && a[1] != 0) {
            return usage_error("unknown option '%s' for '%s'", a, argv[1]);
        } else {
            if (o->n_pos == npos) return usage_error("unexpected argument '%s'", a);
            o->pos[o->n_pos++] = a;
        }
    }
    if (p.err) return p.err;
    if (o->n_pos != npos) return usage_error("'%s' needs %d argument%s", argv[1], npos, npos == 1 ? "" : "s");
    return 0;
}

/* ---------------------------------------------------------------- shared bits */

static void print_info_line(const ert_tensor_info *t) {
    char sh[160];
    if (t->dtype == ERT_DTYPE_UNDEFINED) { /* outputs of a graph without value_info */
        printf("  %-24s (dtype and shape inferred when a session is created)\n", t->name ? t->name : "?");
        return;
    }
    printf("  %-24s %-5s %s\n", t->name ? t->name : "?", ert_dtype_name(t->dtype), cli_shape_str(sh, sizeof sh, t->ndim, t->dims));
}

static void json_info(const ert_tensor_info *t) {
    printf("{\"name\": ");
    cli_json_str(stdout, t->name);
    if (t->dtype == ERT_DTYPE_UNDEFINED) {
        printf(", \"dtype\": null, \"shape\": null}");
        return;
    }
    /* dynamic dims are -1 */
    printf(", \"dtype\": \"%s\", \"shape\": [", ert_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim; d++) printf("%s%lld", d ? ", " : "", (long long)t->dims[d]);
    printf("]}");
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
    common_opts o = {.batch = 1, .threads = 1};
    int rc = parse_opts(argc, argv, O_BATCH | O_THREADS | O_JSON, 1, &o);
    if (rc) return rc;
    ert_context *ctx = make_context();
    if (!ctx) return 1;
    ert_model *m = NULL;
    if ((rc = load_model(ctx, o.pos[0], &m)) != 0) goto out;

    int nn = ert_model_n_nodes(m);
    op_count *hist = calloc((size_t)(nn > 0 ? nn : 1), sizeof *hist);
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
    so.batch = (int)o.batch;
    so.n_threads = (int)o.threads;
    ert_memory_report mem;
    memset(&mem, 0, sizeof mem);
    ert_status pst = ert_session_plan(m, &so, &mem);

    int ni = ert_model_n_inputs(m), no = ert_model_n_outputs(m);
    ert_tensor_info t;
    if (o.json) {
        printf("{\"model\": ");
        cli_json_str(stdout, o.pos[0]);
        printf(", \"inputs\": [");
        for (int i = 0; i < ni; i++)
            if (ert_model_input_info(m, i, &t) == ERT_OK) printf("%s", i ? ", " : ""), json_info(&t);
        printf("], \"outputs\": [");
        for (int i = 0; i < no; i++)
            if (ert_model_output_info(m, i, &t) == ERT_OK) printf("%s", i ? ", " : ""), json_info(&t);
        printf("], \"nodes\": %d, \"parameters\": %lld, \"ops\": {", nn, (long long)ert_model_n_params(m));
        for (int k = 0; k < nh; k++) {
            printf("%s", k ? ", " : "");
            cli_json_str(stdout, hist[k].op);
            printf(": %d", hist[k].n);
        }
        printf("}, \"batch\": %ld, \"threads\": %ld, \"arena\": ", o.batch, o.threads);
        if (pst == ERT_OK)
            json_memory(&mem);
        else
            printf("null, \"plan_error\": "), cli_json_str(stdout, ert_last_error(ctx));
        printf("}\n");
    } else {
        printf("model: %s\n", o.pos[0]);
        printf("inputs (%d):\n", ni);
        for (int i = 0; i < ni; i++)
            if (ert_model_input_info(m, i, &t) == ERT_OK) print_info_line(&t);
        printf("outputs (%d):\n", no);
        for (int i = 0; i < no; i++)
            if (ert_model_output_info(m, i, &t) == ERT_OK) print_info_line(&t);
        printf("nodes: %d\nparameters: %lld\nops:", nn, (long long)ert_model_n_params(m));
        for (int k = 0; k < nh; k++) printf("%s %s x%d", k ? "," : "", hist[k].op, hist[k].n);
        printf("\n");
        if (pst == ERT_OK) {
            printf("arena plan (batch %ld, %ld thread%s, cpu):\n", o.batch, o.threads, o.threads == 1 ? "" : "s");
            print_memory(&mem);
        }
    }
    fflush(stdout);
    free(hist);
    if (pst != ERT_OK) rc = lib_error(ctx, pst, "cannot plan a session");
out:
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- run */

typedef struct loaded_input {
    const char *name; /* model's input name */
    const char *path;
    ert_dtype dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    void *data;       /* malloc'd (npy) or ert_free'd (pb) */
    size_t bytes;
    int from_pb;
    const char *file_name; /* tensor name inside a .pb (in data), or NULL */
} loaded_input;

static int is_npy(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char m[6] = {0};
    size_t n = fread(m, 1, 6, f);
    fclose(f);
    return n == 6 && memcmp(m, "\x93NUMPY", 6) == 0;
}

static int load_input_file(ert_context *ctx, const char *path, loaded_input *in) {
    /* fopen first for a plain message on a missing file */
    FILE *f = fopen(path, "rb");
    if (!f) return error("input file '%s': %s", path, strerror(errno));
    fclose(f);
    if (is_npy(path)) {
        npy_array a;
        char err[512];
        if (npy_read_file(path, &a, err, sizeof err) != 0) return error("input %s", err);
        in->dtype = a.dtype;
        in->ndim = a.ndim;
        memcpy(in->dims, a.dims, sizeof a.dims);
        in->data = a.data;
        in->bytes = a.bytes;
        return 0;
    }
    ert_tensor_info info;
    void *data = NULL;
    size_t bytes = 0;
    ert_status st = ert_tensor_load_pb(ctx, path, &info, &data, &bytes);
    if (st != ERT_OK) {
        char what[512];
        snprintf(what, sizeof what, "input '%s' is neither .npy nor a readable TensorProto .pb", path);
        return lib_error(ctx, st, what);
    }
    in->dtype = info.dtype;
    in->ndim = info.ndim;
    memcpy(in->dims, info.dims, sizeof info.dims);
    in->data = data;
    in->bytes = bytes;
    in->from_pb = 1;
    in->file_name = info.name && *info.name ? info.name : NULL;
    return 0;
}

static void free_input(loaded_input *in) {
    if (in->from_pb)
        ert_free(in->data);
    else
        free(in->data);
    in->data = NULL;
}

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

static int cmd_run(int argc, char **argv) {
    common_opts o = {.batch = 0, .threads = 1};
    int rc = parse_opts(argc, argv, O_BATCH | O_THREADS | O_JSON | O_INPUT | O_OUTDIR, 1, &o);
    if (rc) return rc;
    ert_context *ctx = make_context();
    if (!ctx) return 1;
    ert_model *m = NULL;
    ert_session *s = NULL;
    loaded_input ins[MAX_INPUTS];
    ert_input_shape shapes[MAX_INPUTS];
    int n_shapes = 0;
    memset(ins, 0, sizeof ins);
    if ((rc = load_model(ctx, o.pos[0], &m)) != 0) goto out;
    int nmi = ert_model_n_inputs(m);

    /* Match each --input to a model input and check what can be checked
     * before planning; shapes of dynamic inputs come from the files. */
    for (int k = 0; k < o.n_inputs; k++) {
        const char *spec = o.inputs[k], *eq = strchr(spec, '=');
        ert_tensor_info mi;
        int found = -1;
        char name[256];
        if (eq) {
            size_t nl = (size_t)(eq - spec);
            if (nl >= sizeof name) nl = sizeof name - 1;
            memcpy(name, spec, nl);
            name[nl] = 0;
            for (int i = 0; i < nmi && found < 0; i++)
                if (ert_model_input_info(m, i, &mi) == ERT_OK && strcmp(mi.name, name) == 0) found = i;
        }
        if (found >= 0) {
            ins[k].path = eq + 1;
        } else if (nmi == 1 && o.n_inputs == 1 && (!eq || access(spec, F_OK) == 0)) {
            /* one input: NAME= may be left out (and a path may contain '=') */
            found = 0;
            ins[k].path = spec;
        } else if (!eq) {
            /* a .pb names its tensor (ONNX test data does): match on that */
            ins[k].path = spec;
            if ((rc = load_input_file(ctx, spec, &ins[k])) != 0) goto out;
            for (int i = 0; i < nmi && found < 0 && ins[k].file_name; i++)
                if (ert_model_input_info(m, i, &mi) == ERT_OK && strcmp(mi.name, ins[k].file_name) == 0) found = i;
        }
        if (found < 0) {
            char names[512] = "";
            size_t nl = 0;
            for (int i = 0; i < nmi && nl < sizeof names; i++)
                if (ert_model_input_info(m, i, &mi) == ERT_OK)
                    nl += (size_t)snprintf(names + nl, sizeof names - nl, "%s%s", i ? ", " : "", mi.name);
            if (eq)
                rc = error("model has no input named '%s' (its inputs: %s)", name, names);
            else
                rc = error("--input '%s': give NAME=FILE (the model's inputs: %s)", spec, names);
            goto out;
        }
        ert_model_input_info(m, found, &mi);
        for (int j = 0; j < k; j++)
            if (strcmp(ins[j].name, mi.name) == 0) {
                rc = error("input '%s' given twice", mi.name);
                goto out;
            }
        ins[k].name = mi.name;
        if (!ins[k].data && (rc = load_input_file(ctx, ins[k].path, &ins[k])) != 0) goto out;
        /* bf16 has no numpy dtype: accept f32 files and convert */
        if (mi.dtype == ERT_DTYPE_BF16 && ins[k].dtype == ERT_DTYPE_F32) {
            size_t n = ins[k].bytes / 4;
            unsigned char *p = ins[k].data;
            for (size_t i = 0; i < n; i++) { /* in place, forward: writes stay behind reads */
                float f;
                memcpy(&f, p + 4 * i, 4);
                uint16_t h = cli_f32_to_bf16(f);
                memcpy(p + 2 * i, &h, 2);
            }
            ins[k].bytes = n * 2;
            ins[k].dtype = ERT_DTYPE_BF16;
        }
        if (ins[k].dtype != mi.dtype) {
            rc = error("input '%s' is %s, file '%s' holds %s", mi.name, ert_dtype_name(mi.dtype), ins[k].path,
                       ert_dtype_name(ins[k].dtype));
            goto out;
        }
        char s1[160], s2[160];
        int dynamic = 0, mismatch = ins[k].ndim != mi.ndim;
        for (int d = 0; d < mi.ndim && !mismatch; d++) {
            if (mi.dims[d] < 0) dynamic = 1;
            else if (mi.dims[d] != ins[k].dims[d]) mismatch = 1;
        }
        if (mismatch) {
            rc = error("input '%s' has shape %s, file '%s' holds %s", mi.name, cli_shape_str(s1, sizeof s1, mi.ndim, mi.dims),
                       ins[k].path, cli_shape_str(s2, sizeof s2, ins[k].ndim, ins[k].dims));
            goto out;
        }
        if (dynamic) {
            ert_input_shape *sh = &shapes[n_shapes++];
            memset(sh, 0, sizeof *sh);
            sh->name = mi.name;
            sh->ndim = ins[k].ndim;
            memcpy(sh->dims, ins[k].dims, sizeof sh->dims);
        }
    }
    for (int i = 0; i < nmi; i++) {
        ert_tensor_info mi;
        ert_model_input_info(m, i, &mi);
        int given = 0;
        for (int k = 0; k < o.n_inputs; k++) given |= strcmp(ins[k].name, mi.name) == 0;
        if (!given) {
            rc = error("input '%s' not given (use --input %s=FILE)", mi.name, mi.name);
            goto out;
        }
    }

    ert_session_options so = {0};
    so.batch = (int)o.batch;
    so.n_threads = (int)o.threads;
    so.input_shapes = n_shapes ? shapes : NULL;
    so.n_input_shapes = n_shapes;
    ert_status st = ert_session_create(m, &so, &s);
    if (st != ERT_OK) {
        rc = lib_error(ctx, st, "cannot create a session");
        goto out;
    }
    for (int k = 0; k < o.n_inputs; k++) {
        int idx;
        if ((st = ert_session_find_input(s, ins[k].name, &idx)) != ERT_OK ||
            (st = ert_session_set_input(s, idx, ins[k].data, ins[k].bytes)) != ERT_OK) {
            char what[300];
            snprintf(what, sizeof what, "cannot set input '%s'", ins[k].name);
            rc = lib_error(ctx, st, what);
            goto out;
        }
    }
    double t0 = cli_now();
    st = ert_session_run(s);
    double t_ms = (cli_now() - t0) * 1e3;
    if (st != ERT_OK) {
        rc = lib_error(ctx, st, "run failed");
        goto out;
    }
    if (o.output_dir && make_dirs(o.output_dir) != 0) {
        rc = error("cannot create output directory '%s': %s", o.output_dir, strerror(errno));
        goto out;
    }

    int no = ert_session_n_outputs(s);
    char(*files)[256] = calloc((size_t)(no > 0 ? no : 1), sizeof *files);
    if (!files) {
        rc = error("out of memory");
        goto out;
    }
    if (o.json) printf("{\"model\": "), cli_json_str(stdout, o.pos[0]), printf(", \"run_ms\": %.3f, \"outputs\": [", t_ms);
    else printf("ran %s in %.3f ms\n", o.pos[0], t_ms);
    for (int i = 0; i < no && !rc; i++) {
        ert_tensor_info t;
        const void *data;
        if ((st = ert_session_output_info(s, i, &t)) != ERT_OK || (st = ert_session_output_data(s, i, &data)) != ERT_OK) {
            rc = lib_error(ctx, st, "cannot read an output");
            break;
        }
        int64_t n = cli_numel(t.ndim, t.dims);
        size_t bytes = (size_t)n * ert_dtype_size(t.dtype);
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
            void *conv = NULL;
            ert_dtype wdt = t.dtype;
            const void *wdata = data;
            size_t wbytes = bytes;
            if (t.dtype == ERT_DTYPE_BF16) { /* no numpy bf16: widen to f32 */
                conv = malloc((size_t)n * 4 + 1);
                if (!conv) {
                    rc = error("out of memory");
                    break;
                }
                for (int64_t e = 0; e < n; e++) ((float *)conv)[e] = cli_bf16_to_f32(((const uint16_t *)data)[e]);
                wdt = ERT_DTYPE_F32, wdata = conv, wbytes = (size_t)n * 4;
            }
            char err[512];
            if (npy_write_file(path, wdt, t.ndim, t.dims, wdata, wbytes, err, sizeof err) != 0) rc = error("%s", err);
            free(conv);
            if (rc) break;
        }
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
            printf("}");
        } else {
            printf("  %-20s %-5s %-18s ", t.name, ert_dtype_name(t.dtype), cli_shape_str(sh, sizeof sh, t.ndim, t.dims));
            print_values(&t, data, (size_t)n);
            if (o.output_dir) printf("  -> %s", path);
            printf("\n");
        }
    }
    if (o.json && !rc) printf("]}\n");
    fflush(stdout);
    free(files);
out:
    for (int k = 0; k < o.n_inputs; k++) free_input(&ins[k]);
    ert_session_free(s);
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- convert */

static int cmd_convert(int argc, char **argv) {
    common_opts o = {0};
    int rc = parse_opts(argc, argv, O_FP16, 2, &o);
    if (rc) return rc;
    ert_context *ctx = make_context();
    if (!ctx) return 1;
    ert_model *m = NULL;
    if ((rc = load_model(ctx, o.pos[0], &m)) == 0) {
        ert_save_options so = {.weights_dtype = o.fp16 ? ERT_DTYPE_F16 : ERT_DTYPE_UNDEFINED};
        ert_status st = ert_model_save_opts(m, o.pos[1], &so);
        if (st != ERT_OK) {
            char what[600];
            snprintf(what, sizeof what, "cannot save '%s'", o.pos[1]);
            rc = lib_error(ctx, st, what);
        } else {
            struct stat sb;
            long long size = stat(o.pos[1], &sb) == 0 ? (long long)sb.st_size : -1;
            printf("wrote %s (%lld bytes, %d nodes, %lld parameters)\n", o.pos[1], size, ert_model_n_nodes(m),
                   (long long)ert_model_n_params(m));
        }
    }
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- bench */

static int cmd_bench(int argc, char **argv) {
    common_opts o = {.batch = 1, .threads = 1, .iters = 20, .warmup = 3, .device = "cpu", .precision = "f32"};
    int rc = parse_opts(argc, argv, O_BATCH | O_THREADS | O_JSON | O_DEVICE | O_ITERS | O_WARMUP | O_PRECISION | O_NO_NHWC, 1, &o);
    if (rc) return rc;
    ert_dtype prec;
    if (strcmp(o.precision, "f32") == 0) prec = ERT_DTYPE_F32;
    else if (strcmp(o.precision, "f16") == 0) prec = ERT_DTYPE_F16;
    else if (strcmp(o.precision, "bf16") == 0) prec = ERT_DTYPE_BF16;
    else return usage_error("--precision must be f32, f16 or bf16, got '%s'", o.precision);
    ert_device dev;
    if (strcmp(o.device, "cpu") == 0) dev = ERT_DEVICE_CPU;
    else if (strcmp(o.device, "cuda") == 0) dev = ERT_DEVICE_CUDA;
    else return usage_error("--device must be cpu or cuda, got '%s'", o.device);
    ert_context *ctx = make_context();
    if (!ctx) return 1;
    ert_model *m = NULL;
    ert_session *s = NULL;
    double *t = NULL;
    if ((rc = load_model(ctx, o.pos[0], &m)) != 0) goto out;
    ert_session_options so = {0};
    so.device = dev;
    so.batch = (int)o.batch;
    so.n_threads = (int)o.threads;
    so.precision = prec; /* the CPU computes in f32 whatever this says */
    if (o.no_nhwc) so.flags |= ERT_SESSION_NO_NHWC;
    if (o.nhwc) so.flags |= ERT_SESSION_NHWC;
    if (o.gemm1x1) so.flags |= ERT_SESSION_GEMM_1X1;
    if (o.conv_graph) so.flags |= ERT_SESSION_CONV_GRAPH;
    if (o.no_conv_graph) so.flags |= ERT_SESSION_NO_CONV_GRAPH;
    double create0 = cli_now();
    ert_status st = ert_session_create(m, &so, &s);
    double create_ms = (cli_now() - create0) * 1e3;
    if (st != ERT_OK) {
        if (dev == ERT_DEVICE_CUDA && (st == ERT_E_CUDA || st == ERT_E_UNSUPPORTED))
            rc = lib_error(ctx, st, "--device cuda: this build or machine has no usable CUDA backend");
        else
            rc = lib_error(ctx, st, "cannot create a session");
        goto out;
    }
    /* random inputs, fixed seed: the same numbers on every run and machine */
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
    double thr = stt.mean > 0 ? (double)o.batch * 1e3 / stt.mean : 0;
    if (o.json) {
        printf("{\"model\": ");
        cli_json_str(stdout, o.pos[0]);
        printf(", \"version\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"batch\": %ld, \"threads\": %ld, \"iters\": %ld, \"warmup\": %ld, "
               "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"mean_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, "
               "\"throughput_items_per_s\": %.3f, \"create_ms\": %.1f, \"arena_bytes\": %zu, \"cpu_fallback_nodes\": %d, \"memory\": ",
               ert_version(), o.device, o.precision, o.batch, o.threads, o.iters, o.warmup, stt.p50, stt.p90, stt.mean, stt.min, stt.max,
               thr, create_ms, mem.total_bytes, ert_session_n_cpu_fallback(s));
        json_memory(&mem);
        printf("}\n");
    } else {
        char b[64];
        printf("model: %s  device: %s  batch: %ld  threads: %ld  iters: %ld (+%ld warm-up)\n", o.pos[0], o.device, o.batch,
               o.threads, o.iters, o.warmup);
        printf("latency ms: p50 %.3f  p90 %.3f  mean %.3f  min %.3f  max %.3f\n", stt.p50, stt.p90, stt.mean, stt.min, stt.max);
        printf("throughput: %.1f items/s\n", thr);
        printf("session create: %.1f ms\n", create_ms);
        if (ert_session_n_cpu_fallback(s)) printf("cpu fallback: %d nodes (no CUDA kernel)\n", ert_session_n_cpu_fallback(s));
        printf("arena: %zu bytes (%s); activations %zu, lower bound %zu\n", mem.total_bytes,
               cli_bytes_str(b, sizeof b, mem.total_bytes), mem.activations_bytes, mem.activations_lower_bound);
    }
    fflush(stdout);
out:
    free(t);
    ert_session_free(s);
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    /* global options before the command */
    while (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--verbose") == 0)) {
        g_verbose++;
        argv[1] = argv[0];
        argv++, argc--;
    }
    if (argc < 2) return usage_error("no command given");
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("edgert %s (library %s)\n", ERT_VERSION_STRING, ert_version());
        return 0;
    }
    if (strcmp(cmd, "info") == 0) return cmd_info(argc, argv);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc, argv);
    if (strcmp(cmd, "convert") == 0) return cmd_convert(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc, argv);
#ifdef EDGERT_HAVE_TRAIN_CMD
    if (strcmp(cmd, "train") == 0) return edgert_cmd_train(argc, argv);
#endif
    return usage_error(cmd[0] == '-' ? "unknown option '%s'" : "unknown command '%s'", cmd);
}
