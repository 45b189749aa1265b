/* Data-movement kernels: Transpose, Concat, Split, Slice, Gather, Pad, Tile.
 * All are dtype-generic by element size (1, 2, 4 or 8 bytes). Shapes were
 * validated by prepare (core/ops/tensor.c); Gather still checks its indices
 * here because they may be computed at run time. Expand is in eltwise.c
 * (broadcasting), Cast/Shape/ConstantOfShape/Range in shape_gen.c. */
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#define GRAIN 16384 /* elements per parallel chunk */

/* dst[i] = src[i * stride] for i < n, elements of `es` bytes. */
static void copy_strided(void *dst, const void *src, int64_t n, int64_t stride, size_t es) {
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
#define CS(T)                                                      \
    do {                                                           \
        T *d = dst;                                                \
        const T *s = src;                                          \
        for (int64_t i = 0; i < n; i++) d[i] = s[i * stride];      \
    } while (0)
    switch (es) {
    case 1: CS(uint8_t); break;
    case 2: CS(uint16_t); break;
    case 4: CS(uint32_t); break;
    default: CS(uint64_t); break;
    }
#undef CS
}

static void c_strides(const ert_tview *t, int64_t *st) {
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        st[d] = s;
        s *= t->dims[d];
    }
}

/* A strided walk: the output is taken row by row (row = last dim); row r reads
 * the source at base + sum_d idx_d * sst[d], inner stride sst[nd-1]. */
typedef struct walk {
    const ert_kargs *a;
    int nd;
    int64_t dims[ERT_MAX_DIMS];  /* output dims */
    int64_t sst[ERT_MAX_DIMS];   /* source strides per output dim (elements) */
    int64_t base;                /* source offset of output index 0 */
    size_t es;
} walk;

static void walk_rows(void *arg, int64_t r0, int64_t r1) {
    const walk *w = arg;
    int nd = w->nd;
    int64_t len = w->dims[nd - 1];
    const char *src = w->a->in[0].data;
    char *dst = w->a->out[0].data;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off = w->base, rem = r;
        for (int d = nd - 2; d >= 0; d--) {
            off += (rem % w->dims[d]) * w->sst[d];
            rem /= w->dims[d];
        }
        copy_strided(dst + r * len * (int64_t)w->es, src + off * (int64_t)w->es, len, w->sst[nd - 1], w->es);
    }
}

static ert_status run_walk(walk *w) {
    const ert_tview *o = &w->a->out[0];
    if (o->n_elems == 0) return ERT_OK;
    if (w->es == 0) return ERT_E_UNSUPPORTED;
    if (w->nd == 0) { /* 0-d: one element */
        w->nd = 1;
        w->dims[0] = 1;
        w->sst[0] = 1;
    }
    int64_t len = w->dims[w->nd - 1];
    ert_parallel_for(w->a->pool, o->n_elems / len, GRAIN / len + 1, walk_rows, w);
    return ERT_OK;
}

/* ------------------------------------------------------------------ Transpose, Slice */

/* A batched 2-D transpose of 4-byte elements: out (B, P, Q) with
 * out[b][p][q] = src[b*bs + p + q*ld] (ld >= P). The strided walk reads one
 * output row from Q source rows a stride apart, a cache miss per element once
 * rows get long; here TR_TB x TR_TB tiles are read along the source rows and written
 * along the output rows (ConvNeXt's NCHW <-> NHWC around each LayerNorm). */
#define TR_TB 16
typedef struct tr_tile_job {
    const uint32_t *src;
    uint32_t *dst;
    int64_t P, Q, bs, ld, np; /* np: tiles along P */
} tr_tile_job;

/* The plain tiles (the oracle of the AVX2 ones below, which a kernel cap
 * under AVX2 selects: cpu_gemm.h). */
