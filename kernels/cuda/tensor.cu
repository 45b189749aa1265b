/* Pad, ReduceMean/Sum/Max and Resize, f32, one thread per output element.
 * Semantics of kernels/cpu/shape.c (Pad: constant/reflect/edge/wrap, pads may
 * be negative), kernels/cpu/reduce.c (axes sorted and positive; empty
 * reductions give 0 / NaN / -inf; f32 sums accumulate in double) and
 * kernels/cpu/resize.c (nearest with the four roundings, N-D multilinear; the
 * per-dim source coordinate of each output coordinate is computed in place,
 * in double, instead of the CPU's tables: the workspace is transient device
 * memory and nothing may be prepared on the host at run time). */
#include "cuda_internal.h"

#include <math.h>

struct shape8 {
    int nd;
    int64_t in[ERT_MAX_DIMS], out[ERT_MAX_DIMS];
};

static unsigned grid_for(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

/* ------------------------------------------------------------------ Pad */

struct pad_geom {
    shape8 s;
    int64_t pb[ERT_MAX_DIMS];
    int mode;
    float value;
};

static __device__ int64_t pad_src(int64_t o, int64_t b, int64_t n, int mode) {
    int64_t c = o - b;
    if (c >= 0 && c < n) return c;
    switch (mode) {
    case 1: {
        if (n == 1) return 0;
        int64_t per = 2 * (n - 1), m = c % per;
        if (m < 0) m += per;
        return m >= n ? per - m : m;
    }
    case 2: return c < 0 ? 0 : n - 1;
    case 3: {
        int64_t m = c % n;
        return m < 0 ? m + n : m;
    }
    default: return -1;
    }
}

static __global__ void pad_kernel(const float *__restrict__ x, float *__restrict__ y, pad_geom g, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i, off = 0, stride = 1;
        bool inside = true;
        for (int d = g.s.nd - 1; d >= 0; d--) {
            int64_t o = r % g.s.out[d];
            r /= g.s.out[d];
            int64_t c = pad_src(o, g.pb[d], g.s.in[d], g.mode);
            if (c < 0) inside = false;
            off += c * stride;
            stride *= g.s.in[d];
        }
        y[i] = inside ? x[off] : g.value;
    }
}

/* ------------------------------------------------------------------ Reduce */

struct red_geom {
    int nk, nr;
    int64_t kdim[ERT_MAX_DIMS], kst[ERT_MAX_DIMS], rdim[ERT_MAX_DIMS], rst[ERT_MAX_DIMS];
    int64_t n_red;
};

static __global__ void reduce_kernel(const float *__restrict__ x, float *__restrict__ y, red_geom g, int64_t n,
                                     int op) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += (int64_t)gridDim.x * blockDim.x) {
        int64_t base = 0, rem = o;
        for (int d = g.nk - 1; d >= 0; d--) {
            base += (rem % g.kdim[d]) * g.kst[d];
            rem /= g.kdim[d];
        }
        double sum = 0, mx = -INFINITY;
        for (int64_t t = 0; t < g.n_red; t++) {
            int64_t q = t, off = base;
            for (int d = g.nr - 1; d >= 0; d--) {
                off += (q % g.rdim[d]) * g.rst[d];
                q /= g.rdim[d];
            }
            double v = x[off];
            if (op == ERT_OP_REDUCE_MAX) {
                if (v > mx || isnan(v)) mx = v;
            } else {
                sum += v;
            }
        }
        float r;
        if (op == ERT_OP_REDUCE_MAX) r = (float)mx;
        else if (op == ERT_OP_REDUCE_MEAN) r = g.n_red ? (float)(sum / (double)g.n_red) : NAN;
        else r = (float)sum;
        y[o] = r;
    }
}

/* ------------------------------------------------------------------ Resize */

struct rz_geom {
    shape8 s;
    double scale[ERT_MAX_DIMS];
    int mode, coord, nearest_mode;
};

static __device__ double src_coord(int coord, int64_t o, double scale, int64_t in, int64_t out) {
    double x = (double)o;
    switch (coord) {
    case 1: return x / scale;
    case 2: {
        double ow = scale * (double)in;
        return ow != 1 ? x * (double)(in - 1) / (ow - 1) : 0;
    }
    case 3: return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
    case 5: {
        double adj = (double)out / (scale * (double)in), center = (double)in / 2;
        return center * (1 - adj) + (x + 0.5) / scale - 0.5;
    }
    default: return (x + 0.5) / scale - 0.5;
    }
}

static __device__ int64_t nearest_round(double x, int mode) {
    switch (mode) {
    case 0: return x == floor(x) + 0.5 ? (int64_t)floor(x) : (int64_t)llround(x);
    case 1: return (int64_t)llround(x);
    case 2: return (int64_t)floor(x);
    default: return (int64_t)ceil(x);
    }
}

