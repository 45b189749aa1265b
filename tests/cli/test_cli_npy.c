/* The apps' .npy reader/writer (apps/npy.c).
 *
 *   test_cli_npy                   unit tests: round trips of every dtype,
 *                                  byte-identical to np.save, versions 1-3,
 *                                  rejection of bad headers, truncation, bit flips
 *   test_cli_npy write-bad PATH fortran|bigendian|truncated
 *                                  a (2, 3, 32, 32) file the CLI must refuse
 *   test_cli_npy write PATH D0 D1 ...
 *                                  helper for the CLI tests: writes a '<f4'
 *                                  array of that shape, uniform [-1, 1), fixed seed
 *   test_cli_npy write-f8 IN.npy OUT.npy
 *                                  the '<f4' array IN widened to '<f8' (exact)
 *   test_cli_npy write-image OUT.ppm OUT.npy W H rgb|bgr MEAN STD
 *                                  random W x H RGB pixels as PPM, and the
 *                                  (1, 3, H, W) input they preprocess to,
 *                                  (v / 255 - MEAN) / STD computed in double;
 *                                  with a last argument `nhwc`, (1, H, W, 3)
 *   test_cli_npy write-nhwc-model OUT.ert
 *                                  y = Identity(x), x f32 (?, ?, ?, 3): an
 *                                  image input in NHWC with dynamic H and W
 */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "npy.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[256];

static int parse(const void *buf, size_t n, npy_array *a, char *err, size_t en) { return npy_parse(buf, n, a, err, en); }

/* Build an image: preamble for `version`, the header text padded to 64, data. */
static size_t make_npy(unsigned char *out, int version, const char *dict, const void *data, size_t bytes) {
    size_t pre = version == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64, hlen = total - pre;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)version;
    out[7] = 0;
    out[8] = (unsigned char)(hlen & 0xff);
    out[9] = (unsigned char)(hlen >> 8);
    if (version != 1) out[10] = out[11] = 0;
    memcpy(out + pre, dict, dl);
    memset(out + pre + dl, ' ', hlen - dl - 1);
    out[total - 1] = '\n';
    memcpy(out + total, data, bytes);
    return total + bytes;
}

static void expect_reject(const char *dict, const void *data, size_t bytes, const char *needle) {
    unsigned char buf[1024];
    size_t n = make_npy(buf, 1, dict, data, bytes);
    npy_array a;
    char err[256] = "";
    int rc = parse(buf, n, &a, err, sizeof err);
    CHECK(rc != 0, "accepted %s", dict);
    CHECK(rc != 0 && strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", dict, err, needle);
    if (rc == 0) npy_free(&a);
}

static void test_round_trips(void) {
    static const ert_dtype dts[] = {ERT_DTYPE_F32, ERT_DTYPE_F16, ERT_DTYPE_I64, ERT_DTYPE_I32,
                                    ERT_DTYPE_U8,  ERT_DTYPE_I8,  ERT_DTYPE_BOOL};
    static const int64_t shapes[][4] = {{0}, {7}, {2, 3, 5}, {1, 0, 4}, {3, 1, 2, 2}};
    static const int ranks[] = {0, 1, 3, 3, 4};
    cli_rng r;
    cli_rng_seed(&r, 1);
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t s = 0; s < sizeof ranks / sizeof ranks[0]; s++) {
            int64_t n = cli_numel(ranks[s], shapes[s]);
            size_t bytes = (size_t)n * ert_dtype_size(dts[d]);
            unsigned char *data = malloc(bytes + 1);
            cli_fill_random(&r, dts[d], data, bytes);
            char path[512], err[256];
            snprintf(path, sizeof path, "%s/rt_%zu_%zu.npy", g_dir, d, s);
            int rc = npy_write_file(path, dts[d], ranks[s], shapes[s], data, bytes, err, sizeof err);
            CHECK(rc == 0, "write %s: %s", path, err);
            npy_array a;
            rc = npy_read_file(path, &a, err, sizeof err);
            CHECK(rc == 0, "read %s: %s", path, err);
            if (rc == 0) {
                CHECK(a.dtype == dts[d] && a.ndim == ranks[s] && a.bytes == bytes, "%s: dtype/rank/bytes", path);
                CHECK(memcmp(a.dims, shapes[s], sizeof(int64_t) * (size_t)ranks[s]) == 0, "%s: dims", path);
                CHECK(bytes == 0 || memcmp(a.data, data, bytes) == 0, "%s: data", path);
                npy_free(&a);
            }
            /* the temporary file is gone after the rename */
            char tmpl[600];
            snprintf(tmpl, sizeof tmpl, "%s.tmp", path);
            CHECK(access(tmpl, F_OK) != 0, "leftover %s", tmpl);
            unlink(path);
            free(data);
        }
}

