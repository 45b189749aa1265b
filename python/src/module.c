/* The module edgert._edgert: exception classes (one per ert_status), models
 * (load, describe, save, close), and the module's init, which merges the
 * method tables of session.c, trainer.c, image.c and dlpack.c. */
#include "ext.h"

#include <string.h>

/* Exception classes, indexed by ert_status; [0] is the base class Error.
 * Made once at import (single-phase init: one interpreter). */
#define PY_LAST_STATUS ERT_E_NUMERIC /* the last ert_status: a new one needs its class below */
static PyObject *err_class[PY_LAST_STATUS + 1];

static const struct {
    ert_status st;
    const char *name;     /* edgert.<name> */
    const char *builtin;  /* the builtin it also derives from, for `except ValueError` users */
    const char *doc;
} err_spec[] = {
    {ERT_E_ARG, "ArgError", "ValueError", "A bad argument: out of range index, bad option (ERT_E_ARG)."},
    {ERT_E_FORMAT, "FormatError", "ValueError", "A malformed model or data file (ERT_E_FORMAT)."},
    {ERT_E_UNSUPPORTED, "UnsupportedError", "RuntimeError", "Valid but not supported: op, dtype, device (ERT_E_UNSUPPORTED)."},
    {ERT_E_ARENA, "ArenaError", "MemoryError", "The arena is too small; the message gives the bytes needed (ERT_E_ARENA)."},
    {ERT_E_NOMEM, "NoMemoryError", "MemoryError", "An allocation failed (ERT_E_NOMEM)."},
    {ERT_E_IO, "FileError", "OSError", "A file system error (ERT_E_IO)."},
    {ERT_E_CUDA, "CudaError", "RuntimeError", "A CUDA/cuDNN/cuBLAS error or no usable GPU (ERT_E_CUDA)."},
    {ERT_E_SHAPE, "ShapeError", "ValueError", "Shapes or dtypes do not agree (ERT_E_SHAPE)."},
    {ERT_E_STATE, "StateError", "RuntimeError", "Not valid in the object's state, e.g. a closed session (ERT_E_STATE)."},
    {ERT_E_INTERNAL, "InternalError", "RuntimeError", "A bug in edgert: please report it (ERT_E_INTERNAL)."},
    {ERT_E_NOT_FOUND, "NotFoundError", "LookupError", "A named item does not exist (ERT_E_NOT_FOUND)."},
    {ERT_E_NUMERIC, "NumericError", "ArithmeticError", "A NaN or infinity where finite values were asked for (ERT_E_NUMERIC)."},
};
_Static_assert(sizeof err_spec / sizeof err_spec[0] == PY_LAST_STATUS, "one exception class per ert_status");

PyObject *py_raise(ert_status st, const char *msg) {
    PyObject *cls = st > 0 && st <= PY_LAST_STATUS && err_class[st] ? err_class[st] : err_class[0];
    PyErr_SetString(cls, msg && *msg ? msg : ert_status_str(st));
    return NULL;
}

PyObject *py_raise_ctx(py_model *pm, ert_status st) {
    const char *m = ert_last_error(pm->ctx);
    return py_raise(st, m && *m ? m : ert_status_str(st));
}

void py_child_free(py_model *pm, PyObject **model_cap, ert_session *s, ert_trainer *t) {
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(pm);
    ert_session_free(s);
    ert_trainer_free(t);
    py_model_unlock(pm);
    Py_END_ALLOW_THREADS
    pm->n_children--;
    Py_CLEAR(*model_cap);
}

void py_model_lock(py_model *pm) { PyThread_acquire_lock(pm->lock, WAIT_LOCK); }
void py_model_unlock(py_model *pm) { PyThread_release_lock(pm->lock); }

int py_addr(PyObject *o, void **p) {
    void *v = PyLong_AsVoidPtr(o);
    if (!v && PyErr_Occurred()) return -1;
    *p = v;
    return 0;
}

static void model_destroy(PyObject *cap) {
    py_model *pm = PyCapsule_GetPointer(cap, PY_MODEL_CAPSULE);
    if (!pm) return;
    if (pm->parent) { /* ctx and lock belong to the parent */
        py_model *pp = PyCapsule_GetPointer(pm->parent, PY_MODEL_CAPSULE);
        ert_model *m = pm->m;
        if (m) {
            Py_BEGIN_ALLOW_THREADS
            py_model_lock(pp);
            ert_model_free(m);
            py_model_unlock(pp);
            Py_END_ALLOW_THREADS
        }
        if (pm->counted) pp->n_children--;
        Py_DECREF(pm->parent);
    } else {
        ert_model_free(pm->m);
        ert_context_free(pm->ctx);
        if (pm->lock) PyThread_free_lock(pm->lock);
    }
    PyMem_Free(pm);
}

