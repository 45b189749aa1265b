/* Resize: nearest (any dtype, by element size) and N-D multilinear (f32).
 *
 * Steps: 1) for every dim, map each output coordinate to a source coordinate
 * with the coordinate transformation (params resize.coord, scale = out/in) and
 * store per-dim tables in the workspace: lo, hi (int64) and the weight of hi
 * (double); nearest uses lo only. 2) walk the output row by row: the outer
 * dims give a short list of (source offset, weight) pairs (2^k for k
 * interpolated outer dims, usually 1 or 2), and the last dim is interpolated
 * from the tables. Dims whose weights are all 0 (e.g. N and C) cost nothing. */
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

#define MAX_PAIRS (1 << (ERT_MAX_DIMS - 1))

typedef struct rz_dim {
    int64_t *lo, *hi;
    double *w;
    bool interp; /* some weight is non-zero */
} rz_dim;

typedef struct rz_job {
    const ert_kargs *a;
    int nd;
    rz_dim t[ERT_MAX_DIMS];
    int64_t st[ERT_MAX_DIMS];
    size_t es;
} rz_job;

/* Source coordinate of output coordinate o (ONNX coordinate_transformation_mode). */
static double src_coord(int coord, int64_t o, double scale, int64_t in, int64_t out) {
    double x = (double)o;
    switch (coord) {
    case 1: return x / scale;                                              /* asymmetric */
    case 2: {                                                              /* align_corners */
        /* the ONNX reference divides by in*scale - 1, not by the floored output size - 1 */
        double ow = scale * (double)in;
        return ow != 1 ? x * (double)(in - 1) / (ow - 1) : 0;
    }
    case 3: return out > 1 ? (x + 0.5) / scale - 0.5 : 0;                  /* pytorch_half_pixel */
    case 5: {                                                              /* half_pixel_symmetric */
        double adj = (double)out / (scale * (double)in), center = (double)in / 2;
        return center * (1 - adj) + (x + 0.5) / scale - 0.5;
    }
    default: return (x + 0.5) / scale - 0.5;                               /* half_pixel */
    }
}

static int64_t nearest(double x, int mode) {
    switch (mode) {
    case 0: return x == floor(x) + 0.5 ? (int64_t)floor(x) : (int64_t)llround(x); /* round_prefer_floor */
    case 1: return (int64_t)llround(x);                                           /* round_prefer_ceil (halves away from 0) */
    case 2: return (int64_t)floor(x);
    default: return (int64_t)ceil(x);
    }
}

static void rz_rows(void *arg, int64_t r0, int64_t r1) {
    const rz_job *j = arg;
    const ert_kargs *a = j->a;
    const ert_tview *o = &a->out[0];
    int nd = j->nd;
    int64_t len = o->dims[nd - 1];
    const rz_dim *L = &j->t[nd - 1];
    bool linear = a->params->resize.mode == 1;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[MAX_PAIRS];
        double wt[MAX_PAIRS];
        int np = 1;
        off[0] = 0;
        wt[0] = 1;
        int64_t rem = r;
        for (int d = nd - 2; d >= 0; d--) {
            int64_t i = rem % o->dims[d];
            rem /= o->dims[d];
            const rz_dim *t = &j->t[d];
            if (linear && t->interp) { /* each pair splits into lo and hi */
                for (int k = 0; k < np; k++) {
                    off[np + k] = off[k] + t->hi[i] * j->st[d];
                    wt[np + k] = wt[k] * t->w[i];
                    off[k] += t->lo[i] * j->st[d];
                    wt[k] *= 1 - t->w[i];
                }
                np *= 2;
            } else {
                for (int k = 0; k < np; k++) off[k] += t->lo[i] * j->st[d];
            }
        }
        if (linear) {
            const float *x = a->in[0].data;
            float *y = (float *)o->data + r * len;
            for (int64_t i = 0; i < len; i++) {
                double acc = 0, w = L->w[i];
                for (int k = 0; k < np; k++) {
                    double v = x[off[k] + L->lo[i]];
                    if (L->interp) v = v * (1 - w) + (double)x[off[k] + L->hi[i]] * w;
                    acc += wt[k] * v;
                }
                y[i] = (float)acc;
            }
        } else {
            const char *x = a->in[0].data;
            char *y = (char *)o->data + r * len * (int64_t)j->es;
            for (int64_t i = 0; i < len; i++)
                memcpy(y + i * (int64_t)j->es, x + (off[0] + L->lo[i]) * (int64_t)j->es, j->es);
        }
    }
}

ert_status ert_cpu_resize(const ert_kargs *a) {
    const ert_resize_params *p = &a->params->resize;
    const ert_tview *x = &a->in[0], *o = &a->out[0];
    rz_job j = {.a = a, .nd = o->ndim, .es = ert_dtype_size(x->dtype)};
    if (j.es == 0 || (p->mode == 1 && x->dtype != ERT_DTYPE_F32) || o->ndim < 1) return ERT_E_UNSUPPORTED;
    if (o->n_elems == 0) return ERT_OK;
    size_t need = 0;
    for (int d = 0; d < o->ndim; d++) need += (size_t)o->dims[d] * 24;
    if (a->workspace_bytes < need || !a->workspace) return ERT_E_INTERNAL;
    char *ws = a->workspace;
    int64_t s = 1;
    for (int d = o->ndim - 1; d >= 0; d--) {
        j.st[d] = s;
        s *= x->dims[d];
    }
    for (int d = 0; d < o->ndim; d++) {
        rz_dim *t = &j.t[d];
        int64_t od = o->dims[d], in = x->dims[d];
        t->lo = (int64_t *)ws;
        t->hi = t->lo + od;
        t->w = (double *)(t->hi + od);
        ws += (size_t)od * 24;
        t->interp = false;
        for (int64_t i = 0; i < od; i++) {
            double c = src_coord(p->coord, i, p->scale[d], in, od);
            if (p->mode == 1) {
                c = c < 0 ? 0 : (c > (double)(in - 1) ? (double)(in - 1) : c);
                int64_t lo = (int64_t)floor(c);
                t->lo[i] = lo;
                t->hi[i] = lo + 1 < in ? lo + 1 : in - 1;
                t->w[i] = c - (double)lo;
                if (t->w[i] != 0) t->interp = true;
            } else {
                /* clamp first so the integer conversion cannot overflow */
                c = c < -1 ? -1 : (c > (double)in ? (double)in : c);
                int64_t k = nearest(c, p->nearest_mode);
                t->lo[i] = k < 0 ? 0 : (k > in - 1 ? in - 1 : k);
                t->hi[i] = t->lo[i];
                t->w[i] = 0;
            }
        }
    }
    int64_t len = o->dims[o->ndim - 1];
    ert_parallel_for(a->pool, o->n_elems / len, 4096 / len + 1, rz_rows, &j);
    return ERT_OK;
}
