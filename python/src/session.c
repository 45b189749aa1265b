/* Sessions: plan, create, describe, run (GIL released), close. Inputs and
 * outputs arrive as (index, address, bytes) triples of numpy arrays that the
 * Python layer has checked (dtype, shape, contiguity) and keeps alive. */
#include "ext.h"

#include <string.h>

/* Options shared by session_plan and session_create, parsed from
 * (model, device, precision, batch, threads, shapes, flags, placement[,
 * arena_address, arena_bytes]). shapes: a sequence of (name bytes, dims). */
typedef struct sess_args {
    PyObject *model_cap, *shapes, *arena;
    int device, precision, batch, threads, placement;
    unsigned flags;
    Py_ssize_t arena_bytes;
    ert_session_options so;
    ert_input_shape shape_buf[16];
} sess_args;

static int parse_opts(PyObject *args, sess_args *a, int with_arena) {
    memset(a, 0, sizeof *a);
    a->arena = Py_None;
    if (!PyArg_ParseTuple(args, "OiiiiOIi|On", &a->model_cap, &a->device, &a->precision, &a->batch, &a->threads,
                          &a->shapes, &a->flags, &a->placement, &a->arena, &a->arena_bytes))
        return -1;
    ert_session_options *so = &a->so;
    so->device = (ert_device)a->device;
    so->precision = (ert_dtype)a->precision;
    so->batch = a->batch;
    so->n_threads = a->threads;
    so->flags = a->flags;
    so->placement = (ert_placement)a->placement;
    int n = py_parse_shapes(a->shapes, a->shape_buf, (int)(sizeof a->shape_buf / sizeof a->shape_buf[0]));
    if (n < 0) return -1;
    so->input_shapes = n ? a->shape_buf : NULL;
    so->n_input_shapes = n;
    if (with_arena && a->arena != Py_None) {
        if (py_addr(a->arena, &so->arena) < 0) return -1;
        if (a->arena_bytes < 0) {
            py_raise(ERT_E_ARG, "arena: negative size");
            return -1;
        }
        so->arena_bytes = (size_t)a->arena_bytes;
    }
    return 0;
}

static PyObject *m_session_plan(PyObject *self, PyObject *args) {
    sess_args a;
    if (parse_opts(args, &a, 0) < 0) return NULL;
    py_model *pm = py_model_get(a.model_cap);
    if (!pm) return NULL;
    ert_memory_report r;
    ert_status st;
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(pm);
    st = ert_session_plan(pm->m, &a.so, &r);
    Py_END_ALLOW_THREADS
    PyObject *res = st == ERT_OK ? py_memory_dict(&r) : py_raise_ctx(pm, st);
    py_model_unlock(pm);
    return res;
}

void py_session_release(py_session *ps) {
    if (!ps->s || !ps->closed || ps->views > 0) return;
    ert_session *s = ps->s;
    ps->s = NULL;
    py_child_free(ps->pm, &ps->model_cap, s, NULL);
}

static void session_destroy(PyObject *cap) {
    py_session *ps = PyCapsule_GetPointer(cap, PY_SESSION_CAPSULE);
    if (!ps) return;
    /* no view can be alive here: each holds a reference to this capsule */
    ps->closed = 1;
    ps->views = 0;
    py_session_release(ps);
    PyMem_Free(ps);
}

py_session *py_session_get(PyObject *cap) {
    py_session *ps = PyCapsule_GetPointer(cap, PY_SESSION_CAPSULE);
    if (!ps) return NULL;
    if (ps->closed || !ps->s) {
        py_raise(ERT_E_STATE, "the session is closed");
        return NULL;
    }
    return ps;
}

static PyObject *m_session_create(PyObject *self, PyObject *args) {
    sess_args a;
    if (parse_opts(args, &a, 1) < 0) return NULL;
    py_model *pm = py_model_get(a.model_cap);
    if (!pm) return NULL;
    py_session *ps = PyMem_Calloc(1, sizeof *ps);
    if (!ps) return PyErr_NoMemory();
    ert_status st;
    ert_session *s = NULL;
    int cuda = 0;
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(pm);
    st = ert_session_create(pm->m, &a.so, &s);
    if (st == ERT_OK && ert_session_n_inputs(s) > 0) {
        void *dev;
        cuda = ert_session_input_device(s, 0, &dev) == ERT_OK;
    }
    Py_END_ALLOW_THREADS
    if (st != ERT_OK) {
        py_raise_ctx(pm, st);
        py_model_unlock(pm);
        PyMem_Free(ps);
        return NULL;
    }
    py_model_unlock(pm);
    *ps = (py_session){.pm = pm, .model_cap = py_ref(a.model_cap), .s = s, .cuda = cuda};
    PyObject *cap = PyCapsule_New(ps, PY_SESSION_CAPSULE, session_destroy);
    if (!cap) {
        ert_session_free(s);
        Py_DECREF(ps->model_cap);
        PyMem_Free(ps);
        return NULL;
    }
    pm->n_children++;
    return cap;
}

