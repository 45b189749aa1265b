/* Activation math shared by the unary kernel and fused epilogues. */
#include "cpu_kernels.h"

#include <math.h>

float ert_cpu_act1(float x, const ert_act_params *a) {
    switch (a->kind) {
    case ERT_ACT_NONE: return x;
    case ERT_ACT_RELU: return x > 0 ? x : 0;
    case ERT_ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case ERT_ACT_CLIP: return x < a->alpha ? a->alpha : (x > a->beta ? a->beta : x);
    case ERT_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ERT_ACT_TANH: return tanhf(x);
    case ERT_ACT_HARD_SIGMOID: {
        float y = a->alpha * x + a->beta;
        return y < 0 ? 0 : (y > 1 ? 1 : y);
    }
    case ERT_ACT_HARD_SWISH: {
        float y = x / 6.0f + 0.5f;
        return x * (y < 0 ? 0 : (y > 1 ? 1 : y));
    }
    case ERT_ACT_SILU: return x / (1.0f + expf(-x));
    case ERT_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    }
    return x;
}

void ert_cpu_act_inplace(float *x, int64_t n, const ert_act_params *a) {
    if (a->kind == ERT_ACT_NONE) return;
    if (a->kind == ERT_ACT_RELU) {
        for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
        return;
    }
    for (int64_t i = 0; i < n; i++) x[i] = ert_cpu_act1(x[i], a);
}
