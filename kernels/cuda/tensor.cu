/* Pad, ReduceMean/Sum/Max and Resize (f32/f16/bf16, f32 arithmetic), Cast
 * and Gather, one thread per output element (reductions over one block of
 * axes: a warp, a block or a column of threads per output).
 * Semantics of kernels/cpu/shape.c (Pad: constant/reflect/edge/wrap, pads may
 * be negative), kernels/cpu/reduce.c (axes sorted and positive; empty
 * reductions give 0 / NaN / -inf; f32 sums accumulate in double) and
 * kernels/cpu/resize.c (nearest with the four roundings, N-D multilinear; the
 * per-dim source coordinate of each output coordinate is computed in place,
 * in double, instead of the CPU's tables: the workspace is transient device
 * memory and nothing may be prepared on the host at run time; nearest by
 * whole factors, where that gives o / s, is a vectorised copy instead). */
#include "cuda_internal.h"
#include "cuda_types.cuh"

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

template <typename T>
static __global__ void pad_kernel(const T *__restrict__ x, T *__restrict__ y, pad_geom g, int64_t n) {
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
        if (inside) y[i] = x[off];
        else ert_put(y + i, g.value);
    }
}

/* Constant padding at the end of the last axis only (a channels-last image
 * padded to 8 channels): one thread per row, no index decoding. */
template <typename T>
static __global__ void pad_last_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t rows, int cx, int cy,
                                       float value) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const T *xr = x + r * cx;
        T *yr = y + r * cy;
        for (int c = 0; c < cy; c++) {
            if (c < cx) yr[c] = xr[c];
            else ert_put(yr + c, value);
        }
    }
}

/* ------------------------------------------------------------------ Reduce */

struct red_geom {
    int nk, nr;
    int64_t kdim[ERT_MAX_DIMS], kst[ERT_MAX_DIMS], rdim[ERT_MAX_DIMS], rst[ERT_MAX_DIMS];
    int64_t n_red;
};

/* The reductions on the GPU: Sum, Mean, Max, Min, L1, L2, SumSquare and
 * LogSum (Prod and LogSumExp stay on the CPU fallback). Each element goes
 * through red_in (|x|, x*x, -x for Min) and is summed or maxed; red_final
 * turns the total into the result. Sums in double, NaN wins a max, as on the
 * CPU (kernels/cpu/reduce.c). */
static __device__ __forceinline__ bool red_is_max(int op) { return op == ERT_OP_REDUCE_MAX || op == ERT_OP_REDUCE_MIN; }

static __device__ __forceinline__ float red_in(float v, int op) {
    switch (op) {
    case ERT_OP_REDUCE_MIN: return -v;
    case ERT_OP_REDUCE_L1: return fabsf(v);
    case ERT_OP_REDUCE_L2: case ERT_OP_REDUCE_SUM_SQUARE: return v * v;
    default: return v;
    }
}

static __device__ __forceinline__ void red_step(double &sum, float &mx, float v, bool is_max) {
    if (is_max) {
        if (v > mx || isnan(v)) mx = v;
    } else {
        sum += v;
    }
}

static __device__ __forceinline__ float red_final(double sum, float mx, int op, int64_t n_red) {
    switch (op) {
    case ERT_OP_REDUCE_MAX: return mx;
    case ERT_OP_REDUCE_MIN: return -mx;
    case ERT_OP_REDUCE_MEAN: return n_red ? (float)(sum / (double)n_red) : NAN;
    case ERT_OP_REDUCE_L2: return (float)sqrt(sum);
    case ERT_OP_REDUCE_LOG_SUM: return (float)log(sum);
    default: return (float)sum;
    }
}

template <typename T>
static __global__ void reduce_kernel(const T *__restrict__ x, T *__restrict__ y, red_geom g, int64_t n,
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
            double v = red_in(ert_ld(x[off]), op);
            if (red_is_max(op)) {
                if (v > mx || isnan(v)) mx = v;
            } else {
                sum += v;
            }
        }
        ert_put(y + o, red_final(sum, (float)mx, op, g.n_red));
    }
}

