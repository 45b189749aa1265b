/* The one working graph of inference and training: the tensor and node
 * types, the container (ert_graph) that struct ert_session
 * (session_internal.h) and struct ert_trainer (train/trainer_internal.h)
 * both embed as their member `g`, and the steps written once on it:
 * creation of tensors, nodes and constants, use counting, constant folding,
 * shape inference of one node, lifetimes, aliasing of Reshape-like outputs,
 * block planning, kernel views and arguments. The passes in runtime/passes/
 * take an ert_graph, so a pass is written once for session and trainer.
 * Also here: sizes and kernel views of a tensor, op names for messages,
 * running one node on the CPU through the backend table, the op half of the
 * channels-last predicate (passes/layout.c, train/stem.c). */
#ifndef ERT_GRAPH_H
#define ERT_GRAPH_H
#include "runtime_internal.h"
#include "planner_internal.h"

/* Where a tensor's bytes live. A session uses NONE..ACT; a trainer adds
 * PARAM, GRAD and STATE. */
typedef enum ert_mem {
    ERT_MEM_NONE = 0,
    ERT_MEM_CONST, /* immutable model data the graph does not own (weights; used in place on the CPU) */
    ERT_MEM_OWNED, /* constant the graph made (folded, converted): heap until bind, then the weights region */
    ERT_MEM_IO,    /* graph input or output (a trainer's target, loss, norm too): persistent, user-visible */
    ERT_MEM_ACT,   /* planned: activations, saved activations, activation gradients */
    ERT_MEM_PARAM, /* trainer: mutable weight (parameter or BN running stat): weights region */
    ERT_MEM_GRAD,  /* trainer: final gradient of a trainable parameter: gradients region */
    ERT_MEM_STATE, /* trainer: optimizer state, RNG, gradient norm: state region */
} ert_mem;

typedef struct ert_gtensor {
    const char *name;
    char *name_owned;      /* the graph's copy of name (tensors a trainer makes), else NULL */
    ert_dtype dtype, orig_dtype; /* orig_dtype: the model's, before the session's f32 widening */
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    size_t nbytes;
    ert_mem mem;
    const void *cdata;     /* constant data (CONST, OWNED; a trainer's PARAM initial value) */
    void *owned;           /* heap copy of OWNED data until it moves into the arena */
    int32_t model_id;      /* model tensor, or -1 (trainer) */
    bool defined;          /* has dtype/shape (produced or given) */
    bool candidate;        /* trainer: float weight read at a differentiable slot */
    bool trainable;        /* trainer */
    bool need_grad;        /* trainer: depends on a trainable parameter */
    bool fwd;              /* trainer: produced by a forward node */
    int n_uses;            /* live nodes reading it (ert_graph_count_uses) */
    int n_packed_uses;     /* session plan: of those, nodes whose kernel reads only the backend's packed
                            * copy (node_packed_only); at n_uses the arena holds no copy of it */
    int first, last;       /* schedule steps */
    int32_t alias;         /* shares the storage of this tensor (-1: own) */
    size_t alias_off;      /* ... at this byte offset (a slice of a Concat's output / a Split's input) */
    int32_t block;         /* planner block index (ACT roots) */
    size_t offset;         /* within its region */
    void *data;            /* resolved pointer kernels use (device memory on CUDA) */
    void *host;            /* IO: the pointer the user reads/writes (a pinned mirror on a discrete GPU) */
} ert_gtensor;

/* room past a node's own inputs for the ones fusion adds (a 2-input Conv can reach input 5) */
#define ERT_GRAPH_EXTRA_IN 4

/* A trainer node's phase (forward + loss, backward + norm, optimizer). */
enum { ERT_PHASE_FWD = 0, ERT_PHASE_BWD = 1, ERT_PHASE_OPT = 2 };

typedef struct ert_gnode {
    ert_op op;
    const ert_node *src;   /* model node (attributes, name); NULL for made nodes */
    const char *name;
    char *name_owned;      /* the graph's copy of name, or NULL */
    int n_in, n_out;
    int32_t *in, *out;     /* -1: omitted; in has room for ERT_GRAPH_EXTRA_IN extra entries (fusion inputs:
                            * bias, residual, the input-channel scale at 5) */
    ert_op_params params;
    size_t ws_bytes;
    int32_t ws_block;
    size_t pk_bytes, pk_offset; /* backend's packed weights (node_packed_bytes), in the weights region */
    bool pk_only;          /* ... and its kernel reads only them, never the weight (node_packed_only) */
    int phase;             /* trainer: ERT_PHASE_* */
    bool dead;             /* removed by a pass; not scheduled */
    bool elided;           /* a Concat/Split whose operands are views of one block: not scheduled */
    bool host;             /* the device backend has no kernel: runs the CPU kernel (backend's bind_host_node) */
    ert_tview *views;
    ert_kargs args;
} ert_gnode;

