/* Element-wise CUDA kernels: unary ops (activation semantics of
 * kernels/cpu/act.c), broadcasting binary ops, Where, the Conv/Gemm epilogue
 * and the strided copy every data-movement op reduces to.
 * One thread per output element in a grid-stride loop; broadcasting and
 * permutations go through ert_cuda_map (per-operand strides, 0 on broadcast
 * dims), decoded from the flat output index. Float data is f32, f16 or bf16
 * (cuda_types.cuh): loaded to f32, computed in f32, rounded once on store. */
#include "cuda_internal.h"
#include "cuda_types.cuh"

#include <math.h>

constexpr int kThreads = 256;

static unsigned grid_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

/* Same math as ert_cpu_act1. */
static __device__ __forceinline__ float act1(float x, int kind, float alpha, float beta) {
    switch (kind) {
    case ERT_ACT_RELU: return ert_relu_nan(x);
    case ERT_ACT_LEAKY_RELU: return x >= 0.0f ? x : alpha * x;
    case ERT_ACT_CLIP: return x < alpha ? alpha : (x > beta ? beta : x);
    case ERT_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ERT_ACT_TANH: return tanhf(x);
    case ERT_ACT_HARD_SIGMOID: {
        float y = alpha * x + beta;
        return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
    }
    case ERT_ACT_HARD_SWISH: {
        float y = x / 6.0f + 0.5f;
        return x * (y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y));
    }
    case ERT_ACT_SILU: return x / (1.0f + expf(-x));
    case ERT_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    default: return x;
    }
}

/* Unary op code -> what to compute. Activation-like ops map to an ert_act
 * (their parameters come from ert_unary_params.act); math ops to their own. */
enum { U_ACT = 0, U_GELU_TANH, U_ERF, U_SQRT, U_EXP, U_LOG, U_NEG, U_ABS, U_RECIP, U_FLOOR, U_CEIL };

template <typename T>
static __global__ void unary_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t n, int what, int kind,
                             float alpha, float beta) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = ert_ld(x[i]), r;
        switch (what) {
        case U_ACT: r = act1(v, kind, alpha, beta); break;
        case U_GELU_TANH: {
            float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
            r = 0.5f * v * (1.0f + tanhf(u));
            break;
        }
        case U_ERF: r = erff(v); break;
        case U_SQRT: r = sqrtf(v); break;
        case U_EXP: r = expf(v); break;
        case U_LOG: r = logf(v); break;
        case U_NEG: r = -v; break;
        case U_ABS: r = fabsf(v); break;
        case U_RECIP: r = 1.0f / v; break;
        case U_FLOOR: r = floorf(v); break;
        default: r = ceilf(v); break;
        }
        ert_put(y + i, r);
    }
}

static __device__ __forceinline__ void decode(const ert_cuda_map &m, int64_t i, int64_t *o0, int64_t *o1, int64_t *o2) {
    int64_t a = 0, b = 0, c = 0;
    for (int d = m.ndim - 1; d >= 0; d--) {
        int64_t dim = m.dims[d], k = i % dim;
        i /= dim;
        a += k * m.s[0][d];
        b += k * m.s[1][d];
        c += k * m.s[2][d];
    }
    *o0 = a;
    *o1 = b;
    *o2 = c;
}

/* A map of two operands with its dims coalesced (copy_coalesce): extents,
 * strides of operand 0 (si) and 1 (so). */
template <typename I> struct copy_map {
    int nd;
    I dims[ERT_MAX_DIMS], si[ERT_MAX_DIMS], so[ERT_MAX_DIMS];
};

/* Index r of the map's dims -> its input and output offsets. */
template <typename I>
static __device__ __forceinline__ void copy_decode(const copy_map<I> &m, I r, I *oi, I *oo) {
    I a = 0, b = 0;
    for (int d = m.nd - 1; d >= 0; d--) {
        I k = r % m.dims[d];
        r /= m.dims[d];
        a += k * m.si[d];
        b += k * m.so[d];
    }
    *oi = a;
    *oo = b;
}

/* Drops size-1 dims and merges neighbours that are contiguous with each
 * other on both sides (in strides m->s[0], out strides m->s[1]); returns the
 * number of dims left. */
static int copy_coalesce(const ert_cuda_map *m, int64_t *dims, int64_t *si, int64_t *so) {
    int nd = 0;
    for (int d = 0; d < m->ndim; d++) {
        if (m->dims[d] == 1) continue;
        if (nd > 0 && si[nd - 1] == m->s[0][d] * m->dims[d] && so[nd - 1] == m->s[1][d] * m->dims[d]) {
            dims[nd - 1] *= m->dims[d];
            si[nd - 1] = m->s[0][d];
            so[nd - 1] = m->s[1][d];
            continue;
        }
        dims[nd] = m->dims[d];
        si[nd] = m->s[0][d];
        so[nd] = m->s[1][d];
        nd++;
    }
    return nd;
}

static bool fits32(int64_t v) { return v > -(int64_t)INT32_MAX && v < (int64_t)INT32_MAX; }