static void test_matches_numpy(void) {
    /* np.save(np.arange(6, dtype='<f4').reshape(2, 3)) with numpy 2.x: header
     * padded to 128 bytes (21 spaces of room for the first dim to grow). */
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    char expect[128];
    memcpy(expect, "\x93NUMPY\x01\x00\x76\x00", 10);
    size_t dl = strlen(dict);
    memcpy(expect + 10, dict, dl);
    memset(expect + 10 + dl, ' ', 128 - 10 - dl - 1);
    expect[127] = '\n';
    char hdr[1024];
    int64_t dims[2] = {2, 3};
    size_t hl = npy_header(hdr, sizeof hdr, ERT_DTYPE_F32, 2, dims);
    CHECK(hl == 128 && memcmp(hdr, expect, 128) == 0, "header differs from numpy's (len %zu)", hl);
    int64_t d1[1] = {3};
    hl = npy_header(hdr, sizeof hdr, ERT_DTYPE_I64, 1, d1);
    CHECK(hl > 10 && strstr(hdr + 10, "'shape': (3,), }") != NULL, "rank-1 shape text");
    hl = npy_header(hdr, sizeof hdr, ERT_DTYPE_U8, 0, NULL);
    CHECK(hl == 64 * (hl / 64) && strstr(hdr + 10, "'shape': (), }") != NULL, "scalar shape text");
    CHECK(npy_header(hdr, sizeof hdr, ERT_DTYPE_BF16, 1, d1) == 0, "bf16 has no numpy dtype");
}

static void test_versions_and_forms(void) {
    unsigned char buf[1024];
    int64_t v[3] = {1, -2, 3};
    npy_array a;
    char err[256];
    for (int ver = 1; ver <= 3; ver++) {
        size_t n = make_npy(buf, ver, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", v, sizeof v);
        int rc = parse(buf, n, &a, err, sizeof err);
        CHECK(rc == 0, "version %d: %s", ver, err);
        if (rc == 0) {
            CHECK(a.dtype == ERT_DTYPE_I64 && a.ndim == 1 && a.dims[0] == 3 && memcmp(a.data, v, sizeof v) == 0, "v%d data", ver);
            npy_free(&a);
        }
    }
    /* key order, double quotes, no trailing comma, Python 2 longs, '<u1' */
    unsigned char u[6] = {1, 2, 3, 4, 5, 6};
    size_t n = make_npy(buf, 1, "{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<u1\"}", u, 6);
    int rc = parse(buf, n, &a, err, sizeof err);
    CHECK(rc == 0 && a.dtype == ERT_DTYPE_U8 && a.ndim == 2 && a.dims[1] == 3, "lenient forms: %s", err);
    if (rc == 0) npy_free(&a);
}

static void test_rejects(void) {
    float f[8] = {0}; /* 2x3 plus room for the trailing-bytes case */
    expect_reject("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f, 24, "fortran_order");
    expect_reject("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", f, 24, "big-endian");
    expect_reject("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", f, 16, "object");
    expect_reject("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", f, 24, "not supported");
    expect_reject("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", f, 8, "structured");
    expect_reject("{'descr': '<f4', 'shape': (2, 3), }", f, 24, "missing");
    expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1, }", f, 24, "unexpected key");
    expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", f, 24, "non-negative");
    expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, 20, "truncated");
    expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, 24 + 4, "after the data");
    expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", f, 4, "dimensions");
    expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", f, 4, "too large");
    expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", f, 4, "too large");
    expect_reject("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", f, 24, "bad .npy header");
    /* bad magic and unknown version */
    unsigned char buf[256];
    npy_array a;
    char err[256];
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f, 4);
    buf[1] = 'X';
    CHECK(parse(buf, n, &a, err, sizeof err) != 0 && strstr(err, "magic"), "bad magic: %s", err);
    buf[1] = 'N';
    buf[6] = 4;
    CHECK(parse(buf, n, &a, err, sizeof err) != 0 && strstr(err, "version"), "version 4: %s", err);
    buf[6] = 1;
    /* header length pointing past the end */
    buf[8] = 0xff;
    buf[9] = 0x7f;
    CHECK(parse(buf, n, &a, err, sizeof err) != 0 && strstr(err, "truncated"), "long header: %s", err);
    /* missing file */
    CHECK(npy_read_file("/nonexistent/x.npy", &a, err, sizeof err) != 0 && strstr(err, "/nonexistent/x.npy"), "missing: %s", err);
}

