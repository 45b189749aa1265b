/* The session's working graph, shared by runtime/session.c (create, plan,
 * bind, run) and the inference passes in runtime/passes/ (fuse.c: BatchNorm
 * folding, epilogue fusion, dead nodes; qdq.c: Q/DQ folding into integer
 * ops; precision.c: f16/bf16 lowering;
 * layout.c: channels-last regions). */
#ifndef ERT_SESSION_INTERNAL_H
#define ERT_SESSION_INTERNAL_H
#include "runtime_internal.h"
#include "planner_internal.h"

#include <stdatomic.h>

typedef enum mem_kind {
    MEM_NONE = 0,
    MEM_CONST,    /* constant in memory the session does not own (model weights) */
    MEM_OWNED,    /* constant made by the session (folded, converted); goes to the weights region */
    MEM_IO,       /* graph input or output: persistent */
    MEM_ACT,      /* planned activation */
} mem_kind;

typedef struct stensor {
    const char *name;
    ert_dtype dtype, orig_dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    size_t nbytes;
    mem_kind mem;
    const void *cdata; /* constant data (MEM_CONST / MEM_OWNED) */
    void *owned;       /* heap copy of MEM_OWNED data until it moves into the arena */
    bool defined;      /* has dtype/shape (produced or given) */
    int n_uses;
    int first, last;   /* schedule steps */
    int32_t alias;     /* shares the storage of this tensor (-1: own) */
    size_t alias_off;  /* ... at this byte offset (a slice of a Concat's output / a Split's input) */
    int32_t block;     /* planner block index (MEM_ACT roots) */
    size_t offset;     /* within its region */
    void *data;        /* resolved pointer kernels use */
    void *host;        /* MEM_IO: the pointer the user reads/writes */
} stensor;

/* room past a node's own inputs for the ones fusion adds (a 2-input Conv can reach input 5) */
#define ERT_S_EXTRA_IN 4

typedef struct snode {
    ert_op op;
    const ert_node *src; /* model node (attributes, name); NULL for synthetic nodes */
    const char *name;
    int n_in, n_out;
    int32_t *in, *out;   /* in has room for ERT_S_EXTRA_IN extra entries (fusion inputs: bias, residual,
                          * the input-channel scale at 5) */
    ert_op_params params;
    size_t ws_bytes;
    int32_t ws_block;
    size_t pk_bytes, pk_offset; /* backend's packed weights (node_packed_bytes), in the weights region */
    bool dead;
    bool elided;         /* a Concat/Split whose operands are views of one block: not scheduled */
    bool host;           /* the device backend has no kernel: runs the CPU kernel (backend's bind_host_node) */
    ert_tview *views;
    ert_kargs args;
} snode;

struct ert_session {
    ert_context *ctx;
    const ert_model *model;
    const ert_backend *be;
    void *bctx;
    struct ert_threadpool *pool;
    int n_threads;
    unsigned flags;
    stensor *t;
    int nt, cap_t;
    snode *n;
    int nn, cap_n;
    int32_t *sched; /* live node indices in run order */
    int n_sched;
    int n_in, n_out;
    int32_t *in_t, *out_t; /* user-facing tensors */
    uint8_t *arena;
    size_t arena_bytes;
    bool arena_owned;
    uint8_t *io_host;     /* user-visible io region (== arena io region unless the backend mirrors it) */
    float *prof_ms;       /* ert_session_profile's per-node times (n_sched) */
    ert_kargs **kptr;     /* scheduled nodes' arguments, in run order */
    ert_plan_block *blocks;
    int n_blocks;
    size_t w_bytes, io_bytes, act_bytes;
    ert_memory_report mem;
    bool planned_only;
    bool bctx_live;       /* be->init succeeded */
    int n_host;           /* scheduled nodes on the CPU fallback */
    ert_create_stats stats; /* ert_session_create_stats: create_ms here, the rest from the backend */
    atomic_bool running;  /* a call is using the arena (busy_internal.h) */
};

/* Steps of build() (session.c) and the helpers the passes share. */
/* session.c */
ert_status ert_s_oom(ert_session *s);
int32_t ert_s_add_tensor(ert_session *s, const char *name);
snode *ert_s_add_node(ert_session *s, ert_op op, const ert_node *src, const char *name, int n_in, int n_out);
bool ert_s_is_float16ish(ert_dtype d);
bool ert_s_set_nbytes(stensor *t);
void ert_s_fill_view(ert_tview *v, const stensor *t, void *data);
/* Run n (all inputs constant) on the CPU now; its outputs become constants. */
ert_status ert_s_fold_node(ert_session *s, snode *n);
/* fuse.c */
bool ert_s_is_const(const ert_session *s, int32_t t);
bool ert_s_is_graph_out(const ert_session *s, int32_t t);
void ert_s_count_uses(ert_session *s, int32_t *producer);
/* The single live reader of t after node index `after` (NULL if t has another reader or is a graph output). */
snode *ert_s_sole_consumer(ert_session *s, int32_t t, int after);
ert_status ert_s_new_const(ert_session *s, const char *name, ert_dtype dt, int ndim, const int64_t *dims, void *owned,
                           int32_t *id);
ert_status ert_s_fold_batchnorm(ert_session *s);
ert_status ert_s_fuse(ert_session *s);
void ert_s_remove_dead(ert_session *s);
/* attention.c: MatMul -> [scale] -> [bias] -> Softmax -> MatMul -> ert.Attention over strided views */
void ert_s_fuse_attention(ert_session *s, int32_t *producer);
/* qdq.c */
ert_status ert_s_fold_qdq(ert_session *s, bool integer_ops);
/* precision.c */
bool ert_s_is_io(const ert_session *s, int32_t t);
int32_t ert_s_retyped_copy(ert_session *s, int32_t from, ert_dtype dt);
ert_status ert_s_lower_precision(ert_session *s, ert_dtype dt);
/* layout.c */
ert_status ert_s_to_channels_last(ert_session *s);

#endif /* ERT_SESSION_INTERNAL_H */
