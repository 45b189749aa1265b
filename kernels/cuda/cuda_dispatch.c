/* CUDA backend: the per-op hooks (workspace, bind, release, supports) and the
 * dispatch of one node onto the stream.
 * (kernels/cuda/cuda_backend.h: the backend as a whole and what the files share.) */
#include "cuda_backend.h"

/* ------------------------------------------------------------------ node hooks */

static bool is_blas_op(ert_op op) { return op == ERT_OP_GEMM || op == ERT_OP_MATMUL; }
static bool is_float(ert_dtype dt) { return dt == ERT_DTYPE_F32 || dt == ERT_DTYPE_F16 || dt == ERT_DTYPE_BF16; }

ert_status ert_cuda_node_workspace(void *bctx, const ert_kargs *a, size_t *bytes) {
    cuda_ctx *c = bctx;
    (void)c;
    *bytes = 0;
    if (a->op == ERT_OP_CONV_TRANSPOSE && (*bytes = ert_cuda_convt_gemm_ws(c, a)) > 0) return ERT_OK;
    if (ert_cuda_train_op(a->op) || a->op == ERT_OP_CONV_TRANSPOSE) {
        ert_cuda_env env = env_of(c);
        return ert_cuda_train_workspace(&env, a, bytes);
    }
    if (is_blas_op(a->op)) {
        *bytes = BLAS_WS;
        return ERT_OK;
    }
    if (a->op == ERT_OP_ATTENTION) {
        *bytes = ert_cuda_attn_workspace(c, a);
        return ERT_OK;
    }
    if ((a->op == ERT_OP_QLINEAR_CONV || a->op == ERT_OP_CONV_INTEGER) && c->cc_major >= 8 && c->dw_rsc) {
        *bytes = ert_cuda_qmma_ws(a, c->sm_count); /* dw_rsc: the session packs (not NO_PACK, not a trainer) */
        return ERT_OK;
    }
    if ((a->op == ERT_OP_LAYERNORM || a->op == ERT_OP_INSTANCENORM) && a->n_in > 0 && a->in[0].ndim >= 2) {
        const ert_tview *x = &a->in[0];
        int64_t split = a->op == ERT_OP_LAYERNORM ? a->params->norm.axis : 2, rows = 1, inner = 1;
        for (int i = 0; i < x->ndim; i++) {
            if (i < split) rows *= x->dims[i];
            else inner *= x->dims[i];
        }
        *bytes = ert_cuda_norm_split_ws(rows, inner);
        return ERT_OK;
    }
#ifdef ERT_HAVE_CUDNN
    if (a->op == ERT_OP_CONV && ert_cuda_dnn_can(a)) return ert_cuda_conv_workspace(c, a, bytes);
#endif
    return ERT_OK;
}

