/* Conv and ConvTranspose (f32, NCHW, 1-D/2-D/3-D).
 *
 * Conv:
 *   - every rank is handled as 3-D: missing leading spatial dims have size 1,
 *     kernel 1, stride 1, no padding;
 *   - one input channel per group (depthwise, with any channel multiplier):
 *     2-D kernels up to 7x7 with stride 1 or 2 go to dwconv.c's register-
 *     blocked kernel; the rest (and every case, under a kernel choice with
 *     dw_plain: ert_internal.h) to the plain direct loops here, parallel
 *     over (image, output channel), each tap a bounds-clipped row update
 *     that vectorises;
 *   - a 3x3 stride-1 conv where winograd.c's cost rule says so: Winograd
 *     F(4x4, 3x3) on the filter transformed at create;
 *   - on AVX-512, 1x1 stride-1 one-group convs on large maps with few
 *     input channels (PV_*): grpconv.c's kernel with x read in place, the
 *     pixels as the vector dimension;
 *   - one group, where the SGEMM would run its AVX2 or NEON kernel:
 *     pwconv.c, output channels as the vector dimension, x read in place
 *     for 1x1 stride-1 convs, through a per-task im2col of its pixels for
 *     other 1-D/2-D ones whose windows do not overlap with C*KH*KW <= 576
 *     (strided 1x1 shortcuts, patchify stems and downsampling convs);
 *   - a 2-D conv that is grouped with narrow groups (Mg <= PADG_MG_MAX:
 *     RegNet, ResNeXt), or strided with no overlap between its windows'
 *     columns (a 1x1 stride-2 shortcut), when the backend's node_workspace
 *     gave the scratch: per (image, group) the group's input is copied once
 *     into zero-padded phase planes (stride sh x sw: sh*sw planes of Hq x Wq,
 *     plane (a, b) holding padded rows a, a+sh, ... and columns b, b+sw,
 *     ...; Wq = OW + (KW-1)*dw/sw), so every im2col row is one phase plane
 *     shifted by (kh*dh/sh)*Wq + kw*dw/sw: the SGEMM packs it as a dense B
 *     (row offsets b_row_off) over OH*Wq columns, the Wq - OW extra ones per
 *     row computed and dropped when the result is copied out (bias and
 *     activation in the SGEMM's store epilogue, or with a residual all three
 *     in the copy-out). The per-output-row im2col it replaces cost
 *     ~50 instructions plus a memcpy call per row segment, more than the
 *     GEMM itself on 14- and 7-wide maps, and ~4 per float at stride 2
 *     (RegNetY-800MF, callgrind). Without a residual, on x86 with AVX2
 *     (grpconv.c's copies), the grouped ones, and on AVX-512 one-group ones
 *     of small K on large maps (GC_DENSE_*: stems), skip the SGEMM: grpconv.c
 *     reads the planes in place (tasks of output-row chunks, each filling
 *     only its rows of the planes);
 *   - otherwise per (image, group) one SGEMM: W_g (Mg, Cg*k) x im2col(x_g)
 *     (Cg*k, OD*OH*OW), the im2col matrix packed on the fly (cpu_gemm.h); a
 *     1x1/stride 1/no pad conv reads x_g directly as the B matrix. Bias,
 *     residual and activation are applied in the GEMM epilogue; a per-output-
 *     channel scale (in[4], has_scale: the CPU trainer's frozen BatchNorm
 *     folded without copying the filter) while packing the filter.
 * ConvTranspose:
 *   per (image, group): cols (Mg*k, ID*IH*IW) = W_g^T x_g by SGEMM into the
 *   workspace, then col2im scatter-adds cols into y, parallel over output
 *   channels (each channel only reads its own rows of cols), then bias and
 *   activation. */
#include "act_vec.h"
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <stdatomic.h>

#include <string.h>

/* Canonical 3-D geometry of a node. */
typedef struct geom3 {
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
    int64_t in_sz, out_sz, k_sz;
} geom3;

static void make_geom(const ert_conv_params *p, const ert_tview *x, const ert_tview *y, geom3 *g) {
    int off = 3 - p->nsp;
    for (int i = 0; i < 3; i++) {
        int s = i - off;
        bool real = s >= 0;
        g->in[i] = real ? x->dims[2 + s] : 1;
        g->out[i] = real ? y->dims[2 + s] : 1;
        g->k[i] = real ? p->kernel[s] : 1;
        g->s[i] = real ? p->stride[s] : 1;
        g->d[i] = real ? p->dilation[s] : 1;
        g->pb[i] = real ? p->pad_begin[s] : 0;
    }
    g->in_sz = g->in[0] * g->in[1] * g->in[2];
    g->out_sz = g->out[0] * g->out[1] * g->out[2];
    g->k_sz = g->k[0] * g->k[1] * g->k[2];
}

static int64_t floor_div(int64_t a, int64_t b) { /* b > 0 */
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* ------------------------------------------------------------ depthwise */

typedef struct dw_job {
    const geom3 *g;
    const float *x, *w, *b, *res, *scale;
    float *y;
    int64_t C, M, mult;      /* input channels, output channels, M / group */
    const ert_act_params *act;
} dw_job;

/* Each task is one (image, output channel) plane. */
static void dw_run(void *arg, int64_t t0, int64_t t1) {
    const dw_job *j = arg;
    const geom3 *g = j->g;
    const int64_t OW = g->out[2], W = g->in[2];
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / j->M, m = t % j->M, c = m / j->mult;
        const float *xc = j->x + (n * j->C + c) * g->in_sz;
        const float *wm = j->w + m * g->k_sz;
        float *ym = j->y + t * g->out_sz;
        float bv = j->b ? j->b[m] : 0.0f, sc = j->scale ? j->scale[m] : 1.0f;
        for (int64_t od = 0; od < g->out[0]; od++) {
            for (int64_t oh = 0; oh < g->out[1]; oh++) {
                float *yr = ym + (od * g->out[1] + oh) * OW;
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = bv;
                for (int64_t kd = 0; kd < g->k[0]; kd++) {
                    int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
                    if (id < 0 || id >= g->in[0]) continue;
                    for (int64_t kh = 0; kh < g->k[1]; kh++) {
                        int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
                        if (ih < 0 || ih >= g->in[1]) continue;
                        const float *xr = xc + (id * g->in[1] + ih) * W;
                        for (int64_t kw = 0; kw < g->k[2]; kw++) {
                            float wv = wm[(kd * g->k[1] + kh) * g->k[2] + kw] * sc;
                            /* iw = ow*s + off must lie in [0, W) */
                            int64_t off = kw * g->d[2] - g->pb[2], s = g->s[2];
                            int64_t lo = off >= 0 ? 0 : floor_div(-off + s - 1, s);
                            int64_t hi = floor_div(W - 1 - off, s) + 1;
                            if (hi > OW) hi = OW;
                            if (s == 1) {
                                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow + off];
                            } else {
                                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * s + off];
                            }
                        }
                    }
                }
                if (j->res) {
                    const float *rr = j->res + t * g->out_sz + (od * g->out[1] + oh) * OW;
                    for (int64_t ow = 0; ow < OW; ow++) yr[ow] += rr[ow];
                }
                if (j->act) ert_cpu_act_inplace(yr, OW, j->act);
            }
        }
    }
}

