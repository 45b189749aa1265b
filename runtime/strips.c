/* Batch strips: a CPU session of batch N > 1 runs runs of consecutive
 * batch-separable nodes image by image (every node of the strip on image 0,
 * then on image 1, ...) instead of node by node over the whole batch.
 *
 * Why: node by node, a batch-8 CNN writes each activation (38 MiB for
 * MobileNetV2's 96x112x112 at batch 8) to DRAM and reads it back from DRAM
 * in the next node; 2 threads then share the memory bus and the run was
 * 1.57x slower than 8 runs of batch 1 (2-vCPU EPYC, 2026-12-07). Image by
 * image, a node's output slice is read by the next node while it is still
 * in cache, as at batch 1.
 *
 * Separable: the node's output image n depends only on image n of its batched
 * inputs (Conv and its fused tails, pooling, BatchNorm, element-wise ops).
 * Every operand is either sliced (an activation or graph input of the
 * output's rank with dims[0] == N: image n is elements [n E, (n + 1) E) of
 * the tensor, E its per-image size) or passed whole (constants, and
 * activations broadcast over the batch that a node before the strip made).
 * Tensors that alias or are aliased (views, in-place Concat/Split, Reshape
 * copies) end a strip: their per-image slices need not be contiguous.
 *
 * Memory: a tensor made and used only inside a strip (not an output) holds
 * one image (the same buffer for every image, still in cache when the next
 * node reads it), planned at 1/N of its size; a tensor a strip reads from
 * before it or hands on past it keeps its full-batch buffer and lives over
 * the whole strip. So strips mostly shrink the arena (MobileNetV2 at batch
 * 8: 48.2 -> 11.6 MiB of activations); where they would grow it by more
 * than ERT_STRIP_MEM there are none. Each strip node has one more argument
 * set whose sliced operands have batch 1, moved to image i as the run
 * reaches it (ert_strips_next: no allocation); ert_session_run,
 * ert_session_profile (a strip node's time summed over the images) and the
 * finite check walk the same order. Results are bit for bit those of the
 * batch run wherever a kernel's sums do not depend on the batch size (the
 * CPU kernels' do not; test_strips checks against batch-1 sessions and the
 * whole-batch run). */
#include "graph.h"
#include "runtime_internal.h"
#include "strips_internal.h"

#include <stdlib.h>
#include <string.h>

/* the most arena growth strips may cost, as a multiple of the plan without them */
#define ERT_STRIP_MEM 1.25
/* a strip runs from the first to the last node whose activations (inputs and outputs, full
 * batch) reach this many bytes: smaller ones stay in cache batched, and per image the kernels'
 * calls are N times as many for a smaller share each (RegNetY-800MF's 14x14 stage, 4 MiB a node
 * at batch 8: 14% slower per image) */
#define ERT_STRIP_BIG ((size_t)8 << 20)
/* constant weights a node may re-read per image whatever its activations */
#define ERT_STRIP_SMALL_WEIGHTS ((size_t)256 << 10)
/* strips shorter than this are not worth N times the kernel calls */
#define ERT_STRIP_MIN_NODES 3

static bool sep_op(const ert_graph *g, const ert_gnode *n) {
    const ert_op op = n->op;
    const ert_op_params *p = &n->params;
    const int rank = g->t[n->out[0]].ndim;
    if (op == ERT_OP_CONV || op == ERT_OP_BATCHNORM || op == ERT_OP_MAXPOOL || op == ERT_OP_AVGPOOL ||
        op == ERT_OP_GLOBAL_AVGPOOL || op == ERT_OP_GLOBAL_MAXPOOL)
        return op != ERT_OP_BATCHNORM || !p->norm.training;
    if (op == ERT_OP_LAYERNORM) return p->norm.axis >= 1;
    if (op == ERT_OP_SOFTMAX || op == ERT_OP_LOGSOFTMAX) return p->axis.axis >= 1;
    if (op == ERT_OP_TRANSPOSE) return p->transpose.perm[0] == 0;
    /* dim 0 a batch dim of both operands (rank >= 3), or rows of A times a constant (Gemm: A not
     * transposed, B and C constants) */
    if (op == ERT_OP_MATMUL) return rank >= 3 || (n->n_in > 1 && ert_graph_is_const(g, n->in[1]));
    if (op == ERT_OP_GEMM)
        return !p->gemm.trans_a && n->n_in > 1 && ert_graph_is_const(g, n->in[1]) &&
               (n->n_in < 3 || n->in[2] < 0 || ert_graph_is_const(g, n->in[2]));
    if (op >= ERT_OP_RELU && op <= ERT_OP_CEIL) return true;  /* unary element-wise */
    if (op >= ERT_OP_ADD && op <= ERT_OP_WHERE) return true;  /* binary element-wise, broadcasting */
    if (op >= ERT_OP_ELU && op <= ERT_OP_MISH) return true;
    return op == ERT_OP_PRELU;
}

