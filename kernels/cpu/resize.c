/* Resize: nearest (any dtype, by element size), N-D multilinear and cubic (f32).
 *
 * Steps: 1) for every dim, map each output coordinate to a source coordinate
 * with the coordinate transformation (params resize.coord, scale = out/in) and
 * store per-dim tables in the workspace: 4 source indices (int64) and their 4
 * weights (double) per output coordinate; nearest uses one tap, linear two,
 * cubic four. A dim whose every coordinate lands on one source element with
 * weight 1 (e.g. N and C) is marked single-tap. 2) walk the output row by
 * row: the outer dims give a short list of (source offset, weight) pairs
 * (product of the outer dims' tap counts, usually 1), and the last dim is
 * interpolated from its table.
 *
 * Cubic follows ONNX's reference: ratio in (0, 1] (an integer coordinate takes
 * the pixel on its left, ratio 1), taps at floor-1 .. floor+2 of that pixel,
 * clamped to the edge, Keys coefficients with A = cubic_coeff_a; with
 * exclude_outside, taps outside the input get weight 0 and the rest are
 * renormalised.
 *
 * tf_crop_and_resize maps output coordinate o to
 * start * (in - 1) + o * (end - start) * (in - 1) / (out - 1) (the box centre
 * when out is 1), as ONNX's reference does; a coordinate outside [0, in - 1]
 * is marked with source index -1, and an output element with a marked
 * coordinate in any dim is extrapolation_value (the reference's result too:
 * the interpolation weights of the other dims sum to 1). */
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

#define MAX_PAIRS (1 << (ERT_MAX_DIMS - 1)) /* linear: 2^7; cubic: 4^3 (prepare refuses more resized dims) */
#define NTAP 4

typedef struct rz_dim {
    int64_t *idx;  /* [od][NTAP] source indices */
    double *w;     /* [od][NTAP] weights */
    int ntap;      /* taps used: 1 (single-tap dim or nearest), 2 (linear), 4 (cubic) */
} rz_dim;

typedef struct rz_job {
    const ert_kargs *a;
    int nd;
    rz_dim t[ERT_MAX_DIMS];
    int64_t st[ERT_MAX_DIMS];
    size_t es;
    bool crop;     /* tf_crop_and_resize: f32, source index -1 marks extrapolation */
} rz_job;

/* Source coordinate of output coordinate o (ONNX coordinate_transformation_mode). */
static double src_coord(int coord, int64_t o, double scale, int64_t in, int64_t out) {
    double x = (double)o;
    switch (coord) {
    case 1: return x / scale;                                              /* asymmetric */
    case 2: {                                                              /* align_corners */
        /* the ONNX reference divides by in*scale - 1, not by the floored output size - 1 */
        double ow = scale * (double)in;
        return ow != 1 ? x * (double)(in - 1) / (ow - 1) : 0;
    }
    case 3: return out > 1 ? (x + 0.5) / scale - 0.5 : 0;                  /* pytorch_half_pixel */
    case 5: {                                                              /* half_pixel_symmetric */
        double adj = (double)out / (scale * (double)in), center = (double)in / 2;
        return center * (1 - adj) + (x + 0.5) / scale - 0.5;
    }
    default: return (x + 0.5) / scale - 0.5;                               /* half_pixel */
    }
}

static int64_t nearest(double x, int mode) {
    switch (mode) {
    case 0: return x == floor(x) + 0.5 ? (int64_t)floor(x) : (int64_t)llround(x); /* round_prefer_floor */
    case 1: return (int64_t)llround(x);                                           /* round_prefer_ceil (halves away from 0) */
    case 2: return (int64_t)floor(x);
    default: return (int64_t)ceil(x);
    }
}

/* Keys cubic coefficients for the taps at -1, 0, 1, 2 around ratio t in (0, 1]. */
static void cubic_coeffs(double t, double A, double *c) {
    double u = 1 - t;
    c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
    c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    c[2] = ((A + 2) * u - (A + 3)) * u * u + 1;
    c[3] = ((A * (u + 1) - 5 * A) * (u + 1) + 8 * A) * (u + 1) - 4 * A;
}

