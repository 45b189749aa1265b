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
#include <string.h>
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

/* ------------------------------------------------------------------ mma.sync flash kernel (sm_80+)
 *
 * The fast path for f16/bf16 on sm_80 and later (Ampere, Orin, Hopper,
 * Thor): the same online softmax, but S and O live in registers in the
 * m16n8k16 fragment layouts, so the scores never touch shared memory and the
 * probabilities feed the second product straight from the first one's
 * accumulators (the C fragment of two adjacent 8-key tiles is the A fragment
 * of a 16-key step). Each warp owns 16 query rows of one (batch, head); a
 * block of NW warps (1, 2 or 4, picked so that the grid covers the SMs:
 * ViT-B/16 at batch 1 has 12 heads x 13 row tiles, 156 warps) shares each
 * 64-key tile of K and V, brought in by cp.async 16-byte copies into one of
 * two shared-memory stages while the warps work on the other (a warp alone
 * would otherwise wait out one global-memory latency per load: the first
 * version of this kernel, with synchronous loads, took 35 us for ViT-B's 12
 * heads on an H200, where the cuBLAS path takes 22). Fragment layout (PTX ISA, mma.m16n8k16): with
 * g = lane / 4 and t = lane % 4, A holds rows g, g + 8 and columns 2t, 2t + 1,
 * 2t + 8, 2t + 9; B columns g, rows 2t, 2t + 1, 2t + 8, 2t + 9; C rows g,
 * g + 8 and columns 2t, 2t + 1. */

constexpr int kMK = 64; /* keys per tile */

template <typename T> struct mma_pack;
template <> struct mma_pack<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __half2 h = __floats2half2_rn(lo, hi);
        return *(uint32_t *)&h;
    }
};
template <> struct mma_pack<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *(uint32_t *)&h;
    }
};

/* c += a b, one m16n8k16 tile, f32 accumulation. */
template <typename T>
static __device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (std::is_same<T, __half>::value)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1; /* never launched below sm_80 (ert_cuda_attn_mma_can) */
#endif
}

/* 8 consecutive elements of row `tok` of view vw from dim d0, zero outside
 * (tokens >= n, dims >= D); vec: the 8 are one aligned 16-byte load. T is
 * a 2-byte type. */
template <typename T>
static __device__ __forceinline__ uint4 load8(const T *base, const int64_t *vw, int64_t b, int64_t h, int64_t tok,
                                              int64_t n, int d0, int D, bool vec) {
    uint4 u = make_uint4(0, 0, 0, 0);
    if (tok >= n || d0 >= D) return u;
    const T *p = base + at(vw, b, h, tok);
    if (vec) return *(const uint4 *)(p + d0);
    unsigned short e[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (d0 + j < D) memcpy(&e[j], &p[(int64_t)(d0 + j) * vw[ERT_ATTN_SD]], 2);
    memcpy(&u, e, sizeof u);
    return u;
}

/* 16 bytes global -> shared without a register round trip (sm_80+). */
static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem));
#else
    *(uint4 *)smem = *(const uint4 *)gmem;
#endif
}
static __device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> static __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* Rows k0 .. k0 + 63 of K and V into one stage of shared memory (row-major,
 * pitch LD) by the NT threads numbered tid: 16-byte asynchronous copies
 * where vec allows, element loads (and zeros past nk or D) otherwise; one
 * commit group. */
template <typename T, int DP, int NT>
static __device__ __forceinline__ void load_kv(T *sK, T *sV, const T *k, const T *v, const ert_attn_params &p,
                                               int64_t b, int64_t h, int64_t k0, bool vec, int tid) {
    constexpr int LD = DP + 8;
    const int D = (int)p.head_dim;
    for (int i = tid; i < kMK * (DP / 8); i += NT) {
        int r = i / (DP / 8), d0 = (i % (DP / 8)) * 8;
        T *dk = sK + r * LD + d0, *dv = sV + r * LD + d0;
        if (vec && k0 + r < p.nk && d0 < D) {
            cp_async16(dk, k + at(p.k, b, h, k0 + r) + d0);
            cp_async16(dv, v + at(p.v, b, h, k0 + r) + d0);
        } else {
            *(uint4 *)dk = load8(k, p.k, b, h, k0 + r, p.nk, d0, D, false);
            *(uint4 *)dv = load8(v, p.v, b, h, k0 + r, p.nk, d0, D, false);
        }
    }
    cp_async_commit();
}

