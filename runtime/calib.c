/*
 * Calibration statistics: per-tensor min/max and a histogram of |x|, and
 * the clipping threshold (amax, scale = amax / 127) each method picks.
 *
 * The histogram has ERT_CALIB_BINS bins over [0, absmax], absmax taken from
 * the first pass over the whole set, so no bin is ever merged or rescaled:
 * the result does not depend on the order of the samples, and the same set
 * gives the same thresholds bit for bit.
 *
 * Entropy (TensorRT's "entropy calibration", as in its 2017 GTC talk and
 * onnxruntime's CalibrationMethod.Entropy): for each candidate threshold
 * i in [LEVELS, BINS] bins, P = the first i bins with everything beyond
 * folded into bin i-1; Q = the same i bins without the clipped values,
 * merged into LEVELS groups and spread back evenly over the bins where P is
 * non-zero; both normalised and smoothed (onnxruntime's eps = 1e-4); pick
 * the i with the least KL(P || Q); amax = (i + 0.5) * width (as TensorRT).
 * The zero bin is first set to its neighbour's count (pytorch-quantization
 * does the same), so the zeros after a ReLU do not decide the threshold.
 * Entropy and percentile are one-sided (|x|); asymmetric ranges clip the
 * observed [min, max] to their threshold.
 *
 * MSE: a second, signed histogram over [lo, hi] (exact zeros counted apart,
 * since they quantize without error and a ReLU makes many); the range is the
 * grid point (clipping points at k/48 of the span on each side, or k/128 of
 * max |x| when symmetric) whose quantization has the least squared error
 * over the bin centres, clipped values included. Unlike percentile it needs
 * no parameter and, unlike entropy, it scores the levels the range really
 * gets (255 for uint8, 254 for int8 symmetric).
 */
#include "quant_internal.h"

#include <math.h>
#include <string.h>

void ert_calib_init(ert_calib_stat *s) {
    memset(s, 0, sizeof *s);
    s->min = s->lo = INFINITY;
    s->max = s->hi = -INFINITY;
}

int64_t ert_calib_minmax(ert_calib_stat *s, const float *x, int64_t n) {
    double lo = s->min, hi = s->max;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        if (!isfinite(v)) return i;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    s->min = s->lo = lo;
    s->max = s->hi = hi;
    s->absmax = fmax(fabs(lo), fabs(hi));
    if (!isfinite(s->absmax)) s->absmax = 0; /* no value seen yet */
    return -1;
}

void ert_calib_clamp(ert_calib_stat *s, double floor, double ceil) {
    if (!isfinite(s->min)) return; /* nothing seen */
    if (s->lo < floor) s->lo = floor < s->hi ? floor : s->hi;
    if (s->hi > ceil) s->hi = ceil > s->lo ? ceil : s->lo;
    s->absmax = fmax(fabs(s->lo), fabs(s->hi));
}

void ert_calib_hist(ert_calib_stat *s, const float *x, int64_t n) {
    if (!(s->absmax > 0)) { /* every value is 0 (or clamped to 0) */
        s->hist[0] += (uint64_t)n;
        s->zeros += (uint64_t)n;
        s->n += (uint64_t)n;
        return;
    }
    const double k = ERT_CALIB_BINS / s->absmax, span = s->hi - s->lo;
    const double ks = span > 0 ? ERT_CALIB_BINS / span : 0;
    for (int64_t i = 0; i < n; i++) {
        double b = fabs((double)x[i]) * k;
        int bi = b >= ERT_CALIB_BINS ? ERT_CALIB_BINS - 1 : (int)b;
        s->hist[bi]++;
        if (x[i] == 0) {
            s->zeros++;
            continue;
        }
        double c = ((double)x[i] - s->lo) * ks;
        int ci = c >= ERT_CALIB_BINS ? ERT_CALIB_BINS - 1 : c < 0 ? 0 : (int)c;
        s->shist[ci]++;
    }
    s->n += (uint64_t)n;
}

/* ORT's smooth_distribution on a normalised distribution: zero bins get
 * eps, taken evenly from the non-zero ones, so KL stays finite. */
