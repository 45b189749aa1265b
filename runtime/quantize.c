/*
 * ert_model_quantize: post-training quantization (the contract is in
 * edgert.h, "quantization").
 *
 * Steps:
 *   0. BatchNorms folded into their convs (ert_qdq_fold_bn).
 *   1. Layers: Conv/Gemm/MatMul with a constant weight, Add of two
 *      activations (ert_qdq_is_candidate); keep_float patterns mark theirs.
 *   2. Calibration: a copy of the model that also outputs every tensor any
 *      layer would quantize; a CPU session at batch 1 runs each sample;
 *      pass 1 records min/max (and stops at the first NaN/inf, naming the
 *      sample and tensor) and keeps output 0 as the float reference; pass 2
 *      (percentile, entropy) fills the histograms; thresholds per method
 *      (runtime/calib.c). Graph inputs are measured from the samples.
 *   3. Sensitivity (on request or with max_drop): each layer quantized alone
 *      (ert_qdq_build), run over the set, output 0 compared with the float
 *      reference. With max_drop, the whole model is measured and the worst
 *      layer (by its drop alone, then its error) returned to float until
 *      the drop is within budget.
 *   4. The result: ert_qdq_build of the final plan; its error is measured
 *      for the report.
 * Everything runs on the CPU in f32, one sample at a time, single-threaded
 * unless n_threads says otherwise, so results are deterministic.
 * Limits: samples are batch-1 tensors; float references above 256 MiB are
 * not kept (output 0 is then recomputed by a float session beside each
 * measurement).
 */
#define _POSIX_C_SOURCE 200809L
#include "quant_internal.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_CAP_BYTES ((size_t)256 << 20)

typedef struct qctx {
    const ert_model *m;
    const ert_quantize_options *o;
    ert_context *ctx;
    ert_session_options so;
    int n_samples;
    size_t *in_bytes;         /* per graph input: bytes of one sample */
    int *in_slot;             /* per graph input: index among the calibration session's inputs */
    bool *cand;               /* per node: a layer */
    ert_quant_keep *state;    /* per node (layers) */
    int32_t *want;            /* per tensor: >= 0 when calibrated (ert_qdq_tensors over every layer) */
    ert_calib_stat *stat;     /* per calibrated tensor, indexed like `calib` */
    int32_t *calib;           /* calibrated tensors */
    int n_calib;
    double *amax, *amin;      /* per tensor: the range (amin used when asymmetric) */
    bool asym;                /* options->asymmetric (version >= 2) */
    float *ref;               /* n_samples x out_n float output 0, or NULL (recomputed) */
    int64_t out_n;            /* elements of output 0 at batch 1 */
    int64_t classes;          /* > 1: output 0 is (1, classes) */
    double *layer_l2, *layer_drop; /* per node */
    double rel_l2, drop, top1_f, top1_q; /* of the last measurement */
} qctx;

static ert_status oom(qctx *q) { return ert_set_error(q->ctx, ERT_E_NOMEM, "out of memory quantizing the model"); }

static const void *sample(const qctx *q, int input, int s) {
    return (const char *)q->o->calib_data[input] + (size_t)s * q->in_bytes[input];
}

/* Copy sample s into the session's inputs (input order of the model). */
static ert_status feed(qctx *q, ert_session *sess, int s) {
    for (int i = 0; i < q->m->n_inputs; i++) {
        ert_status st = ert_session_set_input(sess, q->in_slot[i], sample(q, i, s), q->in_bytes[i]);
        if (st != ERT_OK) return st;
    }
    return ERT_OK;
}

static ert_status open_session(qctx *q, const ert_model *m, ert_session **out) {
    ert_status st = ert_session_create(m, &q->so, out);
    if (st != ERT_OK) return st;
    for (int i = 0; i < q->m->n_inputs; i++) {
        int idx = -1;
        st = ert_session_find_input(*out, q->m->tensors[q->m->inputs[i]].name, &idx);
        if (st != ERT_OK) break;
        ert_tensor_info ti;
        ert_session_input_info(*out, idx, &ti);
        size_t nb = ert_dtype_size(ti.dtype);
        for (int d = 0; d < ti.ndim; d++) nb *= (size_t)ti.dims[d];
        if (q->in_bytes[i] == 0) q->in_bytes[i] = nb;
        q->in_slot[i] = idx;
    }
    if (st != ERT_OK) {
        ert_session_free(*out);
        *out = NULL;
    }
    return st;
}

/* ------------------------------------------------------------------ step 1 */