/* Every prefix of a valid file and random bit flips: a status, never a crash
 * (run under ASan in CI). */
static void test_hostile(void) {
    unsigned char buf[512], cpy[512];
    float f[6] = {1, 2, 3, 4, 5, 6};
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, 24);
    npy_array a;
    char err[256];
    int accepted = 0;
    for (size_t k = 0; k < n; k++) {
        if (parse(buf, k, &a, err, sizeof err) == 0) accepted++, npy_free(&a);
    }
    CHECK(accepted == 0, "%d truncated prefixes accepted", accepted);
    ert_test_rng r;
    ert_test_rng_init(&r, "cli_npy");
    for (int it = 0; it < 20000; it++) {
        memcpy(cpy, buf, n);
        int flips = ert_test_int(&r, 1, 4);
        for (int j = 0; j < flips; j++) cpy[ert_test_int(&r, 0, (int)n - 1)] ^= (unsigned char)(1u << ert_test_int(&r, 0, 7));
        if (parse(cpy, n, &a, err, sizeof err) == 0) {
            /* an accepted file must describe exactly the bytes present */
            CHECK(a.bytes == (size_t)cli_numel(a.ndim, a.dims) * ert_dtype_size(a.dtype), "flip accepted inconsistent");
            npy_free(&a);
        }
    }
}

static void test_sanitize(void) {
    char out[64];
    cli_sanitize_name(out, sizeof out, "logits");
    CHECK(strcmp(out, "logits") == 0, "%s", out);
    cli_sanitize_name(out, sizeof out, "../a/b:c");
    CHECK(strcmp(out, ".._a_b_c") == 0, "%s", out);
    cli_sanitize_name(out, sizeof out, "..");
    CHECK(strcmp(out, "_..") == 0, "%s", out);
    cli_sanitize_name(out, sizeof out, "");
    CHECK(strcmp(out, "_") == 0, "%s", out);
    cli_sanitize_name(out, sizeof out, "-rf");
    CHECK(strcmp(out, "_-rf") == 0, "%s", out);
    cli_sanitize_name(out, 4, "abcdef");
    CHECK(strcmp(out, "abc") == 0, "%s", out);
}

static void test_f16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN */
        if (cli_f32_to_f16(cli_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0, "%d f16 patterns do not round-trip", bad);
    CHECK(cli_f32_to_f16(65520.0f) == 0x7c00 && cli_f32_to_f16(65519.0f) == 0x7bff, "f16 overflow rounding");
    CHECK(cli_f32_to_bf16(1.0f) == 0x3f80 && cli_bf16_to_f32(0x3f80) == 1.0f, "bf16");
    double v[5] = {5, 1, 4, 2, 3};
    cli_stats s = cli_stats_compute(v, 5);
    CHECK(s.min == 1 && s.max == 5 && s.p50 == 3 && s.p90 == 5 && s.mean == 3, "stats %g %g", s.p50, s.p90);
}