/* The map with size-1 dims dropped and neighbours merged, as copy_map<int>
 * (si: m->s[0], so: m->s[1]), when n and every extent, stride and offset
 * fit in int32; false otherwise. */
static bool map32(const ert_cuda_map *m, int64_t n, copy_map<int> *c) {
    int64_t dims[ERT_MAX_DIMS], si[ERT_MAX_DIMS], so[ERT_MAX_DIMS];
    int nd = copy_coalesce(m, dims, si, so);
    bool ok = fits32(n);
    int64_t maxi = 0, maxo = 0;
    for (int d = 0; ok && d < nd; d++) {
        ok = fits32(dims[d]) && fits32(si[d]) && fits32(so[d]);
        maxi += (dims[d] - 1) * (si[d] < 0 ? -si[d] : si[d]);
        maxo += (dims[d] - 1) * (so[d] < 0 ? -so[d] : so[d]);
    }
    if (!ok || !fits32(maxi) || !fits32(maxo)) return false;
    c->nd = nd;
    for (int d = 0; d < nd; d++) c->dims[d] = (int)dims[d], c->si[d] = (int)si[d], c->so[d] = (int)so[d];
    return true;
}

enum { B_ADD = 0, B_SUB, B_MUL, B_DIV, B_POW, B_MIN, B_MAX, B_EQ, B_LT, B_GT };

static __device__ __forceinline__ float bin_op(int what, float u, float v) {
    switch (what) {
    case B_ADD: return u + v;
    case B_SUB: return u - v;
    case B_MUL: return u * v;
    case B_DIV: return u / v;
    case B_POW: return powf(u, v);
    case B_MIN: return ert_min_nan(u, v);
    default: return ert_max_nan(u, v);
    }
}

/* y[i] = a op b: T, or a 0/1 byte for the comparisons */
template <typename T, typename I>
static __device__ __forceinline__ void bin_store(void *y, I i, float u, float v, int what) {
    if (what >= B_EQ) ((uint8_t *)y)[i] = (what == B_EQ ? u == v : (what == B_LT ? u < v : u > v)) ? 1 : 0;
    else ert_put((T *)y + i, bin_op(what, u, v));
}

template <typename T>
static __global__ void binary_kernel(const T *__restrict__ a, const T *__restrict__ b, void *__restrict__ y,
                              ert_cuda_map m, int64_t n, int what) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t oa, ob, unused;
        decode(m, i, &oa, &ob, &unused);
        bin_store<T>(y, i, ert_ld(a[oa]), ert_ld(b[ob]), what);
    }
}

/* binary_kernel over a coalesced 32-bit map (si: a, so: b; y contiguous):
 * the broadcasts of SE blocks and detection heads without 64-bit divisions */
template <typename T>
static __global__ void binary32_kernel(const T *__restrict__ a, const T *__restrict__ b, void *__restrict__ y,
                                       copy_map<int> m, int n, int what) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int oa, ob;
        copy_decode(m, i, &oa, &ob);
        bin_store<T>(y, i, ert_ld(a[oa]), ert_ld(b[ob]), what);
    }
}

/* n / d for 0 <= n < 2^31 without a divide instruction: (umulhi(n, m) + n) >> s
 * with m and s from div_magic (Granlund and Montgomery's round-up method, as
 * PyTorch's IntDivider); n + umulhi(n, m) < 2^32 keeps it exact. */
struct fast_div {
    unsigned d, m, s;
};

static fast_div div_magic(unsigned d) {
    unsigned s = 0;
    while (s < 31 && (1u << s) < d) s++;
    uint64_t m = ((uint64_t)1 << 32) * (((uint64_t)1 << s) - d) / d + 1;
    return fast_div{d, (unsigned)m, s};
}

static __device__ __forceinline__ int div_q(fast_div f, int n) {
    return (int)((__umulhi((unsigned)n, f.m) + (unsigned)n) >> f.s);
}

/* y = f op s (or s op f when s_first), one operand (f) of the output's shape
 * and contiguous, the other (s) repeated in blocks: y viewed as
 * (d0, d1, d2, d3), s is (d1, d3), the same for every index of d0 and d2.
 *   EfficientNet's SE scale: x (N,C,H,W) * g (N,C,1,1): d1 = N*C, d2 = H*W;
 *     channels-last x (N,H,W,C) * g (N,1,1,C): d1 = N, d2 = H*W, d3 = C;
 *   Swin's shifted-window mask: attn (B, nW, heads, L, L) + mask
 *     (1, nW, 1, L, L): d0 = B, d1 = nW, d2 = heads, d3 = L*L; its relative
 *     position bias (1, heads, L, L) over (B*nW, heads, L, L): d0 = B*nW,
 *     d3 = heads*L*L;
 *   a per-channel constant (1,C,1,1): d0 = N, d1 = C, d2 = H*W; a bias over
 *     the last dim: d0 = rows, d3 = C.
 * binary32_kernel decodes both offsets of every element with a division and a
 * remainder per dim; here a thread loads V elements of f in one access, finds
 * the s index of the first with three multiply-shift divisions and steps the
 * other V - 1 with counters (r over d3, m over d2, k over d1), so L*L = 2401
 * (odd) still gets vectors. nv = n / V, n < 2^31. */
