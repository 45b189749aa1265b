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
 * Layout and fusion decisions follow from those times, so they come back
 * identical. Not kept: cuBLASLt's 1x1-conv GEMM algorithms (ERT_SESSION_GEMM_1X1,
 * off by default; the opaque algorithm could only be checked with
 * cublasLtMatmulAlgoCheck) and the trainer's backward algorithms.
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

#define PLAN_FORMAT 1 /* bump when a record's meaning changes */
enum { REC_ALGO = 1, REC_FUSE = 2 };

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
             "rec=%zu,%zu;graph=%016llx",
             prop.name, c->cc_major, c->cc_minor, prop.multiProcessorCount, drv, rt, dnn, (size_t)cublasLtGetVersion(),
             ert_version(), PLAN_FORMAT, sizeof(algo_entry), fuse_sz, (unsigned long long)sig);
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

/* Records into c->algos and c->hints; false at the first bad one (then
 * nothing of the file is kept). */
static bool load_records(cuda_ctx *c, const void *pl, size_t n) {
    size_t pos = 0;
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
#endif
        } else {
            return false;
        }
    }
    return r == 0;
}

void ert_cuda_plan_free(cuda_ctx *c) {
    free(c->cache_path);
    free(c->cache_key);
    c->cache_path = c->cache_key = NULL;
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
    int n_algos0 = c->n_algos;
    if (!load_records(c, pl, n)) {
        ert_log(c->ctx, ERT_LOG_INFO, "plan cache %s: a record is malformed or out of range; measuring", path);
        c->n_algos = n_algos0;
#ifdef ERT_HAVE_CUDNN
        c->n_hints = 0;
#endif
    } else {
        c->cache_state = ERT_PLAN_CACHE_USED;
    }
    free(pl);
}

void ert_cuda_plan_cache_save(void *bctx) {
    cuda_ctx *c = bctx;
    if (!c->cache_path || (c->cache_state == ERT_PLAN_CACHE_USED && c->n_searches == 0)) return;
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
#endif
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

void ert_cuda_create_stats(void *bctx, ert_create_stats *out) {
    const cuda_ctx *c = bctx;
    out->mode = c->fast ? ERT_CREATE_FAST : ERT_CREATE_TUNED;
    out->plan_cache = c->cache_path ? c->cache_state : ERT_PLAN_CACHE_OFF;
    out->n_searches = c->n_searches;
    out->n_cached = c->n_cached;
}
