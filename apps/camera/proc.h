/* CPU pre- and postprocessing for the camera pipeline. Plain C, no
 * allocation except where a function says so, never prints.
 *
 * Geometry: a frame (src_w x src_h) is mapped onto the network input
 * (out_w x out_h) by a cam_xform: source rectangle -> destination rectangle,
 * the rest padded. Boxes found in network coordinates go back to frame
 * coordinates through the same xform. */
#ifndef CAM_PROC_H
#define CAM_PROC_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ preprocess */

typedef enum cam_fit {
    CAM_FIT_STRETCH = 0, /* whole frame to the whole input (aspect not kept) */
    CAM_FIT_LETTERBOX,   /* whole frame, aspect kept, centred, padded */
    CAM_FIT_CENTER_CROP, /* input filled, aspect kept, frame's centre cropped */
} cam_fit;

typedef struct cam_xform {
    double sx0, sy0, sw, sh;  /* source rectangle (frame pixels) */
    double dx0, dy0, dw, dh;  /* where it lands in the input (input pixels) */
} cam_xform;

typedef struct cam_pre_options {
    int out_w, out_h;
    cam_fit fit;
    uint8_t pad;          /* letterbox fill, in pixel units (e.g. 114 or 0) */
    float scale;          /* v * scale, then (.. - mean) / std; 0: 1/255 */
    float mean[3], std[3];/* per RGB channel; std 0 means 1 */
    int nhwc;             /* 0: NCHW (C, H, W) planes; 1: NHWC */
    int bgr;              /* channel order of the output: BGR instead of RGB */
    int gray;             /* 1 output channel: luma 0.299 R + 0.587 G + 0.114 B
                           * (BT.601, as PIL's "L"), normalised with mean[0], std[0] */
    int f16;              /* dst holds IEEE half floats (uint16_t, round to nearest even) */
} cam_pre_options;

/* The xform for a frame of src_w x src_h under o. */
cam_xform cam_pre_xform(int src_w, int src_h, const cam_pre_options *o);

/* rgb (src_w x src_h, rows of stride bytes, RGB u8) -> dst, one image of
 * out_h x out_w x 3 floats (x 1 with o->gray; f32, or f16 with o->f16) in o's layout (for batch element b of an NCHW
 * input pass dst + b * 3 * out_h * out_w elements). Bilinear with half-pixel centres
 * (like OpenCV INTER_LINEAR / PyTorch align_corners=False), edges clamped. */
void cam_preprocess(const uint8_t *rgb, int src_w, int src_h, size_t stride,
                    const cam_pre_options *o, void *dst, cam_xform *xf_out);


/* YUYV 4:2:2 (BT.601 limited range, as UVC webcams send it) -> packed RGB. */
void cam_yuyv_to_rgb(const uint8_t *yuyv, int w, int h, size_t stride, uint8_t *rgb);

/* ------------------------------------------------------------ postprocess */

/* Softmax over n logits (when softmax is 1; else the values as given), the k
 * largest: idx[k] and prob[k], best first. Returns the number written. */
int cam_topk(const float *logits, int n, int k, int softmax, int *idx, float *prob);

/* Labels: one per line. Returns the count (0 on error); *out is malloc'd
 * (free with cam_labels_free). */
int cam_labels_load(const char *path, char ***out);
void cam_labels_free(char **labels, int n);

typedef struct cam_box {
    float x0, y0, x1, y1; /* corners, frame pixels */
    float score;
    int cls;
} cam_box;

/* Greedy NMS in place: boxes sorted by score, a box dropped when its IoU with
 * a kept box of the same class (any class if agnostic) exceeds iou. Returns
 * the number kept (the first ones). */
int cam_nms(cam_box *b, int n, float iou, int agnostic);

/* YOLO-style output -> boxes in frame coordinates (through xf), after a
 * score threshold and NMS. Layouts:
 *   rows=N, cols=5+C: (cx, cy, w, h, objectness, C class scores) per row (YOLOv5);
 *   rows=4+C, cols=N, transposed=1: (cx, cy, w, h, C class scores) per column (YOLOv8).
 * Coordinates in input pixels. Returns the number of boxes (<= max_boxes). */
int cam_yolo_decode(const float *out, int rows, int cols, int transposed, float score_thr, float iou,
                    const cam_xform *xf, cam_box *boxes, int max_boxes);

/* DB text detection (PaddleOCR det): probability map (h x w, input pixels)
 * -> axis-aligned boxes in frame coordinates: binarise at thresh, 8-connected
 * components, keep those with at least min_area pixels and a mean
 * probability >= box_thresh, grow each box by area*unclip/perimeter on every
 * side (PaddleOCR's unclip distance), clamp to the input, map through xf.
 * `work` must hold 2*w*h ints (component labels and the flood-fill stack).
 * Returns the number of boxes. */
typedef struct cam_db_options {
    float thresh;      /* 0: 0.3 */
    float box_thresh;  /* 0: 0.6 */
    float unclip;      /* 0: 1.5 */
    int min_area;      /* pixels; 0: 16 */
} cam_db_options;
int cam_db_boxes(const float *prob, int w, int h, const cam_db_options *o, const cam_xform *xf,
                 int *work, cam_box *boxes, int max_boxes);

#endif
