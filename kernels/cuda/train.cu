/* Training kernels (f32, and f16/bf16 activations of mixed precision: the
 * *_h launchers at the end, f32 math and statistics): the CUDA twins of kernels/cpu/grad_*.c, loss.c and
 * optim.c, with the same formulas (see those files' headers). Layer 1 and 2
 * of STYLE rule 3; cuda_train.c is the dispatch.
 *
 * Differences from the CPU that tests must tolerate: sums are reduced in a
 * different order (blocks, atomics), in double where the CPU uses double.
 * Exact: the Dropout mask (splitmix64 is a counter: element i of a call uses
 * the state advanced i + 1 times, so every thread finds its draw directly).
 *
 * Step-dependent values never sit in kernel arguments (a CUDA graph bakes
 * those in): OPTIM reads lr and the Adam bias corrections from `hyper` (device
 * memory the trainer's pinned staging copies in at each step) and skips the
 * update when the loss or the gradient norm is not finite. */
#include "cuda_internal.h"
#include "cuda_types.cuh"

#include <math.h>

constexpr int kThreads = 256;

static int blocks_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b > 65535 * 8) b = 65535 * 8;
    return b < 1 ? 1 : (int)b;
}

#define GRID_STRIDE(i, n)                                                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* Block sum of a double (every thread gets the result). */
static __device__ double block_sum(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < (int)(blockDim.x + 31) / 32; i++) s += sh[i];
        sh[32] = s;
    }
    __syncthreads();
    return sh[32];
}

static __device__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ double warp_max(double v) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Offset of operand k for output index e (map of cuda_internal.h). */
static __device__ int64_t map_off(const ert_cuda_map &m, int k, int64_t e) {
    int64_t off = 0;
    for (int d = m.ndim - 1; d >= 0; d--) {
        int64_t i = e % m.dims[d];
        e /= m.dims[d];
        off += i * m.s[k][d];
    }
    return off;
}

/* ---------------------------------------------------------------- activations */

