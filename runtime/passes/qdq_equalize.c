/*
 * Cross-layer equalisation for ert_model_quantize (Nagel et al. 2019, "Data-
 * Free Quantization Through Weight Equalization and Bias Correction"), driven
 * by the calibration set's activation ranges.
 *
 * A pair is Conv A -> [Relu] -> Conv B where A's output (and the Relu's) is
 * read by nothing else. Relu(x / s) = Relu(x) / s for s > 0, so dividing A's
 * output channel c (its filter and bias) by s_c and multiplying B's weights
 * on input channel c by s_c leaves the function unchanged (up to float
 * rounding), while the tensor between them, quantized with one scale, has
 * its channel c divided by s_c. Chosen s_c, with r_c = max |mid_c| over the
 * set and w_c = max |W_B| on input channel c:
 *   - B depthwise (one input channel per group): s_c = r_c / max r, every
 *     channel of the middle tensor gets the same range; B's weights are
 *     quantized per output channel, which here is per input channel, so the
 *     scaling costs B nothing;
 *   - otherwise: s_c = sqrt(r_c / w_c) (the balance of SmoothQuant, alpha =
 *     0.5), normalised so max s = 1: B's per-output-channel weight scales
 *     see the larger columns.
 * Dead channels (r_c = 0 or w_c = 0) keep s_c = 1; s_c is at least 1e-4
 * (A's weights grow by 1/s_c). Pairs are rescaled in graph order; each r
 * was measured on the unscaled model (equalisation leaves every tensor other
 * than the middle ones unchanged, so the order does not matter).
 * Limits: Conv pairs only (not Gemm/MatMul), f32 weights, Relu or nothing
 * between (HardSwish, SiLU and friends are not positively homogeneous); a
 * weight read by another node keeps its values.
 */
#include "quant_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool own_f32_weight(const ert_model *m, int32_t t) {
    return t >= 0 && m->tensors[t].role == ERT_ROLE_WEIGHT && m->tensors[t].dtype == ERT_DTYPE_F32 &&
           m->tensors[t].data && m->tensors[t].data_owned;
}

/* Readers of t (nodes and graph outputs), the only reading node in *only. */
static int readers(const ert_model *m, int32_t t, int *only) {
    int n = 0;
    *only = -1;
    for (int i = 0; i < m->n_outputs; i++) n += m->outputs[i] == t;
    for (int i = 0; i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_in; k++)
            if (m->nodes[i].in[k] == t) {
                n++;
                *only = i;
            }
    return n;
}

static bool conv_with_weight(const ert_model *m, const ert_node *n) {
    if (n->op != ERT_OP_CONV || n->n_in < 2 || n->n_out < 1 || !own_f32_weight(m, n->in[1])) return false;
    const ert_tensor *w = &m->tensors[n->in[1]];
    int only;
    if (w->ndim < 3 || readers(m, n->in[1], &only) != 1) return false;
    if (n->n_in >= 3 && n->in[2] >= 0) {
        const ert_tensor *b = &m->tensors[n->in[2]];
        if (!own_f32_weight(m, n->in[2]) || b->ndim != 1 || b->dims[0] != w->dims[0] || readers(m, n->in[2], &only) != 1)
            return false;
    }
    return true;
}

ert_status ert_qdq_cle_pairs(const ert_model *m, ert_cle_pair **pairs, int *n_pairs) {
    *pairs = NULL;
    *n_pairs = 0;
    ert_cle_pair *p = malloc(((size_t)m->n_nodes + 1) * sizeof *p);
    if (!p) return ert_set_error(m->ctx, ERT_E_NOMEM, "out of memory finding equalisation pairs");
    int np = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *a = &m->nodes[i];
        if (!conv_with_weight(m, a)) continue;
        int32_t mid = a->out[0];
        int c;
        if (readers(m, mid, &c) != 1 || c < 0) continue;
        if (m->nodes[c].op == ERT_OP_RELU && m->nodes[c].n_in == 1) {
            mid = m->nodes[c].out[0];
            if (readers(m, mid, &c) != 1 || c < 0) continue;
        }
        const ert_node *b = &m->nodes[c];
        if (!conv_with_weight(m, b) || b->in[0] != mid) continue;
        const int64_t k = m->tensors[a->in[1]].dims[0];
        const ert_tensor *wb = &m->tensors[b->in[1]];
        const int64_t group = ert_attr_int(b, "group", 1);
        if (group < 1 || k % group || wb->dims[1] * group != k || wb->dims[0] % group) continue;
        p[np++] = (ert_cle_pair){.a = i, .b = c, .mid = mid, .channels = k, .depthwise = wb->dims[1] == 1};
    }
    *pairs = p;
    *n_pairs = np;
    return ERT_OK;
}

ERT_NO_VECTORIZE int ert_qdq_equalize(ert_model *m, const ert_cle_pair *pairs, int n_pairs, const double *const *r) {
    int done = 0;
    for (int p = 0; p < n_pairs; p++) {
        const ert_cle_pair *cp = &pairs[p];
        const ert_node *a = &m->nodes[cp->a], *b = &m->nodes[cp->b];
        const int64_t k = cp->channels;
        const ert_tensor *ta = &m->tensors[a->in[1]], *tb = &m->tensors[b->in[1]];
        float *wa = (float *)ta->data, *wb = (float *)tb->data;
        float *ba = a->n_in >= 3 && a->in[2] >= 0 ? (float *)m->tensors[a->in[2]].data : NULL;
        int64_t na = 0, nb = 0;
        ert_dims_nelems(ta->ndim, ta->dims, &na);
        ert_dims_nelems(tb->ndim, tb->dims, &nb);
        const int64_t per_a = na / k, cout_b = tb->dims[0], cin_g = tb->dims[1], group = k / cin_g;
        const int64_t per_b = nb / (cout_b * cin_g), m_g = cout_b / group; /* kernel size; outputs per group */
        double *s = malloc((size_t)k * sizeof *s);
        if (!s) continue;
        double smax = 0;
        for (int64_t c = 0; c < k; c++) {
            const int64_t g = c / cin_g, l = c % cin_g;
            double w = 0;
            for (int64_t o = g * m_g; o < (g + 1) * m_g; o++)
                for (int64_t q = 0; q < per_b; q++) w = fmax(w, fabs((double)wb[(o * cin_g + l) * per_b + q]));
            const double rc = r[p][c];
            s[c] = !(rc > 0) || !(w > 0) ? -1 : cp->depthwise ? rc : sqrt(rc / w);
            smax = fmax(smax, s[c]);
        }
        if (!(smax > 0)) {
            free(s);
            continue;
        }
        for (int64_t c = 0; c < k; c++) {
            s[c] = s[c] < 0 ? 1 : s[c] / smax;
            if (s[c] < 1e-4) s[c] = 1e-4;
        }
        for (int64_t c = 0; c < k; c++) {
            for (int64_t q = 0; q < per_a; q++) wa[c * per_a + q] = (float)(wa[c * per_a + q] / s[c]);
            if (ba) ba[c] = (float)(ba[c] / s[c]);
            const int64_t g = c / cin_g, l = c % cin_g;
            for (int64_t o = g * m_g; o < (g + 1) * m_g; o++)
                for (int64_t q = 0; q < per_b; q++) wb[(o * cin_g + l) * per_b + q] = (float)(wb[(o * cin_g + l) * per_b + q] * s[c]);
        }
        free(s);
        done++;
    }
    return done;
}