/* K2 == 1, R contiguous: one warp per output. */
template <typename T>
static __global__ void reduce_rows_warp_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t K1, int64_t R,
                                               int op) {
    const bool is_max = red_is_max(op);
    const int lane = threadIdx.x & 31;
    const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t k = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; k < K1; k += nw) {
        const T *xp = x + k * R;
        double sum = 0;
        float mx = -INFINITY;
        for (int64_t r = lane; r < R; r += 32) red_step(sum, mx, red_in(ert_ld(xp[r]), op), is_max);
        for (int o = 16; o > 0; o >>= 1) {
            double s2 = __shfl_down_sync(0xffffffffu, sum, o);
            float m2 = __shfl_down_sync(0xffffffffu, mx, o);
            sum += s2;
            if (m2 > mx || isnan(m2)) mx = m2;
        }
        if (lane == 0) ert_put(y + k, red_final(sum, mx, op, R));
    }
}

constexpr int kRedBlock = 256;

/* K2 == 1 with long rows: one block per output. */
template <typename T>
static __global__ void __launch_bounds__(kRedBlock) reduce_rows_block_kernel(const T *__restrict__ x, T *__restrict__ y,
                                                                              int64_t K1, int64_t R, int op) {
    __shared__ double ssum[kRedBlock];
    __shared__ float smx[kRedBlock];
    const bool is_max = red_is_max(op);
    for (int64_t k = blockIdx.x; k < K1; k += gridDim.x) {
        const T *xp = x + k * R;
        double sum = 0;
        float mx = -INFINITY;
        for (int64_t r = threadIdx.x; r < R; r += kRedBlock) red_step(sum, mx, red_in(ert_ld(xp[r]), op), is_max);
        ssum[threadIdx.x] = sum;
        smx[threadIdx.x] = mx;
        __syncthreads();
        for (int w = kRedBlock / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w) {
                ssum[threadIdx.x] += ssum[threadIdx.x + w];
                float m2 = smx[threadIdx.x + w];
                if (m2 > smx[threadIdx.x] || isnan(m2)) smx[threadIdx.x] = m2;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) ert_put(y + k, red_final(ssum[0], smx[0], op, R));
        __syncthreads();
    }
}

/* K2 > 1: a block covers 32 consecutive k2 of one k1 (coalesced), its 8 rows
 * of threads split R, then combine through shared memory. */
template <typename T>
static __global__ void reduce_cols_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t K1, int64_t R,
                                          int64_t K2, int op) {
    __shared__ double ssum[8][33];
    __shared__ float smx[8][33];
    const bool is_max = red_is_max(op);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t k2 = blockIdx.x * (int64_t)32 + tx;
    for (int64_t k1 = blockIdx.y; k1 < K1; k1 += gridDim.y) {
        double sum = 0;
        float mx = -INFINITY;
        if (k2 < K2) {
            const T *xp = x + k1 * R * K2 + k2;
            for (int64_t r = ty; r < R; r += 8) red_step(sum, mx, red_in(ert_ld(xp[r * K2]), op), is_max);
        }
        ssum[ty][tx] = sum;
        smx[ty][tx] = mx;
        __syncthreads();
        if (ty == 0 && k2 < K2) {
            for (int j = 1; j < 8; j++) {
                sum += ssum[j][tx];
                float m2 = smx[j][tx];
                if (m2 > mx || isnan(m2)) mx = m2;
            }
            ert_put(y + k1 * K2 + k2, red_final(sum, mx, op, R));
        }
        __syncthreads();
    }
}

/* x's dims with the reduced ones marked -> (K1, R, K2) if, size-1 dims
 * dropped, the reduced dims are one block; false otherwise. */
static bool red_blocks(const ert_tview *x, const bool *red, int64_t *K1, int64_t *R, int64_t *K2) {
    int state = 0; /* 0: before the block, 1: in it, 2: after it */
    *K1 = *R = *K2 = 1;
    for (int d = 0; d < x->ndim; d++) {
        int64_t n = x->dims[d];
        if (n == 1) continue;
        if (red[d]) {
            if (state == 2) return false;
            state = 1;
            *R *= n;
        } else if (state == 0) {
            *K1 *= n;
        } else {
            state = 2;
            *K2 *= n;
        }
    }
    return true;
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

template <typename T>
static __global__ void resize_kernel(const T *__restrict__ x, T *__restrict__ y, rz_geom g, int64_t n) {
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
            acc += wt * (double)ert_ld(x[off]);
        }
        ert_put(y + i, (float)acc);
    }
}