static void smooth(double *d, int n) {
    const double eps = 1e-4;
    int nz = 0;
    for (int b = 0; b < n; b++) nz += d[b] == 0;
    if (nz == 0 || nz == n) return;
    double eps1 = eps * nz / (n - nz);
    for (int b = 0; b < n; b++) d[b] += d[b] == 0 ? eps : -eps1;
}

double ert_calib_entropy(const uint64_t *hist, int bins, double width, int levels) {
    if (bins <= levels || bins > ERT_CALIB_BINS) return bins * width;
    double p[ERT_CALIB_BINS], q[ERT_CALIB_BINS];
    uint64_t outside = 0;
    for (int b = levels; b < bins; b++) outside += hist[b];
    double best_kl = INFINITY;
    int best = bins;
    for (int i = levels; i <= bins; i++) {
        if (i > levels) outside -= hist[i - 1];
        /* P: the first i bins, the clipped values added to the last */
        double psum = 0, qsum = 0;
        for (int b = 0; b < i; b++) psum += p[b] = (double)hist[b];
        p[i - 1] += (double)outside;
        psum += (double)outside;
        if (psum == 0) continue;
        /* Q: the same i bins without the clipped values, merged into
         * `levels` groups of i / levels bins (the last takes the rest), each
         * spread evenly over its bins where P is non-zero */
        int merged = i / levels;
        for (int g = 0; g < levels; g++) {
            int lo = g * merged, hi = g == levels - 1 ? i : lo + merged;
            double gsum = 0;
            int nz = 0;
            for (int b = lo; b < hi; b++) {
                gsum += (double)hist[b];
                nz += p[b] > 0;
            }
            for (int b = lo; b < hi; b++) q[b] = p[b] > 0 && nz ? gsum / nz : 0;
            qsum += gsum;
        }
        if (qsum == 0) continue;
        for (int b = 0; b < i; b++) {
            p[b] /= psum;
            q[b] /= qsum;
        }
        smooth(p, i);
        smooth(q, i);
        double kl = 0;
        for (int b = 0; b < i; b++)
            if (p[b] > 0 && q[b] > 0) kl += p[b] * log(p[b] / q[b]);
        if (kl < best_kl) { /* strict: the smallest threshold wins ties */
            best_kl = kl;
            best = i;
        }
    }
    double amax = (best + 0.5) * width;
    return amax > bins * width ? bins * width : amax;
}

static double calib_amax(const ert_calib_stat *s, ert_calib_method method, double percentile, int levels) {
    if (!(s->absmax > 0)) return 0;
    double width = s->absmax / ERT_CALIB_BINS;
    if (method == ERT_CALIB_PERCENTILE && s->n > 0) {
        double want = (double)s->n * percentile / 100.0;
        uint64_t c = 0;
        for (int b = 0; b < ERT_CALIB_BINS; b++) {
            c += s->hist[b];
            if ((double)c >= want) return (b + 1) * width;
        }
        return s->absmax;
    }
    if (method == ERT_CALIB_ENTROPY && s->n > 0) {
        /* The first bin holds every exact zero: after a ReLU, most values.
         * Left in, that spike dominates both distributions and the method
         * picks thresholds far inside the data (measured: 4 points of top-1
         * lost on Fashion-MNIST); NVIDIA's pytorch-quantization sets it to
         * the second bin's count, and so do we. */
        uint64_t h[ERT_CALIB_BINS];
        memcpy(h, s->hist, sizeof h);
        h[0] = h[1];
        return ert_calib_entropy(h, ERT_CALIB_BINS, width, levels);
    }
    return s->absmax;
}

double ert_calib_amax(const ert_calib_stat *s, ert_calib_method method, double percentile) {
    return calib_amax(s, method, percentile, ERT_CALIB_LEVELS);
}

void ert_calib_range(const ert_calib_stat *s, ert_calib_method method, double percentile, bool asym, double *lo,
                     double *hi) {
    /* uint8 over a never-negative tensor: 256 levels on the one side the
     * histogram of |x| describes; with negatives the two sides share them */
    if (method == ERT_CALIB_MSE) {
        ert_calib_mse(s, asym, lo, hi);
        return;
    }
    const int levels = asym && s->lo >= 0 ? 2 * ERT_CALIB_LEVELS : ERT_CALIB_LEVELS;
    const double thr = calib_amax(s, method, percentile, levels);
    if (!asym) {
        *lo = -thr, *hi = thr;
        return;
    }
    *lo = s->lo < -thr ? -thr : s->lo;
    *hi = s->hi > thr ? thr : s->hi;
    if (*lo > 0) *lo = 0; /* zero stays exact: it is the zero point */
    if (*hi < 0) *hi = 0;
}