static __device__ float act_deriv(float x, const ert_unary_params &u) {
    const ert_act_params &a = u.act;
    switch (a.kind) {
    case ERT_ACT_NONE: return 1.0f;
    case ERT_ACT_RELU: return x > 0 ? 1.0f : 0.0f;
    case ERT_ACT_LEAKY_RELU: return x >= 0 ? 1.0f : a.alpha;
    case ERT_ACT_CLIP: return x >= a.alpha && x <= a.beta ? 1.0f : 0.0f;
    case ERT_ACT_SIGMOID: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f - s);
    }
    case ERT_ACT_TANH: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    case ERT_ACT_HARD_SIGMOID: {
        float y = a.alpha * x + a.beta;
        return y > 0 && y < 1 ? a.alpha : 0.0f;
    }
    case ERT_ACT_HARD_SWISH: return x < -3.0f ? 0.0f : (x > 3.0f ? 1.0f : (2.0f * x + 3.0f) / 6.0f);
    case ERT_ACT_SILU: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f + x * (1.0f - s));
    }
    case ERT_ACT_GELU: {
        if (u.alpha != 0.0f) {
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

static __global__ void act_grad_k(const float *__restrict__ dy, const float *__restrict__ x, float *__restrict__ dx,
                           int64_t n, ert_unary_params u) {
    if (u.act.kind == ERT_ACT_RELU) {
        GRID_STRIDE(i, n) dx[i] = x[i] > 0 ? dy[i] : 0.0f;
        return;
    }
    GRID_STRIDE(i, n) dx[i] = dy[i] * act_deriv(x[i], u);
}

/* ---------------------------------------------------------------- broadcast walks */

/* m: output = dy's shape; s[0] a, s[1] b, s[2] o (the operand whose gradient). */
static __global__ void binary_grad_k(const float *__restrict__ dy, const float *__restrict__ a, const float *__restrict__ b,
                              float *__restrict__ o, ert_cuda_map m, int64_t n, int fwd, int which, bool direct) {
    GRID_STRIDE(e, n) {
        float g = dy[e];
        float va = a ? a[map_off(m, 0, e)] : 0.0f, vb = b ? b[map_off(m, 1, e)] : 0.0f;
        switch (fwd) {
        case ERT_OP_SUB: g = which == 0 ? g : -g; break;
        case ERT_OP_MUL: g = which == 0 ? g * vb : g * va; break;
        case ERT_OP_DIV: g = which == 0 ? g / vb : -g * va / (vb * vb); break;
        default: break;
        }
        if (direct) o[e] = g;
        else atomicAdd(o + map_off(m, 2, e), g);
    }
}

/* dy (outer, mid, inner) summed over outer and inner: one block per mid. */
static __global__ void __launch_bounds__(kThreads) reduce_block_k(const float *__restrict__ dy, float *__restrict__ o, int64_t outer, int64_t mid,
                               int64_t inner, float scale) {
    __shared__ double sh[33];
    int64_t m = blockIdx.x;
    double s = 0;
    for (int64_t q = 0; q < outer; q++)
        for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) s += dy[(q * mid + m) * inner + i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) o[m] = (float)s * scale;
}

/* General REDUCE_TO: m over dy's shape, s[0] = strides into the output. */
static __global__ void reduce_atomic_k(const float *__restrict__ dy, float *__restrict__ o, ert_cuda_map m, int64_t n,
                                float scale) {
    GRID_STRIDE(e, n) atomicAdd(o + map_off(m, 0, e), dy[e] * scale);
}

/* BROADCAST_TO: m over the output's shape, s[0] = strides into dy. */
static __global__ void broadcast_k(const float *__restrict__ dy, float *__restrict__ o, ert_cuda_map m, int64_t n,
                            float scale) {
    GRID_STRIDE(e, n) o[e] = dy[map_off(m, 0, e)] * scale;
}

/* ---------------------------------------------------------------- pooling */

/* Pool gradients, any float type: one thread per dy element (grid x/y: the
 * output column/row, z: plane and output depth, so no thread divides to find
 * its position), dx zeroed first; a MaxPool window adds dy at its argmax (the
 * first maximum in tap order, a NaN only as the first tap taken), an
 * AveragePool window dy / count at each tap. Overlapping windows (3x3 stride
 * 2) meet in hardware atomics of the element type (bf16's before sm_80: a
 * 32-bit CAS). Geometry in 32-bit (a plane of 2^31 or more elements is
 * refused). A gather form (one thread per dx element recomputing each
 * covering window's argmax) was 3x slower on ResNet's stem: its integer
 * divisions cost more than the atomics. */
struct pgeom {
    int in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
};

/* taps [lo, hi) of a window starting at `start` that fall inside the input;
 * np: taps inside the padded extent (count_include_pad). */
static __device__ __forceinline__ void taps(int start, int K, int d, int in, int pe, int *lo, int *hi, int *np) {
    *lo = start >= 0 ? 0 : (-start + d - 1) / d;
    *hi = in - start <= 0 ? 0 : (in - start + d - 1) / d;
    if (*hi > K) *hi = K;
    if (*lo > *hi) *lo = *hi;
    int n = in + pe - start <= 0 ? 0 : (in + pe - start + d - 1) / d;
    *np = n > K ? K : n;
}

static __device__ __forceinline__ void atomic_acc(float *p, float v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_acc(__half *p, float v) { atomicAdd(p, __float2half_rn(v)); }
static __device__ __forceinline__ void atomic_acc(__nv_bfloat16 *p, float v) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    atomicAdd(p, __float2bfloat16_rn(v));
#else
    unsigned int *w = (unsigned int *)((size_t)p & ~(size_t)3);
    const bool hi = ((size_t)p & 2) != 0;
    unsigned int old = *w, assumed;
    do {
        assumed = old;
        unsigned short h = hi ? (unsigned short)(assumed >> 16) : (unsigned short)(assumed & 0xffffu);
        __nv_bfloat16 cur, nv;
        memcpy(&cur, &h, 2);
        nv = __float2bfloat16_rn(__bfloat162float(cur) + v);
        unsigned short nh;
        memcpy(&nh, &nv, 2);
        unsigned int nw = hi ? (assumed & 0xffffu) | ((unsigned int)nh << 16) : (assumed & 0xffff0000u) | nh;
        old = atomicCAS(w, assumed, nw);
    } while (assumed != old);
#endif
}

template <typename T>
static __global__ void pool_grad_k(const T *__restrict__ x, const T *__restrict__ dy, T *__restrict__ dx, pgeom g,
                                   int64_t zn, bool is_max, bool include_pad) {
    const int ow = blockIdx.x * blockDim.x + threadIdx.x, oh = blockIdx.y * blockDim.y + threadIdx.y;
    if (ow >= g.out[2] || oh >= g.out[1]) return;
    const int in_sz = g.in[0] * g.in[1] * g.in[2];
    int st[3], lo[3], hi[3], np[3];
    st[1] = oh * g.s[1] - g.pb[1];
    st[2] = ow * g.s[2] - g.pb[2];
    taps(st[1], g.k[1], g.d[1], g.in[1], g.pe[1], &lo[1], &hi[1], &np[1]);
    taps(st[2], g.k[2], g.d[2], g.in[2], g.pe[2], &lo[2], &hi[2], &np[2]);
    for (int64_t z = blockIdx.z; z < zn; z += gridDim.z) { /* z = plane * out[0] + od */
        const int64_t plane = g.out[0] == 1 ? z : z / g.out[0];
        const int od = g.out[0] == 1 ? 0 : (int)(z % g.out[0]);
        st[0] = od * g.s[0] - g.pb[0];
        taps(st[0], g.k[0], g.d[0], g.in[0], g.pe[0], &lo[0], &hi[0], &np[0]);
        const T *xp = x + plane * in_sz;
        T *dp = dx + plane * in_sz;
        const float gv = ert_ld(dy[(z * g.out[1] + oh) * g.out[2] + ow]);
        if (!is_max) {
            int cnt = include_pad ? np[0] * np[1] * np[2] : (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
            float w = cnt > 0 ? gv / (float)cnt : 0.0f;
            for (int kd = lo[0]; kd < hi[0]; kd++)
                for (int kh = lo[1]; kh < hi[1]; kh++)
                    for (int kw = lo[2]; kw < hi[2]; kw++)
                        atomic_acc(dp + ((st[0] + kd * g.d[0]) * g.in[1] + st[1] + kh * g.d[1]) * g.in[2] + st[2] +
                                       kw * g.d[2],
                                   w);
            continue;
        }
        float mx = -INFINITY;
        int arg = -1;
        for (int kd = lo[0]; kd < hi[0]; kd++)
            for (int kh = lo[1]; kh < hi[1]; kh++)
                for (int kw = lo[2]; kw < hi[2]; kw++) {
                    int j = ((st[0] + kd * g.d[0]) * g.in[1] + st[1] + kh * g.d[1]) * g.in[2] + st[2] + kw * g.d[2];
                    float v = ert_ld(xp[j]);
                    if (v > mx || (arg < 0 && isnan(v))) {
                        mx = v;
                        arg = j;
                    }
                }
        if (arg >= 0) atomic_acc(dp + arg, gv);
    }
}

static __global__ void gap_grad_k(const float *__restrict__ dy, float *__restrict__ dx, int64_t sz, int64_t total) {
    GRID_STRIDE(i, total) dx[i] = dy[i / sz] / (float)sz;
}

/* ---------------------------------------------------------------- softmax */

static __global__ void softmax_grad_k(const float *__restrict__ dy, const float *__restrict__ y, float *__restrict__ dx,
                               int64_t outer, int64_t n, int64_t inner, bool lg) {
    GRID_STRIDE(r, outer * inner) {
        int64_t base = (r / inner) * n * inner + r % inner;
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += lg ? dy[base + i * inner] : dy[base + i * inner] * y[base + i * inner];
        for (int64_t i = 0; i < n; i++) {
            int64_t k = base + i * inner;
            dx[k] = lg ? dy[k] - expf(y[k]) * (float)s : y[k] * (dy[k] - (float)s);
        }
    }
}

/* ---------------------------------------------------------------- gather */

/* An index outside [-dim, dim) is recorded in status {tag, index} (the first
 * thread to swap the tag in writes its index; the trainer reads both after
 * the step, when GRAD_NORM has already skipped every update). */
template <typename I>
static __global__ void gather_grad_k(const float *__restrict__ dy, const I *__restrict__ idx, float *__restrict__ dx,
                              int64_t outer, int64_t dim, int64_t n_idx, int64_t inner, int64_t *status, int64_t tag) {
    GRID_STRIDE(e, outer * n_idx * inner) {
        int64_t i = e % inner, j = (e / inner) % n_idx, o = e / (inner * n_idx);
        int64_t k = (int64_t)idx[j];
        if (k < -dim || k >= dim) {
            if (status && atomicCAS((unsigned long long *)status, 0ull, (unsigned long long)tag) == 0ull)
                status[1] = k;
            continue;
        }
        if (k < 0) k += dim;
        atomicAdd(dx + (o * dim + k) * inner + i, dy[e]);
    }
}

/* ---------------------------------------------------------------- dropout */

static __device__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static __global__ void dropout_k(const float *__restrict__ x, const uint64_t *rng, float *__restrict__ y,
                          float *__restrict__ mask, int64_t n, float ratio) {
    uint64_t s0 = *rng;
    float keep = 1.0f / (1.0f - ratio);
    GRID_STRIDE(i, n) {
        uint64_t z = mix64(s0 + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull);
        double u = (double)(z >> 11) * 0x1.0p-53;
        float mk = u >= ratio ? keep : 0.0f;
        mask[i] = mk;
        y[i] = x[i] * mk;
    }
}

static __global__ void rng_advance_k(uint64_t *rng, int64_t n) { *rng += (uint64_t)n * 0x9E3779B97F4A7C15ull; }

static __global__ void copy_mask_k(const float *__restrict__ x, float *__restrict__ y, float *__restrict__ mask, int64_t n) {
    GRID_STRIDE(i, n) {
        y[i] = x[i];
        mask[i] = 1.0f;
    }
}

/* ---------------------------------------------------------------- LayerNorm */

/* One block per row of `inner` elements (the normalised trailing dims),
 * statistics recomputed from x in double like the CPU kernel; dx from the
 * row sums; dscale/dB accumulate over rows with atomics (zeroed by the
 * launcher; sb / db1: a one-element scale / bias broadcast over the row). */
static __global__ void __launch_bounds__(kThreads) ln_grad_k(const float *__restrict__ dy, const float *__restrict__ x,
                                                             const float *__restrict__ sc, bool sb, float *dx, float *ds,
                                                             float *db, bool db1, int64_t inner, double eps) {
    __shared__ double sh[33];
    const int64_t r = blockIdx.x;
    const float *xp = x + r * inner, *gp = dy + r * inner;
    double s = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) s += xp[i];
    double mu = block_sum(s, sh) / (double)inner, v = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) v += (xp[i] - mu) * (xp[i] - mu);
    double inv = 1.0 / sqrt(block_sum(v, sh) / (double)inner + eps), sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
        double xh = (xp[i] - mu) * inv, g = gp[i] * (double)sc[sb ? 0 : i];
        sg += g;
        sgx += g * xh;
        if (ds) atomicAdd(&ds[sb ? 0 : i], (float)(gp[i] * xh));
        if (db) atomicAdd(&db[db1 ? 0 : i], gp[i]);
    }
    sg = block_sum(sg, sh);
    sgx = block_sum(sgx, sh);
    if (!dx) return;
    double mg = sg / (double)inner, mgx = sgx / (double)inner;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
        double xh = (xp[i] - mu) * inv, g = gp[i] * (double)sc[sb ? 0 : i];
        dx[r * inner + i] = (float)(inv * (g - mg - xh * mgx));
    }
}

