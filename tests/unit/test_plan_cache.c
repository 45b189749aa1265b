/* The plan cache file (core/plan_cache.c), without a GPU:
 * 1. hit: a written file reads back the same random payload (sizes 0 to
 *    ~100 KB), in a folder the write made (three levels);
 * 2. miss: no file; another key (stale: another GPU, version or model);
 *    another format version (CRC made right, so only the version differs);
 * 3. corrupt: every single-bit flip over a small file, and random flips over
 *    a large one, never HIT; one byte appended, never HIT;
 * 4. truncated: every shorter length never HIT;
 * 5. unreadable: the path is a folder; unwritable: a read-only folder (or,
 *    as root, where permissions do not bind, a folder under a regular file)
 *    gives ERT_E_IO and a WARN line, and a later read is a clean miss;
 *    every miss logged at INFO with its reason;
 * 6. payload records: what ert_plan_rec_put writes, ert_plan_rec_next reads
 *    back; any truncation or a length past the end is -1, never a read
 *    outside the buffer (ASan phase);
 * 7. the key's model part (ert_plan_signature): same for the same model and
 *    options and for other large weight values; different for another shape
 *    constant, batch, precision, create mode, flags or input shape; and a CPU
 *    session's ert_session_create_stats (cache off, nothing measured, no
 *    file written, a bad create_mode refused). */
#include "runtime_internal.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ert_context *ctx;
static ert_test_rng rng;
static int n_info, n_warn;
static char last_msg[512];

static void on_log(void *user, ert_log_level lvl, const char *msg) {
    (void)user;
    if (lvl == ERT_LOG_INFO) n_info++;
    if (lvl == ERT_LOG_WARN) n_warn++;
    snprintf(last_msg, sizeof last_msg, "%s", msg);
}

static char dir[256];

