/* ert.Attention, f32: the plain reference (and the oracle of the CUDA
 * kernels). For each row (b, h, i) of the queries:
 *   s_j = scale * <q_i, k_j> + bias_ij  (j < nk, float accumulation)
 *   p_j = exp(s_j - max s) / sum_j exp(s_j - max s)
 *   y_i = sum_j p_j v_j
 * q, k, v, bias and y are strided views (ert_attn_params, core/ops/attention.c
 * checked them against their tensors at create). The rows are split into one
 * chunk per worker; chunk c uses workspace slot c (nk + head_dim floats).
 *
 * Where y's head_dim is contiguous and the node workspace holds it
 * (core/ops/attention.c sizes it), each (batch, head) runs as two SGEMMs
 * instead (any q/k/v strides: the SGEMM takes row and column strides):
 * S = scale q k^T (nq x nk), each row + bias and softmaxed in place
 * (8 lanes at a time), y = S v, as tasks over (batch, head, query rows),
 * one per worker slot (attention_gemm below). The scalar rows above took
 * DeiT-Tiny's attention from 10 ms of SGEMMs to 100 ms. */
#include "act_vec.h"
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

typedef struct attn_job {
    const ert_attn_params *p;
    const float *q, *k, *v, *bias;
    float *y, *ws;
    int64_t rows, n_chunks;
} attn_job;

static void attn_rows(const attn_job *j, int64_t r0, int64_t r1, float *s, float *acc) {
    const ert_attn_params *p = j->p;
    const int64_t D = p->head_dim, nk = p->nk;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i = r % p->nq, bh = r / p->nq, h = bh % p->heads, b = bh / p->heads;
        const float *q = j->q + p->q[ERT_ATTN_OFF] + b * p->q[ERT_ATTN_SB] + h * p->q[ERT_ATTN_SH] + i * p->q[ERT_ATTN_ST];
        const float *k = j->k + p->k[ERT_ATTN_OFF] + b * p->k[ERT_ATTN_SB] + h * p->k[ERT_ATTN_SH];
        const float *v = j->v + p->v[ERT_ATTN_OFF] + b * p->v[ERT_ATTN_SB] + h * p->v[ERT_ATTN_SH];
        const float *bi = j->bias ? j->bias + p->bias[ERT_ATTN_OFF] + b * p->bias[ERT_ATTN_SB] + h * p->bias[ERT_ATTN_SH] +
                                        i * p->bias[ERT_ATTN_ST]
                                  : NULL;
        float m = -INFINITY;
        for (int64_t t = 0; t < nk; t++) {
            const float *kt = k + t * p->k[ERT_ATTN_ST];
            float dot = 0.0f;
            for (int64_t d = 0; d < D; d++) dot += q[d * p->q[ERT_ATTN_SD]] * kt[d * p->k[ERT_ATTN_SD]];
            s[t] = p->scale * dot + (bi ? bi[t * p->bias[ERT_ATTN_SD]] : 0.0f);
            if (s[t] > m) m = s[t];
        }
        float sum = 0.0f;
        for (int64_t t = 0; t < nk; t++) {
            s[t] = expf(s[t] - m);
            sum += s[t];
        }
        for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
        for (int64_t t = 0; t < nk; t++) {
            const float *vt = v + t * p->v[ERT_ATTN_ST];
            for (int64_t d = 0; d < D; d++) acc[d] += s[t] * vt[d * p->v[ERT_ATTN_SD]];
        }
        float inv = 1.0f / sum;
        float *y = j->y + p->o[ERT_ATTN_OFF] + b * p->o[ERT_ATTN_SB] + h * p->o[ERT_ATTN_SH] + i * p->o[ERT_ATTN_ST];
        for (int64_t d = 0; d < D; d++) y[d * p->o[ERT_ATTN_SD]] = acc[d] * inv;
    }
}

static void attn_chunks(void *arg, int64_t c0, int64_t c1) {
    const attn_job *j = arg;
    for (int64_t c = c0; c < c1; c++) {
        float *s = j->ws + c * (j->p->nk + j->p->head_dim);
        attn_rows(j, j->rows * c / j->n_chunks, j->rows * (c + 1) / j->n_chunks, s, s + j->p->nk);
    }
}

/* The GEMM path's scratch, as core/ops/attention.c sized the node's
 * workspace for the session's threads (0: the path does not apply): one
 * slot per worker, each an S block and a one-worker SGEMM scratch. */
static size_t gemm_workspace(const ert_kargs *a) {
    return ert_attn_gemm_workspace(&a->params->attn, a->pool ? ert_threadpool_size(a->pool) : 1, ert_cpu_sgemm_workspace);
}