template <typename T, int V>
static __global__ void binary_bcast_kernel(const T *__restrict__ f, const T *__restrict__ s, T *__restrict__ y,
                                           fast_div d3, fast_div d2, fast_div d1, int nv, int what, bool s_first) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < nv; j += gridDim.x * blockDim.x) {
        int i = j * V, q = div_q(d3, i), r = i - q * (int)d3.d;
        int q2 = div_q(d2, q), m = q - q2 * (int)d2.d;
        int k = q2 - div_q(d1, q2) * (int)d1.d;
        float u[V];
        ert_ldv<V>(f + i, u);
#pragma unroll
        for (int t = 0; t < V; t++) {
            float v = ert_ld(s[k * (int)d3.d + r]);
            u[t] = s_first ? bin_op(what, v, u[t]) : bin_op(what, u[t], v);
            if (++r == (int)d3.d) {
                r = 0;
                if (++m == (int)d2.d) {
                    m = 0;
                    if (++k == (int)d1.d) k = 0;
                }
            }
        }
        ert_stv<V>(y + i, u);
    }
}

/* Both operands of the output's shape, contiguous: no index map, V
 * elements per load (the residual adds and the gradient sums of training). */
template <typename T, int V>
static __global__ void binary_same_kernel(const T *__restrict__ a, const T *__restrict__ b, T *__restrict__ y,
                                          int64_t nv, int what) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += (int64_t)gridDim.x * blockDim.x) {
        float u[V], v[V];
        ert_ldv<V>(a + i * V, u);
        ert_ldv<V>(b + i * V, v);
#pragma unroll
        for (int k = 0; k < V; k++) u[k] = bin_op(what, u[k], v[k]);
        ert_stv<V>(y + i * V, u);
    }
}

template <typename T>
static __global__ void where_kernel(const uint8_t *__restrict__ c, const T *__restrict__ x, const T *__restrict__ z,
                             T *__restrict__ y, ert_cuda_map m, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t oc, ox, oz;
        decode(m, i, &oc, &ox, &oz);
        y[i] = c[oc] ? x[ox] : z[oz];
    }
}

template <typename T>
static __global__ void epilogue_kernel(T *__restrict__ y, const T *__restrict__ add0, float scale0,
                                const T *__restrict__ add1, ert_cuda_map m, int64_t n, int kind, float alpha,
                                float beta) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t o0, o1, unused;
        decode(m, i, &o0, &o1, &unused);
        float v = ert_ld(y[i]);
        if (add0) v += scale0 * ert_ld(add0[o0]);
        if (add1) v += ert_ld(add1[o1]);
        ert_put(y + i, act1(v, kind, alpha, beta));
    }
}

/* The conv epilogue, y (N, C, HW) in place: y = act(y + bias[c] + res). V
 * elements per thread (V = 2 when HW is even: both in one channel, one 2V-byte
 * access for f16/bf16), 32-bit indices when they fit. */
template <typename T, int V>
struct alignas(V * sizeof(T)) vec_t {
    T v[V];
};

/* NCHW (NH false): element i's channel is (i / HW) % C, and the V elements of
 * a vector share it (HW % V == 0). NHWC (NH true): channel i % C, the V
 * elements are V consecutive channels (C % V == 0). */
template <typename T, int V, typename I, bool NH>
static __global__ void conv_epi_kernel(T *__restrict__ y, const T *__restrict__ bias, const T *__restrict__ res, I C,
                                       I HW, I nv, int kind, float alpha, float beta) {
    for (I j = blockIdx.x * (I)blockDim.x + threadIdx.x; j < nv; j += (I)gridDim.x * blockDim.x) {
        I c = NH ? (j * V) % C : (j * V / HW) % C;
        vec_t<T, V> a = ((vec_t<T, V> *)y)[j];
        float b = bias && !NH ? ert_ld(bias[c]) : 0.0f;
        vec_t<T, V> r;
        if (res) r = ((const vec_t<T, V> *)res)[j];
#pragma unroll
        for (int k = 0; k < V; k++) {
            float v = ert_ld(a.v[k]) + (NH ? (bias ? ert_ld(bias[c + k]) : 0.0f) : b);
            if (res) v += ert_ld(r.v[k]);
            ert_put(&a.v[k], act1(v, kind, alpha, beta));
        }
        ((vec_t<T, V> *)y)[j] = a;
    }
}

template <typename T>
static __global__ void strided_copy_kernel(const T *__restrict__ in, T *__restrict__ out, ert_cuda_map m, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t oi, oo, unused;
        decode(m, i, &oi, &oo, &unused);
        out[oo] = in[oi];
    }
}

template <typename T>
static __global__ void strided_copy32_kernel(const T *__restrict__ in, T *__restrict__ out, copy_map<int> m, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int oi, oo;
        copy_decode(m, i, &oi, &oo);
        out[oo] = in[oi];
    }
}

