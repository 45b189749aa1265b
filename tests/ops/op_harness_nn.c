/* Op harness cases: convolutions, Gemm/MatMul, pooling. */
#include "harness_cases.h"

/* ------------------------------------------------------------ conv, gemm, pools */

static void convt_ref(const ert_ref *c, double *y) { /* iv: N C H W M KH KW s p d OH OW (group 1) */
    const int64_t *v = c->iv;
    int64_t N = v[0], C = v[1], H = v[2], W = v[3], M = v[4], KH = v[5], KW = v[6], s = v[7], p = v[8], dl = v[9];
    int64_t OH = v[10], OW = v[11];
    for (int64_t i = 0; i < N * M * OH * OW; i++) y[i] = v[12] ? c->pd[2][(i / (OH * OW)) % M] : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t ih = 0; ih < H; ih++)
                for (int64_t iw = 0; iw < W; iw++)
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t oh = ih * s - p + kh * dl, ow = iw * s - p + kw * dl;
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                                y[((n * M + m) * OH + oh) * OW + ow] +=
                                    c->pd[0][((n * C + ch) * H + ih) * W + iw] * c->pd[1][((ch * M + m) * KH + kh) * KW + kw];
                            }
}

void cases_conv(void) {
    for (int depthwise = 0; depthwise < 2; depthwise++) {
        hcase hc, *c = begin(&hc, "Conv");
        int64_t *v = c->r.iv;
        int G = depthwise ? ert_test_int(&rng, 2, 3) : ert_test_int(&rng, 1, 2);
        v[15] = G;
        v[0] = ert_test_int(&rng, 1, 2);
        v[1] = depthwise ? G : G * ert_test_int(&rng, 1, 3);
        v[2] = ert_test_int(&rng, 5, 8), v[3] = ert_test_int(&rng, 5, 8);
        v[4] = G * ert_test_int(&rng, 1, depthwise ? 2 : 3);
        v[5] = ert_test_int(&rng, 1, 3), v[6] = ert_test_int(&rng, 1, 3);
        v[7] = ert_test_int(&rng, 1, 2), v[8] = ert_test_int(&rng, 1, 2);
        for (int i = 9; i < 13; i++) v[i] = ert_test_int(&rng, 0, 1);
        v[13] = ert_test_int(&rng, 1, 2), v[14] = ert_test_int(&rng, 1, 2);
        v[16] = ert_test_int(&rng, 0, 1);
        snprintf(c->what, sizeof c->what, "Conv(group %d%s)", G, depthwise ? ", depthwise" : "");
        int64_t xd[4] = {v[0], v[1], v[2], v[3]}, wd[4] = {v[4], v[1] / G, v[5], v[6]}, bd[1] = {v[4]};
        add_f32(c, 4, xd, -1, 1);
        add_f32(c, 4, wd, -1, 1)->weight = true;
        if (v[16]) add_f32(c, 1, bd, -1, 1)->weight = true;
        static int64_t ks[2], st[2], pads[4], dl[2];
        ks[0] = v[5], ks[1] = v[6], st[0] = v[7], st[1] = v[8], dl[0] = v[13], dl[1] = v[14];
        for (int i = 0; i < 4; i++) pads[i] = v[9 + i];
        c->at[c->na++] = ERT_ATTR_IS("kernel_shape", ks, 2), c->at[c->na++] = ERT_ATTR_IS("strides", st, 2);
        c->at[c->na++] = ERT_ATTR_IS("pads", pads, 4), c->at[c->na++] = ERT_ATTR_IS("dilations", dl, 2);
        c->at[c->na++] = ERT_ATTR_I("group", G);
        int64_t OH = (v[2] + v[9] + v[11] - v[13] * (v[5] - 1) - 1) / v[7] + 1;
        int64_t OW = (v[3] + v[10] + v[12] - v[14] * (v[6] - 1) - 1) / v[8] + 1, yd[4] = {v[0], v[4], OH, OW};
        set_y(c, ERT_DTYPE_F32, 4, yd);
        c->ref = conv_ref;
        c->tol = 3;
        run(c);
    }
    hcase hc, *c = begin(&hc, "ConvTranspose");
    int64_t *v = c->r.iv;
    v[0] = ert_test_int(&rng, 1, 2), v[1] = ert_test_int(&rng, 1, 3), v[2] = ert_test_int(&rng, 2, 5), v[3] = ert_test_int(&rng, 2, 5);
    v[4] = ert_test_int(&rng, 1, 3), v[5] = ert_test_int(&rng, 1, 3), v[6] = ert_test_int(&rng, 1, 3);
    v[7] = ert_test_int(&rng, 1, 2), v[8] = ert_test_int(&rng, 0, 1), v[9] = ert_test_int(&rng, 1, 2), v[12] = ert_test_int(&rng, 0, 1);
    if (v[8] > v[9] * (v[5] - 1) || v[8] > v[9] * (v[6] - 1)) v[8] = 0; /* no negative output size */
    v[10] = (v[2] - 1) * v[7] - 2 * v[8] + v[9] * (v[5] - 1) + 1;
    v[11] = (v[3] - 1) * v[7] - 2 * v[8] + v[9] * (v[6] - 1) + 1;
    int64_t xd[4] = {v[0], v[1], v[2], v[3]}, wd[4] = {v[1], v[4], v[5], v[6]}, bd[1] = {v[4]}, yd[4] = {v[0], v[4], v[10], v[11]};
    add_f32(c, 4, xd, -1, 1);
    add_f32(c, 4, wd, -1, 1)->weight = true;
    if (v[12]) add_f32(c, 1, bd, -1, 1)->weight = true;
    static int64_t ks[2], st[2], pads[4], dl[2];
    ks[0] = v[5], ks[1] = v[6], st[0] = st[1] = v[7], dl[0] = dl[1] = v[9];
    for (int i = 0; i < 4; i++) pads[i] = v[8];
    c->at[c->na++] = ERT_ATTR_IS("kernel_shape", ks, 2), c->at[c->na++] = ERT_ATTR_IS("strides", st, 2);
    c->at[c->na++] = ERT_ATTR_IS("pads", pads, 4), c->at[c->na++] = ERT_ATTR_IS("dilations", dl, 2);
    set_y(c, ERT_DTYPE_F32, 4, yd);
    c->ref = convt_ref;
    c->tol = 3;
    run(c);
}

