/* MaxPool / AveragePool (1-D/2-D/3-D, dilations, pads, ceil_mode) and
 * GlobalAveragePool / GlobalMaxPool, f32/f16/bf16 (f32 arithmetic). Semantics of kernels/cpu/pool.c:
 * every rank is handled as 3-D (missing leading spatial dims have size 1);
 * the AveragePool divisor with count_include_pad counts taps inside
 * [-pad_begin, in + pad_end), otherwise taps inside the input; a MaxPool
 * window with no tap inside the input gives -inf; NaN propagates.
 * Pool: one thread per output element (planes: a 3-D grid over column, row
 * and plane). Global pool: one block per plane.
 * Channels-last (CUDA f16/bf16 sessions keep conv activations NHWC): the
 * thread index runs over channels fastest, so a warp reads 32 adjacent
 * channels of one pixel; the global pool gives each (n, c) one thread that
 * walks the pixels (stride C), coalesced across the warp. */
#include "cuda_internal.h"
#include "cuda_types.cuh"

#include <math.h>

/* I: the index type, int when every offset fits (the common case: 64-bit
 * division costs ~10x a 32-bit one and dominated this memory-bound kernel),
 * else int64_t. */
template <typename I> struct geom3 {
    I in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    I C; /* > 0: channels-last with C channels; 0: planes */
};

/* One output: the window at (od, oh, ow) of the plane at xp (pixel stride ps). */
template <typename T, typename I>
static __device__ __forceinline__ float pool_one(const T *__restrict__ xp, I ps, I od, I oh, I ow, const geom3<I> &g,
                                                 bool is_max, bool include_pad) {
    float mx = -INFINITY, sum = 0.0f;
    I n_in = 0, n_pad = 0;
    for (I kd = 0; kd < g.k[0]; kd++) {
        I id = od * g.s[0] - g.pb[0] + kd * g.d[0];
        if (id >= g.in[0] + g.pe[0]) break;
        for (I kh = 0; kh < g.k[1]; kh++) {
            I ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            if (ih >= g.in[1] + g.pe[1]) break;
            for (I kw = 0; kw < g.k[2]; kw++) {
                I iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
                if (iw >= g.in[2] + g.pe[2]) break;
                n_pad++;
                if (id < 0 || ih < 0 || iw < 0 || id >= g.in[0] || ih >= g.in[1] || iw >= g.in[2]) continue;
                float v = ert_ld(xp[((id * g.in[1] + ih) * g.in[2] + iw) * ps]);
                n_in++;
                if (v > mx || isnan(v)) mx = v;
                sum += v;
            }
        }
    }
    if (is_max) return mx;
    I cnt = include_pad ? n_pad : n_in;
    return cnt > 0 ? sum / (float)cnt : 0.0f;
}

/* Channels-last: one thread per output, channel fastest. */
template <typename T, typename I>
static __global__ void pool_kernel(const T *__restrict__ x, T *__restrict__ y, geom3<I> g, I total, bool is_max,
                                   bool include_pad) {
    I out_sz = g.out[0] * g.out[1] * g.out[2], in_sz = g.in[0] * g.in[1] * g.in[2];
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        I c = i % g.C, p = i / g.C, r = p % out_sz;
        const T *xp = x + (p / out_sz) * in_sz * g.C + c;
        I ow = r % g.out[2], oh = (r / g.out[2]) % g.out[1], od = r / (g.out[2] * g.out[1]);
        ert_put(y + i, pool_one(xp, g.C, od, oh, ow, g, is_max, include_pad));
    }
}

/* Channels-last with C % 8 == 0 (2-D): one thread per output pixel and group
 * of 8 channels, 16-byte loads (f16/bf16) per tap. */
template <typename T>
static __global__ void pool_nhwc8_kernel(const T *__restrict__ x, T *__restrict__ y, geom3<int> g, int total,
                                         bool is_max, bool include_pad) {
    const int C8 = g.C / 8, OW = g.out[2], OH = g.out[1];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int cg = i % C8, p = i / C8, ow = p % OW, q = p / OW, oh = q % OH, n = q / OH;
        const T *xp = x + (size_t)n * g.in[1] * g.in[2] * g.C + cg * 8;
        float acc[8];
        for (int k = 0; k < 8; k++) acc[k] = is_max ? -INFINITY : 0.0f;
        int n_in = 0, n_pad = 0;
        for (int kh = 0; kh < g.k[1]; kh++) {
            int ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            if (ih >= g.in[1] + g.pe[1]) break;
            for (int kw = 0; kw < g.k[2]; kw++) {
                int iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
                if (iw >= g.in[2] + g.pe[2]) break;
                n_pad++;
                if (ih < 0 || iw < 0 || ih >= g.in[1] || iw >= g.in[2]) continue;
                float v[8];
                ert_ldv<8>(xp + ((size_t)ih * g.in[2] + iw) * g.C, v);
                n_in++;
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    if (is_max) acc[k] = (v[k] > acc[k] || isnan(v[k])) ? v[k] : acc[k];
                    else acc[k] += v[k];
                }
            }
        }
        if (!is_max) {
            int cnt = include_pad ? n_pad : n_in;
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] = cnt > 0 ? acc[k] / (float)cnt : 0.0f;
        }
        ert_stv<8>(y + (size_t)p * g.C + cg * 8, acc);
    }
}

