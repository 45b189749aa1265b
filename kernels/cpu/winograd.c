/* Winograd F(4x4, 3x3) for 2-D Conv with a 3x3 kernel, stride 1, dilation
 * 1, one group: the fast twin of conv.c's im2col SGEMM (which stays, and
 * takes every conv this file declines).
 *
 * Each 4x4 block of outputs ("tile") of one output channel is
 *   Y = A^T [ sum_c (G g_c G^T) .* (B^T d_c B) ] A
 * with d_c the 6x6 input patch of channel c and g_c the 3x3 filter. The 36
 * elementwise products summed over c are 36 independent GEMMs (xi = one of
 * the 6x6 positions):  C_xi (T x Cout) = V_xi (T x Cin) * U_xi (Cin x Cout),
 * T = tiles of the whole batch, 36 * T * Cin * Cout multiply-adds instead of
 * the direct 9 * 16 * T * Cin * Cout: 4x fewer where the tiles cover the
 * output exactly.
 *
 * Steps of one run (x is (N, Cin, H, W), y is (N, Cout, OH, OW), NCHW):
 *   1. xp (N, Hp, Wp, Cp) = x copied channels-last, zero padded (the conv's
 *      pads, the last partial tile, channels up to Cp, a multiple of the
 *      vector length VL), times the fused squeeze-excitation scale if any;
 *   2. input transform, parallel over tiles: per tile and VL channels,
 *      36 vector loads from xp, B^T d B, V[t][xi][c] (36 * Cp per tile);
 *   3. the 36 GEMMs, each threaded by the SGEMM driver (cpu_gemm.h) on U_xi
 *      packed at session create, into Cm[t][xi][co] (36 * Cop per tile);
 *   4. output transform, parallel over tiles: A^T m A, + bias, + residual,
 *      activation (all VL output channels at a time, in registers), then
 *      each channel's 4x4 block stored into y, clipped at the edges.
 * Workspace (ert_cpu_wino_workspace): max(xp, Cm) (xp is dead when the
 * GEMMs write Cm), V, then the SGEMM's scratch.
 *
 * Accuracy: the transforms' coefficients (1/4, 1/6, 1/24, 2, 4, 5, 8) add
 * rounding: about 1e-6 relative to the output scale for 3x3 filters over
 * hundreds of channels (tests/ops/test_winograd.c checks it against float64).
 * U is computed in double at create.
 *
 * When: the cost rule ert_cpu_wino_pays (below); the choice is made from
 * shapes at create (the packed weights are Winograd's or the GEMM's), never
 * by a timing. Known limits: 2-D only, no groups; the transformed filter
 * takes 4x the original (36 vs 9 floats per pair of channels). */
#include "act_vec.h"
#include "cpu_gemm.h"
#include "cpu_kernels.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define WINO_ON 1
#define VL ERT_AV_N
typedef ert_av8 wv; /* VL floats */
#else
#define WINO_ON 0
#define VL 8
#endif

#define NXI 36 /* 6x6 transformed positions */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Shapes of one Winograd conv. */
typedef struct wino_geom {
    int64_t N, C, H, W, M, OH, OW, pt, pl;
    int64_t TH, TW, T, Tall; /* tiles per column / row / image / batch */
    int64_t Hp, Wp, Cp, Mp;  /* xp's padded dims, channels rounded to VL */
} wino_geom;

