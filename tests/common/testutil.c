#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int ert_test_pass, ert_test_fail;

void ert_test_rng_init(ert_test_rng *r, const char *test_name) {
    const char *e = getenv("ERT_SEED");
    /* nanoseconds and the pid: two runs in the same second (ctest -j,
     * --repeat) still draw different data */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = e ? strtoull(e, NULL, 0)
                      : ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
    if (!seed) seed = 0x9e3779b97f4a7c15ull;
    printf("%s: seed %llu (replay with ERT_SEED)\n", test_name, (unsigned long long)seed);
    r->s = seed;
}

uint64_t ert_test_u64(ert_test_rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double ert_test_uniform(ert_test_rng *r, double lo, double hi) {
    return lo + (hi - lo) * ((double)(ert_test_u64(r) >> 11) * (1.0 / 9007199254740992.0));
}

int ert_test_int(ert_test_rng *r, int lo, int hi) {
    return lo + (int)(ert_test_u64(r) % (uint64_t)(hi - lo + 1));
}

void ert_test_fill(ert_test_rng *r, float *x, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)ert_test_uniform(r, lo, hi);
}

int32_t ert_test_weight(ert_builder *b, ert_test_rng *r, const char *name, int nd, const int64_t *dims, float lo,
                        float hi) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= dims[i];
    float *w = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    int32_t id = -1;
    CHECK(w != NULL, "weight of %lld floats: out of memory", (long long)n);
    if (!w) return -1;
    ert_test_fill(r, w, n, lo, hi);
    ert_status st = ert_builder_weight(b, name, ERT_DTYPE_F32, nd, dims, w, &id);
    CHECK(st == ERT_OK, "ert_builder_weight '%s': %s", name ? name : "?", ert_status_str(st));
    free(w);
    return st == ERT_OK ? id : -1;
}

ert_model *ert_test_model(ert_builder *b, int32_t y) {
    ert_model *m = NULL;
    ert_status st = ert_builder_output(b, y, "y");
    CHECK(st == ERT_OK, "ert_builder_output: %s", ert_status_str(st));
    if (st == ERT_OK) {
        st = ert_builder_finish(b, &m);
        CHECK(st == ERT_OK, "ert_builder_finish: %s", ert_status_str(st));
    }
    ert_builder_free(b);
    return m;
}

void ert_test_poison(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = NAN;
}

bool ert_test_close(const char *what, const float *got, const double *ref, int64_t n,
                    double atol, double rtol) {
    double worst = 0;
    int64_t wi = -1;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i];
        if (isnan(g) && !isnan(ref[i])) { worst = INFINITY; wi = i; break; }
        if (isnan(ref[i]) && isnan(g)) continue;
        double e = fabs(g - ref[i]) / (atol + rtol * fabs(ref[i]));
        if (e > worst) { worst = e; wi = i; }
    }
    if (worst > 1.0) {
        fprintf(stderr, "  %s: mismatch at %lld of %lld: got %.9g want %.9g (err ratio %.3g)\n", what,
                (long long)wi, (long long)n, (double)got[wi], ref[wi], worst);
        return false;
    }
    return true;
}

const char *ert_test_shared_dir(void) {
    static char buf[4096];
    const char *cands[] = {getenv("ERT_SHARED_DIR"), "../shared", "../../shared", "../../../shared"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        struct stat st;
        if (!cands[i]) continue;
        snprintf(buf, sizeof buf, "%s/DESIGN.md", cands[i]);
        if (stat(buf, &st) == 0 || (snprintf(buf, sizeof buf, "%s/conformance", cands[i]), stat(buf, &st) == 0)) {
            snprintf(buf, sizeof buf, "%s", cands[i]);
            return buf;
        }
    }
    return NULL;
}

int ert_test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, ert_test_pass, ert_test_fail);
    return ert_test_fail ? 1 : 0;
}

int ert_test_skip(const char *name, const char *why) {
    printf("%s: SKIPPED: %s\n", name, why);
    return 77;
}

/* Written out from the IEEE 754 binary16 layout, independent of the
 * library's converters. */
double ert_test_half_to_double(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}