/* The working graph. what names the owner in messages ("session",
 * "trainer"); be is NULL for the CPU trainer (it runs ert_cpu_backend's
 * table directly). inputs/outputs: the user-facing tensors. blocks: the
 * planned activation roots then workspaces (ert_graph_plan_blocks). */
typedef struct ert_graph {
    ert_context *ctx;
    ert_kernel_choice kc;  /* ctx's at create: every node's ert_kargs.choice points here */
    const char *what;
    const ert_backend *be;
    void *bctx;
    struct ert_threadpool *pool;
    int n_threads;
    unsigned flags;        /* ERT_SESSION_* */
    bool widen_half;       /* f16/bf16 results are computed in f32 (the session); else refused (the trainer) */
    ert_gtensor *t;
    int nt, cap_t;
    ert_gnode *n;
    int nn, cap_n;
    int n_inputs, n_outputs;
    int32_t *inputs, *outputs;
    ert_plan_block *blocks;
    int n_blocks;
} ert_graph;

/* ---- building the graph (create steps of session and trainer, and passes) */

/* "out of memory creating the <what>" (ERT_E_NOMEM). */
ert_status ert_graph_oom(ert_graph *g);
/* A new tensor, all blank (no storage, no alias, no block, no steps);
 * name is not copied. -1 when out of memory. */
int32_t ert_graph_add_tensor(ert_graph *g, const char *name);
/* A new defined tensor with dtype and dims, name copied; -1 when out of memory. */
int32_t ert_graph_new_tensor(ert_graph *g, const char *name, ert_dtype dt, int ndim, const int64_t *dims);
/* A new OWNED constant holding `owned` (taken, freed on failure); name not copied. */
ert_status ert_graph_new_const(ert_graph *g, const char *name, ert_dtype dt, int ndim, const int64_t *dims,
                               void *owned, int32_t *id);
/* A new node, every operand -1; name is not copied (ert_graph_new_node
 * copies it, NULL reads "?"). NULL when out of memory. The pointer is valid
 * until the next node is added. */
ert_gnode *ert_graph_add_node(ert_graph *g, ert_op op, const ert_node *src, const char *name, int n_in, int n_out);
ert_gnode *ert_graph_new_node(ert_graph *g, ert_op op, const char *name, int n_in, int n_out, int phase);
/* Frees everything the graph holds (not the backend's per-node state: the
 * owner releases that first). */
void ert_graph_release(ert_graph *g);
bool ert_graph_set_nbytes(ert_gtensor *x);
void ert_graph_fill_view(ert_tview *v, const ert_gtensor *x, void *data);
bool ert_graph_is_float16ish(ert_dtype d);
/* A constant (CONST or OWNED) of known value. */
bool ert_graph_is_imm(const ert_gtensor *x);
bool ert_graph_is_const(const ert_graph *g, int32_t t);
bool ert_graph_is_output(const ert_graph *g, int32_t t);
bool ert_graph_is_io(const ert_graph *g, int32_t t);
/* n_uses of every tensor over the live nodes; producer (optional, nt
 * entries): the live node writing each tensor, -1 for none. */
void ert_graph_count_uses(ert_graph *g, int32_t *producer);
/* The single live reader of t after node index `after` (NULL if t has
 * another reader or is a graph output); n_uses must be counted (passes/fuse.c). */
ert_gnode *ert_graph_sole_consumer(ert_graph *g, int32_t t, int after);
/* Run n (all inputs constant) on the CPU now; its outputs become OWNED constants. */
ert_status ert_graph_fold_node(ert_graph *g, ert_gnode *n);
/* Create step 3 for one model node: a node of g reading map[model id] (map
 * NULL: the same ids), its outputs' dtype and shape from the op's prepare.
 * A node whose inputs are all constant (or a Shape/Size node) is run at once
 * and removed, its outputs constants: *out is then NULL. */
