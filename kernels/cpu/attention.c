/* ert.Attention, f32: the plain reference (and the oracle of the CUDA
 * kernels). For each row (b, h, i) of the queries:
 *   s_j = scale * <q_i, k_j> + bias_ij  (j < nk, float accumulation)
 *   p_j = exp(s_j - max s) / sum_j exp(s_j - max s)
 *   y_i = sum_j p_j v_j
 * q, k, v, bias and y are strided views (ert_attn_params, core/ops/attention.c
 * checked them against their tensors at create). The rows are split into one
 * chunk per worker; chunk c uses workspace slot c (nk + head_dim floats). */
#include "cpu_kernels.h"

#include <math.h>

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

ert_status ert_cpu_attention(const ert_kargs *a) {
    const ert_attn_params *p = &a->params->attn;
    for (int k = 0; k < a->n_in; k++)
        if (a->in[k].data && a->in[k].dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
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