PyObject *py_model_wrap_shared(PyObject *parent_cap, ert_model *m, int counted) {
    py_model *pp = PyCapsule_GetPointer(parent_cap, PY_MODEL_CAPSULE);
    py_model *pm = pp ? PyMem_Malloc(sizeof *pm) : NULL;
    if (!pm) {
        ert_model_free(m);
        return pp ? PyErr_NoMemory() : NULL;
    }
    *pm = (py_model){.ctx = pp->ctx, .m = m, .lock = pp->lock, .parent = py_ref(parent_cap), .counted = counted};
    PyObject *cap = PyCapsule_New(pm, PY_MODEL_CAPSULE, model_destroy);
    if (!cap) {
        ert_model_free(m);
        Py_DECREF(parent_cap);
        PyMem_Free(pm);
        return NULL;
    }
    if (counted) pp->n_children++;
    return cap;
}

PyObject *py_model_wrap(ert_context *ctx, ert_model *m) {
    py_model *pm = PyMem_Malloc(sizeof *pm);
    PyThread_type_lock lock = PyThread_allocate_lock();
    if (!pm || !lock) {
        if (lock) PyThread_free_lock(lock);
        PyMem_Free(pm);
        ert_model_free(m);
        ert_context_free(ctx);
        return PyErr_NoMemory();
    }
    *pm = (py_model){.ctx = ctx, .m = m, .lock = lock};
    PyObject *cap = PyCapsule_New(pm, PY_MODEL_CAPSULE, model_destroy);
    if (!cap) {
        ert_model_free(m);
        ert_context_free(ctx);
        PyThread_free_lock(lock);
        PyMem_Free(pm);
    }
    return cap;
}

py_model *py_model_get(PyObject *cap) {
    py_model *pm = PyCapsule_GetPointer(cap, PY_MODEL_CAPSULE);
    if (!pm) return NULL;
    if (!pm->m) {
        py_raise(ERT_E_STATE, "the model is closed");
        return NULL;
    }
    return pm;
}

int py_parse_shapes(PyObject *shapes, ert_input_shape *buf, int cap) {
    Py_ssize_t n = PySequence_Size(shapes);
    if (n < 0) return -1;
    if (n > cap) {
        PyErr_Format(err_class[ERT_E_ARG], "shapes: at most %d inputs may be given a shape", cap);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        /* names are bytes owned by the caller's list: valid during the call */
        PyObject *item = PySequence_GetItem(shapes, k), *name = NULL, *dims = NULL;
        int ok = item && PyArg_ParseTuple(item, "SO", &name, &dims);
        Py_XDECREF(item);
        if (!ok) return -1;
        ert_input_shape *is = &buf[k];
        is->name = PyBytes_AsString(name);
        Py_ssize_t nd = PySequence_Size(dims);
        if (!is->name || nd < 0) return -1;
        if (nd > ERT_MAX_DIMS) {
            py_raise(ERT_E_ARG, "shapes: at most 8 dims");
            return -1;
        }
        is->ndim = (int)nd;
        for (Py_ssize_t d = 0; d < nd; d++) {
            PyObject *v = PySequence_GetItem(dims, d);
            is->dims[d] = v ? PyLong_AsLongLong(v) : -1;
            Py_XDECREF(v);
            if (PyErr_Occurred()) return -1;
        }
    }
    return (int)n;
}

PyObject *py_tensor_tuple(const ert_tensor_info *ti) {
    PyObject *dims = PyTuple_New(ti->ndim);
    if (!dims) return NULL;
    for (int d = 0; d < ti->ndim; d++) {
        PyObject *v = PyLong_FromLongLong(ti->dims[d]);
        if (!v) {
            Py_DECREF(dims);
            return NULL;
        }
        PyTuple_SetItem(dims, d, v);
    }
    return Py_BuildValue("(ssN)", ti->name ? ti->name : "", ert_dtype_name(ti->dtype), dims);
}

PyObject *py_memory_dict(const ert_memory_report *r) {
    return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsK}", "weights_bytes", (unsigned long long)r->weights_bytes,
                         "activations_bytes", (unsigned long long)r->activations_bytes, "activations_lower_bound",
                         (unsigned long long)r->activations_lower_bound, "workspace_bytes",
                         (unsigned long long)r->workspace_bytes, "io_bytes", (unsigned long long)r->io_bytes,
                         "gradients_bytes", (unsigned long long)r->gradients_bytes, "optimizer_bytes",
                         (unsigned long long)r->optimizer_bytes, "saved_bytes", (unsigned long long)r->saved_bytes,
                         "mapped_weights_bytes", (unsigned long long)r->mapped_weights_bytes, "total_bytes",
                         (unsigned long long)r->total_bytes);
}