/* Eligible: f32 2-D conv, 3x3, stride 1, dilation 1, one group. */
static bool wino_geom_of(const ert_kargs *a, wino_geom *g) {
    if (!WINO_ON || a->op != ERT_OP_CONV || a->n_in < 2 || a->n_out < 1) return false;
    if (a->params->conv.nhwc) return false;
    const ert_conv_params *p = &a->params->conv;
    const ert_tview *X = &a->in[0], *Wt = &a->in[1], *Y = &a->out[0];
    if (X->dtype != ERT_DTYPE_F32 || Wt->dtype != ERT_DTYPE_F32 || p->nsp != 2 || p->group != 1 || X->ndim != 4 ||
        Y->ndim != 4)
        return false;
    for (int i = 0; i < 2; i++)
        if (p->kernel[i] != 3 || p->stride[i] != 1 || p->dilation[i] != 1) return false;
    *g = (wino_geom){.N = X->dims[0], .C = X->dims[1], .H = X->dims[2], .W = X->dims[3], .M = Y->dims[1],
                     .OH = Y->dims[2], .OW = Y->dims[3], .pt = p->pad_begin[0], .pl = p->pad_begin[1]};
    if (g->N < 1 || g->C < 1 || g->M < 1 || g->OH < 1 || g->OW < 1 || g->H < 1 || g->W < 1) return false;
    /* dims are bounded by the element-count checks of prepare: no overflow below */
    g->TH = (g->OH + 3) / 4, g->TW = (g->OW + 3) / 4, g->T = g->TH * g->TW, g->Tall = g->N * g->T;
    g->Hp = 4 * g->TH + 2, g->Wp = 4 * g->TW + 2;
    g->Cp = round_up(g->C, VL), g->Mp = round_up(g->M, VL);
    return true;
}

/* The cost rule, in multiply-add equivalents of one image (or the batch):
 *   direct   = 9 * OH*OW * C*M                    (im2col SGEMM)
 *            + R * 9*C*M*4                        (its packed filter, streamed once)
 *   winograd = 36 * round_up(Tall, 8) * C*M        (the GEMMs, rows padded to the micro-kernel)
 *            + 36 * Tall * (C + M) * 6             (transforms, loads and stores of V, Cm)
 *            + R * 36*C*M*4                        (its filter, 4x larger)
 * R = 2.5 MACs per byte: one core does about 25 FMAs per ns (half an AVX-512
 * core's peak) and streams about 10 bytes per ns from DRAM, and the filters
 * of the layers where this matters (ResNet stage 4: 9.4 MB per conv) do not
 * stay in cache from one run to the next. Winograd is taken when it costs
 * under 0.8 of direct (the transforms run on VL-wide vectors but also
 * shuffle in the output store). With it: ResNet-18's 56x56, 28x28 and 14x14
 * 3x3 convs take Winograd (3-4x fewer MACs), its 7x7 x 512 ones at batch 1
 * do not (4 tiles: the 4x larger filter outweighs 1.5x fewer MACs). */
static bool wino_pays(const wino_geom *g) {
    const double R = 2.5, cm = (double)g->C * (double)g->M;
    double direct = 9.0 * (double)(g->N * g->OH * g->OW) * cm + R * 36.0 * cm;
    double wino = 36.0 * (double)round_up(g->Tall, 8) * cm + 36.0 * (double)g->Tall * (double)(g->C + g->M) * 6.0 +
                  R * 144.0 * cm;
    return wino < 0.8 * direct;
}

bool ert_cpu_wino_chosen(const ert_kargs *a) {
    wino_geom g;
    int mode = ert_kernel_choice_of(a->choice).wino;
    if (mode < 0 || !wino_geom_of(a, &g)) return false;
    return mode > 0 || wino_pays(&g);
}

/* ------------------------------------------------------------ packed filter */

/* a->packed: this header, then 36 SGEMM B operands (U_xi, Cin x Cout) of
 * slot bytes each, at offsets WH + xi * slot */
typedef struct wino_hdr {
    int64_t magic, C, M, slot;
} wino_hdr;
#define WH 64
#define WINO_MAGIC 0x574e4f3434783333LL /* "WNO44x33" */

static size_t wino_slot(int64_t C, int64_t M) {
    size_t b = ert_cpu_sgemm_packed_bytes(1, M, C, true);
    return b == SIZE_MAX ? SIZE_MAX : ert_align_up(b, 64);
}