/* Planes (NCHW): grid x/y the output column/row, z the plane and output
 * depth, so no thread divides to find its position. */
template <typename T>
static __global__ void pool_planes_kernel(const T *__restrict__ x, T *__restrict__ y, geom3<int> g, int64_t zn,
                                          bool is_max, bool include_pad) {
    const int ow = blockIdx.x * blockDim.x + threadIdx.x, oh = blockIdx.y * blockDim.y + threadIdx.y;
    if (ow >= g.out[2] || oh >= g.out[1]) return;
    const int64_t in_sz = (int64_t)g.in[0] * g.in[1] * g.in[2];
    for (int64_t z = blockIdx.z; z < zn; z += gridDim.z) {
        const int64_t plane = g.out[0] == 1 ? z : z / g.out[0];
        const int od = g.out[0] == 1 ? 0 : (int)(z % g.out[0]);
        ert_put(y + (z * g.out[1] + oh) * g.out[2] + ow,
                pool_one(x + plane * in_sz, 1, od, oh, ow, g, is_max, include_pad));
    }
}

constexpr int kGpThreads = 256;

template <typename T>
static __global__ void global_pool_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t sz, bool is_max) {
    __shared__ float red[kGpThreads];
    const T *xp = x + blockIdx.x * sz;
    float acc = is_max ? -INFINITY : 0.0f;
    for (int64_t i = threadIdx.x; i < sz; i += blockDim.x) {
        float v = ert_ld(xp[i]);
        if (is_max) acc = (v > acc || isnan(v)) ? v : acc;
        else acc += v;
    }
    red[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) {
            float a = red[threadIdx.x], b = red[threadIdx.x + w];
            red[threadIdx.x] = is_max ? ((b > a || isnan(b)) ? b : a) : a + b;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) ert_put(y + blockIdx.x, is_max ? red[0] : (sz ? red[0] / (float)sz : 0.0f));
}

/* x (N, sz, C) -> y (N, C): a block covers 32 consecutive channels of one
 * image (coalesced), its kGpRows rows of threads split the pixels, then
 * combine through shared memory. (One thread per channel walking all the
 * pixels took milliseconds on an early squeeze-excitation block: 32
 * channels x 112x112 pixels gave 32 busy threads on the whole GPU.) */
constexpr int kGpRows = 16;

template <typename T>
static __global__ void global_pool_nhwc_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t N, int64_t sz,
                                               int64_t C, bool is_max) {
    __shared__ float red[kGpRows][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t c = blockIdx.x * (int64_t)32 + tx;
    for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
        float acc = is_max ? -INFINITY : 0.0f;
        if (c < C) {
            const T *xp = x + n * sz * C + c;
            for (int64_t p = ty; p < sz; p += kGpRows) {
                float v = ert_ld(xp[p * C]);
                if (is_max) acc = (v > acc || isnan(v)) ? v : acc;
                else acc += v;
            }
        }
        red[ty][tx] = acc;
        __syncthreads();
        if (ty == 0 && c < C) {
            for (int j = 1; j < kGpRows; j++) {
                float b = red[j][tx];
                acc = is_max ? ((b > acc || isnan(b)) ? b : acc) : acc + b;
            }
            ert_put(y + n * C + c, is_max ? acc : (sz ? acc / (float)sz : 0.0f));
        }
        __syncthreads();
    }
}