ert_status ert_graph_infer_node(ert_graph *g, const ert_node *mn, const int32_t *map, ert_gnode **out);
/* Create step 1: every model tensor, same ids (weights CONST, used in place). */
ert_status ert_graph_from_model(ert_graph *g, const ert_model *m);
/* Graph inputs get their concrete dims (ert_graph_input_dims) and are defined. */
ert_status ert_graph_fix_inputs(ert_graph *g, const ert_model *m, const ert_session_options *o);

/* ---- planning: sched lists the scheduled node indices (NULL: every node in order) */

/* NONE tensors become ACT; first/last step of every tensor over the schedule
 * (an unused output still gets its step). */
void ert_graph_lifetimes(ert_graph *g, const int32_t *sched, int n_sched);
/* The tensor that owns t's storage (t itself when not an alias). */
int32_t ert_graph_root(const ert_graph *g, int32_t t);
/* Reshape-like outputs (ert_graph_is_copy_op) alias their input when both
 * are ACT, the input dies there and the sizes agree; then every alias
 * root's lifetime covers its aliases'. */
void ert_graph_alias_copies(ert_graph *g, const int32_t *sched, int n_sched);
void ert_graph_alias_extend(ert_graph *g);
/* Concat/Split as views: with every dim before the axis of size 1, a
 * Concat's inputs become slices of its output (alias + alias_off) and a
 * Split's outputs slices of its input; the node is then elided. Run
 * between ert_graph_alias_copies and ert_graph_alias_extend. */
void ert_graph_plan_views(ert_graph *g, const int32_t *sched, int n_sched);
/* Planned blocks: every ACT root with a step, then every scheduled node's
 * workspace; offsets by ert_plan_offsets (256-byte aligned). peak and lb:
 * the activation region and its lower bound; ws_max: the largest workspace. */
ert_status ert_graph_plan_blocks(ert_graph *g, const int32_t *sched, int n_sched, size_t *peak, size_t *lb,
                                 size_t *ws_max);
/* Storage of tensor t: its root's plus the offsets along its alias chain (NULL: none yet). */
void *ert_graph_alias_data(const ert_graph *g, int32_t t);
/* After the roots have storage: every ACT alias gets its root's. */
void ert_graph_resolve_aliases(ert_graph *g);
/* Kernel arguments of n with concrete shapes and no data (v holds cap
 * views), for the backend's create-time questions; false if n has more
 * operands than cap. */
bool ert_graph_shape_args(const ert_graph *g, const ert_gnode *n, ert_tview *v, int cap, ert_kargs *a);
/* n's views on its tensors' storage and its kernel arguments (pool, and the
 * workspace block in the activation region at abase); NOMEM. */
ert_status ert_graph_node_args(ert_graph *g, ert_gnode *n, struct ert_threadpool *pool, uint8_t *abase);
/* The plan's invariant for tests: no two blocks overlap in time and space,
 * and every tensor with storage outside the model's (CONST) lies in [arena, arena + bytes). */
bool ert_graph_plan_check(const ert_graph *g, const uint8_t *arena, size_t bytes, char *why, size_t cap);
/* Views (aliases: copies, Concat/Split/Slice planned in place) lie inside
 * their root's bytes, and any two activations live at one step whose bytes
 * overlap are views of one root. O(tensors^2): tests only. */
bool ert_graph_view_check(const ert_graph *g, char *why, size_t cap);

/* ---- passes (runtime/passes/): each takes the graph, so it is written once */

/* fuse.c: BatchNorm folded into the preceding Conv (needs n_uses counted) */
ert_status ert_pass_fold_batchnorm(ert_graph *g);
/* fuse.c: epilogue and pattern fusions (g->be->fusions says which the backend takes) */
ert_status ert_pass_fuse(ert_graph *g);
/* attention.c (called by ert_pass_fuse): MatMul -> [scale] -> [bias] -> Softmax
 * -> MatMul -> ert.Attention over strided views; producer as ert_graph_count_uses */
void ert_pass_fuse_attention(ert_graph *g, int32_t *producer);
/* fuse.c: nodes whose outputs nobody reads become dead */
void ert_pass_remove_dead(ert_graph *g);
/* qdq.c: Q/DQ patterns folded into integer ops (integer_ops) or float ops */
ert_status ert_pass_fold_qdq(ert_graph *g, bool integer_ops);
/* precision.c: f32 computed in dt (f16/bf16), the user still sees f32 */
int32_t ert_pass_retyped_copy(ert_graph *g, int32_t from, ert_dtype dt);
ert_status ert_pass_lower_precision(ert_graph *g, ert_dtype dt);
/* layout.c: channels-last regions */
ert_status ert_pass_channels_last(ert_graph *g, bool quant_only);