/* Nearest Resize by whole factors: the two 2x upsamples of YOLOv8n/YOLO11n's
 * neck (Ultralytics exports asymmetric + floor), 0.29 ms of YOLOv8n's 2.2 at
 * batch 8 in f16 on resize_kernel, which finds every element's source in
 * double with an int64 division per dim. Output coordinate o of a dim scaled
 * by s reads o / s (rz_whole_ok: the modes where resize_kernel computes
 * exactly that), so the work turns around: a thread reads one piece of the
 * input and writes all its copies, 32-bit indices, no arithmetic on the
 * values (a byte copy, like the CPU kernel's; resize_kernel's double sum
 * turns -0 into +0).
 * x is (R, W, C) with C counted in words (the widest of 16/8/4/2 bytes that
 * the bytes of C and the pointers allow), y is (R * sh, W * sw, C): R is the
 * rows above the last resized dim (with the first resized dim, of factor sh,
 * folded in), W that dim (factor sw), C what follows it. Channels-last
 * (N,H,W,C) has R = N*H and C = the channels: a thread copies one word of a
 * pixel's C-vector to its sh * sw output pixels, a warp covering whole
 * vectors. */
template <typename Wd>
static __global__ void upsample_kernel(const Wd *__restrict__ x, Wd *__restrict__ y, int C, int W, int sh, int sw,
                                       int n) {
    const int Wo = W * sw;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        int pix = j / C, c = j - pix * C, row = pix / W, w = pix - row * W;
        Wd v = x[j];
        Wd *o = y + ((row * sh) * Wo + w * sw) * C + c;
        for (int dy = 0; dy < sh; dy++)
            for (int dx = 0; dx < sw; dx++) o[(dy * Wo + dx) * C] = v;
    }
}

template <typename E, int V>
struct alignas(V * sizeof(E)) rz_vec {
    E e[V];
};

/* NCHW by 2 along W (C = 1 above): x is (R, W) elements, y (R * sh, 2W). A
 * thread loads V elements (16 bytes when W allows) and stores each twice, as
 * two V-element words per output row, instead of one element per thread. */
template <typename E, int V>
static __global__ void upsample_w2_kernel(const E *__restrict__ x, E *__restrict__ y, int Wv, int sh, int n) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        int row = j / Wv, wv = j - row * Wv;
        rz_vec<E, V> a = ((const rz_vec<E, V> *)x)[j], lo, hi;
#pragma unroll
        for (int t = 0; t < V; t++) { /* output element p of the 2V is a.e[p / 2] */
            lo.e[t] = a.e[t / 2];
            hi.e[t] = a.e[(V + t) / 2];
        }
        rz_vec<E, V> *o = (rz_vec<E, V> *)y + (row * sh) * (2 * Wv) + 2 * wv;
        for (int dy = 0; dy < sh; dy++) {
            o[dy * 2 * Wv] = lo;
            o[dy * 2 * Wv + 1] = hi;
        }
    }
}

/* Does resize_kernel read source o / s for every output coordinate o of a
 * dim scaled by the whole number s (out = s * in)? Per mode, with
 * o = k s + r, 0 <= r < s:
 *   asymmetric: o / s = k + r/s. floor gives k; round_prefer_floor only for
 *     s = 2 (r/s is 0 or a half, rounded down), not for s = 3 (2/3 -> 1);
 *   half_pixel, pytorch_half_pixel (its out = 1 case is o = 0 -> 0) and
 *     half_pixel_symmetric (its shift is 0 when out = s * in):
 *     k + (r + 0.5) / s - 0.5, strictly within half of k, so both
 *     round_prefer modes give k (no ties); floor gives k - 1 at r = 0 and
 *     ceil k + 1 at r = s - 1;
 *   align_corners: o (in - 1) / (s in - 1), within half of k for s = 2
 *     only (k - k/(2in-1) and k + 1/2 - (2k+1)/(2(2in-1))): the round modes.
 * s = 1 maps o to o in every mode. A brute-force run of resize_kernel's
 * arithmetic (in <= 1500, s <= 32, every mode pair) agrees with this table. */
static bool rz_whole_ok(int coord, int nearest_mode, int64_t s) {
    bool round = nearest_mode == 0 || nearest_mode == 1;
    if (s == 1) return true;
    switch (coord) {
    case 1: return nearest_mode == 2 || (nearest_mode == 0 && s == 2);
    case 0: case 3: case 5: return round;
    case 2: return round && s == 2;
    default: return false;
    }
}