size_t ert_cpu_wino_packed_bytes(const ert_kargs *a) {
    wino_geom g;
    if (!wino_geom_of(a, &g)) return 0;
    size_t s = wino_slot(g.C, g.M), tot;
    if (s == SIZE_MAX || ert_mul_ovf(s, NXI, &tot) || tot > SIZE_MAX - WH) return SIZE_MAX;
    return tot + WH;
}

/* U_xi = G g G^T for each (co, ci), G = the 6x3 matrix of F(4x4, 3x3). */
static const double WG[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};

ert_status ert_cpu_wino_pack(const ert_kargs *a) {
    wino_geom g;
    if (!a->packed || !wino_geom_of(a, &g)) return ERT_E_INTERNAL;
    const size_t slot = wino_slot(g.C, g.M);
    if (a->packed_bytes < ert_cpu_wino_packed_bytes(a)) return ERT_E_INTERNAL;
    const ert_conv_params *p = &a->params->conv;
    const float *w = a->in[1].data, *scale = p->has_scale && a->n_in > 4 ? a->in[4].data : NULL;
    /* the 36 matrices interleaved, u[(ci * M + co) * 36 + xi]: made once, then
     * each packed through the SGEMM's own packing (strided B) */
    size_t n_u;
    if (ert_mul_ovf((size_t)g.C * (size_t)g.M, NXI * sizeof(float), &n_u)) return ERT_E_NOMEM;
    float *u = malloc(n_u); /* session create only; freed below */
    if (!u) return ERT_E_NOMEM;
    for (int64_t co = 0; co < g.M; co++)
        for (int64_t ci = 0; ci < g.C; ci++) {
            const float *k = w + (co * g.C + ci) * 9;
            const double sc = scale ? scale[co] : 1.0;
            double t[6][3]; /* G g */
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 3; j++)
                    t[i][j] = WG[i][0] * k[j] + WG[i][1] * k[3 + j] + WG[i][2] * k[6 + j];
            float *ud = u + (ci * g.M + co) * NXI;
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 6; j++)
                    ud[i * 6 + j] = (float)(sc * (t[i][0] * WG[j][0] + t[i][1] * WG[j][1] + t[i][2] * WG[j][2]));
        }
    *(wino_hdr *)a->packed = (wino_hdr){WINO_MAGIC, g.C, g.M, (int64_t)slot};
    ert_status st = ERT_OK;
    for (int xi = 0; xi < NXI && st == ERT_OK; xi++) {
        ert_sgemm_args pa = {.M = 1, .N = g.M, .K = g.C, .b = u + xi, .b_rs = g.M * NXI, .b_cs = NXI,
                             .choice = a->choice};
        st = ert_cpu_sgemm_pack(&pa, true, (char *)a->packed + WH + (size_t)xi * slot, slot);
    }
    free(u);
    return st;
}

/* ------------------------------------------------------------ workspace */

typedef struct wino_ws {
    size_t xp_cm, v, gemm, total; /* bytes */
} wino_ws;

static bool wino_ws_of(const wino_geom *g, wino_ws *w) {
    size_t xp, cm, v, t;
    if (ert_mul_ovf((size_t)(g->N * g->Hp * g->Wp), (size_t)g->Cp * sizeof(float), &xp) ||
        ert_mul_ovf((size_t)g->Tall * NXI, (size_t)g->Mp * sizeof(float), &cm) ||
        ert_mul_ovf((size_t)g->Tall * NXI, (size_t)g->Cp * sizeof(float), &v))
        return false;
    w->xp_cm = ert_align_up(xp > cm ? xp : cm, 64);
    w->v = ert_align_up(v, 64);
    w->gemm = ert_cpu_sgemm_workspace(g->Tall, g->M, g->C, 1); /* one worker slot at least */
    if (w->gemm == SIZE_MAX || ert_add_ovf(w->xp_cm, w->v, &t) || ert_add_ovf(t, w->gemm, &w->total)) return false;
    return true;
}