/* Rows that are contiguous on both sides (a Concat/Split/Slice along an
 * outer axis): blockIdx.y walks the rows, decoding each row's two offsets
 * once (dims/si/so of the outer dims, in units of V); threads copy the
 * row's Lv V-sized words. V is the widest of 16/8/4/2/1 bytes that every
 * offset allows. */
/* Short contiguous rows (a channels-last Concat/Split along C: rows of a
 * few dozen bytes): thread i copies word i % Lv of row i / Lv, 32-bit. */
template <typename V>
static __global__ void copy_words_kernel(const V *__restrict__ in, V *__restrict__ out, copy_map<int> m, int n,
                                         int Lv) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int bi, bo, j = i % Lv;
        copy_decode(m, i / Lv, &bi, &bo);
        out[bo + j] = in[bi + j];
    }
}

/* A (batched) 2-D transpose, the copy of a channels-last conversion: out[b]
 * (R, Cn) row-major (out_rs between rows, the Cn elements contiguous) from
 * in[b] stored Cn-major (in_cs between its Cn rows, the R elements
 * contiguous). NCHW -> NHWC is R = H*W, Cn = C; NHWC -> NCHW the reverse.
 * The element-wise copy read one side with a stride of R or Cn elements
 * (YOLOv8n-seg's 640x640 input: 35 us for 2.4 MB, H100 profile): these
 * read and write whole rows.
 * tile: 32x32 tiles through shared memory (both sides coalesced);
 * small_cn: Cn <= 8 (an RGB input): a thread per r copies its Cn elements;
 * small_r: R <= 8: a thread per column gathers its R elements. */
template <typename T>
static __global__ void transpose_tile_kernel(const T *__restrict__ in, T *__restrict__ out, int R, int Cn, int in_cs,
                                             int out_rs, int64_t bi, int64_t bo) {
    __shared__ T tile[32][33];
    const T *ib = in + blockIdx.z * bi;
    T *ob = out + blockIdx.z * bo;
    const int r0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
#pragma unroll
    for (int k = 0; k < 32; k += 8) {
        int r = r0 + threadIdx.x, c = c0 + threadIdx.y + k;
        if (r < R && c < Cn) tile[threadIdx.y + k][threadIdx.x] = ib[(int64_t)c * in_cs + r];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 32; k += 8) {
        int c = c0 + threadIdx.x, r = r0 + threadIdx.y + k;
        if (r < R && c < Cn) ob[(int64_t)r * out_rs + c] = tile[threadIdx.x][threadIdx.y + k];
    }
}

/* The small side of a transpose looped in each thread: thread j of the
 * long side (L per batch) copies S elements, in at j*ia + k*ik, out at
 * j*oa + k*ok (small_cn: L = R, S = Cn; small_r: L = Cn, S = R). */
template <typename T>
static __global__ void transpose_small_kernel(const T *__restrict__ in, T *__restrict__ out, int L, int S, int ia,
                                              int oa, int ik, int ok, int64_t bi, int64_t bo, int64_t n) {
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = t / L;
        int j = (int)(t - b * L);
        const T *ip = in + b * bi + (int64_t)j * ia;
        T *op = out + b * bo + (int64_t)j * oa;
        for (int k = 0; k < S; k++) op[(int64_t)k * ok] = ip[(int64_t)k * ik];
    }
}

/* The coalesced map as a batched transpose (see transpose_tile_kernel), or
 * false. nd 2 or 3 (one batch dim), int-sized rows and offsets. */
static bool transpose_launch(const char *ib, char *ob, size_t esize, int nd, const int64_t *dims, const int64_t *si,
                             const int64_t *so, cudaStream_t st, cudaError_t *err) {
    if ((nd != 2 && nd != 3) || so[nd - 1] != 1 || si[nd - 2] != 1 || si[nd - 1] == 1) return false;
    const int64_t R = dims[nd - 2], Cn = dims[nd - 1], in_cs = si[nd - 1], out_rs = so[nd - 2];
    const int64_t B = nd == 3 ? dims[0] : 1, bi = nd == 3 ? si[0] : 0, bo = nd == 3 ? so[0] : 0;
    if (in_cs < R || out_rs < Cn || !fits32(R) || !fits32(Cn) || !fits32(in_cs * Cn) || !fits32(out_rs * R) ||
        bi < 0 || bo < 0 || (esize != 2 && esize != 4 && esize != 1 && esize != 8))
        return false;
    const int iR = (int)R, iC = (int)Cn, ics = (int)in_cs, ors = (int)out_rs;
#define ERT_TR(KERNEL, GRID, BLOCK, ...)                                                                                \
    switch (esize) {                                                                                                   \
    case 1: KERNEL<uint8_t><<<GRID, BLOCK, 0, st>>>((const uint8_t *)ib, (uint8_t *)ob, __VA_ARGS__); break;          \
    case 2: KERNEL<uint16_t><<<GRID, BLOCK, 0, st>>>((const uint16_t *)ib, (uint16_t *)ob, __VA_ARGS__); break;       \
    case 4: KERNEL<uint32_t><<<GRID, BLOCK, 0, st>>>((const uint32_t *)ib, (uint32_t *)ob, __VA_ARGS__); break;       \
    default: KERNEL<uint64_t><<<GRID, BLOCK, 0, st>>>((const uint64_t *)ib, (uint64_t *)ob, __VA_ARGS__); break;      \
    }
    if (Cn <= 8) {
        ERT_TR(transpose_small_kernel, grid_for(B * R), kThreads, iR, iC, 1, ors, ics, 1, bi, bo, B * R)
    } else if (R <= 8) {
        ERT_TR(transpose_small_kernel, grid_for(B * Cn), kThreads, iC, iR, ics, 1, 1, ors, bi, bo, B * Cn)
    } else {
        int64_t gx = (R + 31) / 32, gy = (Cn + 31) / 32;
        if (gy > 65535 || B > 65535 || gx > INT32_MAX) return false;
        dim3 grid((unsigned)gx, (unsigned)gy, (unsigned)B), block(32, 8);
        ERT_TR(transpose_tile_kernel, grid, block, iR, iC, ics, ors, bi, bo)
    }
#undef ERT_TR
    *err = cudaGetLastError();
    return true;
}

