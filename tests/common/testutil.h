/* Small test harness shared by the test programs.
 * - CHECK(cond, fmt, ...) records a failure and continues.
 * - Random data: ert_test_rng seeded from ERT_SEED or the clock (printed, so a
 *   failing seed can be replayed).
 * - ert_test_finish() prints "N passed, N failed" and returns the exit code.
 * - ert_test_skip(why) prints the reason and returns 77 (ctest SKIPPED). */
#ifndef ERT_TESTUTIL_H
#define ERT_TESTUTIL_H
#include "edgert.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

extern int ert_test_pass, ert_test_fail;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (cond) {                                                           \
            ert_test_pass++;                                                  \
        } else {                                                              \
            ert_test_fail++;                                                  \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

#define CHECK_OK(expr, ctx)                                                   \
    do {                                                                      \
        ert_status st_ = (expr);                                              \
        CHECK(st_ == ERT_OK, "%s -> %s (%s)", #expr, ert_status_str(st_),     \
              (ctx) ? ert_last_error(ctx) : "");                              \
    } while (0)

typedef struct ert_test_rng { uint64_t s; } ert_test_rng;

/* Seeds from $ERT_SEED or the clock and prints the seed. */
void ert_test_rng_init(ert_test_rng *r, const char *test_name);
uint64_t ert_test_u64(ert_test_rng *r);
/* uniform in [lo, hi) */
double ert_test_uniform(ert_test_rng *r, double lo, double hi);
int ert_test_int(ert_test_rng *r, int lo, int hi); /* inclusive */
void ert_test_fill(ert_test_rng *r, float *x, int64_t n, float lo, float hi);
/* An IEEE half (bits) as a double, decoded independently of the library. */
double ert_test_half_to_double(uint16_t h);
/* Fill with NaN bit pattern so unwritten outputs show. */
void ert_test_poison(float *x, int64_t n);

/* Models from the builder with random data. ert_test_weight: a float32
 * weight of dims, values uniform in [lo, hi) (name NULL: the builder names
 * it), or -1. ert_test_model: marks y as the output "y", finishes and frees
 * the builder; the model or NULL. Both record a failed check on error. */
int32_t ert_test_weight(ert_builder *b, ert_test_rng *r, const char *name, int nd, const int64_t *dims, float lo,
                        float hi);
ert_model *ert_test_model(ert_builder *b, int32_t y);

/* max |got - ref| / (atol + rtol*|ref|) over n; > 1 means failure. Any NaN in
 * got fails. Prints the worst index on failure with `what`. */
bool ert_test_close(const char *what, const float *got, const double *ref, int64_t n,
                    double atol, double rtol);

/* Directory holding ../shared (from $ERT_SHARED_DIR or ../shared guesses), or NULL. */
const char *ert_test_shared_dir(void);

int ert_test_finish(const char *name);
int ert_test_skip(const char *name, const char *why);

#endif
