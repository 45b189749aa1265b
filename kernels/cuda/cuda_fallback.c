/*
 * Per-node CPU fallback inside a CUDA session: a node the CUDA backend has no
 * kernel for runs the CPU kernel the session hands over, in stream order.
 *
 * At create (ert_cuda_host_bind) one pinned host block holds, per operand,
 *   stage  the device bytes as they are (the async copies' end point), and
 *   host   an f32 copy when the device tensor is f16/bf16 (the CPU kernels
 *          compute in f32; prepare saw f32 before the session lowered the
 *          precision), else the stage itself,
 * plus the CPU kernel's workspace. The CPU kernel's arguments are built once
 * over the host buffers.
 * At run (ert_cuda_host_enqueue), on the session's stream: every input
 * device->stage (cudaMemcpyAsync), then cudaLaunchHostFunc (widen the f16/bf16
 * inputs, run the kernel, narrow its f16/bf16 outputs), then every output
 * stage->device. All three are legal in stream capture, so the session's CUDA
 * graph keeps the whole run (host nodes included) and nothing is allocated
 * after create. The host function cannot report through CUDA, so it stores
 * its status; the backend reads it after synchronising.
 * Limits: the copies are synchronous with the GPU's work (the stream waits on
 * the host), which is the price of correctness; constant inputs are copied
 * every run like any other (the nodes that fall back are rare and small).
 */
#include "cuda_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct host_operand {
    void *dev;          /* the session's tensor (device or unified memory) */
    void *stage;        /* pinned: the device bytes */
    size_t dev_bytes;
    bool widen;         /* device f16/bf16, host f32 */
    ert_dtype dev_dt;
    int64_t n_elems;
} host_operand;

struct ert_cuda_host_node {
    ert_kernel_fn fn;
    ert_kargs args;     /* the CPU kernel's arguments over host memory */
    ert_tview *views;
    host_operand *ops;  /* n_in + n_out */
    int n_in, n_out;
    void *block;        /* cudaHostAlloc'd: stages, f32 copies, workspace */
    volatile ert_status status;
};

static bool is_half(ert_dtype dt) { return dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16; }

void ert_cuda_host_free(ert_cuda_host_node *h) {
    if (!h) return;
    if (h->block) cudaFreeHost(h->block);
    free(h->views);
    free(h->ops);
    free(h);
}