template <typename V>
static __global__ void copy_rows_kernel(const V *__restrict__ in, V *__restrict__ out, copy_map<int64_t> m,
                                        int64_t rows, int64_t Lv) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        int64_t bi, bo;
        copy_decode(m, r, &bi, &bo);
        for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < Lv; j += (int64_t)gridDim.x * blockDim.x)
            out[bo + j] = in[bi + j];
    }
}

/* The map as binary_bcast_kernel's (d1, d2, d3) with operand *full (0: a,
 * 1: b) of the output's shape and contiguous: walking the other operand's
 * dims from the last, size-1 dims skipped, its strides must read
 * contiguous-in-it dims (d3), then broadcast ones (stride 0: d2), then
 * contiguous again (d1), then broadcast (d0); false for any other pattern
 * or n >= 2^31. */
static bool bcast_blocks(const ert_cuda_map *m, int64_t n, int *full, unsigned *d1, unsigned *d2, unsigned *d3) {
    if (n >= INT32_MAX) return false;
    int64_t cs[ERT_MAX_DIMS];
    ert_cuda_contig_strides(m->ndim, m->dims, cs);
    for (int f = 0; f < 2; f++) {
        bool ok = true;
        for (int d = 0; ok && d < m->ndim; d++) ok = m->dims[d] == 1 || m->s[f][d] == cs[d];
        if (!ok) continue;
        const int64_t *ss = m->s[1 - f];
        int64_t seg[4] = {1, 1, 1, 1}, e = 1; /* d3, d2, d1, d0; e: the next contiguous stride in s */
        int stage = 0;                        /* even stages read s, odd ones broadcast it */
        for (int d = m->ndim - 1; ok && d >= 0; d--) {
            if (m->dims[d] == 1) continue;
            bool bc = ss[d] == 0;
            if (!bc && ss[d] != e) ok = false;
            while (ok && stage < 4 && bc != (bool)(stage & 1)) stage++;
            if (stage == 4) ok = false;
            if (!ok) break;
            seg[stage] *= m->dims[d];
            if (!bc) e *= m->dims[d];
        }
        if (!ok) continue;
        *full = f;
        *d3 = (unsigned)seg[0];
        *d2 = (unsigned)seg[1];
        *d1 = (unsigned)seg[2];
        return true;
    }
    return false;
}

static bool map_ok(const ert_cuda_map *m) {
    if (m->ndim < 0 || m->ndim > ERT_MAX_DIMS) return false;
    for (int d = 0; d < m->ndim; d++)
        if (m->dims[d] <= 0) return false;
    return true;
}

