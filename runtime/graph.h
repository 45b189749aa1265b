/* What the two working graphs (the session's, session_internal.h, and the
 * trainer's, train/trainer_internal.h) share: sizes and kernel views of a
 * tensor, op names for messages, running one node on the CPU through the
 * backend table (constant folding, the CPU trainer), and the op half of the
 * channels-last predicate (session pass layout.c, trainer train/stem.c). */
#ifndef ERT_GRAPH_H
#define ERT_GRAPH_H
#include "runtime_internal.h"

/* Bytes of a concrete tensor; false on overflow or a dynamic dim. */
bool ert_graph_nbytes(ert_dtype dt, int ndim, const int64_t *dims, size_t *out);
/* A kernel's view of a tensor stored at data. */
void ert_graph_view(ert_tview *v, ert_dtype dt, int ndim, const int64_t *dims, void *data);
/* ONNX name of an op, "?" if unknown. */
const char *ert_graph_op_name(ert_op op);
/* Run one node on the CPU through ert_cpu_backend's table. */
ert_status ert_graph_cpu_run(const ert_kargs *a);
/* Constant folding: run one node whose views v (n_in inputs, then n_out
 * outputs) all have storage, with a temporary workspace of ws_bytes. On
 * failure the message names the node unless the kernel set a specific one. */
ert_status ert_graph_fold(ert_context *ctx, const char *name, ert_op op, const ert_op_params *params, int n_in,
                          int n_out, ert_tview *v, size_t ws_bytes);
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