/* A nearest Resize that upsample_kernel can run: every factor a whole number
 * (at most 32, the range checked) for which rz_whole_ok holds, at most two
 * dims resized with only size-1 dims between them, y under 2^31 elements.
 * Gives the (R, W, C) view of x and the factors (sh, sw) of the two dims
 * (sh = 1 when one dim is resized). A channels-last session's (N,H,W,C)
 * tensor comes with its scales permuted (runtime/passes/layout.c): R = N*H,
 * C = channels; NCHW gives R = N*C*H, C = 1. */
static bool rz_whole(const ert_resize_params *p, const ert_tview *x, const ert_tview *y, int64_t *R, int64_t *W,
                     int64_t *C, int *sh, int *sw) {
    if (p->mode != 0 || y->n_elems >= INT32_MAX || x->ndim != y->ndim) return false;
    int rd[2] = {0, 0}, nr = 0;
    int64_t s[ERT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        double f = p->scale[d];
        if (!(f >= 1 && f <= 32) || f != floor(f)) return false;
        s[d] = (int64_t)f;
        if (y->dims[d] != x->dims[d] * s[d] || !rz_whole_ok(p->coord, p->nearest_mode, s[d])) return false;
        if (s[d] > 1) {
            if (nr == 2) return false;
            rd[nr++] = d;
        }
    }
    if (nr == 0) return false;
    int b = rd[nr - 1];
    for (int d = rd[0] + 1; d < b; d++)
        if (x->dims[d] != 1) return false;
    *R = *C = 1;
    for (int d = 0; d < b; d++) *R *= x->dims[d];
    for (int d = b + 1; d < x->ndim; d++) *C *= x->dims[d];
    *W = x->dims[b];
    *sh = nr == 2 ? (int)s[rd[0]] : 1;
    *sw = (int)s[b];
    return true;
}

/* upsample_w2_kernel for NCHW by 2 along W (16-byte words when W and the
 * pointers allow), else upsample_kernel in the widest word that the bytes of
 * C and the pointers allow. es: 2 or 4. */
