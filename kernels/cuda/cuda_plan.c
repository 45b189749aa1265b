/* CUDA backend: the plan cache (ert_session_options.plan_cache_dir) and the
 * create statistics.
 *
 * What create measures and the cache keeps, as payload records
 * (core/plan_cache.c has the file and its checks):
 *   REC_ALGO  one algo_entry: cudnnFind's pick for a conv shape, its
 *             workspace, the alternatives, the direct kernel's time;
 *   REC_FUSE  one fuse_hint: which of cuDNN's heuristic engine configs ran
 *             the conv + epilogue graph fastest (or none), and the two loop
 *             times that the channels-last decision (session step 4c) and
 *             the fuse choice compare.
 *   REC_PLAN  a fused plan as cuDNN serialises it (runtime-compiled engines
 *             only): finalising it skips the compilation (tens of ms a plan);
 *   REC_CHOICE one choice_entry: a cuBLASLt algorithm as its place in
 *             cuBLASLt's heuristics list for the shape (the key holds the
 *             cuBLASLt version, so the list comes back the same; the
 *             algorithm must still be usable with the recorded workspace),
 *             an attention path, a patchify conv's gather + GEMM or not.
 * Layout and fusion decisions follow from those times, so they come back
 * identical. Not kept: the trainer's backward algorithms.
 *
 * Trust: a record is used only when it is the right size and its fields are
 * in range (algorithm ids, workspace within the caps, counts); an algorithm is
 * asked of cuDNN again at its first use (cudnnGetConvolutionForwardWorkspaceSize
 * must accept it with no more workspace than recorded, else it is measured
 * anew), and a cached fused plan is finalised from cuDNN's own heuristics
 * list and checked numerically against conv + epilogue like a measured one.
 * The key holds the record sizes, so a build whose structs differ never reads
 * another's records.
 *
 * The file is written at the end of a create that measured anything (a
 * create that took everything from the file leaves it alone). */
#include "cuda_backend.h"

#include <stdio.h>

#define PLAN_FORMAT 2 /* bump when a record's meaning changes */
enum { REC_ALGO = 1, REC_FUSE = 2, REC_PLAN = 3, REC_CHOICE = 4 };
#define PLAN_JSON_TOTAL ((size_t)64 << 20) /* serialised plans a file may hold in all */

static void plan_key(cuda_ctx *c, uint64_t sig, char *key, size_t n) {
    struct cudaDeviceProp prop;
    int drv = 0, rt = 0;
    memset(&prop, 0, sizeof prop);
    if (cudaGetDeviceProperties(&prop, c->device) != cudaSuccess) cudaGetLastError();
    if (cudaDriverGetVersion(&drv) != cudaSuccess) cudaGetLastError();
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) cudaGetLastError();
    size_t dnn = 0;
#ifdef ERT_HAVE_CUDNN
    dnn = cudnnGetVersion();
#endif
    size_t fuse_sz = 0;
#ifdef ERT_HAVE_CUDNN
    fuse_sz = sizeof(fuse_hint);
#endif
    snprintf(key, n,
             "gpu=%.256s;cc=%d.%d;sms=%d;driver=%d;cudart=%d;cudnn=%zu;cublaslt=%zu;edgert=%s;format=%d;"
             "rec=%zu,%zu,%zu;graph=%016llx",
             prop.name, c->cc_major, c->cc_minor, prop.multiProcessorCount, drv, rt, dnn, (size_t)cublasLtGetVersion(),
             ert_version(), PLAN_FORMAT, sizeof(algo_entry), fuse_sz, sizeof(choice_entry), (unsigned long long)sig);
}

/* Is this algo_entry (from a file) within what the backend accepts? */
static bool algo_sane(const algo_entry *e) {
#ifdef ERT_HAVE_CUDNN
    if (e->n_alt < 0 || e->n_alt > 8 || (e->ok && (e->algo < 0 || e->algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT)) ||
        e->ws > CONV_WS_MAX || !(e->direct_ms == e->direct_ms))
        return false;
    for (int k = 0; k < e->n_alt; k++)
        if (e->alt[k] < 0 || e->alt[k] >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT || e->alt_ws[k] > CONV_WS_MAX) return false;
    return true;
#else
    (void)e;
    return false;
#endif
}

static bool choice_sane(const choice_entry *e) {
    if (!(e->ms == e->ms) || e->aux < 0) return false;
    switch (e->kind) {
    case CHOICE_LT: return e->pick >= -1 && e->pick < LT_ALGOS && (size_t)e->aux <= LT_WS_MAX;
    case CHOICE_ATTN: return e->pick >= 0 && e->pick <= 2;
    case CHOICE_PATCH: return e->pick == 0 || e->pick == 1;
    default: return false;
    }
}

