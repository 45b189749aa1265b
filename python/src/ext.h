/* Shared pieces of the edgert Python extension (the .c files of python/src).
 *
 * The extension is written against the CPython limited API of Python 3.9
 * (Py_LIMITED_API = 0x03090000: one abi3 wheel for 3.9 and later), which has
 * no buffer protocol (Py_buffer arrived in the limited API with 3.11) and no
 * numpy C API. So the C side is thin: it takes raw addresses and byte counts
 * that the Python layer (python/edgert/__init__.py) reads from numpy arrays it
 * keeps alive across the call, and returns plain tuples, ints and strings.
 *
 * Handles are capsules. A session or trainer capsule holds a strong reference
 * to its model's capsule, so the C model (which must outlive them) is freed
 * only after the last of them. Everything made from one model shares one
 * ert_context, which must be used by one thread at a time: calls that release
 * the GIL take the model's lock first.
 */
#ifndef ERT_PY_EXT_H
#define ERT_PY_EXT_H

#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include "edgert.h"

/* A loaded model and the context everything made from it reports on. */
typedef struct py_model {
    ert_context *ctx;
    ert_model *m;
    PyThread_type_lock lock; /* serialises calls on ctx (sessions run without the GIL) */
    int n_children;          /* open sessions, trainers and exported models made from it */
    PyObject *parent;        /* a model exported by a trainer or quantized reports on its parent's
                              * context: ctx and lock are the parent's (strong reference), not owned */
    int counted;             /* with parent: counted in the parent's n_children (a trainer's export
                              * needs the parent's C model; a quantized model only its context) */
} py_model;

#define PY_MODEL_CAPSULE "edgert.model"
#define PY_SESSION_CAPSULE "edgert.session"
#define PY_TRAINER_CAPSULE "edgert.trainer"

/* Py_NewRef is not in the 3.9 limited API. */
static inline PyObject *py_ref(PyObject *o) {
    Py_INCREF(o);
    return o;
}

/* A session. `closed` with views > 0: close() was called while DLPack views
 * of its buffers were alive; the C session is freed with the last view. */
typedef struct py_session {
    py_model *pm;
    PyObject *model_cap; /* strong reference: the model outlives the session */
    ert_session *s;
    int cuda;            /* a CUDA session (its buffers are GPU memory) */
    int closed;
    int views;           /* live DLPack views */
} py_session;

/* The open session of a capsule, or NULL with StateError/TypeError set. */
py_session *py_session_get(PyObject *cap);
/* Free the C session if it is closed and no view needs it (GIL held). */
void py_session_release(py_session *ps);

/* One DLPack device input of a run: validated with the GIL held, copied
 * without it, released (deleter called, capsule renamed) with it. */
typedef struct py_dl_in {
    void *dst;           /* the input's device storage */
    const void *src;
    size_t bytes;
    PyObject *cap;       /* the consumer-side capsule (borrowed from the caller) */
    void *managed;       /* its DLManagedTensor */
} py_dl_in;
int py_dlpack_prepare(py_session *ps, int i, PyObject *cap, py_dl_in *out);
/* Returns 0, or -1 with a message in err (GIL released). */
int py_dlpack_copy(const py_dl_in *d, char *err, size_t cap);
/* cudaMemcpy(Default) of host or device memory to device memory. */
int py_cuda_copy(void *dst, const void *src, size_t bytes, char *err, size_t cap);
void py_dlpack_release(py_dl_in *d);

/* Raise the exception class of `st` with `msg` (a copy is made). NULL. */
PyObject *py_raise(ert_status st, const char *msg);
/* Raise for a failure of a call on `pm`'s context: the library's message. */
PyObject *py_raise_ctx(py_model *pm, ert_status st);
/* The open model of a capsule, or NULL with StateError/TypeError set. */
py_model *py_model_get(PyObject *cap);
/* Lock / unlock a model's context; call with the GIL released. */
void py_model_lock(py_model *pm);
void py_model_unlock(py_model *pm);
/* A new model capsule owning ctx and m (freed on failure). */
PyObject *py_model_wrap(ert_context *ctx, ert_model *m);
/* A new model capsule for m, made on parent_cap's context (ert_trainer_export,
 * ert_model_quantize). counted: the parent cannot be closed while it lives. */
PyObject *py_model_wrap_shared(PyObject *parent_cap, ert_model *m, int counted);
/* shapes (a sequence of (name bytes, dims)) into buf[cap]: the count, or -1
 * with an error set. The names point into the caller's bytes objects. */
int py_parse_shapes(PyObject *shapes, ert_input_shape *buf, int cap);
/* Free a session or trainer made from pm (either may be NULL) under pm's
 * lock, and drop its reference to the model (GIL held). */
void py_child_free(py_model *pm, PyObject **model_cap, ert_session *s, ert_trainer *t);
/* Input (is_out 0) or output i of a handle. */
typedef ert_status (*py_info_fn)(const void *h, int is_out, int i, ert_tensor_info *ti);
/* ([inputs], [outputs]) as lists of py_tensor_tuple. */
PyObject *py_info_lists(const void *h, int n_in, int n_out, py_info_fn get, py_model *pm);
/* (name, dtype name, dims tuple) of a tensor. */
PyObject *py_tensor_tuple(const ert_tensor_info *ti);
PyObject *py_memory_dict(const ert_memory_report *r);
/* A Python int that holds an address, to a pointer (NULL with an error set). */
int py_addr(PyObject *o, void **p);

/* Method tables of the other files, merged into the module's. */
extern PyMethodDef py_session_methods[];
extern PyMethodDef py_trainer_methods[];
extern PyMethodDef py_image_methods[];
extern PyMethodDef py_dlpack_methods[];
extern PyMethodDef py_quantize_methods[];

#endif
