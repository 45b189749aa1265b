/*
 * ert_model_quantize: post-training quantization (the contract is in
 * edgert.h, "quantization").
 *
 * Steps:
 *   0. BatchNorms folded into their convs (ert_qdq_fold_bn); with bias
 *      correction, a zero bias for every Conv without one; with
 *      equalisation, one pass over the set measures max |x| per channel
 *      between each Conv -> [Relu] -> Conv pair and the pairs are rescaled
 *      (runtime/passes/qdq_equalize.c). The rest sees this model.
 *   1. Layers: Conv/Gemm/MatMul with a constant weight, Add of two
 *      activations (ert_qdq_is_candidate); keep_float patterns mark theirs.
 *   2. Calibration: a copy of the model that also outputs every tensor any
 *      layer would quantize; a CPU session at batch 1 runs each sample;
 *      pass 1 records min/max (and stops at the first NaN/inf, naming the
 *      sample and tensor) and keeps output 0 as the float reference; each
 *      tensor's span is narrowed to what its readers tell apart
 *      (reader_bounds); pass 2 (percentile, entropy, mse) fills the
 *      histograms; ranges per method (runtime/calib.c). Graph inputs are
 *      measured from the samples.
 *   3. Sensitivity (on request or with max_drop): each layer quantized alone
 *      (ert_qdq_build), run over the set, output 0 compared with the float
 *      reference. With max_drop, the whole model is measured and the worst
 *      layer (by its drop alone, then its error) returned to float until
 *      the drop is within budget.
 *   4. The result: ert_qdq_build of the final plan; with bias correction,
 *      the float model's per-channel output means of every quantized
 *      Conv/Gemm (one pass), then per layer in graph order one pass of the
 *      quantized model and its bias corrected; its error is measured for
 *      the report.
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

/* What equalize = 0 and bias_correct = 0 mean (see edgert.h for why). */
#define ERT_QUANTIZE_DEFAULT_EQUALIZE 1
#define ERT_QUANTIZE_DEFAULT_BIAS_CORRECT 0

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

/* The values of tensor t its readers tell apart, [*lo, *hi]: when every
 * reader is a Relu (0, inf), HardSwish (-3, inf), HardSigmoid
 * (-beta / alpha, (1 - beta) / alpha) or Clip with constant bounds, values
 * beyond give the same results as the bounds; else (-inf, inf). */
static void reader_bounds(const ert_model *m, int32_t t, double *lo, double *hi) {
    *lo = -INFINITY;
    *hi = INFINITY;
    for (int i = 0; i < m->n_outputs; i++)
        if (m->outputs[i] == t) return;
    double l = INFINITY, h = -INFINITY;
    int n = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *nd = &m->nodes[i];
        for (int k = 0; k < nd->n_in; k++) {
            if (nd->in[k] != t) continue;
            if (k != 0) return;
            double f = -INFINITY, c = INFINITY;
            if (nd->op == ERT_OP_RELU) {
                f = 0;
            } else if (nd->op == ERT_OP_HARD_SWISH) {
                f = -3;
            } else if (nd->op == ERT_OP_HARD_SIGMOID) {
                const double al = ert_attr_float(nd, "alpha", 0.2f), be = ert_attr_float(nd, "beta", 0.5f);
                if (!(al > 0)) return;
                f = -be / al, c = (1 - be) / al;
            } else if (nd->op == ERT_OP_CLIP) {
                for (int j = 1; j < nd->n_in && j < 3; j++) {
                    const int32_t b = nd->in[j];
                    if (b < 0) continue;
                    const ert_tensor *bt = &m->tensors[b];
                    int64_t ne = 0;
                    if (bt->role != ERT_ROLE_WEIGHT || bt->dtype != ERT_DTYPE_F32 || !bt->data ||
                        !ert_dims_nelems(bt->ndim, bt->dims, &ne) || ne != 1)
                        return;
                    const double v = *(const float *)bt->data;
                    if (j == 1) f = v;
                    else c = v;
                }
            } else {
                return;
            }
            l = fmin(l, f);
            h = fmax(h, c);
            n++;
        }
    }
    if (n && l < h) *lo = l, *hi = h;
}