/* s[0..n) += bias, then softmax in place: max, exp and sum, scale, each 8
 * (x86) or 4 (NEON) lanes at a time; the scalar max and scale loops and a
 * lane-by-lane sum were two thirds of the attention kernel's own
 * instructions (callgrind, DeiT-Tiny). */
static inline __attribute__((always_inline)) void softmax_row(float *s, int64_t n, const float *bias, int64_t bsd) {
    if (bias)
        for (int64_t t = 0; t < n; t++) s[t] += bias[t * bsd];
    float m = -INFINITY;
    int64_t t = 0;
#if defined(__GNUC__)
    const ert_av8 z = {0};
    ert_av8 vm = z - INFINITY, vs = z;
    for (; t + ERT_AV_N <= n; t += ERT_AV_N) {
        ert_av8 v;
        memcpy(&v, s + t, sizeof v);
        vm = ERT_AV_SEL(v > vm, v, vm); /* a NaN never wins: it shows up again in exp and the sum */
    }
    for (int l = 0; l < ERT_AV_N; l++) m = vm[l] > m ? vm[l] : m;
#endif
    for (; t < n; t++) m = s[t] > m ? s[t] : m;
    float sum = 0.0f;
    t = 0;
#if defined(__GNUC__)
    for (; t + ERT_AV_N <= n; t += ERT_AV_N) {
        ert_av8 v;
        memcpy(&v, s + t, sizeof v);
        v -= m;
        ert_av_exp(&v);
        memcpy(s + t, &v, sizeof v);
        vs += v;
    }
    for (int l = 0; l < ERT_AV_N; l++) sum += vs[l];
#endif
    for (; t < n; t++) sum += (s[t] = expf(s[t] - m));
    const float inv = 1.0f / sum;
    t = 0;
#if defined(__GNUC__)
    for (; t + ERT_AV_N <= n; t += ERT_AV_N) {
        ert_av8 v;
        memcpy(&v, s + t, sizeof v);
        v *= inv;
        memcpy(s + t, &v, sizeof v);
    }
#endif
    for (; t < n; t++) s[t] *= inv;
}

/* The GEMM path's tasks: (batch, head, block of query rows), nqb blocks per
 * head, so that batch * heads * nqb is a multiple of the workers (DeiT-Tiny
 * has 3 heads: 4 workers get 12 tasks, not 3). Each task is independent:
 *   S = scale q[i0:i1] k^T; softmax rows of S; y[i0:i1] = S v,
 * two single-worker SGEMMs in its worker's slot (S, then SGEMM scratch).
 * Worker chunk c runs tasks [n_tasks c / n_chunks, n_tasks (c+1) / n_chunks).
 * Before, every (batch, head) ran two SGEMMs threaded inside (k and v packed
 * by every worker, a fork and join per SGEMM) with its softmax on one
 * thread. */
typedef struct attn_gjob {
    const ert_kargs *a;
    char *ws;
    size_t slot_bytes, s_bytes;
    int64_t nqb, n_tasks, n_chunks;
    atomic_int failed;
} attn_gjob;

