/*
 * The plan cache file: what a backend measured at session create (algorithm
 * choices, execution plans, layout decisions), kept between processes so a
 * second create skips the measuring. The payload is the backend's; this file
 * only keeps it honest.
 *
 * File (little-endian):
 *   0   magic "ERTPLAN\0"                       8 bytes
 *   8   format version (ERT_PLAN_CACHE_VERSION) u32
 *   12  key bytes K                             u32 (<= ERT_PLAN_CACHE_KEY_MAX)
 *   16  payload bytes P                         u64
 *   24  key (text, no NUL)                      K bytes
 *   24+K payload                                P bytes
 *   end CRC-32 of every byte before it          u32
 * The key names everything the payload depends on: GPU name and compute
 * capability, driver, CUDA / cuDNN / cuBLAS versions, edgert's version, the
 * backend's record format and the model's shape signature (graph, shapes,
 * dtypes, session options). Its hash names the file (<dir>/<16 hex>.ertplan),
 * so models and GPUs share one folder; the key inside is compared in full.
 *
 * Reading treats the file as hostile: a missing, unreadable, short, oversized,
 * bit-flipped, other-version or other-key file is a miss, logged (INFO) with
 * the reason, never an error and never trusted; the caller measures as if
 * there were no cache and writes a fresh file. A valid CRC does not make the
 * payload trustworthy (anyone can write one): the backend checks every record
 * it reads against what the library accepts. Writing goes through the one
 * atomic writer (core/fileio.c), creating missing folders; a failure (a
 * read-only folder) is logged (WARN) and returned for the caller to ignore.
 */
#include "ert_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char MAGIC[8] = {'E', 'R', 'T', 'P', 'L', 'A', 'N', 0};
#define HEAD 24

const char *ert_plan_cache_result_str(ert_plan_cache_result r) {
    switch (r) {
    case ERT_PLAN_CACHE_HIT: return "hit";
    case ERT_PLAN_CACHE_ABSENT: return "no file";
    case ERT_PLAN_CACHE_STALE_KEY: return "made for another GPU, library version or model (key differs)";
    case ERT_PLAN_CACHE_BAD_VERSION: return "another file format version";
    case ERT_PLAN_CACHE_CORRUPT: return "corrupt (magic, sizes or checksum)";
    case ERT_PLAN_CACHE_TRUNCATED: return "truncated";
    case ERT_PLAN_CACHE_UNREADABLE: return "unreadable";
    }
    return "?";
}