/* ---------------------------------------------------------------- loss */

/* One block of kThreads (1024 threads ran out of registers on an H200:
 * cudaErrorLaunchOutOfResources); a warp per row. */
static __global__ void __launch_bounds__(kThreads) ce_k(const float *__restrict__ z, const int64_t *__restrict__ y, const float *__restrict__ w,
                     float *loss, float *__restrict__ dz, int64_t N, int64_t C, float eps_ls, const float *scale) {
    __shared__ double sh[33];
    __shared__ int bad;
    if (threadIdx.x == 0) bad = 0;
    __syncthreads();
    double W = 0, nrm = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) W += w ? w[c] : 1.0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        if (y[i] < 0 || y[i] >= C) bad = 1;
        else nrm += w ? w[y[i]] : 1.0;
    }
    W = block_sum(W, sh);
    nrm = block_sum(nrm, sh);
    if (bad) { /* a target outside [0, C): NaN loss, the step is skipped and reported */
        if (threadIdx.x == 0) *loss = nanf("");
        return;
    }
    double inv = nrm > 0 ? 1.0 / nrm : 0.0, e = eps_ls, S = scale ? (double)*scale : 1.0;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    double total = 0;
    for (int64_t i = warp; i < N; i += nw) {
        const float *zi = z + i * C;
        float *gi = dz + i * C;
        double mx = -INFINITY;
        for (int64_t c = lane; c < C; c += 32) mx = fmax(mx, (double)zi[c]);
        mx = warp_max(mx);
        double s = 0;
        for (int64_t c = lane; c < C; c += 32) s += exp(zi[c] - mx);
        s = warp_sum(s);
        double lse = mx + log(s), wy = w ? w[y[i]] : 1.0, li = 0;
        for (int64_t c = lane; c < C; c += 32) {
            double wc = w ? w[c] : 1.0, p = exp(zi[c] - lse), lp = zi[c] - lse;
            li -= e / (double)C * wc * lp;
            double g = (1.0 - e) * wy * (p - (c == y[i])) + e / (double)C * (W * p - wc);
            gi[c] = (float)(g * inv * S);
        }
        li = warp_sum(li);
        if (lane == 0) total += li - (1.0 - e) * wy * (zi[y[i]] - lse);
    }
    total = block_sum(total, sh);
    if (threadIdx.x == 0) *loss = (float)(total * inv);
}

