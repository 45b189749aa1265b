/* DLPack (DLManagedTensorVersioned, "dltensor_versioned", for consumers that
 * ask for max_version >= (1, 0), else the unversioned DLManagedTensor,
 * "dltensor", which every consumer accepts): views of a session's input
 * and output buffers (GPU memory for a CUDA session, host memory for a CPU
 * one), and device tensors taken as run() inputs.
 *
 * Lifetime: a view holds a reference to its session's capsule and counts in
 * py_session.views; closing the session while views live refuses further
 * calls but frees the C session only with the last view, so a view never
 * points at freed memory. The deleter may run on any thread (a consumer frees
 * its tensor whenever it likes), hence PyGILState_Ensure. */
#include "ext.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef ERT_PY_CUDA
#include <cuda_runtime_api.h>
#endif

/* From dlpack.h (v0.8, Apache-2.0), the parts used here. */
typedef struct {
    int32_t device_type; /* kDLCPU 1, kDLCUDA 2, kDLCUDAHost 3, kDLCUDAManaged 13 */
    int32_t device_id;
} DLDevice;
typedef struct {
    uint8_t code; /* kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6 */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* NULL: compact row-major */
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
/* DLPack 1.x ("dltensor_versioned"), which consumers that ask for
 * max_version >= (1, 0) prefer (numpy imports the old form read-only). */
typedef struct DLManagedTensorVersioned {
    struct {
        uint32_t major, minor;
    } version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_MANAGED = 13 };

static int dl_dtype(ert_dtype dt, DLDataType *o) {
    static const DLDataType map[ERT_DTYPE_COUNT] = {
        [ERT_DTYPE_F32] = {2, 32, 1}, [ERT_DTYPE_F16] = {2, 16, 1}, [ERT_DTYPE_BF16] = {4, 16, 1},
        [ERT_DTYPE_I8] = {0, 8, 1},   [ERT_DTYPE_U8] = {1, 8, 1},   [ERT_DTYPE_I32] = {0, 32, 1},
        [ERT_DTYPE_I64] = {0, 64, 1}, [ERT_DTYPE_BOOL] = {6, 8, 1},
    };
    if (dt <= ERT_DTYPE_UNDEFINED || dt >= ERT_DTYPE_COUNT) return -1;
    *o = map[dt];
    return 0;
}

/* The CUDA device that owns ptr (0 without CUDA or when unknown). */
static int device_of(const void *ptr) {
#ifdef ERT_PY_CUDA
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, ptr) == cudaSuccess && at.device >= 0) return at.device;
    cudaGetLastError(); /* clear it: this query must not poison later calls */
#else
    (void)ptr;
#endif
    return 0;
}

/* ------------------------------------------------------------------ views */

typedef struct view_ctx {
    PyObject *session_cap;
    int64_t shape[ERT_MAX_DIMS];
} view_ctx;

/* Both forms of a view: the tensor struct and its context are one allocation. */
static void view_release(void *mt, view_ctx *vc) {
    PyGILState_STATE g = PyGILState_Ensure();
    py_session *ps = PyCapsule_GetPointer(vc->session_cap, PY_SESSION_CAPSULE);
    if (ps) {
        ps->views--;
        py_session_release(ps);
    } else {
        PyErr_Clear();
    }
    Py_DECREF(vc->session_cap);
    free(vc);
    free(mt);
    PyGILState_Release(g);
}

static void view_deleter(DLManagedTensor *mt) {
    if (mt) view_release(mt, mt->manager_ctx);
}
static void view_deleter_v(DLManagedTensorVersioned *mt) {
    if (mt) view_release(mt, mt->manager_ctx);
}

/* A capsule never consumed still owns its tensor. */
static void view_capsule_destroy(PyObject *cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *mt = PyCapsule_GetPointer(cap, "dltensor");
        if (mt && mt->deleter) mt->deleter(mt);
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *mt = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (mt && mt->deleter) mt->deleter(mt);
    } /* else consumed ("used_..."): the consumer owns it */
}