static cudaError_t upsample_launch(const void *x, void *y, size_t es, int R, int W, int C, int sh, int sw,
                                   cudaStream_t st) {
    if (C == 1 && sw == 2) {
        int V = (int)(16 / es);
        while (V > 1 && (W % V || !ert_vec_ok(x, V, es) || !ert_vec_ok(y, V, es))) V /= 2;
        int n = R * (W / V);
        unsigned g = grid_for(n);
#define ERT_UPW2(E, V_) upsample_w2_kernel<E, V_><<<g, 256, 0, st>>>((const E *)x, (E *)y, W / V_, sh, n)
        if (es == 2) {
            switch (V) {
            case 8: ERT_UPW2(uint16_t, 8); break;
            case 4: ERT_UPW2(uint16_t, 4); break;
            case 2: ERT_UPW2(uint16_t, 2); break;
            default: ERT_UPW2(uint16_t, 1); break;
            }
        } else {
            switch (V) {
            case 4: ERT_UPW2(uint32_t, 4); break;
            case 2: ERT_UPW2(uint32_t, 2); break;
            default: ERT_UPW2(uint32_t, 1); break;
            }
        }
#undef ERT_UPW2
        return cudaGetLastError();
    }
    size_t cb = (size_t)C * es, wb = 16;
    while (wb > es && (cb % wb || (uintptr_t)x % wb || (uintptr_t)y % wb)) wb /= 2;
    int Cw = (int)(cb / wb), n = R * W * Cw;
    unsigned g = grid_for(n);
#define ERT_UP(Wd) upsample_kernel<Wd><<<g, 256, 0, st>>>((const Wd *)x, (Wd *)y, Cw, W, sh, sw, n)
    switch (wb) {
    case 16: ERT_UP(uint4); break;
    case 8: ERT_UP(uint2); break;
    case 4: ERT_UP(uint32_t); break;
    default: ERT_UP(uint16_t); break;
    }
#undef ERT_UP
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ Cast */

/* Semantics of kernels/cpu/shape_gen.c: integers held as int64 (bool 0/1),
 * floats as double; float -> integer truncates and saturates (NaN -> 0);
 * integer -> narrower integer wraps. */
struct cscalar {
    bool is_int;
    int64_t i;
    double f;
};

static __device__ cscalar c_load(const void *p, int dt, int64_t k) {
    cscalar s = {true, 0, 0};
    switch (dt) {
    case ERT_DTYPE_F32: s.is_int = false; s.f = ((const float *)p)[k]; break;
    case ERT_DTYPE_F16: s.is_int = false; s.f = __half2float(((const __half *)p)[k]); break;
    case ERT_DTYPE_BF16: s.is_int = false; s.f = __bfloat162float(((const __nv_bfloat16 *)p)[k]); break;
    case ERT_DTYPE_I8: s.i = ((const int8_t *)p)[k]; break;
    case ERT_DTYPE_U8: s.i = ((const uint8_t *)p)[k]; break;
    case ERT_DTYPE_BOOL: s.i = ((const uint8_t *)p)[k] != 0; break;
    case ERT_DTYPE_I32: s.i = ((const int32_t *)p)[k]; break;
    case ERT_DTYPE_I64: s.i = ((const int64_t *)p)[k]; break;
    default: break;
    }
    return s;
}

static __device__ int64_t c_f_to_i(double f, double lo, double hi) {
    if (f != f) return 0;
    if (f <= lo) return (int64_t)lo;
    if (f >= hi) return (int64_t)hi;
    return (int64_t)f;
}

static __device__ void c_store(void *p, int dt, int64_t k, cscalar s) {
    double f = s.is_int ? (double)s.i : s.f;
    switch (dt) {
    case ERT_DTYPE_F32: ((float *)p)[k] = (float)f; break;
    case ERT_DTYPE_F16: ((__half *)p)[k] = __float2half_rn((float)f); break;
    case ERT_DTYPE_BF16: ((__nv_bfloat16 *)p)[k] = __float2bfloat16_rn((float)f); break;
    case ERT_DTYPE_BOOL: ((uint8_t *)p)[k] = s.is_int ? s.i != 0 : f != 0; break;
    case ERT_DTYPE_I8: ((int8_t *)p)[k] = (int8_t)(uint8_t)(s.is_int ? (uint64_t)s.i : (uint64_t)c_f_to_i(f, -128, 127)); break;
    case ERT_DTYPE_U8: ((uint8_t *)p)[k] = (uint8_t)(s.is_int ? (uint64_t)s.i : (uint64_t)c_f_to_i(f, 0, 255)); break;
    case ERT_DTYPE_I32:
        ((int32_t *)p)[k] =
            (int32_t)(uint32_t)(s.is_int ? (uint64_t)s.i : (uint64_t)c_f_to_i(f, -2147483648.0, 2147483647.0));
        break;
    case ERT_DTYPE_I64:
        ((int64_t *)p)[k] = s.is_int ? s.i : c_f_to_i(f, -9223372036854775808.0, 9223372036854774784.0);
        break;
    default: break;
    }
}

static __global__ void cast_kernel(const void *__restrict__ x, int from, void *__restrict__ y, int to, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        c_store(y, to, i, c_load(x, from, i));
}

/* f32 <-> f16/bf16, the edges of a reduced-precision session: vector-free but
 * branch-free. */
template <typename S, typename D>
static __global__ void cast_float_kernel(const S *__restrict__ x, D *__restrict__ y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        ert_put(y + i, ert_ld(x[i]));
}

/* ------------------------------------------------------------------ Gather */

/* data (outer, dim, inner) elements of esize bytes, indices (n_idx) i32/i64
 * -> y (outer, n_idx, inner). An index outside [-dim, dim) gives zeros (the
 * CPU kernel refuses it; a kernel inside a CUDA graph cannot report it). */
template <typename E>
static __global__ void gather_kernel(const E *__restrict__ x, const void *__restrict__ ind, bool i64, E *__restrict__ y,
                                     int64_t n_idx, int64_t dim, int64_t inner, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t in = i % inner, r = i / inner, j = r % n_idx, o = r / n_idx;
        int64_t k = i64 ? ((const int64_t *)ind)[j] : ((const int32_t *)ind)[j];
        if (k < 0) k += dim;
        if (k < 0 || k >= dim) {
            y[i] = E();
            continue;
        }
        y[i] = x[(o * dim + k) * inner + in];
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

/* Create-time test data: element i = scale * (2u - 1), u in [0, 1) from a
 * counter hash (splitmix64 of seed and i), so no state and no host pass. */
template <typename T> static __global__ void fill_uniform_kernel(T *y, size_t n, float scale, unsigned long long seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float u = (float)(z >> 40) * (1.0f / 16777216.0f);
        ert_put(&y[i], scale * (2.0f * u - 1.0f));
    }
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
    if (x->dtype != y->dtype) return cudaErrorInvalidValue;
    bool last_only = p->mode == 0 && x->ndim >= 1 && x->ndim == y->ndim && y->dims[y->ndim - 1] <= 64;
    for (int d = 0; d < x->ndim && last_only; d++)
        last_only = p->pad_begin[d] == 0 && (d == x->ndim - 1 || x->dims[d] == y->dims[d]);
    if (last_only && x->dims[x->ndim - 1] > 0) {
        int64_t rows = y->n_elems / y->dims[y->ndim - 1];
        ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
            pad_last_kernel<T><<<grid_for(rows), 256, 0, st>>>((const T *)x->data, (T *)y->data, rows,
                                                               (int)x->dims[x->ndim - 1], (int)y->dims[y->ndim - 1],
                                                               g.value))
        return cudaGetLastError();
    }
    ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
        pad_kernel<T><<<grid_for(y->n_elems), 256, 0, st>>>((const T *)x->data, (T *)y->data, g, y->n_elems))
    return cudaGetLastError();
}