static void clamp_spans(qctx *q) {
    for (int k = 0; k < q->n_calib; k++) {
        double lo, hi;
        reader_bounds(q->m, q->calib[k], &lo, &hi);
        ert_calib_clamp(&q->stat[k], lo, hi);
    }
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
        if (pass == 1) clamp_spans(q); /* the histograms cover only what the readers tell apart */
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
    if (passes == 1) clamp_spans(q);
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

/* ------------------------------------------------------------------ equalisation */

/* Run m with the tensors `extra` as outputs over the set; after each sample
 * fn(arg, k, data, dims, ndim) for each extra tensor k. */
typedef void (*visit_fn)(void *arg, int k, const float *x, const int64_t *dims, int ndim);

static ert_status visit_tensors(qctx *q, const ert_model *m, const int32_t *extra, int n_extra, visit_fn fn, void *arg) {
    ert_model *cm = NULL;
    ert_session *s = NULL;
    int *slot = malloc(((size_t)n_extra + 1) * sizeof *slot);
    if (!slot) return oom(q);
    ert_status st = ert_qdq_with_outputs(m, extra, n_extra, &cm);
    if (st == ERT_OK) st = open_session(q, cm, &s);
    for (int k = 0; k < n_extra && st == ERT_OK; k++) {
        st = ert_session_find_output(s, m->tensors[extra[k]].name, &slot[k]);
        ert_tensor_info ti;
        if (st == ERT_OK && (ert_session_output_info(s, slot[k], &ti), ti.dtype != ERT_DTYPE_F32))
            st = ert_set_error(q->ctx, ERT_E_UNSUPPORTED, "tensor '%s' is %s, not f32", ti.name, ert_dtype_name(ti.dtype));
    }
    for (int smp = 0; smp < q->n_samples && st == ERT_OK; smp++) {
        if ((st = feed(q, s, smp)) != ERT_OK || (st = ert_session_run(s)) != ERT_OK) break;
        for (int k = 0; k < n_extra; k++) {
            const void *y;
            ert_tensor_info ti;
            ert_session_output_data(s, slot[k], &y);
            ert_session_output_info(s, slot[k], &ti);
            fn(arg, k, y, ti.dims, ti.ndim);
        }
    }
    ert_session_free(s);
    ert_model_free(cm);
    free(slot);
    return st;
}

/* Per-channel statistics of (1, C, ...) tensors: max |x| or the sum of x
 * (and the number of values summed per channel). */
typedef struct chan_acc {
    double **v;               /* per tensor: C values */
    const int64_t *channels;  /* per tensor: C */
    bool sum;                 /* sum (else max |x|) */
    double *count;            /* sum: per tensor, values per channel so far */
} chan_acc;

ERT_NO_VECTORIZE static void chan_visit(void *arg, int k, const float *x, const int64_t *dims, int ndim) {
    chan_acc *a = arg;
    const int64_t c = ndim >= 2 ? dims[1] : 1;
    int64_t per = 1;
    for (int d = 2; d < ndim; d++) per *= dims[d];
    if (c != a->channels[k] || (ndim >= 1 && dims[0] != 1)) return; /* not (1, C, ...): left at 0 */
    if (a->sum) a->count[k] += (double)per;
    for (int64_t ch = 0; ch < c; ch++) {
        double v = a->v[k][ch];
        const float *p = x + ch * per;
        if (a->sum)
            for (int64_t i = 0; i < per; i++) v += p[i];
        else
            for (int64_t i = 0; i < per; i++) v = fmax(v, fabs((double)p[i]));
        a->v[k][ch] = v;
    }
}

/* Allocate n vectors of channels[k] doubles (zeroed); NULL on OOM. */
static double **chan_alloc(int n, const int64_t *channels) {
    double **v = calloc((size_t)n + 1, sizeof *v);
    for (int k = 0; v && k < n; k++)
        if (!(v[k] = calloc((size_t)channels[k] + 1, sizeof **v))) {
            for (int j = 0; j < k; j++) free(v[j]);
            free(v);
            v = NULL;
        }
    return v;
}

static void chan_free(double **v, int n) {
    for (int k = 0; v && k < n; k++) free(v[k]);
    free(v);
}

/* Cross-layer equalisation of m (owned, BatchNorms folded) in place:
 * measure max |mid| per channel of every pair over the set, rescale. */
static ert_status equalize(qctx *q, ert_model *m) {
    ert_cle_pair *pairs = NULL;
    int np = 0;
    ert_status st = ert_qdq_cle_pairs(m, &pairs, &np);
    if (st != ERT_OK || np == 0) {
        free(pairs);
        return st;
    }
    int32_t *mids = malloc((size_t)np * sizeof *mids);
    int64_t *ch = malloc((size_t)np * sizeof *ch);
    double **r = NULL;
    if (mids && ch) {
        for (int p = 0; p < np; p++) mids[p] = pairs[p].mid, ch[p] = pairs[p].channels;
        r = chan_alloc(np, ch);
    }
    if (!r) {
        st = oom(q);
    } else {
        chan_acc acc = {.v = r, .channels = ch, .sum = false};
        st = visit_tensors(q, m, mids, np, chan_visit, &acc);
    }
    if (st == ERT_OK) {
        int done = ert_qdq_equalize(m, pairs, np, (const double *const *)r);
        ert_log(q->ctx, ERT_LOG_INFO, "quantize: cross-layer equalisation rescaled %d of %d conv pairs", done, np);
    }
    chan_free(r, np);
    free(mids);
    free(ch);
    free(pairs);
    return st;
}

/* ------------------------------------------------------------------ bias correction */

/* The f32 or int32-through-DequantizeLinear bias of quantized layer `name`
 * in qm: its data, scale (NULL for f32) and channel count; false when the
 * layer has none that this can correct. */
static bool layer_bias(ert_model *qm, const char *name, void **data, const float **scale, int64_t *n, int32_t *out) {
    for (int i = 0; i < qm->n_nodes; i++) {
        const ert_node *nd = &qm->nodes[i];
        if (strcmp(nd->name, name) != 0) continue;
        if (nd->n_in < 3 || nd->in[2] < 0 || nd->n_out < 1) return false;
        *out = nd->out[0];
        int32_t b = nd->in[2];
        const ert_tensor *bt = &qm->tensors[b];
        if (bt->role == ERT_ROLE_WEIGHT && bt->dtype == ERT_DTYPE_F32 && bt->ndim == 1 && bt->data_owned) {
            *data = (void *)bt->data, *scale = NULL, *n = bt->dims[0];
            return true;
        }
        for (int j = 0; j < qm->n_nodes; j++) { /* DequantizeLinear(int32 q, f32 scale[n]) */
            const ert_node *dq = &qm->nodes[j];
            if (dq->n_out < 1 || dq->out[0] != b || dq->n_in < 2) continue;
            const ert_tensor *qt = &qm->tensors[dq->in[0]], *st = &qm->tensors[dq->in[1]];
            if (strcmp(ert_op_get(dq->op)->name, "DequantizeLinear") != 0 || qt->dtype != ERT_DTYPE_I32 ||
                qt->ndim != 1 || !qt->data_owned || st->dtype != ERT_DTYPE_F32 || st->ndim != 1 ||
                st->dims[0] != qt->dims[0])
                return false;
            *data = (void *)qt->data, *scale = st->data, *n = qt->dims[0];
            return true;
        }
        return false;
    }
    return false;
}

/* Empirical bias correction of qm (owned) in place: for every quantized
 * Conv/Gemm with a bias, in graph order, the per-channel mean of its output
 * over the set in qm (the layers before it already corrected) minus the
 * float model's is taken off its bias. */
static ert_status bias_correct(qctx *q, const bool *on, ert_model *qm) {
    const ert_model *m = q->m;
    int nl = 0;
    const size_t nn = (size_t)m->n_nodes + 1;
    int32_t *outs = malloc(nn * sizeof *outs);
    int *node = malloc(nn * sizeof *node);
    int64_t *ch = calloc(nn, sizeof *ch), cmax = 1; /* calloc: gcc -O3 + sanitizers saw entries past nl as read */
    double *fcount = calloc(nn, sizeof *fcount);
    if (!outs || !node || !ch || !fcount) {
        free(outs), free(node), free(ch), free(fcount);
        return oom(q);
    }
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *nd = &m->nodes[i];
        if (!on[i] || (nd->op != ERT_OP_CONV && nd->op != ERT_OP_GEMM) || nd->n_in < 3 || nd->in[2] < 0) continue;
        if (nd->op == ERT_OP_GEMM && ert_attr_float(nd, "beta", 1) != 1.0f) continue;
        const ert_tensor *b = &m->tensors[nd->in[2]];
        const int64_t c = b->ndim == 1 ? b->dims[0] : 0; /* output (1, C, ...): checked as the runs see it */
        if (c <= 0) continue;
        outs[nl] = nd->out[0], node[nl] = i, ch[nl] = c;
        cmax = c > cmax ? c : cmax;
        nl++;
    }
    double **fm = chan_alloc(nl, ch), **qv = chan_alloc(1, &cmax);
    ert_status st = fm && qv ? ERT_OK : oom(q);
    if (st == ERT_OK && nl) {
        chan_acc acc = {.v = fm, .channels = ch, .sum = true, .count = fcount};
        st = visit_tensors(q, m, outs, nl, chan_visit, &acc);
    }
    int fixed = 0;
    for (int l = 0; l < nl && st == ERT_OK; l++) {
        void *bd;
        const float *bs;
        int64_t n;
        int32_t yq;
        if (!layer_bias(qm, m->nodes[node[l]].name, &bd, &bs, &n, &yq) || n != ch[l] || !(fcount[l] > 0)) continue;
        double qcount = 0;
        memset(qv[0], 0, (size_t)n * sizeof **qv);
        chan_acc acc = {.v = qv, .channels = &ch[l], .sum = true, .count = &qcount};
        if ((st = visit_tensors(q, qm, &yq, 1, chan_visit, &acc)) != ERT_OK) break;
        if (qcount != fcount[l]) continue; /* not the same shape: leave it */
        for (int64_t c = 0; c < n; c++) {
            const double d = (qv[0][c] - fm[l][c]) / qcount; /* mean output error of channel c */
            if (bs) {
                int32_t *b = bd;
                const double v = (double)b[c] - nearbyint(d / bs[c]);
                b[c] = (int32_t)(v > INT32_MAX ? INT32_MAX : v < -INT32_MAX ? -INT32_MAX : v);
            } else {
                float *b = bd;
                b[c] = (float)((double)b[c] - d);
            }
        }
        fixed++;
    }
    if (st == ERT_OK) ert_log(q->ctx, ERT_LOG_INFO, "quantize: bias correction on %d of %d layers", fixed, nl);
    chan_free(fm, nl);
    chan_free(qv, 1);
    free(outs), free(node), free(ch), free(fcount);
    return st;
}