static ert_status mark_layers(qctx *q) {
    const ert_model *m = q->m;
    for (int i = 0; i < m->n_nodes; i++) {
        q->cand[i] = ert_qdq_is_candidate(m, &m->nodes[i]);
        q->state[i] = ERT_QUANT_QUANTIZED;
    }
    const char *pats = q->o->keep_float;
    while (pats && *pats) {
        const char *end = strchr(pats, ',');
        size_t len = end ? (size_t)(end - pats) : strlen(pats);
        char pat[256];
        if (len >= sizeof pat) return ert_set_error(q->ctx, ERT_E_ARG, "keep_float: a pattern over %zu bytes", sizeof pat - 1);
        memcpy(pat, pats, len);
        pat[len] = 0;
        int hits = 0;
        for (int i = 0; i < m->n_nodes; i++)
            if (q->cand[i] && len && fnmatch(pat, m->nodes[i].name, 0) == 0) {
                q->state[i] = ERT_QUANT_KEEP_PATTERN;
                hits++;
            }
        if (len && !hits)
            return ert_set_error(q->ctx, ERT_E_NOT_FOUND, "keep_float: pattern '%s' matches no Conv/Gemm/MatMul/Add layer",
                                 pat);
        pats = end ? end + 1 : NULL;
    }
    int n = 0;
    for (int i = 0; i < m->n_nodes; i++) n += q->cand[i];
    if (n == 0) return ert_set_error(q->ctx, ERT_E_UNSUPPORTED, "the model has no Conv, Gemm, MatMul or Add layer to quantize");
    return ERT_OK;
}

/* ------------------------------------------------------------------ step 2 */

static bool is_graph_input(const ert_model *m, int32_t t, int *which) {
    for (int i = 0; i < m->n_inputs; i++)
        if (m->inputs[i] == t) return *which = i, true;
    return false;
}

/* Where calibrated tensor k is read: a graph input (its sample) or an output
 * of the calibration session. */
typedef struct csrc {
    int input;                /* >= 0: graph input index */
    int output;               /* else session output index */
} csrc;

static ert_status check_inputs_finite(qctx *q, int s) {
    for (int i = 0; i < q->m->n_inputs; i++) {
        if (q->m->tensors[q->m->inputs[i]].dtype != ERT_DTYPE_F32) continue;
        const float *x = sample(q, i, s);
        for (size_t k = 0; k < q->in_bytes[i] / sizeof(float); k++)
            if (!isfinite(x[k]))
                return ert_set_error(q->ctx, ERT_E_ARG, "calibration sample %d: input '%s' element %zu is %s", s,
                                     q->m->tensors[q->m->inputs[i]].name, k, isnan(x[k]) ? "NaN" : "infinite");
    }
    return ERT_OK;
}

