/*
 * bench_cpu_resnet18 - CPU latency of a ResNet-18-shaped network built with
 * the C builder API (random weights, fixed seed), batch 1, 224x224, f32.
 *
 *   bench_cpu_resnet18 [--iters N] [--warmup N] [--threads 1,2] [--batch N]
 *                      [--json FILE] [--save MODEL.ert] [--dump-weights FILE]
 *
 * Network (torchvision resnet18 with BatchNorm folded into the convs, so every
 * conv has a bias and there is no BN node; x is (N, 3, 224, 224), NCHW):
 *   conv1 7x7/2 64 + relu            (N, 64, 112, 112)
 *   maxpool 3x3/2 pad 1              (N, 64, 56, 56)
 *   layer1..4: 2 BasicBlocks each, 64/128/256/512 channels, the first block
 *     of layers 2-4 has stride 2 and a 1x1/2 downsample conv on the skip path:
 *     y = relu(conv3x3(relu(conv3x3(x))) + skip(x))
 *                                    (N, 512, 7, 7)
 *   global average pool, flatten, fc 1000   (N, 1000)
 * Weight names follow torchvision ("layer2.0.downsample.0.weight"), so
 * bench/export_resnet18_onnx.py can rebuild the same network as ONNX from the
 * --dump-weights file.
 *
 * --dump-weights format (little-endian): "ERTW" u32 version=1 u32 count, then
 * per tensor: u32 name_len, name bytes, u32 ndim, i64 dims[ndim], f32 data.
 */
#define _POSIX_C_SOURCE 200809L
#include "edgert.h"

#include "cli_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS_LIST 8

typedef struct net_builder {
    ert_builder *b;
    cli_rng rng;
    FILE *dump;       /* --dump-weights, or NULL */
    uint32_t n_dumped;
    ert_status st;    /* first failure; later calls do nothing */
} net_builder;

static void dump_tensor(net_builder *nb, const char *name, int ndim, const int64_t *dims, const float *w, int64_t n) {
    uint32_t nl = (uint32_t)strlen(name), nd = (uint32_t)ndim;
    fwrite(&nl, 4, 1, nb->dump);
    fwrite(name, 1, nl, nb->dump);
    fwrite(&nd, 4, 1, nb->dump);
    fwrite(dims, 8, (size_t)ndim, nb->dump);
    fwrite(w, 4, (size_t)n, nb->dump);
    nb->n_dumped++;
}

/* A weight uniform in +-sqrt(6/fan_in) (He), or a small bias when fan_in is 0. */
static int32_t weight(net_builder *nb, const char *name, int ndim, const int64_t *dims, int64_t fan_in) {
    int32_t id = -1;
    if (nb->st != ERT_OK) return id;
    int64_t n = cli_numel(ndim, dims);
    float *w = malloc((size_t)n * sizeof *w);
    if (!w) {
        nb->st = ERT_E_NOMEM;
        return id;
    }
    float a = fan_in > 0 ? sqrtf(6.0f / (float)fan_in) : 0.05f;
    for (int64_t i = 0; i < n; i++) w[i] = cli_rng_uniform(&nb->rng, -a, a);
    nb->st = ert_builder_weight(nb->b, name, ERT_DTYPE_F32, ndim, dims, w, &id);
    if (nb->dump) dump_tensor(nb, name, ndim, dims, w, n);
    free(w);
    return id;
}

/* conv (BN folded: with bias), optional relu. */
static int32_t conv(net_builder *nb, const char *name, int32_t x, int cin, int cout, int k, int stride, int relu) {
    char wn[96], bn[96];
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    int64_t wd[4] = {cout, cin, k, k}, bd[1] = {cout};
    int32_t w = weight(nb, wn, 4, wd, (int64_t)cin * k * k);
    int32_t b = weight(nb, bn, 1, bd, 0);
    int32_t y = -1;
    if (nb->st == ERT_OK) nb->st = ert_builder_conv2d(nb->b, x, w, b, stride, k / 2, 1, 1, &y);
    if (relu && nb->st == ERT_OK) nb->st = ert_builder_unary(nb->b, "Relu", y, &y);
    return y;
}

