/* CPU pre/postprocessing (see proc.h). */
#define _POSIX_C_SOURCE 200809L
#include "proc.h"

#include "edgert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

cam_xform cam_pre_xform(int src_w, int src_h, const cam_pre_options *o) {
    cam_xform x = {0, 0, src_w, src_h, 0, 0, o->out_w, o->out_h};
    double sx = (double)o->out_w / src_w, sy = (double)o->out_h / src_h;
    if (o->fit == CAM_FIT_LETTERBOX) {
        double s = sx < sy ? sx : sy;
        x.dw = floor(src_w * s + 0.5);
        x.dh = floor(src_h * s + 0.5);
        if (x.dw < 1) x.dw = 1;
        if (x.dh < 1) x.dh = 1;
        x.dx0 = floor((o->out_w - x.dw) / 2);
        x.dy0 = floor((o->out_h - x.dh) / 2);
    } else if (o->fit == CAM_FIT_CENTER_CROP) {
        double s = sx > sy ? sx : sy;
        x.sw = o->out_w / s;
        x.sh = o->out_h / s;
        x.sx0 = (src_w - x.sw) / 2;
        x.sy0 = (src_h - x.sh) / 2;
    }
    return x;
}

static inline void put(void *dst, size_t i, float v, int f16) {
    if (f16) ((uint16_t *)dst)[i] = ert_f32_to_f16(v);
    else ((float *)dst)[i] = v;
}

void cam_preprocess(const uint8_t *rgb, int src_w, int src_h, size_t stride,
                    const cam_pre_options *o, void *dst, cam_xform *xf_out) {
    const int W = o->out_w, H = o->out_h;
    cam_xform xf = cam_pre_xform(src_w, src_h, o);
    if (xf_out) *xf_out = xf;
    const float scale = o->scale != 0 ? o->scale : 1.0f / 255.0f;
    float mul[3], add[3]; /* out = v * mul + add, per output channel */
    for (int c = 0; c < 3; c++) {
        int sc = o->gray ? 0 : o->bgr ? 2 - c : c; /* mean/std are given per RGB channel */
        float sd = o->std[sc] != 0 ? o->std[sc] : 1.0f;
        mul[c] = scale / sd;
        add[c] = -o->mean[sc] / sd;
    }
    const size_t plane = (size_t)W * H;
    const double fx = xf.sw / xf.dw, fy = xf.sh / xf.dh;
    const int dx0 = (int)xf.dx0, dy0 = (int)xf.dy0, dx1 = (int)(xf.dx0 + xf.dw), dy1 = (int)(xf.dy0 + xf.dh);
    for (int y = 0; y < H; y++) {
        int in_y = y >= dy0 && y < dy1;
        double syf = xf.sy0 + (y - dy0 + 0.5) * fy - 0.5;
        if (syf < 0) syf = 0;
        if (syf > src_h - 1) syf = src_h - 1;
        int y0 = (int)syf, y1 = y0 + 1 < src_h ? y0 + 1 : y0;
        float wy = (float)(syf - y0);
        const uint8_t *r0 = rgb + (size_t)y0 * stride, *r1 = rgb + (size_t)y1 * stride;
        for (int x = 0; x < W; x++) {
            float v[3];
            if (!in_y || x < dx0 || x >= dx1) {
                v[0] = v[1] = v[2] = o->pad;
            } else {
                double sxf = xf.sx0 + (x - dx0 + 0.5) * fx - 0.5;
                if (sxf < 0) sxf = 0;
                if (sxf > src_w - 1) sxf = src_w - 1;
                int x0 = (int)sxf, x1 = x0 + 1 < src_w ? x0 + 1 : x0;
                float wx = (float)(sxf - x0);
                for (int c = 0; c < 3; c++) {
                    float a = r0[x0 * 3 + c] + (r0[x1 * 3 + c] - r0[x0 * 3 + c]) * wx;
                    float b = r1[x0 * 3 + c] + (r1[x1 * 3 + c] - r1[x0 * 3 + c]) * wx;
                    v[c] = a + (b - a) * wy;
                }
            }
            if (o->gray) {
                float lum = 0.299f * v[0] + 0.587f * v[1] + 0.114f * v[2];
                put(dst, (size_t)y * W + x, lum * mul[0] + add[0], o->f16); /* 1 channel: NCHW = NHWC */
                continue;
            }
            for (int c = 0; c < 3; c++) {
                float val = v[o->bgr ? 2 - c : c] * mul[c] + add[c];
                put(dst, o->nhwc ? ((size_t)y * W + x) * 3 + c : c * plane + (size_t)y * W + x, val, o->f16);
            }
        }
    }
}