static __global__ void __launch_bounds__(kThreads) mse_bce_k(const float *__restrict__ z, const float *__restrict__ t, float *loss, float *__restrict__ dz,
                          int64_t n, bool mse, const float *scale) {
    __shared__ double sh[33];
    double total = 0, inv = n ? 1.0 / (double)n : 0.0, S = scale ? (double)*scale : 1.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        double zi = z[i], ti = t[i];
        if (mse) {
            total += (zi - ti) * (zi - ti);
            dz[i] = (float)(2.0 * (zi - ti) * inv * S);
        } else {
            total += (zi > 0 ? zi : 0) - zi * ti + log1p(exp(-fabs(zi)));
            dz[i] = (float)((1.0 / (1.0 + exp(-zi)) - ti) * inv * S);
        }
    }
    total = block_sum(total, sh);
    if (threadIdx.x == 0) *loss = (float)(total * inv);
}

/* ---------------------------------------------------------------- optimizer */

/* Sum of squares of up to kSumsqList tensors in one launch (grid y picks
 * the tensor): a step's gradient norm is a few launches, not one per
 * parameter. */
constexpr int kSumsqList = 48;
struct sumsq_list {
    const float *g[kSumsqList];
    int64_t n[kSumsqList];
};

static __global__ void __launch_bounds__(kThreads) sumsq_k(sumsq_list l, double *acc) {
    __shared__ double sh[33];
    const float *g = l.g[blockIdx.y];
    const int64_t n = l.n[blockIdx.y];
    if ((int64_t)blockIdx.x * blockDim.x >= n) return; /* the whole block leaves: block_sum is not reached */
    double s = 0;
    GRID_STRIDE(i, n) s += (double)g[i] * g[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) atomicAdd(acc, s);
}

/* The optimizer multiplies every gradient by o[1]: with a scaler that is
 * clip factor / S, so unscaling costs no pass of its own. The update reads
 * o[0] (skips on inf/NaN), so o[1] uses the S the gradients were made with
 * and the scaler moves on after. S stays in [2^-24, 2^64]. */
static __global__ void norm_final_k(const double *acc, float *o, float clip, const float *loss, float *sc,
                                    int interval, const int64_t *status) {
    if (status && status[0] != 0) { /* bad input found in this step: no update, the scaler as it was */
        o[0] = nanf("");
        o[1] = 0.0f;
        return;
    }
    double S = sc ? (double)sc[0] : 1.0;
    double n = sqrt(*acc) / S;
    o[0] = (float)n;
    o[1] = (float)((clip > 0 && n > clip ? clip / (n + 1e-6) : 1.0) / S);
    if (!sc) return;
    if (!isfinite(*loss) || !isfinite(o[0])) {
        sc[0] = (float)fmax(S * 0.5, 5.9604644775390625e-8);
        sc[1] = 0.0f;
        sc[2] += 1.0f;
    } else if (sc[1] + 1.0f >= (float)interval) {
        sc[0] = (float)fmin(S * 2.0, 1.8446744073709552e19);
        sc[1] = 0.0f;
    } else {
        sc[1] += 1.0f;
    }
    o[2] = sc[0];
    o[3] = sc[2];
}

/* hyper: {lr, 1 - b1^t, 1 - b2^t}; gn: {norm, clip scale}. */
static __global__ void optim_k(float *__restrict__ w, const float *__restrict__ g0, float *__restrict__ m,
                        float *__restrict__ v, const float *gn, const float *hyper, const float *loss, int64_t n,
                        ert_optim_params p) {
    if (!isfinite(*loss) || !isfinite(gn[0])) return; /* the step is skipped (the trainer reports it) */
    const float scale = gn[1], lr = hyper[0], wd = p.weight_decay, mu = p.momentum;
    if (p.kind == ERT_OPTIM_SGD) {
        GRID_STRIDE(i, n) {
            float g = g0[i] * scale + wd * w[i];
            if (mu != 0.0f) {
                m[i] = mu * m[i] + g;
                g = p.nesterov ? g + mu * m[i] : m[i];
            }
            w[i] -= lr * g;
        }
        return;
    }
    const float bc1 = hyper[1], bc2 = hyper[2], b1 = p.beta1, b2 = p.beta2;
    const float decay = p.kind == ERT_OPTIM_ADAMW ? 1.0f - lr * wd : 1.0f, l2 = p.kind == ERT_OPTIM_ADAM ? wd : 0.0f;
    const float rs = 1.0f / sqrtf(bc2);
    GRID_STRIDE(i, n) {
        float wi = w[i] * decay;
        float g = g0[i] * scale + l2 * wi;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        w[i] = wi - lr * (mi / bc1) / (sqrtf(vi) * rs + p.eps);
    }
}

/* ---------------------------------------------------------------- launchers */

#define LAUNCH_END return cudaGetLastError()

cudaError_t ert_cuda_act_grad_launch(const ert_unary_params *u, const float *dy, const float *x, float *dx, int64_t n,
                                     cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    act_grad_k<<<blocks_for(n), kThreads, 0, st>>>(dy, x, dx, n, *u);
    LAUNCH_END;
}

cudaError_t ert_cuda_binary_grad_launch(ert_op fwd, int which, const float *dy, const float *a, const float *b,
                                        float *o, int64_t o_elems, const ert_cuda_map *m, int64_t n, cudaStream_t st) {
    if (fwd != ERT_OP_ADD && fwd != ERT_OP_SUB && fwd != ERT_OP_MUL && fwd != ERT_OP_DIV) return cudaErrorInvalidValue;
    bool direct = o_elems == n;
    if (!direct) {
        cudaError_t e = cudaMemsetAsync(o, 0, (size_t)o_elems * sizeof(float), st);
        if (e != cudaSuccess) return e;
    }
    if (n <= 0) return cudaSuccess;
    binary_grad_k<<<blocks_for(n), kThreads, 0, st>>>(dy, a, b, o, *m, n, (int)fwd, which, direct);
    LAUNCH_END;
}

cudaError_t ert_cuda_reduce_to_launch(const float *dy, float *o, int64_t o_elems, int64_t outer, int64_t mid,
                                      int64_t inner, const ert_cuda_map *m, int64_t n, float scale, cudaStream_t st) {
    if (!m) {
        if (mid <= 0) return cudaSuccess;
        reduce_block_k<<<(unsigned)mid, kThreads, 0, st>>>(dy, o, outer, mid, inner, scale);
        LAUNCH_END;
    }
    cudaError_t e = cudaMemsetAsync(o, 0, (size_t)o_elems * sizeof(float), st);
    if (e != cudaSuccess || n <= 0) return e;
    reduce_atomic_k<<<blocks_for(n), kThreads, 0, st>>>(dy, o, *m, n, scale);
    LAUNCH_END;
}