ert_status ert_cuda_bind_node(void *bctx, ert_kargs *a) {
    cuda_ctx *c = bctx;
    a->state = NULL;
    if (ert_cuda_train_op(a->op) || a->op == ERT_OP_CONV_TRANSPOSE) {
        ert_cuda_env env = env_of(c);
        return ert_cuda_train_bind(&env, a);
    }
    /* supports() saw input 0's dtype only */
    if (a->op == ERT_OP_WHERE && (!is_float(a->in[1].dtype) || a->in[2].dtype != a->in[1].dtype))
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED, "node '%s' (Where): the cuda backend does not implement it yet for %s data",
                             a->name ? a->name : "?", ert_dtype_name(a->in[1].dtype));
    /* the CUDA resize kernel implements nearest and linear without tf_crop_and_resize; cubic and
     * tf_crop_and_resize run on the CPU backend only */
    if (a->op == ERT_OP_RESIZE && a->params->resize.mode != 0 && a->params->resize.mode != 1)
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED, "node '%s' (Resize): the cuda backend does not implement mode \"cubic\" yet",
                             a->name ? a->name : "?");
    if (a->op == ERT_OP_RESIZE && a->params->resize.coord == 4)
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED,
                             "node '%s' (Resize): the cuda backend does not implement coordinate_transformation_mode "
                             "\"tf_crop_and_resize\" yet", a->name ? a->name : "?");
    /* the CUDA norm kernels implement inference only: no batch statistics,
     * no LayerNorm Mean/InvStdDev outputs (the CPU kernels do) */
    if ((a->op == ERT_OP_BATCHNORM && a->params->norm.training) || (a->op == ERT_OP_LAYERNORM && a->n_out > 1))
        return ert_set_error(c->ctx, ERT_E_UNSUPPORTED, "node '%s': the cuda backend does not implement %s yet",
                             a->name ? a->name : "?",
                             a->op == ERT_OP_BATCHNORM ? "BatchNormalization training_mode=1"
                                                       : "LayerNormalization Mean/InvStdDev outputs");
    /* every float operand of a node has one dtype (a reduced-precision
     * session converts them all); a model mixing them needs a Cast */
    for (int k = 0; k < a->n_in + a->n_out && a->op != ERT_OP_CAST; k++) {
        const ert_tview *v = k < a->n_in ? &a->in[k] : &a->out[k - a->n_in];
        if (v->data && is_float(v->dtype) && is_float(a->in[0].dtype) && v->dtype != a->in[0].dtype)
            return ert_set_error(c->ctx, ERT_E_UNSUPPORTED, "node '%s': the cuda backend needs one float dtype per node (%s and %s)",
                                 a->name ? a->name : "?", ert_dtype_name(a->in[0].dtype), ert_dtype_name(v->dtype));
    }
    if (a->op == ERT_OP_ATTENTION) return ert_cuda_attn_bind(c, a);
    if (a->op == ERT_OP_CONV) { /* before the conv's timings, which run the kernel that reads it */
        ert_status st = ert_cuda_dw_pack(c, a);
        if (st != ERT_OK) return st;
    }
    if (a->op == ERT_OP_QLINEAR_CONV || a->op == ERT_OP_CONV_INTEGER) return ert_cuda_qconv_pack(c, a);
#ifdef ERT_HAVE_CUDNN
    if (a->op == ERT_OP_CONV && ert_cuda_dnn_can(a)) return ert_cuda_conv_bind(c, a);
    if (a->op == ERT_OP_MATMUL) return ert_cuda_matmul_bind(c, a);
#endif
    return ERT_OK;
}

void *ert_cuda_scratch(cuda_ctx *c, size_t n, cudaError_t *e) {
    *e = cudaSuccess;
    if (n <= c->scratch_bytes && c->scratch) return c->scratch;
    ert_cuda_scratch_free(c);
    size_t want = n < ((size_t)4 << 20) ? ((size_t)4 << 20) : n;
    if ((*e = cudaMalloc(&c->scratch, want)) != cudaSuccess) {
        c->scratch = NULL;
        cudaGetLastError();
        return NULL;
    }
    c->scratch_bytes = want;
    return c->scratch;
}

void ert_cuda_scratch_free(cuda_ctx *c) {
    if (!c->scratch) return;
    cudaStreamSynchronize(c->stream);
    cudaFree(c->scratch);
    cudaGetLastError();
    c->scratch = NULL;
    c->scratch_bytes = 0;
}