static void tr_tile_run(void *arg, int64_t t0, int64_t t1) {
    const tr_tile_job *j = arg;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t b = t / j->np, p0 = t % j->np * TR_TB, p1 = p0 + TR_TB < j->P ? p0 + TR_TB : j->P;
        const uint32_t *s = j->src + b * j->bs;
        uint32_t *d = j->dst + b * j->P * j->Q;
        for (int64_t q0 = 0; q0 < j->Q; q0 += TR_TB) {
            const int64_t q1 = q0 + TR_TB < j->Q ? q0 + TR_TB : j->Q;
            for (int64_t p = p0; p < p1; p++)
                for (int64_t q = q0; q < q1; q++) d[p * j->Q + q] = s[p + q * j->ld];
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* d[i*Q + k] = s[i + k*ld] for i, k < 8: 8 loads, 24 shuffles, 8 stores
 * (float moves and shuffles copy the 32 bits as they are, NaN payloads
 * included). The scalar tiles were ~10 instructions an element, 5% of
 * ConvNeXt-atto's (callgrind). */
__attribute__((target("avx2"))) static inline void tr8x8(const uint32_t *s, int64_t ld, uint32_t *d, int64_t Q) {
    const float *f = (const float *)s;
    __m256 r0 = _mm256_loadu_ps(f), r1 = _mm256_loadu_ps(f + ld), r2 = _mm256_loadu_ps(f + 2 * ld),
           r3 = _mm256_loadu_ps(f + 3 * ld), r4 = _mm256_loadu_ps(f + 4 * ld), r5 = _mm256_loadu_ps(f + 5 * ld),
           r6 = _mm256_loadu_ps(f + 6 * ld), r7 = _mm256_loadu_ps(f + 7 * ld);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    float *o = (float *)d;
    _mm256_storeu_ps(o, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(o + Q, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(o + 2 * Q, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(o + 3 * Q, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(o + 4 * Q, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(o + 5 * Q, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(o + 6 * Q, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(o + 7 * Q, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* The same tiles in 8x8 blocks, the partial edges element by element. */
__attribute__((target("avx2"))) static void tr_tile_run_avx2(void *arg, int64_t t0, int64_t t1) {
    const tr_tile_job *j = arg;
    const int64_t Q = j->Q, ld = j->ld;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t b = t / j->np, p0 = t % j->np * TR_TB, p1 = p0 + TR_TB < j->P ? p0 + TR_TB : j->P;
        const int64_t pe = p0 + (p1 - p0) / 8 * 8;
        const uint32_t *s = j->src + b * j->bs;
        uint32_t *d = j->dst + b * j->P * Q;
        for (int64_t q0 = 0; q0 < Q; q0 += TR_TB) {
            const int64_t q1 = q0 + TR_TB < Q ? q0 + TR_TB : Q, qe = q0 + (q1 - q0) / 8 * 8;
            for (int64_t p = p0; p < pe; p += 8) {
                for (int64_t q = q0; q < qe; q += 8) tr8x8(s + p + q * ld, ld, d + p * Q + q, Q);
                for (int64_t pp = p; pp < p + 8; pp++)
                    for (int64_t q = qe; q < q1; q++) d[pp * Q + q] = s[pp + q * ld];
            }
            for (int64_t p = pe; p < p1; p++)
                for (int64_t q = q0; q < q1; q++) d[p * Q + q] = s[p + q * ld];
        }
    }
}
#endif

static ert_par_fn tr_pick(const ert_kernel_choice *kc) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (ert_cpu_kernel_cap(kc) >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2")) return tr_tile_run_avx2;
#else
    (void)kc;
#endif
    return tr_tile_run;
}

/* Merges adjacent output dims that are contiguous in the source too and
 * drops size-1 dims; true (and *j filled) when what is left is a batched 2-D
 * transpose of 4-byte elements with rows long enough to pay for tiling. */
static bool as_tiled(const walk *w, tr_tile_job *j) {
    int64_t dims[ERT_MAX_DIMS], sst[ERT_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < w->nd; d++) {
        if (w->dims[d] == 1) continue;
        if (n && sst[n - 1] == w->sst[d] * w->dims[d]) {
            dims[n - 1] *= w->dims[d];
            sst[n - 1] = w->sst[d];
            continue;
        }
        dims[n] = w->dims[d], sst[n] = w->sst[d];
        n++;
    }
    if (w->es != 4 || w->base != 0 || n < 2 || n > 3 || sst[n - 2] != 1) return false;
    j->P = dims[n - 2], j->Q = dims[n - 1], j->ld = sst[n - 1];
    j->bs = n == 3 ? sst[0] : 0;
    if (j->P < 8 || j->Q < 8) return false;
    j->np = (j->P + TR_TB - 1) / TR_TB;
    return true;
}

/* out dim d is in dim perm[d]. */
ert_status ert_cpu_transpose(const ert_kargs *a) {
    const ert_tview *x = &a->in[0];
    walk w = {.a = a, .nd = a->out[0].ndim, .es = ert_dtype_size(x->dtype)};
    int64_t st[ERT_MAX_DIMS];
    c_strides(x, st);
    for (int d = 0; d < w.nd; d++) {
        w.dims[d] = a->out[0].dims[d];
        w.sst[d] = st[a->params->transpose.perm[d]];
    }
    tr_tile_job tj = {.src = x->data, .dst = a->out[0].data};
    if (a->out[0].n_elems > 0 && as_tiled(&w, &tj)) {
        const int64_t B = a->out[0].n_elems / (tj.P * tj.Q);
        ert_parallel_for(a->pool, B * tj.np, GRAIN / (TR_TB * tj.Q) + 1, tr_pick(a->choice), &tj);
        return ERT_OK;
    }
    return run_walk(&w);
}

/* out index i on dim d reads start[d] + i * step[d]. */
ert_status ert_cpu_slice(const ert_kargs *a) {
    const ert_tview *x = &a->in[0];
    const ert_slice_params *sp = &a->params->slice;
    walk w = {.a = a, .nd = a->out[0].ndim, .es = ert_dtype_size(x->dtype)};
    int64_t st[ERT_MAX_DIMS];
    c_strides(x, st);
    for (int d = 0; d < w.nd; d++) {
        w.dims[d] = a->out[0].dims[d];
        w.sst[d] = sp->step[d] * st[d];
        w.base += sp->start[d] * st[d];
    }
    return run_walk(&w);
}

/* ------------------------------------------------------------------ Concat, Split */

/* Both see the tensors as (outer, dim_k * inner): Concat appends each input's
 * block per outer index, Split cuts the input's rows into the outputs. */
typedef struct cat_job {
    const ert_kargs *a;
    int64_t inner_bytes; /* bytes per unit of the axis */
    int64_t row_bytes;   /* bytes of one outer row of the big tensor */
    int64_t axis;
} cat_job;

static void concat_rows(void *arg, int64_t o0, int64_t o1) {
    const cat_job *j = arg;
    const ert_kargs *a = j->a;
    for (int64_t o = o0; o < o1; o++) {
        char *dst = (char *)a->out[0].data + o * j->row_bytes;
        for (int k = 0; k < a->n_in; k++) {
            int64_t b = a->in[k].dims[j->axis] * j->inner_bytes;
            if (b) memcpy(dst, (const char *)a->in[k].data + o * b, (size_t)b);
            dst += b;
        }
    }
}

static void split_rows(void *arg, int64_t o0, int64_t o1) {
    const cat_job *j = arg;
    const ert_kargs *a = j->a;
    for (int64_t o = o0; o < o1; o++) {
        const char *src = (const char *)a->in[0].data + o * j->row_bytes;
        for (int k = 0; k < a->n_out; k++) {
            int64_t b = a->out[k].dims[j->axis] * j->inner_bytes;
            if (b && a->out[k].data) memcpy((char *)a->out[k].data + o * b, src, (size_t)b);
            src += b;
        }
    }
}

static void cat_init(cat_job *j, const ert_kargs *a, const ert_tview *big, int64_t axis, int64_t *outer) {
    j->a = a;
    j->axis = axis;
    int64_t inner = 1, o = 1;
    for (int d = 0; d < axis; d++) o *= big->dims[d];
    for (int d = (int)axis + 1; d < big->ndim; d++) inner *= big->dims[d];
    j->inner_bytes = inner * (int64_t)ert_dtype_size(big->dtype);
    j->row_bytes = big->dims[axis] * j->inner_bytes;
    *outer = o;
}

ert_status ert_cpu_concat(const ert_kargs *a) {
    cat_job j;
    int64_t outer;
    if (a->out[0].n_elems == 0) return ERT_OK;
    cat_init(&j, a, &a->out[0], a->params->axis.axis, &outer);
    ert_parallel_for(a->pool, outer, GRAIN / (a->out[0].n_elems / outer + 1) + 1, concat_rows, &j);
    return ERT_OK;
}

ert_status ert_cpu_split(const ert_kargs *a) {
    cat_job j;
    int64_t outer;
    if (a->in[0].n_elems == 0) return ERT_OK;
    cat_init(&j, a, &a->in[0], a->params->split.axis, &outer);
    ert_parallel_for(a->pool, outer, GRAIN / (a->in[0].n_elems / outer + 1) + 1, split_rows, &j);
    return ERT_OK;
}

/* ------------------------------------------------------------------ Gather */

/* data (outer, dim, inner), indices (n) -> out (outer, n, inner). */
typedef struct gather_job {
    const ert_kargs *a;
    int64_t n_idx, dim, inner_bytes;
} gather_job;

static int64_t gather_index(const ert_tview *ind, int64_t i, int64_t dim) {
    int64_t v = ind->dtype == ERT_DTYPE_I64 ? ((const int64_t *)ind->data)[i] : ((const int32_t *)ind->data)[i];
    return v < 0 ? v + dim : v;
}

static void gather_rows(void *arg, int64_t r0, int64_t r1) {
    const gather_job *j = arg;
    const ert_kargs *a = j->a;
    for (int64_t r = r0; r < r1; r++) {
        int64_t o = r / j->n_idx, k = gather_index(&a->in[1], r % j->n_idx, j->dim);
        memcpy((char *)a->out[0].data + r * j->inner_bytes,
               (const char *)a->in[0].data + (o * j->dim + k) * j->inner_bytes, (size_t)j->inner_bytes);
    }
}

bool ert_gather_bad_index(const ert_kargs *a, int64_t *pos, int64_t *val, int64_t *dim) {
    const ert_tview *x = &a->in[0], *ind = &a->in[1];
    int64_t axis = a->params->gather.axis;
    if (a->op != ERT_OP_GATHER || a->n_in < 2 || !ind->data || axis < 0 || axis >= x->ndim ||
        (ind->dtype != ERT_DTYPE_I64 && ind->dtype != ERT_DTYPE_I32))
        return false;
    int64_t n = x->dims[axis];
    for (int64_t i = 0; i < ind->n_elems; i++) {
        int64_t k = gather_index(ind, i, n);
        if (k < 0 || k >= n) {
            *pos = i;
            *val = ind->dtype == ERT_DTYPE_I64 ? ((const int64_t *)ind->data)[i] : ((const int32_t *)ind->data)[i];
            *dim = n;
            return true;
        }
    }
    return false;
}

ert_status ert_cpu_gather(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *ind = &a->in[1];
    int64_t axis = a->params->gather.axis;
    if (ind->dtype != ERT_DTYPE_I64 && ind->dtype != ERT_DTYPE_I32) return ERT_E_UNSUPPORTED;
    gather_job j = {.a = a, .n_idx = ind->n_elems, .dim = x->dims[axis]};
    /* indices may come from the graph at run time: check all before reading */
    for (int64_t i = 0; i < j.n_idx; i++) {
        int64_t k = gather_index(ind, i, j.dim);
        if (k < 0 || k >= j.dim) return ERT_E_ARG;
    }
    if (a->out[0].n_elems == 0) return ERT_OK;
    int64_t inner = 1, outer = 1;
    for (int d = 0; d < axis; d++) outer *= x->dims[d];
    for (int d = (int)axis + 1; d < x->ndim; d++) inner *= x->dims[d];
    j.inner_bytes = inner * (int64_t)ert_dtype_size(x->dtype);
    ert_parallel_for(a->pool, outer * j.n_idx, GRAIN / (inner + 1) + 1, gather_rows, &j);
    return ERT_OK;
}

/* ------------------------------------------------------------------ Pad */

/* Input coordinate read by output coordinate o of a dim of size n padded by b
 * in front, or -1 for the constant. Reflect/wrap repeat for pads beyond one
 * period (as numpy.pad). */
static int64_t pad_src(int64_t o, int64_t b, int64_t n, int mode) {
    int64_t c = o - b;
    if (c >= 0 && c < n) return c;
    switch (mode) {
    case 1: { /* reflect, without repeating the edge */
        if (n == 1) return 0;
        int64_t per = 2 * (n - 1), m = c % per;
        if (m < 0) m += per;
        return m >= n ? per - m : m;
    }
    case 2: return c < 0 ? 0 : n - 1; /* edge */
    case 3: { /* wrap */
        int64_t m = c % n;
        return m < 0 ? m + n : m;
    }
    default: return -1;
    }
}

typedef struct pad_job {
    const ert_kargs *a;
    const int64_t *map[ERT_MAX_DIMS]; /* per output dim: source coordinate or -1 */
    int64_t st[ERT_MAX_DIMS];
    int nd;
    size_t es;
    uint8_t value[8];                 /* the constant, in the dtype */
} pad_job;

static void pad_rows(void *arg, int64_t r0, int64_t r1) {
    const pad_job *j = arg;
    const ert_tview *o = &j->a->out[0];
    int nd = j->nd;
    int64_t len = o->dims[nd - 1];
    size_t es = j->es;
    const char *src = j->a->in[0].data;
    for (int64_t r = r0; r < r1; r++) {
        char *dst = (char *)o->data + r * len * (int64_t)es;
        int64_t off = 0, rem = r;
        bool fill = false;
        for (int d = nd - 2; d >= 0; d--) {
            int64_t s = j->map[d][rem % o->dims[d]];
            rem /= o->dims[d];
            if (s < 0) fill = true;
            off += s * j->st[d];
        }
        const int64_t *m = j->map[nd - 1];
        for (int64_t i = 0; i < len; i++) {
            const void *from = (fill || m[i] < 0) ? (const void *)j->value : src + (off + m[i]) * (int64_t)es;
            memcpy(dst + i * (int64_t)es, from, es);
        }
    }
}

static void to_dtype(double v, ert_dtype dt, uint8_t *out) {
    memset(out, 0, 8);
    /* clamp before converting to integers: out-of-range conversion is UB */
#define CLAMP(lo, hi) (v != v ? 0 : v < (lo) ? (lo) : v > (hi) ? (hi) : v)
    switch (dt) {
    case ERT_DTYPE_F32: { float f = (float)v; memcpy(out, &f, 4); break; }
    case ERT_DTYPE_F16: { uint16_t h = ert_f32_to_f16((float)v); memcpy(out, &h, 2); break; }
    case ERT_DTYPE_BF16: { uint16_t h = ert_f32_to_bf16((float)v); memcpy(out, &h, 2); break; }
    case ERT_DTYPE_I8: { int8_t i = (int8_t)CLAMP(-128.0, 127.0); memcpy(out, &i, 1); break; }
    case ERT_DTYPE_U8: { uint8_t u = (uint8_t)CLAMP(0.0, 255.0); out[0] = u; break; }
    case ERT_DTYPE_BOOL: out[0] = v != 0; break;
    case ERT_DTYPE_I32: { int32_t i = (int32_t)CLAMP(-2147483648.0, 2147483647.0); memcpy(out, &i, 4); break; }
    case ERT_DTYPE_I64: { int64_t i = (int64_t)CLAMP(-9.2e18, 9.2e18); memcpy(out, &i, 8); break; }
    default: break;
    }
#undef CLAMP
}

ert_status ert_cpu_pad(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *o = &a->out[0];
    const ert_pad_params *pp = &a->params->pad;
    pad_job j = {.a = a, .nd = o->ndim, .es = ert_dtype_size(x->dtype)};
    if (j.es == 0) return ERT_E_UNSUPPORTED;
    if (o->n_elems == 0) return ERT_OK;
    if (o->ndim == 0) { /* nothing to pad */
        memcpy(o->data, x->data, j.es);
        return ERT_OK;
    }
    size_t need = 0;
    for (int d = 0; d < o->ndim; d++) need += (size_t)o->dims[d] * sizeof(int64_t);
    if (a->workspace_bytes < need || !a->workspace) return ERT_E_INTERNAL;
    int64_t *m = a->workspace;
    for (int d = 0; d < o->ndim; d++) {
        j.map[d] = m;
        for (int64_t i = 0; i < o->dims[d]; i++) m[i] = pad_src(i, pp->pad_begin[d], x->dims[d], pp->mode);
        m += o->dims[d];
    }
    c_strides(x, j.st);
    to_dtype(pp->value, x->dtype, j.value);
    int64_t len = o->dims[o->ndim - 1];
    ert_parallel_for(a->pool, o->n_elems / len, GRAIN / len + 1, pad_rows, &j);
    return ERT_OK;
}

/* Tile: output row r (all dims but the last) reads input row
 * (i0 % in0, i1 % in1, ...); the last dim is the input row copied
 * out_last / in_last times. */
typedef struct tile_job {
    const ert_kargs *a;
    size_t es;
} tile_job;

static void tile_rows(void *arg, int64_t r0, int64_t r1) {
    const tile_job *j = arg;
    const ert_tview *x = &j->a->in[0], *o = &j->a->out[0];
    int nd = o->ndim;
    int64_t lin = x->dims[nd - 1], lout = o->dims[nd - 1];
    for (int64_t r = r0; r < r1; r++) {
        int64_t rem = r, src = 0, st = lin;
        for (int d = nd - 2; d >= 0; d--) {
            src += (rem % o->dims[d]) % x->dims[d] * st;
            rem /= o->dims[d];
            st *= x->dims[d];
        }
        const char *xs = (const char *)x->data + src * (int64_t)j->es;
        char *y = (char *)o->data + r * lout * (int64_t)j->es;
        for (int64_t k = 0; k < lout; k += lin) memcpy(y + k * (int64_t)j->es, xs, (size_t)lin * j->es);
    }
}

ert_status ert_cpu_tile(const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *o = &a->out[0];
    tile_job j = {a, ert_dtype_size(x->dtype)};
    if (j.es == 0 || o->ndim != x->ndim) return ERT_E_UNSUPPORTED;
    if (o->n_elems == 0) return ERT_OK;
    if (o->ndim == 0) { /* a scalar repeats into itself */
        memcpy(o->data, x->data, j.es);
        return ERT_OK;
    }
    int64_t lout = o->dims[o->ndim - 1];
    ert_parallel_for(a->pool, o->n_elems / lout, GRAIN / lout + 1, tile_rows, &j);
    return ERT_OK;
}
