/* Backward of element-wise ops (f32).
 *
 * ACT_GRAD: dx = dy * f'(x) for every activation of the unary kernel.
 * BINARY_GRAD: the gradient of Add/Sub/Mul/Div for one operand, with numpy
 *   broadcasting: each output element's local gradient is added into the
 *   operand element it read (so broadcast dims are summed).
 * REDUCE_TO: dy summed down to a broadcast shape (bias gradients), times scale.
 * BROADCAST_TO: the reverse (ReduceMean/ReduceSum backward): dy read with
 *   stride 0 along the reduced dims, times scale (1/count for the mean).
 * The broadcast walks use an odometer over the output index with per-operand
 * strides (0 on broadcast dims): no division per element. */
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ activations */

static float act_deriv(float x, const ert_unary_params *u) {
    const ert_act_params *a = &u->act;
    switch (a->kind) {
    case ERT_ACT_NONE: return 1.0f;
    case ERT_ACT_RELU: return x > 0 ? 1.0f : 0.0f;
    case ERT_ACT_LEAKY_RELU: return x >= 0 ? 1.0f : a->alpha;
    case ERT_ACT_CLIP: return x >= a->alpha && x <= a->beta ? 1.0f : 0.0f;
    case ERT_ACT_SIGMOID: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f - s);
    }
    case ERT_ACT_TANH: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    case ERT_ACT_HARD_SIGMOID: {
        float y = a->alpha * x + a->beta;
        return y > 0 && y < 1 ? a->alpha : 0.0f;
    }
    case ERT_ACT_HARD_SWISH: return x < -3.0f ? 0.0f : (x > 3.0f ? 1.0f : (2.0f * x + 3.0f) / 6.0f);
    case ERT_ACT_SILU: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f + x * (1.0f - s));
    }
    case ERT_ACT_GELU: {
        if (u->alpha != 0.0f) { /* tanh approximation */
            const float k = 0.7978845608028654f, c = 0.044715f;
            float in = k * (x + c * x * x * x), t = tanhf(in);
            return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * c * x * x);
        }
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
        return cdf + x * 0.3989422804014327f * expf(-0.5f * x * x);
    }
    }
    return 1.0f;
}

typedef struct act_job {
    const float *dy, *x;
    float *dx;
    const ert_unary_params *u;
} act_job;

static void act_run(void *arg, int64_t i0, int64_t i1) {
    const act_job *j = arg;
    if (j->u->act.kind == ERT_ACT_RELU) { /* the common case, without a switch per element */
        for (int64_t i = i0; i < i1; i++) j->dx[i] = j->x[i] > 0 ? j->dy[i] : 0.0f;
        return;
    }
    for (int64_t i = i0; i < i1; i++) j->dx[i] = j->dy[i] * act_deriv(j->x[i], j->u);
}

ert_status ert_cpu_act_grad(const ert_kargs *a) {
    if (!a->out[0].data) return ERT_OK;
    act_job j = {a->in[0].data, a->in[1].data, a->out[0].data, &a->params->unary};
    ert_parallel_for(a->pool, a->out[0].n_elems, 16384, act_run, &j);
    return ERT_OK;
}

/* ------------------------------------------------------------ broadcast walks */

/* Strides of a tensor of rank nd (right-aligned) inside an output of rank n
 * with dims od: 0 where the tensor's dim is 1 (or missing). */
static void bstrides(int nd, const int64_t *d, int n, const int64_t *od, int64_t *st) {
    int64_t s = 1;
    for (int i = n - 1; i >= 0; i--) {
        int k = i - (n - nd);
        int64_t di = k >= 0 ? d[k] : 1;
        (void)od;
        st[i] = k < 0 || di == 1 ? 0 : s;
        s *= di;
    }
}