/* ------------------------------------------------------------ padded-plane im2col */

#define PADG_MG_MAX 64          /* wider groups: the GEMM dwarfs im2col, and the extra columns cost more */
#define PADG_MAX_BYTES (64u << 20)

typedef struct padg {
    int64_t Hq, Wq, Np, K;      /* phase plane rows and row width, GEMM columns OH*Wq, K = Cg*KH*KW */
    size_t off_b, p_b, c_b, total; /* bytes: row offsets, phase planes (+ slack), C', total with one SGEMM slot */
} padg;

/* wide: any group width (grpconv.c's path, which has no SGEMM panels to pay the extra columns with) */
static bool padg_of(const ert_kargs *a, const geom3 *g, padg *q, bool wide) {
    const ert_conv_params *p = &a->params->conv;
    if (a->n_in < 2 || a->in[0].dtype != ERT_DTYPE_F32 || a->in[1].dtype != ERT_DTYPE_F32 || p->has_in_scale)
        return false;
    const int64_t G = p->group, C = a->in[0].dims[1], M = a->out[0].dims[1];
    if (g->in[0] != 1 || g->out[0] != 1 || g->k[0] != 1 || (C / G == 1 && G > 1)) return false;
    const int64_t Cg = C / G, Mg = M / G, sh = g->s[1], sw = g->s[2];
    q->Wq = g->out[2] + (g->k[2] - 1) * g->d[2] / sw;
    q->Hq = g->out[1] + (g->k[1] - 1) * g->d[1] / sh;
    /* extra columns cost Mg * (Wq - OW) MACs per row and tap: worth it for narrow groups, or when none */
    if (!wide && !(G > 1 && Mg <= PADG_MG_MAX) && q->Wq != g->out[2]) return false;
    q->Np = g->out[1] * q->Wq;
    q->K = Cg * g->k_sz;
    const int64_t slack = (g->k[2] - 1) * g->d[2] / sw + 1; /* the last row's extra columns read past the planes */
    const double est = (double)Cg * sh * sw * q->Hq * q->Wq + (double)Mg * q->Np + (double)q->K * 2;
    if (est * 4 > PADG_MAX_BYTES) return false;
    q->off_b = ert_align_up((size_t)q->K * sizeof(int64_t), 64);
    q->p_b = ert_align_up((size_t)(Cg * sh * sw * q->Hq * q->Wq + slack) * sizeof(float), 64);
    q->c_b = q->Wq == g->out[2] ? 0 : ert_align_up((size_t)(Mg * q->Np) * sizeof(float), 64); /* 0: straight into y */
    size_t gws = ert_cpu_sgemm_workspace(Mg, q->Np, q->K, 1);
    if (gws == SIZE_MAX || gws > PADG_MAX_BYTES) return false;
    q->total = q->off_b + q->p_b + q->c_b + gws;
    return true;
}

/* One worker slot's bytes of the side-by-side groups: its planes, C' and one SGEMM slot. */
static size_t padg_slot_bytes(const padg *q, int64_t Mg) {
    return q->p_b + q->c_b + ert_align_up(ert_cpu_sgemm_slot_bytes(Mg, q->Np, q->K), 64);
}

/* Worker slots for the (image, group) tasks side by side, or 0 for one task
 * at a time with each SGEMM threaded: side by side where the groups are
 * many and each SGEMM too small to split (RegNetY's 14x14 and 7x7 stages,
 * 20 and 48 groups of 16 channels: 0.9x at 2 threads the other way). */
static int64_t padg_side(const ert_kargs *a, const padg *q, int64_t N, int64_t G, int64_t Mg) {
    const int64_t n_thr = a->n_threads > 0 ? a->n_threads : ert_threadpool_size(a->pool);
    if (n_thr < 2 || G < 2 || N * G < n_thr) return 0;
    if (N * G < 2 * n_thr && ert_cpu_sgemm_tasks(Mg, q->Np, n_thr) >= 2 * n_thr) return 0;
    return n_thr;
}

typedef struct padg_out_job {
    const geom3 *g;
    const padg *q;
    const float *cp, *b, *res; /* C' (Mg, Np); this group's bias and residual rows, or NULL */
    float *y;                  /* this group's output rows (Mg, OH*OW) */
    const ert_act_params *act;
} padg_out_job;

/* C' row m -> y row m, dropping each output row's Wq - OW extra columns,
 * + bias + residual, activation (the SGEMM epilogue's order) */