/* Scratch beyond what prepare sized for the im2col SGEMM (session create
 * adds it through the backend's node_workspace): the buffers, plus one SGEMM
 * worker slot; the rest of the workspace (prepare's SGEMM scratch, sized
 * for the session's threads) gives the GEMMs their other slots. */
size_t ert_cpu_wino_workspace(const ert_kargs *a) {
    wino_geom g;
    wino_ws w;
    if (!ert_cpu_wino_chosen(a) || !wino_geom_of(a, &g)) return 0;
    return wino_ws_of(&g, &w) ? w.total : SIZE_MAX;
}

#if WINO_ON
/* ------------------------------------------------------------ run */

typedef struct wino_job {
    const wino_geom *g;
    const float *x, *bias, *res, *in_scale;
    float *y, *xp, *v, *cm;
    const ert_act_params *act;
    bool vec_act;
} wino_job;

/* macros, not functions: returning a 32-byte vector by value would change
 * the ABI between the AVX2 and baseline builds (-Wpsabi) */
#define LDV(v, p) memcpy(&(v), (p), sizeof(v))
#define STV(p, v) memcpy((p), &(v), sizeof(v))

/* step 1: task = one (image, xp row) */
static inline __attribute__((always_inline)) void xp_rows(const wino_job *j, int64_t r0, int64_t r1) {
    const wino_geom *g = j->g;
    const size_t row = (size_t)(g->Wp * g->Cp);
    for (int64_t t = r0; t < r1; t++) {
        int64_t n = t / g->Hp, r = t % g->Hp, ih = r - g->pt;
        float *d = j->xp + (size_t)t * row;
        if (ih < 0 || ih >= g->H) {
            memset(d, 0, row * sizeof(float));
            continue;
        }
        int64_t w0 = g->pl, w1 = g->pl + g->W; /* columns holding the image */
        memset(d, 0, (size_t)(w0 * g->Cp) * sizeof(float));
        memset(d + w1 * g->Cp, 0, (size_t)((g->Wp - w1) * g->Cp) * sizeof(float));
        for (int64_t q = w0; g->Cp > g->C && q < w1; q++) /* channels past C */
            memset(d + q * g->Cp + g->C, 0, (size_t)(g->Cp - g->C) * sizeof(float));
        for (int64_t c = 0; c < g->C; c++) {
            const float *s = j->x + ((n * g->C + c) * g->H + ih) * g->W;
            float *dc = d + w0 * g->Cp + c;
            if (j->in_scale) {
                const float sc = j->in_scale[n * g->C + c];
                for (int64_t iw = 0; iw < g->W; iw++) dc[iw * g->Cp] = sc * s[iw];
            } else {
                for (int64_t iw = 0; iw < g->W; iw++) dc[iw * g->Cp] = s[iw];
            }
        }
    }
}

/* B^T d for one column of 6: r0..r5 -> r0..r5 (in place) */
#define BT6(d0, d1, d2, d3, d4, d5, o0, o1, o2, o3, o4, o5)                                                         \
    do {                                                                                                            \
        wv t4_ = d4 - 4.0f * d2, t3_ = d3 - 4.0f * d1, t2_ = d4 - d2, t1_ = d3 - d1;                                \
        o0 = 4.0f * d0 - 5.0f * d2 + d4;                                                                            \
        o1 = t4_ + t3_;                                                                                             \
        o2 = t4_ - t3_;                                                                                             \
        o3 = t2_ + 2.0f * t1_;                                                                                      \
        o4 = t2_ - 2.0f * t1_;                                                                                      \
        o5 = 4.0f * d1 - 5.0f * d3 + d5;                                                                            \
    } while (0)