/* dlpack_view(session_cap, is_output, index, versioned) -> a "dltensor"
 * (or, versioned, "dltensor_versioned") capsule. */
static PyObject *m_dlpack_view(PyObject *self, PyObject *args) {
    PyObject *cap;
    int is_out = 0, i = 0, versioned = 0;
    if (!PyArg_ParseTuple(args, "Opi|p", &cap, &is_out, &i, &versioned)) return NULL;
    py_session *ps = py_session_get(cap);
    if (!ps) return NULL;
    ert_tensor_info ti;
    ert_status st = is_out ? ert_session_output_info(ps->s, i, &ti) : ert_session_input_info(ps->s, i, &ti);
    if (st != ERT_OK) return py_raise_ctx(ps->pm, st);
    void *ptr = NULL;
    if (ps->cuda) st = is_out ? ert_session_output_device(ps->s, i, &ptr) : ert_session_input_device(ps->s, i, &ptr);
    else if (is_out) {
        const void *c;
        st = ert_session_output_data(ps->s, i, &c);
        ptr = (void *)(uintptr_t)c; /* a CPU session's output slot in its arena */
    } else st = ert_session_input_data(ps->s, i, &ptr);
    if (st != ERT_OK) return py_raise_ctx(ps->pm, st);
    DLTensor t = {.data = ptr, .ndim = ti.ndim};
    if (dl_dtype(ti.dtype, &t.dtype) < 0) return py_raise(ERT_E_UNSUPPORTED, "this tensor's dtype has no DLPack code");
    t.device = (DLDevice){ps->cuda ? DL_CUDA : DL_CPU, ps->cuda ? device_of(ptr) : 0};
    view_ctx *vc = calloc(1, sizeof *vc);
    DLManagedTensor *mt = NULL;
    DLManagedTensorVersioned *mv = NULL;
    if (vc && versioned) mv = calloc(1, sizeof *mv);
    else if (vc) mt = calloc(1, sizeof *mt);
    if (!mt && !mv) {
        free(vc);
        return PyErr_NoMemory();
    }
    memcpy(vc->shape, ti.dims, sizeof vc->shape);
    t.shape = vc->shape;
    vc->session_cap = py_ref(cap);
    ps->views++;
    PyObject *res;
    if (mv) {
        mv->version.major = 1;
        mv->manager_ctx = vc;
        mv->deleter = view_deleter_v;
        mv->dl_tensor = t;
        if (!(res = PyCapsule_New(mv, "dltensor_versioned", view_capsule_destroy))) view_deleter_v(mv);
    } else {
        mt->manager_ctx = vc;
        mt->deleter = view_deleter;
        mt->dl_tensor = t;
        if (!(res = PyCapsule_New(mt, "dltensor", view_capsule_destroy))) view_deleter(mt);
    }
    return res;
}

/* dlpack_device(session_cap) -> (device_type, device_id) of its buffers. */
static PyObject *m_dlpack_device(PyObject *self, PyObject *cap) {
    py_session *ps = py_session_get(cap);
    if (!ps) return NULL;
    int dev = 0;
    void *p;
    if (ps->cuda && ert_session_n_inputs(ps->s) > 0 && ert_session_input_device(ps->s, 0, &p) == ERT_OK) dev = device_of(p);
    return Py_BuildValue("(ii)", ps->cuda ? DL_CUDA : DL_CPU, dev);
}

/* ------------------------------------------------------------------ inputs */