float ert_cuda_time_ms(cuda_ctx *c, ert_status (*run)(cuda_ctx *c, void *u), void *u) {
    cudaEvent_t ev[2] = {0};
    float ms = -1;
    ert_status st = ERT_OK;
    double t0 = ert_cuda_now_ms();
    if (cudaEventCreate(&ev[0]) == cudaSuccess && cudaEventCreate(&ev[1]) == cudaSuccess) {
        for (int i = 0; i < 12 && st == ERT_OK; i++) {
            if (i == 2) cudaEventRecord(ev[0], c->stream);
            st = run(c, u);
        }
        if (st == ERT_OK && cudaEventRecord(ev[1], c->stream) == cudaSuccess &&
            cudaEventSynchronize(ev[1]) == cudaSuccess && cudaEventElapsedTime(&ms, ev[0], ev[1]) == cudaSuccess)
            ms /= 10.0f;
        else
            ms = -1;
    }
    cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    for (int i = 0; i < 2; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    c->t_measure += ert_cuda_now_ms() - t0;
    return ms;
}

/* ------------------------------------------------------------------ CPU fallback (cuda_fallback.c) */

static ert_cuda_host_node *host_of(const cuda_ctx *c, const ert_kargs *a) {
    for (int i = 0; i < c->n_hosts; i++)
        if (c->hosts[i] == a) return a->state;
    return NULL;
}

ert_status ert_cuda_bind_host_node(void *bctx, ert_kargs *a, ert_kernel_fn cpu) {
    cuda_ctx *c = bctx;
    a->state = NULL;
    if (c->n_hosts == c->cap_hosts) {
        int cap = c->cap_hosts ? 2 * c->cap_hosts : 8;
        ert_kargs **h = realloc(c->hosts, (size_t)cap * sizeof *h);
        if (!h) return ert_set_error(c->ctx, ERT_E_NOMEM, "out of memory");
        c->hosts = h;
        c->cap_hosts = cap;
    }
    ert_cuda_host_node *h = NULL;
    ert_status st = ert_cuda_host_bind(c->ctx, a, cpu, &h);
    if (st != ERT_OK) return st;
    a->state = h;
    c->hosts[c->n_hosts++] = a;
    return ERT_OK;
}

/* After the stream is synchronised: the first host node that failed, as the
 * run's status (*failed its index in nodes); every status reset. */
ert_status ert_cuda_host_check(cuda_ctx *c, ert_kargs *const *nodes, int n, int *failed) {
    ert_status first = ERT_OK;
    for (int i = 0; i < c->n_hosts; i++) {
        ert_cuda_host_node *h = c->hosts[i]->state;
        ert_status st = ert_cuda_host_status(h);
        ert_cuda_host_reset(h);
        if (st == ERT_OK || first != ERT_OK) continue;
        first = st;
        for (int k = 0; k < n; k++)
            if (nodes[k] == c->hosts[i]) *failed = k;
        ert_set_error(c->ctx, st, "its CPU kernel (the CPU fallback: no CUDA kernel) failed: %s", ert_status_str(st));
    }
    return first;
}

void ert_cuda_release_node(void *bctx, ert_kargs *a) {
    cuda_ctx *c = bctx;
    for (int i = 0; i < c->n_hosts; i++)
        if (c->hosts[i] == a) {
            ert_cuda_host_free(a->state);
            a->state = NULL;
            c->hosts[i] = c->hosts[--c->n_hosts];
            return;
        }
    if (ert_cuda_train_op(a->op) || a->op == ERT_OP_CONV_TRANSPOSE) {
        ert_cuda_train_release(a);
        return;
    }
#ifdef ERT_HAVE_CUDNN
    if (a->op == ERT_OP_CONV || a->op == ERT_OP_MATMUL) ert_cuda_conv_state_free(a->state);
#endif
    a->state = NULL;
}

/* ------------------------------------------------------------------ dispatch */


static ert_status run_binary(cuda_ctx *c, const ert_kargs *a) {
    const ert_tview *y = &a->out[0];
    ert_cuda_map m;
    map_out(&m, y);
    cudaError_t e;
    if (a->op == ERT_OP_WHERE) {
        for (int k = 0; k < 3; k++) ert_cuda_bcast_strides(y->ndim, y->dims, a->in[k].ndim, a->in[k].dims, m.s[k]);
        e = ert_cuda_where_launch(y->dtype, a->in[0].data, a->in[1].data, a->in[2].data, y->data, &m, y->n_elems,
                                  c->stream);
    } else {
        /* Min/Max are variadic in ONNX: one input is op(x, x) = x; more fold
         * into y left to right (y = op(y, x_k) in place, element by element) */
        const ert_tview *x1 = a->n_in > 1 ? &a->in[1] : &a->in[0];
        ert_cuda_bcast_strides(y->ndim, y->dims, a->in[0].ndim, a->in[0].dims, m.s[0]);
        ert_cuda_bcast_strides(y->ndim, y->dims, x1->ndim, x1->dims, m.s[1]);
        e = ert_cuda_binary_launch(a->op, a->in[0].dtype, a->in[0].data, x1->data, y->data, &m, y->n_elems, c->stream);
        for (int k = 2; k < a->n_in && e == cudaSuccess; k++) {
            ert_cuda_contig_strides(y->ndim, y->dims, m.s[0]);
            ert_cuda_bcast_strides(y->ndim, y->dims, a->in[k].ndim, a->in[k].dims, m.s[1]);
            e = ert_cuda_binary_launch(a->op, y->dtype, y->data, a->in[k].data, y->data, &m, y->n_elems, c->stream);
        }
    }
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "element-wise kernel");
}