/* step 2: task = one tile; all channel blocks */
static inline __attribute__((always_inline)) void in_tiles(const wino_job *j, int64_t t0, int64_t t1) {
    const wino_geom *g = j->g;
    const int64_t Cp = g->Cp;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / g->T, ti = t % g->T, th = ti / g->TW, tw = ti % g->TW;
        const float *s0 = j->xp + ((n * g->Hp + 4 * th) * g->Wp + 4 * tw) * Cp;
        float *vt = j->v + (size_t)t * NXI * Cp;
        for (int64_t c = 0; c < Cp; c += VL) {
            wv m[6][6]; /* m = B^T d, row-wise: column q of d transformed */
            for (int q = 0; q < 6; q++) {
                const float *s = s0 + q * Cp + c;
                const int64_t rs = g->Wp * Cp;
                wv d0, d1, d2, d3, d4, d5;
                LDV(d0, s), LDV(d1, s + rs), LDV(d2, s + 2 * rs), LDV(d3, s + 3 * rs), LDV(d4, s + 4 * rs);
                LDV(d5, s + 5 * rs);
                BT6(d0, d1, d2, d3, d4, d5, m[0][q], m[1][q], m[2][q], m[3][q], m[4][q], m[5][q]);
            }
            for (int i = 0; i < 6; i++) { /* (B^T d) B: the same on each row */
                wv o0, o1, o2, o3, o4, o5;
                BT6(m[i][0], m[i][1], m[i][2], m[i][3], m[i][4], m[i][5], o0, o1, o2, o3, o4, o5);
                float *vd = vt + (i * 6) * Cp + c;
                STV(vd, o0), STV(vd + Cp, o1), STV(vd + 2 * Cp, o2);
                STV(vd + 3 * Cp, o3), STV(vd + 4 * Cp, o4), STV(vd + 5 * Cp, o5);
            }
        }
    }
}

/* A^T m for a column of 6 -> 4 */
#define AT4(m0, m1, m2, m3, m4, m5, o0, o1, o2, o3)                                                                 \
    do {                                                                                                            \
        wv a_ = m1 + m2, b_ = m1 - m2, c_ = m3 + m4, d_ = m3 - m4;                                                  \
        o0 = m0 + a_ + c_;                                                                                          \
        o1 = b_ + 2.0f * d_;                                                                                        \
        o2 = a_ + 4.0f * c_;                                                                                        \
        o3 = b_ + 8.0f * d_ + m5;                                                                                   \
    } while (0)

/* step 4: task = one tile; all output-channel blocks */
static inline __attribute__((always_inline)) void out_tiles(const wino_job *j, int64_t t0, int64_t t1) {
    const wino_geom *g = j->g;
    const int64_t Mp = g->Mp, plane = g->OH * g->OW;
    float buf[16][VL] __attribute__((aligned(64)));
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / g->T, ti = t % g->T, th = ti / g->TW, tw = ti % g->TW;
        int64_t oh0 = 4 * th, ow0 = 4 * tw;
        int64_t nh = g->OH - oh0 < 4 ? g->OH - oh0 : 4, nw = g->OW - ow0 < 4 ? g->OW - ow0 : 4;
        const float *mt = j->cm + (size_t)t * NXI * Mp;
        for (int64_t c = 0; c < g->M; c += VL) {
            const int64_t nl = g->M - c < VL ? g->M - c : VL; /* lanes that are real channels */
            wv s[4][6];
            for (int q = 0; q < 6; q++) {
                const float *p = mt + q * Mp + c;
                wv m0, m1, m2, m3, m4, m5;
                LDV(m0, p), LDV(m1, p + 6 * Mp), LDV(m2, p + 12 * Mp), LDV(m3, p + 18 * Mp), LDV(m4, p + 24 * Mp);
                LDV(m5, p + 30 * Mp);
                AT4(m0, m1, m2, m3, m4, m5, s[0][q], s[1][q], s[2][q], s[3][q]);
            }
            wv bv = {0};
            if (j->bias) {
                float bb[VL] = {0};
                memcpy(bb, j->bias + c, (size_t)nl * sizeof(float));
                LDV(bv, bb);
            }
            for (int i = 0; i < 4; i++) {
                wv o[4];
                AT4(s[i][0], s[i][1], s[i][2], s[i][3], s[i][4], s[i][5], o[0], o[1], o[2], o[3]);
                for (int q = 0; q < 4; q++) {
                    wv r = o[q] + bv;
                    STV(buf[i * 4 + q], r);
                }
            }
            float *yb = j->y + (n * g->M + c) * plane + oh0 * g->OW + ow0;
            if (j->res) { /* residual gathered into the same lanes, before the activation */
                const float *rb = j->res + (yb - j->y);
                for (int64_t l = 0; l < nl; l++)
                    for (int64_t i = 0; i < nh; i++)
                        for (int64_t q = 0; q < nw; q++) buf[i * 4 + q][l] += rb[l * plane + i * g->OW + q];
            }
            if (j->vec_act)
                for (int e = 0; e < 16; e++) {
                    wv v;
                    LDV(v, buf[e]);
                    ert_av_act(&v, j->act->kind, j->act->alpha, j->act->beta);
                    STV(buf[e], v);
                }
            for (int64_t l = 0; l < nl; l++)
                for (int64_t i = 0; i < nh; i++)
                    for (int64_t q = 0; q < nw; q++) yb[l * plane + i * g->OW + q] = buf[i * 4 + q][l];
        }
    }
}

