/* Trainer internals shared by runtime/train/ (trainer.c pipeline, plan, step;
 * frozen.c, amp.c, stem.c, emit.c; autodiff.c backward graph;
 * checkpoint.c checkpoints and export). */
#ifndef ERT_TRAINER_INTERNAL_H
#define ERT_TRAINER_INTERNAL_H
#include "graph.h"
#include "busy_internal.h"

#include <stdatomic.h>

struct ert_trainer {
    ert_graph g;            /* tensors, nodes, backend (NULL on the CPU), inputs, planned blocks (graph.h) */
    const ert_model *model;
    ert_trainer_options o;
    float *class_weights;   /* copy of the option's, until it becomes a tensor */
    int n_class_weights;
    int fwd_end, bwd_end;   /* nodes [0,fwd_end) forward + loss, [fwd_end,bwd_end) backward + norm, rest optimizer */
    int32_t out_t, target_t, loss_t, dlogits_t, gnorm_t, rng_t;
    int32_t *params;        /* trainable parameters */
    int n_params;
    uint8_t *arena;
    size_t arena_bytes;
    bool arena_owned;
    size_t w_bytes, g_bytes, s_bytes, io_bytes, act_bytes;
    ert_kargs **kptr;
    int64_t step;
    ert_memory_report mem;
    uint64_t fingerprint;
    /* device (g.be set: the backend, CUDA, that owns the arena) */
    void *io_host;          /* the io region as the user sees it */
    int32_t hyper_t;        /* device: {lr, 1 - beta1^t, 1 - beta2^t} copied in at each step */
    int32_t status_t;       /* device: i64 {reporting node + 1, bad value}: zeroed in and copied back each step;
                             * a GatherGrad index out of range sets it, GRAD_NORM then skips the update */
    bool bound;             /* bind_node ran (release_node owed) */
    /* mixed precision (device only): the half type convs run in (F32: off),
     * the loss scaler {scale, good steps, skipped steps} (-1: none), and
     * what the last step reported back */
    ert_dtype amp;
    int32_t scaler_t;
    float scale_now;
    int64_t skipped;
    atomic_bool running;    /* a call is using the arena (busy_internal.h) */
};

/* trainer.c */
float ert_tr_lr_at(const ert_trainer_options *o, int64_t step);

/* Build steps, in the order build() (trainer.c) calls them, and the helpers
 * they share across the train/ files. */
/* frozen.c */
bool ert_tr_frozen_w(const ert_gtensor *x);
int ert_tr_n_uses(const ert_trainer *t, int32_t x);
int ert_tr_find_user(const ert_trainer *t, int32_t x, int from);
void ert_tr_drop_node(ert_trainer *t, int k);
ert_status ert_tr_fold_frozen(ert_trainer *t);
ert_status ert_tr_fuse_bn_relu(ert_trainer *t);
/* amp.c */
ert_status ert_tr_amp_rewrite(ert_trainer *t);
/* stem.c */
ert_status ert_tr_prefix_channels_last(ert_trainer *t);
ert_status ert_tr_chunk_stem(ert_trainer *t);
/* emit.c */
ert_status ert_tr_recompute(ert_trainer *t);
ert_status ert_tr_add_loss(ert_trainer *t);
ert_status ert_tr_add_optim(ert_trainer *t, const int32_t *grads);

/* Tests: a trainable parameter's storage and its gradient (after a step). */
ert_status ert_trainer_param(ert_trainer *t, const char *name, float **value, const float **grad, int64_t *n);
bool ert_trainer_plan_check(const ert_trainer *t, char *why, size_t cap);
const struct ert_plan_block *ert_trainer_plan_blocks(const ert_trainer *t, int *n);
/* Tests, any device: copy a trainable parameter's value and gradient (either
 * may be NULL) into host buffers of at least *n floats (*n gets the count). */
ert_status ert_trainer_param_copy(ert_trainer *t, const char *name, float *value, float *grad, int64_t *n);


/* autodiff.c: emit backward nodes for the forward nodes [0, fwd_end) given
 * the gradient of the loss's input (dlogits_t); on return every trainable
 * parameter p has its gradient tensor in grads[k] (params order). */
ert_status ert_autodiff(ert_trainer *t, int32_t *grads);
/* Differentiable input slot of an op (false: no gradient flows there). */
bool ert_ad_diff_slot(ert_op op, int slot);

#endif