/* Squared error of quantizing the histogram to [a, b]: uint8 with a zero
 * point (asym, what ert_qdq_act_params writes) or int8 symmetric. Only the
 * non-empty bins (idx, n_idx) are visited. */
static double quant_sse(const ert_calib_stat *s, const int *idx, int n_idx, double a, double b, bool asym) {
    const double width = (s->hi - s->lo) / ERT_CALIB_BINS;
    double step, zp, qmin, qmax;
    if (asym) {
        step = (b - a) / 255;
        zp = nearbyint(-a / step);
        zp = zp < 0 ? 0 : zp > 255 ? 255 : zp;
        qmin = 0, qmax = 255;
    } else {
        step = b / 127;
        zp = 0, qmin = -127, qmax = 127;
    }
    double e = 0;
    for (int k = 0; k < n_idx; k++) {
        const int i = idx[k];
        const double c = s->lo + (i + 0.5) * width;
        double q = nearbyint(c / step) + zp;
        q = q < qmin ? qmin : q > qmax ? qmax : q;
        const double d = c - (q - zp) * step;
        e += (double)s->shist[i] * d * d;
    }
    return e; /* exact zeros quantize to the zero point: no error */
}

void ert_calib_mse(const ert_calib_stat *s, bool asym, double *lo, double *hi) {
    *lo = *hi = 0;
    if (!(s->absmax > 0) || !(s->hi > s->lo)) {
        *lo = s->lo < 0 ? s->lo : 0;
        *hi = s->hi > 0 ? s->hi : 0;
        if (!asym) *hi = s->absmax, *lo = -*hi;
        return;
    }
    int idx[ERT_CALIB_BINS], n_idx = 0;
    for (int i = 0; i < ERT_CALIB_BINS; i++)
        if (s->shist[i]) idx[n_idx++] = i;
    double best = INFINITY;
    if (!asym) {
        enum { G = 128 };
        for (int k = 1; k <= G; k++) {
            const double t = s->absmax * k / G, e = quant_sse(s, idx, n_idx, -t, t, false);
            if (e < best) best = e, *hi = t; /* strict: the smallest threshold wins ties */
        }
        /* then 1/16 steps between the neighbours of the best */
        const double c = *hi, d = s->absmax / G;
        for (int k = -15; k <= 15; k++) {
            const double t = c + d * k / 16;
            if (!(t > 0) || t > s->absmax) continue;
            const double e = quant_sse(s, idx, n_idx, -t, t, false);
            if (e < best) best = e, *hi = t;
        }
        *lo = -*hi;
        return;
    }
    enum { G = 48 };
    const double l0 = s->lo < 0 ? s->lo : 0, h0 = s->hi > 0 ? s->hi : 0;
    for (int j = l0 < 0 ? 0 : G; j <= G; j++) {      /* a = l0 * j / G */
        for (int k = h0 > 0 ? 0 : G; k <= G; k++) {  /* b = h0 * k / G */
            const double a = l0 * j / G, b = h0 * k / G;
            if (!(b - a > 0)) continue;
            const double e = quant_sse(s, idx, n_idx, a, b, true);
            if (e < best) best = e, *lo = a, *hi = b;
        }
    }
    /* then 1/8 steps between the neighbours of the best pair */
    const double a0 = *lo, b0 = *hi, da = -l0 / G, db = h0 / G;
    for (int j = -7; j <= 7; j++)
        for (int k = -7; k <= 7; k++) {
            const double a = a0 + da * j / 8, b = b0 + db * k / 8;
            if (a > 0 || a < l0 || b < 0 || b > h0 || !(b - a > 0)) continue;
            const double e = quant_sse(s, idx, n_idx, a, b, true);
            if (e < best) best = e, *lo = a, *hi = b;
        }
}
