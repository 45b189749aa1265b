/* Float64 references of single ops, shared by the op harness
 * (tests/ops/test_op_harness.c: forward on every backend, gradients by
 * finite differences) and the trainer's gradient check (tests/train/test_grad.c).
 *
 * A reference reads its operands from an ert_ref: pd[k] holds operand k in
 * the node's input order (float64 copies of the f32 values the library got),
 * pn[k] its element count, and iv/fv the shapes and attributes the
 * reference needs, each laid out as the comment above the function says.
 * Outputs are written C-order into y. */
#ifndef ERT_REF64_H
#define ERT_REF64_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#define ERT_REF_MAXP 6
typedef struct ert_ref {
    int np;                    /* operands */
    double *pd[ERT_REF_MAXP];  /* their values */
    int64_t pn[ERT_REF_MAXP];  /* their element counts */
    int64_t iv[32];            /* integer parameters (shapes, attributes) */
    double fv[8];              /* float parameters */
} ert_ref;

typedef void (*ert_ref_fn)(const ert_ref *c, double *y);

/* A (d0 .. d[nd-1]) tensor seen as (outer, d[ax], inner). */
static inline void ert_ref_axis(const int64_t *d, int nd, int ax, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < ax; i++) *outer *= d[i];
    for (int i = ax + 1; i < nd; i++) *inner *= d[i];
}

/* iv: N C H W M KH KW sh sw pt pl pb pr dh dw G bias */
static inline void conv_ref(const ert_ref *c, double *y) {
    const int64_t *v = c->iv;
    int64_t N = v[0], C = v[1], H = v[2], W = v[3], M = v[4], KH = v[5], KW = v[6], sh = v[7], sw = v[8];
    int64_t pt = v[9], pl = v[10], pb = v[11], pr = v[12], dh = v[13], dw = v[14], G = v[15];
    int64_t OH = (H + pt + pb - dh * (KH - 1) - 1) / sh + 1, OW = (W + pl + pr - dw * (KW - 1) - 1) / sw + 1;
    int64_t Cg = C / G, Mg = M / G;
    const double *x = c->pd[0], *w = c->pd[1], *b = v[16] ? c->pd[2] : NULL;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = b ? b[m] : 0;
                    int64_t g = m / Mg;
                    for (int64_t cc = 0; cc < Cg; cc++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += x[((n * C + g * Cg + cc) * H + ih) * W + iw] * w[((m * Cg + cc) * KH + kh) * KW + kw];
                            }
                    y[((n * M + m) * OH + oh) * OW + ow] = s;
                }
}

/* iv: M N K transA transB cshape(0 none,1 (N),2 (M,N),3 (M,1)); fv: alpha beta */
static inline void gemm_ref(const ert_ref *c, double *y) {
    int64_t M = c->iv[0], N = c->iv[1], K = c->iv[2];
    bool ta = c->iv[3], tb = c->iv[4];
    const double *A = c->pd[0], *B = c->pd[1], *C = c->iv[5] ? c->pd[2] : NULL;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
            double cv = !C ? 0 : c->iv[5] == 1 ? C[j] : c->iv[5] == 2 ? C[i * N + j] : C[i];
            y[i * N + j] = c->fv[0] * s + c->fv[1] * cv;
        }
}

/* A and B padded to rank 4 (iv[0..3], iv[4..7]); M K N in iv[8..10]. */
static inline void matmul_ref(const ert_ref *c, double *y) {
    const int64_t *ad = c->iv, *bd = c->iv + 4;
    int64_t M = c->iv[8], K = c->iv[9], N = c->iv[10];
    int64_t o0 = ad[0] > bd[0] ? ad[0] : bd[0], o1 = ad[1] > bd[1] ? ad[1] : bd[1];
    for (int64_t p = 0; p < o0; p++)
        for (int64_t q = 0; q < o1; q++) {
            const double *A = c->pd[0] + ((ad[0] == 1 ? 0 : p) * ad[1] + (ad[1] == 1 ? 0 : q)) * M * K;
            const double *B = c->pd[1] + ((bd[0] == 1 ? 0 : p) * bd[1] + (bd[1] == 1 ? 0 : q)) * K * N;
            double *Y = y + (p * o1 + q) * M * N;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
                    Y[i * N + j] = s;
                }
        }
}