/* Whether operand t of a node whose output has rank `rank` is sliced per
 * image (else it is passed whole). */
static bool sliced(const ert_graph *g, int32_t t, int rank, int64_t N) {
    const ert_gtensor *x = &g->t[t];
    return !ert_graph_is_imm(x) && x->ndim == rank && rank >= 1 && x->dims[0] == N;
}

/* Tensor t is plain: its own storage, no tensor stores itself inside it. */
static bool plain(const ert_graph *g, const uint8_t *aliased, int32_t t) {
    return g->t[t].alias < 0 && !aliased[t];
}

/* Node n can run image by image in a strip that starts at schedule step a
 * (inputs passed whole must come from before a). */
static bool sep_node(const ert_graph *g, const uint8_t *aliased, const ert_gnode *n, int64_t N, int a) {
    if (n->host || n->elided || n->dead || n->n_out < 1 || n->out[0] < 0 || !sep_op(g, n)) return false;
    if (n->op == ERT_OP_CONV && n->params.conv.nsp > 2) return false;
    const ert_gtensor *y = &g->t[n->out[0]];
    const int rank = y->ndim;
    if (rank < 2 || y->dims[0] != N || y->dtype != ERT_DTYPE_F32) return false;
    size_t wbytes = 0, abytes = 0;
    for (int j = 0; j < n->n_out; j++) {
        if (n->out[j] < 0) continue;
        if (!plain(g, aliased, n->out[j]) || !sliced(g, n->out[j], rank, N)) return false;
        abytes += g->t[n->out[j]].nbytes;
    }
    for (int j = 0; j < n->n_in; j++) {
        const int32_t t = n->in[j];
        if (t < 0) continue;
        const ert_gtensor *x = &g->t[t];
        if (ert_graph_is_imm(x)) {
            wbytes += x->nbytes;
            continue;
        }
        if (!plain(g, aliased, t)) return false;
        if (sliced(g, t, rank, N)) {
            abytes += x->nbytes;
            continue;
        }
        /* an activation passed whole: broadcast over the batch (dims[0] == 1 or a lower rank), and
         * complete before the strip starts */
        if (x->ndim == rank && x->dims[0] != 1) return false;
        if (x->mem != ERT_MEM_IO && (x->first < 0 || x->first >= a)) return false;
    }
    /* run per image, a node reads its weights N times: only where they are small (a squeeze-
     * excitation's 1x1 convs: re-read from L2) or one image's activations outweigh them (the early,
     * wide-map layers; not a classifier's late convs and Gemm, where the batch is what reuses the
     * weights: ResNet-18's 14x14 and 7x7 stages per image were 15% slower) */
    return wbytes <= ERT_STRIP_SMALL_WEIGHTS || wbytes <= abytes / (size_t)N;
}

/* Strips of steps [a, b] over sched (before elided nodes leave it): in each
 * maximal run of separable nodes, from its first node whose operands (full
 * batch) reach ERT_STRIP_BIG bytes to its last such node. */
static int find_strips(const ert_graph *g, const uint8_t *aliased, const int32_t *sched, int n_sched, int64_t N,
                       ert_strip *out, int max) {
    int ns = 0;
    for (int k = 0; k < n_sched && ns < max;) {
        if (!sep_node(g, aliased, &g->n[sched[k]], N, k)) {
            k++;
            continue;
        }
        int e = k, w0 = -1, w1 = -1;
        for (; e < n_sched; e++) {
            const ert_gnode *n = &g->n[sched[e]];
            if (!sep_node(g, aliased, n, N, k)) break;
            size_t bytes = 0;
            for (int j = 0; j < n->n_in + n->n_out; j++) {
                const int32_t t = j < n->n_in ? n->in[j] : n->out[j - n->n_in];
                if (t >= 0 && !ert_graph_is_imm(&g->t[t])) bytes += g->t[t].nbytes;
            }
            if (bytes >= ERT_STRIP_BIG) {
                if (w0 < 0) w0 = e;
                w1 = e;
            }
        }
        if (w0 >= 0 && w1 - w0 + 1 >= ERT_STRIP_MIN_NODES) out[ns++] = (ert_strip){.a = w0, .b = w1};
        k = e;
    }
    return ns;
}