/* ---- sizes, views, names */

/* Bytes of a concrete tensor; false on overflow or a dynamic dim. */
bool ert_graph_nbytes(ert_dtype dt, int ndim, const int64_t *dims, size_t *out);
/* A kernel's view of a tensor stored at data. */
void ert_graph_view(ert_tview *v, ert_dtype dt, int ndim, const int64_t *dims, void *data);
/* ONNX name of an op, "?" if unknown. */
const char *ert_graph_op_name(ert_op op);
/* Run one node on the CPU through ert_cpu_backend's table. */
ert_status ert_graph_cpu_run(const ert_kargs *a);
/* Constant folding: run one node whose views v (n_in inputs, then n_out
 * outputs) all have storage, with a temporary workspace of ws_bytes, under
 * kernel choice kc (NULL: the defaults). On failure the message names the
 * node unless the kernel set a specific one. */
ert_status ert_graph_fold(ert_context *ctx, const ert_kernel_choice *kc, const char *name, ert_op op,
                          const ert_op_params *params, int n_in, int n_out, ert_tview *v, size_t ws_bytes);
/* Graph inputs (create step 1 of session and trainer). Every
 * o->input_shapes entry must name one of m's inputs: ERT_E_NOT_FOUND. */
ert_status ert_graph_check_input_shapes(ert_context *ctx, const ert_model *m, const ert_session_options *o);
/* Concrete dims for the graph input `name` (ndim dims, -1 dynamic), in place:
 * its o->input_shapes entry (same rank, agreeing with every fixed dim), else
 * a dynamic leading dim becomes o->batch (1 when 0); any other dynamic dim is
 * ERT_E_SHAPE, as is an entry that does not fit. */
ert_status ert_graph_input_dims(ert_context *ctx, const ert_session_options *o, const char *name, int ndim,
                                int64_t *dims);
/* Shape inference of one model node (create step 3 of session and trainer).
 * ert_graph_check_node_io first: mn has at most ERT_GRAPH_MAX_IO inputs and
 * outputs (ERT_E_UNSUPPORTED otherwise), so callers' ert_tinfo arrays of
 * that size hold them. ert_graph_tinfo fills one input's info (const_data
 * NULL: not a constant). ert_graph_prepare runs mn's op's prepare on
 * in[0..n_in) and fills out[0..n_out), *params, the CPU workspace
 * (*ws_bytes) and whether the node may be folded (*fold_ok); a failure's
 * message names the node: "node 'x' (Conv): <prepare's message>". */
#define ERT_GRAPH_MAX_IO 64
ert_status ert_graph_check_node_io(ert_context *ctx, const ert_node *mn);
void ert_graph_tinfo(ert_tinfo *ti, ert_dtype dt, int ndim, const int64_t *dims, const void *const_data);
ert_status ert_graph_prepare(ert_context *ctx, const ert_node *mn, int n_threads, const ert_tinfo *in, ert_tinfo *out,
                             ert_op_params *params, size_t *ws_bytes, bool *fold_ok);
/* The arena of a session or trainer (the first step of bind): the caller's
 * (o->arena: ERT_HOST_ALIGN-aligned and at least `total` bytes, else
 * ERT_E_ARG / ERT_E_ARENA), or one allocation of `total` bytes: the backend's
 * arena_alloc, or aligned host memory when be is NULL (the CPU trainer).
 * `parts` names how total splits, for the messages ("weights 1024, io 64,
 * activations 4096"). *owned: the arena is ours to free. */
ert_status ert_graph_arena(ert_context *ctx, const ert_backend *be, void *bctx, const ert_session_options *o,
                           size_t total, const char *parts, uint8_t **arena, size_t *bytes, bool *owned);
/* Reshape-like ops (Identity, Dropout at inference, Flatten, Reshape,
 * Squeeze, Unsqueeze): output 0 holds input 0's bytes unchanged, so the
 * planners of session and trainer let it share input 0's storage when that
 * input dies there. */
bool ert_graph_is_copy_op(ert_op op);
/* Channels-last, the op's own conditions: a 2-D Conv with symmetric pads
 * (cuDNN's NHWC condition), 2-D Max/AveragePool, global pools. Callers add
 * their conditions on tensors (dtype, rank, region). */
bool ert_graph_nhwc_op_ok(ert_op op, const ert_op_params *p);

#endif /* ERT_GRAPH_H */