static void padg_out_run(void *arg, int64_t m0, int64_t m1) {
    const padg_out_job *j = arg;
    const int64_t OH = j->g->out[1], OW = j->g->out[2], Wp = j->q->Wq, osz = j->g->out_sz;
    for (int64_t m = m0; m < m1; m++) {
        float *cr = (float *)j->cp + m * j->q->Np;
        float *ym = j->y + m * osz;
        const float *bm = j->b ? j->b + m : NULL;
        if (!j->res) { /* one pass over the whole row, extra columns included (finite: sums of zeros and x) */
            if (bm || j->act) ert_cpu_epilogue_row(cr, j->q->Np, bm, NULL, j->act);
            for (int64_t oh = 0; oh < OH; oh++) memcpy(ym + oh * OW, cr + oh * Wp, (size_t)OW * sizeof(float));
            continue;
        }
        /* the residual may be y itself (planned in place): finish in C', then copy */
        for (int64_t oh = 0; oh < OH; oh++) {
            ert_cpu_epilogue_row(cr + oh * Wp, OW, bm, j->res + m * osz + oh * OW, j->act);
            memcpy(ym + oh * OW, cr + oh * Wp, (size_t)OW * sizeof(float));
        }
    }
}

/* Rows [r0, r0 + nr) of the phase planes of one group's input xg (Cg, H,
 * W) into P, whose planes are Hp rows apart (grpconv.c's ert_cpu_gc_fill,
 * copy isa): only the columns that hold image pixels are written (the
 * padding columns are the same for every row: zeroed once by the caller);
 * pad_rows: the rows of the padding zeroed too (a slot whose rows hold
 * other rows from task to task). Row phases no tap reads are skipped. */
static void planes_fill(const geom3 *g, const padg *q, int64_t Cg, const float *xg, float *P, int64_t Hp, int64_t r0,
                        int64_t nr, bool pad_rows, int isa) {
    ert_gc_fill f = {.x = xg, .P = P, .Cg = Cg, .H = g->in[1], .W = g->in[2], .Wq = q->Wq, .Hp = Hp,
                     .sh = g->s[1], .sw = g->s[2], .ph = g->pb[1], .pw = g->pb[2], .r0 = r0, .nr = nr,
                     .pad_rows = pad_rows};
    for (int64_t i = 0; i < g->k[1]; i++) f.used_r |= f.sh > 64 ? ~0ull : 1ull << (i * g->d[1] % f.sh);
    ert_cpu_gc_fill(&f, isa);
}

/* One (image, group) of the padded-plane path: its phase planes into P
 * (zeroed already when *zeroed: the padding is the same for every image and
 * group, so each only copies its rows in), the SGEMM on pool (NULL: this
 * thread) with scratch gws, then C' into y where C' is not y. */
static ert_status padg_one(const ert_kargs *a, const geom3 *g, const padg *q, size_t pk_stride, const int64_t *off,
                           int64_t n, int64_t gi, float *P, float *Cp, void *gws, size_t gws_bytes,
                           struct ert_threadpool *pool, bool *zeroed) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *X = &a->in[0];
    const float *b = a->n_in > 2 ? a->in[2].data : NULL;
    const float *res = a->n_in > 3 ? a->in[3].data : NULL;
    const float *scale = p->has_scale && a->n_in > 4 ? a->in[4].data : NULL;
    const int64_t C = X->dims[1], M = a->out[0].dims[1], G = p->group;
    const int64_t Cg = C / G, Mg = M / G, Hq = q->Hq, Wq = q->Wq, sh = g->s[1], sw = g->s[2];
    const ert_act_params *act = p->act.kind != ERT_ACT_NONE ? &p->act : NULL;
    const int64_t n_pl = Cg * sh * sw, slack = (g->k[2] - 1) * g->d[2] / sw + 1;
    if (!*zeroed) {
        memset(P, 0, (size_t)(n_pl * Hq * Wq + slack) * sizeof(float));
        *zeroed = true;
    }
    const float *xg = (const float *)X->data + (n * C + gi * Cg) * g->in_sz;
    planes_fill(g, q, Cg, xg, P, Hq, 0, Hq, false, ert_cpu_gc_isa(a->choice));
    const int64_t yoff = (n * M + gi * Mg) * g->out_sz;
    const bool direct = Wq == g->out[2]; /* no extra columns: C' is y, the epilogue the SGEMM's */
    ert_sgemm_args ga = {
        .M = Mg, .N = q->Np, .K = q->K,
        .a = (const float *)a->in[1].data + gi * Mg * q->K, .a_rs = q->K, .a_cs = 1, .alpha = 1.0f,
        .a_row_scale = scale ? scale + gi * Mg : NULL,
        .a_packed = pk_stride ? (const char *)a->packed + (size_t)gi * pk_stride : NULL,
        .b = P, .b_cs = 1, .b_row_off = off,
        .c = direct ? (float *)a->out[0].data + yoff : Cp, .ldc = q->Np,
        /* bias and activation in the kernel's store epilogue also into C' when no
         * residual follows (the copy-out then only copies): a second pass over C'
         * was most of padg_out_run (RegNetY-800MF, callgrind) */
        .bias_row = (direct || !res) && b ? b + gi * Mg : NULL,
        .residual = direct && res ? res + yoff : NULL,
        .act = direct || !res ? act : NULL, .choice = a->choice,
    };
    ert_status st = ert_cpu_sgemm(&ga, gws, gws_bytes, pool);
    if (st || direct) return st;
    padg_out_job j = {g, q, Cp, res && b ? b + gi * Mg : NULL, res ? res + yoff : NULL,
                      (float *)a->out[0].data + yoff, res ? act : NULL};
    if (pool) ert_parallel_for(pool, Mg, 1, padg_out_run, &j);
    else padg_out_run(&j, 0, Mg);
    return ERT_OK;
}

typedef struct padg_side_job {
    const ert_kargs *a;
    const geom3 *g;
    const padg *q;
    size_t pk_stride, slot_bytes, gws_bytes;
    const int64_t *off;
    char *slots;
    int64_t n_tasks, G;
    atomic_llong next;
    atomic_int err;
} padg_side_job;

