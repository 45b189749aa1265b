/* Test harness for single ops, shared by the op test programs: builds the
 * ert_tinfo inputs and a hand-made ert_node, runs the op's real prepare,
 * allocates poisoned outputs and workspace, and runs ert_cpu_run_node. */
#ifndef ERT_OP_HARNESS_H
#define ERT_OP_HARNESS_H
#include "runtime_internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A test tensor. data is malloc'd (tt_free). `cst` marks it a known constant
 * for prepare; `omit` makes it an omitted optional input. */
typedef struct tt {
    ert_dtype dt;
    int nd;
    int64_t dims[ERT_MAX_DIMS];
    void *data;
    bool cst, omit;
} tt;

static struct ert_threadpool *oh_pool; /* NULL or a 2-thread pool; set by the test */
/* the kernel choice run_op's kernels get (ert_kargs.choice); NULL: the defaults */
static const ert_kernel_choice *oh_choice;
/* 1: constant weights are packed first, as session create does (the CPU
 * backend's node_packed_bytes + bind_node, into poisoned memory); 2: and
 * input 1 is then overwritten with NaN (the caller's data!), so only a
 * kernel that reads the packed copy gives the right result */
static int oh_pack;
static bool oh_was_packed; /* set by run_op: whether the kernel got packed weights */

/* float64 reference of a fused activation (ert_act_params: Clip's bounds,
 * LeakyReLU's and HardSigmoid's alpha/beta), for the conv/GEMM epilogue tests */
static inline double oh_act_ref(double v, const ert_act_params *ap) {
    switch (ap->kind) {
    case ERT_ACT_RELU: return v < 0 ? 0 : v;
    case ERT_ACT_CLIP: return v < ap->alpha ? ap->alpha : v > ap->beta ? ap->beta : v;
    case ERT_ACT_LEAKY_RELU: return v < 0 ? ap->alpha * v : v;
    case ERT_ACT_HARD_SIGMOID: return fmin(1, fmax(0, ap->alpha * v + ap->beta));
    case ERT_ACT_HARD_SWISH: return v * fmin(1, fmax(0, v / 6 + 0.5));
    case ERT_ACT_SIGMOID: return 1 / (1 + exp(-v));
    case ERT_ACT_SILU: return v / (1 + exp(-v));
    case ERT_ACT_TANH: return tanh(v);
    case ERT_ACT_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    default: return v;
    }
}

static inline int64_t tt_n(const tt *t) {
    int64_t n = 1;
    for (int d = 0; d < t->nd; d++) n *= t->dims[d];
    return n;
}

static inline tt tt_new(ert_dtype dt, int nd, const int64_t *dims) {
    tt t;
    memset(&t, 0, sizeof t);
    t.dt = dt;
    t.nd = nd;
    for (int d = 0; d < nd; d++) t.dims[d] = dims[d];
    size_t b = (size_t)tt_n(&t) * ert_dtype_size(dt);
    t.data = malloc(b ? b : 1);
    memset(t.data, 0, b ? b : 1);
    return t;
}

static inline void tt_free(tt *t) {
    free(t->data);
    t->data = NULL;
}

static inline tt tt_rand(ert_test_rng *r, int nd, const int64_t *dims, float lo, float hi) {
    tt t = tt_new(ERT_DTYPE_F32, nd, dims);
    ert_test_fill(r, t.data, tt_n(&t), lo, hi);
    return t;
}

/* 1-D constant i64 tensor. */
static inline tt tt_ints(const int64_t *v, int n) {
    int64_t d = n;
    tt t = tt_new(ERT_DTYPE_I64, 1, &d);
    if (n) memcpy(t.data, v, (size_t)n * sizeof *v);
    t.cst = true;
    return t;
}

static inline tt tt_scalar_f32(float v, bool cst) {
    tt t = tt_new(ERT_DTYPE_F32, 0, NULL);
    *(float *)t.data = v;
    t.cst = cst;
    return t;
}