template <typename T, int DP, int NW, bool SPLIT> struct mma_smem {
    /* SPLIT: one stage of K and V per warp, reused at the end for the
     * warps' partial row maxima, sums and outputs (f32) */
    static constexpr size_t kv = (SPLIT ? NW : 2u /* stages */) * 2u /* K, V */ * kMK * (DP + 8) * 2u;
    static constexpr size_t comb = SPLIT ? (size_t)NW * 16u * (2u + DP) * 4u : 0u;
    static constexpr size_t bytes = kv > comb ? kv : comb;
};

/* SPLIT (few query tiles, several key tiles: ViT-B/16 at batch 1 is 156
 * warps of 16 queries over 4 key tiles, one warp per SM whose serial chain
 * of ~2,000 instructions a tile set the node's time, 16 us): the NW warps of
 * a block share one 16-query tile and split its keys, warp w taking key
 * tiles w, w + NW, ... into its own shared-memory stage; at the end the
 * warps' partial (max, sum, output) are merged in shared memory as flash
 * decoding does: m = max_w m_w, l = sum_w 2^(m_w - m) l_w, O likewise. */
template <typename T, int DP, int NW, bool SPLIT>
static __global__ void __launch_bounds__(NW * 32)
attn_mma_kernel(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v, const T *__restrict__ bias,
                T *__restrict__ y, ert_attn_params p, int64_t n_qtiles, bool vec) {
    constexpr int LD = DP + 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    /* not SPLIT: stage s: K at sbuf + 2 s kMK LD, V after it; SPLIT: warp w's stage at sbuf + 2 w kMK LD */
    T *const sbuf = (T *)smem_raw;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int64_t bh = blockIdx.x / n_qtiles;
    const int64_t q0 = SPLIT ? (blockIdx.x % n_qtiles) * 16 : (blockIdx.x % n_qtiles) * (16 * NW) + warp * 16;
    const int64_t b = bh / p.heads, h = bh % p.heads;
    const int D = (int)p.head_dim;
    const int64_t n_tiles = (p.nk + kMK - 1) / kMK;
    T *const wbuf = sbuf + (SPLIT ? warp * 2 * kMK * LD : 0);
    if (SPLIT) {
        if (warp < n_tiles) load_kv<T, DP, 32>(wbuf, wbuf + kMK * LD, k, v, p, b, h, (int64_t)warp * kMK, vec, lane);
    } else {
        load_kv<T, DP, NW * 32>(sbuf, sbuf + kMK * LD, k, v, p, b, h, 0, vec, tid); /* tile 0 flies while Q loads */
    }
    const bool active = q0 < p.nq;
    const int64_t r0 = q0 + g, r1 = q0 + g + 8; /* this thread's two query rows */
    /* Q fragments (A of S = Q K^T), straight from global memory, once. Rows
     * and dims past the end read a clamped (valid) address and are zeroed
     * after, so every load is unconditional and they all fly together (a
     * guarded load per element was one memory latency each: 6-10 us). */
    uint32_t qa[DP / 16][4];
    {
        const int64_t sd = p.q[ERT_ATTN_SD], last = p.nq - 1;
        const T *p0 = q + at(p.q, b, h, r0 < last ? r0 : last), *p1 = q + at(p.q, b, h, r1 < last ? r1 : last);
        T raw[DP / 16][8];
#pragma unroll
        for (int ks = 0; ks < DP / 16; ks++)
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int d = ks * 16 + 2 * t4 + (j % 2) + (j >= 4 ? 8 : 0); /* j: 0,1 row g; 2,3 row g+8; 4,5 g; 6,7 g+8 */
                raw[ks][j] = ((j / 2) % 2 ? p1 : p0)[(int64_t)(d < D ? d : D - 1) * sd];
            }
#pragma unroll
        for (int ks = 0; ks < DP / 16; ks++) {
            float x[8];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int d = ks * 16 + 2 * t4 + (j % 2) + (j >= 4 ? 8 : 0);
                bool in = d < D && ((j / 2) % 2 ? r1 : r0) < p.nq;
                x[j] = in ? ert_ld(raw[ks][j]) : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < 4; r++) qa[ks][r] = mma_pack<T>::pack(x[2 * r], x[2 * r + 1]);
        }
    }
    float o[DP / 8][4];