static ert_status session_tensor(const void *h, int is_out, int i, ert_tensor_info *ti) {
    return is_out ? ert_session_output_info(h, i, ti) : ert_session_input_info(h, i, ti);
}

/* session_info(cap) -> (inputs, outputs, is_cuda) with concrete shapes. */
static PyObject *m_session_info(PyObject *self, PyObject *cap) {
    py_session *ps = py_session_get(cap);
    if (!ps) return NULL;
    PyObject *io = py_info_lists(ps->s, ert_session_n_inputs(ps->s), ert_session_n_outputs(ps->s), session_tensor, ps->pm);
    if (!io) return NULL;
    PyObject *r = Py_BuildValue("(OOO)", PyTuple_GetItem(io, 0), PyTuple_GetItem(io, 1), ps->cuda ? Py_True : Py_False);
    Py_DECREF(io);
    return r;
}

static PyObject *m_session_memory(PyObject *self, PyObject *cap) {
    py_session *ps = py_session_get(cap);
    if (!ps) return NULL;
    ert_memory_report r;
    ert_status st = ert_session_memory(ps->s, &r);
    return st == ERT_OK ? py_memory_dict(&r) : py_raise_ctx(ps->pm, st);
}

typedef struct io_slot {
    int i;
    void *p;
    Py_ssize_t bytes;
} io_slot;

/* A sequence of (index, address, bytes) into slots (PyMem; *n entries). */
static int parse_slots(PyObject *seq, io_slot **out, Py_ssize_t *n) {
    *out = NULL;
    *n = PySequence_Size(seq);
    if (*n < 0) return -1;
    if (*n == 0) return 0;
    io_slot *s = PyMem_Calloc((size_t)*n, sizeof *s);
    if (!s) return PyErr_NoMemory(), -1;
    for (Py_ssize_t k = 0; k < *n; k++) {
        PyObject *item = PySequence_GetItem(seq, k), *addr = NULL;
        int ok = item && PyArg_ParseTuple(item, "iOn", &s[k].i, &addr, &s[k].bytes) && py_addr(addr, &s[k].p) == 0;
        Py_XDECREF(item);
        if (!ok) {
            PyMem_Free(s);
            return -1;
        }
    }
    *out = s;
    return 0;
}

/* session_run(cap, inputs, outputs, sync, dl_inputs): copy the host inputs
 * in and (sync: a CUDA session made with ERT_SESSION_DEVICE_INPUTS) upload
 * them, copy the
 * DLPack device inputs (a sequence of (index, capsule)), run, copy the
 * outputs out. All with the GIL released and the model's lock held. */
