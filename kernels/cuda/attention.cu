/* ert.Attention on CUDA: y = softmax(scale * q k^T + bias) v per (batch,
 * head), semantics of kernels/cpu/attention.c. q, k, v, bias and y are
 * strided views (ert_attn_params), so the kernels read q, k, v straight out
 * of a fused qkv projection and write y in the layout the next Linear reads.
 *
 * f16/bf16, head_dim <= 128 (attn_tc_kernel): flash-attention style, one
 * block of 4 warps per (batch * head, 64-query tile). The block keeps its Q
 * tile in shared memory and walks the keys 64 at a time: S = Q K^T on the
 * tensor cores (WMMA 16x16x16, f32 accumulation), an online softmax in f32
 * per row (running max m and sum l; the O rows rescaled by exp(m_old - m)),
 * then O += P V on the tensor cores (P rounded to the data type, as every
 * flash kernel does). The (heads, nq, nk) scores never reach memory. Each
 * warp owns 16 query rows, so after the K/V tile is loaded a warp only
 * synchronises with itself. head_dim is padded with zeros to DP (32, 64, 96
 * or 128).
 * f32 (and half types where the tensor-core kernel cannot run: bf16 below
 * sm_80, too little shared memory): attn_row_kernel, one warp per query row,
 * the same online softmax with the dot products reduced by shuffles.
 * Fully masked rows (every score -inf) give NaN, as the CPU's. */
#include "cuda_internal.h"
#include "cuda_types.cuh"

#include <math.h>
#include <mma.h>
#include <type_traits>

namespace wmma = nvcuda::wmma;

constexpr int kBQ = 64, kBK = 64, kWarps = 4;

/* The tensor cores' element type for T. bf16 WMMA needs sm_80: below it the
 * bf16 instantiation is compiled with half fragments and never launched. */
template <typename T> struct mma_t { typedef T type; };
template <> struct mma_t<float> { typedef __half type; }; /* compiled, never launched: f32 takes the row kernel */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
template <> struct mma_t<__nv_bfloat16> { typedef __half type; };
#endif

/* Shared-memory row pitches (elements): padded against bank conflicts, and
 * multiples of 8 halves / 4 floats as WMMA requires. */
template <int DP> struct tc_layout {
    static constexpr int LDH = DP + 8, LDS = kBK + 4, LDP = kBK + 8, LDO = DP + 4;
    static constexpr size_t bytes(size_t hs) {
        return hs * (size_t)(kBQ + 2 * kBK) * LDH + 4u * kBQ * LDS + hs * kBQ * LDP + 4u * kBQ * LDO + 8u * kBQ;
    }
};

static __device__ __forceinline__ int64_t at(const int64_t *v, int64_t b, int64_t h, int64_t t) {
    return v[ERT_ATTN_OFF] + b * v[ERT_ATTN_SB] + h * v[ERT_ATTN_SH] + t * v[ERT_ATTN_ST];
}

/* acc += A (16 x 16*ksteps, row-major, pitch lda) B (16*ksteps x 16 of layout BL,
 * the k-th 16-row slab at b + k * b_step, pitch ldb). */
template <typename H, typename BL>
static __device__ __forceinline__ void mma_k(wmma::fragment<wmma::accumulator, 16, 16, 16, float> &acc, const H *a,
                                             int lda, const H *b, int ldb, int b_step, int ksteps) {
    for (int kk = 0; kk < ksteps; kk++) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, H, BL> fb;
        wmma::load_matrix_sync(fa, a + kk * 16, lda);
        wmma::load_matrix_sync(fb, b + kk * b_step, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
    }
}