static int32_t basic_block(net_builder *nb, const char *name, int32_t x, int cin, int cout, int stride) {
    char n1[64], n2[64], nd[64];
    snprintf(n1, sizeof n1, "%s.conv1", name);
    snprintf(n2, sizeof n2, "%s.conv2", name);
    snprintf(nd, sizeof nd, "%s.downsample.0", name);
    int32_t h = conv(nb, n1, x, cin, cout, 3, stride, 1);
    h = conv(nb, n2, h, cout, cout, 3, 1, 0);
    int32_t skip = (stride != 1 || cin != cout) ? conv(nb, nd, x, cin, cout, 1, stride, 0) : x;
    int32_t y = -1;
    if (nb->st == ERT_OK) nb->st = ert_builder_binary(nb->b, "Add", h, skip, &y);
    if (nb->st == ERT_OK) nb->st = ert_builder_unary(nb->b, "Relu", y, &y);
    return y;
}

static ert_status build_resnet18(ert_context *ctx, int batch, FILE *dump, ert_model **out) {
    net_builder nb = {0};
    nb.dump = dump;
    cli_rng_seed(&nb.rng, 18);
    if ((nb.st = ert_builder_create(ctx, &nb.b)) != ERT_OK) return nb.st;
    if (dump) {
        uint32_t hdr[3] = {0, 1, 0};
        memcpy(hdr, "ERTW", 4);
        fwrite(hdr, 4, 3, dump); /* count patched at the end */
    }
    int64_t in_dims[4] = {batch, 3, 224, 224};
    int32_t x = -1, h;
    nb.st = ert_builder_input(nb.b, "input", ERT_DTYPE_F32, 4, in_dims, &x);
    h = conv(&nb, "conv1", x, 3, 64, 7, 2, 1);
    if (nb.st == ERT_OK) nb.st = ert_builder_maxpool2d(nb.b, h, 3, 2, 1, &h);
    static const int chans[4] = {64, 128, 256, 512};
    int cin = 64;
    for (int s = 0; s < 4; s++)
        for (int k = 0; k < 2; k++) {
            char name[32];
            snprintf(name, sizeof name, "layer%d.%d", s + 1, k);
            h = basic_block(&nb, name, h, cin, chans[s], (k == 0 && s > 0) ? 2 : 1);
            cin = chans[s];
        }
    if (nb.st == ERT_OK) nb.st = ert_builder_unary(nb.b, "GlobalAveragePool", h, &h);
    if (nb.st == ERT_OK) nb.st = ert_builder_unary(nb.b, "Flatten", h, &h);
    int64_t fw[2] = {1000, 512}, fb[1] = {1000};
    int32_t w = weight(&nb, "fc.weight", 2, fw, 512), b = weight(&nb, "fc.bias", 1, fb, 0);
    if (nb.st == ERT_OK) nb.st = ert_builder_linear(nb.b, h, w, b, &h);
    if (nb.st == ERT_OK) nb.st = ert_builder_output(nb.b, h, "logits");
    if (nb.st == ERT_OK) nb.st = ert_builder_finish(nb.b, out);
    ert_builder_free(nb.b);
    if (dump) {
        fseek(dump, 8, SEEK_SET);
        fwrite(&nb.n_dumped, 4, 1, dump);
    }
    return nb.st;
}

/* ---------------------------------------------------------------- host info */

static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        /* x86: "model name", arm64: often only "CPU part"; take the first found */
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0 || strncmp(line, "Hardware", 8) == 0) {
            char *c = strchr(line, ':');
            if (!c) continue;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            c[strcspn(c, "\n")] = 0;
            snprintf(out, n, "%s", c);
            break;
        }
    }
    fclose(f);
}

typedef struct result {
    int threads;
    cli_stats st;
    ert_memory_report mem;
    double create_ms;
    float out0[4];
} result;