ert_status ert_cuda_host_bind(ert_context *ctx, const ert_kargs *a, ert_kernel_fn fn, ert_cuda_host_node **out) {
    *out = NULL;
    int nio = a->n_in + a->n_out;
    ert_cuda_host_node *h = calloc(1, sizeof *h);
    if (h) {
        h->views = calloc((size_t)nio + 1, sizeof *h->views);
        h->ops = calloc((size_t)nio + 1, sizeof *h->ops);
    }
    if (!h || !h->views || !h->ops) {
        ert_cuda_host_free(h);
        return ert_set_error(ctx, ERT_E_NOMEM, "node '%s': out of memory for its CPU fallback", a->name ? a->name : "?");
    }
    h->fn = fn;
    h->n_in = a->n_in;
    h->n_out = a->n_out;
    /* sizes: stage (device bytes) + f32 copy where widened, each 64-byte aligned */
    size_t total = 0;
    for (int k = 0; k < nio; k++) {
        const ert_tview *v = k < a->n_in ? &a->in[k] : &a->out[k - a->n_in];
        host_operand *o = &h->ops[k];
        if (!v->data) continue;
        o->dev = v->data;
        o->dev_dt = v->dtype;
        o->n_elems = v->n_elems;
        o->dev_bytes = (size_t)v->n_elems * ert_dtype_size(v->dtype);
        o->widen = is_half(v->dtype);
        total += ert_align_up(o->dev_bytes ? o->dev_bytes : 1, ERT_HOST_ALIGN);
        if (o->widen) total += ert_align_up((size_t)v->n_elems * sizeof(float), ERT_HOST_ALIGN);
    }
    total += ert_align_up(a->workspace_bytes, ERT_HOST_ALIGN);
    cudaError_t e = cudaHostAlloc(&h->block, total ? total : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        h->block = NULL;
        ert_cuda_host_free(h);
        cudaGetLastError();
        return ert_set_error(ctx, ERT_E_NOMEM, "node '%s': cannot allocate %zu bytes of pinned memory for its CPU fallback: %s",
                             a->name ? a->name : "?", total, cudaGetErrorString(e));
    }
    uint8_t *p = h->block;
    for (int k = 0; k < nio; k++) {
        const ert_tview *v = k < a->n_in ? &a->in[k] : &a->out[k - a->n_in];
        host_operand *o = &h->ops[k];
        ert_tview *hv = &h->views[k];
        *hv = *v;
        if (!v->data) continue;
        o->stage = p;
        p += ert_align_up(o->dev_bytes ? o->dev_bytes : 1, ERT_HOST_ALIGN);
        hv->data = o->stage;
        if (o->widen) {
            hv->data = p;
            hv->dtype = ERT_DTYPE_F32;
            p += ert_align_up((size_t)v->n_elems * sizeof(float), ERT_HOST_ALIGN);
        }
    }
    h->args = *a;
    h->args.in = h->views;
    h->args.out = h->views + a->n_in;
    h->args.workspace = a->workspace_bytes ? p : NULL;
    h->args.state = NULL;
    h->status = ERT_OK;
    *out = h;
    return ERT_OK;
}

static void widen(const host_operand *o, float *dst) {
    const uint16_t *s = o->stage;
    if (o->dev_dt == ERT_DTYPE_F16) {
        ert_f16_to_f32_n(dst, s, (size_t)o->n_elems);
        return;
    }
    for (int64_t i = 0; i < o->n_elems; i++) dst[i] = ert_bf16_to_f32(s[i]);
}

static void narrow(const host_operand *o, const float *src) {
    uint16_t *d = o->stage;
    if (o->dev_dt == ERT_DTYPE_F16) ert_f32_to_f16_n(d, src, (size_t)o->n_elems);
    else ert_f32_to_bf16_n(d, src, (size_t)o->n_elems);
}

/* Runs on a CUDA-owned thread between the input and output copies. */
static void CUDART_CB host_run(void *arg) {
    ert_cuda_host_node *h = arg;
    for (int k = 0; k < h->n_in; k++)
        if (h->ops[k].stage && h->ops[k].widen) widen(&h->ops[k], h->views[k].data);
    ert_status st = h->fn(&h->args);
    for (int k = h->n_in; k < h->n_in + h->n_out && st == ERT_OK; k++)
        if (h->ops[k].stage && h->ops[k].widen) narrow(&h->ops[k], h->views[k].data);
    h->status = st;
}

cudaError_t ert_cuda_host_enqueue(ert_cuda_host_node *h, cudaStream_t st) {
    cudaError_t e = cudaSuccess;
    for (int k = 0; k < h->n_in && e == cudaSuccess; k++)
        if (h->ops[k].stage && h->ops[k].dev_bytes)
            e = cudaMemcpyAsync(h->ops[k].stage, h->ops[k].dev, h->ops[k].dev_bytes, cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaLaunchHostFunc(st, host_run, h);
    for (int k = h->n_in; k < h->n_in + h->n_out && e == cudaSuccess; k++)
        if (h->ops[k].stage && h->ops[k].dev_bytes)
            e = cudaMemcpyAsync(h->ops[k].dev, h->ops[k].stage, h->ops[k].dev_bytes, cudaMemcpyHostToDevice, st);
    return e;
}

ert_status ert_cuda_host_status(const ert_cuda_host_node *h) { return h->status; }
void ert_cuda_host_reset(ert_cuda_host_node *h) { h->status = ERT_OK; }
