/* Trainer steps 4 and 6: emit the loss node, recompute-instead-of-save
 * replays, the device status tensor, and the gradient-norm and optimizer
 * nodes. Called from build() in trainer.c; step 5 is autodiff.c. */
#include "trainer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ steps 4, 6 */

/* Rematerialisation (after the autodiff, before the optimizer): an output
 * that a backward node reads and that is cheap to make again is remade by a
 * replay node placed just before its first backward reader, and the backward
 * readers take the copy; the original then dies after its last forward
 * reader instead of living through the backward, and the copy lives only
 * from the replay to its last reader. Two kinds:
 *   - a batch-statistics BatchNorm's output (with its fused Relu): the next
 *     conv's weight gradient reads its input, a MaxPool's gradient its input.
 *     Replayed by BATCHNORM_TRAIN (grad.replay) from the BatchNorm's input x
 *     (its own gradient keeps x anyway) and the step's mean/invstd, bit for
 *     bit. The BatchNorm gradient recomputes its fused Relu's mask itself
 *     (autodiff.c). keep_bn_outputs turns this off.
 *   - a Cast of something that lives through the whole step anyway (a
 *     parameter, a constant, a graph input): mixed precision's f16 copies of
 *     the weights (a conv's data gradient reads its filter) and of the input
 *     (the first conv's weight gradient).
 * Cost: one elementwise pass per replay. */
static bool lives_all_step(const ert_trainer *t, int32_t x) {
    const ert_gtensor *v = &t->g.t[x];
    if (v->mem == ERT_MEM_CONST || v->mem == ERT_MEM_OWNED) return true;
    if (v->mem == ERT_MEM_PARAM) return v->candidate; /* weights; not running statistics (the forward updates them) */
    if (v->mem != ERT_MEM_IO) return false;
    for (int i = 0; i < t->model->n_inputs; i++)
        if (t->model->inputs[i] == x) return true; /* a graph input (not the loss or the target) */
    return false;
}

static ert_status replay(ert_trainer *t, int k) {
    const ert_gnode *f = &t->g.n[k];
    bool bn = f->op == ERT_OP_BATCHNORM_TRAIN && f->n_in >= 5 && f->n_out >= 3 && f->out[1] >= 0 && f->out[2] >= 0 &&
              f->in[0] >= 0 && !t->o.keep_bn_outputs;
    bool cast = f->op == ERT_OP_CAST && f->n_in == 1 && f->n_out == 1 && f->in[0] >= 0 && lives_all_step(t, f->in[0]);
    if ((!bn && !cast) || f->out[0] < 0) return ERT_OK;
    const int32_t y = f->out[0], x = f->in[0];
    int first = -1;
    bool x_kept = cast; /* a BatchNorm's x: the backward must read it anyway (its gradient) */
    for (int j = t->fwd_end; j < t->g.nn; j++)
        for (int q = 0; q < t->g.n[j].n_in; q++) {
            if (t->g.n[j].in[q] == y && first < 0) first = j;
            x_kept = x_kept || t->g.n[j].in[q] == x;
        }
    if (first < 0 || !x_kept || (bn && t->g.t[y].dtype != t->g.t[x].dtype)) return ERT_OK;
    char nm[256];
    snprintf(nm, sizeof nm, "%s.recomputed", t->g.t[y].name);
    int32_t y2 = ert_graph_new_tensor(&t->g, nm, t->g.t[y].dtype, t->g.t[y].ndim, t->g.t[y].dims);
    snprintf(nm, sizeof nm, "%s/recompute", f->name);
    ert_gnode *r = y2 >= 0 ? ert_graph_new_node(&t->g, f->op, nm, bn ? 5 : 1, 1, ERT_PHASE_BWD) : NULL;
    if (!r) return ert_graph_oom(&t->g);
    f = &t->g.n[k]; /* the node array may have moved */
    r->params = f->params;
    r->in[0] = x;
    r->out[0] = y2;
    if (bn) {
        r->in[1] = f->in[1], r->in[2] = f->in[2], r->in[3] = f->out[1], r->in[4] = f->out[2];
        r->params.grad.training = false;
        r->params.grad.replay = true;
    }
    for (int j = first; j < t->g.nn - 1; j++)
        for (int q = 0; q < t->g.n[j].n_in; q++)
            if (t->g.n[j].in[q] == y) t->g.n[j].in[q] = y2;
    ert_gnode tmp = t->g.n[t->g.nn - 1]; /* move the replay to just before its first reader */
    memmove(&t->g.n[first + 1], &t->g.n[first], (size_t)(t->g.nn - 1 - first) * sizeof *t->g.n);
    t->g.n[first] = tmp;
    return ERT_OK;
}

ert_status ert_tr_recompute(ert_trainer *t) {
    ert_status st = ERT_OK;
    for (int k = 0; k < t->fwd_end && st == ERT_OK; k++) st = replay(t, k);
    return st;
}