static int bench_one(ert_context *ctx, const ert_model *m, int batch, int threads, int iters, int warmup, result *r) {
    ert_session_options so = {0};
    so.batch = batch;
    so.n_threads = threads;
    ert_session *s = NULL;
    double t0 = cli_now();
    ert_status st = ert_session_create(m, &so, &s);
    r->create_ms = (cli_now() - t0) * 1e3;
    if (st != ERT_OK) {
        fprintf(stderr, "bench: session (%d threads): %s\n  %s\n", threads, ert_status_str(st), ert_last_error(ctx));
        return -1;
    }
    r->threads = threads;
    ert_session_memory(s, &r->mem);
    float *in = NULL;
    ert_tensor_info ti;
    ert_session_input_info(s, 0, &ti);
    ert_session_input_data(s, 0, (void **)&in);
    cli_rng rng;
    cli_rng_seed(&rng, 224);
    int64_t n = cli_numel(ti.ndim, ti.dims);
    for (int64_t i = 0; i < n; i++) in[i] = cli_rng_uniform(&rng, -1, 1);
    double *t = malloc(sizeof *t * (size_t)iters);
    if (!t) {
        ert_session_free(s);
        return -1;
    }
    int tty = isatty(STDERR_FILENO); /* progress only for people watching */
    for (int k = 0; k < warmup + iters; k++) {
        double a = cli_now();
        st = ert_session_run(s);
        double b = cli_now();
        if (st != ERT_OK) {
            fprintf(stderr, "bench: run: %s\n  %s\n", ert_status_str(st), ert_last_error(ctx));
            free(t);
            ert_session_free(s);
            return -1;
        }
        if (k >= warmup) t[k - warmup] = (b - a) * 1e3;
        if (tty) fprintf(stderr, "\r  %d thread%s: %d/%d", threads, threads > 1 ? "s" : "", k + 1, warmup + iters);
    }
    if (tty) fprintf(stderr, "\r\033[K");
    const float *out = NULL;
    ert_session_output_data(s, 0, (const void **)&out);
    if (out) memcpy(r->out0, out, sizeof r->out0);
    r->st = cli_stats_compute(t, iters);
    free(t);
    ert_session_free(s);
    return 0;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_cpu_resnet18 [--iters N] [--warmup N] [--threads 1,2] [--batch N]\n"
                    "                          [--json FILE] [--save MODEL.ert] [--dump-weights FILE]\n");
    return 2;
}