static void padg_side_run(void *arg, int64_t s0, int64_t s1) {
    padg_side_job *j = arg;
    for (int64_t s = s0; s < s1; s++) {
        char *sl = j->slots + (size_t)s * j->slot_bytes;
        float *P = (float *)sl, *Cp = (float *)(sl + j->q->p_b);
        bool zeroed = false;
        for (int64_t t; (t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n_tasks;) {
            ert_status st = padg_one(j->a, j->g, j->q, j->pk_stride, j->off, t / j->G, t % j->G, P, Cp,
                                     sl + j->q->p_b + j->q->c_b, j->gws_bytes, NULL, &zeroed);
            if (st) atomic_store(&j->err, (int)st);
        }
    }
}

/* The padded-plane path (see the top of the file); the caller checked padg_of and the workspace. */
static ert_status conv_padg(const ert_kargs *a, const geom3 *g, const padg *q, size_t pk_stride) {
    const ert_conv_params *p = &a->params->conv;
    const int64_t N = a->in[0].dims[0], G = p->group, Mg = a->out[0].dims[1] / G;
    const int64_t KH = g->k[1], KW = g->k[2], sh = g->s[1], sw = g->s[2];
    char *ws = a->workspace;
    int64_t *off = (int64_t *)ws;
    for (int64_t k = 0; k < q->K; k++) { /* tap (kh, kw) of channel c: phase plane, then the shift */
        const int64_t c = k / (KH * KW), i = k / KW % KH * g->d[1], j = k % KW * g->d[2];
        off[k] = (((c * sh + i % sh) * sw + j % sw) * q->Hq + i / sh) * q->Wq + j / sw;
    }
    const int64_t side = padg_side(a, q, N, G, Mg);
    const size_t sb = padg_slot_bytes(q, Mg);
    if (side && a->workspace_bytes >= q->off_b + (size_t)side * sb) {
        padg_side_job j = {.a = a, .g = g, .q = q, .pk_stride = pk_stride, .slot_bytes = sb,
                           .gws_bytes = sb - q->p_b - q->c_b, .off = off, .slots = ws + q->off_b,
                           .n_tasks = N * G, .G = G};
        atomic_init(&j.next, 0);
        atomic_init(&j.err, ERT_OK);
        ert_parallel_for(a->pool, side, 1, padg_side_run, &j);
        return (ert_status)atomic_load(&j.err);
    }
    float *P = (float *)(ws + q->off_b), *Cp = (float *)(ws + q->off_b + q->p_b);
    void *gws = ws + q->off_b + q->p_b + q->c_b;
    const size_t gws_bytes = a->workspace_bytes - (q->off_b + q->p_b + q->c_b);
    bool zeroed = false;
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < G; gi++) {
            ert_status st = padg_one(a, g, q, pk_stride, off, n, gi, P, Cp, gws, gws_bytes, a->pool, &zeroed);
            if (st) return st;
        }
    return ERT_OK;
}

/* ------------------------------------------------------------ grouped convs by grpconv.c */

/* Floats of phase planes per task at most (grpconv.c's path): tasks take
 * chunks of output rows, each filling only its rows of the planes (plus
 * the taps' halo), so a 56x56 stride-2 conv's 0.8 MiB of planes per group
 * is not streamed from L2 by every tile. */
#define GC_TASK_FLOATS (32 << 10)

/* Ungrouped convs grpconv.c takes too (AVX-512): K = C*KH*KW at most and output pixels at least. The
 * SGEMM's im2col panels cost a copy of every B float per call, and a 3x3 stem (K = 27) gives each B panel
 * 27 k steps of FMAs: MobileNetV2's and RegNetY's 3 -> 32 stride-2 stems, YOLOv8n's 16 -> 32 at 320x320. */
#define GC_DENSE_KMAX 160
#define GC_DENSE_PMIN 1024

typedef struct gcg {
    int64_t rows, Hc, n_rc;  /* output rows per task, plane rows a slot holds, tasks per (image, group) */
    int64_t slots;           /* worker slots (threads, fewer where tasks are fewer) */
    size_t off_b, slot_b;    /* bytes: the row offsets, one slot's planes with ERT_GC_SLACK */
} gcg;

/* Whether grpconv.c takes a (a grouped conv on the padded-plane path, no
 * residual, a kernel copy under the cap), and its task geometry. */
static bool gc_of(const ert_kargs *a, const geom3 *g, const padg *q, gcg *r) {
    const ert_conv_params *p = &a->params->conv;
    const int64_t G = p->group, N = a->in[0].dims[0], OH = g->out[1];
    bool pointwise = g->k_sz == 1; /* conv.c's SGEMM reads x in place there */
    for (int i = 0; i < 3; i++)
        if (g->s[i] != 1 || g->pb[i] != 0 || g->in[i] != g->out[i]) pointwise = false;
    if (pointwise || p->has_residual || !ert_cpu_gc_isa(a->choice)) return false;
    /* one group: small K on large maps, AVX-512, whole 16-channel blocks (gc_dense) */
    if (G < 2 && !(ert_cpu_gc_isa(a->choice) == 2 && q->K <= GC_DENSE_KMAX && a->out[0].dims[1] % 16 == 0 &&
                   g->out_sz >= GC_DENSE_PMIN && !ert_cpu_pw_packed_bytes(a)))
        return false;
    const int64_t n_pl = a->in[0].dims[1] / G * g->s[1] * g->s[2], hr = (g->k[1] - 1) * g->d[1] / g->s[1];
    const int64_t n_thr = a->n_threads > 0 ? a->n_threads : ert_threadpool_size(a->pool);
    int64_t rows = GC_TASK_FLOATS / (n_pl * q->Wq) - hr;
    rows = rows < 1 ? 1 : rows > OH ? OH : rows;
    while (n_thr > 1 && rows > 1 && N * G * ((OH + rows - 1) / rows) < 4 * n_thr) rows = (rows + 1) / 2;
    r->rows = rows;
    r->n_rc = (OH + rows - 1) / rows;
    r->Hc = rows + hr < q->Hq ? rows + hr : q->Hq;
    r->slots = n_thr < N * G * r->n_rc ? n_thr : N * G * r->n_rc;
    r->off_b = ert_align_up((size_t)q->K * sizeof(int64_t), 64);
    r->slot_b = ert_align_up((size_t)(n_pl * r->Hc * q->Wq + ERT_GC_SLACK) * sizeof(float), 64);
    return true;
}