void cases_gemm(void) {
    hcase hc, *c = begin(&hc, "Gemm");
    int64_t M = ert_test_int(&rng, 1, 7), N = ert_test_int(&rng, 1, 9), K = ert_test_int(&rng, 2, 8);
    int64_t *v = c->r.iv;
    v[0] = M, v[1] = N, v[2] = K, v[3] = ert_test_int(&rng, 0, 1), v[4] = ert_test_int(&rng, 0, 1), v[5] = ert_test_int(&rng, 0, 3);
    c->r.fv[0] = (float)ert_test_uniform(&rng, 0.5, 1.5), c->r.fv[1] = (float)ert_test_uniform(&rng, 0.5, 1.5);
    int64_t ad[2] = {v[3] ? K : M, v[3] ? M : K}, bd[2] = {v[4] ? N : K, v[4] ? K : N}, cd[3][2] = {{N, 0}, {M, N}, {M, 1}};
    add_f32(c, 2, ad, -1, 1);
    add_f32(c, 2, bd, -1, 1)->weight = true;
    if (v[5]) add_f32(c, v[5] == 1 ? 1 : 2, cd[v[5] - 1], -1, 1)->weight = true;
    c->at[c->na++] = ERT_ATTR_I("transA", v[3]), c->at[c->na++] = ERT_ATTR_I("transB", v[4]);
    c->at[c->na++] = ERT_ATTR_F("alpha", (float)c->r.fv[0]), c->at[c->na++] = ERT_ATTR_F("beta", (float)c->r.fv[1]);
    int64_t yd[2] = {M, N};
    set_y(c, ERT_DTYPE_F32, 2, yd);
    c->ref = gemm_ref;
    c->tol = 3;
    run(c);

    c = begin(&hc, "MatMul");
    M = ert_test_int(&rng, 1, 5), K = ert_test_int(&rng, 2, 6), N = ert_test_int(&rng, 1, 5);
    int64_t b0 = ert_test_int(&rng, 1, 3), b1 = ert_test_int(&rng, 1, 3);
    int na = ert_test_int(&rng, 2, 4), nb = ert_test_int(&rng, 2, 4);
    int64_t a4[4] = {ert_test_int(&rng, 0, 1) ? b0 : 1, ert_test_int(&rng, 0, 1) ? b1 : 1, M, K};
    int64_t b4[4] = {ert_test_int(&rng, 0, 1) ? b0 : 1, ert_test_int(&rng, 0, 1) ? b1 : 1, K, N};
    for (int i = 0; i < 4 - na; i++) a4[i] = 1;
    for (int i = 0; i < 4 - nb; i++) b4[i] = 1;
    memcpy(c->r.iv, a4, sizeof a4);
    memcpy(c->r.iv + 4, b4, sizeof b4);
    c->r.iv[8] = M, c->r.iv[9] = K, c->r.iv[10] = N;
    add_f32(c, na, a4 + 4 - na, -1, 1);
    add_f32(c, nb, b4 + 4 - nb, -1, 1);
    int ond = na > nb ? na : nb;
    int64_t od[4] = {a4[0] > b4[0] ? a4[0] : b4[0], a4[1] > b4[1] ? a4[1] : b4[1], M, N};
    set_y(c, ERT_DTYPE_F32, ond, od + 4 - ond);
    c->ref = matmul_ref;
    c->tol = 3;
    run(c);
}