/* A zero bias for every Conv of m (owned) that has none, so that bias
 * correction can shift its output (the function is unchanged). */
static ert_status add_zero_biases(qctx *q, ert_model *m) {
    for (int i = 0; i < m->n_nodes; i++) {
        if (m->nodes[i].op != ERT_OP_CONV || m->nodes[i].n_in != 2 || m->nodes[i].in[1] < 0) continue;
        const ert_tensor *w = &m->tensors[m->nodes[i].in[1]];
        if (w->role != ERT_ROLE_WEIGHT || w->ndim < 3) continue;
        int64_t k = w->dims[0];
        char name[400];
        snprintf(name, sizeof name, "%s.zero_bias", m->nodes[i].name);
        float *z = calloc((size_t)k + 1, sizeof *z);
        int32_t *io = malloc(((size_t)m->nodes[i].n_out + 3) * sizeof *io);
        int32_t id = z && io ? ert_model_add_tensor(m, name, ERT_DTYPE_F32, ERT_ROLE_WEIGHT, 1, &k) : -1;
        if (id < 0) {
            free(z), free(io);
            return oom(q);
        }
        m->tensors[id].data = z;
        m->tensors[id].data_owned = true;
        ert_node *nd = &m->nodes[i];
        io[0] = nd->in[0], io[1] = nd->in[1], io[2] = id;
        memcpy(io + 3, nd->out, (size_t)nd->n_out * sizeof *io);
        free(nd->in);
        nd->in = io;
        nd->out = io + 3;
        nd->n_in = 3;
    }
    return ERT_OK;
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
    if ((unsigned)o->method > (o->version >= 3 ? ERT_CALIB_MSE : ERT_CALIB_ENTROPY))
        return ert_set_error(ctx, ERT_E_ARG, "unknown calibration method %d (options version %d)", (int)o->method,
                             o->version);
    if (o->version >= 3 && (o->equalize < -1 || o->equalize > 1 || o->bias_correct < -1 || o->bias_correct > 1))
        return ert_set_error(ctx, ERT_E_ARG, "equalize %d, bias_correct %d: each -1 (off), 0 (default) or 1 (on)",
                             o->equalize, o->bias_correct);
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
    ert_model *folded = NULL; /* the model the rest works on: BatchNorms folded (owned: equalised in place) */
    if ((st = ert_qdq_fold_bn(m, &folded)) != ERT_OK) return st;
    m = folded;
    const int cle = o->version >= 3 && o->equalize ? o->equalize > 0 : ERT_QUANTIZE_DEFAULT_EQUALIZE;
    const int bc = o->version >= 3 && o->bias_correct ? o->bias_correct > 0 : ERT_QUANTIZE_DEFAULT_BIAS_CORRECT;
    qctx q = {.m = m, .o = o, .ctx = ctx, .n_samples = o->n_samples};
    q.so = (ert_session_options){.device = ERT_DEVICE_CPU, .batch = 1, .n_threads = o->n_threads ? o->n_threads : 1,
                                 .input_shapes = o->input_shapes, .n_input_shapes = o->n_input_shapes};
    q.in_bytes = calloc((size_t)m->n_inputs + 1, sizeof *q.in_bytes);
    q.in_slot = calloc((size_t)m->n_inputs + 1, sizeof *q.in_slot);
    if (q.in_bytes && q.in_slot && bc) st = add_zero_biases(&q, folded);
    if (st == ERT_OK && q.in_bytes && q.in_slot && cle) st = equalize(&q, folded);
    if (st != ERT_OK) {
        qctx_free(&q);
        ert_model_free(folded);
        return st;
    }
    size_t nt = (size_t)m->n_tensors + 1, nn = (size_t)m->n_nodes + 1;
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
    if (bc && ((st = bias_correct(&q, on, res)) != ERT_OK || (st = measure(&q, res)) != ERT_OK)) goto done;
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
