/* GPU image preprocessing (edgert.h "GPU preprocessing"): one fused kernel
 * per frame, u8 RGB or YUYV -> bilinear resize (stretch, letterbox, centre
 * crop) -> v * scale, (v - mean) / std -> f32 NCHW or NHWC.
 *
 * It reproduces apps/camera/proc.c (cam_preprocess, cam_yuyv_to_rgb) exactly:
 * the same xform in double, source coordinates in double, interpolation in
 * f32 with explicit round-to-nearest ops (no FMA contraction), YUYV decoded
 * per sampled pixel with the same 16.16 integer arithmetic.
 *
 * Memory: create allocates everything (pinned frame staging, device frame,
 * device output, pinned output staging, one stream); run never allocates.
 * Output: f32, or f16 (round to nearest even, as ert_f32_to_f16 on the CPU)
 * with o->f16; to host memory (ert_preprocessor_run) or straight to GPU
 * memory (ert_preprocessor_run_device, e.g. a session's input). */
#include "cuda_internal.h"

#include <cuda_fp16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Geometry and normalisation of one frame, passed by value. */
typedef struct pre_params {
    int src_w, src_h, stride, yuyv;
    int W, H, nhwc, bgr, gray, f16;
    double sx0, sy0, fx, fy;
    int dx0, dy0, dx1, dy1;
    float pad, mul[3], add[3];
} pre_params;

__device__ static inline int clamp_u8(int v) { return v < 0 ? 0 : v > 255 ? 255 : v; }

/* Pixel (x, y) of the frame as RGB ints. */
__device__ static inline void fetch(const uint8_t *src, const pre_params &p, int x, int y, int rgb[3]) {
    const uint8_t *s = src + (size_t)y * p.stride;
    if (!p.yuyv) {
        rgb[0] = s[x * 3 + 0];
        rgb[1] = s[x * 3 + 1];
        rgb[2] = s[x * 3 + 2];
        return;
    }
    int pair = x & ~1;
    int Y = s[x * 2], U = s[pair * 2 + 1] - 128, V = s[pair * 2 + 3] - 128;
    int c = (Y - 16) * 76284;
    rgb[0] = clamp_u8((c + 104595 * V + 32768) >> 16);
    rgb[1] = clamp_u8((c - 25690 * U - 53281 * V + 32768) >> 16);
    rgb[2] = clamp_u8((c + 132186 * U + 32768) >> 16);
}

/* lerp as the CPU writes it: a + (b - a) * w, each op rounded on its own. */
__device__ static inline float lerp_rn(float a, float b, float w) { return __fadd_rn(a, __fmul_rn(__fsub_rn(b, a), w)); }

__device__ static inline void put(void *dst, size_t i, float v, int f16) {
    if (f16) ((__half *)dst)[i] = __float2half_rn(v);
    else ((float *)dst)[i] = v;
}

/* One thread per output pixel; dst (C, H, W) or (H, W, C), C = 3 (1 with gray). */
__global__ static void pre_kernel(const uint8_t *src, pre_params p, void *dst) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.W || y >= p.H) return;
    float v[3];
    if (y < p.dy0 || y >= p.dy1 || x < p.dx0 || x >= p.dx1) {
        v[0] = v[1] = v[2] = p.pad;
    } else {
        double syf = p.sy0 + (y - p.dy0 + 0.5) * p.fy - 0.5;
        if (syf < 0) syf = 0;
        if (syf > p.src_h - 1) syf = p.src_h - 1;
        int y0 = (int)syf, y1 = y0 + 1 < p.src_h ? y0 + 1 : y0;
        float wy = (float)(syf - y0);
        double sxf = p.sx0 + (x - p.dx0 + 0.5) * p.fx - 0.5;
        if (sxf < 0) sxf = 0;
        if (sxf > p.src_w - 1) sxf = p.src_w - 1;
        int x0 = (int)sxf, x1 = x0 + 1 < p.src_w ? x0 + 1 : x0;
        float wx = (float)(sxf - x0);
        int q00[3], q01[3], q10[3], q11[3];
        fetch(src, p, x0, y0, q00);
        fetch(src, p, x1, y0, q01);
        fetch(src, p, x0, y1, q10);
        fetch(src, p, x1, y1, q11);
        for (int c = 0; c < 3; c++) {
            float a = __fadd_rn((float)q00[c], __fmul_rn((float)(q01[c] - q00[c]), wx));
            float b = __fadd_rn((float)q10[c], __fmul_rn((float)(q11[c] - q10[c]), wx));
            v[c] = lerp_rn(a, b, wy);
        }
    }
    size_t plane = (size_t)p.W * p.H, i = (size_t)y * p.W + x;
    if (p.gray) {
        float lum = __fadd_rn(__fadd_rn(__fmul_rn(0.299f, v[0]), __fmul_rn(0.587f, v[1])), __fmul_rn(0.114f, v[2]));
        put(dst, i, __fadd_rn(__fmul_rn(lum, p.mul[0]), p.add[0]), p.f16);
        return;
    }
    for (int c = 0; c < 3; c++) {
        float val = __fadd_rn(__fmul_rn(v[p.bgr ? 2 - c : c], p.mul[c]), p.add[c]);
        put(dst, p.nhwc ? i * 3 + c : c * plane + i, val, p.f16);
    }
}