template <typename T, int DP>
static __global__ void __launch_bounds__(kWarps * 32)
attn_tc_kernel(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v, const T *__restrict__ bias,
               T *__restrict__ y, ert_attn_params p, int64_t n_qtiles) {
    typedef typename mma_t<T>::type H;
    typedef tc_layout<DP> L;
    extern __shared__ __align__(128) unsigned char smem[];
    H *sQ = (H *)smem, *sK = sQ + kBQ * L::LDH, *sV = sK + kBK * L::LDH;
    float *sS = (float *)(sV + kBK * L::LDH);
    H *sP = (H *)(sS + kBQ * L::LDS);
    float *sO = (float *)(sP + kBQ * L::LDP), *sM = sO + kBQ * L::LDO, *sL = sM + kBQ;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int64_t bh = blockIdx.x / n_qtiles, q0 = (blockIdx.x % n_qtiles) * kBQ;
    const int64_t b = bh / p.heads, h = bh % p.heads, D = p.head_dim;
    for (int i = tid; i < kBQ * DP; i += blockDim.x) {
        int r = i / DP, d = i % DP;
        float x = (q0 + r < p.nq && d < D) ? ert_ld(q[at(p.q, b, h, q0 + r) + d * p.q[ERT_ATTN_SD]]) : 0.0f;
        ert_put(&sQ[r * L::LDH + d], x);
    }
    for (int i = tid; i < kBQ * L::LDO; i += blockDim.x) sO[i] = 0.0f;
    for (int i = tid; i < kBQ; i += blockDim.x) {
        sM[i] = -INFINITY;
        sL[i] = 0.0f;
    }
    const int row = lane / 2, half = lane % 2; /* softmax: two lanes per row, 32 keys each */
    const int64_t qi = q0 + warp * 16 + row;
    for (int64_t k0 = 0; k0 < p.nk; k0 += kBK) {
        __syncthreads(); /* every warp is done with the previous K/V tile */
        for (int i = tid; i < kBK * DP; i += blockDim.x) {
            int r = i / DP, d = i % DP;
            bool in = k0 + r < p.nk && d < D;
            ert_put(&sK[r * L::LDH + d], in ? ert_ld(k[at(p.k, b, h, k0 + r) + d * p.k[ERT_ATTN_SD]]) : 0.0f);
            ert_put(&sV[r * L::LDH + d], in ? ert_ld(v[at(p.v, b, h, k0 + r) + d * p.v[ERT_ATTN_SD]]) : 0.0f);
        }
        __syncthreads();
        /* S (16 x kBK) of this warp = Q_w K^T */
        for (int j = 0; j < kBK / 16; j++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
            /* K^T as a column-major B: element (d, key) at sK[key * LDH + d] */
            mma_k<H, wmma::col_major>(acc, sQ + warp * 16 * L::LDH, L::LDH, sK + j * 16 * L::LDH, L::LDH, 16, DP / 16);
            wmma::store_matrix_sync(sS + warp * 16 * L::LDS + j * 16, acc, L::LDS, wmma::mem_row_major);
        }
        __syncwarp();
        /* online softmax of this tile's scores, row `row`, keys half*32 .. +32 */
        float *srow = sS + (warp * 16 + row) * L::LDS + half * 32;
        float mt = -INFINITY;
        for (int c = 0; c < 32; c++) {
            int64_t t = k0 + half * 32 + c;
            float s = -INFINITY;
            if (t < p.nk) {
                s = p.scale * srow[c];
                if (bias && qi < p.nq)
                    s += ert_ld(bias[p.bias[ERT_ATTN_OFF] + b * p.bias[ERT_ATTN_SB] + h * p.bias[ERT_ATTN_SH] +
                                     qi * p.bias[ERT_ATTN_ST] + t * p.bias[ERT_ATTN_SD]]);
            }
            srow[c] = s;
            mt = fmaxf(mt, s);
        }
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        const int r16 = warp * 16 + row;
        float m_old = sM[r16], m_new = fmaxf(m_old, mt);
        float m_use = m_new == -INFINITY ? 0.0f : m_new; /* nothing unmasked yet: p = 0, keep l and O */
        float alpha = expf(m_old - m_use), sum = 0.0f;
        H *prow = sP + r16 * L::LDP + half * 32;
        for (int c = 0; c < 32; c++) {
            float e = expf(srow[c] - m_use);
            sum += e;
            ert_put(&prow[c], e);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        __syncwarp(); /* both lanes of the row read sM before it changes */
        if (half == 0) {
            sM[r16] = m_new;
            sL[r16] = sL[r16] * alpha + sum;
        }
        for (int d = half * (DP / 2); d < (half + 1) * (DP / 2); d++) sO[r16 * L::LDO + d] *= alpha;
        __syncwarp();
        /* O_w += P_w V */
        for (int j = 0; j < DP / 16; j++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, sO + warp * 16 * L::LDO + j * 16, L::LDO, wmma::mem_row_major);
            mma_k<H, wmma::row_major>(acc, sP + warp * 16 * L::LDP, L::LDP, sV + j * 16, L::LDH, 16 * L::LDH, kBK / 16);
            wmma::store_matrix_sync(sO + warp * 16 * L::LDO + j * 16, acc, L::LDO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    for (int i = lane; i < 16 * D; i += 32) {
        int r = i / (int)D, d = i % (int)D;
        int64_t t = q0 + warp * 16 + r;
        if (t < p.nq)
            ert_put(&y[at(p.o, b, h, t) + d * p.o[ERT_ATTN_SD]], sO[(warp * 16 + r) * L::LDO + d] / sL[warp * 16 + r]);
    }
}

/* One warp per query row (b, h, i); lane l holds dims l, l + 32, ... (head_dim <= 128). */
template <typename T>
static __global__ void attn_row_kernel(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                                       const T *__restrict__ bias, T *__restrict__ y, ert_attn_params p, int64_t rows) {
    const int lane = threadIdx.x % 32;
    const int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    if (r >= rows) return;
    const int64_t i = r % p.nq, bh = r / p.nq, h = bh % p.heads, b = bh / p.heads, D = p.head_dim;
    float qv[4], acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const T *qp = q + at(p.q, b, h, i);
    for (int c = 0; c < 4; c++) {
        int64_t d = lane + 32 * c;
        qv[c] = d < D ? ert_ld(qp[d * p.q[ERT_ATTN_SD]]) : 0.0f;
    }
    const T *bp = bias ? bias + p.bias[ERT_ATTN_OFF] + b * p.bias[ERT_ATTN_SB] + h * p.bias[ERT_ATTN_SH] + i * p.bias[ERT_ATTN_ST]
                       : nullptr;
    float m = -INFINITY, l = 0.0f;
    for (int64_t t = 0; t < p.nk; t++) {
        const T *kp = k + at(p.k, b, h, t), *vp = v + at(p.v, b, h, t);
        float dot = 0.0f;
        for (int c = 0; c < 4; c++) {
            int64_t d = lane + 32 * c;
            if (d < D) dot += qv[c] * ert_ld(kp[d * p.k[ERT_ATTN_SD]]);
        }
        for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        float s = p.scale * dot + (bp ? ert_ld(bp[t * p.bias[ERT_ATTN_SD]]) : 0.0f);
        float m_new = fmaxf(m, s), m_use = m_new == -INFINITY ? 0.0f : m_new;
        float alpha = expf(m - m_use), e = expf(s - m_use);
        l = l * alpha + e;
        for (int c = 0; c < 4; c++) {
            int64_t d = lane + 32 * c;
            acc[c] = acc[c] * alpha + (d < D ? e * ert_ld(vp[d * p.v[ERT_ATTN_SD]]) : 0.0f);
        }
        m = m_new;
    }
    T *yp = y + at(p.o, b, h, i);
    for (int c = 0; c < 4; c++) {
        int64_t d = lane + 32 * c;
        if (d < D) ert_put(&yp[d * p.o[ERT_ATTN_SD]], acc[c] / l);
    }
}

/* Launch the tensor-core kernel for T with DP padded dims if the chip can;
 * false: it cannot (the caller uses the row kernel). */
template <typename T, int DP>
static bool launch_tc(const T *q, const T *k, const T *v, const T *bias, T *y, const ert_attn_params *p, int cc_major,
                      int smem_optin, cudaStream_t st, cudaError_t *err) {
    if (sizeof(T) != 2) return false;
    bool bf16 = !std::is_same<T, __half>::value;
    if (cc_major < (bf16 ? 8 : 7)) return false;
    size_t bytes = tc_layout<DP>::bytes(2);
    if (bytes > (size_t)smem_optin) return false;
    int64_t tiles = (p->nq + kBQ - 1) / kBQ, blocks = tiles * p->batch * p->heads;
    if (blocks > 0x7fffffff) return false;
    *err = cudaFuncSetAttribute(attn_tc_kernel<T, DP>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (*err != cudaSuccess) return true;
    attn_tc_kernel<T, DP><<<(unsigned)blocks, kWarps * 32, bytes, st>>>(q, k, v, bias, y, *p, tiles);
    *err = cudaGetLastError();
    return true;
}

template <typename T>
static cudaError_t launch_typed(const void *q, const void *k, const void *v, const void *bias, void *y,
                                const ert_attn_params *p, bool tensor_cores, cudaStream_t st) {
    const T *Q = (const T *)q, *K = (const T *)k, *V = (const T *)v, *B = (const T *)bias;
    T *Y = (T *)y;
    cudaError_t e = cudaSuccess;
    if (tensor_cores && sizeof(T) == 2) {
        int dev = 0, cc = 0, optin = 0;
        if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) != cudaSuccess)
            return e;
        int64_t D = p->head_dim;
        bool done = D <= 32   ? launch_tc<T, 32>(Q, K, V, B, Y, p, cc, optin, st, &e)
                    : D <= 64 ? launch_tc<T, 64>(Q, K, V, B, Y, p, cc, optin, st, &e)
                    : D <= 96 ? launch_tc<T, 96>(Q, K, V, B, Y, p, cc, optin, st, &e)
                              : launch_tc<T, 128>(Q, K, V, B, Y, p, cc, optin, st, &e);
        if (done) return e;
    }
    int64_t rows = p->batch * p->heads * p->nq, per = 4, blocks = (rows + per - 1) / per;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    attn_row_kernel<T><<<(unsigned)blocks, (unsigned)(per * 32), 0, st>>>(Q, K, V, B, Y, *p, rows);
    return cudaGetLastError();
}

/* The GEMM path's middle step (kernels/cuda/cuda_attn.c): rows of f32
 * scores s (scale already applied by the first GEMM), + bias, softmax in
 * f32, written as T to p (same row layout). One warp per row: row r is
 * (b, h, i) = (r / (H nq), r / nq % H, r % nq). A row of -inf gives NaN, as
 * the CPU's. */
template <typename T>
static __global__ void attn_softmax_kernel(const float *__restrict__ s, T *__restrict__ p, const T *__restrict__ bias,
                                           ert_attn_params a, int64_t rows) {
    const int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const int64_t nk = a.nk, i = r % a.nq, h = r / a.nq % a.heads, b = r / (a.nq * a.heads);
    const float *sr = s + r * nk;
    T *pr = p + r * nk;
    const T *br = bias ? bias + a.bias[ERT_ATTN_OFF] + b * a.bias[ERT_ATTN_SB] + h * a.bias[ERT_ATTN_SH] +
                             i * a.bias[ERT_ATTN_ST]
                       : nullptr;
    const int64_t bsd = a.bias[ERT_ATTN_SD];
    float mx = -INFINITY;
    for (int64_t t = lane; t < nk; t += 32) mx = fmaxf(mx, sr[t] + (br ? ert_ld(br[t * bsd]) : 0.0f));
    for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0;
    for (int64_t t = lane; t < nk; t += 32) sum += expf(sr[t] + (br ? ert_ld(br[t * bsd]) : 0.0f) - mx);
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float inv = 1.0f / sum;
    for (int64_t t = lane; t < nk; t += 32) ert_put(&pr[t], expf(sr[t] + (br ? ert_ld(br[t * bsd]) : 0.0f) - mx) * inv);
}

extern "C" {

cudaError_t ert_cuda_attn_softmax_launch(ert_dtype dt, const float *s, void *p, const void *bias, const ert_attn_params *a,
                                         cudaStream_t st) {
    int64_t rows = a->batch * a->heads * a->nq, per = 4, blocks = (rows + per - 1) / per;
    if (rows <= 0) return cudaSuccess;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    ERT_CUDA_FLOAT_SWITCH(dt, T,
        attn_softmax_kernel<T><<<(unsigned)blocks, (unsigned)(per * 32), 0, st>>>(
            s, (T *)p, a->has_bias ? (const T *)bias : nullptr, *a, rows))
    return cudaGetLastError();
}

cudaError_t ert_cuda_attention_launch(ert_dtype dt, const void *q, const void *k, const void *v, const void *bias, void *y,
                                      const ert_attn_params *p, bool tensor_cores, cudaStream_t st) {
    if (p->head_dim < 1 || p->head_dim > 128 || p->nk < 1) return cudaErrorInvalidValue;
    if (p->batch * p->heads * p->nq <= 0) return cudaSuccess;
    ERT_CUDA_FLOAT_SWITCH(dt, T, return launch_typed<T>(q, k, v, p->has_bias ? bias : nullptr, y, p, tensor_cores, st))
    return cudaSuccess;
}

} // extern "C"
