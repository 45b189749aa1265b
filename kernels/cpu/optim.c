/* Optimizer kernels (f32 weights and state, as PyTorch's torch.optim).
 *
 * GRAD_NORM: out = {n, s} with n the global L2 norm of every input gradient
 *   (double accumulation) and s = clip / (n + 1e-6) when clip > 0 and n > clip,
 *   else 1 (torch.nn.utils.clip_grad_norm_).
 * OPTIM, per element, g = grad * s:
 *   SGD:  g += wd*w; v = mu*v + g (v starts at 0, so step 1 gives v = g as
 *         PyTorch); g = nesterov ? g + mu*v : (mu ? v : g); w -= lr*g.
 *   Adam: g += wd*w; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *         w -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps), t = step + 1.
 *   AdamW: w *= 1 - lr*wd first, then Adam without the L2 term. */
#include "cpu_kernels.h"

#include <math.h>

ert_status ert_cpu_grad_norm(const ert_kargs *a) {
    double s = 0;
    for (int k = 0; k < a->n_in; k++) {
        const float *g = a->in[k].data;
        for (int64_t i = 0; i < a->in[k].n_elems; i++) s += (double)g[i] * g[i];
    }
    float *o = a->out[0].data;
    double n = sqrt(s), clip = a->params->optim.clip;
    o[0] = (float)n;
    o[1] = clip > 0 && n > clip ? (float)(clip / (n + 1e-6)) : 1.0f;
    return ERT_OK;
}

ert_status ert_cpu_optim(const ert_kargs *a) {
    const ert_optim_params *p = &a->params->optim;
    float *w = a->in[0].data, *m = a->in[2].data, *v = a->in[3].data;
    const float *g0 = a->in[1].data, scale = ((const float *)a->in[4].data)[1];
    int64_t n = a->in[0].n_elems;
    const float lr = p->lr, wd = p->weight_decay, mu = p->momentum;
    if (p->kind == ERT_OPTIM_SGD) {
        for (int64_t i = 0; i < n; i++) {
            float g = g0[i] * scale + wd * w[i];
            if (mu != 0.0f) {
                m[i] = mu * m[i] + g;
                g = p->nesterov ? g + mu * m[i] : m[i];
            }
            w[i] -= lr * g;
        }
        return ERT_OK;
    }
    double t = (double)(p->step + 1);
    float bc1 = (float)(1.0 - pow(p->beta1, t)), bc2 = (float)(1.0 - pow(p->beta2, t));
    float b1 = p->beta1, b2 = p->beta2, decay = p->kind == ERT_OPTIM_ADAMW ? 1.0f - lr * wd : 1.0f;
    float l2 = p->kind == ERT_OPTIM_ADAM ? wd : 0.0f;
    float rs = 1.0f / sqrtf(bc2);
    for (int64_t i = 0; i < n; i++) {
        w[i] *= decay;
        float g = g0[i] * scale + l2 * w[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        w[i] -= lr * (m[i] / bc1) / (sqrtf(v[i]) * rs + p->eps);
    }
    return ERT_OK;
}
