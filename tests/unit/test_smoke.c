/* Status strings, dtypes, version, fp16/bf16 conversion against a double-precision
 * reference, CRC-32 against known values. */
#include "runtime_internal.h"
#include "testutil.h"

#include <string.h>

static double f16_ref(uint16_t h) { /* independent decode in double */
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? m * ldexp(1.0, -24) : e == 31 ? (m ? NAN : INFINITY) : (1024 + m) * ldexp(1.0, e - 25);
    return s ? -v : v;
}

int main(void) {
    ert_test_rng rng;
    ert_test_rng_init(&rng, "smoke");
    CHECK(strcmp(ert_version(), ERT_VERSION_STRING) == 0, "version %s", ert_version());
    for (int s = 0; s <= ERT_E_NOT_FOUND; s++) CHECK(strncmp(ert_status_str((ert_status)s), "ERT_", 4) == 0, "status %d", s);
    CHECK(ert_dtype_size(ERT_DTYPE_I64) == 8 && ert_dtype_size(ERT_DTYPE_BF16) == 2, "sizes");
    /* CRC-32 check value of "123456789" is 0xCBF43926. */
    CHECK(ert_crc32(0, "123456789", 9) == 0xCBF43926u, "crc %08x", ert_crc32(0, "123456789", 9));
    CHECK(ert_crc32(ert_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u, "crc incremental");
    /* every length and alignment against a bitwise reference */
    {
        static uint8_t buf[300];
        for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)ert_test_u64(&rng);
        int crc_bad = 0;
        for (size_t off = 0; off < 9; off++)
            for (size_t len = 0; off + len <= sizeof buf; len += 7) {
                uint32_t c = 0xffffffffu;
                for (size_t i = 0; i < len; i++) {
                    c ^= buf[off + i];
                    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
                }
                if (ert_crc32(0, buf + off, len) != ~c) crc_bad++;
            }
        CHECK(crc_bad == 0, "%d crc mismatches vs bitwise reference", crc_bad);
    }
    /* every fp16 bit pattern decodes like the double reference */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double r = f16_ref((uint16_t)h);
        float g = ert_f16_to_f32((uint16_t)h);
        if (!(isnan(r) ? isnan(g) : (double)g == r)) bad++;
        /* and round-trips */
        if (!isnan(r) && ert_f32_to_f16(g) != h) bad++;
    }
    CHECK(bad == 0, "%d fp16 patterns wrong", bad);
    /* f32 -> f16 rounds to nearest: compare with brute-force nearest on random values */
    bad = 0;
    for (int i = 0; i < 20000; i++) {
        float x = (float)(ert_test_uniform(&rng, -1, 1) * ldexp(1.0, ert_test_int(&rng, -26, 16)));
        uint16_t h = ert_f32_to_f16(x);
        double err = fabs(f16_ref(h) - x);
        /* neighbours must not be strictly closer */
        double e1 = fabs(f16_ref((uint16_t)(h + 1)) - x), e0 = (h & 0x7fff) ? fabs(f16_ref((uint16_t)(h - 1)) - x) : INFINITY;
        if ((h & 0x7c00) != 0x7c00 && (e1 < err || e0 < err)) bad++;
    }
    CHECK(bad == 0, "%d f16 roundings not nearest", bad);
    bad = 0;
    for (int i = 0; i < 20000; i++) {
        float x = (float)ert_test_uniform(&rng, -1e6, 1e6);
        uint16_t b = ert_f32_to_bf16(x);
        double err = fabs((double)ert_bf16_to_f32(b) - x);
        double e1 = fabs((double)ert_bf16_to_f32((uint16_t)(b + 1)) - x), e0 = fabs((double)ert_bf16_to_f32((uint16_t)(b - 1)) - x);
        if (e1 < err || e0 < err) bad++;
    }
    CHECK(bad == 0, "%d bf16 roundings not nearest", bad);
    return ert_test_finish("smoke");
}
