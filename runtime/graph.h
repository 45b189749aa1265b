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
/* Channels-last, the op's own conditions: a 2-D Conv with symmetric pads
 * (cuDNN's NHWC condition), 2-D Max/AveragePool, global pools. Callers add
 * their conditions on tensors (dtype, rank, region). */
bool ert_graph_nhwc_op_ok(ert_op op, const ert_op_params *p);

#endif /* ERT_GRAPH_H */