static cudaError_t pre_launch(const uint8_t *src, const pre_params *p, void *dst, cudaStream_t st) {
    if (p->W <= 0 || p->H <= 0 || p->src_w <= 0 || p->src_h <= 0) return cudaErrorInvalidValue;
    dim3 blk(32, 8), grid((unsigned)((p->W + 31) / 32), (unsigned)((p->H + 7) / 8));
    pre_kernel<<<grid, blk, 0, st>>>(src, *p, dst);
    return cudaGetLastError();
}

extern "C" {

struct ert_preprocessor {
    ert_context *ctx; /* the caller's: every message goes there */
    ert_preprocessor_options o;
    int max_w, max_h;
    size_t frame_cap, out_bytes;
    uint8_t *h_frame, *d_frame; /* pinned staging, device copy (frame_cap bytes) */
    void *d_out, *h_out;        /* device result, pinned staging (out_bytes) */
    cudaStream_t st;
};

void ert_preprocessor_free(ert_preprocessor *p) {
    if (!p) return;
    if (p->st) cudaStreamSynchronize(p->st);
    cudaFreeHost(p->h_frame);
    cudaFree(p->d_frame);
    cudaFree(p->d_out);
    cudaFreeHost(p->h_out);
    if (p->st) cudaStreamDestroy(p->st);
    free(p);
}

ert_status ert_preprocessor_create(ert_context *ctx, int max_w, int max_h, const ert_preprocessor_options *o,
                                   ert_preprocessor **out) {
    if (out) *out = NULL;
    if (!ctx || !o || !out) return ert_set_error(ctx, ERT_E_ARG, "ert_preprocessor_create: NULL argument");
    if (max_w <= 0 || max_h <= 0 || o->out_w <= 0 || o->out_h <= 0 || max_w > 16384 || max_h > 16384 ||
        o->out_w > 16384 || o->out_h > 16384)
        return ert_set_error(ctx, ERT_E_ARG,
                             "ert_preprocessor_create: frames up to %dx%d into %dx%d: every size must be 1..16384",
                             max_w, max_h, o->out_w, o->out_h);
    if ((unsigned)o->fit > ERT_FIT_CENTER_CROP)
        return ert_set_error(ctx, ERT_E_ARG, "ert_preprocessor_create: unknown fit %d", (int)o->fit);
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess || n_dev == 0) {
        cudaGetLastError();
        return ert_set_error(ctx, ERT_E_CUDA, "ert_preprocessor_create: no CUDA device (%s)",
                             e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    }
    ert_preprocessor *p = (ert_preprocessor *)calloc(1, sizeof *p);
    if (!p) return ert_set_error(ctx, ERT_E_NOMEM, "ert_preprocessor_create: out of memory");
    p->ctx = ctx;
    p->o = *o;
    p->max_w = max_w;
    p->max_h = max_h;
    p->frame_cap = (size_t)(max_w + 1) * max_h * 3; /* RGB: 3 bytes per pixel; YUYV: 4 per pair of pixels */
    p->out_bytes = (size_t)o->out_w * o->out_h * (o->gray ? 1 : 3) * (o->f16 ? 2 : 4);
    if (cudaStreamCreateWithFlags(&p->st, cudaStreamNonBlocking) != cudaSuccess ||
        cudaHostAlloc((void **)&p->h_frame, p->frame_cap, cudaHostAllocDefault) != cudaSuccess ||
        cudaMalloc((void **)&p->d_frame, p->frame_cap) != cudaSuccess ||
        cudaMalloc(&p->d_out, p->out_bytes) != cudaSuccess ||
        cudaHostAlloc(&p->h_out, p->out_bytes, cudaHostAllocDefault) != cudaSuccess) {
        e = cudaGetLastError();
        ert_preprocessor_free(p);
        return ert_set_error(ctx, ERT_E_CUDA, "ert_preprocessor_create: stream or %zu + %zu bytes of buffers: %s",
                             (size_t)(max_w + 1) * max_h * 3, (size_t)o->out_w * o->out_h * (o->gray ? 1 : 3) *
                             (o->f16 ? 2 : 4), cudaGetErrorString(e));
    }
    *out = p;
    return ERT_OK;
}

size_t ert_preprocessor_output_bytes(const ert_preprocessor *p) { return p ? p->out_bytes : 0; }

/* Stage the frame, enqueue the kernel writing to `out` (device memory). */
static ert_status pre_enqueue(ert_preprocessor *pp, const uint8_t *frame, int w, int h, size_t stride,
                              ert_pixel_format fmt, void *out) {
    if (!pp) return ERT_E_ARG;
    if (!frame || !out) return ert_set_error(pp->ctx, ERT_E_ARG, "ert_preprocessor_run: NULL frame or destination");
    if (w <= 0 || h <= 0 || w > pp->max_w || h > pp->max_h)
        return ert_set_error(pp->ctx, ERT_E_ARG, "ert_preprocessor_run: a %dx%d frame (this preprocessor: 1x1 to %dx%d)",
                             w, h, pp->max_w, pp->max_h);
    if (fmt != ERT_PIXEL_RGB && fmt != ERT_PIXEL_YUYV)
        return ert_set_error(pp->ctx, ERT_E_ARG, "ert_preprocessor_run: pixel format %d (RGB or YUYV only)", (int)fmt);
    /* Bytes a row needs: an odd YUYV row ends with a whole Y U Y V group. */
    size_t row = fmt == ERT_PIXEL_YUYV ? (size_t)(w + 1) / 2 * 4 : (size_t)w * 3;
    if (stride < row)
        return ert_set_error(pp->ctx, ERT_E_ARG, "ert_preprocessor_run: stride %zu under the %zu bytes of a row", stride,
                             row);
    const ert_preprocessor_options *o = &pp->o;
    /* The xform of cam_pre_xform (apps/camera/proc.c). */
    double sx0 = 0, sy0 = 0, sw = w, sh = h, dx0 = 0, dy0 = 0, dw = o->out_w, dh = o->out_h;
    double sx = (double)o->out_w / w, sy = (double)o->out_h / h;
    if (o->fit == ERT_FIT_LETTERBOX) {
        double s = sx < sy ? sx : sy;
        dw = floor(w * s + 0.5);
        dh = floor(h * s + 0.5);
        if (dw < 1) dw = 1;
        if (dh < 1) dh = 1;
        dx0 = floor((o->out_w - dw) / 2);
        dy0 = floor((o->out_h - dh) / 2);
    } else if (o->fit == ERT_FIT_CENTER_CROP) {
        double s = sx > sy ? sx : sy;
        sw = o->out_w / s;
        sh = o->out_h / s;
        sx0 = (w - sw) / 2;
        sy0 = (h - sh) / 2;
    }
    pre_params p;
    memset(&p, 0, sizeof p);
    p.src_w = w;
    p.src_h = h;
    p.stride = (int)row; /* packed in staging */
    p.yuyv = fmt == ERT_PIXEL_YUYV;
    p.W = o->out_w;
    p.H = o->out_h;
    p.nhwc = o->nhwc;
    p.bgr = o->bgr;
    p.gray = o->gray;
    p.f16 = o->f16 != 0;
    p.sx0 = sx0;
    p.sy0 = sy0;
    p.fx = sw / dw;
    p.fy = sh / dh;
    p.dx0 = (int)dx0;
    p.dy0 = (int)dy0;
    p.dx1 = (int)(dx0 + dw);
    p.dy1 = (int)(dy0 + dh);
    p.pad = o->pad;
    const float scale = o->scale != 0 ? o->scale : 1.0f / 255.0f;
    for (int c = 0; c < 3; c++) {
        int sc = o->gray ? 0 : o->bgr ? 2 - c : c;
        float sd = o->std[sc] != 0 ? o->std[sc] : 1.0f;
        p.mul[c] = scale / sd;
        p.add[c] = -o->mean[sc] / sd;
    }
    for (int y = 0; y < h; y++) memcpy(pp->h_frame + (size_t)y * row, frame + (size_t)y * stride, row);
    cudaError_t e = cudaMemcpyAsync(pp->d_frame, pp->h_frame, row * h, cudaMemcpyHostToDevice, pp->st);
    if (e == cudaSuccess) e = pre_launch(pp->d_frame, &p, out, pp->st);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ert_set_error(pp->ctx, ERT_E_CUDA, "ert_preprocessor_run: %s", cudaGetErrorString(e));
    }
    return ERT_OK;
}

