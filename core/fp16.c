/* IEEE fp16 and bfloat16 <-> f32, round to nearest even, NaN/Inf preserved.
 * The bit-exact C versions are the oracle; on aarch64 fp16 goes through the
 * FCVT instruction (base ARMv8, no feature check needed), which gives the
 * same bits except that a signalling NaN comes back quiet.
 * The array forms (ert_f32_to_f16_n, ...) convert weights at session create
 * (86M of them for ViT-B/16: 1.4 s one at a time on this machine's Xeon):
 * on x86 through F16C (VCVTPS2PH / VCVTPH2PS, 8 at a time) where cpuid says
 * the CPU and OS have it (checked per call, no global state), else the
 * scalar functions; same bits as the scalar ones (tests/unit/test_fp16.c). */
#include "ert_internal.h"

#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define ERT_FP16_F16C 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float ert_f16_to_f32_plain(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return u2f(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return u2f(sign | 0x7f800000u | (man << 13));
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t ert_f32_to_f16_plain(float f) {
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* inf or nan */
        return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0);
    if (abs >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: inf */
    if (abs < 0x38800000u) {                        /* below 2^-14: subnormal or zero */
        if (abs < 0x33000000u) return sign;         /* < 2^-25 rounds to 0 */
        uint32_t e = abs >> 23, m = (abs & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)e; /* f16 subnormal = m * 2^(e-126): right shift of the 24-bit mantissa */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return sign | (uint16_t)r;
    }
    uint32_t r = ((abs >> 13) - (112u << 10)), rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
    return sign | (uint16_t)r;
}

#if defined(__aarch64__) && defined(__GNUC__)
float ert_f16_to_f32(uint16_t h) {
    __fp16 v;
    memcpy(&v, &h, 2);
    return (float)v;
}

uint16_t ert_f32_to_f16(float f) {
    __fp16 v = (__fp16)f;
    uint16_t h;
    memcpy(&h, &v, 2);
    return h;
}
#else
float ert_f16_to_f32(uint16_t h) { return ert_f16_to_f32_plain(h); }
uint16_t ert_f32_to_f16(float f) { return ert_f32_to_f16_plain(f); }
#endif

float ert_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

#ifdef ERT_FP16_F16C
/* F16C and AVX, and the OS saves the YMM registers (OSXSAVE + XCR0). */
static bool have_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    if (!(c & (1u << 29)) || !(c & (1u << 28)) || !(c & (1u << 27))) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6u) == 6u;
}

__attribute__((target("avx,f16c"))) static void to_f16_f16c(uint16_t *d, const float *s, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) d[i] = ert_f32_to_f16_plain(s[i]);
}

__attribute__((target("avx,f16c"))) static void to_f32_f16c(float *d, const uint16_t *s, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i))));
    for (; i < n; i++) d[i] = ert_f16_to_f32_plain(s[i]);
}
#endif

void ert_f32_to_f16_n(uint16_t *dst, const float *src, size_t n) {
#ifdef ERT_FP16_F16C
    if (n >= 32 && have_f16c()) {
        to_f16_f16c(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = ert_f32_to_f16(src[i]);
}

void ert_f16_to_f32_n(float *dst, const uint16_t *src, size_t n) {
#ifdef ERT_FP16_F16C
    if (n >= 32 && have_f16c()) {
        to_f32_f16c(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = ert_f16_to_f32(src[i]);
}

void ert_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ert_f32_to_bf16(src[i]);
}

uint16_t ert_f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet nan */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