static ert_status calibrate(qctx *q) {
    const ert_model *m = q->m;
    ert_status st = ERT_OK;
    int32_t *extra = malloc((size_t)(q->n_calib + 1) * sizeof *extra);
    csrc *src = malloc((size_t)(q->n_calib + 1) * sizeof *src);
    ert_model *cm = NULL;
    ert_session *s = NULL;
    if (!extra || !src) {
        free(extra);
        free(src);
        return oom(q);
    }
    int n_extra = 0;
    for (int k = 0; k < q->n_calib; k++) {
        int32_t t = q->calib[k];
        src[k].input = -1;
        src[k].output = -1;
        if (is_graph_input(m, t, &src[k].input)) {
            if (m->tensors[t].dtype != ERT_DTYPE_F32) {
                free(extra);
                free(src);
                return ert_set_error(q->ctx, ERT_E_UNSUPPORTED, "input '%s' is %s: calibration reads f32 inputs",
                                     m->tensors[t].name, ert_dtype_name(m->tensors[t].dtype));
            }
            continue;
        }
        for (int i = 0; i < m->n_outputs; i++)
            if (m->outputs[i] == t) src[k].output = i;
        if (src[k].output < 0) {
            src[k].output = m->n_outputs + n_extra;
            extra[n_extra++] = t;
        }
    }
    st = ert_qdq_with_outputs(m, extra, n_extra, &cm);
    if (st == ERT_OK) st = open_session(q, cm, &s);
    if (st != ERT_OK) goto done;
    /* output 0: shape and the float reference */
    ert_tensor_info oi;
    ert_session_output_info(s, 0, &oi);
    q->out_n = 1;
    for (int d = 0; d < oi.ndim; d++) q->out_n *= oi.dims[d];
    q->classes = oi.ndim == 2 && oi.dims[0] == 1 && oi.dims[1] > 1 ? oi.dims[1] : 0;
    if (oi.dtype != ERT_DTYPE_F32) {
        st = ert_set_error(q->ctx, ERT_E_UNSUPPORTED, "output 0 '%s' is %s: the quantizer compares f32 outputs", oi.name,
                           ert_dtype_name(oi.dtype));
        goto done;
    }
    for (int k = 0; k < q->n_calib; k++) {
        if (src[k].input >= 0) continue;
        ert_tensor_info ti;
        ert_session_output_info(s, src[k].output, &ti);
        if (ti.dtype != ERT_DTYPE_F32) {
            st = ert_set_error(q->ctx, ERT_E_UNSUPPORTED, "tensor '%s' read by a layer is %s, not f32",
                               m->tensors[q->calib[k]].name, ert_dtype_name(ti.dtype));
            goto done;
        }
    }
    for (int smp = 0; q->o->labels && smp < q->n_samples; smp++)
        if (q->classes == 0 || q->o->labels[smp] < 0 || q->o->labels[smp] >= q->classes) {
            st = q->classes == 0 ? ert_set_error(q->ctx, ERT_E_ARG, "labels given, but output 0 '%s' is not (N, classes)",
                                                 oi.name)
                                 : ert_set_error(q->ctx, ERT_E_ARG, "label %lld of sample %d is outside [0, %lld)",
                                                 (long long)q->o->labels[smp], smp, (long long)q->classes);
            goto done;
        }
    size_t ref_bytes = (size_t)q->out_n * sizeof(float);
    if (ref_bytes && (size_t)q->n_samples <= REF_CAP_BYTES / ref_bytes) {
        q->ref = malloc(ref_bytes * (size_t)q->n_samples);
        if (!q->ref) {
            st = oom(q);
            goto done;
        }
    }
    int passes = q->o->method == ERT_CALIB_MINMAX ? 1 : 2;
    for (int pass = 0; pass < passes && st == ERT_OK; pass++) {
        for (int smp = 0; smp < q->n_samples && st == ERT_OK; smp++) {
            if (pass == 0 && (st = check_inputs_finite(q, smp)) != ERT_OK) break;
            if ((st = feed(q, s, smp)) != ERT_OK || (st = ert_session_run(s)) != ERT_OK) break;
            if (pass == 0 && q->ref) {
                const void *y;
                ert_session_output_data(s, 0, &y);
                memcpy(q->ref + (size_t)smp * (size_t)q->out_n, y, ref_bytes);
            }
            for (int k = 0; k < q->n_calib; k++) {
                const float *x;
                int64_t n;
                if (src[k].input >= 0) {
                    x = sample(q, src[k].input, smp);
                    n = (int64_t)(q->in_bytes[src[k].input] / sizeof(float));
                } else {
                    const void *y;
                    ert_tensor_info ti;
                    ert_session_output_data(s, src[k].output, &y);
                    ert_session_output_info(s, src[k].output, &ti);
                    x = y;
                    n = 1;
                    for (int d = 0; d < ti.ndim; d++) n *= ti.dims[d];
                }
                if (pass == 1) {
                    ert_calib_hist(&q->stat[k], x, n);
                    continue;
                }
                int64_t bad = ert_calib_minmax(&q->stat[k], x, n);
                if (bad >= 0) {
                    st = ert_set_error(q->ctx, ERT_E_ARG,
                                       "calibration sample %d: tensor '%s' (computed by the float model) holds %s at "
                                       "element %lld",
                                       smp, m->tensors[q->calib[k]].name, isnan(x[bad]) ? "NaN" : "an infinity",
                                       (long long)bad);
                    break;
                }
            }
        }
    }
    if (st != ERT_OK) goto done;
    double pct = q->o->percentile > 0 ? q->o->percentile : 99.99;
    for (int t = 0; t < m->n_tensors; t++) q->amax[t] = q->amin[t] = -1;
    for (int k = 0; k < q->n_calib; k++)
        ert_calib_range(&q->stat[k], q->o->method, pct, q->asym, &q->amin[q->calib[k]], &q->amax[q->calib[k]]);
done:
    ert_session_free(s);
    ert_model_free(cm);
    free(extra);
    free(src);
    return st;
}

/* ------------------------------------------------------------------ step 3 */

static int64_t argmax(const float *y, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (y[i] > y[b]) b = i;
    return b;
}