static __global__ void resize_kernel(const float *__restrict__ x, float *__restrict__ y, rz_geom g, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t lo[ERT_MAX_DIMS], hi[ERT_MAX_DIMS], st[ERT_MAX_DIMS];
        double w[ERT_MAX_DIMS];
        int64_t r = i, s = 1;
        int n_interp = 0;
        for (int d = g.s.nd - 1; d >= 0; d--) {
            int64_t o = r % g.s.out[d], in = g.s.in[d];
            r /= g.s.out[d];
            st[d] = s;
            s *= in;
            double c = src_coord(g.coord, o, g.scale[d], in, g.s.out[d]);
            if (g.mode == 1) {
                c = c < 0 ? 0 : (c > (double)(in - 1) ? (double)(in - 1) : c);
                int64_t l = (int64_t)floor(c);
                lo[d] = l;
                hi[d] = l + 1 < in ? l + 1 : in - 1;
                w[d] = c - (double)l;
                if (w[d] != 0) n_interp++;
            } else {
                c = c < -1 ? -1 : (c > (double)in ? (double)in : c);
                int64_t k = nearest_round(c, g.nearest_mode);
                lo[d] = hi[d] = k < 0 ? 0 : (k > in - 1 ? in - 1 : k);
                w[d] = 0;
            }
        }
        double acc = 0;
        /* corners over the interpolated dims only (bit b of m picks hi of the b-th one) */
        for (int64_t m = 0; m < ((int64_t)1 << n_interp); m++) {
            int64_t off = 0;
            double wt = 1;
            int b = 0;
            for (int d = 0; d < g.s.nd; d++) {
                if (w[d] != 0) {
                    bool h = (m >> b++) & 1;
                    off += (h ? hi[d] : lo[d]) * st[d];
                    wt *= h ? w[d] : 1 - w[d];
                } else {
                    off += lo[d] * st[d];
                }
            }
            acc += wt * (double)x[off];
        }
        y[i] = (float)acc;
    }
}

static bool shape_of(const ert_tview *x, const ert_tview *y, shape8 *s) {
    if (x->ndim != y->ndim || x->ndim < 1 || x->ndim > ERT_MAX_DIMS) return false;
    s->nd = x->ndim;
    for (int d = 0; d < x->ndim; d++) {
        s->in[d] = x->dims[d];
        s->out[d] = y->dims[d];
    }
    return true;
}

extern "C" {

cudaError_t ert_cuda_pad_launch(const ert_pad_params *p, const ert_tview *x, const ert_tview *y, cudaStream_t st) {
    if (y->n_elems <= 0) return cudaSuccess;
    pad_geom g;
    if (!shape_of(x, y, &g.s) || p->mode < 0 || p->mode > 3) return cudaErrorInvalidValue;
    for (int d = 0; d < g.s.nd; d++) {
        g.pb[d] = p->pad_begin[d];
        if (p->mode != 0 && x->dims[d] == 0) return cudaErrorInvalidValue;
    }
    g.mode = p->mode;
    g.value = (float)p->value;
    pad_kernel<<<grid_for(y->n_elems), 256, 0, st>>>((const float *)x->data, (float *)y->data, g, y->n_elems);
    return cudaGetLastError();
}

cudaError_t ert_cuda_reduce_launch(ert_op op, const ert_axis_params *p, const ert_tview *x, const ert_tview *y,
                                   cudaStream_t st) {
    if (y->n_elems <= 0) return cudaSuccess;
    if (p->n_axes == 0) /* noop_with_empty_axes */
        return y->data == x->data ? cudaSuccess
                                  : cudaMemcpyAsync(y->data, x->data, (size_t)x->n_elems * sizeof(float),
                                                    cudaMemcpyDeviceToDevice, st);
    red_geom g = {};
    g.n_red = 1;
    bool red[ERT_MAX_DIMS] = {false};
    for (int64_t i = 0; i < p->n_axes; i++) {
        if (p->axes[i] < 0 || p->axes[i] >= x->ndim) return cudaErrorInvalidValue;
        red[p->axes[i]] = true;
    }
    int64_t s = 1, strides[ERT_MAX_DIMS];
    for (int d = x->ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= x->dims[d];
    }
    for (int d = 0; d < x->ndim; d++) {
        if (red[d]) {
            g.rdim[g.nr] = x->dims[d];
            g.rst[g.nr++] = strides[d];
            g.n_red *= x->dims[d];
        } else {
            g.kdim[g.nk] = x->dims[d];
            g.kst[g.nk++] = strides[d];
        }
    }
    reduce_kernel<<<grid_for(y->n_elems), 256, 0, st>>>((const float *)x->data, (float *)y->data, g, y->n_elems,
                                                       (int)op);
    return cudaGetLastError();
}

cudaError_t ert_cuda_resize_launch(const ert_resize_params *p, const ert_tview *x, const ert_tview *y,
                                   cudaStream_t st) {
    if (y->n_elems <= 0) return cudaSuccess;
    rz_geom g;
    if (!shape_of(x, y, &g.s) || p->mode < 0 || p->mode > 1 || p->coord == 4) return cudaErrorInvalidValue;
    for (int d = 0; d < g.s.nd; d++) {
        if (x->dims[d] <= 0) return cudaErrorInvalidValue;
        g.scale[d] = p->scale[d];
    }
    g.mode = p->mode;
    g.coord = p->coord;
    g.nearest_mode = p->nearest_mode;
    resize_kernel<<<grid_for(y->n_elems), 256, 0, st>>>((const float *)x->data, (float *)y->data, g, y->n_elems);
    return cudaGetLastError();
}

} // extern "C"