const choice_entry *ert_cuda_choice_find(cuda_ctx *c, int kind, const int *key) {
    for (int i = 0; i < c->n_choices; i++) {
        choice_entry *e = &c->choices[i];
        if (e->kind != kind || memcmp(e->key, key, sizeof e->key)) continue;
        if (e->cached) {
            e->cached = false;
            c->n_cached++;
        }
        return e;
    }
    return NULL;
}

void ert_cuda_choice_put(cuda_ctx *c, int kind, const int *key, int pick, int64_t aux, float ms) {
    if (c->n_choices == c->cap_choices) {
        int cap = c->cap_choices ? 2 * c->cap_choices : 32;
        choice_entry *m = realloc(c->choices, (size_t)cap * sizeof *m);
        if (!m) return;
        c->choices = m;
        c->cap_choices = cap;
    }
    choice_entry *e = &c->choices[c->n_choices++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    memcpy(e->key, key, sizeof e->key);
    e->pick = pick;
    e->aux = aux;
    e->ms = ms;
}

/* Records into c->algos, c->hints, c->pjs and c->choices; false at the first
 * bad one (then nothing of the file is kept). */
static bool load_records(cuda_ctx *c, const void *pl, size_t n) {
    size_t pos = 0, json_total = 0;
    uint32_t tag, len;
    const void *d;
    int r;
    while ((r = ert_plan_rec_next(pl, n, &pos, &tag, &d, &len)) == 1) {
        if (tag == REC_ALGO && len == sizeof(algo_entry)) {
            algo_entry e;
            memcpy(&e, d, sizeof e);
            if (!algo_sane(&e)) return false;
            if (c->n_algos == c->cap_algos) {
                int cap = c->cap_algos ? 2 * c->cap_algos : 32;
                algo_entry *m = realloc(c->algos, (size_t)cap * sizeof *m);
                if (!m) return false;
                c->algos = m;
                c->cap_algos = cap;
            }
            e.cached = true;
            c->algos[c->n_algos++] = e;
#ifdef ERT_HAVE_CUDNN
        } else if (tag == REC_FUSE && len == sizeof(fuse_hint)) {
            fuse_hint h;
            memcpy(&h, d, sizeof h);
            if (h.cfg < -1 || h.cfg >= 64 || !(h.ms_fused == h.ms_fused) || !(h.ms_unfused == h.ms_unfused)) return false;
            fuse_hint *m = realloc(c->hints, (size_t)(c->n_hints + 1) * sizeof *m);
            if (!m) return false;
            c->hints = m;
            c->hints[c->n_hints++] = h;
        } else if (tag == REC_PLAN && len > sizeof(int) * FUSE_KEY &&
                   len - sizeof(int) * FUSE_KEY <= PLAN_JSON_MAX) {
            plan_json pj;
            pj.len = len - (uint32_t)(sizeof(int) * FUSE_KEY);
            json_total += pj.len;
            if (json_total > PLAN_JSON_TOTAL) return false;
            memcpy(pj.key, d, sizeof pj.key);
            pj.json = calloc((size_t)pj.len + 1, 1); /* NUL-terminated for cuDNN's parser */
            plan_json *m = pj.json ? realloc(c->pjs, (size_t)(c->n_pjs + 1) * sizeof *m) : NULL;
            if (!m) {
                free(pj.json);
                return false;
            }
            memcpy(pj.json, (const char *)d + sizeof pj.key, pj.len);
            c->pjs = m;
            c->pjs[c->n_pjs++] = pj;
#endif
        } else if (tag == REC_CHOICE && len == sizeof(choice_entry)) {
            choice_entry e;
            memcpy(&e, d, sizeof e);
            if (!choice_sane(&e)) return false;
            int n0 = c->n_choices;
            ert_cuda_choice_put(c, e.kind, e.key, e.pick, e.aux, e.ms);
            if (c->n_choices == n0) return false;
            c->choices[n0].cached = true;
        } else {
            return false;
        }
    }
    return r == 0;
}

static void free_pjs(cuda_ctx *c) {
#ifdef ERT_HAVE_CUDNN
    for (int i = 0; i < c->n_pjs; i++) free(c->pjs[i].json);
    free(c->pjs);
    c->pjs = NULL;
    c->n_pjs = 0;
#else
    (void)c;
#endif
}

void ert_cuda_plan_free(cuda_ctx *c) {
    free(c->cache_path);
    free(c->cache_key);
    c->cache_path = c->cache_key = NULL;
    free(c->choices);
    c->choices = NULL;
    c->n_choices = c->cap_choices = 0;
    free_pjs(c);
#ifdef ERT_HAVE_CUDNN
    free(c->hints);
    c->hints = NULL;
    c->n_hints = 0;
#endif
}

void ert_cuda_plan_cache_open(void *bctx, const char *dir, uint64_t signature) {
    cuda_ctx *c = bctx;
    char key[1024], path[4096];
    plan_key(c, signature, key, sizeof key);
    if (ert_plan_cache_path(dir, key, path, sizeof path) != ERT_OK) {
        ert_log(c->ctx, ERT_LOG_WARN, "plan cache folder '%.200s': path too long; not used", dir);
        return;
    }
    c->cache_path = malloc(strlen(path) + 1);
    c->cache_key = malloc(strlen(key) + 1);
    if (!c->cache_path || !c->cache_key) {
        ert_cuda_plan_free(c);
        return;
    }
    strcpy(c->cache_path, path);
    strcpy(c->cache_key, key);
    c->cache_state = ERT_PLAN_CACHE_WRITTEN; /* until the file proves usable */
    void *pl = NULL;
    size_t n = 0;
    ert_plan_cache_result res;
    if (ert_plan_cache_read(c->ctx, path, key, &pl, &n, &res) != ERT_OK || res != ERT_PLAN_CACHE_HIT) return;
    int n_algos0 = c->n_algos, n_choices0 = c->n_choices;
    if (!load_records(c, pl, n)) {
        ert_log(c->ctx, ERT_LOG_INFO, "plan cache %s: a record is malformed or out of range; measuring", path);
        c->n_algos = n_algos0;
        c->n_choices = n_choices0;
        free_pjs(c);
#ifdef ERT_HAVE_CUDNN
        c->n_hints = 0;
#endif
    } else {
        c->cache_state = ERT_PLAN_CACHE_USED;
    }
    free(pl);
}

static void cache_write(cuda_ctx *c) {
    ert_plan_buf b = {0};
    for (int i = 0; i < c->n_algos; i++) {
        algo_entry e = c->algos[i];
        e.cached = false;
        ert_plan_rec_put(&b, REC_ALGO, &e, sizeof e);
    }
#ifdef ERT_HAVE_CUDNN
    for (int i = 0; i < c->n_fuses; i++) {
        const fuse_entry *f = &c->fuses[i];
        fuse_hint h;
        memset(&h, 0, sizeof h);
        memcpy(h.key, f->key, sizeof h.key);
        h.cfg = f->ok ? f->cfg : -1;
        h.ms_fused = f->ms_fused;
        h.ms_unfused = f->ms_unfused;
        ert_plan_rec_put(&b, REC_FUSE, &h, sizeof h);
    }
    size_t json_total = 0;
    for (int i = 0; i < c->n_fuses; i++) {
        fuse_entry *f = &c->fuses[i];
        if (f->ok && f->json && json_total + f->json_len <= PLAN_JSON_TOTAL) {
            size_t kb = sizeof f->key;
            uint8_t *rec = malloc(kb + f->json_len);
            if (rec) {
                memcpy(rec, f->key, kb);
                memcpy(rec + kb, f->json, f->json_len);
                ert_plan_rec_put(&b, REC_PLAN, rec, (uint32_t)(kb + f->json_len));
                json_total += f->json_len;
            } else {
                b.failed = true;
            }
            free(rec);
        }
    }
#endif
    for (int i = 0; i < c->n_choices; i++) {
        choice_entry e = c->choices[i];
        e.cached = false;
        ert_plan_rec_put(&b, REC_CHOICE, &e, sizeof e);
    }
    if (b.failed) {
        ert_log(c->ctx, ERT_LOG_WARN, "plan cache %s not written: out of memory", c->cache_path);
        c->cache_state = ERT_PLAN_CACHE_NOT_WRITTEN;
    } else {
        c->cache_state = ert_plan_cache_write(c->ctx, c->cache_path, c->cache_key, b.p, b.n) == ERT_OK
                             ? ERT_PLAN_CACHE_WRITTEN
                             : ERT_PLAN_CACHE_NOT_WRITTEN;
    }
    ert_plan_buf_free(&b);
}

/* The end of create: the file written where create measured anything, and
 * what only create needed (serialised plans, the timing scratch) freed. */
void ert_cuda_plan_cache_save(void *bctx) {
    cuda_ctx *c = bctx;
    if (c->cache_path && !(c->cache_state == ERT_PLAN_CACHE_USED && c->n_searches == 0)) cache_write(c);
    free_pjs(c);
#ifdef ERT_HAVE_CUDNN
    for (int i = 0; i < c->n_fuses; i++) {
        free(c->fuses[i].json);
        c->fuses[i].json = NULL;
        c->fuses[i].json_len = 0;
    }
#endif
    ert_cuda_scratch_free(c);
}

void ert_cuda_create_stats(void *bctx, ert_create_stats *out) {
    const cuda_ctx *c = bctx;
    out->mode = c->fast ? ERT_CREATE_FAST : ERT_CREATE_TUNED;
    out->plan_cache = c->cache_path ? c->cache_state : ERT_PLAN_CACHE_OFF;
    out->n_searches = c->n_searches;
    out->n_cached = c->n_cached;
    out->measure_ms = c->t_measure;
    out->finalize_ms = c->t_finalize;
}