int py_dlpack_prepare(py_session *ps, int i, PyObject *cap, py_dl_in *out) {
    memset(out, 0, sizeof *out);
    if (!PyCapsule_IsValid(cap, "dltensor")) {
        PyErr_SetString(PyExc_TypeError, "__dlpack__() did not return an unconsumed 'dltensor' capsule");
        return -1;
    }
    DLManagedTensor *mt = PyCapsule_GetPointer(cap, "dltensor");
    if (!mt) return -1;
    const DLTensor *t = &mt->dl_tensor;
    ert_tensor_info ti;
    ert_status st = ert_session_input_info(ps->s, i, &ti);
    if (st != ERT_OK) return py_raise_ctx(ps->pm, st), -1;
    char msg[512];
    if (t->device.device_type != DL_CUDA && t->device.device_type != DL_CUDA_MANAGED) {
        snprintf(msg, sizeof msg, "input '%s': a DLPack tensor on device type %d is not GPU memory", ti.name,
                 (int)t->device.device_type);
        return py_raise(ERT_E_ARG, msg), -1;
    }
    if (!ps->cuda) {
        snprintf(msg, sizeof msg, "input '%s': a CUDA tensor given to a CPU session (create it with device='cuda', "
                 "or pass host memory)", ti.name);
        return py_raise(ERT_E_UNSUPPORTED, msg), -1;
    }
    void *dst;
    if ((st = ert_session_input_device(ps->s, i, &dst)) != ERT_OK) return py_raise_ctx(ps->pm, st), -1;
    int want_dev = device_of(dst);
    if (t->device.device_type == DL_CUDA && t->device.device_id != want_dev) {
        snprintf(msg, sizeof msg, "input '%s': the tensor is on cuda:%d, the session on cuda:%d", ti.name,
                 (int)t->device.device_id, want_dev);
        return py_raise(ERT_E_ARG, msg), -1;
    }
    DLDataType want;
    if (dl_dtype(ti.dtype, &want) < 0 || t->dtype.code != want.code || t->dtype.bits != want.bits || t->dtype.lanes != 1) {
        snprintf(msg, sizeof msg, "input '%s' is %s; the DLPack tensor has type code %d, %d bits", ti.name,
                 ert_dtype_name(ti.dtype), t->dtype.code, t->dtype.bits);
        return py_raise(ERT_E_SHAPE, msg), -1;
    }
    int same = t->ndim == ti.ndim;
    int64_t expect = 1;
    for (int d = ti.ndim - 1; same && d >= 0; d--) {
        same = t->shape[d] == ti.dims[d] && (!t->strides || ti.dims[d] == 1 || t->strides[d] == expect);
        expect *= ti.dims[d];
    }
    if (!same) {
        snprintf(msg, sizeof msg, "input '%s': the DLPack tensor's shape or strides differ from the session's "
                 "(a contiguous tensor of the input's shape is needed: call .contiguous())", ti.name);
        return py_raise(ERT_E_SHAPE, msg), -1;
    }
    out->dst = dst;
    out->src = (const char *)t->data + t->byte_offset;
    out->bytes = (size_t)expect * ert_dtype_size(ti.dtype);
    out->cap = cap;
    out->managed = mt;
    /* consumed: from here the deleter is ours to call (py_dlpack_release) */
    if (PyCapsule_SetName(cap, "used_dltensor") < 0) return -1;
    return 0;
}

int py_cuda_copy(void *dst, const void *src, size_t bytes, char *err, size_t cap) {
#ifdef ERT_PY_CUDA
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (e != cudaSuccess) {
        snprintf(err, cap, "copying an input to the GPU: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
#else
    (void)dst, (void)src, (void)bytes;
    snprintf(err, cap, "this edgert was built without CUDA: nothing can be copied to a GPU");
    return -1;
#endif
}

int py_dlpack_copy(const py_dl_in *d, char *err, size_t cap) { return py_cuda_copy(d->dst, d->src, d->bytes, err, cap); }

void py_dlpack_release(py_dl_in *d) {
    DLManagedTensor *mt = d->managed;
    if (mt && mt->deleter) mt->deleter(mt);
    d->managed = NULL;
}

PyMethodDef py_dlpack_methods[] = {
    {"dlpack_view", m_dlpack_view, METH_VARARGS, "dlpack_view(session, is_output, index, versioned=False) -> capsule"},
    {"dlpack_device", m_dlpack_device, METH_O, "dlpack_device(session) -> (device_type, device_id)"},
    {NULL, NULL, 0, NULL},
};