/* Data movement: everything is one strided copy (or a plain memcpy). */
static ert_status run_copy(cuda_ctx *c, const ert_kargs *a) {
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    size_t es = ert_dtype_size(x->dtype);
    int64_t xs[ERT_MAX_DIMS], ys[ERT_MAX_DIMS];
    ert_cuda_map m;
    cudaError_t e = cudaSuccess;
    switch (a->op) {
    case ERT_OP_IDENTITY: case ERT_OP_DROPOUT: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE:
    case ERT_OP_SQUEEZE: case ERT_OP_UNSQUEEZE:
        if (y->data != x->data && y->n_elems)
            e = cudaMemcpyAsync(y->data, x->data, (size_t)y->n_elems * es, cudaMemcpyDeviceToDevice, c->stream);
        if (e == cudaSuccess && a->op == ERT_OP_DROPOUT && a->n_out > 1 && a->out[1].data && a->out[1].n_elems)
            e = cudaMemsetAsync(a->out[1].data, 1, (size_t)a->out[1].n_elems, c->stream); /* mask: all kept */
        break;
    case ERT_OP_TRANSPOSE:
        map_out(&m, y);
        ert_cuda_contig_strides(x->ndim, x->dims, xs);
        for (int d = 0; d < y->ndim; d++) m.s[0][d] = xs[a->params->transpose.perm[d]];
        ert_cuda_contig_strides(y->ndim, y->dims, m.s[1]);
        e = ert_cuda_strided_copy_launch(x->data, 0, y->data, 0, es, &m, y->n_elems, c->stream);
        break;
    case ERT_OP_EXPAND:
        map_out(&m, y);
        ert_cuda_bcast_strides(y->ndim, y->dims, x->ndim, x->dims, m.s[0]);
        ert_cuda_contig_strides(y->ndim, y->dims, m.s[1]);
        e = ert_cuda_strided_copy_launch(x->data, 0, y->data, 0, es, &m, y->n_elems, c->stream);
        break;
    case ERT_OP_SLICE: {
        const ert_slice_params *p = &a->params->slice;
        map_out(&m, y);
        ert_cuda_contig_strides(x->ndim, x->dims, xs);
        int64_t off = 0;
        for (int d = 0; d < x->ndim; d++) {
            off += p->start[d] * xs[d];
            m.s[0][d] = p->step[d] * xs[d];
        }
        ert_cuda_contig_strides(y->ndim, y->dims, m.s[1]);
        e = ert_cuda_strided_copy_launch(x->data, off, y->data, 0, es, &m, y->n_elems, c->stream);
        break;
    }
    case ERT_OP_CONCAT: {
        int64_t axis = a->params->axis.axis, pos = 0;
        ert_cuda_contig_strides(y->ndim, y->dims, ys);
        for (int k = 0; k < a->n_in && e == cudaSuccess; k++) {
            const ert_tview *xk = &a->in[k];
            if (!xk->data) continue;
            map_out(&m, xk);
            ert_cuda_contig_strides(xk->ndim, xk->dims, m.s[0]);
            memcpy(m.s[1], ys, sizeof ys);
            e = ert_cuda_strided_copy_launch(xk->data, 0, y->data, pos * ys[axis], es, &m, xk->n_elems, c->stream);
            pos += xk->dims[axis];
        }
        break;
    }
    case ERT_OP_SPLIT: {
        int64_t axis = a->params->split.axis, pos = 0;
        ert_cuda_contig_strides(x->ndim, x->dims, xs);
        for (int k = 0; k < a->n_out && e == cudaSuccess; k++) {
            const ert_tview *yk = &a->out[k];
            if (!yk->data) continue;
            map_out(&m, yk);
            memcpy(m.s[0], xs, sizeof xs);
            ert_cuda_contig_strides(yk->ndim, yk->dims, m.s[1]);
            e = ert_cuda_strided_copy_launch(x->data, pos * xs[axis], yk->data, 0, es, &m, yk->n_elems, c->stream);
            pos += yk->dims[axis];
        }
        break;
    }
    default: return ERT_E_UNSUPPORTED;
    }
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "copy kernel");
}

