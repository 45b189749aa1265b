/* Softmax / LogSoftmax along one axis (opset 13), f32.
 * x viewed as (outer, n, inner) with n = dims[axis]; each of the outer*inner
 * lines (stride inner) gets: m = max, e = exp(x - m), s = sum e, then
 * y = e / s (Softmax) or y = x - m - log s (LogSoftmax). Subtracting the max
 * keeps exp from overflowing.
 *
 * Two copies. The plain one (sm_run: libm's expf, one line at a time) is the
 * oracle, run when a->choice caps the CPU kernels at the portable level. The
 * fast one (sm_vec) runs ERT_AV_N lines at once where inner > 1 (YOLO's DFL
 * head: softmax over 16 bins, 8400 anchors apart: the plain copy walked
 * each line at stride 8400 on one thread, 1.7 ms of YOLOv8n) and ERT_AV_N
 * elements of one line at once where inner == 1, exp by act_vec.h's
 * polynomial (about 2 ulp; an argument below -87.3 gives 0, as expf's
 * underflow does), compiled for AVX2 or AVX-512 where the CPU has them.
 * Both are parallel over (outer, block of lines). */
#include "act_vec.h"
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

typedef struct sm_job {
    const float *x;
    float *y;
    int64_t n, inner, n_blk; /* n_blk: blocks of lines per outer index */
    bool log;
} sm_job;

static void sm_line(const sm_job *j, int64_t o, int64_t in) {
    const int64_t n = j->n, st = j->inner;
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

#define SM_BLK 64 /* lines per task where inner > 1 */

/* the plain copy: tasks are (outer, block of SM_BLK lines) */
static void sm_run(void *arg, int64_t t0, int64_t t1) {
    const sm_job *j = arg;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t o = t / j->n_blk, b0 = t % j->n_blk * SM_BLK;
        const int64_t b1 = b0 + SM_BLK < j->inner ? b0 + SM_BLK : j->inner;
        for (int64_t in = b0; in < b1; in++) sm_line(j, o, in);
    }
}

#if defined(__GNUC__)
#define AVN ERT_AV_N
/* exp of one vector, 0 below -87.3 (ert_av_exp clamps there to the smallest normal) */
static inline __attribute__((always_inline)) void sm_exp(ert_av8 *io) {
    const ert_av8 z = {0}, d = *io;
    ert_av_exp(io);
    *io = ERT_AV_SEL(d < -87.3f + z, z, *io);
}

static inline __attribute__((always_inline)) void sm_vec_body(void *arg, int64_t t0, int64_t t1) {
    const sm_job *j = arg;
    const int64_t n = j->n, st = j->inner;
    const ert_av8 z = {0};
    for (int64_t t = t0; t < t1; t++) {
        const int64_t o = t / j->n_blk;
        if (st == 1) { /* one contiguous line: AVN elements at a time */
            const float *xp = j->x + o * n;
            float *yp = j->y + o * n;
            ert_av8 mv = -INFINITY + z, v;
            int64_t i = 0;
            for (; i + AVN <= n; i += AVN) {
                memcpy(&v, xp + i, sizeof v);
                mv = ERT_AV_SEL(v > mv, v, mv);
            }
            float m = -INFINITY;
            for (int k = 0; k < AVN; k++)
                if (mv[k] > m) m = mv[k];
            for (; i < n; i++)
                if (xp[i] > m) m = xp[i];
            ert_av8 sv = z;
            float tail[AVN];
            for (i = 0; i < n; i += AVN) { /* the tail padded with -inf: exp gives 0 there */
                const int64_t r = n - i < AVN ? n - i : AVN;
                for (int k = 0; k < AVN; k++) tail[k] = k < r ? xp[i + k] : -INFINITY;
                memcpy(&v, tail, sizeof v);
                ert_av8 e = v - m;
                sm_exp(&e);
                sv += e;
                if (!j->log) {
                    memcpy(tail, &e, sizeof e);
                    memcpy(yp + i, tail, (size_t)r * sizeof(float));
                }
            }
            float s = 0.0f;
            for (int k = 0; k < AVN; k++) s += sv[k];
            if (j->log) {
                const float ls = logf(s);
                for (i = 0; i < n; i++) yp[i] = xp[i] - m - ls;
            } else {
                const float inv = 1.0f / s;
                for (i = 0; i < n; i++) yp[i] *= inv;
            }
            continue;
        }
        /* AVN neighbouring lines (consecutive `in`) per step; the last block's tail line by line */
        const int64_t b0 = t % j->n_blk * SM_BLK, b1 = b0 + SM_BLK < st ? b0 + SM_BLK : st;
        int64_t in = b0;
        for (; in + AVN <= b1; in += AVN) {
            const float *xp = j->x + o * n * st + in;
            float *yp = j->y + o * n * st + in;
            ert_av8 mv = -INFINITY + z, v, sv = z;
            for (int64_t i = 0; i < n; i++) {
                memcpy(&v, xp + i * st, sizeof v);
                mv = ERT_AV_SEL(v > mv, v, mv);
            }
            for (int64_t i = 0; i < n; i++) {
                memcpy(&v, xp + i * st, sizeof v);
                ert_av8 e = v - mv;
                sm_exp(&e);
                sv += e;
                if (!j->log) memcpy(yp + i * st, &e, sizeof e);
            }
            if (j->log) {
                ert_av8 ls = z;
                for (int k = 0; k < AVN; k++) ls[k] = logf(sv[k]);
                for (int64_t i = 0; i < n; i++) {
                    memcpy(&v, xp + i * st, sizeof v);
                    v = v - mv - ls;
                    memcpy(yp + i * st, &v, sizeof v);
                }
            } else {
                const ert_av8 inv = 1.0f / sv;
                for (int64_t i = 0; i < n; i++) {
                    memcpy(&v, yp + i * st, sizeof v);
                    v *= inv;
                    memcpy(yp + i * st, &v, sizeof v);
                }
            }
        }
        for (; in < b1; in++) sm_line(j, o, in);
    }
}

static void sm_vec_base(void *arg, int64_t t0, int64_t t1) { sm_vec_body(arg, t0, t1); }
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void sm_vec_avx2(void *arg, int64_t t0, int64_t t1) {
    sm_vec_body(arg, t0, t1);
}
#endif
#endif

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
    const int64_t n_blk = (inner + SM_BLK - 1) / SM_BLK, tasks = outer * n_blk;
    sm_job j = {X->data, a->out[0].data, n, inner, n_blk, a->op == ERT_OP_LOGSOFTMAX};
    ert_par_fn fn = sm_run;
#if defined(__GNUC__)
    const ert_cpu_gemm_kernel cap = ert_cpu_kernel_cap(a->choice);
    if (cap > ERT_CPU_GEMM_PORTABLE) fn = sm_vec_base;
#if defined(__x86_64__)
    if (cap >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) fn = sm_vec_avx2;
#endif
#endif
    /* about 4096 elements a task at least */
    const int64_t per_task = n * (inner < SM_BLK ? inner : SM_BLK);
    ert_parallel_for(a->pool, tasks, 1 + 4096 / per_task, fn, &j);
    return ERT_OK;
}
