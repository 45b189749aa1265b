/* The op harness's cases (test_op_harness.c runs them): a case is one node
 * of op `op` on concrete random shapes, its operands (slots), attributes,
 * expected output and float64 reference. The case files only describe;
 * run() draws the data, runs every backend and the gradient check. */
#ifndef ERT_HARNESS_CASES_H
#define ERT_HARNESS_CASES_H
#include "op_harness.h" /* rand_dims, unflat */
#include "ref64.h"

#include <stdlib.h>
#include <string.h>

extern ert_test_rng rng;

enum { S_F32, S_BOOL, S_INT, S_CONST, S_OMIT }; /* S_INT: a graph input of integer dtype dt, values in [lo, hi] */
typedef struct slot {
    int kind;
    bool weight;      /* S_F32: a weight in the forward model too (filters, norm parameters) */
    int nd;
    int64_t dims[6];
    double lo, hi;    /* S_F32: uniform in [lo, hi) */
    double gap;       /* > 0: |v| >= gap; < 0: a permuted even grid (no near-ties) */
    double kink[4];   /* S_F32: values kept 0.05 away from these (n_kink of them) */
    int n_kink;
    bool grid;        /* S_F32: values from {-2, -1, 0, 1, 2} (Equal can be true) */
    ert_dtype dt;     /* S_CONST, S_INT */
    const void *data; /* S_CONST */
} slot;

#define MAXS 6
typedef struct hcase {
    const char *op;
    char what[96];
    slot s[MAXS];
    int ns;
    ert_attr at[8];
    int na;
    int n_out, y_out;  /* node outputs; the one that is checked */
    ert_dtype ydt;
    int ynd;
    int64_t yd[6];
    ert_ref r;         /* iv/fv set by the case; np/pd/pn filled from the S_F32/S_BOOL slots */
    ert_ref_fn ref;
    bool no_grad;      /* the op has a backward rule, but not for this case's types */
    bool bn_train;     /* gradient: BatchNorm with batch statistics (ref iv[3] = 0) */
    const char *no_half; /* not run on f16 sessions: why */
    double tol;        /* tolerance factor (1 when 0) */
} hcase;

int64_t nel(int nd, const int64_t *d);
/* Random dims (rank in [rmin, rmax], each in [1, dmax]) with at least two
 * elements: the trainer keeps one-element weights as constants. */
int rdims(int rmin, int rmax, int dmax, int64_t *d);
hcase *begin(hcase *c, const char *op);
slot *add_f32(hcase *c, int nd, const int64_t *d, double lo, double hi);
slot *add_const(hcase *c, ert_dtype dt, int nd, const int64_t *d, const void *data);
void set_y(hcase *c, ert_dtype dt, int nd, const int64_t *d);
/* Forward on every backend; gradient when the op has a backward rule. */
void run(hcase *c);
/* The gradient check alone (a case no session can express). */
void run_grad_only(hcase *c);

/* The case families (op_harness_eltwise.c, op_harness_nn.c, op_harness_tensor.c). */
void cases_unary(void);
void cases_binary(void);
void cases_reduce(void);
void cases_softmax(void);
void cases_norm(void);
void cases_conv(void);
void cases_gemm(void);
void cases_pool(void);
void cases_reshape(void);
void cases_transpose_slice_pad(void);
void cases_tile_expand(void);
void cases_concat_split_gather(void);
void cases_misc(void);
void cases_resize(void);
void cases_scatter(void);
void cases_quant(void);
void cases_attention(void); /* op_harness_nn.c */

#endif
