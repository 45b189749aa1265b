/* Model load time and host memory: `bench_load MODEL [--iters N] [--json FILE]`.
 *
 * warm: the file is in the page cache; cold: before each load the file's pages
 * are dropped with posix_fadvise(POSIX_FADV_DONTNEED) (works without root for
 * clean pages; a stand-in for a reboot, not identical to one on every kernel).
 * Memory is measured in a fresh child process per format: VmHWM (peak
 * resident), and after the load RssAnon (heap: copied weights) vs RssFile
 * (pages of the mapped file, shared and evictable). The .ert path maps the file
 * and uses weights in place, so its RssAnon should stay near the baseline.
 *
 * `bench_load --create-chain [--json FILE]`: session create time (CPU
 * backend) of Relu/Sigmoid chains of 12.5k, 50k and 100k nodes built with
 * ert_builder (create = passes + memory plan; issue 13 item 17: it was
 * quadratic). Wall and CPU time: on a shared machine the wall time mostly
 * measures the neighbours. */
#include "edgert.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void drop_cache(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') v = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Writes one JSON line to path; nonzero (and a message) on failure. */
static int write_json(const char *path, const char *fmt, ...) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (fclose(f) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}

/* x -> Relu -> Sigmoid -> Relu -> ... (n nodes, alternating so no pass
 * merges neighbours) -> y; x is (1, 64). */
static ert_status build_chain(ert_context *ctx, int n, ert_model **out) {
    ert_builder *b;
    ert_status st = ert_builder_create(ctx, &b);
    if (st) return st;
    int64_t dims[2] = {1, 64};
    int32_t t;
    st = ert_builder_input(b, "x", ERT_DTYPE_F32, 2, dims, &t);
    for (int k = 0; k < n && !st; k++) st = ert_builder_node(b, k % 2 ? "Sigmoid" : "Relu", NULL, &t, 1, NULL, 0, &t, 1);
    if (!st) st = ert_builder_output(b, t, "y");
    if (!st) st = ert_builder_finish(b, out);
    ert_builder_free(b);
    return st;
}

static int bench_create(const char *json) {
    static const int sizes[3] = {12500, 50000, 100000};
    double wall[3], cpu[3];
    ert_context *ctx;
    if (ert_context_create(NULL, &ctx)) return 1;
    for (int i = 0; i < 3; i++) {
        ert_model *m = NULL;
        ert_session *s = NULL;
        ert_status st = build_chain(ctx, sizes[i], &m);
        double t0 = now_ms(), c0 = cpu_ms();
        if (!st) st = ert_session_create(m, NULL, &s);
        wall[i] = now_ms() - t0;
        cpu[i] = cpu_ms() - c0;
        if (st) {
            fprintf(stderr, "bench_load: chain of %d: %s\n", sizes[i], ert_last_error(ctx));
            return 1;
        }
        printf("session create, %6d-node chain (CPU): %.1f ms wall, %.1f ms CPU time\n", sizes[i], wall[i], cpu[i]);
        ert_session_free(s);
        ert_model_free(m);
    }
    ert_context_free(ctx);
    if (json && write_json(json,
                           "{\"nodes\":[12500,50000,100000],\"create_wall_ms\":[%.2f,%.2f,%.2f],"
                           "\"create_cpu_ms\":[%.2f,%.2f,%.2f]}\n",
                           wall[0], wall[1], wall[2], cpu[0], cpu[1], cpu[2]))
        return 1;
    return 0;
}

static const char usage[] = "usage: bench_load MODEL [--iters N] [--json FILE] | bench_load --create-chain [--json FILE]\n";

int main(int argc, char **argv) {
    const char *path = NULL, *json = NULL;
    int iters = 10;
    bool create_chain = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--create-chain")) create_chain = true;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (create_chain) return bench_create(json);
    if (!path || iters < 1) {
        fputs(usage, stderr);
        return 2;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        perror(path);
        return 1;
    }
    /* memory, in a child that does nothing else */
    int pfd[2];
    if (pipe(pfd) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        long base_anon = status_kb("RssAnon"), base_hwm = status_kb("VmHWM");
        ert_context *ctx;
        ert_model *m = NULL;
        ert_context_create(NULL, &ctx);
        ert_status st = ert_model_load_file(ctx, path, &m);
        long mem[5] = {base_anon, base_hwm, status_kb("VmHWM"), status_kb("RssAnon"), status_kb("RssFile")};
        if (st != ERT_OK) mem[0] = -1;
        if (write(pfd[1], mem, sizeof mem) != (ssize_t)sizeof mem) _exit(1);
        _exit(st == ERT_OK ? 0 : 1);
    }
    close(pfd[1]);
    long mem[5] = {0};
    ssize_t got = read(pfd[0], mem, sizeof mem);
    close(pfd[0]);
    int wst;
    waitpid(pid, &wst, 0);
    ert_context *ctx;
    ert_context_create(NULL, &ctx);
    double *warm = calloc((size_t)iters, sizeof *warm), *cold = calloc((size_t)iters, sizeof *cold);
    long long n_params = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < iters; i++) {
            if (pass == 1) drop_cache(path);
            ert_model *m = NULL;
            double t0 = now_ms();
            ert_status st = ert_model_load_file(ctx, path, &m);
            double t1 = now_ms();
            if (st != ERT_OK) {
                fprintf(stderr, "bench_load: %s: %s\n", path, ert_last_error(ctx));
                return 1;
            }
            n_params = ert_model_n_params(m);
            ert_model_free(m);
            (pass ? cold : warm)[i] = t1 - t0;
        }
    double wm = median(warm, iters), cm = median(cold, iters);
    if (got != (ssize_t)sizeof mem || mem[0] < 0) {
        fprintf(stderr, "bench_load: the memory probe failed\n");
        return 1;
    }
    printf("%s: %.1f MB, %lld params\n", path, sb.st_size / 1e6, n_params);
    printf("  load warm p50 %.2f ms, cold p50 %.2f ms (%d loads each)\n", wm, cm, iters);
    printf("  peak RSS during load +%.1f MB (VmHWM %ld kB); after load: heap +%.1f MB, file pages %.1f MB\n",
           (mem[2] - mem[1]) / 1024.0, mem[2], (mem[3] - mem[0]) / 1024.0, mem[4] / 1024.0);
    if (json &&
        write_json(json,
                "{\"model\":\"%s\",\"file_bytes\":%lld,\"params\":%lld,\"iters\":%d,\"warm_p50_ms\":%.3f,"
                "\"cold_p50_ms\":%.3f,\"peak_rss_delta_kb\":%ld,\"heap_after_load_kb\":%ld,\"file_rss_after_load_kb\":%ld}\n",
                path, (long long)sb.st_size, n_params, iters, wm, cm, mem[2] - mem[1], mem[3] - mem[0], mem[4]))
        return 1;
    free(warm);
    free(cold);
    ert_context_free(ctx);
    return 0;
}