static inline tt tt_omitted(void) {
    tt t;
    memset(&t, 0, sizeof t);
    t.omit = true;
    return t;
}

static inline double tt_get(const tt *t, int64_t i) {
    switch (t->dt) {
    case ERT_DTYPE_F32: return ((const float *)t->data)[i];
    case ERT_DTYPE_I32: return ((const int32_t *)t->data)[i];
    case ERT_DTYPE_I64: return (double)((const int64_t *)t->data)[i];
    case ERT_DTYPE_I8: return ((const int8_t *)t->data)[i];
    case ERT_DTYPE_U8: case ERT_DTYPE_BOOL: return ((const uint8_t *)t->data)[i];
    case ERT_DTYPE_F16: return ert_f16_to_f32(((const uint16_t *)t->data)[i]);
    case ERT_DTYPE_BF16: return ert_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: return NAN;
    }
}

/* Attribute literals (names are never written through). */
static inline ert_attr_val A_I(const char *n, int64_t v) {
    ert_attr_val a = {.name = (char *)n, .type = ERT_ATTR_INT, .i = v};
    return a;
}
static inline ert_attr_val A_F(const char *n, float v) {
    ert_attr_val a = {.name = (char *)n, .type = ERT_ATTR_FLOAT, .f = v};
    return a;
}
static inline ert_attr_val A_IS(const char *n, int64_t *v, int cnt) {
    ert_attr_val a = {.name = (char *)n, .type = ERT_ATTR_INTS, .ints = v, .n = cnt};
    return a;
}
static inline ert_attr_val A_FS(const char *n, float *v, int cnt) {
    ert_attr_val a = {.name = (char *)n, .type = ERT_ATTR_FLOATS, .floats = v, .n = cnt};
    return a;
}
static inline ert_attr_val A_S(const char *n, const char *s) {
    ert_attr_val a = {.name = (char *)n, .type = ERT_ATTR_STRING, .s = (char *)s};
    return a;
}

/* Run `op` on inputs; on success out[0..n_out) are new tensors (tt_free them).
 * Outputs and workspace are poisoned (0xFF bytes: NaN for floats) first.
 * If stage is non-NULL it gets 0 when prepare failed, 1 when the kernel did. */