cudaError_t ert_cuda_reduce_launch(ert_op op, const ert_axis_params *p, const ert_tview *x, const ert_tview *y,
                                   cudaStream_t st) {
    if (y->n_elems <= 0) return cudaSuccess;
    if (p->n_axes == 0) /* noop_with_empty_axes */
        return y->data == x->data ? cudaSuccess
                                  : cudaMemcpyAsync(y->data, x->data, (size_t)x->n_elems * ert_dtype_size(x->dtype),
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
    if (x->dtype != y->dtype) return cudaErrorInvalidValue;
    int64_t K1, R, K2;
    if (g.n_red > 1 && red_blocks(x, red, &K1, &R, &K2) && K1 * K2 == y->n_elems) {
        if (K2 > 1) {
            int64_t gx = (K2 + 31) / 32;
            if (gx > 0x7fffffff) return cudaErrorInvalidValue;
            dim3 grid((unsigned)gx, (unsigned)(K1 > 65535 ? 65535 : K1)), block(32, 8);
            ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
                reduce_cols_kernel<T><<<grid, block, 0, st>>>((const T *)x->data, (T *)y->data, K1, R, K2, (int)op))
        } else if (R >= 2048) {
            ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
                reduce_rows_block_kernel<T><<<(unsigned)(K1 > (1 << 20) ? (1 << 20) : K1), kRedBlock, 0, st>>>(
                    (const T *)x->data, (T *)y->data, K1, R, (int)op))
        } else {
            int64_t blocks = (K1 + 7) / 8; /* 8 warps a block */
            ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
                reduce_rows_warp_kernel<T><<<(unsigned)(blocks > (1 << 20) ? (1 << 20) : blocks), 256, 0, st>>>(
                    (const T *)x->data, (T *)y->data, K1, R, (int)op))
        }
        return cudaGetLastError();
    }
    ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
        reduce_kernel<T><<<grid_for(y->n_elems), 256, 0, st>>>((const T *)x->data, (T *)y->data, g, y->n_elems,
                                                              (int)op))
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
    if (x->dtype != y->dtype) return cudaErrorInvalidValue;
    int64_t R, W, C;
    int sh, sw;
    if ((x->dtype == ERT_DTYPE_F32 || x->dtype == ERT_DTYPE_F16 || x->dtype == ERT_DTYPE_BF16) &&
        rz_whole(p, x, y, &R, &W, &C, &sh, &sw))
        return upsample_launch(x->data, y->data, ert_dtype_size(x->dtype), (int)R, (int)W, (int)C, sh, sw, st);
    ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
        resize_kernel<T><<<grid_for(y->n_elems), 256, 0, st>>>((const T *)x->data, (T *)y->data, g, y->n_elems))
    return cudaGetLastError();
}

