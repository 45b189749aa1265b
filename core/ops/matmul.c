/* prepare() of MatMul and Gemm (ONNX semantics, newest opset); workspace:
 * the CPU SGEMM's, through ert_prep.gemm_workspace. */
#include "nn_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ MatMul */

ert_status ert_prepare_matmul(ert_prep *p) {
    ert_gemm_params *gp = &p->params->gemm;
    memset(gp, 0, sizeof *gp);
    gp->alpha = 1.0f;
    ert_status st;
    for (int i = 0; i < 2; i++)
        if ((st = ert_nn_need_f32(p, i))) return st;
    const ert_tinfo *a = &p->in[0], *b = &p->in[1];
    if (a->ndim < 1 || b->ndim < 1) return ert_prep_error(p, ERT_E_SHAPE, "inputs must have rank >= 1");
    int64_t M = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1, K = a->dims[a->ndim - 1];
    int64_t Kb = b->ndim >= 2 ? b->dims[b->ndim - 2] : b->dims[0], N = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
    if (K != Kb)
        return ert_prep_error(p, ERT_E_SHAPE, "inner dims differ: a has K=%lld, b has K=%lld", (long long)K,
                              (long long)Kb);
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim > 2 ? b->ndim - 2 : 0, nd;
    int64_t od[ERT_MAX_DIMS + 2];
    if (!ert_broadcast_shape(na, a->dims, nb, b->dims, &nd, od))
        return ert_prep_error(p, ERT_E_SHAPE, "batch dims cannot be broadcast");
    if (a->ndim >= 2) od[nd++] = M;
    if (b->ndim >= 2) od[nd++] = N;
    if (nd > ERT_MAX_DIMS) return ert_prep_error(p, ERT_E_SHAPE, "output rank %d too large", nd);
    if ((st = ert_nn_check_nelems(p, nd, od))) return st;
    if ((st = ert_nn_read_act(p, &gp->act))) return st;
    ert_nn_set_out(p, nd, od);
    /* the CPU kernel runs one SGEMM of batch*M rows when b has no batch of
     * its own (ert_cpu_matmul_rows): its workspace grows with the rows */
    int64_t rows = M;
    bool b_shared = true;
    for (int d = 0; d + 2 < b->ndim; d++) b_shared = b_shared && b->dims[d] == 1;
    for (int d = 0; b_shared && d + 2 < a->ndim; d++) rows *= a->dims[d];
    return ert_nn_set_workspace(p, ert_nn_gemm_ws(p, rows, N, K, p->n_threads));
}

/* ------------------------------------------------------------ Gemm */

ert_status ert_prepare_gemm(ert_prep *p) {
    ert_gemm_params *gp = &p->params->gemm;
    memset(gp, 0, sizeof *gp);
    ert_status st;
    for (int i = 0; i < 3; i++)
        if ((st = ert_nn_need_f32(p, i))) return st;
    const ert_tinfo *a = &p->in[0], *b = &p->in[1];
    if (a->ndim != 2 || b->ndim != 2)
        return ert_prep_error(p, ERT_E_SHAPE, "A and B must be 2-D (ranks %d and %d)", a->ndim, b->ndim);
    const ert_node *n = ert_nn_node_of(p);
    gp->alpha = ert_attr_float(n, "alpha", 1.0f);
    gp->beta = ert_attr_float(n, "beta", 1.0f);
    gp->trans_a = ert_attr_int(n, "transA", 0) != 0;
    gp->trans_b = ert_attr_int(n, "transB", 0) != 0;
    int64_t M = a->dims[gp->trans_a ? 1 : 0], K = a->dims[gp->trans_a ? 0 : 1];
    int64_t Kb = b->dims[gp->trans_b ? 1 : 0], N = b->dims[gp->trans_b ? 0 : 1];
    if (K != Kb)
        return ert_prep_error(p, ERT_E_SHAPE, "inner dims differ: op(A) is (%lld,%lld), op(B) is (%lld,%lld)",
                              (long long)M, (long long)K, (long long)Kb, (long long)N);
    if (ert_nn_has_in(p, 2)) {
        const ert_tinfo *c = &p->in[2];
        bool ok = c->ndim <= 2;
        int64_t want[2] = {M, N};
        for (int i = 0; ok && i < c->ndim; i++) {
            int64_t dc = c->dims[i], dw = want[2 - c->ndim + i];
            ok = dc == dw || dc == 1;
        }
        if (!ok) return ert_prep_error(p, ERT_E_SHAPE, "C cannot be broadcast to (%lld,%lld)", (long long)M, (long long)N);
        gp->has_c = true;
    }
    int64_t od[2] = {M, N};
    if ((st = ert_nn_check_nelems(p, 2, od))) return st;
    if ((st = ert_nn_read_act(p, &gp->act))) return st;
    ert_nn_set_out(p, 2, od);
    return ert_nn_set_workspace(p, ert_nn_gemm_ws(p, M, N, K, p->n_threads));
}