typedef enum { PH_XP, PH_IN, PH_OUT } wino_phase;
typedef struct wino_task {
    const wino_job *j;
    wino_phase ph;
} wino_task;

static inline __attribute__((always_inline)) void wino_body(void *arg, int64_t t0, int64_t t1) {
    const wino_task *k = arg;
    if (k->ph == PH_XP) xp_rows(k->j, t0, t1);
    else if (k->ph == PH_IN) in_tiles(k->j, t0, t1);
    else out_tiles(k->j, t0, t1);
}

static void wino_run_base(void *arg, int64_t t0, int64_t t1) { wino_body(arg, t0, t1); }
#if defined(__x86_64__)
/* 8-wide vectors are one AVX register, two SSE ones: compiled again for AVX2 */
__attribute__((target("avx2,fma"))) static void wino_run_avx2(void *arg, int64_t t0, int64_t t1) {
    wino_body(arg, t0, t1);
}
#endif

/* Non-vectorised activations (act_vec.h lacks them) over each output plane */
typedef struct act_job {
    float *y;
    int64_t plane;
    const ert_act_params *act;
} act_job;
static void act_planes(void *arg, int64_t p0, int64_t p1) {
    const act_job *k = arg;
    for (int64_t p = p0; p < p1; p++) ert_cpu_act_inplace(k->y + p * k->plane, k->plane, k->act);
}

/* NaN/Inf: the transforms mix a whole 6x6 patch into every output of its
 * tile (0 * Inf is NaN), so one non-finite input would turn up to 36 outputs
 * NaN where the direct conv keeps them finite. Such inputs take conv.c's
 * im2col path, whose NaN/Inf positions are the float64 reference's. One pass
 * over x by planes, exponent bits compared as integers (vectorises). */
typedef struct finite_job {
    const uint32_t *x;
    int64_t plane;
    atomic_int bad;
} finite_job;

static void finite_run(void *arg, int64_t p0, int64_t p1) {
    finite_job *k = arg;
    for (int64_t p = p0; p < p1 && !atomic_load_explicit(&k->bad, memory_order_relaxed); p++) {
        const uint32_t *x = k->x + p * k->plane;
        uint32_t hit = 0;
        for (int64_t i = 0; i < k->plane; i++) hit |= (x[i] & 0x7f800000u) == 0x7f800000u;
        if (hit) atomic_store_explicit(&k->bad, 1, memory_order_relaxed);
    }
}