#pragma unroll
    for (int i = 0; i < DP / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    const float LOG2E = 1.4426950408889634f, sc = p.scale * LOG2E;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    const T *bb = bias ? bias + p.bias[ERT_ATTN_OFF] + b * p.bias[ERT_ATTN_SB] + h * p.bias[ERT_ATTN_SH] : nullptr;
    for (int64_t it = SPLIT ? warp : 0; it < n_tiles; it += SPLIT ? NW : 1) {
        const int64_t k0 = it * kMK;
        const T *sK, *sV;
        if (SPLIT) { /* this warp's own stage: its copies, then the warp's barrier */
            cp_async_wait<0>();
            __syncwarp();
            sK = wbuf, sV = wbuf + kMK * LD;
        } else {
            if (it + 1 < n_tiles) { /* the next tile into the other stage, then wait for this one */
                T *nk_ = sbuf + ((it + 1) & 1) * 2 * kMK * LD;
                load_kv<T, DP, NW * 32>(nk_, nk_ + kMK * LD, k, v, p, b, h, k0 + kMK, vec, tid);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();
            sK = sbuf + (it & 1) * 2 * kMK * LD, sV = sK + kMK * LD;
        }
        if (active) {
            /* this tile's bias, issued first so that its loads overlap the
             * products (clamped addresses, unconditional loads) */
            float bv[kMK / 8][4];
            if (bb) {
                const int64_t lr = p.nq - 1, lk = p.nk - 1, st_ = p.bias[ERT_ATTN_ST], sd_ = p.bias[ERT_ATTN_SD];
#pragma unroll
                for (int nt = 0; nt < kMK / 8; nt++)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        int64_t key = k0 + nt * 8 + 2 * t4 + (j % 2), row = j < 2 ? r0 : r1;
                        bv[nt][j] = ert_ld(bb[(row < lr ? row : lr) * st_ + (key < lk ? key : lk) * sd_]) * LOG2E;
                    }
            }
            /* S = Q K^T: 8 tiles of 8 keys */
            float s[kMK / 8][4];
#pragma unroll
            for (int nt = 0; nt < kMK / 8; nt++) {
                s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
                const T *kr = sK + (nt * 8 + g) * LD + 2 * t4;
#pragma unroll
                for (int ks = 0; ks < DP / 16; ks++)
                    mma16816<T>(s[nt], qa[ks], *(const uint32_t *)(kr + ks * 16), *(const uint32_t *)(kr + ks * 16 + 8));
            }
            /* scale, bias, mask; in log2 units */
            float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < kMK / 8; nt++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int64_t key = k0 + nt * 8 + 2 * t4 + (j % 2);
                    float x = key < p.nk ? s[nt][j] * sc + (bb ? bv[nt][j] : 0.0f) : -INFINITY;
                    s[nt][j] = x;
                    if (j < 2) mx0 = fmaxf(mx0, x);
                    else mx1 = fmaxf(mx1, x);
                }
#pragma unroll
            for (int o2 = 1; o2 < 4; o2 *= 2) {
                mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o2));
                mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o2));
            }
            const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
            const float u0 = n0 == -INFINITY ? 0.0f : n0, u1 = n1 == -INFINITY ? 0.0f : n1; /* nothing unmasked yet */
            const float a0 = exp2f(m0 - u0), a1 = exp2f(m1 - u1);
            m0 = n0, m1 = n1;
            l0 *= a0, l1 *= a1;
#pragma unroll
            for (int i = 0; i < DP / 8; i++) o[i][0] *= a0, o[i][1] *= a0, o[i][2] *= a1, o[i][3] *= a1;
#pragma unroll
            for (int nt = 0; nt < kMK / 8; nt++) {
                s[nt][0] = exp2f(s[nt][0] - u0), s[nt][1] = exp2f(s[nt][1] - u0);
                s[nt][2] = exp2f(s[nt][2] - u1), s[nt][3] = exp2f(s[nt][3] - u1);
                l0 += s[nt][0] + s[nt][1];
                l1 += s[nt][2] + s[nt][3];
            }
            /* O += P V: 4 steps of 16 keys, P from the S accumulators; B (keys
             * 2t, 2t + 1 and + 8 of column g) gathered from V's rows */
            const unsigned short *sv = (const unsigned short *)sV;
#pragma unroll
            for (int kc = 0; kc < kMK / 16; kc++) {
                uint32_t pa[4] = {mma_pack<T>::pack(s[2 * kc][0], s[2 * kc][1]),
                                  mma_pack<T>::pack(s[2 * kc][2], s[2 * kc][3]),
                                  mma_pack<T>::pack(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                                  mma_pack<T>::pack(s[2 * kc + 1][2], s[2 * kc + 1][3])};
                const unsigned short *vr = sv + (kc * 16 + 2 * t4) * LD + g;
#pragma unroll
                for (int dt = 0; dt < DP / 8; dt++) {
                    const unsigned short *c = vr + dt * 8;
                    uint32_t b0 = (uint32_t)c[0] | ((uint32_t)c[LD] << 16);
                    uint32_t b1 = (uint32_t)c[8 * LD] | ((uint32_t)c[9 * LD] << 16);
                    mma16816<T>(o[dt], pa, b0, b1);
                }
            }
        }
        if (SPLIT) { /* the warp has read its stage: its next tile may overwrite it */
            __syncwarp();
            if (it + NW < n_tiles) load_kv<T, DP, 32>(wbuf, wbuf + kMK * LD, k, v, p, b, h, k0 + NW * kMK, vec, lane);
        } else {
            __syncthreads(); /* this stage is read; the next iteration's copy may overwrite it */
        }
    }
    if (!active) return; /* never under SPLIT: every block's 16 queries start inside nq */