/* Run qm over the set and compare output 0 with the float reference:
 * q->rel_l2, q->drop, q->top1_f, q->top1_q. */
static ert_status measure(qctx *q, const ert_model *qm) {
    ert_session *s = NULL, *fs = NULL;
    ert_status st = open_session(q, qm, &s);
    if (st == ERT_OK && !q->ref) st = open_session(q, q->m, &fs);
    double num = 0, den = 0;
    int64_t hit_f = 0, hit_q = 0, same = 0;
    for (int smp = 0; smp < q->n_samples && st == ERT_OK; smp++) {
        const void *yq, *yf;
        if ((st = feed(q, s, smp)) != ERT_OK || (st = ert_session_run(s)) != ERT_OK) break;
        ert_session_output_data(s, 0, &yq);
        if (fs) {
            if ((st = feed(q, fs, smp)) != ERT_OK || (st = ert_session_run(fs)) != ERT_OK) break;
            ert_session_output_data(fs, 0, &yf);
        } else {
            yf = q->ref + (size_t)smp * (size_t)q->out_n;
        }
        const float *a = yq, *b = yf;
        for (int64_t i = 0; i < q->out_n; i++) {
            double d = (double)a[i] - b[i];
            num += d * d;
            den += (double)b[i] * b[i];
        }
        if (q->classes) {
            int64_t cq = argmax(a, q->classes), cf = argmax(b, q->classes);
            same += cq == cf;
            if (q->o->labels) {
                hit_f += cf == q->o->labels[smp];
                hit_q += cq == q->o->labels[smp];
            }
        }
    }
    ert_session_free(s);
    ert_session_free(fs);
    if (st != ERT_OK) return st;
    q->rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    q->top1_f = q->top1_q = NAN;
    if (q->classes && q->o->labels) {
        q->top1_f = 100.0 * (double)hit_f / q->n_samples;
        q->top1_q = 100.0 * (double)hit_q / q->n_samples;
        q->drop = q->top1_f - q->top1_q;
    } else if (q->classes) {
        q->drop = 100.0 * (double)(q->n_samples - same) / q->n_samples;
    } else {
        q->drop = 100.0 * q->rel_l2;
    }
    return ERT_OK;
}

/* Build the model quantizing the layers in `on` and measure it. */
static ert_status build_measure(qctx *q, const bool *on, ert_model **keep) {
    ert_qdq_plan plan = {.amax = q->amax, .amin = q->asym ? q->amin : NULL, .quantize = on,
                         .per_tensor = q->o->per_tensor != 0};
    ert_model *qm = NULL;
    ert_status st = ert_qdq_build(q->m, &plan, &qm);
    if (st == ERT_OK) st = measure(q, qm);
    if (st == ERT_OK && keep) *keep = qm;
    else ert_model_free(qm);
    return st;
}

static ert_status sensitivity(qctx *q, bool *on) {
    const ert_model *m = q->m;
    bool *one = calloc((size_t)m->n_nodes + 1, sizeof *one);
    if (!one) return oom(q);
    ert_status st = ERT_OK;
    for (int i = 0; i < m->n_nodes && st == ERT_OK; i++) {
        if (!on[i]) continue;
        one[i] = true;
        st = build_measure(q, one, NULL);
        one[i] = false;
        q->layer_l2[i] = q->rel_l2;
        q->layer_drop[i] = q->drop;
        ert_log(q->ctx, ERT_LOG_INFO, "quantize: layer '%s' alone: rel L2 %.3g, drop %.3g", m->nodes[i].name, q->rel_l2,
                q->drop);
    }
    free(one);
    if (st != ERT_OK || !(q->o->max_drop > 0)) return st;
    for (;;) {
        if ((st = build_measure(q, on, NULL)) != ERT_OK) return st;
        ert_log(q->ctx, ERT_LOG_INFO, "quantize: drop %.4g with the current layers (budget %.4g)", q->drop,
                (double)q->o->max_drop);
        if (q->drop <= q->o->max_drop) return ERT_OK;
        int worst = -1;
        for (int i = 0; i < m->n_nodes; i++) {
            if (!on[i]) continue;
            if (worst < 0 || q->layer_drop[i] > q->layer_drop[worst] ||
                (q->layer_drop[i] == q->layer_drop[worst] && q->layer_l2[i] > q->layer_l2[worst]))
                worst = i;
        }
        if (worst < 0) return ERT_OK; /* every layer float: the drop is the float model's own (0) */
        on[worst] = false;
        q->state[worst] = ERT_QUANT_KEEP_DROP;
    }
}