static bool all_finite(const float *x, int64_t planes, int64_t plane, struct ert_threadpool *pool) {
    finite_job k = {(const uint32_t *)(const void *)x, plane, 0};
    ert_parallel_for(pool, planes, 1, finite_run, &k);
    return !atomic_load(&k.bad);
}

/* step 3: the 36 products C_xi = V_xi U_xi */
typedef struct wino_gemms {
    const wino_job *j;
    const wino_geom *g;
    const char *pk; /* U_xi packed, pk_slot bytes apart */
    size_t pk_slot;
    const ert_kernel_choice *choice;
    char *ws; /* the SGEMM scratch: slot s at s * slot_bytes when side by side */
    size_t slot_bytes;
    int64_t chunks; /* row chunks per product (side by side) */
    atomic_int next, err;
} wino_gemms;

static ert_status wino_gemm(const wino_gemms *gm, int xi, int64_t r0, int64_t r1, void *ws, size_t ws_bytes,
                            struct ert_threadpool *pool) {
    const wino_geom *g = gm->g;
    ert_sgemm_args ga = {
        .M = r1 - r0, .N = g->M, .K = g->C,
        .a = gm->j->v + r0 * NXI * g->Cp + xi * g->Cp, .a_rs = NXI * g->Cp, .a_cs = 1, .alpha = 1.0f,
        .b_packed = gm->pk + (size_t)xi * gm->pk_slot,
        .c = gm->j->cm + r0 * NXI * g->Mp + xi * g->Mp, .ldc = NXI * g->Mp, .choice = gm->choice,
    };
    return ert_cpu_sgemm(&ga, ws, ws_bytes, pool);
}

/* worker slots [s0, s1): each claims tasks (product xi, row chunk) until none
 * is left, on its own scratch */
static void wino_gemm_slots(void *arg, int64_t s0, int64_t s1) {
    wino_gemms *gm = arg;
    const int64_t rows = gm->g->Tall, n_tasks = NXI * gm->chunks;
    for (int64_t s = s0; s < s1; s++)
        for (int t; (t = atomic_fetch_add_explicit(&gm->next, 1, memory_order_relaxed)) < n_tasks;) {
            const int64_t xi = t / gm->chunks, c = t % gm->chunks;
            const int64_t r0 = rows * c / gm->chunks, r1 = rows * (c + 1) / gm->chunks;
            ert_status st = wino_gemm(gm, (int)xi, r0, r1, gm->ws + (size_t)s * gm->slot_bytes, gm->slot_bytes, NULL);
            if (st) atomic_store(&gm->err, (int)st);
        }
}

/* Row chunks per product when the 36 products run side by side on `side`
 * workers: the fewest (up to 8, chunks of 16 rows at least) whose tasks
 * spread evenly (36 on 16 workers: 3 rounds for 2.25 of work; 4 chunks: 9
 * for 9) */
static int64_t wino_chunks(int64_t rows, int64_t side) {
    int64_t best = 1;
    double best_r = 1e30;
    for (int64_t r = 1; r <= 8 && (r == 1 || rows / r >= 16); r++) {
        const int64_t t = NXI * r;
        const double ratio = (double)((t + side - 1) / side) * (double)side / (double)t;
        if (ratio < best_r - 1e-9) best_r = ratio, best = r;
    }
    return best;
}