static inline ert_status run_op(ert_context *ctx, ert_op op, const ert_attr_val *attrs, int n_attrs, tt *in, int n_in,
                         tt *out, int n_out, int *stage) {
    ert_tinfo ti[24], to[24];
    int32_t ii[24], oi[24];
    ert_op_params params;
    memset(ti, 0, sizeof ti);
    memset(to, 0, sizeof to);
    memset(&params, 0xA5, sizeof params); /* prepare must fill what the kernel uses */
    for (int k = 0; k < n_in; k++) {
        ii[k] = in[k].omit ? -1 : k;
        if (in[k].omit) continue;
        ti[k].dtype = in[k].dt;
        ti[k].ndim = in[k].nd;
        memcpy(ti[k].dims, in[k].dims, sizeof ti[k].dims);
        ti[k].const_data = in[k].cst ? in[k].data : NULL;
    }
    for (int k = 0; k < n_out; k++) oi[k] = 100 + k;
    ert_node node = {.op = op, .name = (char *)"t", .n_in = n_in, .n_out = n_out, .in = ii, .out = oi,
                     .n_attrs = n_attrs, .attrs = (ert_attr_val *)attrs};
    ert_prep p = {.ctx = ctx, .node = &node, .n_in = n_in, .n_out = n_out, .in = ti, .out = to,
                  .params = &params, .n_threads = ert_threadpool_size(oh_pool), .fold_ok = true,
                  .gemm_workspace = ert_cpu_backend.gemm_workspace};
    if (stage) *stage = 0;
    const ert_op_def *def = ert_op_get(op);
    if (!def) return ERT_E_INTERNAL;
    if (n_in < def->min_in || (def->max_in >= 0 && n_in > def->max_in)) return ERT_E_ARG;
    ert_status st = def->prepare(&p);
    if (st != ERT_OK) return st;
    if (stage) *stage = 1;
    ert_tview vi[24], vo[24];
    memset(vi, 0, sizeof vi);
    memset(vo, 0, sizeof vo);
    for (int k = 0; k < n_in; k++) {
        if (in[k].omit) continue;
        vi[k].data = in[k].data;
        vi[k].dtype = in[k].dt;
        vi[k].ndim = in[k].nd;
        memcpy(vi[k].dims, in[k].dims, sizeof vi[k].dims);
        vi[k].n_elems = tt_n(&in[k]);
    }
    for (int k = 0; k < n_out; k++) {
        out[k] = tt_new(to[k].dtype, to[k].ndim, to[k].dims);
        size_t b = (size_t)tt_n(&out[k]) * ert_dtype_size(to[k].dtype);
        memset(out[k].data, 0xFF, b);
        vo[k].data = out[k].data;
        vo[k].dtype = out[k].dt;
        vo[k].ndim = out[k].nd;
        memcpy(vo[k].dims, out[k].dims, sizeof vo[k].dims);
        vo[k].n_elems = tt_n(&out[k]);
    }
    ert_kargs a = {.op = op, .params = &params, .n_in = n_in, .n_out = n_out, .in = vi, .out = vo,
                   .workspace_bytes = p.workspace_bytes, .pool = oh_pool, .choice = oh_choice};
    size_t extra = 0; /* with packing, the backend's scratch on top, as session create adds it */
    if (oh_pack && ert_cpu_backend.node_workspace && ert_cpu_backend.node_workspace(NULL, &a, &extra) == ERT_OK)
        a.workspace_bytes += extra;
    void *ws = NULL;
    if (a.workspace_bytes) {
        ws = aligned_alloc(64, ert_align_up(a.workspace_bytes, 64));
        memset(ws, 0xFF, a.workspace_bytes);
    }
    a.workspace = ws;
    void *pk = NULL;
    oh_was_packed = false;
    if (oh_pack && (a.packed_bytes = ert_cpu_backend.node_packed_bytes(&a)) > 0) {
        pk = aligned_alloc(64, ert_align_up(a.packed_bytes, 64));
        memset(pk, 0xFF, a.packed_bytes);
        a.packed = pk;
        st = ert_cpu_backend.bind_node(NULL, &a);
        oh_was_packed = a.packed != NULL;
        if (oh_pack == 2 && a.packed) memset(in[1].data, 0xFF, (size_t)tt_n(&in[1]) * sizeof(float));
    }
    if (st == ERT_OK) st = ert_cpu_run_node(&a);
    free(pk);
    free(ws);
    if (st != ERT_OK)
        for (int k = 0; k < n_out; k++) tt_free(&out[k]);
    return st;
}

/* Random dims: rank in [rmin, rmax], each dim in [1, dmax]. */
static inline int rand_dims(ert_test_rng *r, int rmin, int rmax, int dmax, int64_t *dims) {
    int nd = ert_test_int(r, rmin, rmax);
    for (int d = 0; d < nd; d++) dims[d] = ert_test_int(r, 1, dmax);
    return nd;
}

/* Offset of multi-index idx (in an output of rank n) into a tensor of rank
 * t->nd broadcast to it (numpy rules). */
static inline int64_t bcast_off(const tt *t, int n, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->nd; d++) {
        int64_t i = idx[n - t->nd + d];
        off = off * t->dims[d] + (t->dims[d] == 1 ? 0 : i);
    }
    return off;
}

/* Multi-index of flat index i in dims. */
static inline void unflat(int64_t i, int n, const int64_t *dims, int64_t *idx) {
    for (int d = n - 1; d >= 0; d--) {
        idx[d] = i % dims[d];
        i /= dims[d];
    }
}

static inline bool same_shape(const tt *t, int nd, const int64_t *dims) {
    if (t->nd != nd) return false;
    for (int d = 0; d < nd; d++)
        if (t->dims[d] != dims[d]) return false;
    return true;
}

#endif