static void rz_rows(void *arg, int64_t r0, int64_t r1) {
    const rz_job *j = arg;
    const ert_kargs *a = j->a;
    const ert_tview *o = &a->out[0];
    int nd = j->nd;
    int64_t len = o->dims[nd - 1];
    const rz_dim *L = &j->t[nd - 1];
    bool nearest_mode = a->params->resize.mode == 0;
    float extra = a->params->resize.extrapolation; /* tf_crop_and_resize only (f32) */
    int64_t prev_off = -1; /* the source row of row r - 1, nearest only */
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[MAX_PAIRS];
        double wt[MAX_PAIRS];
        int np = 1;
        off[0] = 0;
        wt[0] = 1;
        int64_t rem = r;
        bool outside = false;
        for (int d = nd - 2; d >= 0; d--) {
            int64_t i = rem % o->dims[d];
            rem /= o->dims[d];
            const rz_dim *t = &j->t[d];
            const int64_t *ix = t->idx + i * NTAP;
            const double *w = t->w + i * NTAP;
            if (ix[0] < 0) {
                outside = true;
                break;
            }
            /* each pair splits into one pair per tap (tap 0 in place) */
            for (int tp = t->ntap - 1; tp >= 0; tp--)
                for (int k = 0; k < np; k++) {
                    off[tp * np + k] = off[k] + ix[tp] * j->st[d];
                    wt[tp * np + k] = wt[k] * w[tp];
                }
            np *= t->ntap;
        }
        if (outside) {
            float *y = (float *)o->data + r * len;
            for (int64_t i = 0; i < len; i++) y[i] = extra;
        } else if (!nearest_mode || j->crop) {
            const float *x = a->in[0].data;
            float *y = (float *)o->data + r * len;
            for (int64_t i = 0; i < len; i++) {
                const int64_t *ix = L->idx + i * NTAP;
                const double *w = L->w + i * NTAP;
                if (ix[0] < 0) {
                    y[i] = extra;
                    continue;
                }
                double acc = 0;
                for (int k = 0; k < np; k++) {
                    double v = 0;
                    for (int tp = 0; tp < L->ntap; tp++) v += w[tp] * (double)x[off[k] + ix[tp]];
                    acc += wt[k] * v;
                }
                y[i] = (float)acc;
            }
        } else {
            /* nearest: each output row reads one source row. Where that is the
             * previous output row's (every other row of a 2x upsample) the row
             * is a copy of it; else one element per column, a copy of constant
             * size per element size (a memcpy call per element was 1.5 ms of
             * YOLOv8n's 2x upsamples). */
            const char *x = a->in[0].data;
            const int64_t es = (int64_t)j->es;
            char *y = (char *)o->data + r * len * es;
            const int64_t *ix = L->idx;
            if (r > r0 && off[0] == prev_off) {
                memcpy(y, y - len * es, (size_t)(len * es));
                continue;
            }
            prev_off = off[0];
            const char *xr = x + off[0] * es;
#define RZ_COPY(ES)                                                                                                 \
    for (int64_t i = 0; i < len; i++) memcpy(y + i * (ES), xr + ix[i * NTAP] * (ES), (ES))
            switch (es) {
            case 4: RZ_COPY(4); break;
            case 2: RZ_COPY(2); break;
            case 1: RZ_COPY(1); break;
            case 8: RZ_COPY(8); break;
            default: RZ_COPY(es); break;
            }
#undef RZ_COPY
            continue;
        }
        prev_off = -1;
    }
}