ert_status ert_cuda_run_node(cuda_ctx *c, const ert_kargs *a) {
    cudaError_t e;
    const ert_tview *x = &a->in[0], *y = &a->out[0];
    ert_cuda_host_node *h = c->n_hosts ? host_of(c, a) : NULL;
    if (h) return (e = ert_cuda_host_enqueue(h, c->stream)) == cudaSuccess ? ERT_OK : cuda_err(c, e, "CPU fallback copies");
    if (ert_cuda_quant_claims(a->op, x->dtype)) return ert_cuda_run_quant(c, a);
    if (ert_cuda_train_op(a->op) || (a->op == ERT_OP_CONV_TRANSPOSE && a->state)) {
        ert_cuda_env env = env_of(c);
        return ert_cuda_train_run(&env, a);
    }
    switch (a->op) {
    case ERT_OP_CONV: return ert_cuda_run_conv(c, a);
    case ERT_OP_CONV_TRANSPOSE: {
        ert_status cst;
        if (ert_cuda_run_convt_gemm(c, a, &cst)) return cst;
        e = ert_cuda_conv_transpose_launch(&a->params->conv, x, a->in[1].data,
                                           a->params->conv.has_bias && a->n_in > 2 ? a->in[2].data : NULL, y,
                                           c->stream);
        break;
    }
    case ERT_OP_CAST: e = ert_cuda_cast_launch(x, y, c->stream); break;
    case ERT_OP_GATHER: e = ert_cuda_gather_launch(a->params->gather.axis, x, &a->in[1], y, c->stream); break;
    case ERT_OP_GEMM: return ert_cuda_run_gemm(c, a);
    case ERT_OP_MATMUL: return ert_cuda_run_matmul(c, a);
    case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL:
        e = ert_cuda_pool_launch(a->op == ERT_OP_MAXPOOL, &a->params->pool, x, y, c->stream);
        break;
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_GLOBAL_MAXPOOL: {
        /* channels-last (pool.nhwc): x (N, H, W, C) -> y (N, 1, 1, C) */
        bool nh = a->params->pool.nhwc && x->ndim > 2;
        int64_t sz = 1;
        for (int i = nh ? 1 : 2; i < (nh ? x->ndim - 1 : x->ndim); i++) sz *= x->dims[i];
        int64_t C = x->ndim >= 2 ? x->dims[nh ? x->ndim - 1 : 1] : 1;
        e = ert_cuda_global_pool_launch(a->op == ERT_OP_GLOBAL_MAXPOOL, x->dtype, x->data, y->data,
                                        x->ndim >= 2 ? x->dims[0] * C : 1, sz, nh ? C : 0, c->stream);
        break;
    }
    case ERT_OP_BATCHNORM: {
        int64_t sz = 1;
        for (int i = 2; i < x->ndim; i++) sz *= x->dims[i];
        e = ert_cuda_batchnorm_launch(x->dtype, x->data, a->in[1].data, a->in[2].data, a->in[3].data, a->in[4].data, y->data,
                                      a->params->norm.epsilon, x->dims[0], x->ndim > 1 ? x->dims[1] : 1, sz,
                                      c->stream);
        break;
    }
    case ERT_OP_LAYERNORM: {
        const ert_tview *S = &a->in[1], *B = a->n_in > 2 && a->in[2].data ? &a->in[2] : NULL;
        int64_t axis = a->params->norm.axis, inner = 1, outer = 1;
        for (int i = 0; i < x->ndim; i++) {
            if (i < axis) outer *= x->dims[i];
            else inner *= x->dims[i];
        }
        e = ert_cuda_layernorm_launch(x->dtype, x->data, S->data, B ? B->data : NULL, y->data, a->params->norm.epsilon, outer,
                                      inner, S->n_elems == 1, B && B->n_elems == 1, a->workspace, a->workspace_bytes,
                                      c->stream);
        break;
    }
    case ERT_OP_INSTANCENORM: {
        int64_t sz = 1;
        for (int i = 2; i < x->ndim; i++) sz *= x->dims[i];
        e = ert_cuda_instancenorm_launch(x->dtype, x->data, a->in[1].data, a->in[2].data, y->data,
                                         a->params->norm.epsilon, x->dims[0], x->dims[1], sz, a->workspace,
                                         a->workspace_bytes, c->stream);
        break;
    }
    case ERT_OP_CUMSUM: {
        int64_t axis = a->params->cumsum.axis, outer = 1, inner = 1;
        for (int i = 0; i < x->ndim; i++) {
            if (i < axis) outer *= x->dims[i];
            else if (i > axis) inner *= x->dims[i];
        }
        e = ert_cuda_cumsum_launch(x->dtype, x->data, y->data, outer, x->dims[axis], inner, a->params->cumsum.exclusive,
                                   a->params->cumsum.reverse, c->stream);
        break;
    }
    case ERT_OP_SOFTMAX: case ERT_OP_LOGSOFTMAX: {
        int64_t axis = a->params->axis.axis, outer = 1, inner = 1;
        for (int i = 0; i < x->ndim; i++) {
            if (i < axis) outer *= x->dims[i];
            else if (i > axis) inner *= x->dims[i];
        }
        e = ert_cuda_softmax_launch(a->op == ERT_OP_LOGSOFTMAX, x->dtype, x->data, y->data, outer, x->ndim ? x->dims[axis] : 1,
                                    inner, c->stream);
        break;
    }
    case ERT_OP_ATTENTION: return ert_cuda_attn_run(c, a);
    case ERT_OP_PAD: e = ert_cuda_pad_launch(&a->params->pad, x, y, c->stream); break;
    case ERT_OP_RESIZE: e = ert_cuda_resize_launch(&a->params->resize, x, y, c->stream); break;
    case ERT_OP_REDUCE_MEAN: case ERT_OP_REDUCE_SUM: case ERT_OP_REDUCE_MAX: case ERT_OP_REDUCE_MIN: case ERT_OP_REDUCE_L1:
    case ERT_OP_REDUCE_L2: case ERT_OP_REDUCE_SUM_SQUARE: case ERT_OP_REDUCE_LOG_SUM:
        e = ert_cuda_reduce_launch(a->op, &a->params->axis, x, y, c->stream);
        break;
    case ERT_OP_RELU: case ERT_OP_LEAKY_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID: case ERT_OP_TANH:
    case ERT_OP_HARD_SIGMOID: case ERT_OP_HARD_SWISH: case ERT_OP_SILU: case ERT_OP_GELU: case ERT_OP_ERF:
    case ERT_OP_SQRT: case ERT_OP_EXP: case ERT_OP_LOG: case ERT_OP_NEG: case ERT_OP_ABS: case ERT_OP_RECIPROCAL:
    case ERT_OP_FLOOR: case ERT_OP_CEIL:
        e = ert_cuda_unary_launch(a->op, &a->params->unary, x->dtype, x->data, y->data, y->n_elems, c->stream);
        break;
    case ERT_OP_ADD: case ERT_OP_SUB: case ERT_OP_MUL: case ERT_OP_DIV: case ERT_OP_POW: case ERT_OP_MIN:
    case ERT_OP_MAX: case ERT_OP_EQUAL: case ERT_OP_LESS: case ERT_OP_GREATER: case ERT_OP_WHERE:
        return run_binary(c, a);
    default: return run_copy(c, a);
    }
    return e == cudaSuccess ? ERT_OK : cuda_err(c, e, "kernel launch");
}