cudaError_t ert_cuda_broadcast_to_launch(const float *dy, float *o, const ert_cuda_map *m, int64_t n, float scale,
                                         cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    broadcast_k<<<blocks_for(n), kThreads, 0, st>>>(dy, o, *m, n, scale);
    LAUNCH_END;
}

cudaError_t ert_cuda_pool_grad_launch(bool is_max, const ert_pool_params *p, const ert_tview *x, const void *dy,
                                      const ert_tview *dy_v, void *dx, cudaStream_t st) {
    pgeom g;
    int off = 3 - p->nsp;
    int64_t in_sz = 1, out_sz = 1;
    if (p->nhwc || p->nsp < 1 || p->nsp > 3 || x->dtype != dy_v->dtype) return cudaErrorInvalidValue;
    for (int i = 0; i < 3; i++) {
        int s = i - off;
        bool real = s >= 0;
        int64_t v[7] = {real ? x->dims[2 + s] : 1, real ? dy_v->dims[2 + s] : 1, real ? p->kernel[s] : 1,
                        real ? p->stride[s] : 1, real ? p->dilation[s] : 1, real ? p->pad_begin[s] : 0,
                        real ? p->pad_end[s] : 0};
        for (int k = 0; k < 7; k++)
            if (v[k] < 0 || v[k] > INT32_MAX / 4) return cudaErrorInvalidValue;
        if (v[3] < 1 || v[4] < 1) return cudaErrorInvalidValue;
        g.in[i] = (int)v[0], g.out[i] = (int)v[1], g.k[i] = (int)v[2], g.s[i] = (int)v[3], g.d[i] = (int)v[4];
        g.pb[i] = (int)v[5], g.pe[i] = (int)v[6];
        in_sz *= v[0], out_sz *= v[1];
    }
    if (in_sz > INT32_MAX || out_sz > INT32_MAX) return cudaErrorInvalidValue;
    const int64_t planes = x->dims[0] * x->dims[1], zn = planes * g.out[0];
    if (planes <= 0 || in_sz <= 0) return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(dx, 0, (size_t)(planes * in_sz) * ert_dtype_size(x->dtype), st);
    if (e != cudaSuccess || out_sz <= 0) return e;
    dim3 block(32, 8), grid((unsigned)((g.out[2] + 31) / 32), (unsigned)((g.out[1] + 7) / 8),
                            (unsigned)(zn > 65535 ? 65535 : zn));
    if (grid.y > 65535) return cudaErrorInvalidValue;
    ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
        pool_grad_k<T><<<grid, block, 0, st>>>((const T *)x->data, (const T *)dy, (T *)dx, g, zn, is_max,
                                               p->count_include_pad))
    LAUNCH_END;
}

cudaError_t ert_cuda_gap_grad_launch(const float *dy, float *dx, int64_t planes, int64_t sz, cudaStream_t st) {
    if (planes * sz <= 0) return cudaSuccess;
    gap_grad_k<<<blocks_for(planes * sz), kThreads, 0, st>>>(dy, dx, sz, planes * sz);
    LAUNCH_END;
}

cudaError_t ert_cuda_softmax_grad_launch(bool log, const float *dy, const float *y, float *dx, int64_t outer, int64_t n,
                                         int64_t inner, cudaStream_t st) {
    if (outer * inner <= 0) return cudaSuccess;
    softmax_grad_k<<<blocks_for(outer * inner), kThreads, 0, st>>>(dy, y, dx, outer, n, inner, log);
    LAUNCH_END;
}

cudaError_t ert_cuda_gather_grad_launch(const float *dy, const void *idx, bool i64, float *dx, int64_t dx_elems,
                                        int64_t outer, int64_t dim, int64_t n_idx, int64_t inner, int64_t *status,
                                        int64_t tag, cudaStream_t st) {
    if (status && tag == 0) return cudaErrorInvalidValue; /* a zero tag would read as "no error" */
    cudaError_t e = cudaMemsetAsync(dx, 0, (size_t)dx_elems * sizeof(float), st);
    int64_t n = outer * n_idx * inner;
    if (e != cudaSuccess || n <= 0) return e;
    if (i64)
        gather_grad_k<<<blocks_for(n), kThreads, 0, st>>>(dy, (const int64_t *)idx, dx, outer, dim, n_idx, inner,
                                                           status, tag);
    else
        gather_grad_k<<<blocks_for(n), kThreads, 0, st>>>(dy, (const int32_t *)idx, dx, outer, dim, n_idx, inner,
                                                           status, tag);
    LAUNCH_END;
}

cudaError_t ert_cuda_dropout_train_launch(const float *x, uint64_t *rng, float *y, float *mask, int64_t n, float ratio,
                                          bool training, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    if (!training || ratio <= 0.0f) {
        copy_mask_k<<<blocks_for(n), kThreads, 0, st>>>(x, y, mask, n);
        LAUNCH_END;
    }
    dropout_k<<<blocks_for(n), kThreads, 0, st>>>(x, rng, y, mask, n, ratio);
    rng_advance_k<<<1, 1, 0, st>>>(rng, n);
    LAUNCH_END;
}

cudaError_t ert_cuda_loss_launch(int kind, const float *z, const void *target, const float *w, float *loss, float *dz,
                                 int64_t N, int64_t C, int64_t n, float label_smoothing, const float *scale,
                                 cudaStream_t st) {
    if (kind == ERT_LOSS_CROSS_ENTROPY)
        ce_k<<<1, kThreads, 0, st>>>(z, (const int64_t *)target, w, loss, dz, N, C, label_smoothing, scale);
    else if (kind == ERT_LOSS_MSE || kind == ERT_LOSS_BCE_LOGITS)
        mse_bce_k<<<1, kThreads, 0, st>>>(z, (const float *)target, loss, dz, n, kind == ERT_LOSS_MSE, scale);
    else return cudaErrorInvalidValue;
    LAUNCH_END;
}