extern "C" {

void ert_cuda_contig_strides(int ndim, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

void ert_cuda_bcast_strides(int out_nd, const int64_t *out_dims, int nd, const int64_t *d, int64_t *strides) {
    int64_t own[ERT_MAX_DIMS];
    ert_cuda_contig_strides(nd, d, own);
    for (int k = 0; k < out_nd; k++) {
        int j = k - (out_nd - nd);
        strides[k] = (j < 0 || d[j] == 1 || out_dims[k] == 1) ? 0 : own[j];
    }
}

cudaError_t ert_cuda_unary_launch(ert_op op, const ert_unary_params *p, ert_dtype dt, const void *x, void *y,
                                  int64_t n, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    int what = U_ACT, kind = ERT_ACT_NONE;
    float alpha = p->act.alpha, beta = p->act.beta;
    switch (op) {
    case ERT_OP_RELU: kind = ERT_ACT_RELU; break;
    case ERT_OP_LEAKY_RELU: kind = ERT_ACT_LEAKY_RELU; break;
    case ERT_OP_CLIP: kind = ERT_ACT_CLIP; break;
    case ERT_OP_SIGMOID: kind = ERT_ACT_SIGMOID; break;
    case ERT_OP_TANH: kind = ERT_ACT_TANH; break;
    case ERT_OP_HARD_SIGMOID: kind = ERT_ACT_HARD_SIGMOID; break;
    case ERT_OP_HARD_SWISH: kind = ERT_ACT_HARD_SWISH; break;
    case ERT_OP_SILU: kind = ERT_ACT_SILU; break;
    case ERT_OP_GELU: /* unary.alpha: 0 erf form, 1 tanh form (core/ops/eltwise.c) */
        if (p->alpha == 1.0f) what = U_GELU_TANH;
        else kind = ERT_ACT_GELU;
        break;
    case ERT_OP_ERF: what = U_ERF; break;
    case ERT_OP_SQRT: what = U_SQRT; break;
    case ERT_OP_EXP: what = U_EXP; break;
    case ERT_OP_LOG: what = U_LOG; break;
    case ERT_OP_NEG: what = U_NEG; break;
    case ERT_OP_ABS: what = U_ABS; break;
    case ERT_OP_RECIPROCAL: what = U_RECIP; break;
    case ERT_OP_FLOOR: what = U_FLOOR; break;
    case ERT_OP_CEIL: what = U_CEIL; break;
    default: return cudaErrorInvalidValue;
    }
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        unary_kernel<T><<<grid_for(n), kThreads, 0, st>>>((const T *)x, (T *)y, n, what, kind, alpha, beta))
    return cudaGetLastError();
}

cudaError_t ert_cuda_binary_launch(ert_op op, ert_dtype dt, const void *a, const void *b, void *y,
                                   const ert_cuda_map *m, int64_t n, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    if (!map_ok(m)) return cudaErrorInvalidValue;
    int what;
    switch (op) {
    case ERT_OP_ADD: what = B_ADD; break;
    case ERT_OP_SUB: what = B_SUB; break;
    case ERT_OP_MUL: what = B_MUL; break;
    case ERT_OP_DIV: what = B_DIV; break;
    case ERT_OP_POW: what = B_POW; break;
    case ERT_OP_MIN: what = B_MIN; break;
    case ERT_OP_MAX: what = B_MAX; break;
    case ERT_OP_EQUAL: what = B_EQ; break;
    case ERT_OP_LESS: what = B_LT; break;
    case ERT_OP_GREATER: what = B_GT; break;
    default: return cudaErrorInvalidValue;
    }
    bool same = what < B_EQ;
    int64_t cs[ERT_MAX_DIMS];
    ert_cuda_contig_strides(m->ndim, m->dims, cs);
    for (int d = 0; same && d < m->ndim; d++)
        same = m->dims[d] == 1 || (m->s[0][d] == cs[d] && m->s[1][d] == cs[d]);
    if (same) {
        size_t es = dt == ERT_DTYPE_F32 ? 4 : 2;
        int V = dt == ERT_DTYPE_F32 ? 4 : 8;
        if (n % V || !ert_vec_ok(a, V, es) || !ert_vec_ok(b, V, es) || !ert_vec_ok(y, V, es)) V = 1;
        if (V == 1)
            ERT_CUDA_FLOAT_SWITCH(dt, T,
                binary_same_kernel<T, 1><<<grid_for(n), kThreads, 0, st>>>((const T *)a, (const T *)b, (T *)y, n, what))
        else if (dt == ERT_DTYPE_F32)
            binary_same_kernel<float, 4><<<grid_for(n / 4), kThreads, 0, st>>>((const float *)a, (const float *)b,
                                                                               (float *)y, n / 4, what);
        else
            ERT_CUDA_FLOAT_SWITCH(dt, T,
                binary_same_kernel<T, 8><<<grid_for(n / 8), kThreads, 0, st>>>((const T *)a, (const T *)b, (T *)y,
                                                                               n / 8, what))
        return cudaGetLastError();
    }
    int full;
    unsigned d1, d2, d3;
    if (what < B_EQ && bcast_blocks(m, n, &full, &d1, &d2, &d3)) {
        const void *f = full ? b : a, *s = full ? a : b;
        size_t es = dt == ERT_DTYPE_F32 ? 4 : 2;
        int V = dt == ERT_DTYPE_F32 ? 4 : 8;
        while (V > 1 && (n % V || !ert_vec_ok(f, V, es) || !ert_vec_ok(y, V, es))) V = V == 8 ? 4 : 1;
        fast_div f1 = div_magic(d1), f2 = div_magic(d2), f3 = div_magic(d3);
        int nv = (int)(n / V);
        unsigned g = grid_for(nv);
#define ERT_BB(V_)                                                                                                     \
    ERT_CUDA_FLOAT_SWITCH(dt, T,                                                                                       \
        binary_bcast_kernel<T, V_><<<g, kThreads, 0, st>>>((const T *)f, (const T *)s, (T *)y, f3, f2, f1, nv, what,  \
                                                           full == 1))
        if (V == 8) {
            ERT_BB(8)
        } else if (V == 4) {
            ERT_BB(4)
        } else {
            ERT_BB(1)
        }
#undef ERT_BB
        return cudaGetLastError();
    }
    copy_map<int> c;
    if (map32(m, n, &c)) {
        ERT_CUDA_FLOAT_SWITCH(dt, T,
            binary32_kernel<T><<<grid_for(n), kThreads, 0, st>>>((const T *)a, (const T *)b, y, c, (int)n, what))
        return cudaGetLastError();
    }
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        binary_kernel<T><<<grid_for(n), kThreads, 0, st>>>((const T *)a, (const T *)b, y, *m, n, what))
    return cudaGetLastError();
}

