/* Image helpers: JPEG decode through the library's TurboJPEG codec, the
 * camera pipeline's CPU preprocessing (apps/camera/proc.c, compiled into the
 * extension: the same resize/normalise code the camera app runs) and its GPU
 * preprocessor (ert_preprocessor_*). */
#include "ext.h"

#include "proc.h"

#include <string.h>

/* A context and codec for one call (TurboJPEG's init costs microseconds). */
typedef struct jpeg_call {
    ert_context *ctx;
    ert_jpeg *j;
} jpeg_call;

static int jpeg_open(jpeg_call *c) {
    memset(c, 0, sizeof *c);
    ert_status st = ert_context_create(NULL, &c->ctx);
    if (st != ERT_OK) return py_raise(st, "cannot create a context"), -1;
    st = ert_jpeg_create(c->ctx, &c->j);
    if (st != ERT_OK) {
        py_raise(st, *ert_last_error(c->ctx) ? ert_last_error(c->ctx) : "this edgert was built without JPEG support");
        ert_context_free(c->ctx);
        return -1;
    }
    return 0;
}

static void jpeg_close(jpeg_call *c) {
    ert_jpeg_free(c->j);
    ert_context_free(c->ctx);
}

/* jpeg_info(address, size) -> (width, height, channels) */
static PyObject *m_jpeg_info(PyObject *self, PyObject *args) {
    PyObject *addr;
    Py_ssize_t size;
    void *p;
    if (!PyArg_ParseTuple(args, "On", &addr, &size) || py_addr(addr, &p) < 0) return NULL;
    jpeg_call c;
    if (jpeg_open(&c) < 0) return NULL;
    int w = 0, h = 0, ch = 0;
    ert_status st = ert_jpeg_info(c.j, p, (size_t)size, &w, &h, &ch);
    PyObject *r = st == ERT_OK ? Py_BuildValue("(iii)", w, h, ch) : py_raise(st, ert_last_error(c.ctx));
    jpeg_close(&c);
    return r;
}

/* jpeg_decode(address, size, pixel_format, denom, dst_address, dst_bytes) -> (width, height) */
static PyObject *m_jpeg_decode(PyObject *self, PyObject *args) {
    PyObject *addr, *daddr;
    Py_ssize_t size, dbytes;
    int fmt, denom;
    void *p, *dst;
    if (!PyArg_ParseTuple(args, "OniiOn", &addr, &size, &fmt, &denom, &daddr, &dbytes) || py_addr(addr, &p) < 0 ||
        py_addr(daddr, &dst) < 0)
        return NULL;
    jpeg_call c;
    if (jpeg_open(&c) < 0) return NULL;
    int w = 0, h = 0;
    ert_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ert_jpeg_decode_scaled(c.j, p, (size_t)size, denom, (ert_pixel_format)fmt, dst, (size_t)dbytes, 0, &w, &h);
    Py_END_ALLOW_THREADS
    PyObject *r = st == ERT_OK ? Py_BuildValue("(ii)", w, h) : py_raise(st, ert_last_error(c.ctx));
    jpeg_close(&c);
    return r;
}

/* preprocess(src_address, width, height, stride, out_w, out_h, fit, pad, scale,
 *            (mean3), (std3), nhwc, bgr, gray, dst_address, dst_bytes)
 * -> the transform (sx0, sy0, sw, sh, dx0, dy0, dw, dh): frame rectangle ->
 * input rectangle, for mapping boxes back. src is packed RGB u8. */
static PyObject *m_preprocess(PyObject *self, PyObject *args) {
    PyObject *saddr, *daddr;
    int w, h, ow, oh, fit, pad, nhwc, bgr, gray;
    Py_ssize_t stride, dbytes;
    float scale, mean[3], sd[3];
    if (!PyArg_ParseTuple(args, "Oiiniiiif(fff)(fff)iiiOn", &saddr, &w, &h, &stride, &ow, &oh, &fit, &pad, &scale,
                          &mean[0], &mean[1], &mean[2], &sd[0], &sd[1], &sd[2], &nhwc, &bgr, &gray, &daddr, &dbytes))
        return NULL;
    void *src, *dst;
    if (py_addr(saddr, &src) < 0 || py_addr(daddr, &dst) < 0) return NULL;
    if (w < 1 || h < 1 || ow < 1 || oh < 1 || stride < (Py_ssize_t)w * 3 || fit < 0 || fit > 2 || pad < 0 || pad > 255)
        return py_raise(ERT_E_ARG, "preprocess: bad sizes, stride, fit or pad");
    size_t need = (size_t)ow * (size_t)oh * (gray ? 1u : 3u) * sizeof(float);
    if ((size_t)dbytes != need) return py_raise(ERT_E_ARG, "preprocess: the output buffer has the wrong size");
    cam_pre_options o = {.out_w = ow, .out_h = oh, .fit = (cam_fit)fit, .pad = (uint8_t)pad, .scale = scale,
                         .nhwc = nhwc, .bgr = bgr, .gray = gray};
    memcpy(o.mean, mean, sizeof mean);
    memcpy(o.std, sd, sizeof sd);
    cam_xform xf;
    Py_BEGIN_ALLOW_THREADS
    cam_preprocess(src, w, h, (size_t)stride, &o, dst, &xf);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(dddddddd)", xf.sx0, xf.sy0, xf.sw, xf.sh, xf.dx0, xf.dy0, xf.dw, xf.dh);
}

