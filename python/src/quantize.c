/* Post-training int8 quantization: ert_model_quantize (include/edgert.h)
 * with the GIL released, its report as a dict. The Python layer
 * (edgert.quantize) checks the calibration arrays (dtype, shape, sample
 * count) and keeps them alive; here they arrive as one address per input. */
#include "ext.h"

#include <math.h>
#include <string.h>

#define PY_Q_MAX_INPUTS 16

static PyObject *num_or_none(double v) { return isfinite(v) ? PyFloat_FromDouble(v) : py_ref(Py_None); }

static const char *keep_name(ert_quant_keep k) {
    return k == ERT_QUANT_QUANTIZED ? "int8" : k == ERT_QUANT_KEEP_PATTERN ? "keep_float" : "max_drop";
}

/* {n_samples, float_top1, quant_top1, rel_l2, drop, ranges: [{tensor, min,
 * max, amax, scale, lo, hi, zero_point}], layers: [{node, op, state, rel_l2, drop}],
 * kept_float: [node]}; NaN (not measured) becomes None. */
static PyObject *report_dict(const ert_quantize_report *r) {
    PyObject *ranges = PyList_New(r->n_ranges), *layers = PyList_New(r->n_layers), *kept = PyList_New(0);
    if (!ranges || !layers || !kept) goto fail;
    for (int k = 0; k < r->n_ranges; k++) {
        const ert_quant_range *g = &r->ranges[k];
        PyObject *d = Py_BuildValue("{sssdsdsdsdsdsdsi}", "tensor", g->tensor, "min", (double)g->min, "max",
                                    (double)g->max, "amax", (double)g->amax, "scale", (double)g->scale, "lo",
                                    (double)g->lo, "hi", (double)g->hi, "zero_point", g->zero_point);
        if (!d) goto fail;
        PyList_SetItem(ranges, k, d);
    }
    for (int k = 0; k < r->n_layers; k++) {
        const ert_quant_layer *l = &r->layers[k];
        PyObject *d = Py_BuildValue("{sssssssNsN}", "node", l->node, "op", l->op, "state", keep_name(l->state),
                                    "rel_l2", num_or_none(l->rel_l2), "drop", num_or_none(l->drop));
        if (!d) goto fail;
        PyList_SetItem(layers, k, d);
        if (l->state != ERT_QUANT_QUANTIZED) {
            PyObject *n = PyUnicode_FromString(l->node);
            int bad = !n || PyList_Append(kept, n) < 0;
            Py_XDECREF(n);
            if (bad) goto fail;
        }
    }
    return Py_BuildValue("{sisNsNsNsNsNsNsN}", "n_samples", r->n_samples, "float_top1", num_or_none(r->float_top1),
                         "quant_top1", num_or_none(r->quant_top1), "rel_l2", num_or_none(r->rel_l2), "drop",
                         num_or_none(r->drop), "ranges", ranges, "layers", layers, "kept_float", kept);
fail:
    Py_XDECREF(ranges);
    Py_XDECREF(layers);
    Py_XDECREF(kept);
    return NULL;
}

/* quantize(model, calib_addresses, n_samples, method, percentile, per_tensor,
 * keep_float or None, max_drop, sensitivity, labels_address or None, shapes,
 * threads, want_report, asymmetric, equalize, bias_correct) -> (model capsule,
 * report dict or None); equalize and bias_correct: 1 on, -1 off, 0 default. */
static PyObject *m_quantize(PyObject *self, PyObject *args) {
    PyObject *cap, *addrs, *labels_obj, *shapes;
    const char *keep = NULL;
    int n_samples, method, per_tensor, sensitivity, threads, want_report, asymmetric, equalize, bias_correct;
    float percentile, max_drop;
    if (!PyArg_ParseTuple(args, "OOiifpzfpOOippii", &cap, &addrs, &n_samples, &method, &percentile, &per_tensor,
                          &keep, &max_drop, &sensitivity, &labels_obj, &shapes, &threads, &want_report, &asymmetric,
                          &equalize, &bias_correct))
        return NULL;
    py_model *pm = py_model_get(cap);
    if (!pm) return NULL;
    const void *calib[PY_Q_MAX_INPUTS];
    Py_ssize_t n_in = PySequence_Size(addrs);
    if (n_in < 0) return NULL;
    if (n_in > PY_Q_MAX_INPUTS) return py_raise(ERT_E_ARG, "quantize: at most 16 inputs");
    for (Py_ssize_t i = 0; i < n_in; i++) {
        PyObject *a = PySequence_GetItem(addrs, i);
        void *p = NULL;
        int bad = !a || py_addr(a, &p) < 0;
        Py_XDECREF(a);
        if (bad) return NULL;
        calib[i] = p;
    }
    ert_input_shape shape_buf[PY_Q_MAX_INPUTS];
    int n_shapes = py_parse_shapes(shapes, shape_buf, PY_Q_MAX_INPUTS);
    if (n_shapes < 0) return NULL;
    void *labels = NULL;
    if (labels_obj != Py_None && py_addr(labels_obj, &labels) < 0) return NULL;
    ert_quantize_report report;
    ert_quantize_options qo = {.version = ERT_QUANTIZE_OPTIONS_VERSION,
                               .method = (ert_calib_method)method,
                               .percentile = percentile,
                               .per_tensor = per_tensor,
                               .keep_float = keep,
                               .max_drop = max_drop,
                               .sensitivity = sensitivity,
                               .n_samples = n_samples,
                               .calib_data = calib,
                               .labels = labels,
                               .input_shapes = n_shapes ? shape_buf : NULL,
                               .n_input_shapes = n_shapes,
                               .n_threads = threads,
                               .report = want_report ? &report : NULL,
                               .asymmetric = asymmetric,
                               .equalize = equalize,
                               .bias_correct = bias_correct};
    ert_model *q = NULL;
    ert_status st;
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(pm);
    st = ert_model_quantize(pm->m, &qo, &q);
    Py_END_ALLOW_THREADS
    if (st != ERT_OK) {
        py_raise_ctx(pm, st); /* still holding the lock: ctx's message is ours to read */
        py_model_unlock(pm);
        return NULL;
    }
    py_model_unlock(pm);
    PyObject *rep = want_report ? report_dict(&report) : py_ref(Py_None);
    if (want_report) ert_quantize_report_free(&report);
    /* the new model lives on the float model's context, which it keeps alive;
     * the float model itself may be closed (not counted) */
    PyObject *mcap = py_model_wrap_shared(cap, q, 0);
    if (!rep || !mcap) {
        Py_XDECREF(rep);
        Py_XDECREF(mcap);
        return NULL;
    }
    return Py_BuildValue("(NN)", mcap, rep);
}

PyMethodDef py_quantize_methods[] = {
    {"quantize", m_quantize, METH_VARARGS,
     "quantize(model, calib_addresses, n_samples, method, percentile, per_tensor, keep_float, max_drop, "
     "sensitivity, labels_address, shapes, threads, want_report, asymmetric, equalize, bias_correct) -> "
     "(model capsule, report or None)"},
    {NULL, NULL, 0, NULL},
};