typedef struct gc_job {
    const ert_kargs *a;
    const geom3 *g;
    const padg *q;
    const gcg *r;
    const int64_t *off;
    const float *wp;
    int64_t ldw, n_tasks;
    char *slots;
    int isa;
    atomic_llong next;
} gc_job;

/* Tasks (image, group, chunk of output rows), claimed by worker slots: the
 * slot's planes get the chunk's rows (borders zeroed), then grpconv.c. */
static void gc_run(void *arg, int64_t s0, int64_t s1) {
    gc_job *j = arg;
    const ert_kargs *a = j->a;
    const geom3 *g = j->g;
    const gcg *r = j->r;
    const int64_t C = a->in[0].dims[1], M = a->out[0].dims[1], G = a->params->conv.group, Cg = C / G, Mg = M / G;
    const int64_t OH = g->out[1], OW = g->out[2], Wq = j->q->Wq, n_pl = Cg * g->s[1] * g->s[2];
    const float *b = a->n_in > 2 ? a->in[2].data : NULL;
    const ert_act_params *act = a->params->conv.act.kind != ERT_ACT_NONE ? &a->params->conv.act : NULL;
    for (int64_t s = s0; s < s1; s++) {
        float *P = (float *)(j->slots + (size_t)s * r->slot_b);
        /* the padding columns (and the slack the last vectors read and drop) stay zero from here on */
        memset(P, 0, (size_t)(n_pl * r->Hc * Wq + ERT_GC_SLACK) * sizeof(float));
        for (int64_t t; (t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n_tasks;) {
            const int64_t n = t / (G * r->n_rc), gi = t / r->n_rc % G, oh0 = t % r->n_rc * r->rows;
            const int64_t oh1 = oh0 + r->rows < OH ? oh0 + r->rows : OH;
            const float *xg = (const float *)a->in[0].data + (n * C + gi * Cg) * g->in_sz;
            planes_fill(g, j->q, Cg, xg, P, r->Hc, oh0, r->Hc < j->q->Hq - oh0 ? r->Hc : j->q->Hq - oh0, true, j->isa);
            const ert_gc_cols c = {
                .P = P, .off = j->off, .wp = j->wp + gi * j->q->K * j->ldw, .bias = b ? b + gi * Mg : NULL,
                .y = (float *)a->out[0].data + (n * M + gi * Mg) * g->out_sz + oh0 * OW,
                .K = j->q->K, .Mg = Mg, .ldw = j->ldw, .Wq = Wq, .OW = OW, .ldy = g->out_sz, .act = act,
            };
            ert_cpu_gc_cols_run(&c, 0, (oh1 - oh0 - 1) * Wq + OW, j->isa);
        }
    }
}

/* grpconv.c's path where gc_of takes a, its packed filter is there and the
 * workspace holds a slot; false (y untouched) otherwise. */
static bool conv_gc(const ert_kargs *a, const geom3 *g, const padg *q) {
    gcg r;
    const int64_t G = a->params->conv.group, Mg = a->out[0].dims[1] / G;
    int64_t ldw;
    const float *wp = gc_of(a, g, q, &r) ? ert_cpu_gc_packed(a->packed, a->packed_bytes, G, Mg, q->K, &ldw) : NULL;
    if (!wp || a->workspace_bytes < r.off_b + r.slot_b) return false;
    const int64_t fit = (int64_t)((a->workspace_bytes - r.off_b) / r.slot_b);
    if (r.slots > fit) r.slots = fit;
    const int64_t KH = g->k[1], KW = g->k[2], sh = g->s[1], sw = g->s[2];
    int64_t *off = a->workspace;
    for (int64_t k = 0; k < q->K; k++) { /* tap (kh, kw) of channel c: its phase plane (Hc rows), then the shift */
        const int64_t c = k / (KH * KW), i = k / KW % KH * g->d[1], jj = k % KW * g->d[2];
        off[k] = (((c * sh + i % sh) * sw + jj % sw) * r.Hc + i / sh) * q->Wq + jj / sw;
    }
    gc_job j = {.a = a, .g = g, .q = q, .r = &r, .off = off, .wp = wp, .ldw = ldw,
                .n_tasks = a->in[0].dims[0] * G * r.n_rc, .slots = (char *)a->workspace + r.off_b,
                .isa = ert_cpu_gc_isa(a->choice)};
    atomic_init(&j.next, 0);
    ert_parallel_for(a->pool, r.slots, 1, gc_run, &j);
    return true;
}

/* ------------------------------------------------------------ pointwise convs by grpconv.c */

/* Pointwise (1x1, stride 1, no padding) one-group convs on large maps with
 * few input channels, on AVX-512: grpconv.c's kernel with x read in place as its
 * "planes" (row k = input channel k, no gaps), the pixels its vectors and
 * the output channels broadcast, each tile 16 pixels x 16 channels stored
 * as 16 whole rows. pwconv.c's tile (4 pixels x up to 64 channels) pays a
 * broadcast per pixel and k and a transpose into 4-pixel pieces of every
 * channel row per tile, which at K = 16..64 is most of its work
 * (MobileNetV2's 16 -> 96 at 112x112: 0.59 ms, onnxruntime 0.49). */
#define PV_PMIN 1024 /* pixels of a plane at least (32x32): fewer leave a vector partly empty per task */
#define PV_KMAX 64   /* input channels at most */
#define PV_CHUNK 512 /* pixels per task */

static bool pv_takes(const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    if (a->op != ERT_OP_CONV || a->n_in < 2 || a->n_out < 1 || p->group != 1 || p->has_in_scale) return false;
    /* AVX-512 only: the AVX2 copy's tile (4 channels x 24 pixels) ran more instructions than pwconv.c's
     * (callgrind: MobileNetV2 +7.6%, EfficientNet-B0 +2.4%) */
    if (a->in[0].dtype != ERT_DTYPE_F32 || a->in[1].dtype != ERT_DTYPE_F32 || ert_cpu_gc_isa(a->choice) != 2)
        return false;
    if (p->has_scale && (a->n_in < 5 || !a->in[4].data)) return false;
    const ert_tview *X = &a->in[0], *Y = &a->out[0];
    int64_t P = 1;
    for (int i = 0; i < p->nsp; i++) {
        if (p->kernel[i] != 1 || p->stride[i] != 1 || p->pad_begin[i] != 0 || X->dims[2 + i] != Y->dims[2 + i])
            return false;
        P *= Y->dims[2 + i];
    }
    /* output channels in whole 16-channel blocks (else a last block's lanes are lost: MobileNetV3-L's 24 and
     * 72, +10%), and not in 64s, which pwconv.c's widest tile takes as well (RegNetY's 32 -> 64 at 112x112:
     * 0.64 ms there, 0.66 here) */
    const int64_t M = Y->dims[1];
    return P >= PV_PMIN && X->dims[1] <= PV_KMAX && M % 16 == 0 && M % 64 != 0;
}

typedef struct pv_job {
    const ert_kargs *a;
    const float *wp;
    int64_t ldw, P, K, M, n_pc, n_tasks;
    atomic_llong next;
} pv_job;

static void pv_run(void *arg, int64_t s0, int64_t s1) {
    pv_job *j = arg;
    const ert_kargs *a = j->a;
    const ert_act_params *act = a->params->conv.act.kind != ERT_ACT_NONE ? &a->params->conv.act : NULL;
    const float *b = a->n_in > 2 ? a->in[2].data : NULL, *res = a->n_in > 3 ? a->in[3].data : NULL;
    int64_t off[PV_KMAX];
    for (int64_t k = 0; k < j->K; k++) off[k] = k * j->P;
    for (int64_t s = s0; s < s1; s++)
        for (int64_t t; (t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n_tasks;) {
            const int64_t n = t / j->n_pc, p0 = t % j->n_pc * PV_CHUNK, p1 = p0 + PV_CHUNK < j->P ? p0 + PV_CHUNK : j->P;
            const int64_t yo = n * j->M * j->P;
            const ert_gc_cols c = {
                .P = (const float *)a->in[0].data + n * j->K * j->P, .off = off, .wp = j->wp, .bias = b,
                .y = (float *)a->out[0].data + yo, .res = res ? res + yo : NULL,
                .K = j->K, .Mg = j->M, .ldw = j->ldw, .Wq = j->P, .OW = j->P, .ldy = j->P, .act = act,
            };
            ert_cpu_gc_cols_run(&c, p0, p1, ert_cpu_gc_isa(a->choice));
        }
}

/* false (y untouched) where the packed filter is not there: pwconv.c or the SGEMM then */
static bool conv_pv(const ert_kargs *a) {
    const int64_t M = a->out[0].dims[1], K = a->in[0].dims[1], N = a->in[0].dims[0];
    int64_t ldw;
    const float *wp = ert_cpu_gc_packed(a->packed, a->packed_bytes, 1, M, K, &ldw);
    if (!wp) return false;
    pv_job j = {.a = a, .wp = wp, .ldw = ldw, .P = a->out[0].n_elems / (N * M), .K = K, .M = M};
    j.n_pc = (j.P + PV_CHUNK - 1) / PV_CHUNK;
    j.n_tasks = N * j.n_pc;
    atomic_init(&j.next, 0);
    const int64_t n_thr = ert_threadpool_size(a->pool);
    ert_parallel_for(a->pool, n_thr < j.n_tasks ? n_thr : j.n_tasks, 1, pv_run, &j);
    return true;
}

size_t ert_cpu_conv_padg_workspace(const ert_kargs *a) {
    geom3 g;
    padg q;
    gcg r;
    size_t ws = 0;
    if (a->op != ERT_OP_CONV || a->n_in < 2 || a->n_out < 1 || ert_cpu_wino_chosen(a)) return 0;
    if (ert_cpu_pw_packed_bytes(a)) return 0; /* pwconv.c takes it (1x1 stride 2, group 1) */
    make_geom(&a->params->conv, &a->in[0], &a->out[0], &g);
    if (padg_of(a, &g, &q, false)) {
        /* room for the groups side by side, one slot per thread, where padg_side picks that */
        const int64_t N = a->in[0].dims[0], G = a->params->conv.group, Mg = a->out[0].dims[1] / G;
        const int64_t side = padg_side(a, &q, N, G, Mg);
        const size_t sides = side ? q.off_b + (size_t)side * padg_slot_bytes(&q, Mg) : 0;
        ws = sides > q.total ? sides : q.total;
    }
    if (padg_of(a, &g, &q, true) && gc_of(a, &g, &q, &r) && r.off_b + (size_t)r.slots * r.slot_b > ws)
        ws = r.off_b + (size_t)r.slots * r.slot_b;
    return ws;
}

/* ------------------------------------------------------------ Conv */

/* Packed filters (session create): per group, W_g as the SGEMM's A operand
 * (cpu_gemm.h), groups pk_stride bytes apart. 0 for the depthwise kernels,
 * which read the filter as it is. */
static size_t conv_pk_stride(const ert_kargs *a, int64_t *G, int64_t *Mg, int64_t *Kg) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *X = &a->in[0], *Wt = &a->in[1];
    if (a->n_in < 2 || X->dtype != ERT_DTYPE_F32 || Wt->dtype != ERT_DTYPE_F32 || p->group < 1) return 0;
    int64_t k_sz = 1;
    for (int i = 0; i < p->nsp; i++) k_sz *= p->kernel[i];
    *G = p->group;
    *Mg = a->out[0].dims[1] / *G;
    *Kg = X->dims[1] / *G * k_sz;
    if (*Kg == k_sz && *G > 1) return 0; /* depthwise */
    size_t b = ert_cpu_sgemm_packed_bytes(*Mg, 1, *Kg, false);
    return b == SIZE_MAX ? SIZE_MAX : ert_align_up(b, 64);
}

/* Whether grpconv.c takes a (by shapes, at create): then a->packed is its filter, not the SGEMM's. */
static bool gc_takes(const ert_kargs *a) {
    geom3 g;
    padg q;
    gcg r;
    if (a->op != ERT_OP_CONV || a->n_in < 2 || a->n_out < 1 || ert_cpu_wino_chosen(a)) return false;
    make_geom(&a->params->conv, &a->in[0], &a->out[0], &g);
    return padg_of(a, &g, &q, true) && gc_of(a, &g, &q, &r);
}

size_t ert_cpu_conv_packed_bytes(const ert_kargs *a) {
    if (ert_cpu_wino_chosen(a)) return ert_cpu_wino_packed_bytes(a); /* its transformed filter instead */
    if (pv_takes(a)) return ert_cpu_gc_packed_bytes(1, a->out[0].dims[1], a->in[0].dims[1]);
    const size_t pw = ert_cpu_pw_packed_bytes(a); /* pwconv.c's panels instead */
    if (pw) return pw;
    int64_t G, Mg, Kg;
    size_t s = conv_pk_stride(a, &G, &Mg, &Kg), tot;
    if (s == 0) return 0;
    if (gc_takes(a)) return ert_cpu_gc_packed_bytes(G, Mg, Kg);
    return s == SIZE_MAX || ert_mul_ovf(s, (size_t)G, &tot) ? SIZE_MAX : tot;
}

ert_status ert_cpu_conv_pack(const ert_kargs *a) {
    if (ert_cpu_wino_chosen(a)) return a->packed ? ert_cpu_wino_pack(a) : ERT_OK;
    if (pv_takes(a))
        return a->packed ? ert_cpu_gc_pack(a->in[1].data, a->params->conv.has_scale ? a->in[4].data : NULL, 1,
                                           a->out[0].dims[1], a->in[0].dims[1], a->packed, a->packed_bytes)
                         : ERT_OK;
    if (ert_cpu_pw_packed_bytes(a)) return a->packed ? ert_cpu_pw_pack(a) : ERT_OK;
    int64_t G, Mg, Kg;
    size_t s = conv_pk_stride(a, &G, &Mg, &Kg);
    if (s == 0 || !a->packed) return ERT_OK;
    const ert_conv_params *p = &a->params->conv;
    const float *scale = p->has_scale && a->n_in > 4 ? a->in[4].data : NULL;
    if (gc_takes(a)) return ert_cpu_gc_pack(a->in[1].data, scale, G, Mg, Kg, a->packed, a->packed_bytes);
    for (int64_t gi = 0; gi < G; gi++) {
        ert_sgemm_args ga = {.M = Mg, .N = 1, .K = Kg, .a = (const float *)a->in[1].data + gi * Mg * Kg,
                             .a_rs = Kg, .a_cs = 1, .alpha = 1.0f, .a_row_scale = scale ? scale + gi * Mg : NULL,
                             .choice = a->choice};
        ert_status st = ert_cpu_sgemm_pack(&ga, false, (char *)a->packed + (size_t)gi * s,
                                           a->packed_bytes - (size_t)gi * s);
        if (st) return st;
    }
    return ERT_OK;
}

ert_status ert_cpu_conv(const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *X = &a->in[0], *Wt = &a->in[1];
    const float *b = a->n_in > 2 ? a->in[2].data : NULL;
    const float *res = a->n_in > 3 ? a->in[3].data : NULL;
    const float *scale = p->has_scale && a->n_in > 4 ? a->in[4].data : NULL;
    const float *in_scale = p->has_in_scale && a->n_in > 5 ? a->in[5].data : NULL; /* (N, C) */
    ert_tview *Y = &a->out[0];
    if (X->dtype != ERT_DTYPE_F32 || Wt->dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    if (p->has_in_scale && (!in_scale || p->group != 1)) return ERT_E_UNSUPPORTED;
    geom3 g;
    make_geom(p, X, Y, &g);
    const int64_t N = X->dims[0], C = X->dims[1], M = Y->dims[1], G = p->group;
    const int64_t Cg = C / G, Mg = M / G, Kg = Cg * g.k_sz;
    const ert_act_params *act = p->act.kind != ERT_ACT_NONE ? &p->act : NULL;
    const float *x = X->data, *w = Wt->data;
    float *y = Y->data;
    if (Cg == 1 && G > 1) {
        if (g.in[0] == 1 && g.k[0] == 1 && g.pb[0] == 0) {
            ert_dw2d d = {x, w, b, res, scale, y, N, C, M, Mg, g.in[1], g.in[2], g.out[1], g.out[2],
                          g.k[1], g.k[2], g.s[1], g.s[2], g.d[1], g.d[2], g.pb[1], g.pb[2], act, a->choice};
            if (ert_cpu_dw2d_fits(&d)) {
                ert_cpu_dw2d(&d, a->pool);
                return ERT_OK;
            }
        }
        dw_job j = {&g, x, w, b, res, scale, y, C, M, Mg, act};
        ert_parallel_for(a->pool, N * M, 1, dw_run, &j);
        return ERT_OK;
    }
    if (ert_cpu_wino_chosen(a)) { /* a->packed, if any, is Winograd's filter: never the SGEMM's A */
        bool done;
        ert_status st = ert_cpu_wino_conv(a, &done);
        if (st || done) return st;
    }
    int64_t pk_G, pk_Mg, pk_Kg;
    const bool gc = gc_takes(a); /* a->packed, if any, is grpconv.c's filter: never the SGEMM's A */
    const size_t pk_stride =
        a->packed && !gc && !ert_cpu_wino_chosen(a) ? conv_pk_stride(a, &pk_G, &pk_Mg, &pk_Kg) : 0;
    bool pointwise = g.k_sz == 1;
    for (int i = 0; i < 3; i++)
        if (g.s[i] != 1 || g.pb[i] != 0 || g.in[i] != g.out[i]) pointwise = false;
    if (pv_takes(a) && conv_pv(a)) return ERT_OK; /* a->packed then grpconv.c's filter */
    if (G == 1) { /* pwconv.c where it takes the conv (a->packed, if any, is then its panels, not the SGEMM's A) */
        bool done;
        ert_status st = ert_cpu_pw_conv(a, &done);
        if (st || done) return st;
    }
    padg pq;
    if (!pointwise && gc && padg_of(a, &g, &pq, true) && conv_gc(a, &g, &pq)) return ERT_OK;
    if (!pointwise && padg_of(a, &g, &pq, false) && a->workspace_bytes >= pq.total)
        return conv_padg(a, &g, &pq, pk_stride);
    ert_conv_geom cg = {.x = NULL};
    for (int i = 0; i < 3; i++) {
        cg.in[i] = g.in[i];
        cg.out[i] = g.out[i];
        cg.kernel[i] = g.k[i];
        cg.stride[i] = g.s[i];
        cg.dilation[i] = g.d[i];
        cg.pad[i] = g.pb[i];
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t gi = 0; gi < G; gi++) {
            const float *xg = x + (n * C + gi * Cg) * g.in_sz;
            int64_t yoff = (n * M + gi * Mg) * g.out_sz;
            cg.x = xg;
            ert_sgemm_args ga = {
                .M = Mg, .N = g.out_sz, .K = Kg,
                .a = w + gi * Mg * Kg, .a_rs = Kg, .a_cs = 1, .alpha = 1.0f,
                .a_row_scale = scale ? scale + gi * Mg : NULL,
                .a_packed = pk_stride ? (const char *)a->packed + (size_t)gi * pk_stride : NULL,
                .b_row_scale = in_scale ? in_scale + n * C + gi * Cg : NULL,
                .b = xg, .b_rs = g.in_sz, .b_cs = 1,
                .conv = pointwise ? NULL : &cg,
                .c = y + yoff, .ldc = g.out_sz,
                .bias_row = b ? b + gi * Mg : NULL,
                .residual = res ? res + yoff : NULL,
                .act = act, .choice = a->choice,
            };
            ert_status st = ert_cpu_sgemm(&ga, a->workspace, a->workspace_bytes, a->pool);
            if (st) return st;
        }
    }
    return ERT_OK;
}

/* ------------------------------------------------------------ ConvTranspose */

typedef struct col2im_job {
    const geom3 *g;          /* in = x spatial, out = y spatial */
    const float *cols;       /* (Mg*k, in_sz) */
    const float *b;          /* bias of this group's channels, or NULL */
    float *y;                /* this image's group channels (Mg, out_sz) */
    const ert_act_params *act;
} col2im_job;

static void col2im_run(void *arg, int64_t m0, int64_t m1) {
    const col2im_job *j = arg;
    const geom3 *g = j->g;
    for (int64_t m = m0; m < m1; m++) {
        float *ym = j->y + m * g->out_sz;
        float bv = j->b ? j->b[m] : 0.0f;
        for (int64_t o = 0; o < g->out_sz; o++) ym[o] = bv;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t tap = (kd * g->k[1] + kh) * g->k[2] + kw;
                    const float *cr = j->cols + (m * g->k_sz + tap) * g->in_sz;
                    for (int64_t id = 0; id < g->in[0]; id++) {
                        int64_t od = id * g->s[0] - g->pb[0] + kd * g->d[0];
                        if (od < 0 || od >= g->out[0]) continue;
                        for (int64_t ih = 0; ih < g->in[1]; ih++) {
                            int64_t oh = ih * g->s[1] - g->pb[1] + kh * g->d[1];
                            if (oh < 0 || oh >= g->out[1]) continue;
                            const float *crow = cr + (id * g->in[1] + ih) * g->in[2];
                            float *yr = ym + (od * g->out[1] + oh) * g->out[2];
                            for (int64_t iw = 0; iw < g->in[2]; iw++) {
                                int64_t ow = iw * g->s[2] - g->pb[2] + kw * g->d[2];
                                if (ow >= 0 && ow < g->out[2]) yr[ow] += crow[iw];
                            }
                        }
                    }
                }
        if (j->act) ert_cpu_act_inplace(ym, g->out_sz, j->act);
    }
}