cudaError_t ert_cuda_where_launch(ert_dtype dt, const uint8_t *cond, const void *x, const void *z, void *y,
                                  const ert_cuda_map *m, int64_t n, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    if (!map_ok(m)) return cudaErrorInvalidValue;
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        where_kernel<T><<<grid_for(n), kThreads, 0, st>>>(cond, (const T *)x, (const T *)z, (T *)y, *m, n))
    return cudaGetLastError();
}

cudaError_t ert_cuda_epilogue_launch(ert_dtype dt, void *y, const void *add0, float scale0, const void *add1,
                                     const ert_cuda_map *m, int64_t n, const ert_act_params *act, cudaStream_t st) {
    if (n <= 0 || (!add0 && !add1 && act->kind == ERT_ACT_NONE)) return cudaSuccess;
    if (!map_ok(m)) return cudaErrorInvalidValue;
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        epilogue_kernel<T><<<grid_for(n), kThreads, 0, st>>>((T *)y, (const T *)add0, scale0, (const T *)add1, *m, n,
                                                            (int)act->kind, act->alpha, act->beta))
    return cudaGetLastError();
}

cudaError_t ert_cuda_conv_epilogue_launch(ert_dtype dt, void *y, const void *bias, const void *res, int64_t N,
                                          int64_t C, int64_t HW, bool nhwc, const ert_act_params *act,
                                          cudaStream_t st) {
    int64_t n = N * C * HW;
    if (n <= 0 || (!bias && !res && act->kind == ERT_ACT_NONE)) return cudaSuccess;
    bool two = (nhwc ? C : HW) % 2 == 0, small = n < INT32_MAX;
    int64_t nv = two ? n / 2 : n;
    unsigned g = grid_for(nv);
    int k = (int)act->kind;
    float al = act->alpha, be = act->beta;
#define ERT_EPI(T, V, I)                                                                                               \
    do {                                                                                                               \
        if (nhwc)                                                                                                      \
            conv_epi_kernel<T, V, I, true><<<g, kThreads, 0, st>>>((T *)y, (const T *)bias, (const T *)res, (I)C,      \
                                                                   (I)HW, (I)nv, k, al, be);                           \
        else                                                                                                           \
            conv_epi_kernel<T, V, I, false><<<g, kThreads, 0, st>>>((T *)y, (const T *)bias, (const T *)res, (I)C,     \
                                                                    (I)HW, (I)nv, k, al, be);                          \
    } while (0)
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        if (two && small) ERT_EPI(T, 2, int32_t);
        else if (two) ERT_EPI(T, 2, int64_t);
        else if (small) ERT_EPI(T, 1, int32_t);
        else ERT_EPI(T, 1, int64_t))
#undef ERT_EPI
    return cudaGetLastError();
}