#pragma unroll
    for (int o2 = 1; o2 < 4; o2 *= 2) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, o2);
        l1 += __shfl_xor_sync(0xffffffffu, l1, o2);
    }
    if (SPLIT) {
        __syncthreads(); /* every warp is past its K/V stage: the buffer holds the partials now */
        float *cm = (float *)(void *)smem_raw, *cl = cm + NW * 16, *co = cl + NW * 16; /* [NW][16], [NW][16], [NW][16][DP] */
        if (t4 == 0) {
            cm[warp * 16 + g] = m0, cm[warp * 16 + g + 8] = m1;
            cl[warp * 16 + g] = l0, cl[warp * 16 + g + 8] = l1;
        }
#pragma unroll
        for (int dt = 0; dt < DP / 8; dt++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int col = dt * 8 + 2 * t4 + j;
                co[(warp * 16 + g) * DP + col] = o[dt][j];
                co[(warp * 16 + g + 8) * DP + col] = o[dt][2 + j];
            }
        __syncthreads();
        if (warp != 0) return;
        float M0 = -INFINITY, M1 = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; w++) M0 = fmaxf(M0, cm[w * 16 + g]), M1 = fmaxf(M1, cm[w * 16 + g + 8]);
        float f0[NW], f1[NW]; /* each warp's weight: 2^(m_w - m), 0 for a warp that saw no unmasked key */
        l0 = l1 = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; w++) {
            const float a0_ = cm[w * 16 + g], a1_ = cm[w * 16 + g + 8];
            f0[w] = a0_ == -INFINITY ? 0.0f : exp2f(a0_ - M0);
            f1[w] = a1_ == -INFINITY ? 0.0f : exp2f(a1_ - M1);
            l0 += f0[w] * cl[w * 16 + g];
            l1 += f1[w] * cl[w * 16 + g + 8];
        }
#pragma unroll
        for (int dt = 0; dt < DP / 8; dt++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int col = dt * 8 + 2 * t4 + j;
                float s0_ = 0.0f, s1_ = 0.0f;
#pragma unroll
                for (int w = 0; w < NW; w++) {
                    s0_ += f0[w] * co[(w * 16 + g) * DP + col];
                    s1_ += f1[w] * co[(w * 16 + g + 8) * DP + col];
                }
                o[dt][j] = s0_, o[dt][2 + j] = s1_;
            }
    }
    const float i0 = 1.0f / l0, i1 = 1.0f / l1; /* l = 0 (a fully masked row): NaN below, as the CPU's */
    const int64_t sd = p.o[ERT_ATTN_SD];
    T *y0 = r0 < p.nq ? y + at(p.o, b, h, r0) : nullptr, *y1 = r1 < p.nq ? y + at(p.o, b, h, r1) : nullptr;
#pragma unroll
    for (int dt = 0; dt < DP / 8; dt++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            int d = dt * 8 + 2 * t4 + j;
            if (d >= D) continue;
            if (y0) ert_put(&y0[(int64_t)d * sd], l0 > 0.0f ? o[dt][j] * i0 : NAN);
            if (y1) ert_put(&y1[(int64_t)d * sd], l1 > 0.0f ? o[dt][2 + j] * i1 : NAN);
        }
}

/* 16-byte loads of K and V rows: dims contiguous, every offset and stride a
 * multiple of 8 elements, base pointers 16-byte aligned. */
static bool kv_vec(const void *k, const void *v, const ert_attn_params *p, size_t es) {
    if (p->head_dim % 8 || (size_t)k % 16 || (size_t)v % 16 || es != 2) return false;
    const int64_t *vw[2] = {p->k, p->v};
    for (int i = 0; i < 2; i++) {
        if (vw[i][ERT_ATTN_SD] != 1) return false;
        for (int a = ERT_ATTN_OFF; a < ERT_ATTN_SD; a++)
            if (vw[i][a] % 8) return false;
    }
    return true;
}

