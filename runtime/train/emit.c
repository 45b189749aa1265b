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
    const ttensor *v = &t->t[x];
    if (v->mem == TM_CONST || v->mem == TM_FOLDED) return true;
    if (v->mem == TM_PARAM) return v->candidate; /* weights; not running statistics (the forward updates them) */
    if (v->mem != TM_IO) return false;
    for (int i = 0; i < t->model->n_inputs; i++)
        if (t->model->inputs[i] == x) return true; /* a graph input (not the loss or the target) */
    return false;
}

static ert_status replay(ert_trainer *t, int k) {
    const tnode *f = &t->n[k];
    bool bn = f->op == ERT_OP_BATCHNORM_TRAIN && f->n_in >= 5 && f->n_out >= 3 && f->out[1] >= 0 && f->out[2] >= 0 &&
              f->in[0] >= 0 && !t->o.keep_bn_outputs;
    bool cast = f->op == ERT_OP_CAST && f->n_in == 1 && f->n_out == 1 && f->in[0] >= 0 && lives_all_step(t, f->in[0]);
    if ((!bn && !cast) || f->out[0] < 0) return ERT_OK;
    const int32_t y = f->out[0], x = f->in[0];
    int first = -1;
    bool x_kept = cast; /* a BatchNorm's x: the backward must read it anyway (its gradient) */
    for (int j = t->fwd_end; j < t->nn; j++)
        for (int q = 0; q < t->n[j].n_in; q++) {
            if (t->n[j].in[q] == y && first < 0) first = j;
            x_kept = x_kept || t->n[j].in[q] == x;
        }
    if (first < 0 || !x_kept || (bn && t->t[y].dtype != t->t[x].dtype)) return ERT_OK;
    char nm[256];
    snprintf(nm, sizeof nm, "%s.recomputed", t->t[y].name);
    int32_t y2 = ert_tr_add_tensor(t, nm, t->t[y].dtype, t->t[y].ndim, t->t[y].dims);
    snprintf(nm, sizeof nm, "%s/recompute", f->name);
    tnode *r = y2 >= 0 ? ert_tr_add_node(t, f->op, nm, bn ? 5 : 1, 1, PH_BWD) : NULL;
    if (!r) return ert_tr_oom(t);
    f = &t->n[k]; /* the node array may have moved */
    r->params = f->params;
    r->in[0] = x;
    r->out[0] = y2;
    if (bn) {
        r->in[1] = f->in[1], r->in[2] = f->in[2], r->in[3] = f->out[1], r->in[4] = f->out[2];
        r->params.grad.training = false;
        r->params.grad.replay = true;
    }
    for (int j = first; j < t->nn - 1; j++)
        for (int q = 0; q < t->n[j].n_in; q++)
            if (t->n[j].in[q] == y) t->n[j].in[q] = y2;
    tnode tmp = t->n[t->nn - 1]; /* move the replay to just before its first reader */
    memmove(&t->n[first + 1], &t->n[first], (size_t)(t->nn - 1 - first) * sizeof *t->n);
    t->n[first] = tmp;
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
        if (oi < 0) return ert_set_error(t->ctx, ERT_E_NOT_FOUND, "the model has no output '%s'", t->o.output);
    }
    if (m->n_outputs < 1) return ert_set_error(t->ctx, ERT_E_ARG, "the model has no output");
    t->out_t = m->outputs[oi];
    ttensor *y = &t->t[t->out_t];
    if (!y->defined || y->dtype != ERT_DTYPE_F32 || ert_tr_is_imm(y) || y->mem == TM_IO)
        return ert_set_error(t->ctx, ERT_E_SHAPE, "output '%s' is not a computed f32 tensor", y->name);
    y->mem = TM_IO;
    const ert_loss_options *lo = &t->o.loss;
    int32_t tg;
    if (lo->kind == ERT_LOSS_CROSS_ENTROPY) {
        if (y->ndim != 2)
            return ert_set_error(t->ctx, ERT_E_SHAPE, "cross-entropy needs logits (N, C); output '%s' has rank %d",
                                 y->name, y->ndim);
        if (t->class_weights && t->n_class_weights != y->dims[1])
            return ert_set_error(t->ctx, ERT_E_ARG, "%d class weights given, the output has %lld classes",
                                 t->n_class_weights, (long long)y->dims[1]);
        int64_t n = y->dims[0];
        tg = ert_tr_add_tensor(t, "target", ERT_DTYPE_I64, 1, &n);
    } else {
        ttensor c = *y;
        tg = ert_tr_add_tensor(t, "target", ERT_DTYPE_F32, c.ndim, c.dims);
    }
    int64_t one = 1;
    int32_t ls = ert_tr_add_tensor(t, "loss", ERT_DTYPE_F32, 1, &one);
    ttensor yc = t->t[t->out_t];
    char nm[256];
    snprintf(nm, sizeof nm, "%s.grad", yc.name);
    int32_t dl = ert_tr_add_tensor(t, nm, ERT_DTYPE_F32, yc.ndim, yc.dims);
    int32_t cw = -1;
    bool has_cw = t->class_weights != NULL;
    if (lo->kind == ERT_LOSS_CROSS_ENTROPY && has_cw) {
        int64_t c = yc.dims[1];
        cw = ert_tr_add_tensor(t, "class_weights", ERT_DTYPE_F32, 1, &c);
        if (cw >= 0) {
            t->t[cw].mem = TM_FOLDED;
            t->t[cw].owned = t->class_weights;
            t->t[cw].cdata = t->class_weights;
            t->class_weights = NULL;
        }
    }
    if (tg < 0 || ls < 0 || dl < 0 || (has_cw && cw < 0)) return ert_tr_oom(t);
    t->t[tg].mem = t->t[ls].mem = TM_IO;
    if (t->amp == ERT_DTYPE_F16 && t->o.loss_scale >= 0) {
        int64_t three = 3;
        if ((t->scaler_t = ert_tr_add_tensor(t, "ert.train.loss_scale", ERT_DTYPE_F32, 1, &three)) < 0)
            return ert_tr_oom(t);
        t->t[t->scaler_t].mem = TM_STATE;
    }
    /* device + F16: the scaler (dlogits *= scale) in slot 3 */
    tnode *n = ert_tr_add_node(t, ERT_OP_LOSS, "loss", t->scaler_t >= 0 ? 4 : cw >= 0 ? 3 : 2, 2, PH_FWD);
    if (!n) return ert_tr_oom(t);
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
    if (!t->be) return ERT_OK;
    int64_t two = 2;
    if ((t->status_t = ert_tr_add_tensor(t, "ert.train.status", ERT_DTYPE_I64, 1, &two)) < 0) return ert_tr_oom(t);
    t->t[t->status_t].mem = TM_IO;
    for (int k = 0; k < t->nn; k++) {
        tnode *n = &t->n[k];
        if (n->op != ERT_OP_GATHER_GRAD || n->n_in != 2) continue;
        int32_t *io = realloc(n->in, (size_t)(n->n_in + 1 + n->n_out) * sizeof *io);
        if (!io) return ert_tr_oom(t);
        memmove(io + n->n_in + 1, io + n->n_in, (size_t)n->n_out * sizeof *io); /* in, then out, one block */
        io[n->n_in] = t->status_t;
        n->in = io;
        n->n_in++;
        n->out = io + n->n_in;
    }
    return ERT_OK;
}