cudaError_t ert_cuda_grad_norm_launch(const float *const *g, const int64_t *n, int count, double *acc, bool first,
                                      float *out, float clip, const float *loss, float *sc, int interval,
                                      const int64_t *status, cudaStream_t st) {
    if (first) {
        cudaError_t e = cudaMemsetAsync(acc, 0, sizeof(double), st);
        if (e != cudaSuccess) return e;
    }
    sumsq_list l;
    int m = 0;
    int64_t most = 0;
    for (int k = 0; k <= count; k++) {
        if (k == count || m == kSumsqList) { /* flush */
            if (m > 0) {
                int b = blocks_for(most);
                sumsq_k<<<dim3(b > 512 ? 512 : b, m), kThreads, 0, st>>>(l, acc);
            }
            m = 0, most = 0;
            if (k == count) break;
        }
        if (!g[k] || n[k] <= 0) continue;
        l.g[m] = g[k], l.n[m++] = n[k];
        if (n[k] > most) most = n[k];
    }
    if (out) norm_final_k<<<1, 1, 0, st>>>(acc, out, clip, loss, sc, interval, status);
    LAUNCH_END;
}

cudaError_t ert_cuda_optim_launch(const ert_optim_params *p, float *w, const float *g, float *m, float *v,
                                  const float *gn, const float *hyper, const float *loss, int64_t n, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    optim_k<<<blocks_for(n), kThreads, 0, st>>>(w, g, m, v, gn, hyper, loss, n, *p);
    LAUNCH_END;
}

cudaError_t ert_cuda_layernorm_grad_launch(const float *dy, const float *x, const float *scale, int64_t scale_n,
                                           float *dx, float *ds, int64_t ds_n, float *db, int64_t db_n, int64_t outer,
                                           int64_t inner, float eps, cudaStream_t st) {
    cudaError_t e = cudaSuccess;
    if (ds && (e = cudaMemsetAsync(ds, 0, (size_t)ds_n * sizeof(float), st)) != cudaSuccess) return e;
    if (db && (e = cudaMemsetAsync(db, 0, (size_t)db_n * sizeof(float), st)) != cudaSuccess) return e;
    if (outer <= 0 || inner <= 0) return cudaSuccess;
    if (outer > INT32_MAX) return cudaErrorInvalidValue;
    ln_grad_k<<<(unsigned)outer, kThreads, 0, st>>>(dy, x, scale, scale_n == 1, dx, ds, db, db_n == 1, inner, eps);
    LAUNCH_END;
}

/* ---------------------------------------------------------------- mixed precision (f16/bf16 activations) */

template <typename T>
static __global__ void act_grad_hk(const T *__restrict__ dy, const T *__restrict__ x, T *__restrict__ dx, int64_t n,
                                   ert_unary_params u) {
    GRID_STRIDE(i, n) {
        float xv = ert_ld(x[i]), g = ert_ld(dy[i]);
        ert_put(dx + i, u.act.kind == ERT_ACT_RELU ? (xv > 0 ? g : 0.0f) : g * act_deriv(xv, u));
    }
}

template <typename T>
static __global__ void gap_grad_hk(const T *__restrict__ dy, T *__restrict__ dx, int64_t sz, int64_t total) {
    GRID_STRIDE(i, total) ert_put(dx + i, ert_ld(dy[i / sz]) / (float)sz);
}

/* BatchNorm over x (N, C, sz) in T (f32, f16, bf16) with f32 parameters and
 * statistics. Grid (row chunks, C): block (b, c) owns rows (images)
 * [b*nb, b*nb + nb) of channel c, so every pass reads the channel's scale and
 * statistics once per block and no thread divides per element. A plane of
 * at least kThreads elements is walked by the whole block; smaller planes
 * (7x7, 14x14) put kThreads / sz rows side by side. Sums go to per-thread
 * doubles, then to ws[2C] (zeroed by the launcher) by one double atomicAdd
 * per block; the next kernel finishes them (each block for its channel).
 * Forward sums are shifted by the channel's first element (sum of x - K and
 * (x - K)^2), so E[x^2] - E[x]^2 does not cancel when |mean| >> std.
 * relu (a Relu fused, grad.relu): the forward stores max(y, 0); the backward
 * takes dy only where y > 0, y recomputed from x as the forward made it
 * (k = invstd * scale, b = B - mean * k), so the output need not be kept.
 * replay: y again from x and the step's saved mean/invstd (passed as the
 * running pair), nothing updated: the trainer's recompute in the backward. */
struct bn_walk {
    int64_t r, R, col, istep; /* first row, rows per step, first column, column step */
    bool on;
};

static __device__ bn_walk bn_walk_at(int64_t sz) {
    bn_walk w;
    int t = threadIdx.x, B = blockDim.x;
    if (sz >= B) {
        w.r = 0, w.R = 1, w.col = t, w.istep = B, w.on = true;
    } else {
        w.R = B / sz, w.r = t / sz, w.col = t % sz, w.istep = sz, w.on = w.r < w.R;
    }
    return w;
}