ert_status ert_cpu_conv_transpose(const ert_kargs *a) {
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *X = &a->in[0], *Wt = &a->in[1];
    const float *b = a->n_in > 2 ? a->in[2].data : NULL;
    ert_tview *Y = &a->out[0];
    if (X->dtype != ERT_DTYPE_F32 || Wt->dtype != ERT_DTYPE_F32) return ERT_E_UNSUPPORTED;
    geom3 g;
    make_geom(p, X, Y, &g);
    const int64_t N = X->dims[0], C = X->dims[1], M = Y->dims[1], G = p->group;
    const int64_t Cg = C / G, Mg = M / G, Kc = Mg * g.k_sz;
    const ert_act_params *act = p->act.kind != ERT_ACT_NONE ? &p->act : NULL;
    /* workspace: cols (Kc, in_sz) then the SGEMM's own scratch */
    size_t cols_bytes = ert_align_up((size_t)Kc * (size_t)g.in_sz * sizeof(float), 64);
    if (a->workspace_bytes < cols_bytes) return ERT_E_INTERNAL;
    float *cols = a->workspace;
    void *gws = (char *)a->workspace + cols_bytes;
    size_t gws_bytes = a->workspace_bytes - cols_bytes;
    const float *x = X->data, *w = Wt->data;
    float *y = Y->data;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t gi = 0; gi < G; gi++) {
            /* W_g is (Cg, Kc) row-major; A = W_g^T */
            ert_sgemm_args ga = {
                .M = Kc, .N = g.in_sz, .K = Cg,
                .a = w + gi * Cg * Kc, .a_rs = 1, .a_cs = Kc, .alpha = 1.0f,
                .b = x + (n * C + gi * Cg) * g.in_sz, .b_rs = g.in_sz, .b_cs = 1,
                .c = cols, .ldc = g.in_sz, .choice = a->choice,
            };
            ert_status st = ert_cpu_sgemm(&ga, gws, gws_bytes, a->pool);
            if (st) return st;
            col2im_job j = {&g, cols, b ? b + gi * Mg : NULL, y + (n * M + gi * Mg) * g.out_sz, act};
            ert_parallel_for(a->pool, Mg, 1, col2im_run, &j);
        }
    }
    return ERT_OK;
}
