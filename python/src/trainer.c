/* Trainers: create, step and eval (GIL released), checkpoints, export.
 * The batch arrives as addresses of numpy arrays the Python layer checked. */
#include "ext.h"

#include <string.h>

typedef struct py_trainer {
    py_model *pm;
    PyObject *model_cap; /* strong reference: the model outlives the trainer */
    ert_trainer *t;
} py_trainer;

static void trainer_free(py_trainer *pt) {
    if (!pt->t) return;
    ert_trainer *t = pt->t;
    pt->t = NULL;
    py_child_free(pt->pm, &pt->model_cap, NULL, t);
}

static void trainer_destroy(PyObject *cap) {
    py_trainer *pt = PyCapsule_GetPointer(cap, PY_TRAINER_CAPSULE);
    if (!pt) return;
    trainer_free(pt);
    PyMem_Free(pt);
}

static py_trainer *trainer_get(PyObject *cap) {
    py_trainer *pt = PyCapsule_GetPointer(cap, PY_TRAINER_CAPSULE);
    if (!pt) return NULL;
    if (!pt->t) {
        py_raise(ERT_E_STATE, "the trainer is closed");
        return NULL;
    }
    return pt;
}

/* trainer_create(model, device, precision, batch, threads, output, loss, label_smoothing,
 * lr, momentum, weight_decay, beta1, beta2, eps, clip_grad_norm, gamma, nesterov, optim,
 * schedule, warmup, step_size, min_lr, total_steps, pattern, trainable, last_n, bn, seed,
 * loss_scale): every field of ert_trainer_options the Python layer exposes, as one
 * tuple (see edgert/__init__.py: Trainer.__init__). plan=True only plans. */
static PyObject *trainer_make(PyObject *args, int plan_only) {
    PyObject *model_cap;
    const char *output = NULL, *pattern = NULL;
    int device, precision, batch, threads, loss_kind, optim_kind, nesterov, sched, warmup, step_size, total_steps,
        trainable, last_n, bn;
    float smoothing, lr, momentum, wd, beta1, beta2, eps, clip, gamma, min_lr, loss_scale;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "O" "iiii" "z" "if" "ffffffff" "iiiii" "fi" "ziii" "Kf", &model_cap, &device, &precision, &batch, &threads,
                          &output, &loss_kind, &smoothing, &lr, &momentum, &wd, &beta1, &beta2, &eps, &clip, &gamma,
                          &nesterov, &optim_kind, &sched, &warmup, &step_size, &min_lr, &total_steps, &pattern,
                          &trainable, &last_n, &bn, &seed, &loss_scale))
        return NULL;
    py_model *pm = py_model_get(model_cap);
    if (!pm) return NULL;
    ert_trainer_options to;
    memset(&to, 0, sizeof to);
    to.session.device = (ert_device)device;
    to.session.precision = (ert_dtype)precision;
    to.session.batch = batch;
    to.session.n_threads = threads;
    to.output = output;
    to.loss.kind = (ert_loss_kind)loss_kind;
    to.loss.label_smoothing = smoothing;
    to.optim.kind = (ert_optim_kind)optim_kind;
    to.optim.lr = lr;
    to.optim.momentum = momentum;
    to.optim.nesterov = nesterov;
    to.optim.weight_decay = wd;
    to.optim.beta1 = beta1;
    to.optim.beta2 = beta2;
    to.optim.eps = eps;
    to.optim.clip_grad_norm = clip;
    to.lr.kind = (ert_lr_schedule)sched;
    to.lr.warmup_steps = warmup;
    to.lr.step_size = step_size;
    to.lr.gamma = gamma;
    to.lr.total_steps = total_steps;
    to.lr.min_lr = min_lr;
    to.trainable = (ert_trainable)trainable;
    to.pattern = pattern;
    to.last_n = last_n;
    to.bn = (ert_bn_mode)bn;
    to.seed = seed;
    to.loss_scale = loss_scale;
    ert_status st;
    ert_trainer *t = NULL;
    ert_memory_report r;
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(pm);
    st = plan_only ? ert_trainer_plan(pm->m, &to, &r) : ert_trainer_create(pm->m, &to, &t);
    Py_END_ALLOW_THREADS
    if (st != ERT_OK) {
        py_raise_ctx(pm, st);
        py_model_unlock(pm);
        return NULL;
    }
    py_model_unlock(pm);
    if (plan_only) return py_memory_dict(&r);
    py_trainer *pt = PyMem_Calloc(1, sizeof *pt);
    PyObject *cap = pt ? PyCapsule_New(pt, PY_TRAINER_CAPSULE, trainer_destroy) : NULL;
    if (!cap) {
        ert_trainer_free(t);
        PyMem_Free(pt);
        return pt ? NULL : PyErr_NoMemory();
    }
    *pt = (py_trainer){.pm = pm, .model_cap = py_ref(model_cap), .t = t};
    pm->n_children++;
    return cap;
}