static inline uint8_t clamp_u8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

void cam_yuyv_to_rgb(const uint8_t *yuyv, int w, int h, size_t stride, uint8_t *rgb) {
    /* BT.601 limited range in 16.16 fixed point: R = 1.164(Y-16) + 1.596(V-128),
     * G = 1.164(Y-16) - 0.392(U-128) - 0.813(V-128), B = 1.164(Y-16) + 2.017(U-128).
     * Each pair of pixels shares U and V (odd widths: the last U/V serve one). */
    for (int y = 0; y < h; y++) {
        const uint8_t *s = yuyv + (size_t)y * stride;
        uint8_t *d = rgb + (size_t)y * w * 3;
        for (int x = 0; x < w; x++) {
            int pair = x & ~1;
            int Y = s[x * 2], U = s[pair * 2 + 1] - 128, V = s[pair * 2 + 3] - 128;
            int c = (Y - 16) * 76284;
            d[x * 3 + 0] = clamp_u8((c + 104595 * V + 32768) >> 16);
            d[x * 3 + 1] = clamp_u8((c - 25690 * U - 53281 * V + 32768) >> 16);
            d[x * 3 + 2] = clamp_u8((c + 132186 * U + 32768) >> 16);
        }
    }
}

int cam_topk(const float *logits, int n, int k, int softmax, int *idx, float *prob) {
    if (n <= 0 || k <= 0) return 0;
    if (k > n) k = n;
    float mx = logits[0];
    for (int i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    if (softmax)
        for (int i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    /* k is small: insertion into the sorted head. Ties keep the lower index. */
    int m = 0;
    for (int i = 0; i < n; i++) {
        float v = logits[i];
        if (m == k && !(v > logits[idx[k - 1]])) continue;
        int p = m < k ? m++ : k - 1;
        while (p > 0 && v > logits[idx[p - 1]]) { idx[p] = idx[p - 1]; p--; }
        idx[p] = i;
    }
    for (int i = 0; i < m; i++)
        prob[i] = softmax ? (float)(exp((double)logits[idx[i]] - mx) / sum) : logits[idx[i]];
    return m;
}

int cam_labels_load(const char *path, char ***out) {
    /* a regular file only: /dev/zero never ends (its lines grew until memory
     * ran out), a FIFO without a writer blocks the open */
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    char **l = NULL;
    int n = 0, cap = 0;
    while (fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\r\n");
        line[len] = 0;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nl = realloc(l, (size_t)cap * sizeof *nl);
            if (!nl) break;
            l = nl;
        }
        l[n] = strdup(line);
        if (!l[n]) break;
        n++;
    }
    fclose(f);
    *out = l;
    return n;
}

void cam_labels_free(char **labels, int n) {
    for (int i = 0; i < n; i++) free(labels[i]);
    free(labels);
}

static float iou(const cam_box *a, const cam_box *b) {
    float ix = fminf(a->x1, b->x1) - fmaxf(a->x0, b->x0), iy = fminf(a->y1, b->y1) - fmaxf(a->y0, b->y0);
    if (ix <= 0 || iy <= 0) return 0;
    float inter = ix * iy;
    float ua = (a->x1 - a->x0) * (a->y1 - a->y0) + (b->x1 - b->x0) * (b->y1 - b->y0) - inter;
    return ua > 0 ? inter / ua : 0;
}

static int by_score(const void *pa, const void *pb) {
    const cam_box *a = pa, *b = pb;
    return (a->score < b->score) - (a->score > b->score);
}

int cam_nms(cam_box *b, int n, float thr, int agnostic) {
    qsort(b, (size_t)n, sizeof *b, by_score);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        int keep = 1;
        for (int j = 0; j < kept && keep; j++)
            if ((agnostic || b[j].cls == b[i].cls) && iou(&b[j], &b[i]) > thr) keep = 0;
        if (keep) b[kept++] = b[i];
    }
    return kept;
}

static void to_frame(const cam_xform *xf, float *x, float *y) {
    *x = (float)(xf->sx0 + (*x - xf->dx0) * xf->sw / xf->dw);
    *y = (float)(xf->sy0 + (*y - xf->dy0) * xf->sh / xf->dh);
}

