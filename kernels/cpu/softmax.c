/* Softmax / LogSoftmax along one axis (opset 13), f32.
 * x viewed as (outer, n, inner) with n = dims[axis]; each of the outer*inner
 * lines (stride inner) gets: m = max, e = exp(x - m), s = sum e, then
 * y = e / s (Softmax) or y = x - m - log s (LogSoftmax). Subtracting the max
 * keeps exp from overflowing. Parallel over outer. */
#include "cpu_kernels.h"

#include <math.h>

typedef struct sm_job {
    const float *x;
    float *y;
    int64_t n, inner;
    bool log;
} sm_job;

static void sm_run(void *arg, int64_t o0, int64_t o1) {
    const sm_job *j = arg;
    const int64_t n = j->n, st = j->inner;
    for (int64_t o = o0; o < o1; o++) {
        for (int64_t in = 0; in < j->inner; in++) {
            const float *xp = j->x + o * n * st + in;
            float *yp = j->y + o * n * st + in;
            float m = -INFINITY;
            for (int64_t i = 0; i < n; i++)
                if (xp[i * st] > m) m = xp[i * st];
            float s = 0.0f;
            if (j->log) {
                for (int64_t i = 0; i < n; i++) s += expf(xp[i * st] - m);
                float ls = logf(s);
                for (int64_t i = 0; i < n; i++) yp[i * st] = xp[i * st] - m - ls;
            } else {
                for (int64_t i = 0; i < n; i++) {
                    float e = expf(xp[i * st] - m);
                    yp[i * st] = e;
                    s += e;
                }
                float inv = 1.0f / s;
                for (int64_t i = 0; i < n; i++) yp[i * st] *= inv;
            }
        }
    }
}

ert_status ert_cpu_softmax(const ert_kargs *a) {
    const ert_tview *X = &a->in[0];
    if (X->dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    int64_t axis = a->params->axis.axis, outer = 1, inner = 1;
    for (int i = 0; i < X->ndim; i++) {
        if (i < axis) outer *= X->dims[i];
        else if (i > axis) inner *= X->dims[i];
    }
    int64_t n = X->ndim ? X->dims[axis] : 1;
    if (n == 0 || outer == 0 || inner == 0) return ERT_OK;
    sm_job j = {X->data, a->out[0].data, n, inner, a->op == ERT_OP_LOGSOFTMAX};
    ert_parallel_for(a->pool, outer, 1 + 4096 / (n * inner), sm_run, &j);
    return ERT_OK;
}