static int write_mode(int argc, char **argv) {
    int64_t dims[ERT_MAX_DIMS];
    int nd = argc - 3;
    if (nd < 0 || nd > ERT_MAX_DIMS) return fprintf(stderr, "usage: test_cli_npy write PATH D0 D1 ...\n"), 2;
    for (int i = 0; i < nd; i++) dims[i] = strtoll(argv[3 + i], NULL, 10);
    int64_t n = cli_numel(nd, dims);
    float *x = malloc((size_t)n * sizeof *x + 1);
    if (!x) return 1;
    cli_rng r;
    cli_rng_seed(&r, 1234);
    for (int64_t i = 0; i < n; i++) x[i] = cli_rng_uniform(&r, -1, 1);
    char err[256];
    int rc = npy_write_file(argv[2], ERT_DTYPE_F32, nd, dims, x, (size_t)n * sizeof *x, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    free(x);
    return rc ? 1 : 0;
}

/* A (2, 3, 32, 32) file the CLI must refuse: fortran | bigendian | truncated. */
static int write_bad_mode(const char *path, const char *kind) {
    static float x[2 * 3 * 32 * 32];
    const char *dict = strcmp(kind, "fortran") == 0 ? "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 32, 32), }"
                       : strcmp(kind, "bigendian") == 0 ? "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3, 32, 32), }"
                                                        : "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 32, 32), }";
    size_t bytes = strcmp(kind, "truncated") == 0 ? sizeof x - 4 : sizeof x;
    unsigned char *buf = malloc(256 + sizeof x);
    if (!buf) return 1;
    size_t n = make_npy(buf, 1, dict, x, bytes);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    free(buf);
    return ok ? 0 : 1;
}

/* IN ('<f4') widened to '<f8': the CLI narrows it back exactly. */
static int write_f8_mode(const char *in, const char *out) {
    npy_array a;
    char err[256];
    if (npy_read_file(in, &a, err, sizeof err) != 0 || a.dtype != ERT_DTYPE_F32)
        return fprintf(stderr, "%s: %s\n", in, a.dtype != ERT_DTYPE_F32 ? "not <f4" : err), 1;
    char dict[256];
    int k = snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, 'shape': (");
    for (int d = 0; d < a.ndim; d++) k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld, ", (long long)a.dims[d]);
    snprintf(dict + k, sizeof dict - (size_t)k, "), }");
    size_t n = a.bytes / 4;
    double *x = malloc(n * sizeof *x + 1);
    unsigned char *buf = malloc(256 + n * 8);
    int ok = x && buf;
    for (size_t i = 0; ok && i < n; i++) x[i] = ((const float *)a.data)[i];
    size_t len = ok ? make_npy(buf, 1, dict, x, n * 8) : 0;
    FILE *f = ok ? fopen(out, "wb") : NULL;
    ok = f && fwrite(buf, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    free(x);
    free(buf);
    npy_free(&a);
    return ok ? 0 : 1;
}

/* Random pixels as PPM and the model input they must become, computed here
 * independently of the CLI's preprocessing (no resize: W x H is the size). */
static int write_image_mode(int argc, char **argv) {
    int w = atoi(argv[4]), h = atoi(argv[5]), bgr = strcmp(argv[6], "bgr") == 0;
    int nhwc = argc == 10 && strcmp(argv[9], "nhwc") == 0;
    double mean = atof(argv[7]), std = atof(argv[8]);
    if (w < 1 || h < 1 || w > 4096 || h > 4096 || !(std > 0)) return fprintf(stderr, "bad write-image arguments\n"), 2;
    size_t np = (size_t)w * (size_t)h;
    unsigned char *px = malloc(np * 3);
    float *x = malloc(np * 3 * sizeof *x);
    if (!px || !x) return 1;
    cli_rng r;
    cli_rng_seed(&r, 4321);
    for (size_t i = 0; i < np * 3; i++) px[i] = (unsigned char)(cli_rng_next(&r) & 255);
    for (int c = 0; c < 3; c++) /* plane c (NCHW) or slot c of each pixel (NHWC) holds channel c of RGB, or of BGR */
        for (size_t i = 0; i < np; i++)
            x[nhwc ? 3 * i + (size_t)c : (size_t)c * np + i] =
                (float)(((double)px[3 * i + (size_t)(bgr ? 2 - c : c)] / 255.0 - mean) / std);
    FILE *f = fopen(argv[2], "wb");
    int ok = f && fprintf(f, "P6\n%d %d\n255\n", w, h) > 0 && fwrite(px, 1, np * 3, f) == np * 3;
    if (f && fclose(f) != 0) ok = 0;
    int64_t dims[4] = {1, 3, h, w};
    if (nhwc) dims[1] = h, dims[2] = w, dims[3] = 3;
    char err[256];
    if (ok && npy_write_file(argv[3], ERT_DTYPE_F32, 4, dims, x, np * 3 * sizeof *x, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        ok = 0;
    }
    free(px);
    free(x);
    return ok ? 0 : 1;
}

/* y = Identity(x), x (?, ?, ?, 3) f32: the model of the --nhwc image test. */
static int write_nhwc_model_mode(const char *path) {
    ert_context *ctx = NULL;
    ert_builder *b = NULL;
    ert_model *m = NULL;
    int64_t d[4] = {-1, -1, -1, 3};
    int32_t x, y;
    int ok = ert_context_create(NULL, &ctx) == ERT_OK && ert_builder_create(ctx, &b) == ERT_OK &&
             ert_builder_input(b, "x", ERT_DTYPE_F32, 4, d, &x) == ERT_OK &&
             ert_builder_unary(b, "Identity", x, &y) == ERT_OK && ert_builder_output(b, y, "y") == ERT_OK &&
             ert_builder_finish(b, &m) == ERT_OK && ert_model_save(m, path) == ERT_OK;
    if (!ok) fprintf(stderr, "write-nhwc-model: %s\n", ctx ? ert_last_error(ctx) : "no context");
    ert_model_free(m);
    ert_builder_free(b);
    ert_context_free(ctx);
    return ok ? 0 : 1;
}

/* '<f8' files are read as f32 (rounded to nearest) and say so. */
static void test_f8(void) {
    double v[5] = {0.1, -2.5, 1e30, 3.0, 1.0 / 3.0};
    unsigned char buf[512];
    size_t n = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }", v, sizeof v);
    npy_array a;
    char err[256];
    CHECK(npy_parse(buf, n, &a, err, sizeof err) == 0, "f8: %s", err);
    CHECK(a.dtype == ERT_DTYPE_F32 && a.from_f64 && a.bytes == 20 && a.ndim == 1 && a.dims[0] == 5, "f8 array read as f32");
    for (int i = 0; i < 5 && a.data; i++) CHECK(((float *)a.data)[i] == (float)v[i], "f8 element %d", i);
    npy_free(&a);
    CHECK(npy_parse(buf, n - 1, &a, err, sizeof err) != 0 && strstr(err, "truncated"), "truncated f8 refused: %s", err);
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "write") == 0) return write_mode(argc, argv);
    if (argc == 4 && strcmp(argv[1], "write-f8") == 0) return write_f8_mode(argv[2], argv[3]);
    if ((argc == 9 || argc == 10) && strcmp(argv[1], "write-image") == 0) return write_image_mode(argc, argv);
    if (argc == 3 && strcmp(argv[1], "write-nhwc-model") == 0) return write_nhwc_model_mode(argv[2]);
    if (argc == 4 && strcmp(argv[1], "write-bad") == 0) return write_bad_mode(argv[2], argv[3]);
    snprintf(g_dir, sizeof g_dir, "%s/ert_cli_npy_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) return fprintf(stderr, "mkdtemp failed\n"), 1;
    test_round_trips();
    test_matches_numpy();
    test_versions_and_forms();
    test_rejects();
    test_hostile();
    test_sanitize();
    test_f16();
    test_f8();
    rmdir(g_dir);
    return ert_test_finish("cli_npy");
}