static PyObject *m_trainer_create(PyObject *self, PyObject *args) { return trainer_make(args, 0); }
static PyObject *m_trainer_plan(PyObject *self, PyObject *args) { return trainer_make(args, 1); }

/* trainer_info(cap) -> (inputs, target, output, device, n_trainable, n_trainable_elems) */
static PyObject *m_trainer_info(PyObject *self, PyObject *cap) {
    py_trainer *pt = trainer_get(cap);
    if (!pt) return NULL;
    int n = ert_trainer_n_inputs(pt->t);
    PyObject *in = PyList_New(n);
    if (!in) return NULL;
    ert_tensor_info ti;
    for (int i = 0; i < n; i++) {
        ert_status st = ert_trainer_input_info(pt->t, i, &ti);
        PyObject *tt = st == ERT_OK ? py_tensor_tuple(&ti) : py_raise_ctx(pt->pm, st);
        if (!tt) {
            Py_DECREF(in);
            return NULL;
        }
        PyList_SetItem(in, i, tt);
    }
    ert_tensor_info tg, out;
    ert_status st = ert_trainer_target_info(pt->t, &tg);
    if (st == ERT_OK) st = ert_trainer_output_info(pt->t, &out);
    if (st != ERT_OK) {
        Py_DECREF(in);
        return py_raise_ctx(pt->pm, st);
    }
    return Py_BuildValue("(NNNsiL)", in, py_tensor_tuple(&tg), py_tensor_tuple(&out),
                         ert_trainer_device(pt->t) == ERT_DEVICE_CUDA ? "cuda" : "cpu", ert_trainer_n_trainable(pt->t),
                         (long long)ert_trainer_n_trainable_elems(pt->t));
}

/* trainer_step(cap, train, inputs, target_address, target_bytes, output_address, output_bytes) -> loss.
 * inputs: a sequence of (index, address, bytes). train=False: eval. The
 * output (the logits the loss read) is copied to output_address when it is
 * not None. */
static PyObject *m_trainer_step(PyObject *self, PyObject *args) {
    PyObject *cap, *ins, *taddr, *oaddr;
    Py_ssize_t tbytes, obytes;
    int train;
    if (!PyArg_ParseTuple(args, "OpOOnOn", &cap, &train, &ins, &taddr, &tbytes, &oaddr, &obytes)) return NULL;
    py_trainer *pt = trainer_get(cap);
    if (!pt) return NULL;
    Py_ssize_t n = PySequence_Size(ins);
    if (n < 0) return NULL;
    if (n != ert_trainer_n_inputs(pt->t)) return py_raise(ERT_E_ARG, "every trainer input must be given");
    enum { MAX_IN = 16 };
    if (n > MAX_IN) return py_raise(ERT_E_UNSUPPORTED, "more than 16 trainer inputs");
    void *src[MAX_IN], *dst[MAX_IN], *tsrc, *tdst, *odst = NULL;
    size_t bytes[MAX_IN];
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PySequence_GetItem(ins, k), *a = NULL;
        int i = 0;
        Py_ssize_t b = 0;
        int ok = item && PyArg_ParseTuple(item, "iOn", &i, &a, &b) && py_addr(a, &src[k]) == 0;
        Py_XDECREF(item);
        if (!ok) return NULL;
        ert_tensor_info ti;
        ert_status st = ert_trainer_input_info(pt->t, i, &ti);
        if (st == ERT_OK) st = ert_trainer_input_data(pt->t, i, &dst[k]);
        if (st != ERT_OK) return py_raise_ctx(pt->pm, st);
        size_t need = ert_dtype_size(ti.dtype);
        for (int d = 0; d < ti.ndim; d++) need *= (size_t)ti.dims[d];
        if ((size_t)b != need) return py_raise(ERT_E_SHAPE, "a trainer input has the wrong size");
        bytes[k] = need;
    }
    ert_tensor_info tg, oi;
    ert_status st = ert_trainer_target_info(pt->t, &tg);
    if (st == ERT_OK) st = ert_trainer_output_info(pt->t, &oi);
    if (st == ERT_OK) st = ert_trainer_target_data(pt->t, &tdst);
    if (st != ERT_OK) return py_raise_ctx(pt->pm, st);
    size_t tneed = ert_dtype_size(tg.dtype), oneed = ert_dtype_size(oi.dtype);
    for (int d = 0; d < tg.ndim; d++) tneed *= (size_t)tg.dims[d];
    for (int d = 0; d < oi.ndim; d++) oneed *= (size_t)oi.dims[d];
    if (py_addr(taddr, &tsrc) < 0) return NULL;
    if ((size_t)tbytes != tneed) return py_raise(ERT_E_SHAPE, "the target has the wrong size");
    if (oaddr != Py_None) {
        if (py_addr(oaddr, &odst) < 0) return NULL;
        if ((size_t)obytes != oneed) return py_raise(ERT_E_SHAPE, "out: the output buffer has the wrong size");
    }
    float loss = 0;
    ert_trainer *t = pt->t;
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(pt->pm);
    for (Py_ssize_t k = 0; k < n; k++) memcpy(dst[k], src[k], bytes[k]);
    memcpy(tdst, tsrc, tneed);
    st = train ? ert_trainer_step(t, &loss) : ert_trainer_eval(t, &loss);
    if (st == ERT_OK && odst) {
        const void *o;
        st = ert_trainer_output_data(t, &o);
        if (st == ERT_OK) memcpy(odst, o, oneed);
    }
    Py_END_ALLOW_THREADS
    PyObject *res = st == ERT_OK ? PyFloat_FromDouble(loss) : py_raise_ctx(pt->pm, st);
    py_model_unlock(pt->pm);
    return res;
}