void cases_pool(void) {
    for (int kind = 0; kind < 3; kind++) {
        int is_max = kind > 0;
        hcase hc, *c = begin(&hc, is_max ? "MaxPool" : "AveragePool");
        int64_t *v = c->r.iv;
        v[0] = ert_test_int(&rng, 1, 2), v[1] = ert_test_int(&rng, 1, 3), v[2] = ert_test_int(&rng, 5, 8), v[3] = ert_test_int(&rng, 5, 8);
        v[4] = ert_test_int(&rng, 2, 3), v[5] = ert_test_int(&rng, 1, 3), v[6] = ert_test_int(&rng, 1, 2), v[7] = ert_test_int(&rng, 1, 2);
        for (int i = 8; i < 12; i++) v[i] = ert_test_int(&rng, 0, 1);
        if (kind == 2) { /* 2x2 stride 2, odd sizes (the kernels' fast path): the last row or column is not covered */
            snprintf(c->what, sizeof c->what, "MaxPool 2x2/2");
            v[2] = ert_test_int(&rng, 2, 7), v[3] = ert_test_int(&rng, 2, 9);
            v[4] = v[5] = v[6] = v[7] = 2;
            for (int i = 8; i < 12; i++) v[i] = 0;
        }
        if (v[5] == 1) v[9] = v[11] = 0; /* no window entirely in the padding */
        v[12] = is_max;
        v[13] = is_max ? 0 : ert_test_int(&rng, 0, 1);
        v[14] = kind == 1 ? ert_test_int(&rng, 1, 2) : 1, v[15] = kind == 1 ? ert_test_int(&rng, 1, 2) : 1;
        int64_t xd[4] = {v[0], v[1], v[2], v[3]};
        add_f32(c, 4, xd, -1, 1)->gap = -1;
        static int64_t ks[2], st[2], pads[4], dl[2];
        ks[0] = v[4], ks[1] = v[5], st[0] = v[6], st[1] = v[7], dl[0] = v[14], dl[1] = v[15];
        for (int i = 0; i < 4; i++) pads[i] = v[8 + i];
        c->at[c->na++] = ERT_ATTR_IS("kernel_shape", ks, 2), c->at[c->na++] = ERT_ATTR_IS("strides", st, 2);
        c->at[c->na++] = ERT_ATTR_IS("pads", pads, 4);
        c->at[c->na++] = is_max ? ERT_ATTR_IS("dilations", dl, 2) : ERT_ATTR_I("count_include_pad", v[13]);
        int64_t OH = (v[2] + v[8] + v[10] - v[14] * (v[4] - 1) - 1) / v[6] + 1;
        int64_t OW = (v[3] + v[9] + v[11] - v[15] * (v[5] - 1) - 1) / v[7] + 1, yd[4] = {v[0], v[1], OH, OW};
        set_y(c, ERT_DTYPE_F32, 4, yd);
        c->ref = pool_ref;
        run(c);
    }
    for (int is_max = 0; is_max < 2; is_max++) {
        hcase hc, *c = begin(&hc, is_max ? "GlobalMaxPool" : "GlobalAveragePool");
        int64_t d[4] = {ert_test_int(&rng, 1, 3), ert_test_int(&rng, 1, 4), ert_test_int(&rng, 1, 5), ert_test_int(&rng, 2, 5)};
        add_f32(c, 4, d, -1, 1)->gap = -1;
        memcpy(c->r.iv, d, sizeof d);
        c->r.iv[4] = is_max;
        int64_t yd[4] = {d[0], d[1], 1, 1};
        set_y(c, ERT_DTYPE_F32, 4, yd);
        c->ref = gap_ref;
        run(c);
    }
}

