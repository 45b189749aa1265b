/*
 * Trainer checkpoints and export.
 *
 * A checkpoint is an ordinary .ert model (loaders/ert, docs/ert-format.md):
 * the trainer's model with its current weights (parameters and BatchNorm
 * running statistics), plus tensors of role OPT_STATE that no node reads:
 * every optimizer state tensor ("ert.train.<param>.m"/".v"/".momentum"), the
 * Dropout RNG state ("ert.train.rng") and "ert.train.meta", int64
 * {format 1, step, fingerprint, optimizer kind}. So a checkpoint also loads
 * as a model for inference, and the format needed no new section.
 * Writing goes through ert_format_write: temporary file, fsync, rename,
 * directory fsync; a crash at any point leaves the previous file intact.
 * Loading reads and validates the whole file with the .ert reader (CRCs,
 * bounds), then checks the fingerprint and every tensor's name, dtype and
 * shape against the trainer before changing anything.
 * A device trainer (CUDA) copies parameters and state to the host to save
 * (the step is synchronous: nothing is in flight between steps) and uploads
 * them on load, so checkpoints move freely between CPU and CUDA trainers of
 * the same options (the gradient-norm tensor, state on the CPU and io on a
 * device, is not part of a checkpoint). An f16 mixed-precision trainer's
 * loss scaler is state: its checkpoints load into such trainers only.
 */
#include "trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_NAME "ert.train.meta"
#define META_FORMAT 1

/* The model with the trainer's current weights; with_state adds the
 * OPT_STATE tensors of a checkpoint. */
static ert_status make_model(ert_trainer *t, bool with_state, ert_model **out) {
    const ert_model *src = t->model;
    ert_context *ctx = t->g.ctx;
    ert_model *m = ert_model_new(ctx);
    if (!m) return ert_set_error(ctx, ERT_E_NOMEM, "out of memory exporting the model");
    ert_status st = ERT_OK;
    m->opset = src->opset;
    for (int i = 0; i < src->n_tensors && st == ERT_OK; i++) {
        const ert_tensor *s = &src->tensors[i];
        int32_t id = ert_model_add_tensor(m, s->name, s->dtype, s->role, s->ndim, s->dims);
        if (id < 0) {
            st = ERT_E_NOMEM;
            break;
        }
        if (s->role != ERT_ROLE_WEIGHT) continue;
        size_t nb = 0;
        ert_tensor_nbytes(s, &nb);
        void *d = malloc(nb ? nb : 1);
        if (!d) {
            st = ert_set_error(ctx, ERT_E_NOMEM, "out of memory exporting the model");
            break;
        }
        const ert_gtensor *x = &t->g.t[i];
        if (x->mem == ERT_MEM_PARAM && x->data && t->g.be) st = t->g.be->download(t->g.bctx, d, x->data, nb);
        else memcpy(d, x->mem == ERT_MEM_PARAM && x->data ? x->data : s->data, nb);
        if (st != ERT_OK) {
            free(d);
            break;
        }
        m->tensors[id].data = d;
        m->tensors[id].data_owned = true;
    }
    for (int i = 0; i < src->n_nodes && st == ERT_OK; i++) {
        const ert_node *n = &src->nodes[i];
        ert_attr *at = calloc((size_t)n->n_attrs + 1, sizeof *at);
        if (!at) {
            st = ert_set_error(ctx, ERT_E_NOMEM, "out of memory exporting the model");
            break;
        }
        for (int k = 0; k < n->n_attrs; k++) {
            const ert_attr_val *a = &n->attrs[k];
            at[k] = (ert_attr){.name = a->name, .type = a->type, .i = a->i, .f = a->f, .ints = a->ints,
                               .floats = a->floats, .n = a->n, .s = a->s};
        }
        st = ert_model_add_node(m, n->op, n->name, n->in, n->n_in, n->out, n->n_out, at, n->n_attrs);
        free(at);
    }
    for (int i = 0; i < src->n_inputs && st == ERT_OK; i++) st = ert_model_add_graph_input(m, src->inputs[i]);
    for (int i = 0; i < src->n_outputs && st == ERT_OK; i++) st = ert_model_add_graph_output(m, src->outputs[i]);
    for (int i = 0; with_state && i < t->g.nt && st == ERT_OK; i++) {
        const ert_gtensor *x = &t->g.t[i];
        if (x->mem != ERT_MEM_STATE || !x->data || i == t->gnorm_t) continue;
        int32_t id = ert_model_add_tensor(m, x->name, x->dtype, ERT_ROLE_OPT_STATE, x->ndim, x->dims);
        void *d = id >= 0 ? malloc(x->nbytes ? x->nbytes : 1) : NULL;
        if (!d) {
            st = ert_set_error(ctx, ERT_E_NOMEM, "out of memory building the checkpoint");
            break;
        }
        if (t->g.be) st = t->g.be->download(t->g.bctx, d, x->data, x->nbytes);
        else memcpy(d, x->data, x->nbytes);
        m->tensors[id].data = d;
        m->tensors[id].data_owned = true;
    }
    if (with_state && st == ERT_OK) {
        int64_t four = 4;
        int32_t id = ert_model_add_tensor(m, META_NAME, ERT_DTYPE_I64, ERT_ROLE_OPT_STATE, 1, &four);
        int64_t *d = id >= 0 ? malloc(4 * sizeof *d) : NULL;
        if (!d) st = ert_set_error(ctx, ERT_E_NOMEM, "out of memory building the checkpoint");
        else {
            d[0] = META_FORMAT;
            d[1] = t->step;
            d[2] = (int64_t)t->fingerprint;
            d[3] = t->o.optim.kind;
            m->tensors[id].data = d;
            m->tensors[id].data_owned = true;
        }
    }
    if (st == ERT_OK) st = ert_model_validate(m);
    if (st != ERT_OK) {
        ert_model_free(m);
        return st;
    }
    *out = m;
    return ERT_OK;
}