ert_status ert_cpu_reduce_to(const ert_kargs *a) {
    const ert_grad_params *p = &a->params->grad;
    const ert_tview *DY = &a->in[0];
    ert_tview *O = &a->out[0];
    if (!O->data) return ERT_OK;
    float *o = O->data;
    const float *dy = DY->data;
    memset(o, 0, (size_t)O->n_elems * sizeof(float));
    int n = DY->ndim;
    /* kept dims one contiguous range [a, b] (bias gradients: (1,M,1,1), (1,N)):
     * sum (outer, mid, inner) blocks directly */
    int a0 = -1, b0 = -1;
    bool block = p->ndim == n;
    for (int d = 0; d < n && block; d++) {
        if (p->shape[d] == 1 && DY->dims[d] != 1) continue;
        if (p->shape[d] != DY->dims[d]) block = false;
        else if (DY->dims[d] != 1) {
            if (a0 < 0) a0 = d;
            else if (b0 != d - 1) block = false;
            b0 = d;
        }
    }
    if (block && a0 >= 0) {
        int64_t outer = 1, mid = 1, inner = 1;
        for (int d = 0; d < n; d++) *(d < a0 ? &outer : d <= b0 ? &mid : &inner) *= DY->dims[d];
        for (int64_t q = 0; q < outer; q++)
            for (int64_t m = 0; m < mid; m++) {
                const float *src = dy + (q * mid + m) * inner;
                float acc = 0.0f;
                for (int64_t i = 0; i < inner; i++) acc += src[i];
                o[m] += acc;
            }
        if (p->scale != 1.0f)
            for (int64_t e = 0; e < O->n_elems; e++) o[e] *= p->scale;
        return ERT_OK;
    }
    int64_t st[ERT_MAX_DIMS], idx[ERT_MAX_DIMS] = {0};
    bstrides(p->ndim, p->shape, n, DY->dims, st);
    int64_t off = 0;
    for (int64_t e = 0; e < DY->n_elems; e++) {
        o[off] += dy[e];
        for (int d = n - 1; d >= 0; d--) { /* odometer */
            off += st[d];
            if (++idx[d] < DY->dims[d]) break;
            off -= st[d] * DY->dims[d];
            idx[d] = 0;
        }
    }
    if (p->scale != 1.0f)
        for (int64_t e = 0; e < O->n_elems; e++) o[e] *= p->scale;
    return ERT_OK;
}

ert_status ert_cpu_broadcast_to(const ert_kargs *a) {
    const ert_grad_params *p = &a->params->grad;
    const float *dy = a->in[0].data;
    ert_tview *O = &a->out[0];
    float *o = O->data;
    if (!o) return ERT_OK;
    int n = O->ndim;
    int64_t st[ERT_MAX_DIMS], idx[ERT_MAX_DIMS] = {0}, off = 0;
    bstrides(p->ndim, p->shape, n, O->dims, st);
    for (int64_t e = 0; e < O->n_elems; e++) {
        o[e] = dy[off] * p->scale;
        for (int d = n - 1; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < O->dims[d]) break;
            off -= st[d] * O->dims[d];
            idx[d] = 0;
        }
    }
    return ERT_OK;
}

ert_status ert_cpu_binary_grad(const ert_kargs *a) {
    const ert_grad_params *p = &a->params->grad;
    const ert_tview *DY = &a->in[0], *A = &a->in[1], *B = &a->in[2];
    ert_tview *O = &a->out[0];
    if (!O->data) return ERT_OK;
    const float *dy = DY->data, *xa = A->data, *xb = B->data;
    float *o = O->data;
    int n = DY->ndim;
    int64_t sa[ERT_MAX_DIMS], sb[ERT_MAX_DIMS], idx[ERT_MAX_DIMS] = {0};
    bstrides(A->ndim, A->dims, n, DY->dims, sa);
    bstrides(B->ndim, B->dims, n, DY->dims, sb);
    const int64_t *so = p->which == 0 ? sa : sb;
    memset(o, 0, (size_t)O->n_elems * sizeof(float));
    int64_t oa = 0, ob = 0, oo = 0;
    for (int64_t e = 0; e < DY->n_elems; e++) {
        float g = dy[e], va = xa ? xa[oa] : 0.0f, vb = xb ? xb[ob] : 0.0f;
        switch (p->fwd_op) {
        case ERT_OP_ADD: break;
        case ERT_OP_SUB: g = p->which == 0 ? g : -g; break;
        case ERT_OP_MUL: g = p->which == 0 ? g * vb : g * va; break;
        case ERT_OP_DIV: g = p->which == 0 ? g / vb : -g * va / (vb * vb); break;
        default: return ERT_E_UNSUPPORTED;
        }
        o[oo] += g;
        for (int d = n - 1; d >= 0; d--) {
            oa += sa[d];
            ob += sb[d];
            oo += so[d];
            if (++idx[d] < DY->dims[d]) break;
            oa -= sa[d] * DY->dims[d];
            ob -= sb[d] * DY->dims[d];
            oo -= so[d] * DY->dims[d];
            idx[d] = 0;
        }
    }
    return ERT_OK;
}

ert_status ert_cpu_fill_zero(const ert_kargs *a) {
    if (a->out[0].data) memset(a->out[0].data, 0, (size_t)a->out[0].n_elems * ert_dtype_size(a->out[0].dtype));
    return ERT_OK;
}
