#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_stdout_finish(const char *who, int rc, int first_errno) {
    errno = 0;
    if (fflush(stdout) != 0 && !first_errno) first_errno = errno ? errno : EIO;
    if (!first_errno && !ferror(stdout)) return rc;
    fprintf(stderr, "%s: cannot write to standard output: %s\n", who, strerror(first_errno ? first_errno : EIO));
    return rc ? rc : 1;
}

void cli_rng_seed(cli_rng *r, uint64_t seed) { r->s = seed; }

uint64_t cli_rng_next(cli_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float cli_rng_uniform(cli_rng *r, float lo, float hi) {
    /* 24 random bits -> exactly representable float in [0, 1) */
    float u = (float)(cli_rng_next(r) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float cli_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) return u2f(s | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
        return s ? -v : v;
    }
    return u2f(s | ((e + 112) << 23) | (m << 13));
}

uint16_t cli_f32_to_f16(float f) {
    uint32_t u = f2u(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
    if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) { /* subnormal or zero in half: round(|f| * 2^24) */
        float v = u2f(a) * 16777216.0f;
        /* add-and-subtract rounds to nearest even in the default mode */
        uint32_t m = (uint32_t)(int)((v + 8388608.0f) - 8388608.0f);
        return (uint16_t)(s | m);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* round to nearest even at bit 13 */
    return (uint16_t)(s | ((r - 0x38000000u) >> 13));
}

float cli_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t cli_f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

void cli_fill_random(cli_rng *r, ert_dtype dt, void *data, size_t bytes) {
    size_t es = ert_dtype_size(dt), n = es ? bytes / es : 0;
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case ERT_DTYPE_F32: ((float *)data)[i] = cli_rng_uniform(r, -1, 1); break;
        case ERT_DTYPE_F16: ((uint16_t *)data)[i] = cli_f32_to_f16(cli_rng_uniform(r, -1, 1)); break;
        case ERT_DTYPE_BF16: ((uint16_t *)data)[i] = cli_f32_to_bf16(cli_rng_uniform(r, -1, 1)); break;
        case ERT_DTYPE_I64: ((int64_t *)data)[i] = (int64_t)(cli_rng_next(r) & 1); break;
        case ERT_DTYPE_I32: ((int32_t *)data)[i] = (int32_t)(cli_rng_next(r) & 1); break;
        default: ((uint8_t *)data)[i] = (uint8_t)(cli_rng_next(r) & 1); break;
        }
    }
}

double cli_elem(ert_dtype dt, const void *data, size_t i) {
    switch (dt) {
    case ERT_DTYPE_F32: return ((const float *)data)[i];
    case ERT_DTYPE_F16: return cli_f16_to_f32(((const uint16_t *)data)[i]);
    case ERT_DTYPE_BF16: return cli_bf16_to_f32(((const uint16_t *)data)[i]);
    case ERT_DTYPE_I64: return (double)((const int64_t *)data)[i];
    case ERT_DTYPE_I32: return ((const int32_t *)data)[i];
    case ERT_DTYPE_I8: return ((const int8_t *)data)[i];
    case ERT_DTYPE_U8: case ERT_DTYPE_BOOL: return ((const uint8_t *)data)[i];
    default: return 0;
    }
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

cli_stats cli_stats_compute(double *v, int n) {
    cli_stats s = {0, 0, 0, 0, 0};
    if (n <= 0) return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    /* nearest rank: the smallest sample with at least p% of samples <= it */
    int i50 = (50 * n + 99) / 100 - 1, i90 = (90 * n + 99) / 100 - 1;
    s.p50 = v[i50 < 0 ? 0 : i50];
    s.p90 = v[i90 < 0 ? 0 : i90];
    s.mean = sum / n;
    s.min = v[0];
    s.max = v[n - 1];
    return s;
}

int64_t cli_numel(int ndim, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || (dims[i] && n > INT64_MAX / dims[i])) return -1;
        n *= dims[i];
    }
    return n;
}

const char *cli_shape_str(char *buf, size_t n, int ndim, const int64_t *dims) {
    size_t k = 0;
    k += (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < ndim && k < n; i++) {
        if (dims[i] < 0)
            k += (size_t)snprintf(buf + k, n - k, "?");
        else
            k += (size_t)snprintf(buf + k, n - k, "%lld", (long long)dims[i]);
        if (i + 1 < ndim && k < n) k += (size_t)snprintf(buf + k, n - k, ", ");
    }
    if (ndim == 1 && k < n) k += (size_t)snprintf(buf + k, n - k, ",");
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}

const char *cli_bytes_str(char *buf, size_t n, size_t bytes) {
    if (bytes < 1024)
        snprintf(buf, n, "%zu B", bytes);
    else if (bytes < 1024 * 1024)
        snprintf(buf, n, "%.2f KiB", (double)bytes / 1024);
    else if (bytes < (size_t)1024 * 1024 * 1024)
        snprintf(buf, n, "%.2f MiB", (double)bytes / (1024.0 * 1024));
    else
        snprintf(buf, n, "%.2f GiB", (double)bytes / (1024.0 * 1024 * 1024));
    return buf;
}

void cli_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void cli_sanitize_name(char *out, size_t n, const char *name) {
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < n; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        out[k++] = ok ? c : '_';
    }
    out[k] = 0;
    /* "", "." and ".." name directories, a leading '-' looks like a flag */
    if (k == 0 || strcmp(out, ".") == 0 || strcmp(out, "..") == 0 || out[0] == '-') {
        if (k + 2 > n) k = n - 2;
        memmove(out + 1, out, k);
        out[0] = '_';
        out[k + 1] = 0;
    }
}

int cli_parse_int(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

const char *cli_plan_cache_dir(const char *opt, char *buf, size_t n) {
    if (opt) return strcmp(opt, "off") == 0 ? NULL : opt;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w = -1;
    if (xdg && xdg[0] == '/') w = snprintf(buf, n, "%s/edgert", xdg); /* the spec: relative values are ignored */
    else if (home && home[0]) w = snprintf(buf, n, "%s/.cache/edgert", home);
    return w > 0 && (size_t)w < n ? buf : NULL;
}

const char *cli_plan_cache_state_str(ert_plan_cache_state st) {
    switch (st) {
    case ERT_PLAN_CACHE_USED: return "used";
    case ERT_PLAN_CACHE_WRITTEN: return "written";
    case ERT_PLAN_CACHE_NOT_WRITTEN: return "not_written";
    default: return "off";
    }
}
