/* Post-training quantization (ert_model_quantize), shared by
 * runtime/calib.c (activation statistics and thresholds),
 * runtime/passes/qdq_insert.c (Q/DQ insertion on a model) and runtime/quantize.c
 * (calibration runs, sensitivity, the entry point). */
#ifndef ERT_QUANT_INTERNAL_H
#define ERT_QUANT_INTERNAL_H
#include "runtime_internal.h"

/* aarch64 gcc 12 -O3 stops with an internal compiler error
 * (vect_transform_reduction) vectorising some max/sum reduction loops of
 * the quantizer: create-time code, which does not need the vectoriser. */
#if defined(__GNUC__) && !defined(__clang__)
#define ERT_NO_VECTORIZE __attribute__((optimize("no-tree-vectorize")))
#else
#define ERT_NO_VECTORIZE
#endif

#define ERT_CALIB_BINS 2048   /* histogram of |x| over [0, amax_seen] */
#define ERT_CALIB_LEVELS 128  /* int8 levels on one side of zero (TensorRT's entropy target) */

/* Statistics of one tensor over the calibration set. Pass 1 (minmax) sees
 * every sample, then pass 2 (hist) again with the bins fixed by pass 1's
 * max |x|, so the histogram never needs rescaling (order-independent and
 * deterministic). */
typedef struct ert_calib_stat {
    double min, max;          /* pass 1 */
    double absmax;            /* max(|min|, |max|) */
    double lo, hi;            /* the span the histograms cover: [min, max] unless ert_calib_clamp narrowed it */
    uint64_t hist[ERT_CALIB_BINS];  /* |x| over [0, max(|lo|, |hi|)] */
    uint64_t shist[ERT_CALIB_BINS]; /* x != 0 over [lo, hi] (values outside counted in the end bins) */
    uint64_t zeros;           /* exact zeros (after a ReLU, often most values), apart from shist */
    uint64_t n;               /* values in hist */
} ert_calib_stat;

void ert_calib_init(ert_calib_stat *s);
/* Pass 1 over n values. Returns the index of the first non-finite value, or -1. */
int64_t ert_calib_minmax(ert_calib_stat *s, const float *x, int64_t n);
/* Between the passes: the values below `floor` or above `ceil` give every
 * reader of the tensor the same result as floor or ceil themselves (a Relu
 * reads it: floor 0; a HardSwish: floor -3), so the histograms and every
 * method's range cover only [max(min, floor), min(max, ceil)] (min and max
 * stay the observed ones). */
void ert_calib_clamp(ert_calib_stat *s, double floor, double ceil);
/* Pass 2 over n values (after every pass-1 call). */
void ert_calib_hist(ert_calib_stat *s, const float *x, int64_t n);
/* Threshold amax for a method (percentile in (0, 100]); MINMAX needs only
 * pass 1. Never more than absmax; 0 only when every value was 0. */
double ert_calib_amax(const ert_calib_stat *s, ert_calib_method method, double percentile);
/* The clipping range [*lo, *hi] of a tensor: symmetric (-amax, amax), or
 * with asym the observed [min, max] clipped to the method's threshold on
 * |x| and widened to hold 0 (entropy then targets 256 levels when the
 * tensor is never negative, else 128). */
void ert_calib_range(const ert_calib_stat *s, ert_calib_method method, double percentile, bool asym, double *lo,
                     double *hi);
/* The range [*lo, *hi] (lo <= 0 <= hi) whose quantization to `levels`
 * steps (255: uint8 with a zero point, 254: int8 symmetric, lo = -hi) has
 * the least mean squared error over the signed histogram (bin centres, the
 * clipped values included), searched on a grid of clipping points. */
void ert_calib_mse(const ert_calib_stat *s, bool asym, double *lo, double *hi);
/* TensorRT's entropy threshold over a histogram of `bins` bins of width
 * `width` quantized to `levels` levels (exposed for tests). */
double ert_calib_entropy(const uint64_t *hist, int bins, double width, int levels);

/* ---- Q/DQ insertion (runtime/passes/qdq_insert.c) */

/* A layer the quantizer may quantize: Conv, Gemm or MatMul with a constant
 * second operand, or Add of two activations. */
bool ert_qdq_is_candidate(const ert_model *m, const ert_node *n);

/* What to build: per model tensor, the threshold of its activation Q/DQ
 * pair (amax[t] < 0: no pair); per node, whether it is quantized. */
typedef struct ert_qdq_plan {
    const double *amax;       /* n_tensors entries: the range's upper end */
    const double *amin;       /* NULL: activations int8 symmetric over [-amax, amax]; else uint8 with a zero
                                 point over [amin, amax] (amin <= 0 <= amax) */
    const bool *quantize;     /* n_nodes entries (candidates only) */
    bool per_tensor;          /* weight scales */
} ert_qdq_plan;

/* The tensors that get an activation Q/DQ pair when the nodes in
 * plan->quantize are quantized: want[t] = the tensor whose range t uses
 * (itself, or the input of a MaxPool/reshape that produced it), -1 = none. */
ert_status ert_qdq_tensors(const ert_model *m, const bool *quantize, int32_t *want);

/* The QuantizeLinear scale and zero point of an activation range: int8
 * symmetric (lo = -hi, zero point 0, scale hi / 127) or, with asym, uint8
 * (scale (hi - lo) / 255, zero point round(-lo / scale), as onnxruntime's
 * quantize_static computes them); scale 1 for a range of width 0. */
void ert_qdq_act_params(double lo, double hi, bool asym, float *scale, int32_t *zero_point);

/* A new model: m's graph with Q/DQ pairs for the plan (weights int8 with
 * f32 scales, biases int32). Weights are copied (the result owns them). */
ert_status ert_qdq_build(const ert_model *m, const ert_qdq_plan *plan, ert_model **out);

/* A new model with each inference BatchNorm folded into the Conv it alone
 * follows (new f32 filter and bias; other weights copied). */
ert_status ert_qdq_fold_bn(const ert_model *m, ert_model **out);

/* A new model sharing m's weight storage (m must outlive it), with the
 * given extra tensors listed as graph outputs after m's own. */
ert_status ert_qdq_with_outputs(const ert_model *m, const int32_t *extra, int n_extra, ert_model **out);

/* ---- cross-layer equalisation (runtime/passes/qdq_equalize.c) */

/* Conv a -> [Relu] -> Conv b, the tensor between them (b's input) `mid`,
 * `channels` of it; depthwise: b has one input channel per group. */
typedef struct ert_cle_pair {
    int a, b;
    int32_t mid;
    int64_t channels;
    bool depthwise;
} ert_cle_pair;

/* The pairs of m that equalisation may rescale (f32 weights owned by m and
 * read by that node alone; mid and A's output read by nothing else); *pairs
 * malloc'd (free it), in graph order. */
ert_status ert_qdq_cle_pairs(const ert_model *m, ert_cle_pair **pairs, int *n_pairs);
/* Rescale the pairs' weights in place (m owns them), r[p] holding max |mid|
 * per channel over the calibration set; returns the pairs rescaled. */
int ert_qdq_equalize(ert_model *m, const ert_cle_pair *pairs, int n_pairs, const double *const *r);

#endif /* ERT_QUANT_INTERNAL_H */