bool ert_cuda_supports(ert_op op, ert_dtype dt) {
    if (ert_cuda_train_op(op)) return ert_cuda_train_supports(op, dt);
    switch (op) {
    case ERT_OP_IDENTITY: case ERT_OP_DROPOUT: case ERT_OP_FLATTEN: case ERT_OP_RESHAPE: case ERT_OP_SQUEEZE:
    case ERT_OP_UNSQUEEZE: case ERT_OP_TRANSPOSE: case ERT_OP_EXPAND: case ERT_OP_SLICE: case ERT_OP_CONCAT:
    case ERT_OP_SPLIT:
        return ert_dtype_size(dt) == 1 || ert_dtype_size(dt) == 2 || ert_dtype_size(dt) == 4 ||
               ert_dtype_size(dt) == 8;
    case ERT_OP_WHERE: return dt == ERT_DTYPE_BOOL;
    case ERT_OP_CUMSUM: return is_float(dt) || dt == ERT_DTYPE_I32 || dt == ERT_DTYPE_I64;
    case ERT_OP_CAST: return ert_dtype_size(dt) != 0;
    case ERT_OP_GATHER: return ert_dtype_size(dt) == 1 || ert_dtype_size(dt) == 2 || ert_dtype_size(dt) == 4 ||
                               ert_dtype_size(dt) == 8;
    case ERT_OP_CONV_TRANSPOSE:
    case ERT_OP_CONV: case ERT_OP_GEMM: case ERT_OP_MATMUL: case ERT_OP_MAXPOOL: case ERT_OP_AVGPOOL:
    case ERT_OP_GLOBAL_AVGPOOL: case ERT_OP_GLOBAL_MAXPOOL: case ERT_OP_BATCHNORM: case ERT_OP_LAYERNORM:
    case ERT_OP_INSTANCENORM: case ERT_OP_ATTENTION:
    case ERT_OP_SOFTMAX: case ERT_OP_LOGSOFTMAX: case ERT_OP_PAD: case ERT_OP_RESIZE:
    case ERT_OP_REDUCE_MEAN: case ERT_OP_REDUCE_SUM: case ERT_OP_REDUCE_MAX: case ERT_OP_REDUCE_MIN: case ERT_OP_REDUCE_L1:
    case ERT_OP_REDUCE_L2: case ERT_OP_REDUCE_SUM_SQUARE: case ERT_OP_REDUCE_LOG_SUM:
    case ERT_OP_RELU: case ERT_OP_LEAKY_RELU: case ERT_OP_CLIP: case ERT_OP_SIGMOID: case ERT_OP_TANH:
    case ERT_OP_HARD_SIGMOID: case ERT_OP_HARD_SWISH: case ERT_OP_SILU: case ERT_OP_GELU: case ERT_OP_ERF:
    case ERT_OP_SQRT: case ERT_OP_EXP: case ERT_OP_LOG: case ERT_OP_NEG: case ERT_OP_ABS: case ERT_OP_RECIPROCAL:
    case ERT_OP_FLOOR: case ERT_OP_CEIL:
    case ERT_OP_ADD: case ERT_OP_SUB: case ERT_OP_MUL: case ERT_OP_DIV: case ERT_OP_POW: case ERT_OP_MIN:
    case ERT_OP_MAX: case ERT_OP_EQUAL: case ERT_OP_LESS: case ERT_OP_GREATER:
        return is_float(dt);
    default: return false; /* Shape, ConstantOfShape, Range: folded at create (constant inputs) */
    }
}