cudaError_t ert_cuda_strided_copy_launch(const void *in, int64_t in_off, void *out, int64_t out_off, size_t esize,
                                         const ert_cuda_map *m, int64_t n, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    if (!map_ok(m)) return cudaErrorInvalidValue;
    if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return cudaErrorInvalidValue;
    const char *ib = (const char *)in + in_off * (int64_t)esize;
    char *ob = (char *)out + out_off * (int64_t)esize;
    int64_t dims[ERT_MAX_DIMS], si[ERT_MAX_DIMS], so[ERT_MAX_DIMS];
    int nd = copy_coalesce(m, dims, si, so);
    if (nd == 0) { /* one element */
        nd = 1;
        dims[0] = si[0] = so[0] = 1;
    }
    /* contiguous rows (not a memcpy node: graph memcpy nodes have limits on
     * managed memory where the GPU lacks concurrent managed access, as
     * Jetsons do), copied in the widest word every byte offset allows */
    if (si[nd - 1] == 1 && so[nd - 1] == 1) {
        int64_t L = dims[nd - 1] * (int64_t)esize, rows = n / dims[nd - 1];
        size_t vb = 16;
        while (vb > 1) {
            bool ok = L % (int64_t)vb == 0 && (uintptr_t)ib % vb == 0 && (uintptr_t)ob % vb == 0;
            for (int d = 0; ok && d < nd - 1; d++)
                ok = (si[d] * (int64_t)esize) % (int64_t)vb == 0 && (so[d] * (int64_t)esize) % (int64_t)vb == 0;
            if (ok) break;
            vb /= 2;
        }
        copy_map<int64_t> r;
        r.nd = nd - 1;
        for (int d = 0; d < nd - 1; d++) {
            r.dims[d] = dims[d];
            r.si[d] = si[d] * (int64_t)esize / (int64_t)vb;
            r.so[d] = so[d] * (int64_t)esize / (int64_t)vb;
        }
        int64_t Lv = L / (int64_t)vb;
        if (L >= 512 || nd == 1) { /* long rows: a block row per row */
            int64_t gx = (Lv + kThreads - 1) / kThreads;
            dim3 grid((unsigned)(gx > 1024 ? 1024 : gx), (unsigned)(rows > 65535 ? 65535 : rows));
            switch (vb) {
            case 16: copy_rows_kernel<uint4><<<grid, kThreads, 0, st>>>((const uint4 *)ib, (uint4 *)ob, r, rows, Lv); break;
            case 8: copy_rows_kernel<uint2><<<grid, kThreads, 0, st>>>((const uint2 *)ib, (uint2 *)ob, r, rows, Lv); break;
            case 4: copy_rows_kernel<uint32_t><<<grid, kThreads, 0, st>>>((const uint32_t *)ib, (uint32_t *)ob, r, rows, Lv); break;
            case 2: copy_rows_kernel<uint16_t><<<grid, kThreads, 0, st>>>((const uint16_t *)ib, (uint16_t *)ob, r, rows, Lv); break;
            default: copy_rows_kernel<uint8_t><<<grid, kThreads, 0, st>>>((const uint8_t *)ib, (uint8_t *)ob, r, rows, Lv); break;
            }
            return cudaGetLastError();
        }
        bool small = vb >= 4 && fits32(rows * Lv);
        int64_t maxi = 0, maxo = 0;
        for (int d = 0; small && d < r.nd; d++) {
            small = fits32(r.dims[d]) && fits32(r.si[d]) && fits32(r.so[d]);
            maxi += (r.dims[d] - 1) * (r.si[d] < 0 ? -r.si[d] : r.si[d]);
            maxo += (r.dims[d] - 1) * (r.so[d] < 0 ? -r.so[d] : r.so[d]);
        }
        if (small && fits32(maxi + Lv) && fits32(maxo + Lv)) { /* short rows: a thread per word */
            copy_map<int> w;
            w.nd = r.nd;
            for (int d = 0; d < r.nd; d++) w.dims[d] = (int)r.dims[d], w.si[d] = (int)r.si[d], w.so[d] = (int)r.so[d];
            int nw = (int)(rows * Lv);
            unsigned gw = grid_for(nw);
            switch (vb) {
            case 16: copy_words_kernel<uint4><<<gw, kThreads, 0, st>>>((const uint4 *)ib, (uint4 *)ob, w, nw, (int)Lv); break;
            case 8: copy_words_kernel<uint2><<<gw, kThreads, 0, st>>>((const uint2 *)ib, (uint2 *)ob, w, nw, (int)Lv); break;
            default: copy_words_kernel<uint32_t><<<gw, kThreads, 0, st>>>((const uint32_t *)ib, (uint32_t *)ob, w, nw, (int)Lv); break;
            }
            return cudaGetLastError();
        }
    }
    cudaError_t te = cudaSuccess;
    if (transpose_launch(ib, ob, esize, nd, dims, si, so, st, &te)) return te;
    unsigned g = grid_for(n);
    copy_map<int> c;
    if (map32(m, n, &c)) {
        switch (esize) {
        case 1: strided_copy32_kernel<uint8_t><<<g, kThreads, 0, st>>>((const uint8_t *)ib, (uint8_t *)ob, c, (int)n); break;
        case 2: strided_copy32_kernel<uint16_t><<<g, kThreads, 0, st>>>((const uint16_t *)ib, (uint16_t *)ob, c, (int)n); break;
        case 4: strided_copy32_kernel<uint32_t><<<g, kThreads, 0, st>>>((const uint32_t *)ib, (uint32_t *)ob, c, (int)n); break;
        default: strided_copy32_kernel<uint64_t><<<g, kThreads, 0, st>>>((const uint64_t *)ib, (uint64_t *)ob, c, (int)n); break;
        }
        return cudaGetLastError();
    }
    switch (esize) {
    case 1:
        strided_copy_kernel<uint8_t><<<g, kThreads, 0, st>>>((const uint8_t *)ib, (uint8_t *)ob, *m, n);
        break;
    case 2:
        strided_copy_kernel<uint16_t><<<g, kThreads, 0, st>>>((const uint16_t *)ib, (uint16_t *)ob, *m, n);
        break;
    case 4:
        strided_copy_kernel<uint32_t><<<g, kThreads, 0, st>>>((const uint32_t *)ib, (uint32_t *)ob, *m, n);
        break;
    default:
        strided_copy_kernel<uint64_t><<<g, kThreads, 0, st>>>((const uint64_t *)ib, (uint64_t *)ob, *m, n);
        break;
    }
    return cudaGetLastError();
}

} // extern "C"