/* ------------------------------------------------------------------ models */

/* load(path: str | bytes-like address pair) -> capsule. With one str argument
 * a file; with (address, size) a copy of those bytes. */
static PyObject *m_model_load(PyObject *self, PyObject *args) {
    PyObject *path_obj = NULL, *addr = NULL;
    Py_ssize_t size = 0;
    if (!PyArg_ParseTuple(args, "O|On", &path_obj, &addr, &size)) return NULL;
    ert_context *ctx = NULL;
    ert_status st = ert_context_create(NULL, &ctx);
    if (st != ERT_OK) return py_raise(st, "cannot create a context");
    ert_model *m = NULL;
    PyObject *bytes = NULL;
    if (addr) {
        void *p;
        if (py_addr(addr, &p) < 0 || size < 0) {
            ert_context_free(ctx);
            return size < 0 ? py_raise(ERT_E_ARG, "negative size") : NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = ert_model_load_memory(ctx, p, (size_t)size, 0, &m);
        Py_END_ALLOW_THREADS
    } else {
        if (!PyUnicode_FSConverter(path_obj, &bytes)) {
            ert_context_free(ctx);
            return NULL;
        }
        const char *path = PyBytes_AsString(bytes);
        if (!path) {
            Py_DECREF(bytes);
            ert_context_free(ctx);
            return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = ert_model_load_file(ctx, path, &m);
        Py_END_ALLOW_THREADS
        Py_DECREF(bytes);
    }
    if (st != ERT_OK) {
        PyObject *r = py_raise(st, ert_last_error(ctx));
        ert_context_free(ctx);
        return r;
    }
    return py_model_wrap(ctx, m);
}

PyObject *py_info_lists(const void *h, int n_in, int n_out, py_info_fn get, py_model *pm) {
    PyObject *in = PyList_New(n_in), *out = PyList_New(n_out);
    if (!in || !out) goto fail;
    for (int i = 0; i < n_in + n_out; i++) {
        ert_tensor_info ti;
        ert_status st = get(h, i >= n_in, i < n_in ? i : i - n_in, &ti);
        if (st != ERT_OK) {
            py_raise_ctx(pm, st);
            goto fail;
        }
        PyObject *t = py_tensor_tuple(&ti);
        if (!t) goto fail;
        PyList_SetItem(i < n_in ? in : out, i < n_in ? i : i - n_in, t);
    }
    return Py_BuildValue("(NN)", in, out);
fail:
    Py_XDECREF(in);
    Py_XDECREF(out);
    return NULL;
}

static ert_status model_tensor(const void *h, int is_out, int i, ert_tensor_info *ti) {
    return is_out ? ert_model_output_info(h, i, ti) : ert_model_input_info(h, i, ti);
}

/* model_info(cap) -> (inputs, outputs, n_nodes, n_params); inputs/outputs are
 * lists of (name, dtype, dims) with -1 for a dynamic dim. */
static PyObject *m_model_info(PyObject *self, PyObject *cap) {
    py_model *pm = py_model_get(cap);
    if (!pm) return NULL;
    PyObject *io = py_info_lists(pm->m, ert_model_n_inputs(pm->m), ert_model_n_outputs(pm->m), model_tensor, pm);
    if (!io) return NULL;
    PyObject *r = Py_BuildValue("(OOiL)", PyTuple_GetItem(io, 0), PyTuple_GetItem(io, 1), ert_model_n_nodes(pm->m),
                                (long long)ert_model_n_params(pm->m));
    Py_DECREF(io);
    return r;
}

/* model_save(cap, path, onnx: bool, f16_weights: bool) */
static PyObject *m_model_save(PyObject *self, PyObject *args) {
    PyObject *cap, *path_obj, *bytes;
    int onnx = 0, f16 = 0;
    if (!PyArg_ParseTuple(args, "OO|pp", &cap, &path_obj, &onnx, &f16)) return NULL;
    py_model *pm = py_model_get(cap);
    if (!pm || !PyUnicode_FSConverter(path_obj, &bytes)) return NULL;
    const char *path = PyBytes_AsString(bytes);
    ert_status st = ERT_E_ARG;
    ert_save_options so = {.weights_dtype = f16 ? ERT_DTYPE_F16 : ERT_DTYPE_UNDEFINED};
    if (path) {
        Py_BEGIN_ALLOW_THREADS
        py_model_lock(pm);
        st = onnx ? ert_model_save_onnx(pm->m, path) : ert_model_save_opts(pm->m, path, &so);
        Py_END_ALLOW_THREADS
    }
    /* still holding the lock: ctx's message is ours to read */
    PyObject *r = st == ERT_OK ? py_ref(Py_None) : path ? py_raise_ctx(pm, st) : NULL;
    if (path) py_model_unlock(pm);
    Py_DECREF(bytes);
    return r;
}

/* model_close(cap): free the model now. Refused (StateError) while a session
 * or trainer made from it is open, since the C model must outlive them. */
static PyObject *m_model_close(PyObject *self, PyObject *cap) {
    py_model *pm = PyCapsule_GetPointer(cap, PY_MODEL_CAPSULE);
    if (!pm) return NULL;
    if (!pm->m) Py_RETURN_NONE; /* closing twice is harmless */
    if (pm->n_children > 0)
        return PyErr_Format(err_class[ERT_E_STATE],
                            "cannot close the model: %d session(s)/trainer(s) made from it are still open "
                            "(close them first, or drop the model and let them keep it alive)",
                            pm->n_children);
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(pm);
    ert_model_free(pm->m);
    pm->m = NULL;
    py_model_unlock(pm);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *m_version(PyObject *self, PyObject *unused) { return PyUnicode_FromString(ert_version()); }

static PyObject *m_status_str(PyObject *self, PyObject *arg) {
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(ert_status_str((ert_status)v));
}

static PyObject *m_built_with_cuda(PyObject *self, PyObject *unused) {
#ifdef ERT_PY_CUDA
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef model_methods[] = {
    {"model_load", m_model_load, METH_VARARGS, "model_load(path) or model_load(None, address, size) -> capsule"},
    {"model_info", m_model_info, METH_O, "model_info(cap) -> (inputs, outputs, n_nodes, n_params)"},
    {"model_save", m_model_save, METH_VARARGS, "model_save(cap, path, onnx=False, f16_weights=False)"},
    {"model_close", m_model_close, METH_O, "model_close(cap)"},
    {"version", m_version, METH_NOARGS, "The C library's version, MAJOR.MINOR.PATCH."},
    {"status_str", m_status_str, METH_O, "status_str(code) -> the library's static text for a status."},
    {"built_with_cuda", m_built_with_cuda, METH_NOARGS, "True when the CUDA backend is compiled in."},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------ init */

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_edgert", "C core of the edgert package (use the package `edgert`).", -1, NULL,
    NULL, NULL, NULL, NULL,
};

static int add_methods(PyObject *mod, PyMethodDef *defs) { return PyModule_AddFunctions(mod, defs); }

PyMODINIT_FUNC PyInit__edgert(void) {
    PyObject *mod = PyModule_Create(&module_def);
    if (!mod) return NULL;
    PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
    err_class[0] = PyErr_NewExceptionWithDoc("edgert.Error",
                                             "Base class of every edgert error; `status` is the ert_status code.",
                                             NULL, NULL);
    if (!err_class[0] || PyObject_SetAttrString(err_class[0], "status", Py_None) < 0 ||
        PyModule_AddObject(mod, "Error", py_ref(err_class[0])) < 0)
        goto fail;
    for (size_t k = 0; k < sizeof err_spec / sizeof err_spec[0]; k++) {
        char full[64];
        snprintf(full, sizeof full, "edgert.%s", err_spec[k].name);
        PyObject *b = PyDict_GetItemString(builtins, err_spec[k].builtin); /* borrowed */
        PyObject *bases = b ? PyTuple_Pack(2, err_class[0], b) : NULL;
        PyObject *cls = bases ? PyErr_NewExceptionWithDoc(full, err_spec[k].doc, bases, NULL) : NULL;
        Py_XDECREF(bases);
        PyObject *code = PyLong_FromLong(err_spec[k].st);
        if (!cls || !code || PyObject_SetAttrString(cls, "status", code) < 0) {
            Py_XDECREF(code);
            Py_XDECREF(cls);
            goto fail;
        }
        Py_DECREF(code);
        err_class[err_spec[k].st] = cls;
        if (PyModule_AddObject(mod, err_spec[k].name, py_ref(cls)) < 0) goto fail;
    }
    if (add_methods(mod, model_methods) < 0 || add_methods(mod, py_session_methods) < 0 ||
        add_methods(mod, py_trainer_methods) < 0 || add_methods(mod, py_image_methods) < 0 ||
        add_methods(mod, py_dlpack_methods) < 0 || add_methods(mod, py_quantize_methods) < 0)
        goto fail;
    return mod;
fail:
    Py_DECREF(mod);
    return NULL;
}