static PyObject *m_session_run(PyObject *self, PyObject *args) {
    PyObject *cap, *ins, *outs, *dls;
    int sync = 0;
    if (!PyArg_ParseTuple(args, "OOOpO", &cap, &ins, &outs, &sync, &dls)) return NULL;
    py_session *ps = py_session_get(cap);
    if (!ps) return NULL;
    io_slot *in = NULL, *out = NULL;
    py_dl_in *dl = NULL;
    Py_ssize_t n_in = 0, n_out = 0, n_dl = PySequence_Size(dls), n_dl_ok = 0;
    PyObject *res = NULL;
    if (n_dl < 0 || parse_slots(ins, &in, &n_in) < 0 || parse_slots(outs, &out, &n_out) < 0) goto done;
    if (n_dl > 0 && !(dl = PyMem_Calloc((size_t)n_dl, sizeof *dl))) {
        PyErr_NoMemory();
        goto done;
    }
    for (; n_dl_ok < n_dl; n_dl_ok++) {
        PyObject *item = PySequence_GetItem(dls, n_dl_ok), *dcap = NULL;
        int i = 0;
        int ok = item && PyArg_ParseTuple(item, "iO", &i, &dcap) && py_dlpack_prepare(ps, i, dcap, &dl[n_dl_ok]) == 0;
        Py_XDECREF(item);
        if (!ok) goto done;
    }
    ert_status st = ERT_OK;
    char err[512] = "";
    int cuda_fail = 0;
    ert_session *s = ps->s;
    Py_BEGIN_ALLOW_THREADS
    py_model_lock(ps->pm);
    for (Py_ssize_t k = 0; k < n_in && st == ERT_OK && !cuda_fail; k++) {
        st = ert_session_set_input(s, in[k].i, in[k].p, (size_t)in[k].bytes);
        /* A session with device inputs does not upload host views itself;
         * upload just this one (ert_session_sync_inputs would also overwrite
         * inputs written through a DLPack view). */
        void *hp, *dp;
        if (st == ERT_OK && sync && ert_session_input_data(s, in[k].i, &hp) == ERT_OK &&
            ert_session_input_device(s, in[k].i, &dp) == ERT_OK && hp != dp)
            cuda_fail = py_cuda_copy(dp, in[k].p, (size_t)in[k].bytes, err, sizeof err) != 0;
    }
    for (Py_ssize_t k = 0; k < n_dl && st == ERT_OK && !cuda_fail; k++) cuda_fail = py_dlpack_copy(&dl[k], err, sizeof err) != 0;
    if (st == ERT_OK && !cuda_fail) st = ert_session_run(s);
    for (Py_ssize_t k = 0; k < n_out && st == ERT_OK && !cuda_fail; k++)
        st = ert_session_get_output(s, out[k].i, out[k].p, (size_t)out[k].bytes);
    Py_END_ALLOW_THREADS
    if (cuda_fail) res = py_raise(ERT_E_CUDA, err);
    else res = st == ERT_OK ? py_ref(Py_None) : py_raise_ctx(ps->pm, st);
    py_model_unlock(ps->pm);
done:
    for (Py_ssize_t k = 0; k < n_dl_ok; k++) py_dlpack_release(&dl[k]);
    PyMem_Free(dl);
    PyMem_Free(in);
    PyMem_Free(out);
    return res;
}

/* session_input_address(cap, index) -> the input's storage: its GPU address
 * for a CUDA session, else its host address (for the GPU preprocessor). */
static PyObject *m_session_input_address(PyObject *self, PyObject *args) {
    PyObject *cap;
    int i;
    if (!PyArg_ParseTuple(args, "Oi", &cap, &i)) return NULL;
    py_session *ps = py_session_get(cap);
    if (!ps) return NULL;
    void *p = NULL;
    ert_status st = ps->cuda ? ert_session_input_device(ps->s, i, &p) : ert_session_input_data(ps->s, i, &p);
    return st == ERT_OK ? PyLong_FromVoidPtr(p) : py_raise_ctx(ps->pm, st);
}

/* session_close(cap): free the C session now, or (DLPack views alive) as
 * soon as the last view is gone; either way the session refuses every call. */
static PyObject *m_session_close(PyObject *self, PyObject *cap) {
    py_session *ps = PyCapsule_GetPointer(cap, PY_SESSION_CAPSULE);
    if (!ps) return NULL;
    ps->closed = 1;
    py_session_release(ps);
    Py_RETURN_NONE;
}

PyMethodDef py_session_methods[] = {
    {"session_plan", m_session_plan, METH_VARARGS, "session_plan(model, device, precision, batch, threads, shapes, flags, placement) -> dict"},
    {"session_create", m_session_create, METH_VARARGS,
     "session_create(model, device, precision, batch, threads, shapes, flags, placement, arena_address, arena_bytes) -> capsule"},
    {"session_info", m_session_info, METH_O, "session_info(cap) -> (inputs, outputs, is_cuda)"},
    {"session_memory", m_session_memory, METH_O, "session_memory(cap) -> dict"},
    {"session_run", m_session_run, METH_VARARGS, "session_run(cap, inputs, outputs, sync, dlpack_inputs)"},
    {"session_input_address", m_session_input_address, METH_VARARGS, "session_input_address(cap, index) -> int"},
    {"session_close", m_session_close, METH_O, "session_close(cap)"},
    {NULL, NULL, 0, NULL},
};