template <typename T, int V>
static __global__ void __launch_bounds__(kThreads) bn_sums_k(const T *__restrict__ x, const T *__restrict__ dy,
                                                             const float *scale, const float *bias,
                                                             const float *mean, const float *istd, int64_t N,
                                                             int64_t C, int64_t sz, int64_t nb, double *ws,
                                                             bool frozen, float eps) {
    __shared__ double sh[33];
    const int64_t c = blockIdx.y, n0 = blockIdx.x * nb, n1 = n0 + nb < N ? n0 + nb : N, szv = sz / V;
    float mu = 0, inv = 0, rk = 0, rb = 0;
    const bool relu = bias && !frozen;
    if (dy) {
        mu = mean[c];
        inv = frozen ? rsqrtf(istd[c] + eps) : istd[c];
        if (relu) rk = inv * scale[c], rb = bias[c] - mu * rk; /* the forward's y = x * rk + rb */
    } else {
        mu = ert_ld(x[c * sz]); /* shift K */
    }
    double a = 0, b = 0;
    bn_walk w = bn_walk_at(szv);
    if (w.on)
        for (int64_t n = n0 + w.r; n < n1; n += w.R) {
            const T *xr = x + (n * C + c) * sz;
            if (dy) { /* backward: sum dy, sum dy * xhat */
                const T *dr = dy + (n * C + c) * sz;
#pragma unroll 2
                for (int64_t i = w.col; i < szv; i += w.istep) {
                    float xv[V], dv[V], fa = 0, fb = 0;
                    ert_ldv<V>(xr + i * V, xv);
                    ert_ldv<V>(dr + i * V, dv);
#pragma unroll
                    for (int k = 0; k < V; k++) {
                        float d = relu && !(xv[k] * rk + rb > 0.0f) ? 0.0f : dv[k];
                        fa += d;
                        fb += d * ((xv[k] - mu) * inv);
                    }
                    a += fa;
                    b += fb;
                }
            } else { /* forward: shifted sum x, sum x^2 */
#pragma unroll 2
                for (int64_t i = w.col; i < szv; i += w.istep) {
                    float xv[V], fa = 0, fb = 0;
                    ert_ldv<V>(xr + i * V, xv);
#pragma unroll
                    for (int k = 0; k < V; k++) {
                        float d = xv[k] - mu;
                        fa += d;
                        fb += d * d;
                    }
                    a += fa;
                    b += fb;
                }
            }
        }
    a = block_sum(a, sh);
    b = block_sum(b, sh);
    if (threadIdx.x == 0) {
        atomicAdd(ws + c, a);
        atomicAdd(ws + C + c, b);
    }
}

/* y = x * k + b per channel; training: the statistics from ws (block (0, c)
 * stores mean, invstd and the running statistics), else the running ones. */
template <typename T, int V>
static __global__ void __launch_bounds__(kThreads) bn_apply_k(const T *__restrict__ x, T *__restrict__ y,
                                                              const float *scale, const float *bias, float *mean,
                                                              float *invstd, float *rmean, float *rvar,
                                                              const double *ws, int64_t N, int64_t C, int64_t sz,
                                                              float eps, float mom, bool training, bool relu,
                                                              bool replay) {
    const int64_t c = blockIdx.y, nb = (N + gridDim.x - 1) / gridDim.x, n0 = blockIdx.x * nb,
                  n1 = n0 + nb < N ? n0 + nb : N, szv = sz / V;
    float mu, inv;
    if (training) {
        int64_t m = N * sz;
        double s1 = m ? ws[c] / (double)m : 0.0, K = (double)ert_ld(x[c * sz]);
        double var = m ? fmax(ws[C + c] / (double)m - s1 * s1, 0.0) : 0.0;
        mu = (float)(K + s1);
        inv = (float)(1.0 / sqrt(var + eps));
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            double unb = m > 1 ? var * (double)m / (double)(m - 1) : var;
            rmean[c] = (float)(rmean[c] * (double)mom + (K + s1) * (1.0 - mom));
            rvar[c] = (float)(rvar[c] * (double)mom + unb * (1.0 - mom));
            if (mean) mean[c] = mu;
            if (invstd) invstd[c] = inv;
        }
    } else if (replay) { /* rmean, rvar: the step's mean and invstd */
        mu = rmean[c];
        inv = rvar[c];
    } else {
        mu = rmean[c];
        inv = rsqrtf(rvar[c] + eps);
    }
    const float k = inv * scale[c], b = bias[c] - mu * k, lo = relu ? 0.0f : -INFINITY;
    bn_walk w = bn_walk_at(szv);
    if (!w.on) return;
    for (int64_t n = n0 + w.r; n < n1; n += w.R) {
        const T *xr = x + (n * C + c) * sz;
        T *yr = y + (n * C + c) * sz;
#pragma unroll 2
        for (int64_t i = w.col; i < szv; i += w.istep) {
            float v[V];
            ert_ldv<V>(xr + i * V, v);
#pragma unroll
            for (int q = 0; q < V; q++) v[q] = ert_max_nan(v[q] * k + b, lo); /* NaN stays NaN */
            ert_stv<V>(yr + i * V, v);
        }
    }
}

static __global__ void bn_dparams_k(const double *ws, float *dscale, float *dbias, int64_t C) {
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= C) return;
    if (dbias) dbias[c] = (float)ws[c];
    if (dscale) dscale[c] = (float)ws[C + c];
}

/* dx from the sums in ws; block (0, c) also stores dscale/dbias. */
template <typename T, int V>
static __global__ void __launch_bounds__(kThreads) bn_dx_k(const T *__restrict__ dy, const T *__restrict__ x,
                                                           const float *bias, T *__restrict__ dx,
                                                           const float *scale, const float *mean,
                                                           const float *istd, const double *ws, float *dscale,
                                                           float *dbias, int64_t N, int64_t C, int64_t sz, float eps,
                                                           bool frozen) {
    const int64_t c = blockIdx.y, nb = (N + gridDim.x - 1) / gridDim.x, n0 = blockIdx.x * nb,
                  n1 = n0 + nb < N ? n0 + nb : N, m = N * sz, szv = sz / V;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        if (dbias) dbias[c] = (float)ws[c];
        if (dscale) dscale[c] = (float)ws[C + c];
    }
    const float inv = frozen ? rsqrtf(istd[c] + eps) : istd[c], sc = scale[c] * inv, mu = mean[c];
    const bool relu = bias && !frozen;
    const float rk = relu ? inv * scale[c] : 0.0f, rb = relu ? bias[c] - mu * rk : 0.0f;
    const float mg = m && !frozen ? (float)(ws[c] / (double)m) : 0.0f,
                mgx = m && !frozen ? (float)(ws[C + c] / (double)m) : 0.0f;
    bn_walk w = bn_walk_at(szv);
    if (!w.on) return;
    for (int64_t n = n0 + w.r; n < n1; n += w.R) {
        const T *dr = dy + (n * C + c) * sz, *xr = x + (n * C + c) * sz;
        T *o = dx + (n * C + c) * sz;
#pragma unroll 2
        for (int64_t i = w.col; i < szv; i += w.istep) {
            float dv[V], r[V];
            ert_ldv<V>(dr + i * V, dv);
            if (frozen) {
#pragma unroll
                for (int q = 0; q < V; q++) r[q] = dv[q] * sc;
            } else {
                float xv[V];
                ert_ldv<V>(xr + i * V, xv);
#pragma unroll
                for (int q = 0; q < V; q++) {
                    float d = relu && !(xv[q] * rk + rb > 0.0f) ? 0.0f : dv[q];
                    r[q] = sc * (d - mg - ((xv[q] - mu) * inv) * mgx);
                }
            }
            ert_stv<V>(o + i * V, r);
        }
    }
}