static uint8_t *file_bytes(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

static void put_bytes(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(b, 1, n, f);
    fclose(f);
}

static ert_plan_cache_result read_res(const char *path, const char *key, void **pl, size_t *n) {
    ert_plan_cache_result r = ERT_PLAN_CACHE_HIT;
    int info0 = n_info;
    ert_status st = ert_plan_cache_read(ctx, path, key, pl, n, &r);
    CHECK(st == ERT_OK, "read %s: %s", path, ert_status_str(st));
    CHECK(n_info == info0 + 1, "read %s: one INFO line (%d)", path, n_info - info0);
    if (r != ERT_PLAN_CACHE_HIT) CHECK(*pl == NULL && *n == 0, "a miss returns no payload");
    return r;
}

static void test_hit_and_miss(void) {
    const char *key = "gpu=NVIDIA H100 80GB HBM3;cc=9.0;driver=13000;cuda=12080;cudnn=91000;edgert=0.1.0;graph=0123";
    char path[512], sub[300];
    snprintf(sub, sizeof sub, "%s/a/b/c", dir);
    CHECK(ert_plan_cache_path(sub, key, path, sizeof path) == ERT_OK, "path");
    CHECK(strstr(path, ".ertplan") && strncmp(path, sub, strlen(sub)) == 0, "path %s under %s", path, sub);
    void *pl = NULL;
    size_t n = 0;
    CHECK(read_res(path, key, &pl, &n) == ERT_PLAN_CACHE_ABSENT, "absent file is a miss");
    CHECK(strstr(last_msg, "no file"), "miss reason logged: %s", last_msg);
    static const size_t sizes[] = {0, 1, 17, 4096, 100003};
    for (int i = 0; i < 5; i++) {
        uint8_t *data = malloc(sizes[i] + 1);
        for (size_t k = 0; k < sizes[i]; k++) data[k] = (uint8_t)ert_test_int(&rng, 0, 255);
        CHECK(ert_plan_cache_write(ctx, path, key, data, sizes[i]) == ERT_OK, "write %zu bytes: %s", sizes[i], ert_last_error(ctx));
        CHECK(read_res(path, key, &pl, &n) == ERT_PLAN_CACHE_HIT, "hit after write of %zu bytes", sizes[i]);
        CHECK(n == sizes[i] && (n == 0 || memcmp(pl, data, n) == 0), "payload of %zu bytes back intact", sizes[i]);
        free(pl);
        free(data);
    }
    /* stale: one character of the key differs, or the key is longer */
    char other[200];
    snprintf(other, sizeof other, "%s", key);
    other[ert_test_int(&rng, 0, (int)strlen(key) - 1)] ^= 1;
    CHECK(read_res(path, other, &pl, &n) == ERT_PLAN_CACHE_STALE_KEY, "another key is stale");
    snprintf(other, sizeof other, "%s5", key);
    CHECK(read_res(path, other, &pl, &n) == ERT_PLAN_CACHE_STALE_KEY, "a longer key is stale");
    CHECK(strstr(last_msg, "key differs"), "stale reason logged: %s", last_msg);
    /* another format version with a valid CRC */
    size_t fn = 0;
    uint8_t *b = file_bytes(path, &fn);
    CHECK(b && fn > 28, "read back the file");
    if (!b || fn <= 28) return;
    b[8] = (uint8_t)(ERT_PLAN_CACHE_VERSION + 1);
    uint32_t crc = ert_crc32(0, b, fn - 4);
    for (int k = 0; k < 4; k++) b[fn - 4 + k] = (uint8_t)(crc >> 8 * k);
    put_bytes(path, b, fn);
    CHECK(read_res(path, key, &pl, &n) == ERT_PLAN_CACHE_BAD_VERSION, "another version is a miss");
    free(b);
    /* the path is a folder */
    CHECK(read_res(dir, key, &pl, &n) == ERT_PLAN_CACHE_UNREADABLE, "a folder is unreadable");
}

static void test_corrupt_truncated(void) {
    const char *key = "k=1";
    char path[512];
    snprintf(path, sizeof path, "%s/c.ertplan", dir);
    uint8_t small[40], *big = malloc(20000);
    for (size_t k = 0; k < sizeof small; k++) small[k] = (uint8_t)ert_test_int(&rng, 0, 255);
    for (size_t k = 0; k < 20000; k++) big[k] = (uint8_t)ert_test_int(&rng, 0, 255);
    for (int which = 0; which < 2; which++) {
        CHECK(ert_plan_cache_write(ctx, path, key, which ? big : small, which ? 20000 : sizeof small) == ERT_OK, "write");
        size_t fn = 0;
        uint8_t *good = file_bytes(path, &fn), *b = malloc(fn + 1);
        CHECK(good && fn > 28, "read back the file");
        if (!good || fn <= 28) {
            free(good);
            free(b);
            break;
        }
        void *pl;
        size_t n;
        int bad = 0, tries = 0;
        /* small: every bit; big: 300 random bits */
        for (size_t bit = 0; bit < (which ? 300 : fn * 8); bit++, tries++) {
            size_t at = which ? (size_t)ert_test_int(&rng, 0, (int)(fn * 8 - 1)) : bit;
            memcpy(b, good, fn);
            b[at / 8] ^= (uint8_t)(1u << (at % 8));
            put_bytes(path, b, fn);
            ert_plan_cache_result r = ERT_PLAN_CACHE_HIT;
            (void)ert_plan_cache_read(ctx, path, key, &pl, &n, &r);
            if (r == ERT_PLAN_CACHE_HIT) {
                bad++;
                free(pl);
            }
        }
        CHECK(bad == 0, "%s file: %d of %d bit flips read as a hit", which ? "large" : "small", bad, tries);
        bad = 0;
        for (size_t len = 0; len < fn; len += which ? 97 : 1) {
            put_bytes(path, good, len);
            ert_plan_cache_result r = ERT_PLAN_CACHE_HIT;
            (void)ert_plan_cache_read(ctx, path, key, &pl, &n, &r);
            if (r != ERT_PLAN_CACHE_TRUNCATED && r != ERT_PLAN_CACHE_CORRUPT) bad++;
            if (r == ERT_PLAN_CACHE_HIT) free(pl);
        }
        CHECK(bad == 0, "%s file: %d truncations not judged truncated/corrupt", which ? "large" : "small", bad);
        memcpy(b, good, fn);
        b[fn] = 0;
        put_bytes(path, b, fn + 1);
        CHECK(read_res(path, key, &pl, &n) == ERT_PLAN_CACHE_CORRUPT, "a byte appended is corrupt");
        put_bytes(path, good, fn - 1);
        CHECK(read_res(path, key, &pl, &n) == ERT_PLAN_CACHE_TRUNCATED, "one byte short is truncated");
        CHECK(strstr(last_msg, "truncated"), "truncation logged: %s", last_msg);
        free(good);
        free(b);
    }
    free(big);
}

static void test_unwritable(void) {
    char ro[300], path[512];
    bool root = geteuid() == 0;
    if (root) { /* permissions do not bind root: a folder under a regular file cannot be made either */
        snprintf(ro, sizeof ro, "%s/plainfile", dir);
        put_bytes(ro, (const uint8_t *)"x", 1);
        snprintf(path, sizeof path, "%s/sub/p.ertplan", ro);
    } else {
        snprintf(ro, sizeof ro, "%s/ro", dir);
        mkdir(ro, 0755);
        chmod(ro, 0555);
        snprintf(path, sizeof path, "%s/p.ertplan", ro);
    }
    int warn0 = n_warn;
    ert_status st = ert_plan_cache_write(ctx, path, "k", "abc", 3);
    CHECK(st == ERT_E_IO, "write under %s: %s (want ERT_E_IO)", root ? "a regular file" : "a read-only folder",
          ert_status_str(st));
    CHECK(n_warn == warn0 + 1 && strstr(last_msg, "not written"), "one WARN line: %s", last_msg);
    void *pl;
    size_t n;
    ert_plan_cache_result r = read_res(path, "k", &pl, &n);
    CHECK(r == ERT_PLAN_CACHE_ABSENT || r == ERT_PLAN_CACHE_UNREADABLE, "nothing there to read (%s)",
          ert_plan_cache_result_str(r));
    if (!root) chmod(ro, 0755);
}

static void test_records(void) {
    ert_plan_buf b = {0};
    uint32_t lens[50];
    for (int i = 0; i < 50; i++) {
        lens[i] = (uint32_t)ert_test_int(&rng, 0, 300);
        uint8_t d[300];
        for (uint32_t k = 0; k < lens[i]; k++) d[k] = (uint8_t)(i + k);
        CHECK(ert_plan_rec_put(&b, (uint32_t)i * 7, d, lens[i]) == ERT_OK, "put");
    }
    size_t pos = 0;
    uint32_t tag, len;
    const void *data;
    int i = 0, r;
    while ((r = ert_plan_rec_next(b.p, b.n, &pos, &tag, &data, &len)) == 1) {
        bool ok = i < 50 && tag == (uint32_t)i * 7 && len == lens[i];
        for (uint32_t k = 0; ok && k < len; k++) ok = ((const uint8_t *)data)[k] == (uint8_t)(i + k);
        CHECK(ok, "record %d back intact", i);
        i++;
    }
    CHECK(r == 0 && i == 50, "50 records then the end (%d, %d)", i, r);
    /* every truncation that cuts a record is -1 before the cut; copies of the
     * exact size so ASan sees any read past the end */
    int bad = 0;
    for (size_t cut = 1; cut < b.n; cut += 13) {
        uint8_t *t = malloc(cut);
        memcpy(t, b.p, cut);
        pos = 0;
        while ((r = ert_plan_rec_next(t, cut, &pos, &tag, &data, &len)) == 1)
            if ((const uint8_t *)data + len > t + cut) bad++;
        if (r == 0 && pos != cut) bad++;
        free(t);
    }
    CHECK(bad == 0, "truncated record streams: %d reads past the end", bad);
    /* a huge length */
    uint8_t h[12] = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    pos = 0;
    CHECK(ert_plan_rec_next(h, sizeof h, &pos, &tag, &data, &len) == -1, "length past the end is malformed");
    ert_plan_buf_free(&b);
}

/* x (N, 3, 9, 9) -> Conv(w: 4x3x3x3, b) -> Relu -> Reshape(shape) -> y;
 * `shape_last` is the Reshape constant's last value (a small constant, so in
 * the signature); `wscale` scales the conv weights (large enough to be left
 * out of it). */
static ert_model *small_model(int64_t shape_last, float wscale) {
    ert_builder *b;
    ert_model *m = NULL;
    if (ert_builder_create(ctx, &b) != ERT_OK) return NULL;
    int64_t xd[4] = {-1, 3, 9, 9}, wd[4] = {4, 3, 3, 3}, bd[1] = {4}, sd[1] = {2}, shape[2] = {-1, shape_last};
    float w[108], bias[4] = {0.1f, -0.2f, 0.3f, 0};
    for (int i = 0; i < 108; i++) w[i] = wscale * (float)((i % 7) - 3);
    int32_t x, wi, bi, si, c, r, y;
    bool ok = ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x) == ERT_OK &&
              ert_builder_weight(b, "w", ERT_DTYPE_F32, 4, wd, w, &wi) == ERT_OK &&
              ert_builder_weight(b, "b", ERT_DTYPE_F32, 1, bd, bias, &bi) == ERT_OK &&
              ert_builder_weight(b, "shape", ERT_DTYPE_I64, 1, sd, shape, &si) == ERT_OK &&
              ert_builder_conv2d(b, x, wi, bi, 1, 1, 1, 1, &c) == ERT_OK && ert_builder_unary(b, "Relu", c, &r) == ERT_OK;
    int32_t rin[2] = {r, si};
    ok = ok && ert_builder_node(b, "Reshape", "rs", rin, 2, NULL, 0, &y, 1) == ERT_OK &&
         ert_builder_output(b, y, "y") == ERT_OK && ert_builder_finish(b, &m) == ERT_OK;
    ert_builder_free(b);
    CHECK(ok && m, "small model built: %s", ert_last_error(ctx));
    return m;
}