/* What bind_node would refuse for a supported op (Resize modes, training
 * BatchNorm, LayerNorm's extra outputs, Where on non-float data): the
 * session sends such nodes to the CPU instead. */
bool ert_cuda_supports_node(const ert_kargs *a) {
    /* int8 ops (cuda_quant.c): only node by node, never by op alone */
    if (a->n_in > 0 && ert_cuda_quant_claims(a->op, a->in[0].dtype)) return ert_cuda_quant_node_ok(a);
    if (!ert_cuda_supports(a->op, a->n_in > 0 ? a->in[0].dtype : ERT_DTYPE_UNDEFINED)) return false;
    const ert_op_params *p = a->params;
    switch (a->op) {
    case ERT_OP_WHERE: return a->n_in > 2 && is_float(a->in[1].dtype) && a->in[2].dtype == a->in[1].dtype;
    case ERT_OP_RESIZE: return (p->resize.mode == 0 || p->resize.mode == 1) && p->resize.coord != 4;
    case ERT_OP_BATCHNORM: return !p->norm.training;
    case ERT_OP_LAYERNORM: return a->n_out == 1;
    case ERT_OP_ATTENTION: return p->attn.head_dim <= 128; /* kernels/cuda/attention.cu keeps a row in registers */
    default: return true;
    }
}