uint64_t ert_fnv64(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The file name only: collisions are caught by the key comparison inside. */
static uint64_t key_hash(const char *key) { return ert_fnv64(ERT_FNV64_INIT, key, strlen(key)); }

ert_status ert_plan_cache_path(const char *dir, const char *key, char *out, size_t cap) {
    if (!dir || !*dir || !key || !out) return ERT_E_ARG;
    size_t n = strlen(dir);
    int w = snprintf(out, cap, "%s%s%016llx.ertplan", dir, dir[n - 1] == '/' ? "" : "/", (unsigned long long)key_hash(key));
    return w < 0 || (size_t)w >= cap ? ERT_E_ARG : ERT_OK;
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static void wr64(uint8_t *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

/* The whole file (at most ERT_PLAN_CACHE_FILE_MAX bytes) into *buf. */
static ert_plan_cache_result read_all(const char *path, uint8_t **buf, size_t *n, int *err) {
    *buf = NULL;
    *err = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        *err = errno;
        return errno == ENOENT ? ERT_PLAN_CACHE_ABSENT : ERT_PLAN_CACHE_UNREADABLE;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        *err = errno;
        fclose(f);
        return ERT_PLAN_CACHE_UNREADABLE;
    }
    if ((uint64_t)st.st_size > ERT_PLAN_CACHE_FILE_MAX) {
        fclose(f);
        return ERT_PLAN_CACHE_CORRUPT;
    }
    size_t sz = (size_t)st.st_size;
    uint8_t *b = malloc(sz ? sz : 1);
    if (!b) {
        fclose(f);
        *err = ENOMEM;
        return ERT_PLAN_CACHE_UNREADABLE;
    }
    size_t got = fread(b, 1, sz, f);
    fclose(f);
    *buf = b;
    *n = got; /* shorter than stat said (shrunk meanwhile): judged as read */
    return ERT_PLAN_CACHE_HIT;
}

/* Judge a file image; on HIT *off and *len locate the payload. */
static ert_plan_cache_result judge(const uint8_t *b, size_t n, const char *key, size_t *off, size_t *len) {
    if (n < sizeof MAGIC) return memcmp(b, MAGIC, n) == 0 ? ERT_PLAN_CACHE_TRUNCATED : ERT_PLAN_CACHE_CORRUPT;
    if (memcmp(b, MAGIC, sizeof MAGIC) != 0) return ERT_PLAN_CACHE_CORRUPT;
    if (n < HEAD + 4) return ERT_PLAN_CACHE_TRUNCATED;
    if (rd32(b + 8) != ERT_PLAN_CACHE_VERSION) return ERT_PLAN_CACHE_BAD_VERSION;
    uint64_t k = rd32(b + 12), p = rd64(b + 16);
    if (k > ERT_PLAN_CACHE_KEY_MAX || p > ERT_PLAN_CACHE_FILE_MAX) return ERT_PLAN_CACHE_CORRUPT;
    uint64_t want = HEAD + k + p + 4; /* no overflow: both bounded above */
    if (n < want) return ERT_PLAN_CACHE_TRUNCATED;
    if (n > want) return ERT_PLAN_CACHE_CORRUPT;
    if (ert_crc32(0, b, n - 4) != rd32(b + n - 4)) return ERT_PLAN_CACHE_CORRUPT;
    if (k != strlen(key) || memcmp(b + HEAD, key, k) != 0) return ERT_PLAN_CACHE_STALE_KEY;
    *off = HEAD + (size_t)k;
    *len = (size_t)p;
    return ERT_PLAN_CACHE_HIT;
}

ert_status ert_plan_cache_read(ert_context *ctx, const char *path, const char *key, void **payload, size_t *n,
                               ert_plan_cache_result *res) {
    if (!path || !key || !payload || !n || !res) return ERT_E_ARG;
    *payload = NULL;
    *n = 0;
    uint8_t *b;
    size_t sz = 0, off = 0, len = 0;
    int err;
    ert_plan_cache_result r = read_all(path, &b, &sz, &err);
    if (r == ERT_PLAN_CACHE_HIT) r = judge(b, sz, key, &off, &len);
    *res = r;
    if (r != ERT_PLAN_CACHE_HIT) {
        free(b);
        ert_log(ctx, ERT_LOG_INFO, "plan cache %s: %s%s%s; measuring", path, ert_plan_cache_result_str(r),
                err ? ": " : "", err ? strerror(err) : "");
        return ERT_OK;
    }
    memmove(b, b + off, len); /* the payload at the start of the block the caller frees */
    *payload = b;
    *n = len;
    ert_log(ctx, ERT_LOG_INFO, "plan cache %s: hit (%zu bytes)", path, len);
    return ERT_OK;
}

/* mkdir -p of path's folder (the part before the last '/'). */
static ert_status make_dirs(ert_context *ctx, const char *path) {
    size_t n = strlen(path);
    char *d = malloc(n + 1);
    if (!d) return ERT_E_NOMEM;
    memcpy(d, path, n + 1);
    char *slash = strrchr(d, '/');
    ert_status st = ERT_OK;
    if (slash && slash != d) {
        *slash = 0;
        for (char *p = d + 1;; p++) {
            bool end = *p == 0;
            if (*p == '/' || end) {
                *p = 0;
                if (mkdir(d, 0755) != 0 && errno != EEXIST) {
                    st = ert_set_error(ctx, ERT_E_IO, "cannot create folder %s: %s", d, strerror(errno));
                    break;
                }
                if (end) break;
                *p = '/';
            }
        }
    }
    free(d);
    return st;
}

ert_status ert_plan_cache_write(ert_context *ctx, const char *path, const char *key, const void *payload, size_t n) {
    if (!path || !key || (!payload && n)) return ERT_E_ARG;
    size_t k = strlen(key);
    if (k > ERT_PLAN_CACHE_KEY_MAX || n > ERT_PLAN_CACHE_FILE_MAX - HEAD - k - 4)
        return ert_set_error(ctx, ERT_E_ARG, "plan cache: key (%zu bytes) or payload (%zu bytes) too large", k, n);
    size_t total = HEAD + k + n + 4;
    uint8_t *b = malloc(total);
    if (!b) return ert_set_error(ctx, ERT_E_NOMEM, "plan cache: %zu bytes", total);
    memcpy(b, MAGIC, sizeof MAGIC);
    wr32(b + 8, ERT_PLAN_CACHE_VERSION);
    wr32(b + 12, (uint32_t)k);
    wr64(b + 16, n);
    memcpy(b + HEAD, key, k);
    if (n) memcpy(b + HEAD + k, payload, n);
    wr32(b + total - 4, ert_crc32(0, b, total - 4));
    ert_status st = make_dirs(ctx, path);
    if (st == ERT_OK) st = ert_file_write_atomic(ctx, path, b, total);
    free(b);
    if (st != ERT_OK) ert_log(ctx, ERT_LOG_WARN, "plan cache %s not written (%s); the next create measures again", path,
                              ert_last_error(ctx));
    else ert_log(ctx, ERT_LOG_INFO, "plan cache %s written (%zu bytes)", path, n);
    return st;
}

/* ------------------------------------------------------------------ records */

ert_status ert_plan_rec_put(ert_plan_buf *b, uint32_t tag, const void *data, uint32_t len) {
    if (b->failed) return ERT_E_NOMEM;
    size_t need = b->n + 8 + (size_t)len;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return ERT_E_NOMEM;
        }
        b->p = p;
        b->cap = cap;
    }
    wr32(b->p + b->n, tag);
    wr32(b->p + b->n + 4, len);
    if (len) memcpy(b->p + b->n + 8, data, len);
    b->n = need;
    return ERT_OK;
}

void ert_plan_buf_free(ert_plan_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

int ert_plan_rec_next(const void *payload, size_t n, size_t *pos, uint32_t *tag, const void **data, uint32_t *len) {
    const uint8_t *p = payload;
    if (*pos == n) return 0;
    if (*pos > n || n - *pos < 8) return -1;
    uint32_t l = rd32(p + *pos + 4);
    if (l > n - *pos - 8) return -1;
    *tag = rd32(p + *pos);
    *len = l;
    *data = p + *pos + 8;
    *pos += 8 + (size_t)l;
    return 1;
}