/* ------------------------------------------------------------------ GPU preprocessing */

#define PY_PREP_CAPSULE "edgert.preprocessor"

/* A preprocessor and the context it reports on (one per preprocessor: the
 * Python object, like the C one, is used by one thread at a time). */
typedef struct py_prep {
    ert_context *ctx;
    ert_preprocessor *p;
} py_prep;

static void py_prep_free(py_prep *pp) {
    if (!pp) return;
    ert_preprocessor_free(pp->p);
    ert_context_free(pp->ctx);
    free(pp);
}

static void prep_destroy(PyObject *cap) { py_prep_free(PyCapsule_GetPointer(cap, PY_PREP_CAPSULE)); }

/* preprocessor_create(max_w, max_h, out_w, out_h, fit, pad, scale, (mean3), (std3), nhwc, bgr, gray, f16)
 * -> capsule. Allocates the pinned staging, device buffers and stream. */
static PyObject *m_prep_create(PyObject *self, PyObject *args) {
    int mw, mh, ow, oh, fit, pad, nhwc, bgr, gray, f16;
    float scale, mean[3], sd[3];
    if (!PyArg_ParseTuple(args, "iiiiiif(fff)(fff)iiii", &mw, &mh, &ow, &oh, &fit, &pad, &scale, &mean[0], &mean[1],
                          &mean[2], &sd[0], &sd[1], &sd[2], &nhwc, &bgr, &gray, &f16))
        return NULL;
    if (pad < 0 || pad > 255) return py_raise(ERT_E_ARG, "pad must be in [0, 255]");
    ert_preprocessor_options o = {.out_w = ow, .out_h = oh, .fit = (ert_fit)fit, .pad = (uint8_t)pad, .scale = scale,
                                  .nhwc = nhwc, .bgr = bgr, .gray = gray, .f16 = f16};
    memcpy(o.mean, mean, sizeof mean);
    memcpy(o.std, sd, sizeof sd);
    py_prep *pp = calloc(1, sizeof *pp);
    if (!pp) return PyErr_NoMemory();
    ert_status st = ert_context_create(NULL, &pp->ctx);
    if (st != ERT_OK) {
        py_prep_free(pp);
        return py_raise(st, "cannot create a context");
    }
    Py_BEGIN_ALLOW_THREADS
    st = ert_preprocessor_create(pp->ctx, mw, mh, &o, &pp->p);
    Py_END_ALLOW_THREADS
    if (st != ERT_OK) {
        PyObject *r = py_raise(st, ert_last_error(pp->ctx));
        py_prep_free(pp);
        return r;
    }
    PyObject *cap = PyCapsule_New(pp, PY_PREP_CAPSULE, prep_destroy);
    if (!cap) py_prep_free(pp);
    return cap;
}

/* preprocessor_run(cap, src_address, w, h, stride, frame_format, dst_address, dst_bytes, dst_on_gpu) */
static PyObject *m_prep_run(PyObject *self, PyObject *args) {
    PyObject *cap, *saddr, *daddr;
    int w, h, fmt, on_gpu;
    Py_ssize_t stride, dbytes;
    if (!PyArg_ParseTuple(args, "OOiiniOnp", &cap, &saddr, &w, &h, &stride, &fmt, &daddr, &dbytes, &on_gpu)) return NULL;
    py_prep *pp = PyCapsule_GetPointer(cap, PY_PREP_CAPSULE);
    void *src, *dst;
    if (!pp || py_addr(saddr, &src) < 0 || py_addr(daddr, &dst) < 0) return NULL;
    ert_preprocessor *p = pp->p;
    if ((size_t)dbytes != ert_preprocessor_output_bytes(p))
        return py_raise(ERT_E_ARG, "the destination does not hold one preprocessed image");
    ert_status st;
    Py_BEGIN_ALLOW_THREADS
    st = on_gpu ? ert_preprocessor_run_device(p, src, w, h, (size_t)stride, (ert_pixel_format)fmt, dst)
                : ert_preprocessor_run(p, src, w, h, (size_t)stride, (ert_pixel_format)fmt, dst);
    Py_END_ALLOW_THREADS
    if (st != ERT_OK) return py_raise(st, ert_last_error(pp->ctx));
    Py_RETURN_NONE;
}

static PyObject *m_jpeg_available(PyObject *self, PyObject *unused) { return PyBool_FromLong(ert_jpeg_available()); }

PyMethodDef py_image_methods[] = {
    {"jpeg_available", m_jpeg_available, METH_NOARGS, "True when edgert was built with TurboJPEG."},
    {"jpeg_info", m_jpeg_info, METH_VARARGS, "jpeg_info(address, size) -> (width, height, channels)"},
    {"jpeg_decode", m_jpeg_decode, METH_VARARGS, "jpeg_decode(address, size, format, denom, dst, dst_bytes) -> (w, h)"},
    {"preprocess", m_preprocess, METH_VARARGS, "preprocess(...) -> transform (see edgert.preprocess)"},
    {"preprocessor_create", m_prep_create, METH_VARARGS, "preprocessor_create(...) -> capsule (see edgert.Preprocessor)"},
    {"preprocessor_run", m_prep_run, METH_VARARGS, "preprocessor_run(cap, src, w, h, stride, format, dst, dst_bytes, on_gpu)"},
    {NULL, NULL, 0, NULL},
};