extern "C" {

cudaError_t ert_cuda_pool_launch(bool is_max, const ert_pool_params *p, const ert_tview *x, const ert_tview *y,
                                 cudaStream_t st) {
    if (p->nsp < 1 || p->nsp > 3 || x->ndim != p->nsp + 2 || y->ndim != x->ndim) return cudaErrorInvalidValue;
    if (p->nhwc && (p->nsp != 2 || x->dims[3] != y->dims[3])) return cudaErrorInvalidValue;
    if (y->n_elems <= 0) return cudaSuccess;
    geom3<int64_t> g;
    g.C = p->nhwc ? x->dims[3] : 0;
    const int sd = p->nhwc ? 1 : 2; /* first spatial dim */
    int off = 3 - p->nsp;
    for (int i = 0; i < 3; i++) {
        int s = i - off;
        bool real = s >= 0;
        g.in[i] = real ? x->dims[sd + s] : 1;
        g.out[i] = real ? y->dims[sd + s] : 1;
        g.k[i] = real ? p->kernel[s] : 1;
        g.s[i] = real ? p->stride[s] : 1;
        g.d[i] = real ? p->dilation[s] : 1;
        g.pb[i] = real ? p->pad_begin[s] : 0;
        g.pe[i] = real ? p->pad_end[s] : 0;
    }
    int64_t blocks = (y->n_elems + 255) / 256;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    if (x->dtype != y->dtype) return cudaErrorInvalidValue;
    /* 32-bit indices when offsets, padded extents and the grid stride fit */
    bool small = x->n_elems < INT32_MAX / 2 && y->n_elems < INT32_MAX / 2 && blocks * 256 < INT32_MAX / 2;
    for (int i = 0; i < 3; i++)
        small = small && g.in[i] + g.pb[i] + g.pe[i] + g.k[i] * g.d[i] < INT32_MAX / 4 && g.s[i] * g.out[i] < INT32_MAX / 4;
    geom3<int> h;
    if (small) {
        h.C = (int)g.C;
        for (int i = 0; i < 3; i++) {
            h.in[i] = (int)g.in[i], h.out[i] = (int)g.out[i], h.k[i] = (int)g.k[i], h.s[i] = (int)g.s[i];
            h.d[i] = (int)g.d[i], h.pb[i] = (int)g.pb[i], h.pe[i] = (int)g.pe[i];
        }
    }
    if (small && !p->nhwc) {
        int64_t zn = x->dims[0] * x->dims[1] * g.out[0];
        dim3 block(32, 8), grid((unsigned)((g.out[2] + 31) / 32), (unsigned)((g.out[1] + 7) / 8),
                                (unsigned)(zn > 65535 ? 65535 : zn));
        if (grid.y <= 65535) {
            ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
                pool_planes_kernel<T><<<grid, block, 0, st>>>((const T *)x->data, (T *)y->data, h, zn, is_max,
                                                              p->count_include_pad))
            return cudaGetLastError();
        }
    }
    if (small && p->nhwc && g.out[0] == 1 && g.in[0] == 1 && g.C % 8 == 0 && x->dtype != ERT_DTYPE_F32 &&
        ert_vec_ok(x->data, 8, 2) && ert_vec_ok(y->data, 8, 2)) {
        int total = (int)(y->n_elems / 8);
        int64_t b8 = (total + 255) / 256;
        ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
            pool_nhwc8_kernel<T><<<(unsigned)(b8 > (1 << 20) ? (1 << 20) : b8), 256, 0, st>>>(
                (const T *)x->data, (T *)y->data, h, total, is_max, p->count_include_pad))
        return cudaGetLastError();
    }
    if (g.C == 0) g.C = 1; /* planes left over (64-bit offsets): channels-last with C = 1 over N*C images */
    if (small) {
        h.C = (int)g.C;
        ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
            pool_kernel<T, int><<<(unsigned)blocks, 256, 0, st>>>((const T *)x->data, (T *)y->data, h, (int)y->n_elems,
                                                                  is_max, p->count_include_pad))
    } else {
        ERT_CUDA_FLOAT_SWITCH(x->dtype, T,
            pool_kernel<T, int64_t><<<(unsigned)blocks, 256, 0, st>>>((const T *)x->data, (T *)y->data, g,
                                                                      y->n_elems, is_max, p->count_include_pad))
    }
    return cudaGetLastError();
}

cudaError_t ert_cuda_global_pool_launch(bool is_max, ert_dtype dt, const void *x, void *y, int64_t planes,
                                        int64_t plane_sz, int64_t channels, cudaStream_t st) {
    if (planes <= 0) return cudaSuccess;
    if (channels > 0) {
        int64_t n = planes / channels, gx = (channels + 31) / 32;
        if (planes % channels || gx > 0x7fffffff) return cudaErrorInvalidValue;
        dim3 grid((unsigned)gx, (unsigned)(n > 65535 ? 65535 : n)), block(32, kGpRows);
        ERT_CUDA_FLOAT_SWITCH(dt, T,
            global_pool_nhwc_kernel<T><<<grid, block, 0, st>>>((const T *)x, (T *)y, n, plane_sz, channels, is_max))
        return cudaGetLastError();
    }
    if (planes > 0x7fffffff) return cudaErrorInvalidValue;
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        global_pool_kernel<T><<<(unsigned)planes, kGpThreads, 0, st>>>((const T *)x, (T *)y, plane_sz, is_max))
    return cudaGetLastError();
}

} // extern "C"
