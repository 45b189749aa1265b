/* Conv weight gradient (f32, NCHW, 1-D/2-D/3-D, groups, stride, dilation, pads).
 *
 *   dW_g (Mg, Cg*k) = sum_n dY_{n,g} (Mg, S) x im2col(x_{n,g})^T (S, Cg*k)
 *
 * Steps, per (image, group): materialise the im2col matrix (Cg*k, S) of
 * x_{n,g} in the workspace (padding taps are zero), then one SGEMM with B read
 * transposed through strides, accumulating into dW after the first image.
 * The input gradient needs no kernel of its own: it is ConvTranspose(dY, W)
 * with the forward's geometry (the trainer emits that node). The bias
 * gradient is REDUCE_TO over (N, spatial).
 * Limits: the im2col matrix of one image group must fit the workspace
 * (Cg*k*S floats); the im2col copy is single-threaded, the GEMM is not. */
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <string.h>

typedef struct cgeom {
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
    int64_t in_sz, out_sz, k_sz;
} cgeom;

static void geom_of(const ert_conv_params *p, const int64_t *xd, const int64_t *yd, cgeom *g) {
    int off = 3 - p->nsp;
    g->in_sz = g->out_sz = g->k_sz = 1;
    for (int i = 0; i < 3; i++) {
        int s = i - off;
        bool real = s >= 0;
        g->in[i] = real ? xd[2 + s] : 1;
        g->out[i] = real ? yd[2 + s] : 1;
        g->k[i] = real ? p->kernel[s] : 1;
        g->s[i] = real ? p->stride[s] : 1;
        g->d[i] = real ? p->dilation[s] : 1;
        g->pb[i] = real ? p->pad_begin[s] : 0;
        g->in_sz *= g->in[i];
        g->out_sz *= g->out[i];
        g->k_sz *= g->k[i];
    }
}

size_t ert_cpu_conv_grad_weight_workspace(const ert_conv_params *p, const int64_t *x_dims, const int64_t *dy_dims,
                                          int n_threads) {
    cgeom g;
    geom_of(p, x_dims, dy_dims, &g);
    int64_t Cg = x_dims[1] / p->group, Mg = dy_dims[1] / p->group, Kg = Cg * g.k_sz;
    size_t col = 0, gws = ert_cpu_sgemm_workspace(Mg, Kg, g.out_sz, n_threads), tot;
    if (ert_mul_ovf((size_t)Kg, (size_t)g.out_sz * sizeof(float), &col)) return SIZE_MAX;
    col = ert_align_up(col, 64);
    if (gws == SIZE_MAX || ert_add_ovf(col, gws, &tot)) return SIZE_MAX;
    return tot;
}

/* col (Cg*k, S): row (c, kd, kh, kw), column (od, oh, ow). */
static void im2col(const cgeom *g, const float *x, int64_t Cg, float *col) {
    for (int64_t c = 0; c < Cg; c++) {
        const float *xc = x + c * g->in_sz;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    float *row = col + ((c * g->k[0] + kd) * g->k[1] + kh) * g->k[2] * g->out_sz + kw * g->out_sz;
                    for (int64_t od = 0; od < g->out[0]; od++) {
                        int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
                        for (int64_t oh = 0; oh < g->out[1]; oh++) {
                            int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
                            float *r = row + (od * g->out[1] + oh) * g->out[2];
                            bool ok = id >= 0 && id < g->in[0] && ih >= 0 && ih < g->in[1];
                            const float *xr = xc + (id * g->in[1] + ih) * g->in[2];
                            for (int64_t ow = 0; ow < g->out[2]; ow++) {
                                int64_t iw = ow * g->s[2] - g->pb[2] + kw * g->d[2];
                                r[ow] = ok && iw >= 0 && iw < g->in[2] ? xr[iw] : 0.0f;
                            }
                        }
                    }
                }
    }
}

ert_status ert_cpu_conv_grad_weight(const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *DY = &a->in[0], *X = &a->in[1];
    ert_tview *DW = &a->out[0];
    if (!DW->data) return ERT_OK;
    cgeom g;
    geom_of(p, X->dims, DY->dims, &g);
    const int64_t N = X->dims[0], C = X->dims[1], M = DY->dims[1], G = p->group;
    const int64_t Cg = C / G, Mg = M / G, Kg = Cg * g.k_sz;
    size_t col_bytes = ert_align_up((size_t)Kg * (size_t)g.out_sz * sizeof(float), 64);
    if (a->workspace_bytes < col_bytes) return ERT_E_INTERNAL;
    float *col = a->workspace;
    void *gws = (char *)a->workspace + col_bytes;
    size_t gws_bytes = a->workspace_bytes - col_bytes;
    float *dw = DW->data;
    const float *x = X->data, *dy = DY->data;
    if (N == 0) {
        memset(dw, 0, (size_t)DW->n_elems * sizeof(float));
        return ERT_OK;
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t gi = 0; gi < G; gi++) {
            im2col(&g, x + (n * C + gi * Cg) * g.in_sz, Cg, col);
            ert_sgemm_args ga = {
                .M = Mg, .N = Kg, .K = g.out_sz,
                .a = dy + (n * M + gi * Mg) * g.out_sz, .a_rs = g.out_sz, .a_cs = 1, .alpha = 1.0f,
                .b = col, .b_rs = 1, .b_cs = g.out_sz,
                .c = dw + gi * Mg * Kg, .ldc = Kg, .accumulate = n > 0, .choice = a->choice,
            };
            ert_status st = ert_cpu_sgemm(&ga, gws, gws_bytes, a->pool);
            if (st) return st;
        }
    }
    return ERT_OK;
}