cudaError_t ert_cuda_cast_launch(const ert_tview *x, const ert_tview *y, cudaStream_t st) {
    if (y->n_elems <= 0) return cudaSuccess;
    if (x->n_elems != y->n_elems || !ert_dtype_size(x->dtype) || !ert_dtype_size(y->dtype))
        return cudaErrorInvalidValue;
    if (x->dtype == y->dtype)
        return x->data == y->data ? cudaSuccess
                                  : cudaMemcpyAsync(y->data, x->data, (size_t)x->n_elems * ert_dtype_size(x->dtype),
                                                    cudaMemcpyDeviceToDevice, st);
    unsigned g = grid_for(y->n_elems);
    bool xf = x->dtype == ERT_DTYPE_F32, yf = y->dtype == ERT_DTYPE_F32;
    if (xf && (y->dtype == ERT_DTYPE_F16 || y->dtype == ERT_DTYPE_BF16)) {
        ERT_CUDA_FLOAT_SWITCH(y->dtype, D,
            cast_float_kernel<float, D><<<g, 256, 0, st>>>((const float *)x->data, (D *)y->data, y->n_elems))
    } else if (yf && (x->dtype == ERT_DTYPE_F16 || x->dtype == ERT_DTYPE_BF16)) {
        ERT_CUDA_FLOAT_SWITCH(x->dtype, S,
            cast_float_kernel<S, float><<<g, 256, 0, st>>>((const S *)x->data, (float *)y->data, y->n_elems))
    } else {
        cast_kernel<<<g, 256, 0, st>>>(x->data, (int)x->dtype, y->data, (int)y->dtype, y->n_elems);
    }
    return cudaGetLastError();
}

cudaError_t ert_cuda_gather_launch(int64_t axis, const ert_tview *x, const ert_tview *ind, const ert_tview *y,
                                   cudaStream_t st) {
    if (y->n_elems <= 0) return cudaSuccess;
    if (axis < 0 || axis >= x->ndim || (ind->dtype != ERT_DTYPE_I64 && ind->dtype != ERT_DTYPE_I32))
        return cudaErrorInvalidValue;
    int64_t inner = 1, dim = x->dims[axis];
    for (int d = (int)axis + 1; d < x->ndim; d++) inner *= x->dims[d];
    if (inner <= 0 || ind->n_elems <= 0) return cudaSuccess;
    unsigned g = grid_for(y->n_elems);
    bool i64 = ind->dtype == ERT_DTYPE_I64;
    switch (ert_dtype_size(x->dtype)) {
    case 1: gather_kernel<uint8_t><<<g, 256, 0, st>>>((const uint8_t *)x->data, ind->data, i64, (uint8_t *)y->data, ind->n_elems, dim, inner, y->n_elems); break;
    case 2: gather_kernel<uint16_t><<<g, 256, 0, st>>>((const uint16_t *)x->data, ind->data, i64, (uint16_t *)y->data, ind->n_elems, dim, inner, y->n_elems); break;
    case 4: gather_kernel<uint32_t><<<g, 256, 0, st>>>((const uint32_t *)x->data, ind->data, i64, (uint32_t *)y->data, ind->n_elems, dim, inner, y->n_elems); break;
    case 8: gather_kernel<uint64_t><<<g, 256, 0, st>>>((const uint64_t *)x->data, ind->data, i64, (uint64_t *)y->data, ind->n_elems, dim, inner, y->n_elems); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

/* Keeps the GPU busy for `ns` nanoseconds of its global timer: the profiler
 * (cuda_run_timed) puts one before a node's start event so that the node's
 * kernels are queued before the GPU reaches the event, and the event pair
 * measures device time, not the host's time to enqueue. */
static __global__ void spin_kernel(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

cudaError_t ert_cuda_spin_launch(unsigned long long ns, cudaStream_t st) {
    spin_kernel<<<1, 1, 0, st>>>(ns);
    return cudaGetLastError();
}

cudaError_t ert_cuda_fill_uniform_launch(ert_dtype dt, void *y, size_t n, float scale, unsigned long long seed,
                                         cudaStream_t st) {
    if (!n) return cudaSuccess;
    unsigned g = grid_for((int64_t)(n < (size_t)INT64_MAX ? n : (size_t)INT64_MAX));
    ERT_CUDA_FLOAT_SWITCH(dt, T, fill_uniform_kernel<T><<<g, 256, 0, st>>>((T *)y, n, scale, seed));
    return cudaGetLastError();
}

} // extern "C"