/* Element-wise op of n = iv[13] operands (1 to 3) with numpy broadcasting,
 * each padded to rank 4: operand k's dims at iv[4k..4k+3]; the op in iv[12]
 * (ERT_REF_ADD ...); PRelu's slope is operand 1; Where's condition is
 * operand 0 (0 or 1); fv[0] Mod's fmod. Output dims: the broadcast of all. */
enum { ERT_REF_ADD, ERT_REF_SUB, ERT_REF_MUL, ERT_REF_DIV, ERT_REF_POW, ERT_REF_MIN, ERT_REF_MAX, ERT_REF_MEAN,
       ERT_REF_PRELU, ERT_REF_MOD, ERT_REF_EQUAL, ERT_REF_LESS, ERT_REF_GREATER, ERT_REF_WHERE };
static inline void binary_ref(const ert_ref *c, double *y) {
    int n = (int)c->iv[13];
    int64_t o[4] = {1, 1, 1, 1};
    for (int k = 0; k < n; k++)
        for (int i = 0; i < 4; i++) o[i] = c->iv[4 * k + i] > o[i] ? c->iv[4 * k + i] : o[i];
    int64_t e = 0;
    for (int64_t i0 = 0; i0 < o[0]; i0++)
        for (int64_t i1 = 0; i1 < o[1]; i1++)
            for (int64_t i2 = 0; i2 < o[2]; i2++)
                for (int64_t i3 = 0; i3 < o[3]; i3++, e++) {
                    int64_t ix[4] = {i0, i1, i2, i3};
                    double v[3] = {0, 0, 0};
                    for (int k = 0; k < n; k++) {
                        const int64_t *a = c->iv + 4 * k;
                        int64_t ia = 0;
                        for (int d = 0; d < 4; d++) ia = ia * a[d] + (a[d] == 1 ? 0 : ix[d]);
                        v[k] = c->pd[k][ia];
                    }
                    double va = v[0], vb = v[1], r;
                    switch (c->iv[12]) {
                    case ERT_REF_ADD: r = va + vb; break;
                    case ERT_REF_SUB: r = va - vb; break;
                    case ERT_REF_MUL: r = va * vb; break;
                    case ERT_REF_DIV: r = va / vb; break;
                    case ERT_REF_POW: r = pow(va, vb); break;
                    case ERT_REF_MIN: r = n > 2 ? fmin(fmin(va, vb), v[2]) : n > 1 ? fmin(va, vb) : va; break;
                    case ERT_REF_MAX: r = n > 2 ? fmax(fmax(va, vb), v[2]) : n > 1 ? fmax(va, vb) : va; break;
                    case ERT_REF_MEAN: r = (va + vb + v[2]) / n; break;
                    case ERT_REF_PRELU: r = va >= 0 ? va : va * vb; break;
                    case ERT_REF_MOD: r = c->fv[0] ? fmod(va, vb) : va - vb * floor(va / vb); break;
                    case ERT_REF_EQUAL: r = va == vb; break;
                    case ERT_REF_LESS: r = va < vb; break;
                    case ERT_REF_GREATER: r = va > vb; break;
                    default: r = va != 0 ? vb : v[2]; break; /* Where */
                    }
                    y[e] = r;
                }
}

/* iv[0]: which activation; fv: alpha beta */
static inline double act_ref(int k, double x, const double *fv) {
    switch (k) {
    case 0: return x > 0 ? x : 0;
    case 1: return x >= 0 ? x : fv[0] * x;
    case 2: return 1 / (1 + exp(-x));
    case 3: return tanh(x);
    case 4: { double v = fv[0] * x + fv[1]; return v < 0 ? 0 : v > 1 ? 1 : v; }
    case 5: { double v = x / 6 + 0.5; return x * (v < 0 ? 0 : v > 1 ? 1 : v); }
    case 6: return x / (1 + exp(-x));
    case 7: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case 8: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    default: return x < fv[0] ? fv[0] : x > fv[1] ? fv[1] : x; /* clip */
    }
}