/* ------------------------------------------------------------------ report */

void ert_quantize_report_free(ert_quantize_report *r) {
    if (!r) return;
    for (int k = 0; k < r->n_ranges; k++) free((char *)r->ranges[k].tensor);
    for (int k = 0; k < r->n_layers; k++) {
        free((char *)r->layers[k].node);
    }
    free(r->ranges);
    free(r->layers);
    memset(r, 0, sizeof *r);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static ert_status fill_report(qctx *q, const bool *on, ert_quantize_report *r) {
    const ert_model *m = q->m;
    memset(r, 0, sizeof *r);
    r->n_samples = q->n_samples;
    int32_t *want = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *want);
    if (!want) return oom(q);
    ert_qdq_tensors(m, on, want);
    int nr = 0, nl = 0;
    for (int t = 0; t < m->n_tensors; t++) nr += want[t] >= 0;
    for (int i = 0; i < m->n_nodes; i++) nl += q->cand[i];
    r->ranges = calloc((size_t)nr + 1, sizeof *r->ranges);
    r->layers = calloc((size_t)nl + 1, sizeof *r->layers);
    if (!r->ranges || !r->layers) {
        free(want);
        return oom(q);
    }
    for (int t = 0; t < m->n_tensors; t++) {
        if (want[t] < 0) continue;
        int k = 0;
        while (q->calib[k] != want[t]) k++;
        ert_quant_range *g = &r->ranges[r->n_ranges];
        if (!(g->tensor = dup_str(m->tensors[t].name))) break;
        r->n_ranges++;
        g->min = (float)q->stat[k].min;
        g->max = (float)q->stat[k].max;
        const int32_t u = want[t];
        g->lo = (float)q->amin[u];
        g->hi = (float)q->amax[u];
        g->amax = q->asym ? fmaxf(-g->lo, g->hi) : g->hi;
        int32_t zp;
        ert_qdq_act_params(q->amin[u], q->amax[u], q->asym, &g->scale, &zp);
        g->zero_point = zp;
    }
    free(want);
    for (int i = 0; i < m->n_nodes; i++) {
        if (!q->cand[i]) continue;
        ert_quant_layer *l = &r->layers[r->n_layers];
        if (!(l->node = dup_str(m->nodes[i].name))) break;
        r->n_layers++;
        l->op = ert_op_get(m->nodes[i].op)->name;
        l->state = q->state[i];
        l->rel_l2 = q->layer_l2[i];
        l->drop = q->layer_drop[i];
        r->n_kept_float += l->state != ERT_QUANT_QUANTIZED;
    }
    if (r->n_ranges != nr || r->n_layers != nl) return oom(q);
    r->float_top1 = q->top1_f;
    r->quant_top1 = q->top1_q;
    r->rel_l2 = q->rel_l2;
    r->drop = q->drop;
    return ERT_OK;
}

/* ------------------------------------------------------------------ entry */

static ert_status check_options(ert_context *ctx, const ert_model *m, const ert_quantize_options *o) {
    if (o->version < 0 || o->version > ERT_QUANTIZE_OPTIONS_VERSION)
        return ert_set_error(ctx, ERT_E_ARG, "quantize options version %d: this library knows up to %d", o->version,
                             ERT_QUANTIZE_OPTIONS_VERSION);
    if (o->version >= 2 && o->asymmetric != 0 && o->asymmetric != 1)
        return ert_set_error(ctx, ERT_E_ARG, "asymmetric %d: 0 or 1", o->asymmetric);
    if ((unsigned)o->method > ERT_CALIB_ENTROPY) return ert_set_error(ctx, ERT_E_ARG, "unknown calibration method %d", (int)o->method);
    if (!(o->percentile >= 0 && o->percentile <= 100))
        return ert_set_error(ctx, ERT_E_ARG, "percentile %g is outside (0, 100]", (double)o->percentile);
    if (!(o->max_drop >= 0) || isinf(o->max_drop))
        return ert_set_error(ctx, ERT_E_ARG, "max_drop %g must be finite and >= 0", (double)o->max_drop);
    if (o->n_samples < 1) return ert_set_error(ctx, ERT_E_ARG, "the calibration set is empty (n_samples %d)", o->n_samples);
    if (!o->calib_data) return ert_set_error(ctx, ERT_E_ARG, "no calibration data (calib_data NULL)");
    for (int i = 0; i < m->n_inputs; i++)
        if (!o->calib_data[i])
            return ert_set_error(ctx, ERT_E_ARG, "no calibration data for input '%s'", m->tensors[m->inputs[i]].name);
    if (o->n_threads < 0 || o->n_input_shapes < 0 || (o->n_input_shapes && !o->input_shapes))
        return ert_set_error(ctx, ERT_E_ARG, "bad n_threads or input_shapes");
    return ERT_OK;
}