int main(int argc, char **argv) {
    long iters = 10, warmup = 2, batch = 1;
    int threads[MAX_THREADS_LIST] = {1, 2}, n_threads = 2;
    const char *json = NULL, *save = NULL, *dump_path = NULL;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--iters") == 0 && v) {
            if (cli_parse_int(v, 1, 1000000, &iters)) return usage();
        } else if (strcmp(a, "--warmup") == 0 && v) {
            if (cli_parse_int(v, 0, 1000000, &warmup)) return usage();
        } else if (strcmp(a, "--batch") == 0 && v) {
            if (cli_parse_int(v, 1, 4096, &batch)) return usage();
        } else if (strcmp(a, "--threads") == 0 && v) {
            n_threads = 0;
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                long t;
                if (n_threads == MAX_THREADS_LIST || cli_parse_int(tok, 1, 256, &t)) return usage();
                threads[n_threads++] = (int)t;
            }
            if (!n_threads) return usage();
        } else if (strcmp(a, "--json") == 0 && v) {
            json = v;
        } else if (strcmp(a, "--save") == 0 && v) {
            save = v;
        } else if (strcmp(a, "--dump-weights") == 0 && v) {
            dump_path = v;
        } else {
            return usage();
        }
    }

    ert_context *ctx = NULL;
    ert_model *m = NULL;
    int rc = 1;
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    FILE *dump = NULL;
    if (dump_path && !(dump = fopen(dump_path, "wb"))) {
        perror(dump_path);
        goto out;
    }
    double t0 = cli_now();
    ert_status st = build_resnet18(ctx, (int)batch, dump, &m);
    double build_ms = (cli_now() - t0) * 1e3;
    if (dump && fclose(dump) != 0) st = ERT_E_IO;
    if (st != ERT_OK) {
        fprintf(stderr, "bench: building resnet18: %s\n  %s\n", ert_status_str(st), ert_last_error(ctx));
        goto out;
    }
    printf("resnet18 (C builder, random weights): %d nodes, %lld parameters, built in %.1f ms\n", ert_model_n_nodes(m),
           (long long)ert_model_n_params(m), build_ms);
    if (save) {
        if ((st = ert_model_save(m, save)) != ERT_OK) {
            fprintf(stderr, "bench: saving %s: %s\n  %s\n", save, ert_status_str(st), ert_last_error(ctx));
            goto out;
        }
        printf("saved %s\n", save);
    }

    result res[MAX_THREADS_LIST];
    memset(res, 0, sizeof res);
    for (int k = 0; k < n_threads; k++)
        if (bench_one(ctx, m, (int)batch, threads[k], (int)iters, (int)warmup, &res[k]) != 0) goto out;

    printf("batch %ld, 224x224 f32, %ld iterations after %ld warm-up\n", batch, iters, warmup);
    printf("%-8s %10s %10s %10s %10s %12s %14s %14s %14s\n", "threads", "p50 ms", "p90 ms", "mean ms", "min ms", "items/s",
           "arena bytes", "act. peak", "act. lower bd");
    for (int k = 0; k < n_threads; k++) {
        result *r = &res[k];
        printf("%-8d %10.2f %10.2f %10.2f %10.2f %12.2f %14zu %14zu %14zu\n", r->threads, r->st.p50, r->st.p90, r->st.mean,
               r->st.min, r->st.mean > 0 ? (double)batch * 1e3 / r->st.mean : 0, r->mem.total_bytes, r->mem.activations_bytes,
               r->mem.activations_lower_bound);
    }

    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            perror(json);
            goto out;
        }
        char date[64], cpu[256];
        time_t now = time(NULL);
        struct tm tmv;
        gmtime_r(&now, &tmv);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
        cpu_model(cpu, sizeof cpu);
        struct utsname u;
        if (uname(&u) != 0) memset(&u, 0, sizeof u);
        char un[600];
        snprintf(un, sizeof un, "%s %s %s %s", u.sysname, u.release, u.version, u.machine);
        fprintf(f, "{\n  \"benchmark\": \"resnet18_cpu\",\n  \"runtime\": \"edgert\",\n  \"version\": \"%s\",\n  \"date\": \"%s\",\n",
                ert_version(), date);
        fprintf(f, "  \"host\": {\"uname\": ");
        cli_json_str(f, un);
        fprintf(f, ", \"cpu\": ");
        cli_json_str(f, cpu);
        fprintf(f, ", \"online_cpus\": %ld},\n  \"command\": ", sysconf(_SC_NPROCESSORS_ONLN));
        char cmd[2048];
        size_t k = 0;
        cmd[0] = 0;
        for (int i = 0; i < argc && k < sizeof cmd; i++)
            k += (size_t)snprintf(cmd + k, sizeof cmd - k, "%s%s", i ? " " : "", argv[i]);
        cli_json_str(f, cmd);
        fprintf(f, ",\n  \"model\": \"resnet18 (C builder, BN folded, random weights seed 18)\",\n  \"nodes\": %d,\n"
                   "  \"parameters\": %lld,\n  \"batch\": %ld,\n  \"input\": [%ld, 3, 224, 224],\n  \"iters\": %ld,\n"
                   "  \"warmup\": %ld,\n  \"results\": [",
                ert_model_n_nodes(m), (long long)ert_model_n_params(m), batch, batch, iters, warmup);
        for (int j = 0; j < n_threads; j++) {
            result *r = &res[j];
            fprintf(f, "%s\n    {\"threads\": %d, \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"mean_ms\": %.4f, \"min_ms\": %.4f, "
                       "\"max_ms\": %.4f, \"throughput_items_per_s\": %.3f, \"session_create_ms\": %.3f, "
                       "\"arena_bytes\": %zu, \"weights_bytes\": %zu, \"activations_bytes\": %zu, "
                       "\"activations_lower_bound\": %zu, \"workspace_bytes\": %zu, \"io_bytes\": %zu, "
                       "\"logits_first\": [%.6g, %.6g, %.6g, %.6g]}",
                    j ? "," : "", r->threads, r->st.p50, r->st.p90, r->st.mean, r->st.min, r->st.max,
                    r->st.mean > 0 ? (double)batch * 1e3 / r->st.mean : 0, r->create_ms, r->mem.total_bytes,
                    r->mem.weights_bytes, r->mem.activations_bytes, r->mem.activations_lower_bound,
                    r->mem.workspace_bytes, r->mem.io_bytes, r->out0[0], r->out0[1], r->out0[2], r->out0[3]);
        }
        fprintf(f, "\n  ]\n}\n");
        if (fclose(f) != 0) {
            perror(json);
            goto out;
        }
        printf("wrote %s\n", json);
    }
    rc = 0;
out:
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}
