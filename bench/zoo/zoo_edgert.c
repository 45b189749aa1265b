/* zoo_edgert: the edgert side of the zoo benchmark (bench/zoo/run_zoo_gpu.py)
 * for one model, in one process.
 *
 *   zoo_edgert MODEL INPUT.f32 OUT_DIR ITERS WARMUP [--input-dims 1xCxHxW] [--plan-cache DIR] [--profile]
 *              [--flags N] CONFIG...
 *
 * CONFIG is PRECISION:BATCH[+][f][d] (f32:1+, f16:8, f16:1f, f16:8d, ...; "+":
 * create the session a second time and report both create times; "f":
 * ERT_CREATE_FAST, heuristics only; "d": device I/O, ERT_SESSION_DEVICE_INPUTS
 * | ERT_SESSION_DEVICE_OUTPUTS: the input is uploaded once and the output left
 * on the GPU, so the timed run is the graph replay alone, as PyTorch's replay
 * of a graph whose input and output live on the GPU). With --plan-cache the sessions use that folder
 * (ert_session_options.plan_cache_dir): give a fresh one and the first create
 * measures and writes the file, the second ("+") takes its answers from it,
 * as a second process would (minus CUDA's own start-up). INPUT.f32 holds input 0 at
 * batch 1 as raw f32; a larger batch repeats it. Per config, one JSON line on
 * stdout: create time of a first and (with "+") a second ert_session_create
 * in this process (-1: not measured; the first config's first create also
 * pays for CUDA, cuBLAS and cuDNN start-up), p50/p90 of ert_session_run (host clock; the run copies the
 * input in, replays the CUDA graph, copies outputs out and synchronises),
 * arena bytes, nodes on the CPU fallback, ert_create_stats of both creates
 * (mode, plan cache state, measurements made, answers from the cache); output 0 of the batch-1 run is
 * written to OUT_DIR/out_PRECISION_bBATCH.f32 for the check against PyTorch.
 * With --profile the line also carries one ert_session_profile run (eager,
 * node by node, device time per node): "profile_total_ms", the time per op
 * type ("profile_ops": [op, ms, nodes], largest first) and the 10 slowest
 * nodes ("profile_top": [node, op, ms]).
 * --flags N ORs ERT_SESSION_* flags N (decimal) into every session of the
 * configs after it (e.g. 8192, ERT_SESSION_EXACT_GELU, for an A/B run).
 * A config that fails prints {"error": ...} and the next one runs. */