template <typename T, int DP, int NW, bool SPLIT = false>
static cudaError_t launch_mma_nw(const T *q, const T *k, const T *v, const T *bias, T *y, const ert_attn_params *p,
                                 cudaStream_t st) {
    const int rows = SPLIT ? 16 : 16 * NW; /* queries a block */
    int64_t tiles = (p->nq + rows - 1) / rows, blocks = tiles * p->batch * p->heads;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    const size_t smem = mma_smem<T, DP, NW, SPLIT>::bytes;
    if (smem > 48u * 1024u) {
        cudaError_t e = cudaFuncSetAttribute(attn_mma_kernel<T, DP, NW, SPLIT>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    attn_mma_kernel<T, DP, NW, SPLIT><<<(unsigned)blocks, NW * 32, smem, st>>>(q, k, v, bias, y, *p, tiles,
                                                                                kv_vec(k, v, p, sizeof(T)));
    return cudaGetLastError();
}

/* split: the keys over the 4 warps of a block (SPLIT above) where the
 * 16-query tiles are too few to give every SM two warps and there are
 * several key tiles; head dims up to 64 (a stage per warp: 74 KB of shared
 * memory at 64). Else NW: 4 warps a block where that still gives two blocks
 * an SM, else 2, else 1. */
template <typename T, int DP>
static cudaError_t launch_mma_dp(const T *q, const T *k, const T *v, const T *bias, T *y, const ert_attn_params *p,
                                 int sms, bool split, cudaStream_t st) {
    int64_t warps = p->batch * p->heads * ((p->nq + 15) / 16);
    if (split && DP <= 64 && p->nk > kMK && warps < 2 * (int64_t)sms)
        return launch_mma_nw<T, DP, 4, true>(q, k, v, bias, y, p, st);
    if (warps >= 8 * (int64_t)sms) return launch_mma_nw<T, DP, 4>(q, k, v, bias, y, p, st);
    if (warps >= 2 * (int64_t)sms) return launch_mma_nw<T, DP, 2>(q, k, v, bias, y, p, st);
    return launch_mma_nw<T, DP, 1>(q, k, v, bias, y, p, st);
}

template <typename T>
static cudaError_t launch_mma(const void *q, const void *k, const void *v, const void *bias, void *y,
                              const ert_attn_params *p, int sms, bool split, cudaStream_t st) {
    const T *Q = (const T *)q, *K = (const T *)k, *V = (const T *)v, *B = (const T *)bias;
    T *Y = (T *)y;
    int64_t D = p->head_dim;
    return D <= 32   ? launch_mma_dp<T, 32>(Q, K, V, B, Y, p, sms, split, st)
           : D <= 64 ? launch_mma_dp<T, 64>(Q, K, V, B, Y, p, sms, split, st)
           : D <= 96 ? launch_mma_dp<T, 96>(Q, K, V, B, Y, p, sms, split, st)
                     : launch_mma_dp<T, 128>(Q, K, V, B, Y, p, sms, split, st);
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

bool ert_cuda_attn_mma_can(ert_dtype dt, const ert_attn_params *p, int cc_major) {
    return (dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16) && cc_major >= 8 && p->head_dim >= 1 && p->head_dim <= 128 &&
           p->nk >= 1;
}

cudaError_t ert_cuda_attention_mma_launch(ert_dtype dt, const void *q, const void *k, const void *v, const void *bias,
                                          void *y, const ert_attn_params *p, int sms, bool split, cudaStream_t st) {
    if (p->head_dim < 1 || p->head_dim > 128 || p->nk < 1) return cudaErrorInvalidValue;
    if (p->batch * p->heads * p->nq <= 0) return cudaSuccess;
    if (sms < 1) sms = 1;
    const void *bs = p->has_bias ? bias : nullptr;
    if (dt == ERT_DTYPE_F16) return launch_mma<__half>(q, k, v, bs, y, p, sms, split, st);
    if (dt == ERT_DTYPE_BF16) return launch_mma<__nv_bfloat16>(q, k, v, bs, y, p, sms, split, st);
    return cudaErrorInvalidValue;
}

cudaError_t ert_cuda_attention_launch(ert_dtype dt, const void *q, const void *k, const void *v, const void *bias, void *y,
                                      const ert_attn_params *p, bool tensor_cores, cudaStream_t st) {
    if (p->head_dim < 1 || p->head_dim > 128 || p->nk < 1) return cudaErrorInvalidValue;
    if (p->batch * p->heads * p->nq <= 0) return cudaSuccess;
    ERT_CUDA_FLOAT_SWITCH(dt, T, return launch_typed<T>(q, k, v, p->has_bias ? bias : nullptr, y, p, tensor_cores, st))
    return cudaSuccess;
}

} // extern "C"