static void qctx_free(qctx *q) {
    free(q->in_bytes);
    free(q->in_slot);
    free(q->cand);
    free(q->state);
    free(q->want);
    free(q->stat);
    free(q->calib);
    free(q->amax);
    free(q->amin);
    free(q->ref);
    free(q->layer_l2);
    free(q->layer_drop);
}

ert_status ert_model_quantize(const ert_model *m, const ert_quantize_options *o, ert_model **out) {
    if (!m) return ERT_E_ARG;
    ert_context *ctx = m->ctx;
    if (!o || !out) return ert_set_error(ctx, ERT_E_ARG, "ert_model_quantize: NULL options or out");
    if (o->report) memset(o->report, 0, sizeof *o->report);
    ert_status st = check_options(ctx, m, o);
    if (st != ERT_OK) return st;
    ert_model *folded = NULL; /* the model the rest works on: BatchNorms folded */
    if ((st = ert_qdq_fold_bn(m, &folded)) != ERT_OK) return st;
    m = folded;
    qctx q = {.m = m, .o = o, .ctx = ctx, .n_samples = o->n_samples};
    q.so = (ert_session_options){.device = ERT_DEVICE_CPU, .batch = 1, .n_threads = o->n_threads ? o->n_threads : 1,
                                 .input_shapes = o->input_shapes, .n_input_shapes = o->n_input_shapes};
    size_t nt = (size_t)m->n_tensors + 1, nn = (size_t)m->n_nodes + 1;
    q.in_bytes = calloc((size_t)m->n_inputs + 1, sizeof *q.in_bytes);
    q.in_slot = calloc((size_t)m->n_inputs + 1, sizeof *q.in_slot);
    q.cand = calloc(nn, sizeof *q.cand);
    q.state = calloc(nn, sizeof *q.state);
    q.want = malloc(nt * sizeof *q.want);
    q.calib = malloc(nt * sizeof *q.calib);
    q.amax = malloc(nt * sizeof *q.amax);
    q.amin = malloc(nt * sizeof *q.amin);
    q.asym = o->version >= 2 && o->asymmetric;
    q.layer_l2 = malloc(nn * sizeof *q.layer_l2);
    q.layer_drop = malloc(nn * sizeof *q.layer_drop);
    bool *on = calloc(nn, sizeof *on);
    ert_model *res = NULL;
    if (!q.in_bytes || !q.in_slot || !q.cand || !q.state || !q.want || !q.calib || !q.amax || !q.amin || !q.layer_l2 ||
        !q.layer_drop || !on) {
        st = oom(&q);
        goto done;
    }
    for (size_t i = 0; i < nn; i++) q.layer_l2[i] = q.layer_drop[i] = NAN;
    if ((st = mark_layers(&q)) != ERT_OK) goto done;
    for (int i = 0; i < m->n_nodes; i++) on[i] = q.cand[i] && q.state[i] == ERT_QUANT_QUANTIZED;
    /* every tensor some layer may quantize (patterns left out): calibrated once */
    ert_qdq_tensors(m, on, q.want);
    for (int t = 0; t < m->n_tensors; t++)
        if (q.want[t] >= 0) q.calib[q.n_calib++] = t;
    q.stat = malloc((size_t)(q.n_calib + 1) * sizeof *q.stat);
    if (!q.stat) {
        st = oom(&q);
        goto done;
    }
    for (int k = 0; k < q.n_calib; k++) ert_calib_init(&q.stat[k]);
    ert_log(ctx, ERT_LOG_INFO, "quantize: calibrating %d tensors on %d samples", q.n_calib, q.n_samples);
    if ((st = calibrate(&q)) != ERT_OK) goto done;
    if (o->sensitivity || o->max_drop > 0)
        if ((st = sensitivity(&q, on)) != ERT_OK) goto done;
    if ((st = build_measure(&q, on, &res)) != ERT_OK) goto done;
    if (o->report && (st = fill_report(&q, on, o->report)) != ERT_OK) ert_quantize_report_free(o->report);
done:
    qctx_free(&q);
    free(on);
    ert_model_free(folded);
    if (st != ERT_OK) {
        ert_model_free(res);
        return st;
    }
    *out = res;
    return ERT_OK;
}
