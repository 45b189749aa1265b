/* NaN rules of the CPU kernels, for every kernel and fused epilogue.
 *
 * NaN propagates as in onnxruntime, PyTorch and numpy: Relu(NaN) = NaN,
 * Max/Min with a NaN operand = NaN, Clip(NaN) = NaN, a pooling/reduction
 * window holding a NaN gives NaN. fmaxf/fminf and _mm*_max_ps do NOT do this
 * (they return the other operand), so a fast path must use these forms or an
 * equivalent blend (compare, then select x where x != x). Written as
 * compare-and-select so gcc and clang vectorise them. */
#ifndef ERT_CPU_NAN_RULES_H
#define ERT_CPU_NAN_RULES_H

/* max(x, 0), NaN kept; -0.0 gives 0 */
static inline float ert_relu_nan(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
/* NaN if either operand is NaN */
static inline float ert_max_nan(float a, float b) { return (a > b || a != a) ? a : b; }
static inline float ert_min_nan(float a, float b) { return (a < b || a != a) ? a : b; }
/* min(max(x, lo), hi), NaN kept (the comparisons are false for NaN) */
static inline float ert_clamp_nan(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

#endif