/* Tensors made and used only inside strip st (internal: one image's buffer)
 * get internal[t] = 1; every other planned tensor the strip touches lives over
 * the whole strip. */
static void mark(ert_graph *g, const int32_t *sched, const ert_strip *st, int ns, const uint8_t *aliased,
                 uint8_t *internal) {
    for (int s = 0; s < ns; s++)
        for (int k = st[s].a; k <= st[s].b; k++) {
            const ert_gnode *n = &g->n[sched[k]];
            for (int j = 0; j < n->n_out; j++) {
                const int32_t t = n->out[j];
                if (t >= 0 && g->t[t].mem == ERT_MEM_ACT && plain(g, aliased, t) && g->t[t].last <= st[s].b)
                    internal[t] = 1;
            }
        }
    for (int s = 0; s < ns; s++)
        for (int k = st[s].a; k <= st[s].b; k++) {
            const ert_gnode *n = &g->n[sched[k]];
            for (int j = 0; j < n->n_in + n->n_out; j++) {
                const int32_t t = j < n->n_in ? n->in[j] : n->out[j - n->n_in];
                if (t < 0 || g->t[t].mem != ERT_MEM_ACT || internal[t]) continue;
                ert_gtensor *x = &g->t[t];
                if (x->first > st[s].a) x->first = st[s].a;
                if (x->last < st[s].b) x->last = st[s].b;
            }
        }
}

ert_status ert_strips_plan(ert_graph *g, const int32_t *sched, int n_sched, int64_t N, ert_strip **strips,
                           int *n_strips, uint8_t **internal, size_t *peak, size_t *lb, size_t *ws_max) {
    *strips = NULL;
    *n_strips = 0;
    *internal = NULL;
    ert_status st = ert_graph_plan_blocks(g, sched, n_sched, peak, lb, ws_max);
    if (st || N < 2 || n_sched < 2) return st;
    const size_t base = *peak;
    uint8_t *aliased = calloc((size_t)g->nt + 1, 1), *in = calloc((size_t)g->nt + 1, 1);
    int *first = malloc(((size_t)g->nt + 1) * sizeof *first), *last = malloc(((size_t)g->nt + 1) * sizeof *last);
    size_t *nbytes = malloc(((size_t)g->nt + 1) * sizeof *nbytes);
    ert_strip *cand = malloc(((size_t)n_sched + 1) * sizeof *cand);
    if (!aliased || !in || !first || !last || !nbytes || !cand) {
        free(aliased), free(in), free(first), free(last), free(nbytes), free(cand);
        return ert_graph_oom(g);
    }
    for (int i = 0; i < g->nt; i++) {
        if (g->t[i].alias >= 0) aliased[g->t[i].alias] = 1;
        first[i] = g->t[i].first, last[i] = g->t[i].last, nbytes[i] = g->t[i].nbytes;
    }
    int ns = find_strips(g, aliased, sched, n_sched, N, cand, n_sched);
    if (ns) {
        mark(g, sched, cand, ns, aliased, in);
        /* an internal tensor's storage holds one image (its dims say N images): nbytes is its storage from
         * here on (the plan and ert_session_plan_check's overlap and arena checks read it; its kernels'
         * views come from the dims) */
        for (int i = 0; i < g->nt; i++)
            if (in[i]) g->t[i].nbytes = nbytes[i] / (size_t)N;
        size_t p, l, w;
        st = ert_graph_plan_blocks(g, sched, n_sched, &p, &l, &w);
        ert_log(g->ctx, ERT_LOG_DEBUG, "batch strips: %d, activations %zu bytes (without %zu)", ns, p, base);
        if (!st && (double)p <= ERT_STRIP_MEM * (double)base) {
            *peak = p, *lb = l, *ws_max = w;
        } else {
            ns = 0;
            for (int i = 0; i < g->nt; i++)
                g->t[i].first = first[i], g->t[i].last = last[i], g->t[i].nbytes = nbytes[i];
            if (!st) st = ert_graph_plan_blocks(g, sched, n_sched, peak, lb, ws_max); /* the base plan again */
        }
    }
    free(aliased), free(first), free(last), free(nbytes);
    if (st || !ns) {
        free(cand), free(in);
        return st;
    }
    *strips = cand;
    *n_strips = ns;
    *internal = in;
    return ERT_OK;
}

/* A strip node's arguments for image 0: copies of its views, each sliced
 * operand given batch 1; step[j] the bytes between images of view j (0:
 * passed whole, or internal: the same buffer for every image). */