static inline __attribute__((always_inline)) void attn_gemm_body(void *arg, int64_t c0, int64_t c1) {
    attn_gjob *j = arg;
    const ert_kargs *a = j->a;
    const ert_attn_params *p = &a->params->attn;
    const int64_t nq = p->nq, nk = p->nk, D = p->head_dim;
    const float *q0 = a->in[0].data, *k0 = a->in[1].data, *v0 = a->in[2].data;
    const float *b0 = p->has_bias && a->n_in > 3 ? a->in[3].data : NULL;
    float *y0 = a->out[0].data;
    for (int64_t c = c0; c < c1; c++) {
        float *S = (float *)(j->ws + (size_t)c * j->slot_bytes);
        void *gws = j->ws + (size_t)c * j->slot_bytes + j->s_bytes;
        const size_t gws_bytes = j->slot_bytes - j->s_bytes;
        for (int64_t t = j->n_tasks * c / j->n_chunks; t < j->n_tasks * (c + 1) / j->n_chunks; t++) {
            const int64_t bh = t / j->nqb, qb = t % j->nqb, b = bh / p->heads, h = bh % p->heads;
            const int64_t i0 = nq * qb / j->nqb, rows = nq * (qb + 1) / j->nqb - i0;
            if (rows <= 0) continue;
#define AT(v) ((v)[ERT_ATTN_OFF] + b * (v)[ERT_ATTN_SB] + h * (v)[ERT_ATTN_SH])
            ert_sgemm_args g1 = {
                .M = rows, .N = nk, .K = D, .a = q0 + AT(p->q) + i0 * p->q[ERT_ATTN_ST], .a_rs = p->q[ERT_ATTN_ST],
                .a_cs = p->q[ERT_ATTN_SD], .alpha = p->scale, .b = k0 + AT(p->k), .b_rs = p->k[ERT_ATTN_SD],
                .b_cs = p->k[ERT_ATTN_ST], .c = S, .ldc = nk, .choice = a->choice,
            };
            if (ert_cpu_sgemm(&g1, gws, gws_bytes, NULL) != ERT_OK) {
                atomic_store(&j->failed, 1);
                return;
            }
            for (int64_t i = 0; i < rows; i++)
                softmax_row(S + i * nk, nk, b0 ? b0 + AT(p->bias) + (i0 + i) * p->bias[ERT_ATTN_ST] : NULL,
                            p->bias[ERT_ATTN_SD]);
            ert_sgemm_args g2 = {
                .M = rows, .N = D, .K = nk, .a = S, .a_rs = nk, .a_cs = 1, .alpha = 1.0f,
                .b = v0 + AT(p->v), .b_rs = p->v[ERT_ATTN_ST], .b_cs = p->v[ERT_ATTN_SD],
                .c = y0 + AT(p->o) + i0 * p->o[ERT_ATTN_ST], .ldc = p->o[ERT_ATTN_ST], .choice = a->choice,
            };
#undef AT
            if (ert_cpu_sgemm(&g2, gws, gws_bytes, NULL) != ERT_OK) {
                atomic_store(&j->failed, 1);
                return;
            }
        }
    }
}

static void attn_gemm_base(void *arg, int64_t c0, int64_t c1) { attn_gemm_body(arg, c0, c1); }
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void attn_gemm_avx2(void *arg, int64_t c0, int64_t c1) {
    attn_gemm_body(arg, c0, c1);
}
#endif

static int64_t gcd64(int64_t x, int64_t y) {
    while (y) {
        int64_t r = x % y;
        x = y, y = r;
    }
    return x;
}

static bool attention_gemm(const ert_kargs *a) {
    const ert_attn_params *p = &a->params->attn;
    const size_t need = gemm_workspace(a);
    if (!need || !a->workspace || a->workspace_bytes < need) return false;
    const int64_t workers = a->pool ? ert_threadpool_size(a->pool) : 1, bh = p->batch * p->heads;
    if (bh <= 0 || p->nq <= 0) return true;
    attn_gjob j = {.a = a, .ws = a->workspace, .slot_bytes = need / (size_t)workers,
                   .s_bytes = ert_align_up((size_t)(p->nq * p->nk) * sizeof(float), 64)};
    /* blocks of at least 16 query rows: below that, packing k and v again
     * per block costs more than the balance gains */
    int64_t most = (p->nq + 15) / 16;
    j.nqb = workers / gcd64(bh, workers);
    if (j.nqb > most) j.nqb = most > 0 ? most : 1;
    j.n_tasks = bh * j.nqb;
    j.n_chunks = workers < j.n_tasks ? workers : j.n_tasks;
    atomic_init(&j.failed, 0);
    ert_par_fn fn = attn_gemm_base;
#if defined(__x86_64__) && defined(__GNUC__)
    if (ert_cpu_kernel_cap(a->choice) >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        fn = attn_gemm_avx2;
#endif
    ert_parallel_for(a->pool, j.n_chunks, 1, fn, &j);
    return !atomic_load(&j.failed);
}

ert_status ert_cpu_attention(const ert_kargs *a) {
    const ert_attn_params *p = &a->params->attn;
    for (int k = 0; k < a->n_in; k++)
        if (a->in[k].data && a->in[k].dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    if (attention_gemm(a)) return ERT_OK;
    size_t per = (size_t)(p->nk + p->head_dim) * sizeof(float);
    int64_t slots = per ? (int64_t)(a->workspace_bytes / per) : 0;
    if (slots < 1 || !a->workspace) return ERT_E_ARG;
    attn_job j = {p, a->in[0].data, a->in[1].data, a->in[2].data, p->has_bias ? a->in[3].data : NULL, a->out[0].data,
                  a->workspace, p->batch * p->heads * p->nq, 0};
    int64_t workers = a->pool ? ert_threadpool_size(a->pool) : 1;
    j.n_chunks = workers < slots ? workers : slots;
    if (j.n_chunks > j.rows) j.n_chunks = j.rows;
    ert_parallel_for(a->pool, j.n_chunks, 1, attn_chunks, &j);
    return ERT_OK;
}