ert_status ert_cpu_wino_conv(const ert_kargs *a, bool *done) {
    *done = false;
    wino_geom g;
    wino_ws w;
    const wino_hdr *h = a->packed;
    if (!h || !ert_cpu_wino_chosen(a) || !wino_geom_of(a, &g) || !wino_ws_of(&g, &w)) return ERT_OK;
    if (h->magic != WINO_MAGIC || h->C != g.C || h->M != g.M || a->workspace_bytes < w.total) return ERT_OK;
    const char *pk = (const char *)a->packed + WH;
    for (int xi = 0; xi < NXI; xi++) /* packed for this micro-kernel (a test may change it) */
        if (!ert_cpu_sgemm_packed_fits(pk + (size_t)xi * (size_t)h->slot, g.M, g.C, a->choice)) return ERT_OK;
    const ert_conv_params *p = &a->params->conv;
    const ert_act_params *act = p->act.kind != ERT_ACT_NONE ? &p->act : NULL;
    char *ws = a->workspace;
    wino_job j = {
        .g = &g, .x = a->in[0].data,
        .bias = a->n_in > 2 ? a->in[2].data : NULL,
        .res = a->n_in > 3 ? a->in[3].data : NULL,
        .in_scale = p->has_in_scale && a->n_in > 5 ? a->in[5].data : NULL,
        .y = a->out[0].data, .xp = (float *)ws, .cm = (float *)ws, .v = (float *)(ws + w.xp_cm),
        .act = act, .vec_act = act && ert_act_row_vectorised(act->kind),
    };
    if (p->has_in_scale && !j.in_scale) return ERT_OK;
    if (!all_finite(j.x, g.N * g.C, g.H * g.W, a->pool) || (j.in_scale && !all_finite(j.in_scale, 1, g.N * g.C, a->pool)))
        return ERT_OK; /* the im2col path */
    ert_par_fn fn = wino_run_base;
#if defined(__x86_64__)
    if (ert_cpu_kernel_cap(a->choice) >= ERT_CPU_GEMM_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        fn = wino_run_avx2;
#endif
    wino_task k = {&j, PH_XP};
    ert_parallel_for(a->pool, g.N * g.Hp, 1, fn, &k);
    k.ph = PH_IN;
    ert_parallel_for(a->pool, g.Tall, 1, fn, &k);
    void *gws = ws + w.xp_cm + w.v;
    const size_t gws_bytes = a->workspace_bytes - w.xp_cm - w.v;
    wino_gemms gm = {.j = &j, .g = &g, .pk = pk, .pk_slot = (size_t)h->slot, .choice = a->choice, .ws = gws,
                     .slot_bytes = ert_cpu_sgemm_slot_bytes(g.Tall, g.M, g.C)};
    const int64_t n_thr = ert_threadpool_size(a->pool);
    int64_t side = gm.slot_bytes ? (int64_t)(gws_bytes / gm.slot_bytes) : 0;
    if (side > n_thr) side = n_thr;
    if (side >= 2) {
        /* the 36 products side by side, one worker slot each, in row chunks
         * where 36 does not spread evenly: no barrier between products (one
         * product at a time, each split over the workers, waited at 36
         * barriers a conv; ResNet-18 batch 1 at 2 threads on a 16-core Xeon:
         * 1.15x its 1-thread speed). The same numbers: a row's sums do not
         * depend on how the rows are split. */
        gm.chunks = wino_chunks(g.Tall, side);
        atomic_init(&gm.next, 0);
        atomic_init(&gm.err, ERT_OK);
        ert_parallel_for(a->pool, side, 1, wino_gemm_slots, &gm);
        ert_status st = (ert_status)atomic_load(&gm.err);
        if (st) return st;
    } else {
        for (int xi = 0; xi < NXI; xi++) {
            ert_status st = wino_gemm(&gm, xi, 0, g.Tall, gws, gws_bytes, a->pool);
            if (st) return st;
        }
    }
    k.ph = PH_OUT;
    ert_parallel_for(a->pool, g.Tall, 1, fn, &k);
    if (act && !j.vec_act) {
        act_job aj = {j.y, g.OH * g.OW, act};
        ert_parallel_for(a->pool, g.N * g.M, 1, act_planes, &aj);
    }
    *done = true;
    return ERT_OK;
}
#else
ert_status ert_cpu_wino_conv(const ert_kargs *a, bool *done) {
    (void)a;
    *done = false;
    return ERT_OK;
}
#endif