static inline void unary_fwd(const ert_ref *c, double *y) {
    for (int64_t i = 0; i < c->pn[0]; i++) y[i] = act_ref((int)c->iv[0], c->pd[0][i], c->fv);
}

/* iv: N C H W KH KW sh sw pt pl pb pr max count_include_pad dh dw */
static inline void pool_ref(const ert_ref *c, double *y) {
    const int64_t *v = c->iv;
    int64_t N = v[0], C = v[1], H = v[2], W = v[3], KH = v[4], KW = v[5], sh = v[6], sw = v[7];
    int64_t pt = v[8], pl = v[9], pb = v[10], pr = v[11], dh = v[14], dw = v[15];
    int64_t OH = (H + pt + pb - dh * (KH - 1) - 1) / sh + 1, OW = (W + pl + pr - dw * (KW - 1) - 1) / sw + 1;
    const double *x = c->pd[0];
    for (int64_t p = 0; p < N * C; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double mx = -INFINITY, s = 0;
                int64_t cnt = 0;
                for (int64_t kh = 0; kh < KH; kh++)
                    for (int64_t kw = 0; kw < KW; kw++) {
                        int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
                            cnt += v[13];
                            continue;
                        }
                        double xv = x[(p * H + ih) * W + iw];
                        mx = xv > mx ? xv : mx;
                        s += xv;
                        cnt++;
                    }
                y[(p * OH + oh) * OW + ow] = v[12] ? mx : s / (double)cnt;
            }
}

/* iv: N C H W, max (GlobalMaxPool) */
static inline void gap_ref(const ert_ref *c, double *y) {
    int64_t P = c->iv[0] * c->iv[1], S = c->iv[2] * c->iv[3];
    for (int64_t p = 0; p < P; p++) {
        double s = 0, mx = -INFINITY;
        for (int64_t i = 0; i < S; i++) s += c->pd[0][p * S + i], mx = fmax(mx, c->pd[0][p * S + i]);
        y[p] = c->iv[4] ? mx : s / (double)S;
    }
}

/* iv: N C S frozen; fv[0] eps. params x scale B (mean var as constants) */
static inline void bn_ref(const ert_ref *c, double *y) {
    int64_t N = c->iv[0], C = c->iv[1], S = c->iv[2];
    const double *x = c->pd[0], *sc = c->pd[1], *b = c->pd[2];
    for (int64_t ch = 0; ch < C; ch++) {
        double mu = 0, var = 0;
        if (!c->iv[3]) {
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) mu += x[(n * C + ch) * S + i];
            mu /= (double)(N * S);
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) var += pow(x[(n * C + ch) * S + i] - mu, 2);
            var /= (double)(N * S);
        } else {
            mu = c->iv[8 + ch] / 1000.0;   /* running mean, stored exactly */
            var = c->iv[16 + ch] / 1000.0; /* running var */
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                int64_t e = (n * C + ch) * S + i;
                y[e] = (x[e] - mu) / sqrt(var + c->fv[0]) * sc[ch] + b[ch];
            }
    }
}

/* iv: outer inner has_bias; fv[0] eps */
static inline void ln_ref(const ert_ref *c, double *y) {
    int64_t O = c->iv[0], I = c->iv[1];
    for (int64_t r = 0; r < O; r++) {
        const double *x = c->pd[0] + r * I;
        double mu = 0, var = 0;
        for (int64_t i = 0; i < I; i++) mu += x[i];
        mu /= (double)I;
        for (int64_t i = 0; i < I; i++) var += (x[i] - mu) * (x[i] - mu);
        var /= (double)I;
        for (int64_t i = 0; i < I; i++)
            y[r * I + i] = (x[i] - mu) / sqrt(var + c->fv[0]) * c->pd[1][i] + (c->iv[2] ? c->pd[2][i] : 0);
    }
}

