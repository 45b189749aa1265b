/* prepare() of BatchNormalization, InstanceNormalization and
 * LayerNormalization (ONNX semantics, newest opset). */
#include "nn_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ BatchNormalization */

/* Inputs 1 .. n-1 (BatchNorm's scale, B, mean, var; InstanceNorm's scale, B)
 * hold one value per channel of x = input 0 (rank >= 2): shape (C). */
static ert_status per_channel(ert_prep *p, int n, const char *const *names) {
    int64_t C = p->in[0].dims[1];
    for (int i = 1; i < n; i++) {
        const ert_tinfo *t = &p->in[i];
        if (t->ndim != 1 || t->dims[0] != C)
            return ert_prep_error(p, ERT_E_SHAPE, "%s must have shape (%lld), the input's channels; got rank %d, dim 0 = %lld",
                                  names[i], (long long)C, t->ndim, (long long)(t->ndim ? t->dims[0] : 0));
    }
    return ERT_OK;
}

ert_status ert_prepare_batchnorm(ert_prep *p) {
    ert_norm_params *np = &p->params->norm;
    memset(np, 0, sizeof *np);
    ert_status st;
    for (int i = 0; i < 5; i++)
        if ((st = ert_nn_need_f32(p, i))) return st;
    np->training = ert_attr_int(ert_nn_node_of(p), "training_mode", 0) != 0;
    /* opset 14+: the running mean/var outputs exist only in training mode */
    if (!np->training && (ert_nn_wants_out(p, 1) || ert_nn_wants_out(p, 2)))
        return ert_prep_error(p, ERT_E_UNSUPPORTED, "running mean/var outputs without training_mode=1 are not supported");
    const ert_tinfo *x = &p->in[0];
    if (x->ndim < 2) return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected >= 2", x->ndim);
    static const char *names[] = {"", "scale", "B", "mean", "var"};
    if ((st = per_channel(p, 5, names))) return st;
    np->epsilon = ert_attr_float(ert_nn_node_of(p), "epsilon", 1e-5f);
    np->momentum = ert_attr_float(ert_nn_node_of(p), "momentum", 0.9f);
    if (!(np->epsilon >= 0)) return ert_prep_error(p, ERT_E_FORMAT, "epsilon must be >= 0");
    ert_nn_set_out(p, x->ndim, x->dims);
    for (int k = 1; k < p->n_out; k++) ert_nn_set_out_k(p, k, 1, &x->dims[1]); /* running mean/var: (C) */
    return ERT_OK;
}

/* InstanceNormalization (opset 6+): x is (N, C, D1, ...), rank >= 3; each
 * (n, c) plane is normalised with its own mean and biased variance, then
 * scale[c], B[c]. Rank 2 (no spatial dims) is refused: ONNX's shape
 * inference requires spatial dims, and the result would be B alone. */
ert_status ert_prepare_instancenorm(ert_prep *p) {
    ert_norm_params *np = &p->params->norm;
    memset(np, 0, sizeof *np);
    ert_status st;
    for (int i = 0; i < 3; i++)
        if ((st = ert_nn_need_f32(p, i))) return st;
    const ert_tinfo *x = &p->in[0];
    if (x->ndim < 3) return ert_prep_error(p, ERT_E_SHAPE, "input has rank %d, expected >= 3 (N, C, D1, ...)", x->ndim);
    static const char *names[] = {"", "scale", "B"};
    if ((st = per_channel(p, 3, names))) return st;
    np->epsilon = ert_attr_float(ert_nn_node_of(p), "epsilon", 1e-5f);
    if (!(np->epsilon >= 0)) return ert_prep_error(p, ERT_E_FORMAT, "epsilon must be >= 0");
    ert_nn_set_out(p, x->ndim, x->dims);
    return ERT_OK;
}

/* ------------------------------------------------------------ LayerNormalization */

ert_status ert_prepare_layernorm(ert_prep *p) {
    ert_norm_params *np = &p->params->norm;
    memset(np, 0, sizeof *np);
    ert_status st;
    for (int i = 0; i < 3; i++)
        if ((st = ert_nn_need_f32(p, i))) return st;
    const ert_tinfo *x = &p->in[0];
    int64_t axis = ert_attr_int(ert_nn_node_of(p), "axis", -1);
    if (axis < -x->ndim || axis >= x->ndim || x->ndim == 0)
        return ert_prep_error(p, ERT_E_SHAPE, "axis %lld out of range for rank %d", (long long)axis,
                              x->ndim);
    if (axis < 0) axis += x->ndim;
    np->axis = axis;
    np->epsilon = ert_attr_float(ert_nn_node_of(p), "epsilon", 1e-5f);
    if (!(np->epsilon >= 0)) return ert_prep_error(p, ERT_E_FORMAT, "epsilon must be >= 0");
    int nn = x->ndim - (int)axis;
    for (int k = 1; k < 3; k++) {
        if (!ert_nn_has_in(p, k)) continue;
        const ert_tinfo *s = &p->in[k];
        int64_t ne = 1;
        for (int i = 0; i < s->ndim; i++) ne *= s->dims[i];
        if (ne == 1) continue; /* one value for every element */
        /* otherwise it must match the normalised shape (leading 1s allowed) */
        bool ok = true;
        for (int i = 0; ok && i < s->ndim; i++) {
            int j = i - (s->ndim - nn);
            ok = j >= 0 ? (s->dims[i] == x->dims[axis + j] || s->dims[i] == 1) : s->dims[i] == 1;
        }
        int64_t inner = 1;
        for (int i = (int)axis; i < x->ndim; i++) inner *= x->dims[i];
        if (ok && ne != inner) /* valid ONNX (partial broadcast), not handled by the kernel */
            return ert_prep_error(p, ERT_E_UNSUPPORTED, "%s broadcasts over part of the normalised shape",
                                  k == 1 ? "scale" : "bias");
        if (!ok)
            return ert_prep_error(p, ERT_E_SHAPE, "%s does not match the normalised shape (axis %lld)",
                                  k == 1 ? "scale" : "bias", (long long)axis);
    }
    ert_nn_set_out(p, x->ndim, x->dims);
    /* Mean, InvStdDev: x's shape with the normalised dims [axis, ndim) set to
     * 1; f32 whatever stash_type says (the kernel accumulates in double) */
    int64_t sd[ERT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) sd[i] = i < axis ? x->dims[i] : 1;
    for (int k = 1; k < p->n_out; k++) ert_nn_set_out_k(p, k, x->ndim, sd);
    return ERT_OK;
}
