/* The array conversions of core/fp16.c (ert_f32_to_f16_n, ert_f16_to_f32_n,
 * ert_f32_to_bf16_n: F16C on x86 where the CPU has it) against the scalar
 * oracle, bit for bit:
 * - f16 -> f32: all 65,536 half values;
 * - f32 -> f16: every half value's f32 image and its neighbours (3 ulps
 *   either side), the midpoints between neighbouring halves and 1 ulp either
 *   side of them (round to nearest even), the overflow edge (65504, 65519.99,
 *   65520), f32 subnormals, zeros, infinities, quiet and signalling NaNs
 *   with payloads, and 2,000,000 fresh random bit patterns;
 * - f32 -> bf16 the same inputs.
 * A NaN must come back a NaN of the same sign whose payload differs at most
 * in the quiet bit (the instructions quiet a signalling NaN). The arrays are
 * converted in runs of random length (0-99) at random offsets, so the 8-wide
 * loop, its tail and unaligned pointers are all used. */
#include "ert_internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ert_test_rng rng;

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float fl(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static bool same16(uint16_t a, uint16_t b) {
    bool na = (a & 0x7c00u) == 0x7c00u && (a & 0x3ffu), nb = (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu);
    if (na || nb) return na && nb && ((a | 0x200u) == (b | 0x200u));
    return a == b;
}

static bool same32(uint32_t a, uint32_t b) {
    bool na = (a & 0x7fffffffu) > 0x7f800000u, nb = (b & 0x7fffffffu) > 0x7f800000u;
    if (na || nb) return na && nb && ((a | 0x400000u) == (b | 0x400000u));
    return a == b;
}

/* convert src in random runs with the array function (copied to an odd
 * element offset: unaligned for the vector loads and stores), compare with
 * the scalar one */
static void check_to_half(const float *src, size_t n, bool bf16) {
    uint16_t *got = malloc((n + 1) * sizeof *got);
    float *s = malloc(101 * sizeof *s);
    uint16_t *d = malloc(101 * sizeof *d);
    for (size_t i = 0; i < n;) {
        size_t len = (size_t)(ert_test_u64(&rng) % 100);
        if (len > n - i) len = n - i;
        memcpy(s + 1, src + i, len * sizeof *s);
        if (bf16) ert_f32_to_bf16_n(d + 1, s + 1, len);
        else ert_f32_to_f16_n(d + 1, s + 1, len);
        memcpy(got + i, d + 1, len * sizeof *d);
        i += len;
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = bf16 ? ert_f32_to_bf16(src[i]) : ert_f32_to_f16_plain(src[i]);
        if (!same16(got[i], want) && !bad++) first = i;
    }
    CHECK(bad == 0, "%s: %zu of %zu differ from the scalar conversion (first: 0x%08x -> 0x%04x, want 0x%04x)",
          bf16 ? "f32 -> bf16" : "f32 -> f16", bad, n, bad ? bits(src[first]) : 0u, bad ? got[first] : 0,
          bad ? (bf16 ? ert_f32_to_bf16(src[first]) : ert_f32_to_f16_plain(src[first])) : 0);
    CHECK(n > 1000000, "inputs: %zu", n);
    free(got);
    free(s);
    free(d);
}

int main(void) {
    ert_test_rng_init(&rng, "fp16");
    /* f16 -> f32, every value, in random runs */
    uint16_t *h = malloc(65536 * sizeof *h);
    float *f = malloc(65537 * sizeof *f);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (size_t i = 0; i < 65536;) {
        size_t len = 1 + (size_t)(ert_test_u64(&rng) % 99);
        if (len > 65536 - i) len = 65536 - i;
        ert_f16_to_f32_n(f + i, h + i, len);
        i += len;
    }
    size_t bad = 0;
    for (uint32_t i = 0; i < 65536; i++)
        if (!same32(bits(f[i]), bits(ert_f16_to_f32_plain((uint16_t)i)))) bad++;
    CHECK(bad == 0, "f16 -> f32: %zu of 65536 half values differ from the scalar conversion", bad);

    /* f32 -> f16 / bf16 inputs */
    size_t cap = 65536 * 12 + 2000000 + 256, n = 0;
    float *x = malloc(cap * sizeof *x);
    for (uint32_t i = 0; i < 65536; i++) {
        float v = ert_f16_to_f32_plain((uint16_t)i);
        if (isnan(v)) continue;
        uint32_t u = bits(v);
        for (int d = -3; d <= 3; d++) x[n++] = fl(u + (uint32_t)d);
        if ((i & 0x7fffu) < 0x7c00u) { /* midpoint to the next half up in magnitude, and 1 ulp around it */
            float w = ert_f16_to_f32_plain((uint16_t)(i + 1));
            if (isfinite(w)) {
                float mid = (float)(((double)v + (double)w) / 2);
                uint32_t um = bits(mid);
                x[n++] = mid;
                x[n++] = fl(um + 1);
                x[n++] = fl(um - 1);
            }
        }
    }
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f,
                             -1e-8f, 5.96e-8f, 2.98e-8f, 2.9802322e-8f, 1e-40f, -1e-45f, 3.4e38f};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) x[n++] = special[i];
    const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7fbfffffu,
                             0x7fffffffu, 0xffffffffu, 0x7f802000u, 0x7fc02000u, 0x7f800400u};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) x[n++] = fl(nans[i]);
    for (int i = 0; i < 2000000; i++) x[n++] = fl((uint32_t)ert_test_u64(&rng));
    check_to_half(x, n, false);
    check_to_half(x, n, true);
    free(x);
    free(h);
    free(f);
    return ert_test_finish("fp16");
}