#include "edgert.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* nearest rank, as bench/gpu/bench_gpu.py */
static double pct(const double *s, int n, double p) {
    int k = (int)ceil(p / 100.0 * n) - 1;
    return s[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static const char *g_io = "host"; /* the config being run: "host" or "device" I/O */

static void json_err(const char *prec, int batch, const char *what, ert_context *ctx) {
    printf("{\"precision\": \"%s\", \"batch\": %d, \"io\": \"%s\", \"error\": \"%s: ", prec, batch, g_io, what);
    for (const char *c = ert_last_error(ctx); *c; c++)
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if ((unsigned char)*c >= 32) putchar(*c);
    printf("\"}\n");
    fflush(stdout);
}

/* Input 0's shape at batch 1 when the model leaves more than the batch dim
 * dynamic (Ultralytics' dynamic=True export): --input-dims 1x3x640x640. */
static ert_input_shape g_dims;
static const char *g_plan_dir;
static bool g_profile;
static unsigned g_flags; /* --flags */

static void json_s(const char *v) {
    putchar('"');
    for (const char *c = v ? v : ""; *c; c++)
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if ((unsigned char)*c >= 32) putchar(*c);
    putchar('"');
}

typedef struct op_sum {
    const char *op;
    double ms;
    int n;
} op_sum;

static int cmp_sum(const void *a, const void *b) {
    double x = ((const op_sum *)a)->ms, y = ((const op_sum *)b)->ms;
    return (x < y) - (x > y);
}

static int cmp_entry(const void *a, const void *b) {
    double x = ((const ert_profile_entry *)a)->ms, y = ((const ert_profile_entry *)b)->ms;
    return (x < y) - (x > y);
}

/* Two profiling runs (the first warms up), the second summarised as JSON
 * members after the line's others. */
static void print_profile(ert_session *s) {
    int n = 0;
    if (ert_session_profile(s, NULL, 0, &n) != ERT_OK || n <= 0) return;
    ert_profile_entry *e = calloc((size_t)n, sizeof *e);
    op_sum *sum = calloc((size_t)n, sizeof *sum);
    if (!e || !sum || ert_session_profile(s, e, n, &n) != ERT_OK) {
        free(e), free(sum);
        return;
    }
    int ns = 0;
    double total = 0;
    for (int k = 0; k < n; k++) {
        total += e[k].ms;
        int j = 0;
        while (j < ns && strcmp(sum[j].op, e[k].op)) j++;
        if (j == ns) sum[ns++] = (op_sum){e[k].op, 0, 0};
        sum[j].ms += e[k].ms;
        sum[j].n++;
    }
    qsort(sum, (size_t)ns, sizeof *sum, cmp_sum);
    qsort(e, (size_t)n, sizeof *e, cmp_entry);
    printf(", \"profile_total_ms\": %.4f, \"profile_nodes\": %d, \"profile_ops\": [", total, n);
    for (int j = 0; j < ns; j++) {
        printf("%s[", j ? ", " : "");
        json_s(sum[j].op);
        printf(", %.4f, %d]", sum[j].ms, sum[j].n);
    }
    printf("], \"profile_top\": [");
    for (int k = 0; k < n && k < 10; k++) {
        printf("%s[", k ? ", " : "");
        json_s(e[k].node);
        printf(", ");
        json_s(e[k].op);
        printf(", %.4f]", e[k].ms);
    }
    printf("]");
    free(e), free(sum);
}

static const char *cache_str(ert_plan_cache_state st) {
    return st == ERT_PLAN_CACHE_USED ? "used" : st == ERT_PLAN_CACHE_WRITTEN ? "written"
         : st == ERT_PLAN_CACHE_NOT_WRITTEN ? "not_written" : "off";
}

static void one(ert_context *ctx, ert_model *m, const float *x1, size_t x1_n, const char *out_dir, int iters,
                int warmup, const char *prec, int batch, bool second, bool fast, bool dev_io) {
    ert_session_options o = {.device = ERT_DEVICE_CUDA, .batch = batch,
                             .flags = g_flags | (dev_io ? ERT_SESSION_DEVICE_INPUTS | ERT_SESSION_DEVICE_OUTPUTS : 0u),
                             .precision = strcmp(prec, "f16") == 0 ? ERT_DTYPE_F16 : ERT_DTYPE_F32,
                             .plan_cache_dir = g_plan_dir, .create_mode = fast ? ERT_CREATE_FAST : ERT_CREATE_TUNED};
    ert_create_stats cs[2];
    memset(cs, 0, sizeof cs);
    g_io = dev_io ? "device" : "host";
    ert_input_shape is = g_dims;
    if (is.ndim > 0) {
        is.dims[0] = batch;
        o.input_shapes = &is;
        o.n_input_shapes = 1;
    }
    ert_session *s = NULL;
    double t0 = now_ms();
    if (ert_session_create(m, &o, &s) != ERT_OK) {
        json_err(prec, batch, "create", ctx);
        return;
    }
    double c1 = now_ms() - t0, c2 = -1;
    ert_session_create_stats(s, &cs[0]);
    if (batch == 1 && second) { /* creates cost device time: the second only where asked */
        ert_session_free(s);
        t0 = now_ms();
        if (ert_session_create(m, &o, &s) != ERT_OK) {
            json_err(prec, batch, "create", ctx);
            return;
        }
        c2 = now_ms() - t0;
        ert_session_create_stats(s, &cs[1]);
    }
    ert_tensor_info ii, oi;
    ert_session_input_info(s, 0, &ii);
    ert_session_output_info(s, 0, &oi);
    size_t in_n = 1, out_n = 1;
    for (int d = 0; d < ii.ndim; d++) in_n *= (size_t)ii.dims[d];
    for (int d = 0; d < oi.ndim; d++) out_n *= (size_t)oi.dims[d];
    float *in = malloc(in_n * sizeof *in), *out = malloc(out_n * sizeof *out);
    double *t = malloc((size_t)(iters > 0 ? iters : 1) * sizeof *t);
    for (size_t i = 0; in && i < in_n; i++) in[i] = x1[i % x1_n];
    if (!in || !out || !t || in_n % x1_n) {
        free(in), free(out), free(t);
        ert_session_free(s);
        printf("{\"precision\": \"%s\", \"batch\": %d, \"error\": \"input size %zu is not a multiple of %zu\"}\n", prec,
               batch, in_n, x1_n);
        return;
    }
    if (ert_session_set_input(s, 0, in, in_n * sizeof *in) != ERT_OK || ert_session_sync_inputs(s) != ERT_OK ||
        ert_session_run(s) != ERT_OK ||
        ert_session_get_output(s, 0, out, out_n * sizeof *out) != ERT_OK) {
        json_err(prec, batch, "run", ctx);
        goto done;
    }
    if (batch == 1) {
        char path[4096];
        snprintf(path, sizeof path, "%s/out_%s_b%d%s%s.f32", out_dir, prec, batch, fast ? "_fast" : "",
                 dev_io ? "_dev" : "");
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(out, sizeof *out, out_n, f);
            fclose(f);
        }
    }
    for (int k = 0; k < warmup + iters; k++) {
        double a = now_ms();
        if (ert_session_run(s) != ERT_OK) {
            json_err(prec, batch, "run", ctx);
            goto done;
        }
        if (k >= warmup) t[k - warmup] = now_ms() - a;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_d);
    ert_memory_report mem;
    ert_session_memory(s, &mem);
    printf("{\"precision\": \"%s\", \"batch\": %d, \"io\": \"%s\", \"create_mode\": \"%s\", \"create_first_ms\": %.1f, "
           "\"create_second_ms\": %.1f, \"create_first_plan_cache\": \"%s\", \"create_first_searches\": %d, "
           "\"create_second_plan_cache\": \"%s\", \"create_second_searches\": %d, \"create_second_cached\": %d, "
           "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"arena_bytes\": %zu, \"weights_bytes\": %zu, \"activations_bytes\": %zu, "
           "\"cpu_fallback_nodes\": %d, \"error\": null",
           prec, batch, dev_io ? "device" : "host", fast ? "fast" : "tuned", c1, c2, cache_str(cs[0].plan_cache), cs[0].n_searches,
           cache_str(cs[1].plan_cache), cs[1].n_searches, cs[1].n_cached, pct(t, iters, 50), pct(t, iters, 90),
           mem.total_bytes, mem.weights_bytes, mem.activations_bytes, ert_session_n_cpu_fallback(s));
    /* where each create's time went (ert_create_stats) */
    for (int k = 0; k < 2; k++)
        printf(", \"create_%s_phases\": {\"init_ms\": %.1f, \"graph_ms\": %.1f, \"upload_ms\": %.1f, \"bind_ms\": %.1f, "
               "\"measure_ms\": %.1f, \"finalize_ms\": %.1f}",
               k ? "second" : "first", cs[k].init_ms, cs[k].graph_ms, cs[k].upload_ms, cs[k].bind_ms, cs[k].measure_ms,
               cs[k].finalize_ms);
    if (g_profile) print_profile(s);
    printf("}\n");
    fflush(stdout);
done:
    free(in), free(out), free(t);
    ert_session_free(s);
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: zoo_edgert MODEL INPUT.f32 OUT_DIR ITERS WARMUP PRECISION:BATCH...\n");
        return 2;
    }
    int iters = atoi(argv[4]), warmup = atoi(argv[5]);
    if (iters < 1) iters = 1;
    ert_context *ctx = NULL;
    ert_model *m = NULL;
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    FILE *f = fopen(argv[2], "rb");
    float *x1 = NULL;
    long n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f) / 4) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (x1 = malloc((size_t)n * 4)) && fread(x1, 4, (size_t)n, f) != (size_t)n)
        n = 0;
    if (f) fclose(f);
    if (n <= 0) {
        fprintf(stderr, "zoo_edgert: cannot read %s\n", argv[2]);
        return 1;
    }
    if (ert_model_load_file(ctx, argv[1], &m) != ERT_OK) {
        json_err("-", 0, "load", ctx);
        return 1;
    }
    for (int i = 6; i < argc; i++) {
        if (!strcmp(argv[i], "--input-dims") && i + 1 < argc) {
            ert_tensor_info ti;
            const char *p = argv[++i];
            if (ert_model_input_info(m, 0, &ti) != ERT_OK) continue;
            g_dims.name = ti.name;
            for (g_dims.ndim = 0; *p && g_dims.ndim < ERT_MAX_DIMS; g_dims.ndim++) {
                char *end;
                g_dims.dims[g_dims.ndim] = strtoll(p, &end, 10);
                p = *end == 'x' ? end + 1 : end + strlen(end);
            }
            continue;
        }
        if (!strcmp(argv[i], "--profile")) {
            g_profile = true;
            continue;
        }
        if (!strcmp(argv[i], "--plan-cache") && i + 1 < argc) {
            g_plan_dir = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--flags") && i + 1 < argc) {
            g_flags = (unsigned)strtoul(argv[++i], NULL, 10);
            continue;
        }
        char prec[8] = {0}, flags[4] = {0};
        int batch = 1;
        if (sscanf(argv[i], "%7[^:]:%d%3[+fd]", prec, &batch, flags) < 2 || batch < 1) {
            fprintf(stderr, "zoo_edgert: bad config '%s'\n", argv[i]);
            continue;
        }
        one(ctx, m, x1, (size_t)n, argv[3], iters, warmup, prec, batch, strchr(flags, '+') != NULL,
            strchr(flags, 'f') != NULL, strchr(flags, 'd') != NULL);
    }
    free(x1);
    ert_model_free(m);
    ert_context_free(ctx);
    return 0;
}
