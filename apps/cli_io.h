/*
 * cli_io.h - tensors in and out of the `edgert` CLI: input files (.npy, ONNX
 * TensorProto .pb, JPEG/PPM/PGM images preprocessed for the model), shape
 * specs ("NAME=1x3x224x224"), comparison with a reference (--expect) and
 * top-k. Not part of the library; errors come back as text in `err`.
 */
#ifndef ERT_APPS_CLI_IO_H
#define ERT_APPS_CLI_IO_H

#include "edgert.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cli_tensor {
    const char *name; /* the model's input/output name it is matched to */
    const char *path;
    ert_dtype dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    void *data; /* malloc'd (npy, image) or ert_free'd (pb) */
    size_t bytes;
    int from_pb;
    int from_f64;          /* an '<f8' .npy narrowed to f32 */
    int is_image;          /* decoded and preprocessed image */
    const char *file_name; /* tensor name inside a .pb (in data), or NULL */
} cli_tensor;

/* How an image file becomes a model input (run -i x=photo.jpg). */
typedef struct cli_image_options {
    int w, h;              /* --size; 0: from the model input's dims */
    float mean[3], std[3]; /* per RGB channel, after scaling to [0, 1]; std 0 means 1 */
    int bgr, nhwc;
    int fit;               /* ert_fit */
} cli_image_options;

/* Kind of file from its first bytes: "npy", "jpeg", "pnm", "png", or NULL. */
const char *cli_file_kind(const char *path);

/* Read a .npy or .pb file into t (t->path set by the caller). */
int cli_tensor_load(ert_context *ctx, cli_tensor *t, char *err, size_t n);

/* Decode an image file (JPEG through the library's codec, PPM/PGM) and
 * preprocess it for a model input declared as `mi` (NCHW, or NHWC with
 * o->nhwc; 1 or 3 channels; f32 or f16): resize to o->w x o->h (or the
 * input's fixed H and W), scale to [0, 1], (v - mean) / std. The batch dim
 * (fixed by the model, else `batch`) repeats the image. Uses the library's
 * GPU preprocessor (ert_preprocessor_run) where it exists, else the same
 * arithmetic on the CPU (apps/camera/proc.c). *used_gpu says which. */
int cli_image_load(ert_context *ctx, const ert_tensor_info *mi, const cli_image_options *o, int batch,
                   cli_tensor *t, int *used_gpu, char *err, size_t n);

void cli_tensor_free(cli_tensor *t);

/* "1x3x224x224" or "1,3,224,224" -> dims; 0 on success. */
int cli_parse_dims(const char *s, int *ndim, int64_t *dims);
/* "a, b, c": the model's input names, for messages. */
const char *cli_input_names(const ert_model *m, char *buf, size_t n);
/* A --shape spec "NAME=DIMS" (NAME optional for a one-input model) checked
 * against the model (only dynamic dims may be set, each input once) and
 * appended to shapes[*n]; the name points into the model. 0 on success. */
int cli_shape_resolve(const ert_model *m, const char *spec, ert_input_shape *shapes, int *n, char *err, size_t n_err);
/* "0.485,0.456,0.406" (or one value for all three) -> v[3]; 0 on success. */
int cli_parse_floats3(const char *s, float *v);

/* Compare `got` (an output) with the reference `ref`: dtypes and shapes must
 * match; |got - ref| <= atol + rtol |ref| per element (NaN matches NaN, inf
 * the same inf; integers and bools compared exactly). Returns 1 on a match.
 * `msg` says where the worst element is. */
int cli_tensor_compare(const ert_tensor_info *got_info, const void *got, const cli_tensor *ref, double atol,
                       double rtol, char *msg, size_t n);

#endif