static void image_args(const ert_graph *g, const ert_gnode *n, int64_t N, const uint8_t *internal, ert_kargs *a,
                       ert_tview *v, size_t *step, void **base) {
    const int rank = g->t[n->out[0]].ndim;
    *a = n->args;
    memcpy(v, n->views, (size_t)(n->n_in + n->n_out) * sizeof *v);
    for (int j = 0; j < n->n_in + n->n_out; j++) {
        const int32_t t = j < n->n_in ? n->in[j] : n->out[j - n->n_in];
        step[j] = 0;
        base[j] = v[j].data;
        if (t < 0 || !sliced(g, t, rank, N) || !v[j].data) continue;
        const int64_t per = v[j].n_elems / N;
        if (!internal[t]) step[j] = (size_t)per * ert_dtype_size(v[j].dtype);
        v[j].dims[0] = 1;
        v[j].n_elems = per;
    }
    a->in = v;
    a->out = v + n->n_in;
}

ert_status ert_strips_bind(const ert_graph *g, const int32_t *sched, int n_sched, int64_t N, const ert_strip *strips,
                           int n_strips, const uint8_t *internal, ert_strip_run *r) {
    memset(r, 0, sizeof *r);
    size_t n_args = 0, n_views = 0;
    for (int s = 0; s < n_strips; s++)
        for (int k = strips[s].a; k <= strips[s].b; k++) {
            const ert_gnode *n = &g->n[sched[k]];
            n_args++;
            n_views += (size_t)(n->n_in + n->n_out);
        }
    r->strip_of = malloc(((size_t)n_sched + 1) * sizeof *r->strip_of);
    r->slot = malloc(((size_t)n_sched + 1) * sizeof *r->slot);
    r->args = malloc((n_args + 1) * sizeof *r->args);
    r->views = malloc((n_views + 1) * sizeof *r->views);
    r->vstep = malloc((n_views + 1) * sizeof *r->vstep);
    r->vbase = malloc((n_views + 1) * sizeof *r->vbase);
    if (!r->strip_of || !r->slot || !r->args || !r->views || !r->vstep || !r->vbase) {
        ert_strips_free(r);
        return ERT_E_NOMEM;
    }
    r->strips = strips, r->n_strips = n_strips, r->N = N, r->n_sched = n_sched;
    for (int k = 0; k < n_sched; k++) r->strip_of[k] = -1, r->slot[k] = -1;
    size_t ai = 0, vi = 0;
    for (int s = 0; s < n_strips; s++)
        for (int k = strips[s].a; k <= strips[s].b; k++) {
            const ert_gnode *n = &g->n[sched[k]];
            r->strip_of[k] = s;
            r->slot[k] = (int)ai;
            image_args(g, n, N, internal, &r->args[ai], &r->views[vi], &r->vstep[vi], &r->vbase[vi]);
            ai++;
            vi += (size_t)(n->n_in + n->n_out);
        }
    r->n_entries = n_sched;
    for (int s = 0; s < n_strips; s++) r->n_entries += (strips[s].b - strips[s].a + 1) * (int)(N - 1);
    return ERT_OK;
}

bool ert_strips_next(ert_strip_run *r, ert_strip_it *it, ert_kargs *const *kptr, ert_kargs **a, int *k,
                     int64_t *image) {
    if (it->k >= r->n_sched) return false;
    const int s = r->strip_of[it->k];
    *k = it->k;
    if (s < 0) {
        *a = kptr[it->k];
        *image = -1;
        it->k++;
        return true;
    }
    /* image it->i of strip s's node it->k: its views moved there (no allocation, a few adds) */
    ert_kargs *x = &r->args[r->slot[it->k]];
    const int nv = x->n_in + x->n_out;
    ert_tview *v = (ert_tview *)x->in;
    const size_t v0 = (size_t)(v - r->views);
    for (int j = 0; j < nv; j++)
        if (r->vstep[v0 + j]) v[j].data = (char *)r->vbase[v0 + j] + (size_t)it->i * r->vstep[v0 + j];
    *a = x;
    *image = it->i;
    if (it->k < r->strips[s].b) it->k++;
    else if (++it->i < r->N) it->k = r->strips[s].a;
    else it->k++, it->i = 0;
    return true;
}

void ert_strips_free(ert_strip_run *r) {
    free(r->strip_of);
    free(r->slot);
    free(r->args);
    free(r->views);
    free(r->vstep);
    free(r->vbase);
    memset(r, 0, sizeof *r);
}