ert_status ert_tr_add_loss(ert_trainer *t) {
    const ert_model *m = t->model;
    int oi = 0;
    if (t->o.output) {
        oi = -1;
        for (int i = 0; i < m->n_outputs; i++)
            if (strcmp(m->tensors[m->outputs[i]].name, t->o.output) == 0) oi = i;
        if (oi < 0) return ert_set_error(t->g.ctx, ERT_E_NOT_FOUND, "the model has no output '%s'", t->o.output);
    }
    if (m->n_outputs < 1) return ert_set_error(t->g.ctx, ERT_E_ARG, "the model has no output");
    t->out_t = m->outputs[oi];
    ert_gtensor *y = &t->g.t[t->out_t];
    if (!y->defined || y->dtype != ERT_DTYPE_F32 || ert_graph_is_imm(y) || y->mem == ERT_MEM_IO)
        return ert_set_error(t->g.ctx, ERT_E_SHAPE, "output '%s' is not a computed f32 tensor", y->name);
    y->mem = ERT_MEM_IO;
    const ert_loss_options *lo = &t->o.loss;
    int32_t tg;
    if (lo->kind == ERT_LOSS_CROSS_ENTROPY) {
        if (y->ndim != 2)
            return ert_set_error(t->g.ctx, ERT_E_SHAPE, "cross-entropy needs logits (N, C); output '%s' has rank %d",
                                 y->name, y->ndim);
        if (t->class_weights && t->n_class_weights != y->dims[1])
            return ert_set_error(t->g.ctx, ERT_E_ARG, "%d class weights given, the output has %lld classes",
                                 t->n_class_weights, (long long)y->dims[1]);
        int64_t n = y->dims[0];
        tg = ert_graph_new_tensor(&t->g, "target", ERT_DTYPE_I64, 1, &n);
    } else {
        ert_gtensor c = *y;
        tg = ert_graph_new_tensor(&t->g, "target", ERT_DTYPE_F32, c.ndim, c.dims);
    }
    int64_t one = 1;
    int32_t ls = ert_graph_new_tensor(&t->g, "loss", ERT_DTYPE_F32, 1, &one);
    ert_gtensor yc = t->g.t[t->out_t];
    char nm[256];
    snprintf(nm, sizeof nm, "%s.grad", yc.name);
    int32_t dl = ert_graph_new_tensor(&t->g, nm, ERT_DTYPE_F32, yc.ndim, yc.dims);
    int32_t cw = -1;
    bool has_cw = t->class_weights != NULL;
    if (lo->kind == ERT_LOSS_CROSS_ENTROPY && has_cw) {
        int64_t c = yc.dims[1];
        cw = ert_graph_new_tensor(&t->g, "class_weights", ERT_DTYPE_F32, 1, &c);
        if (cw >= 0) {
            t->g.t[cw].mem = ERT_MEM_OWNED;
            t->g.t[cw].owned = t->class_weights;
            t->g.t[cw].cdata = t->class_weights;
            t->class_weights = NULL;
        }
    }
    if (tg < 0 || ls < 0 || dl < 0 || (has_cw && cw < 0)) return ert_graph_oom(&t->g);
    t->g.t[tg].mem = t->g.t[ls].mem = ERT_MEM_IO;
    if (t->amp == ERT_DTYPE_F16 && t->o.loss_scale >= 0) {
        int64_t three = 3;
        if ((t->scaler_t = ert_graph_new_tensor(&t->g, "ert.train.loss_scale", ERT_DTYPE_F32, 1, &three)) < 0)
            return ert_graph_oom(&t->g);
        t->g.t[t->scaler_t].mem = ERT_MEM_STATE;
    }
    /* device + F16: the scaler (dlogits *= scale) in slot 3 */
    ert_gnode *n = ert_graph_new_node(&t->g, ERT_OP_LOSS, "loss", t->scaler_t >= 0 ? 4 : cw >= 0 ? 3 : 2, 2, ERT_PHASE_FWD);
    if (!n) return ert_graph_oom(&t->g);
    n->in[0] = t->out_t;
    n->in[1] = tg;
    if (cw >= 0) n->in[2] = cw;
    if (t->scaler_t >= 0) n->in[3] = t->scaler_t;
    n->out[0] = ls;
    n->out[1] = dl;
    n->params.loss.kind = lo->kind;
    n->params.loss.label_smoothing = lo->label_smoothing;
    t->target_t = tg;
    t->loss_t = ls;
    t->dlogits_t = dl;
    return ERT_OK;
}

/* Device: the step's status tensor (i64 {reporting node + 1, bad value}, io
 * region: zeroed by the host, copied in and back with hyper and the loss),
 * and a third input on every GatherGrad node, which records there the first
 * index outside [-dim, dim) it meets (on the CPU the forward Gather refuses
 * it; a kernel inside the captured step cannot return). */