/* ert.Attention: iv B H nq nk D, bias (0 none, 1 (H, nq, nk)), y layout (0 (B, H, nq, D), 1 (B, nq, H * D)); fv[0] scale */
static void attention_ref(const ert_ref *c, double *y) {
    const int64_t B = c->iv[0], H = c->iv[1], nq = c->iv[2], nk = c->iv[3], D = c->iv[4];
    double s[64];
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < nq; i++) {
                const double *q = c->pd[0] + ((b * H + h) * nq + i) * D;
                double m = -INFINITY, sum = 0;
                const bool tr = c->iv[6] == 2; /* k, v and y stored (B, H, head_dim, tokens) */
                for (int64_t j = 0; j < nk; j++) {
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++)
                        dot += q[d] * c->pd[1][tr ? ((b * H + h) * D + d) * nk + j : ((b * H + h) * nk + j) * D + d];
                    s[j] = c->fv[0] * dot + (c->iv[5] ? c->pd[3][(h * nq + i) * nk + j] : 0.0);
                    m = s[j] > m ? s[j] : m;
                }
                for (int64_t j = 0; j < nk; j++) sum += (s[j] = exp(s[j] - m));
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < nk; j++)
                        acc += s[j] * c->pd[2][tr ? ((b * H + h) * D + d) * nk + j : ((b * H + h) * nk + j) * D + d];
                    int64_t o = tr ? ((b * H + h) * D + d) * nq + i
                                : c->iv[6] ? (b * nq + i) * H * D + h * D + d : ((b * H + h) * nq + i) * D + d;
                    y[o] = acc / sum;
                }
            }
}

/* layout 0: contiguous (B, H, tokens, head_dim) operands; 1: y written as
 * (B, tokens, H * head_dim) (the layout the next Linear reads); 2: k, v and
 * y stored (B, H, head_dim, tokens), tokens contiguous (a transposed k; the
 * CUDA GEMM path's transposed operands). */
void cases_attention(void) {
    for (int lay4 = 0; lay4 < 4; lay4++) {
        /* layout 1 twice: more batches than heads, then more heads than
         * batches (the CUDA GEMM path loops over the smaller of the two) */
        const int lay = lay4 == 3 ? 1 : lay4;
        hcase hc, *c = begin(&hc, "ert.Attention");
        int64_t B = lay4 == 1 ? 3 : lay4 == 3 ? 2 : ert_test_int(&rng, 1, 2),
                H = lay4 == 1 ? ert_test_int(&rng, 1, 2) : lay4 == 3 ? 3 : ert_test_int(&rng, 1, 3),
                nq = lay4 == 1 || lay4 == 3 ? ert_test_int(&rng, 2, 9) : ert_test_int(&rng, 1, 9),
                nk = ert_test_int(&rng, 1, 9), D = ert_test_int(&rng, 1, 12);
        int64_t qd[4] = {B, H, nq, D}, kd[4] = {B, H, nk, D}, bd[3] = {H, nq, nk};
        if (lay == 2) kd[2] = D, kd[3] = nk;
        c->r.iv[0] = B, c->r.iv[1] = H, c->r.iv[2] = nq, c->r.iv[3] = nk, c->r.iv[4] = D;
        c->r.iv[5] = ert_test_int(&rng, 0, 1), c->r.iv[6] = lay;
        c->r.fv[0] = lay ? 0.3f : (float)(1.0 / sqrt((double)D));
        add_f32(c, 4, qd, -2, 2);
        add_f32(c, 4, kd, -2, 2);
        add_f32(c, 4, kd, -2, 2);
        if (c->r.iv[5]) add_f32(c, 3, bd, -2, 2);
        static int64_t ov[5], ys[4], kv[5], dd[5];
        if (lay == 2) {
            dd[0] = B, dd[1] = H, dd[2] = nq, dd[3] = nk, dd[4] = D;
            c->at[c->na++] = ERT_ATTR_IS("ert_dims", dd, 5);
            kv[0] = 0, kv[1] = H * D * nk, kv[2] = D * nk, kv[3] = 1, kv[4] = nk;
            ov[0] = 0, ov[1] = H * D * nq, ov[2] = D * nq, ov[3] = 1, ov[4] = nq;
            ys[0] = B, ys[1] = H, ys[2] = D, ys[3] = nq;
            c->at[c->na++] = ERT_ATTR_IS("ert_k", kv, 5);
            c->at[c->na++] = ERT_ATTR_IS("ert_v", kv, 5);
            c->at[c->na++] = ERT_ATTR_IS("ert_o", ov, 5);
            c->at[c->na++] = ERT_ATTR_IS("ert_out_shape", ys, 4);
            c->at[c->na++] = ERT_ATTR_F("scale", 0.3f);
            set_y(c, ERT_DTYPE_F32, 4, ys);
        } else if (lay) {
            ov[0] = 0, ov[1] = nq * H * D, ov[2] = D, ov[3] = H * D, ov[4] = 1;
            ys[0] = B, ys[1] = nq, ys[2] = H * D;
            c->at[c->na++] = ERT_ATTR_IS("ert_o", ov, 5);
            c->at[c->na++] = ERT_ATTR_IS("ert_out_shape", ys, 3);
            c->at[c->na++] = ERT_ATTR_F("scale", 0.3f);
            set_y(c, ERT_DTYPE_F32, 3, ys);
        } else {
            set_y(c, ERT_DTYPE_F32, 4, qd);
        }
        c->ref = attention_ref;
        run(c);
    }
}