/* Rows per block: about 4 waves of 132 SMs over all channels, at least 4096
 * elements a block. */
static int64_t bn_rows(int64_t N, int64_t C, int64_t sz, unsigned *chunks) {
    int64_t want = C > 0 ? (4 * 132 + C - 1) / C : 1, nb = (N + want - 1) / (want ? want : 1);
    int64_t min_rows = sz > 0 ? (4096 + sz - 1) / sz : 1;
    if (nb < min_rows) nb = min_rows;
    if (nb > N) nb = N;
    if (nb < 1) nb = 1;
    int64_t n = (N + nb - 1) / nb;
    *chunks = (unsigned)(n > 0 ? n : 1);
    return nb;
}

cudaError_t ert_cuda_act_grad_h_launch(ert_dtype dt, const ert_unary_params *u, const void *dy, const void *x,
                                       void *dx, int64_t n, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    ERT_CUDA_FLOAT_SWITCH(dt, T, act_grad_hk<T><<<blocks_for(n), kThreads, 0, st>>>((const T *)dy, (const T *)x,
                                                                                    (T *)dx, n, *u))
    LAUNCH_END;
}

cudaError_t ert_cuda_gap_grad_h_launch(ert_dtype dt, const void *dy, void *dx, int64_t planes, int64_t sz,
                                       cudaStream_t st) {
    if (planes * sz <= 0) return cudaSuccess;
    ERT_CUDA_FLOAT_SWITCH(dt, T, gap_grad_hk<T><<<blocks_for(planes * sz), kThreads, 0, st>>>((const T *)dy, (T *)dx,
                                                                                              sz, planes * sz))
    LAUNCH_END;
}

/* 4 elements per load when every plane starts 4-element aligned */
static bool bn_vec4(ert_dtype dt, int64_t sz, const void *a, const void *b, const void *c, const void *d) {
    size_t es = dt == ERT_DTYPE_F32 ? 4 : 2;
    return sz % 4 == 0 && ert_vec_ok(a, 4, es) && ert_vec_ok(b, 4, es) && ert_vec_ok(c, 4, es) &&
           ert_vec_ok(d, 4, es);
}

#define BN_LAUNCH(V, ...) ERT_CUDA_FLOAT_SWITCH(dt, T, if (V) __VA_ARGS__(4) else __VA_ARGS__(1))

cudaError_t ert_cuda_bn_train_h_launch(ert_dtype dt, const void *x, const float *scale, const float *bias, float *rmean,
                                       float *rvar, void *y, float *mean, float *invstd, int64_t N, int64_t C,
                                       int64_t sz, float eps, float momentum, bool training, bool relu, bool replay,
                                       double *ws, cudaStream_t st) {
    if (C <= 0 || C > 65535) return C <= 0 ? cudaSuccess : cudaErrorInvalidValue;
    if (N * sz <= 0) return cudaSuccess; /* CPU: no statistics either */
    if (replay) training = false;
    unsigned chunks;
    int64_t nb = bn_rows(N, C, sz, &chunks);
    const bool v4 = bn_vec4(dt, sz, x, y, x, y);
    if (training) {
        if (!ws) return cudaErrorInvalidValue;
        cudaError_t e = cudaMemsetAsync(ws, 0, (size_t)(2 * C) * sizeof(double), st);
        if (e != cudaSuccess) return e;
#define SUMS(V) bn_sums_k<T, V><<<dim3(chunks, (unsigned)C), kThreads, 0, st>>>( \
            (const T *)x, (const T *)NULL, NULL, NULL, NULL, NULL, N, C, sz, nb, ws, false, eps);
        BN_LAUNCH(v4, SUMS)
#undef SUMS
    }
#define APPLY(V) bn_apply_k<T, V><<<dim3(chunks, (unsigned)C), kThreads, 0, st>>>( \
        (const T *)x, (T *)y, scale, bias, mean, invstd, rmean, rvar, ws, N, C, sz, eps, momentum, training, relu, \
        replay);
    BN_LAUNCH(v4, APPLY)
#undef APPLY
    LAUNCH_END;
}

cudaError_t ert_cuda_bn_grad_h_launch(ert_dtype dt, const void *dy, const void *x, const float *scale,
                                      const float *mean, const float *istd, const float *relu_bias, void *dx,
                                      float *dscale, float *dbias, int64_t N, int64_t C, int64_t sz, float eps,
                                      bool frozen, double *ws, cudaStream_t st) {
    if (C <= 0 || C > 65535 || !ws) return C <= 0 ? cudaSuccess : cudaErrorInvalidValue;
    cudaError_t e = cudaMemsetAsync(ws, 0, (size_t)(2 * C) * sizeof(double), st);
    if (e != cudaSuccess) return e;
    unsigned chunks;
    int64_t nb = bn_rows(N, C, sz, &chunks);
    const bool v4 = bn_vec4(dt, sz, dy, x, x, dx ? dx : x);
    if (N * sz > 0 && (dscale || dbias || !frozen)) {
#define SUMS(V) bn_sums_k<T, V><<<dim3(chunks, (unsigned)C), kThreads, 0, st>>>( \
            (const T *)x, (const T *)dy, scale, relu_bias, mean, istd, N, C, sz, nb, ws, frozen, eps);
        BN_LAUNCH(v4, SUMS)
#undef SUMS
    }
    if (dx && N * sz > 0) {
#define DX(V) bn_dx_k<T, V><<<dim3(chunks, (unsigned)C), kThreads, 0, st>>>( \
            (const T *)dy, (const T *)x, relu_bias, (T *)dx, scale, mean, istd, ws, dscale, dbias, N, C, sz, \
            eps, frozen);
        BN_LAUNCH(v4, DX)
#undef DX
    } else if (dscale || dbias)
        bn_dparams_k<<<(unsigned)((C + 127) / 128), 128, 0, st>>>(ws, dscale, dbias, C);
    LAUNCH_END;
}
