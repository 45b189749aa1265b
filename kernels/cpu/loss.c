/* Loss kernels: loss value and its gradient with respect to the logits in
 * one pass (f32 in, double accumulation).
 *
 * CE (logits (N, C), int64 targets (N), optional class weights w (C), label
 *   smoothing e), as PyTorch's cross_entropy with reduction='mean':
 *   l_i = -(1-e) w[y_i] log p[y_i] - (e/C) sum_c w[c] log p[c]; L = sum l_i /
 *   sum w[y_i];  dL/dz_ij = ((1-e) w[y_i] (p_ij - [j=y_i]) + (e/C)(W p_ij -
 *   w[j])) / sum w[y_i], W = sum w.
 * MSE: L = mean((z - t)^2); dz = 2 (z - t) / n.
 * BCE with logits: L = mean(max(z,0) - z t + log1p(exp(-|z|))); dz = (sigmoid(z)
 *   - t) / n.
 * A target class outside [0, C) returns ERT_E_ARG (checked before writing). */
#include "cpu_kernels.h"

#include <math.h>

static ert_status ce(const ert_kargs *a) {
    const ert_tview *Z = &a->in[0];
    const int64_t *y = a->in[1].data;
    const float *w = a->n_in > 2 ? a->in[2].data : NULL;
    const float *z = Z->data;
    float *loss = a->out[0].data, *dz = a->out[1].data;
    int64_t N = Z->dims[0], C = Z->dims[1];
    double e = a->params->loss.label_smoothing;
    for (int64_t i = 0; i < N; i++)
        if (y[i] < 0 || y[i] >= C) return ERT_E_ARG;
    double W = 0, norm = 0, total = 0;
    for (int64_t c = 0; c < C; c++) W += w ? w[c] : 1.0;
    for (int64_t i = 0; i < N; i++) norm += w ? w[y[i]] : 1.0;
    double inv = norm > 0 ? 1.0 / norm : 0.0;
    for (int64_t i = 0; i < N; i++) {
        const float *zi = z + i * C;
        float *gi = dz + i * C;
        double mx = zi[0];
        for (int64_t c = 1; c < C; c++) mx = zi[c] > mx ? zi[c] : mx;
        double s = 0;
        for (int64_t c = 0; c < C; c++) s += exp(zi[c] - mx);
        double lse = mx + log(s), wy = w ? w[y[i]] : 1.0;
        double li = -(1.0 - e) * wy * (zi[y[i]] - lse);
        for (int64_t c = 0; c < C; c++) {
            double wc = w ? w[c] : 1.0, p = exp(zi[c] - lse), lp = zi[c] - lse;
            li -= e / (double)C * wc * lp;
            double g = (1.0 - e) * wy * (p - (c == y[i])) + e / (double)C * (W * p - wc);
            gi[c] = (float)(g * inv);
        }
        total += li;
    }
    *loss = (float)(total * inv);
    return ERT_OK;
}

ert_status ert_cpu_loss(const ert_kargs *a) {
    int kind = a->params->loss.kind;
    if (kind == ERT_LOSS_CROSS_ENTROPY) return ce(a);
    const float *z = a->in[0].data, *t = a->in[1].data;
    float *dz = a->out[1].data;
    int64_t n = a->in[0].n_elems;
    double total = 0, inv = n ? 1.0 / (double)n : 0.0;
    for (int64_t i = 0; i < n; i++) {
        double zi = z[i], ti = t[i];
        if (kind == ERT_LOSS_MSE) {
            total += (zi - ti) * (zi - ti);
            dz[i] = (float)(2.0 * (zi - ti) * inv);
        } else {
            total += (zi > 0 ? zi : 0) - zi * ti + log1p(exp(-fabs(zi)));
            dz[i] = (float)((1.0 / (1.0 + exp(-zi)) - ti) * inv);
        }
    }
    *(float *)a->out[0].data = (float)(total * inv);
    return ERT_OK;
}
