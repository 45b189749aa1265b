/* Activation math shared by the unary kernel and fused epilogues. NaN in
 * gives NaN out for every activation (nan_rules.h). */
#include "cpu_kernels.h"
#include "nan_rules.h"

#include <math.h>

float ert_cpu_act1(float x, const ert_act_params *a) {
    switch (a->kind) {
    case ERT_ACT_NONE: return x;
    case ERT_ACT_RELU: return ert_relu_nan(x);
    case ERT_ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case ERT_ACT_CLIP: return ert_clamp_nan(x, a->alpha, a->beta);
    case ERT_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ERT_ACT_TANH: return tanhf(x);
    case ERT_ACT_HARD_SIGMOID: {
        return ert_clamp_nan(a->alpha * x + a->beta, 0.0f, 1.0f);
    }
    case ERT_ACT_HARD_SWISH: {
        return x * ert_clamp_nan(x / 6.0f + 0.5f, 0.0f, 1.0f);
    }
    case ERT_ACT_SILU: return x / (1.0f + expf(-x));
    case ERT_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    }
    return x;
}

void ert_cpu_act_inplace(float *x, int64_t n, const ert_act_params *a) {
    if (a->kind == ERT_ACT_NONE) return;
    if (a->kind == ERT_ACT_RELU) {
        for (int64_t i = 0; i < n; i++) x[i] = ert_relu_nan(x[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++) x[i] = ert_cpu_act1(x[i], a);
}
