/* Model load time and host memory: `bench_load MODEL [--iters N] [--json FILE]`.
 *
 * warm: the file is in the page cache; cold: before each load the file's pages
 * are dropped with posix_fadvise(POSIX_FADV_DONTNEED) (works without root for
 * clean pages; a stand-in for a reboot, not identical to one on every kernel).
 * Memory is measured in a fresh child process per format: VmHWM (peak
 * resident), and after the load RssAnon (heap: copied weights) vs RssFile
 * (pages of the mapped file, shared and evictable). The .ert path maps the file
 * and uses weights in place, so its RssAnon should stay near the baseline. */
#include "edgert.h"

#include <fcntl.h>
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

int main(int argc, char **argv) {
    const char *path = NULL, *json = NULL;
    int iters = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "usage: bench_load MODEL [--iters N] [--json FILE]\n");
            return 2;
        }
    }
    if (!path || iters < 1) {
        fprintf(stderr, "usage: bench_load MODEL [--iters N] [--json FILE]\n");
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
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            perror(json);
            return 1;
        }
        fprintf(f,
                "{\"model\":\"%s\",\"file_bytes\":%lld,\"params\":%lld,\"iters\":%d,\"warm_p50_ms\":%.3f,"
                "\"cold_p50_ms\":%.3f,\"peak_rss_delta_kb\":%ld,\"heap_after_load_kb\":%ld,\"file_rss_after_load_kb\":%ld}\n",
                path, (long long)sb.st_size, n_params, iters, wm, cm, mem[2] - mem[1], mem[3] - mem[0], mem[4]);
        fclose(f);
    }
    free(warm);
    free(cold);
    ert_context_free(ctx);
    return 0;
}
