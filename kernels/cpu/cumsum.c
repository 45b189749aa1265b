/* CumSum, the oracle: x viewed as (outer, n, inner) around the axis; each of
 * the outer * inner lines is summed in order (from the end when reverse),
 * writing the running sum before (exclusive) or after (inclusive) adding
 * x[j]. f32 accumulates in double, so the result is the correctly rounded
 * prefix sum up to the last rounding; i32/i64 wrap like two's complement
 * (computed in uint64). */
#include "cpu_kernels.h"

ert_status ert_cpu_cumsum(const ert_kargs *a) {
    const ert_cumsum_params *p = &a->params->cumsum;
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    if (x->dtype != y->dtype || p->axis < 0 || p->axis >= x->ndim) return ERT_E_UNSUPPORTED;
    int64_t outer = 1, inner = 1, n = x->dims[p->axis];
    for (int d = 0; d < x->ndim; d++) {
        if (d < p->axis) outer *= x->dims[d];
        else if (d > p->axis) inner *= x->dims[d];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double fs = 0;
            uint64_t is = 0;
            for (int64_t k = 0; k < n; k++) {
                int64_t j = base + (p->reverse ? n - 1 - k : k) * inner;
                switch (x->dtype) {
                case ERT_DTYPE_F32: {
                    double v = ((const float *)x->data)[j];
                    if (!p->exclusive) fs += v;
                    ((float *)y->data)[j] = (float)fs;
                    if (p->exclusive) fs += v;
                    break;
                }
                case ERT_DTYPE_I32: {
                    uint64_t v = (uint64_t)(int64_t)((const int32_t *)x->data)[j];
                    if (!p->exclusive) is += v;
                    ((int32_t *)y->data)[j] = (int32_t)(uint32_t)is;
                    if (p->exclusive) is += v;
                    break;
                }
                case ERT_DTYPE_I64: {
                    uint64_t v = (uint64_t)((const int64_t *)x->data)[j];
                    if (!p->exclusive) is += v;
                    ((int64_t *)y->data)[j] = (int64_t)is;
                    if (p->exclusive) is += v;
                    break;
                }
                default: return ERT_E_UNSUPPORTED;
                }
            }
        }
    return ERT_OK;
}