ert_status ert_preprocessor_run(ert_preprocessor *pp, const uint8_t *frame, int w, int h, size_t stride,
                                ert_pixel_format fmt, void *dst) {
    if (!dst) return pp ? ert_set_error(pp->ctx, ERT_E_ARG, "ert_preprocessor_run: NULL destination") : ERT_E_ARG;
    ert_status st = pre_enqueue(pp, frame, w, h, stride, fmt, pp ? pp->d_out : NULL);
    if (st != ERT_OK) return st;
    cudaError_t e = cudaMemcpyAsync(pp->h_out, pp->d_out, pp->out_bytes, cudaMemcpyDeviceToHost, pp->st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(pp->st);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ert_set_error(pp->ctx, ERT_E_CUDA, "ert_preprocessor_run: %s", cudaGetErrorString(e));
    }
    memcpy(dst, pp->h_out, pp->out_bytes);
    return ERT_OK;
}

ert_status ert_preprocessor_run_device(ert_preprocessor *pp, const uint8_t *frame, int w, int h, size_t stride,
                                       ert_pixel_format fmt, void *dst_dev) {
    ert_status st = pre_enqueue(pp, frame, w, h, stride, fmt, dst_dev);
    if (st != ERT_OK) return st;
    cudaError_t e = cudaStreamSynchronize(pp->st);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ert_set_error(pp->ctx, ERT_E_CUDA, "ert_preprocessor_run_device: %s", cudaGetErrorString(e));
    }
    return ERT_OK;
}

} /* extern "C" */
