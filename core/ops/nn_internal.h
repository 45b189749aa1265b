/* Helpers shared by the neural-network ops' prepare functions
 * (core/ops/conv.c, matmul.c, pool.c, norm.c, softmax.c; defined in
 * nn_common.c): input/output checks, workspace sizing, fused activation and
 * spatial attributes (kernel, strides, dilations, pads, auto_pad). */
#ifndef ERT_NN_INTERNAL_H
#define ERT_NN_INTERNAL_H
#include "ert_internal.h"

/* ONNX auto_pad */
enum { ERT_AUTO_PAD_NOTSET, ERT_AUTO_PAD_SAME_UPPER, ERT_AUTO_PAD_SAME_LOWER, ERT_AUTO_PAD_VALID };

typedef struct ert_spatial {
    int nsp;
    int64_t k[3], s[3], d[3], pb[3], pe[3];
    bool have_k;
    int auto_pad;
} ert_spatial;

const ert_node *ert_nn_node_of(const ert_prep *p);
bool ert_nn_has_in(const ert_prep *p, int i);
bool ert_nn_wants_out(const ert_prep *p, int i);
ert_status ert_nn_need_f32(ert_prep *p, int i);
void ert_nn_set_out_k(ert_prep *p, int k, int ndim, const int64_t *dims);
void ert_nn_set_out(ert_prep *p, int ndim, const int64_t *dims);
ert_status ert_nn_check_nelems(ert_prep *p, int ndim, const int64_t *dims);
size_t ert_nn_gemm_ws(const ert_prep *p, int64_t M, int64_t N, int64_t K, int n_threads);
ert_status ert_nn_set_workspace(ert_prep *p, size_t bytes);
ert_status ert_nn_read_act(ert_prep *p, ert_act_params *act);
ert_status ert_nn_read_ints(ert_prep *p, const char *name, int want, int64_t lo, int64_t *out, bool *present);
ert_status ert_nn_read_spatial(ert_prep *p, int nsp, ert_spatial *sa);
ert_status ert_nn_fwd_out(ert_prep *p, ert_spatial *sa, int i, int64_t in, bool ceil_mode, int64_t *out);

#endif /* ERT_NN_INTERNAL_H */