/* The key's model part: equal for equal models and options, different when
 * anything that changes create's measurements changes; and the create
 * statistics of a CPU session (the CPU backend keeps no plan cache). */
static void test_signature_and_stats(void) {
    ert_model *m1 = small_model(81 * 4, 1), *m2 = small_model(81 * 4, 2), *m3 = small_model(81 * 2, 1);
    if (!m1 || !m2 || !m3) return;
    ert_session_options o = {.batch = 1}, o2;
    uint64_t s1 = ert_plan_signature(m1, &o);
    CHECK(s1 == ert_plan_signature(m1, &o), "signature is deterministic");
    CHECK(s1 == ert_plan_signature(m2, &o), "other large weight values: same signature (same plans)");
    CHECK(s1 != ert_plan_signature(m3, &o), "another Reshape constant: another signature");
    o2 = o;
    o2.batch = 2;
    CHECK(s1 != ert_plan_signature(m1, &o2), "another batch: another signature");
    o2 = o;
    o2.precision = ERT_DTYPE_F16;
    CHECK(s1 != ert_plan_signature(m1, &o2), "another precision: another signature");
    o2 = o;
    o2.create_mode = ERT_CREATE_FAST;
    CHECK(s1 != ert_plan_signature(m1, &o2), "another create mode: another signature");
    o2 = o;
    o2.flags = ERT_SESSION_NO_NHWC;
    CHECK(s1 != ert_plan_signature(m1, &o2), "other flags: another signature");
    ert_input_shape is = {.name = "x", .ndim = 4, .dims = {1, 3, 9, 9}};
    o2 = o;
    o2.input_shapes = &is;
    o2.n_input_shapes = 1;
    CHECK(s1 != ert_plan_signature(m1, &o2), "an input shape given: another signature");
    /* a CPU session with the cache asked for: no file, stats say off */
    char cdir[300];
    snprintf(cdir, sizeof cdir, "%s/cpu_cache", dir);
    ert_session_options so = {.device = ERT_DEVICE_CPU, .plan_cache_dir = cdir, .create_mode = ERT_CREATE_FAST};
    ert_session *s = NULL;
    CHECK(ert_session_create(m1, &so, &s) == ERT_OK, "CPU session: %s", ert_last_error(ctx));
    ert_create_stats st;
    memset(&st, 0xA5, sizeof st);
    CHECK(ert_session_create_stats(s, &st) == ERT_OK, "create stats");
    CHECK(st.plan_cache == ERT_PLAN_CACHE_OFF && st.n_searches == 0 && st.n_cached == 0 && st.mode == ERT_CREATE_FAST &&
              st.create_ms >= 0 && st.create_ms < 60e3,
          "CPU create stats: cache %d, searches %d, cached %d, mode %d, %.3f ms", (int)st.plan_cache, st.n_searches,
          st.n_cached, (int)st.mode, st.create_ms);
    struct stat sb;
    CHECK(stat(cdir, &sb) != 0, "the CPU backend writes no plan cache");
    CHECK(ert_session_create_stats(NULL, &st) == ERT_E_ARG && ert_session_create_stats(s, NULL) == ERT_E_ARG, "NULL args");
    ert_session_free(s);
    so.create_mode = (ert_create_mode)7;
    CHECK(ert_session_create(m1, &so, &s) == ERT_E_ARG, "create_mode 7 refused");
    ert_model_free(m1);
    ert_model_free(m2);
    ert_model_free(m3);
}

int main(void) {
    ert_test_rng_init(&rng, "plan_cache");
    ert_context_options co = {.log = on_log, .log_level = ERT_LOG_INFO};
    if (ert_context_create(&co, &ctx) != ERT_OK) return 1;
    snprintf(dir, sizeof dir, "/tmp/ert_plan_cache_%d", (int)getpid());
    mkdir(dir, 0755);
    test_hit_and_miss();
    test_corrupt_truncated();
    test_unwritable();
    test_records();
    test_signature_and_stats();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s 2>/dev/null; rm -rf %s", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    ert_context_free(ctx);
    return ert_test_finish("plan_cache");
}