/* export, save and load read or write the arena: they run with the trainer's
 * running flag held (busy_internal.h). */
ert_status ert_trainer_export(ert_trainer *t, ert_model **out) {
    if (!t || !out) return ERT_E_ARG;
    ERT_BUSY_RETURN(&t->running, t->g.ctx, "trainer", make_model(t, false, out));
}

static ert_status save_checkpoint(ert_trainer *t, const char *path) {
    ert_model *m = NULL;
    ert_status st = make_model(t, true, &m);
    if (st) return st;
    st = ert_format_write(m, path);
    ert_model_free(m);
    return st;
}

ert_status ert_trainer_save_checkpoint(ert_trainer *t, const char *path) {
    if (!t || !path) return t ? ert_set_error(t->g.ctx, ERT_E_ARG, "checkpoint: NULL path") : ERT_E_ARG;
    ERT_BUSY_RETURN(&t->running, t->g.ctx, "trainer", save_checkpoint(t, path));
}

static void dims_str(int nd, const int64_t *d, char *buf, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "(");
    for (int i = 0; i < nd && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, i ? ",%lld" : "%lld", (long long)d[i]);
    if (o < cap) snprintf(buf + o, cap - o, ")");
}

static ert_status load_checkpoint(ert_trainer *t, const char *path) {
    ert_context *ctx = t->g.ctx;
    ert_model *m = NULL;
    ert_status st = ert_model_load_file(ctx, path, &m);
    if (st) return st;
    /* 1. every mutable tensor present with the same dtype and shape */
    for (int i = 0; i < t->g.nt && st == ERT_OK; i++) {
        const ert_gtensor *x = &t->g.t[i];
        if ((x->mem != ERT_MEM_PARAM && x->mem != ERT_MEM_STATE) || !x->data || i == t->gnorm_t) continue;
        int32_t id = ert_model_find_tensor(m, x->name);
        if (id < 0) {
            st = ert_set_error(ctx, ERT_E_ARG, "checkpoint '%s' has no tensor '%s': it was made for another model or "
                                               "optimizer", path, x->name);
            break;
        }
        const ert_tensor *c = &m->tensors[id];
        bool same = c->dtype == x->dtype && c->ndim == x->ndim && c->data &&
                    memcmp(c->dims, x->dims, (size_t)x->ndim * sizeof x->dims[0]) == 0;
        if (!same) {
            char a[128], b[128];
            dims_str(c->ndim, c->dims, a, sizeof a);
            dims_str(x->ndim, x->dims, b, sizeof b);
            st = ert_set_error(ctx, ERT_E_ARG, "checkpoint '%s': tensor '%s' is %s %s there, %s %s here: another model",
                               path, x->name, ert_dtype_name(c->dtype), a, ert_dtype_name(x->dtype), b);
        }
    }
    const int64_t *meta = NULL;
    if (st == ERT_OK) {
        int32_t id = ert_model_find_tensor(m, META_NAME);
        const ert_tensor *c = id >= 0 ? &m->tensors[id] : NULL;
        if (!c || c->dtype != ERT_DTYPE_I64 || c->ndim != 1 || c->dims[0] != 4 || !c->data)
            st = ert_set_error(ctx, ERT_E_FORMAT, "'%s' is not a training checkpoint (no valid %s tensor)", path, META_NAME);
        else if ((meta = c->data)[0] != META_FORMAT)
            st = ert_set_error(ctx, ERT_E_UNSUPPORTED, "checkpoint '%s': format %lld, this edgert reads %d", path,
                               (long long)meta[0], META_FORMAT);
        else if ((uint64_t)meta[2] != t->fingerprint)
            st = ert_set_error(ctx, ERT_E_ARG, "checkpoint '%s' was made with other training options (trainable set "
                                               "or optimizer differ)", path);
        else if (meta[1] < 0)
            st = ert_set_error(ctx, ERT_E_FORMAT, "checkpoint '%s': negative step", path);
    }
    /* 2. all checked: copy */
    if (st == ERT_OK) {
        for (int i = 0; i < t->g.nt && st == ERT_OK; i++) {
            ert_gtensor *x = &t->g.t[i];
            if ((x->mem != ERT_MEM_PARAM && x->mem != ERT_MEM_STATE) || !x->data || i == t->gnorm_t) continue;
            const void *src = m->tensors[ert_model_find_tensor(m, x->name)].data;
            if (t->g.be) st = t->g.be->upload(t->g.bctx, x->data, src, x->nbytes);
            else memcpy(x->data, src, x->nbytes);
            if (i == t->scaler_t) { /* the host's view of the loss scaler */
                const float *sc = src;
                t->scale_now = sc[0];
                t->skipped = (int64_t)sc[2];
            }
        }
        /* an upload failing half way leaves a mix: say so (the trainer must
         * be reloaded or recreated) */
        if (st != ERT_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", ert_last_error(ctx));
            st = ert_set_error(ctx, st, "checkpoint '%s': upload failed part way (%s); the trainer's weights are "
                                        "inconsistent until a load succeeds", path, why);
        } else {
            t->step = meta[1];
        }
    }
    ert_model_free(m);
    return st;
}

ert_status ert_trainer_load_checkpoint(ert_trainer *t, const char *path) {
    if (!t || !path) return t ? ert_set_error(t->g.ctx, ERT_E_ARG, "checkpoint: NULL path") : ERT_E_ARG;
    ERT_BUSY_RETURN(&t->running, t->g.ctx, "trainer", load_checkpoint(t, path));
}