/* trainer_state(cap) -> (step_count, lr, loss_scale, skipped_steps) */
static PyObject *m_trainer_state(PyObject *self, PyObject *cap) {
    py_trainer *pt = trainer_get(cap);
    if (!pt) return NULL;
    return Py_BuildValue("(LddL)", (long long)ert_trainer_step_count(pt->t), (double)ert_trainer_lr(pt->t),
                         (double)ert_trainer_loss_scale(pt->t), (long long)ert_trainer_skipped_steps(pt->t));
}

static PyObject *m_trainer_memory(PyObject *self, PyObject *cap) {
    py_trainer *pt = trainer_get(cap);
    if (!pt) return NULL;
    ert_memory_report r;
    ert_status st = ert_trainer_memory(pt->t, &r);
    return st == ERT_OK ? py_memory_dict(&r) : py_raise_ctx(pt->pm, st);
}

/* trainer_checkpoint(cap, path, load: bool) */
static PyObject *m_trainer_checkpoint(PyObject *self, PyObject *args) {
    PyObject *cap, *path_obj, *bytes;
    int load = 0;
    if (!PyArg_ParseTuple(args, "OOp", &cap, &path_obj, &load)) return NULL;
    py_trainer *pt = trainer_get(cap);
    if (!pt || !PyUnicode_FSConverter(path_obj, &bytes)) return NULL;
    const char *path = PyBytes_AsString(bytes);
    if (!path) {
        Py_DECREF(bytes);
        return NULL;
    }
    ert_status st;
    ert_trainer *t = pt->t;
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(pt->pm);
    st = load ? ert_trainer_load_checkpoint(t, path) : ert_trainer_save_checkpoint(t, path);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    PyObject *res = st == ERT_OK ? py_ref(Py_None) : py_raise_ctx(pt->pm, st);
    py_model_unlock(pt->pm);
    return res;
}

/* trainer_export(cap) -> a new model capsule (with its own context). */
static PyObject *m_trainer_export(PyObject *self, PyObject *cap) {
    py_trainer *pt = trainer_get(cap);
    if (!pt) return NULL;
    ert_model *m = NULL;
    ert_status st;
    ert_trainer *t = pt->t;
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(pt->pm);
    st = ert_trainer_export(t, &m);
    Py_END_ALLOW_THREADS
    if (st != ERT_OK) {
        PyObject *r = py_raise_ctx(pt->pm, st);
        py_model_unlock(pt->pm);
        return r;
    }
    py_model_unlock(pt->pm);
    return py_model_wrap_shared(pt->model_cap, m, 1);
}

static PyObject *m_trainer_close(PyObject *self, PyObject *cap) {
    py_trainer *pt = PyCapsule_GetPointer(cap, PY_TRAINER_CAPSULE);
    if (!pt) return NULL;
    trainer_free(pt);
    Py_RETURN_NONE;
}

PyMethodDef py_trainer_methods[] = {
    {"trainer_create", m_trainer_create, METH_VARARGS, "trainer_create(model, ...) -> capsule (see Trainer)"},
    {"trainer_plan", m_trainer_plan, METH_VARARGS, "trainer_plan(model, ...) -> dict (see Trainer.plan)"},
    {"trainer_info", m_trainer_info, METH_O, "trainer_info(cap) -> (inputs, target, output, device, n_trainable, n_elems)"},
    {"trainer_step", m_trainer_step, METH_VARARGS, "trainer_step(cap, train, inputs, target, target_bytes, out, out_bytes) -> loss"},
    {"trainer_state", m_trainer_state, METH_O, "trainer_state(cap) -> (step_count, lr, loss_scale, skipped_steps)"},
    {"trainer_memory", m_trainer_memory, METH_O, "trainer_memory(cap) -> dict"},
    {"trainer_checkpoint", m_trainer_checkpoint, METH_VARARGS, "trainer_checkpoint(cap, path, load)"},
    {"trainer_export", m_trainer_export, METH_O, "trainer_export(cap) -> model capsule"},
    {"trainer_close", m_trainer_close, METH_O, "trainer_close(cap)"},
    {NULL, NULL, 0, NULL},
};