/* iv: outer n inner log */
static inline void softmax_ref(const ert_ref *c, double *y) {
    int64_t O = c->iv[0], n = c->iv[1], I = c->iv[2];
    for (int64_t o = 0; o < O; o++)
        for (int64_t in = 0; in < I; in++) {
            const double *x = c->pd[0] + o * n * I + in;
            double mx = -INFINITY, s = 0;
            for (int64_t i = 0; i < n; i++) mx = x[i * I] > mx ? x[i * I] : mx;
            for (int64_t i = 0; i < n; i++) s += exp(x[i * I] - mx);
            for (int64_t i = 0; i < n; i++)
                y[o * n * I + in + i * I] = c->iv[3] ? x[i * I] - mx - log(s) : exp(x[i * I] - mx) / s;
        }
}

/* iv: d0 d1 d2, red mask bits, kind (0 Sum, 1 Mean, 2 Max, 3 Min, 4 Prod,
 * 5 L1, 6 L2, 7 SumSquare, 8 LogSum, 9 LogSumExp) */
static inline void reduce_ref(const ert_ref *c, double *y) {
    const int64_t *d = c->iv;
    int mask = (int)c->iv[3], kind = (int)c->iv[4];
    int64_t od[3];
    for (int i = 0; i < 3; i++) od[i] = mask >> i & 1 ? 1 : d[i];
    int64_t cnt = 1, no = od[0] * od[1] * od[2];
    for (int i = 0; i < 3; i++) cnt *= mask >> i & 1 ? d[i] : 1;
    for (int64_t i = 0; i < no; i++) y[i] = kind == 2 ? -INFINITY : kind == 3 ? INFINITY : kind == 4 ? 1 : 0;
    for (int64_t a = 0; a < d[0]; a++)
        for (int64_t b = 0; b < d[1]; b++)
            for (int64_t e = 0; e < d[2]; e++) {
                int64_t oa = mask & 1 ? 0 : a, ob = mask & 2 ? 0 : b, oe = mask & 4 ? 0 : e;
                double v = c->pd[0][(a * d[1] + b) * d[2] + e], *o = &y[(oa * od[1] + ob) * od[2] + oe];
                switch (kind) {
                case 1: *o += v / (double)cnt; break;
                case 2: *o = fmax(*o, v); break;
                case 3: *o = fmin(*o, v); break;
                case 4: *o *= v; break;
                case 5: *o += fabs(v); break;
                case 6: case 7: *o += v * v; break;
                case 9: *o += exp(v); break;
                default: *o += v; break; /* Sum, LogSum */
                }
            }
    for (int64_t i = 0; i < no; i++) y[i] = kind == 6 ? sqrt(y[i]) : kind == 8 || kind == 9 ? log(y[i]) : y[i];
}

/* Gather of a weight (embedding rows, repeated indices) or along axis 1 with
 * a scalar index (ViT's class token x[:, 0]). iv: d0 d1 d2 axis n_idx idx... */
static inline void gather_ref(const ert_ref *c, double *y) {
    const int64_t *d = c->iv;
    int64_t axis = c->iv[3], n = c->iv[4], outer, inner;
    ert_ref_axis(d, 3, (int)axis, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++) {
            int64_t k = c->iv[5 + j] < 0 ? c->iv[5 + j] + d[axis] : c->iv[5 + j];
            for (int64_t i = 0; i < inner; i++) y[(o * n + j) * inner + i] = c->pd[0][(o * d[axis] + k) * inner + i];
        }
}

/* Expand (ViT's cls_token.expand(B, -1, -1)): x (1, C) or (B0, 1) -> (A, B0, C). iv: A B0 C, which */
static inline void expand_ref(const ert_ref *c, double *y) {
    int64_t A = c->iv[0], B = c->iv[1], C = c->iv[2];
    for (int64_t a = 0; a < A; a++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t k = 0; k < C; k++) y[(a * B + b) * C + k] = c->pd[0][c->iv[3] ? b : k];
}

static inline void ident_ref(const ert_ref *c, double *y) { memcpy(y, c->pd[0], (size_t)c->pn[0] * sizeof(double)); }

#endif