/* Fill one dim's taps for output coordinate i (ix, w: NTAP entries each). */
static void rz_taps(const ert_resize_params *p, int d, int64_t i, int64_t in, int64_t od, int64_t *ix, double *w) {
    double c;
    for (int tp = 0; tp < NTAP; tp++) ix[tp] = 0, w[tp] = 0;
    if (p->coord == 4) { /* tf_crop_and_resize; same operation order as ONNX's reference */
        double s = p->roi_start[d], e = p->roi_end[d], m = (double)(in - 1);
        c = od == 1 ? (e - s) * m / 2 : (double)i * (e - s) * m / (double)(od - 1);
        c += s * m;
        if (!(c >= 0 && c <= m)) {
            ix[0] = -1; /* extrapolation_value; weights stay 0 */
            return;
        }
    } else {
        c = src_coord(p->coord, i, p->scale[d], in, od);
    }
    if (p->mode == 1) {
        c = c < 0 ? 0 : (c > (double)(in - 1) ? (double)(in - 1) : c);
        int64_t lo = (int64_t)floor(c);
        ix[0] = lo;
        ix[1] = lo + 1 < in ? lo + 1 : in - 1;
        w[1] = c - (double)lo;
        w[0] = 1 - w[1];
    } else if (p->mode == 2) {
        /* far-out coordinates only touch edge pixels: clamping first keeps the int conversion safe */
        c = c < -4 ? -4 : (c > (double)in + 4 ? (double)in + 4 : c);
        double base = ceil(c) - 1; /* the pixel left of c; ratio in (0, 1] */
        cubic_coeffs(c - base, p->cubic_a, w);
        double sum = 0;
        for (int tp = 0; tp < NTAP; tp++) {
            int64_t k = (int64_t)base - 1 + tp;
            if (p->exclude_outside && (k < 0 || k >= in)) w[tp] = 0;
            sum += w[tp];
            ix[tp] = k < 0 ? 0 : (k > in - 1 ? in - 1 : k);
        }
        if (p->exclude_outside && sum != 0)
            for (int tp = 0; tp < NTAP; tp++) w[tp] /= sum;
    } else {
        /* clamp first so the integer conversion cannot overflow */
        c = c < -1 ? -1 : (c > (double)in ? (double)in : c);
        int64_t k = nearest(c, p->nearest_mode);
        ix[0] = k < 0 ? 0 : (k > in - 1 ? in - 1 : k);
        w[0] = 1;
    }
}

ert_status ert_cpu_resize(const ert_kargs *a) {
    const ert_resize_params *p = &a->params->resize;
    const ert_tview *x = &a->in[0], *o = &a->out[0];
    rz_job j = {.a = a, .nd = o->ndim, .es = ert_dtype_size(x->dtype), .crop = p->coord == 4};
    if (j.es == 0 || ((p->mode != 0 || j.crop) && x->dtype != ERT_DTYPE_F32) || o->ndim < 1) return ERT_E_UNSUPPORTED;
    if (o->n_elems == 0) return ERT_OK;
    size_t need = 0;
    for (int d = 0; d < o->ndim; d++) need += (size_t)o->dims[d] * ERT_RESIZE_WS_PER_COORD;
    if (a->workspace_bytes < need || !a->workspace) return ERT_E_INTERNAL;
    char *ws = a->workspace;
    int64_t s = 1;
    for (int d = o->ndim - 1; d >= 0; d--) {
        j.st[d] = s;
        s *= x->dims[d];
    }
    int pairs = 1;
    for (int d = 0; d < o->ndim; d++) {
        rz_dim *t = &j.t[d];
        int64_t od = o->dims[d], in = x->dims[d];
        t->idx = (int64_t *)ws;
        t->w = (double *)(t->idx + od * NTAP);
        ws += (size_t)od * ERT_RESIZE_WS_PER_COORD;
        bool single = true; /* every coordinate: one tap of weight 1, the rest 0 */
        for (int64_t i = 0; i < od; i++) {
            int64_t *ix = t->idx + i * NTAP;
            double *w = t->w + i * NTAP;
            rz_taps(p, d, i, in, od, ix, w);
            int one = -1, nz = 0;
            for (int tp = 0; tp < NTAP; tp++)
                if (w[tp] != 0) nz++, one = tp;
            if (nz != 1 || w[one] != 1) {
                single = false;
                continue;
            }
            /* move the one tap to slot 0 so a single-tap dim reads slot 0 only */
            ix[0] = ix[one];
            w[0] = 1;
            for (int tp = 1; tp < NTAP; tp++) w[tp] = 0;
        }
        t->ntap = single || p->mode == 0 ? 1 : p->mode == 1 ? 2 : NTAP;
        if (d + 1 < o->ndim) pairs *= t->ntap;
    }
    if (pairs > MAX_PAIRS) return ERT_E_INTERNAL; /* prepare bounds it */
    int64_t len = o->dims[o->ndim - 1];
    ert_parallel_for(a->pool, o->n_elems / len, 4096 / len + 1, rz_rows, &j);
    return ERT_OK;
}