ert_status ert_tr_add_optim(ert_trainer *t, const int32_t *grads) {
    const ert_optim_options *op = &t->o.optim;
    /* {norm, clip factor} (device: + {next loss scale, skipped steps}) */
    int64_t nn = t->be ? 4 : 2;
    bool sc = t->scaler_t >= 0;
    ert_status st0 = dev_status(t);
    if (st0) return st0;
    t->gnorm_t = ert_tr_add_tensor(t, "ert.train.grad_norm", ERT_DTYPE_F32, 1, &nn);
    tnode *gn = t->gnorm_t >= 0 ? ert_tr_add_node(t, ERT_OP_GRAD_NORM, "grad_norm",
                                                  t->n_params + (sc ? 2 : 0) + (t->be ? 1 : 0), 1, PH_BWD)
                                : NULL;
    if (!gn) return ert_tr_oom(t);
    if (sc) { /* + the loss and the scaler: the norm is unscaled, the scale updated */
        gn->in[t->n_params] = t->loss_t;
        gn->in[t->n_params + 1] = t->scaler_t;
        gn->params.optim.scale_interval = t->o.loss_scale_interval > 0 ? t->o.loss_scale_interval : 2000;
    }
    if (t->be) { /* + the status last: a bad index found in the backward skips every update */
        gn->in[gn->n_in - 1] = t->status_t;
        gn->params.optim.status_in = true;
    }
    /* on a device the norm comes back with the loss (the step's finite check) */
    t->t[t->gnorm_t].mem = t->be ? TM_IO : TM_STATE;
    if (t->be) {
        int64_t three = 3;
        if ((t->hyper_t = ert_tr_add_tensor(t, "ert.train.hyper", ERT_DTYPE_F32, 1, &three)) < 0) return ert_tr_oom(t);
        t->t[t->hyper_t].mem = TM_IO;
    }
    for (int k = 0; k < t->n_params; k++) {
        gn->in[k] = grads[k];
        t->t[grads[k]].mem = TM_GRAD;
    }
    gn->out[0] = t->gnorm_t;
    gn->params.optim.clip = op->clip_grad_norm;
    t->bwd_end = t->nn;
    for (int k = 0; k < t->n_params; k++) {
        int32_t p = t->params[k], st[2] = {-1, -1};
        int n_state = op->kind == ERT_OPTIM_SGD ? (op->momentum != 0.0f ? 1 : 0) : 2;
        for (int s = 0; s < n_state; s++) {
            char nm[256];
            snprintf(nm, sizeof nm, "ert.train.%s.%s", t->t[p].name,
                     s == 0 ? (op->kind == ERT_OPTIM_SGD ? "momentum" : "m") : "v");
            ttensor c = t->t[p];
            st[s] = ert_tr_add_tensor(t, nm, ERT_DTYPE_F32, c.ndim, c.dims);
            if (st[s] < 0) return ert_tr_oom(t);
            t->t[st[s]].mem = TM_STATE;
        }
        /* device: + hyper (lr, bias corrections: per-step values live in device
         * memory, not in the captured kernel arguments) and the loss (the
         * update is skipped on device when it or the norm is not finite) */
        tnode *n = ert_tr_add_node(t, ERT_OP_OPTIM, t->t[p].name, t->be ? 7 : 5, 0, PH_OPT);
        if (!n) return ert_tr_oom(t);
        if (t->be) {
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