int cam_yolo_decode(const float *out, int rows, int cols, int transposed, float score_thr, float iou_thr,
                    const cam_xform *xf, cam_box *boxes, int max_boxes) {
    int n_anchor = transposed ? cols : rows, n_val = transposed ? rows : cols;
    int has_obj = !transposed, n_cls = n_val - 4 - has_obj;
    if (n_cls < 1) return 0;
    int n = 0;
    for (int a = 0; a < n_anchor; a++) {
#define V(k) (transposed ? out[(size_t)(k) * cols + a] : out[(size_t)a * cols + (k)])
        float obj = has_obj ? V(4) : 1.0f;
        if (obj < score_thr) continue;
        int best = 0;
        float bs = V(4 + has_obj);
        for (int c = 1; c < n_cls; c++)
            if (V(4 + has_obj + c) > bs) { bs = V(4 + has_obj + c); best = c; }
        float score = obj * bs;
        if (score < score_thr) continue;
        cam_box b = {V(0) - V(2) / 2, V(1) - V(3) / 2, V(0) + V(2) / 2, V(1) + V(3) / 2, score, best};
#undef V
        to_frame(xf, &b.x0, &b.y0);
        to_frame(xf, &b.x1, &b.y1);
        if (n < max_boxes) boxes[n++] = b;
        else { /* full: replace the weakest (NMS sorts later anyway) */
            int w = 0;
            for (int i = 1; i < n; i++) if (boxes[i].score < boxes[w].score) w = i;
            if (boxes[w].score < b.score) boxes[w] = b;
        }
    }
    return cam_nms(boxes, n, iou_thr, 0);
}

int cam_db_boxes(const float *prob, int w, int h, const cam_db_options *opt, const cam_xform *xf,
                 int *work, cam_box *boxes, int max_boxes) {
    cam_db_options o = opt ? *opt : (cam_db_options){0};
    if (o.thresh == 0) o.thresh = 0.3f;
    if (o.box_thresh == 0) o.box_thresh = 0.6f;
    if (o.unclip == 0) o.unclip = 1.5f;
    if (o.min_area == 0) o.min_area = 16;
    int *label = work, *stack = work + (size_t)w * h;
    for (size_t i = 0; i < (size_t)w * h; i++) label[i] = prob[i] > o.thresh ? -1 : 0;
    int n = 0, next = 1;
    for (int sy = 0; sy < h; sy++)
        for (int sx = 0; sx < w; sx++) {
            if (label[(size_t)sy * w + sx] != -1) continue;
            /* Flood fill (8-connected) with an explicit stack: every pixel is
             * pushed once (labelled when pushed), so w*h entries suffice. */
            int id = next++, top = 0, area = 0;
            int x0 = sx, x1 = sx, y0 = sy, y1 = sy;
            double psum = 0;
            label[(size_t)sy * w + sx] = id;
            stack[top++] = sy * w + sx;
            while (top) {
                int p = stack[--top], px = p % w, py = p / w;
                area++;
                psum += prob[p];
                if (px < x0) x0 = px;
                if (px > x1) x1 = px;
                if (py < y0) y0 = py;
                if (py > y1) y1 = py;
                for (int dy = -1; dy <= 1; dy++)
                    for (int dx = -1; dx <= 1; dx++) {
                        int qx = px + dx, qy = py + dy;
                        if (qx < 0 || qy < 0 || qx >= w || qy >= h) continue;
                        int q = qy * w + qx;
                        if (label[q] != -1) continue;
                        label[q] = id;
                        stack[top++] = q;
                    }
            }
            if (area < o.min_area) continue;
            float score = (float)(psum / area);
            if (score < o.box_thresh) continue;
            /* Box edges on pixel boundaries; PaddleOCR's unclip distance
             * d = area * ratio / perimeter of the (here axis-aligned) box. */
            float bw = (float)(x1 - x0 + 1), bh = (float)(y1 - y0 + 1);
            float d = bw * bh * o.unclip / (2 * (bw + bh));
            cam_box b = {x0 - d, y0 - d, x1 + 1 + d, y1 + 1 + d, score, 0};
            if (b.x0 < 0) b.x0 = 0;
            if (b.y0 < 0) b.y0 = 0;
            if (b.x1 > w) b.x1 = (float)w;
            if (b.y1 > h) b.y1 = (float)h;
            if (xf) {
                to_frame(xf, &b.x0, &b.y0);
                to_frame(xf, &b.x1, &b.y1);
            }
            if (n < max_boxes) boxes[n++] = b;
        }
    return n;
}