static ert_status dev_status(ert_trainer *t) {
    if (!t->g.be) return ERT_OK;
    int64_t two = 2;
    if ((t->status_t = ert_graph_new_tensor(&t->g, "ert.train.status", ERT_DTYPE_I64, 1, &two)) < 0) return ert_graph_oom(&t->g);
    t->g.t[t->status_t].mem = ERT_MEM_IO;
    for (int k = 0; k < t->g.nn; k++) {
        ert_gnode *n = &t->g.n[k];
        if (n->op != ERT_OP_GATHER_GRAD || n->n_in != 2) continue;
        int32_t *io = malloc((size_t)(n->n_in + 1 + n->n_out) * sizeof *io); /* in, then out, one block */
        if (!io) return ert_graph_oom(&t->g);
        memcpy(io, n->in, (size_t)n->n_in * sizeof *io);
        io[n->n_in] = t->status_t;
        memcpy(io + n->n_in + 1, n->out, (size_t)n->n_out * sizeof *io);
        free(n->in);
        n->in = io;
        n->n_in++;
        n->out = io + n->n_in;
    }
    return ERT_OK;
}

ert_status ert_tr_add_optim(ert_trainer *t, const int32_t *grads) {
    const ert_optim_options *op = &t->o.optim;
    /* {norm, clip factor} (device: + {next loss scale, skipped steps}) */
    int64_t nn = t->g.be ? 4 : 2;
    bool sc = t->scaler_t >= 0;
    ert_status st0 = dev_status(t);
    if (st0) return st0;
    t->gnorm_t = ert_graph_new_tensor(&t->g, "ert.train.grad_norm", ERT_DTYPE_F32, 1, &nn);
    ert_gnode *gn = t->gnorm_t >= 0 ? ert_graph_new_node(&t->g, ERT_OP_GRAD_NORM, "grad_norm",
                                                  t->n_params + (sc ? 2 : 0) + (t->g.be ? 1 : 0), 1, ERT_PHASE_BWD)
                                : NULL;
    if (!gn) return ert_graph_oom(&t->g);
    if (sc) { /* + the loss and the scaler: the norm is unscaled, the scale updated */
        gn->in[t->n_params] = t->loss_t;
        gn->in[t->n_params + 1] = t->scaler_t;
        gn->params.optim.scale_interval = t->o.loss_scale_interval > 0 ? t->o.loss_scale_interval : 2000;
    }
    if (t->g.be) { /* + the status last: a bad index found in the backward skips every update */
        gn->in[gn->n_in - 1] = t->status_t;
        gn->params.optim.status_in = true;
    }
    /* on a device the norm comes back with the loss (the step's finite check) */
    t->g.t[t->gnorm_t].mem = t->g.be ? ERT_MEM_IO : ERT_MEM_STATE;
    if (t->g.be) {
        int64_t three = 3;
        if ((t->hyper_t = ert_graph_new_tensor(&t->g, "ert.train.hyper", ERT_DTYPE_F32, 1, &three)) < 0) return ert_graph_oom(&t->g);
        t->g.t[t->hyper_t].mem = ERT_MEM_IO;
    }
    for (int k = 0; k < t->n_params; k++) {
        gn->in[k] = grads[k];
        t->g.t[grads[k]].mem = ERT_MEM_GRAD;
    }
    gn->out[0] = t->gnorm_t;
    gn->params.optim.clip = op->clip_grad_norm;
    t->bwd_end = t->g.nn;
    for (int k = 0; k < t->n_params; k++) {
        int32_t p = t->params[k], st[2] = {-1, -1};
        int n_state = op->kind == ERT_OPTIM_SGD ? (op->momentum != 0.0f ? 1 : 0) : 2;
        for (int s = 0; s < n_state; s++) {
            char nm[256];
            snprintf(nm, sizeof nm, "ert.train.%s.%s", t->g.t[p].name,
                     s == 0 ? (op->kind == ERT_OPTIM_SGD ? "momentum" : "m") : "v");
            ert_gtensor c = t->g.t[p];
            st[s] = ert_graph_new_tensor(&t->g, nm, ERT_DTYPE_F32, c.ndim, c.dims);
            if (st[s] < 0) return ert_graph_oom(&t->g);
            t->g.t[st[s]].mem = ERT_MEM_STATE;
        }
        /* device: + hyper (lr, bias corrections: per-step values live in device
         * memory, not in the captured kernel arguments) and the loss (the
         * update is skipped on device when it or the norm is not finite) */
        ert_gnode *n = ert_graph_new_node(&t->g, ERT_OP_OPTIM, t->g.t[p].name, t->g.be ? 7 : 5, 0, ERT_PHASE_OPT);
        if (!n) return ert_graph_oom(&t->g);
        if (t->g.be) {
            n->in[5] = t->hyper_t;
            n->in[6] = t->loss_t;
        }
        n->in[0] = p;
        n->in[1] = grads[k];
        n->in[2] = st[0];
        n->in[3] = st[1];
        n->in[4] = t->gnorm_t;
        ert_optim_params *q = &n->params.optim;
        q->kind = op->kind;
        q->lr = op->lr;
        q->momentum = op->momentum;
        q->nesterov = op->nesterov != 0;
        q->weight_decay = op->weight_decay;
        q->beta1 = op->beta1 > 0 ? op->beta1 : 0.9f;
        q->beta2 = op->beta2 > 0 ? op->beta2 : 0.999f;
        q->eps = op->eps > 0 ? op->eps : 1e-8f;
    }
    return ERT_OK;
}

