/*
 * edgert.h - the one public header of edgert, an embedded deep-learning runtime.
 *
 * Usage (error handling shortened; every call returns an ert_status):
 *
 *     ert_context *ctx;
 *     ert_context_options co = {0};                 // zero = defaults
 *     ert_context_create(&co, &ctx);
 *
 *     ert_model *model;
 *     if (ert_model_load_file(ctx, "net.ert", &model) != ERT_OK)
 *         fprintf(stderr, "%s\n", ert_last_error(ctx));
 *
 *     ert_session_options so = {0};                 // CPU, batch from the model
 *     ert_memory_report mem;
 *     ert_session_plan(model, &so, &mem);           // exact arena bytes, by category
 *     so.arena = my_buffer; so.arena_bytes = mem.total_bytes;   // optional
 *
 *     ert_session *s;
 *     ert_session_create(model, &so, &s);           // all allocation happens here
 *     float *in;
 *     ert_session_input_data(s, 0, (void **)&in);  // write the frame in place
 *     ert_session_run(s);                           // never allocates
 *     const float *out;
 *     ert_session_output_data(s, 0, (const void **)&out);
 *
 *     ert_session_free(s); ert_model_free(model); ert_context_free(ctx);
 *
 * Conventions:
 * - Every fallible function returns ert_status (ERT_OK == 0). Results come back
 *   through out-parameters, which are left untouched on failure.
 * - ert_last_error(ctx) holds a detailed message about the last failure of any
 *   call made with that context (or a model/session/builder created from it).
 * - Ownership: a handle created by ert_X_create/ert_X_load is released with
 *   ert_X_free. Freeing NULL is a no-op. A model must outlive the sessions made
 *   from it; a context must outlive everything made from it.
 * - Threads: independent contexts share nothing. A context and everything made
 *   from it must be used by one thread at a time (the library's own worker
 *   threads are internal to a session).
 *   A session or trainer entered by a second thread while a call that uses
 *   its arena (run, set_input, get_output, sync_inputs; step, eval, profile,
 *   export, checkpoint save/load) is in progress returns ERT_E_STATE at once
 *   ("already running in another thread") and touches nothing: detected,
 *   not serialised. A sequence of calls (set_input, run, get_output) is not
 *   atomic: another thread's set_input may land in between.
 * - The library never prints, never exits, keeps no global mutable state.
 */
#ifndef EDGERT_H
#define EDGERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ERT_VERSION_MAJOR 0
#define ERT_VERSION_MINOR 1
#define ERT_VERSION_PATCH 0
#define ERT_VERSION_STRING "0.1.0"

/* Largest tensor rank supported. */
#define ERT_MAX_DIMS 8

/* ---------------------------------------------------------------- status */

/* Append-only. */
typedef enum ert_status {
    ERT_OK = 0,
    ERT_E_ARG = 1,         /* bad argument: NULL pointer, out of range index, bad option */
    ERT_E_FORMAT = 2,      /* malformed model/data file */
    ERT_E_UNSUPPORTED = 3, /* valid but not supported (op, dtype, attribute) */
    ERT_E_ARENA = 4,       /* arena too small; the message gives the bytes needed */
    ERT_E_NOMEM = 5,       /* allocation failed */
    ERT_E_IO = 6,          /* file system error */
    ERT_E_CUDA = 7,        /* CUDA / cuDNN / cuBLAS error or no usable GPU */
    ERT_E_SHAPE = 8,       /* shapes or dtypes do not agree */
    ERT_E_STATE = 9,       /* call not valid in the object's current state */
    ERT_E_INTERNAL = 10,   /* a bug in edgert: please report */
    ERT_E_NOT_FOUND = 11,  /* named item does not exist */
    ERT_E_NUMERIC = 12,    /* a NaN or infinity where finite values were asked for (ert_session_run_check_finite) */
} ert_status;

/* Static text naming a status ("ERT_E_ARENA: arena too small"). Never NULL. */
const char *ert_status_str(ert_status s);

/* Run-time version, "MAJOR.MINOR.PATCH". */
const char *ert_version(void);

/* ---------------------------------------------------------------- dtypes */

/* Append-only. Values are stored in .ert files. */
typedef enum ert_dtype {
    ERT_DTYPE_UNDEFINED = 0,
    ERT_DTYPE_F32 = 1,
    ERT_DTYPE_F16 = 2,
    ERT_DTYPE_BF16 = 3,
    ERT_DTYPE_I8 = 4,
    ERT_DTYPE_U8 = 5,
    ERT_DTYPE_I32 = 6,
    ERT_DTYPE_I64 = 7,
    ERT_DTYPE_BOOL = 8, /* one byte, 0 or 1 */
    ERT_DTYPE_COUNT
} ert_dtype;

/* Bytes per element (0 for UNDEFINED/out of range). */
size_t ert_dtype_size(ert_dtype dt);
/* Lower-case name: "f32", "f16", ... ("?" if unknown). */
const char *ert_dtype_name(ert_dtype dt);
/* IEEE half and bfloat16 <-> f32, for callers that fill f16/bf16 tensors
 * (e.g. an f16 model input). f32 -> half/bf16 rounds to nearest even;
 * overflow gives inf; NaN stays NaN. */
float ert_f16_to_f32(uint16_t h);
uint16_t ert_f32_to_f16(float f);
float ert_bf16_to_f32(uint16_t h);
uint16_t ert_f32_to_bf16(float f);

/* Name, dtype and shape of a graph input or output. A dim of -1 is dynamic
 * (fixed when a session is created). `name` points into the model or session
 * and lives as long as it. */
typedef struct ert_tensor_info {
    const char *name;
    ert_dtype dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
} ert_tensor_info;

/* ---------------------------------------------------------------- logging */

typedef enum ert_log_level {
    ERT_LOG_ERROR = 0,
    ERT_LOG_WARN = 1,
    ERT_LOG_INFO = 2,
    ERT_LOG_DEBUG = 3,
} ert_log_level;

/* Called synchronously from the thread that made the call. `msg` is valid only
 * during the call and has no trailing newline. */
typedef void (*ert_log_fn)(void *user, ert_log_level level, const char *msg);

/* ---------------------------------------------------------------- context */

typedef struct ert_context ert_context;

typedef struct ert_context_options {
    ert_log_fn log;         /* NULL: no logging */
    void *log_user;         /* passed to log */
    ert_log_level log_level;/* messages above this level are dropped (default ERROR=0: set INFO to see more) */
} ert_context_options;

/* opts may be NULL (defaults). Errors: ERT_E_ARG, ERT_E_NOMEM. */
ert_status ert_context_create(const ert_context_options *opts, ert_context **out);
void ert_context_free(ert_context *ctx);

/* Detailed message of the last failure of a call on this context or on any
 * object made from it; "" if none. Valid until the next failing call. */
const char *ert_last_error(const ert_context *ctx);

/* ---------------------------------------------------------------- model */

/* An immutable graph plus its weights. */
typedef struct ert_model ert_model;

/* Load a model file; the format is detected from its content (.ert magic, else
 * ONNX protobuf). A .ert file is mmap'd and its weights used in place (the file
 * stays mapped until ert_model_free). Errors: ERT_E_IO, ERT_E_FORMAT,
 * ERT_E_UNSUPPORTED, ERT_E_NOMEM. */
ert_status ert_model_load_file(ert_context *ctx, const char *path, ert_model **out);

/* Load from memory. The bytes are copied unless ERT_LOAD_NO_COPY is given, in
 * which case `data` must stay valid and unchanged until ert_model_free and must
 * be 64-byte aligned. ONNX external data is refused (no folder to read it
 * from). Errors: ERT_E_ARG (NULL, unaligned NO_COPY data), ERT_E_FORMAT,
 * ERT_E_UNSUPPORTED, ERT_E_NOMEM. */
#define ERT_LOAD_NO_COPY 1u
ert_status ert_model_load_memory(ert_context *ctx, const void *data, size_t size,
                                 unsigned flags, ert_model **out);

/* Save as .ert, atomically (see ert_file_writer_open: links followed, a
 * target that is not a regular file refused). On failure PATH is untouched.
 * Errors: ERT_E_IO, ERT_E_FORMAT (too large for the format), ERT_E_NOMEM. */
ert_status ert_model_save(const ert_model *model, const char *path);

/* Options of ert_model_save_opts. Zero-initialised: same as ert_model_save. */
typedef struct ert_save_options {
    /* ERT_DTYPE_UNDEFINED: weights as the model holds them. ERT_DTYPE_F16: f32
     * weights of at least 16 elements whose values all fit f16's range are
     * stored as f16 (rounded to nearest even), which about halves a
     * conv net's file; smaller ones (biases of few channels, scalars such as
     * Resize scales, Clip bounds, Div constants) stay f32 and exact. Sessions
     * widen f16 weights to f32 on the CPU. Other values: ERT_E_UNSUPPORTED. */
    ert_dtype weights_dtype;
} ert_save_options;

/* ert_model_save with options (opts NULL: defaults). The model is not changed;
 * converted weights are held in memory only while the file is written.
 * Errors: as ert_model_save, ERT_E_UNSUPPORTED (weights_dtype), ERT_E_NOMEM. */
ert_status ert_model_save_opts(const ert_model *model, const char *path, const ert_save_options *opts);

/* ------------------------------------------------------------------ files */

/* Atomic file writes: every file the library writes (.ert models,
 * checkpoints, ONNX exports) goes through these, and so do the apps.
 * Semantics, for a target PATH:
 * - Symbolic links are followed (at most 40) and the real file is replaced
 *   in its own folder; the links stay links.
 * - If the real file exists and is not a regular file (character or block
 *   device, FIFO, socket, directory), nothing is written: ERT_E_IO, and the
 *   message says what it is.
 * - The new contents go to a file nobody can see (O_TMPFILE) or, where the
 *   file system lacks it, to PATH.tmp.XXXXXX; commit fsyncs it, renames it
 *   over the real file and fsyncs the folder. A crash or kill at any moment
 *   leaves the old file or the new one, never a mix; temporary files left by
 *   a killed writer are removed by the next save of the same file.
 * - The mode of a replaced file is kept; a new file gets 0644.
 * Not for use from `run`/`step` (it allocates). One writer is used by one
 * thread at a time; ctx (may be NULL) receives the messages. */
typedef struct ert_file_writer ert_file_writer;

/* Start writing PATH (nothing visible changes until commit).
 * Errors: ERT_E_ARG (empty path), ERT_E_IO (not a regular file, missing or
 * unwritable folder, too many links), ERT_E_NOMEM. */
ert_status ert_file_writer_open(ert_context *ctx, const char *path, ert_file_writer **out);
/* Append n bytes. Errors: ERT_E_IO (disk full...: commit will then refuse). */
ert_status ert_file_writer_write(ert_file_writer *w, const void *data, size_t n);
/* Write n bytes at `offset` (e.g. a header patched after the body); the
 * append position is unchanged. Errors: ERT_E_IO. */
ert_status ert_file_writer_write_at(ert_file_writer *w, uint64_t offset, const void *data, size_t n);
/* fsync, replace the real file atomically, fsync its folder; frees w, also
 * on failure (then the old file is untouched and no temporary file is left).
 * Errors: ERT_E_IO (an earlier write failed, fsync, rename). */
ert_status ert_file_writer_commit(ert_file_writer *w);
/* Discard what was written and free w (NULL: no-op). The target is untouched. */
void ert_file_writer_abort(ert_file_writer *w);
/* open + write + commit of one buffer. Errors: as the three. */
ert_status ert_file_write_atomic(ert_context *ctx, const char *path, const void *data, size_t n);

void ert_model_free(ert_model *model);

int ert_model_n_inputs(const ert_model *model);
int ert_model_n_outputs(const ert_model *model);
/* Errors: ERT_E_ARG (bad index / NULL). */
ert_status ert_model_input_info(const ert_model *model, int i, ert_tensor_info *out);
ert_status ert_model_output_info(const ert_model *model, int i, ert_tensor_info *out);
/* Number of nodes and the op name ("Conv") of node i (NULL if out of range). */
int ert_model_n_nodes(const ert_model *model);
const char *ert_model_node_op(const ert_model *model, int i);
const char *ert_model_node_name(const ert_model *model, int i);
/* Total number of elements in all weight tensors. */
int64_t ert_model_n_params(const ert_model *model);

/* Read an ONNX TensorProto file (.pb, the format of ONNX test data). On
 * success *data (malloc'd: release with ert_free) holds the elements, C order,
 * followed by the NUL-terminated name that info->name points to; *bytes is the
 * element bytes. Errors: ERT_E_IO, ERT_E_FORMAT, ERT_E_UNSUPPORTED (dtype). */
ert_status ert_tensor_load_pb(ert_context *ctx, const char *path, ert_tensor_info *info,
                              void **data, size_t *bytes);
/* Release memory the library handed to the caller. */
void ert_free(void *p);

/* ---------------------------------------------------------------- builder */

/* Build a graph in C, without a file (ggml-style). Tensors are referred to by
 * the int32 ids the builder hands out. Ops use ONNX names and ONNX semantics of
 * the newest opset (e.g. Reshape's shape is an input tensor, Split's sizes are
 * an input). Attributes not given take ONNX defaults. */
typedef struct ert_builder ert_builder;

typedef enum ert_attr_type {
    ERT_ATTR_INT = 1,
    ERT_ATTR_FLOAT = 2,
    ERT_ATTR_INTS = 3,
    ERT_ATTR_FLOATS = 4,
    ERT_ATTR_STRING = 5,
} ert_attr_type;

/* One attribute. Arrays are copied by the builder. */
typedef struct ert_attr {
    const char *name;
    ert_attr_type type;
    int64_t i;             /* INT */
    float f;               /* FLOAT */
    const int64_t *ints;   /* INTS, n entries */
    const float *floats;   /* FLOATS, n entries */
    int n;
    const char *s;         /* STRING, NUL-terminated */
} ert_attr;

/* Shorthands for attribute literals. */
#define ERT_ATTR_I(nm, v) ((ert_attr){.name = (nm), .type = ERT_ATTR_INT, .i = (v)})
#define ERT_ATTR_F(nm, v) ((ert_attr){.name = (nm), .type = ERT_ATTR_FLOAT, .f = (v)})
#define ERT_ATTR_IS(nm, p, cnt) ((ert_attr){.name = (nm), .type = ERT_ATTR_INTS, .ints = (p), .n = (cnt)})
#define ERT_ATTR_FS(nm, p, cnt) ((ert_attr){.name = (nm), .type = ERT_ATTR_FLOATS, .floats = (p), .n = (cnt)})
#define ERT_ATTR_S(nm, str) ((ert_attr){.name = (nm), .type = ERT_ATTR_STRING, .s = (str)})

/* A builder assembles a model in memory, node by node (the C API's
 * counterpart of an ONNX file). It belongs to ctx and is used by one thread
 * at a time. Release with ert_builder_free (after or instead of finish).
 * Errors (every builder call): ERT_E_ARG (NULL, bad id, duplicate name),
 * ERT_E_NOMEM; ert_builder_create: ERT_E_NOMEM. */
ert_status ert_builder_create(ert_context *ctx, ert_builder **out);
void ert_builder_free(ert_builder *b);

/* A graph input. dims[k] == -1 marks a dynamic dim. Names must be unique.
 * Errors: ERT_E_ARG (name taken, rank > ERT_MAX_DIMS, dims < -1). */
ert_status ert_builder_input(ert_builder *b, const char *name, ert_dtype dtype,
                             int ndim, const int64_t *dims, int32_t *id);
/* A constant tensor (weight). `data` (ert_dtype_size(dtype) * product(dims)
 * bytes, C order, little-endian) is copied. name may be NULL (one is made). */
ert_status ert_builder_weight(ert_builder *b, const char *name, ert_dtype dtype,
                              int ndim, const int64_t *dims, const void *data,
                              int32_t *id);
/* A node. `op` is the ONNX op type ("Conv"). An input id of -1 is an omitted
 * optional input. The n_out output ids are returned in outputs. name may be
 * NULL. Errors: ERT_E_UNSUPPORTED (unknown op), ERT_E_ARG (bad id/count). */
ert_status ert_builder_node(ert_builder *b, const char *op, const char *name,
                            const int32_t *inputs, int n_in,
                            const ert_attr *attrs, int n_attrs,
                            int32_t *outputs, int n_out);
/* Mark tensor `id` as a graph output named `name` (NULL keeps its name).
 * Errors: ERT_E_ARG (unknown id, name taken). */
ert_status ert_builder_output(ert_builder *b, int32_t id, const char *name);
/* Validate and turn the graph into a model; the builder is then empty and may
 * be freed. Errors: ERT_E_FORMAT (cycles, undefined tensors), ERT_E_SHAPE. */
ert_status ert_builder_finish(ert_builder *b, ert_model **out);

/* Convenience wrappers over ert_builder_node for the most common layers. */
/* y = Conv(x, w, b): w is (Cout, Cin/group, kh, kw); bias may be -1. pads are
 * (top, left, bottom, right). */
ert_status ert_builder_conv2d(ert_builder *b, int32_t x, int32_t w, int32_t bias,
                              int stride, int pad, int dilation, int group, int32_t *y);
/* y = x @ w^T + bias (Gemm transB=1): w is (out, in). */
ert_status ert_builder_linear(ert_builder *b, int32_t x, int32_t w, int32_t bias, int32_t *y);
/* One-input, one-output op without attributes ("Relu", "Sigmoid", "Flatten"...). */
ert_status ert_builder_unary(ert_builder *b, const char *op, int32_t x, int32_t *y);
/* Two-input, one-output op without attributes ("Add", "Mul", "MatMul"...). */
ert_status ert_builder_binary(ert_builder *b, const char *op, int32_t a, int32_t c, int32_t *y);
/* y = MaxPool(x) with a square kernel, stride and pad. */
ert_status ert_builder_maxpool2d(ert_builder *b, int32_t x, int kernel, int stride, int pad, int32_t *y);
/* The wrappers' errors: as ert_builder_node. */

/* ---------------------------------------------------------------- session */

typedef struct ert_session ert_session;

/* Append-only. */
typedef enum ert_device {
    ERT_DEVICE_CPU = 0,
    ERT_DEVICE_CUDA = 1,
    ERT_DEVICE_AUTO = 2, /* CUDA when available, else CPU */
} ert_device;

/* Where a CUDA session puts its arena (ignored by the CPU backend). Append-only.
 * - AUTO: DEVICE on a discrete GPU; UNIFIED on an integrated GPU (Jetson), so
 *   the CPU reads and writes inputs/outputs in place, without copies.
 * - DEVICE: arena in device memory (cudaMalloc); inputs/outputs are staged
 *   through a pinned host mirror with asynchronous copies inside each run.
 * - UNIFIED: arena in managed memory (cudaMallocManaged); the pointers
 *   ert_session_input_data/output_data give are the arena itself. Where the
 *   GPU has no concurrent managed access (Jetson), the arena is attached to
 *   the session's stream, so the CPU may touch it only between runs.
 * - MAPPED: arena in pinned, mapped host memory (cudaHostAlloc Mapped); the
 *   GPU reads it over the bus on a discrete GPU (slower than DEVICE), in
 *   place on an integrated one. */
typedef enum ert_placement {
    ERT_PLACEMENT_AUTO = 0,
    ERT_PLACEMENT_DEVICE = 1,
    ERT_PLACEMENT_UNIFIED = 2,
    ERT_PLACEMENT_MAPPED = 3,
} ert_placement;

/* Fixes one dynamic input's shape at session create. */
typedef struct ert_input_shape {
    const char *name;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
} ert_input_shape;

/* Session flags. */
#define ERT_SESSION_NO_FOLD 1u   /* skip BatchNorm folding (constant sub-graphs are always folded: shapes need them) */
#define ERT_SESSION_NO_FUSE 2u   /* skip op fusion (Q/DQ patterns then run as DQ -> float op -> Q) */
/* CUDA sessions: the caller writes the inputs on the GPU (at
 * ert_session_input_device, e.g. with ert_preprocessor_run_device) before
 * each run, so run copies no input from host memory. The host view of the
 * inputs (ert_session_input_data) is then not read by run. No effect on CPU
 * sessions and where the arena is host-visible (UNIFIED/MAPPED: no copies). */
#define ERT_SESSION_DEVICE_INPUTS 4u
/* CUDA sessions: run leaves the outputs on the GPU (at
 * ert_session_output_device) and copies none of them to host memory, for a
 * consumer that reads them there (a GPU post-process, a DLPack view). The
 * host view is then filled on demand: ert_session_get_output and
 * ert_session_output_data copy the output down when called (synchronously;
 * they cost a copy each call). No effect on CPU sessions and where the arena
 * is host-visible (UNIFIED/MAPPED: no copies). */
#define ERT_SESSION_DEVICE_OUTPUTS 4096u
/* CUDA sessions with precision F16/BF16 keep convolution activations
 * channels-last (NHWC), which cuDNN's tensor-core kernels read directly, and
 * convert at the edges of those regions, when cuDNN's measurements at create
 * say the graph's convolutions run faster that way. NO_NHWC keeps them NCHW,
 * NHWC makes them channels-last without measuring. The int8 nodes of
 * quantized models (2-D QLinearConv, ert.QLinearAdd, ert.QLut, int8 MaxPool,
 * per-tensor Q/DQ) run channels-last on CUDA in every precision, f32 too,
 * where the int8 tensor-core convs read 16 channels of a tap at once
 * (NO_NHWC or NO_PACK keeps them NCHW). No effect elsewhere. */
#define ERT_SESSION_NO_NHWC 8u
#define ERT_SESSION_NHWC 16u
/* CUDA f16/bf16 sessions: channels-last 1x1 stride-1 convolutions run as one
 * cuBLASLt GEMM (bias, ReLU and the residual in its epilogue) instead of
 * cuDNN, and the NHWC/NCHW measurement counts the GEMM's time. Off by
 * default: it made some models slower (measurements: docs/architecture.md,
 * "Measured choices"). Channels-last patchify convolutions (kernel equal to
 * stride, no padding: ViT patch embeddings, ConvNeXt downsampling) run as
 * such a GEMM on their gathered patches whenever create measures it faster
 * than cuDNN; with this flag, always. */
#define ERT_SESSION_GEMM_1X1 32u
/* CUDA f16/bf16 sessions: a channels-last convolution followed by bias,
 * residual Add and ReLU/Clip runs as one cuDNN operation graph (the epilogue
 * fused into the conv kernel) when that measures faster at create than
 * cuDNN's conv plus edgert's epilogue kernel. NO_CONV_GRAPH never uses the
 * graph; CONV_GRAPH uses it whenever cuDNN runs it. */
#define ERT_SESSION_NO_CONV_GRAPH 64u
#define ERT_SESSION_CONV_GRAPH 128u
/* CPU sessions: the filters of convolutions and the constant B of Gemm /
 * MatMul are copied once at create into the arena's weights region in the
 * layout the SGEMM micro-kernel reads (a second copy of those weights:
 * about the model's size again, in weights_bytes), so run stops re-packing
 * them. NO_PACK keeps the arena at the model-only size and packs per run.
 * CUDA sessions: the 3x3, 5x5 and 7x7 filters of channels-last depthwise
 * convolutions get a (KH, KW, C) copy there (a few KiB each) that their
 * kernel reads; NO_PACK runs them on the filter as the model has it (a
 * slower kernel), and int8 convs on the CUDA cores (NCHW) instead of the
 * int8 tensor cores. By default an int8 conv filter the tensor cores run is
 * held on the device only in their packing (w - zero point, int8, plus a sum
 * per row: the arena keeps no second copy, so int8 weights are about a
 * quarter of f32's); if such a conv ever failed its create-time check
 * against the CUDA-core kernel, create fails naming it, and NO_PACK runs it. */
#define ERT_SESSION_NO_PACK 2048u
/* CUDA f16/bf16 sessions: a MatMul + bias + GELU (a transformer's first MLP
 * Linear) may run as one cuBLASLt GEMM whose epilogue computes GELU in its
 * tanh form, 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), when create
 * measures that faster than the GEMM plus edgert's exact (erf) GELU kernel.
 * The two forms differ by at most 4.8e-4 absolute (at x = -2.70), below
 * the rounding of the f16 GEMM feeding it on every zoo model measured
 * (bench/RESULTS.md). EXACT_GELU keeps the erf form everywhere. f32
 * sessions and the CPU backend always compute the erf form. */
#define ERT_SESSION_EXACT_GELU 8192u
/* CPU sessions of batch N > 1: run every node over the whole batch. By
 * default runs of consecutive wide-map nodes go image by image (batch strips:
 * a node's output slice is still in cache when the next node reads it, and
 * their internal tensors are planned at one image, so the arena is smaller);
 * the results are the same bits either way. No effect elsewhere. */
#define ERT_SESSION_NO_STRIPS 16384u
/* CUDA f32 sessions: convolutions only by cuDNN's sums-of-products
 * algorithms. By default an f32 session also measures cuDNN's FFT and
 * Winograd algorithms at create and takes one where it is the fastest (as
 * PyTorch with cudnn.benchmark does: ResNet-style 3x3 convs). Those
 * transform an input tile with +-1 coefficients, so an +-inf input gives
 * NaN over its tile (inf - inf) where the CPU, and this flag, give +-inf,
 * and a NaN input spreads to the tile's outputs; finite inputs give the
 * same values within f32 rounding. Set it where non-finite inputs must
 * propagate exactly as on the CPU. f16/bf16 sessions never take them. */
#define ERT_SESSION_NO_CONV_TRANSFORMS 256u

/* How a CUDA session chooses its algorithms at create. Append-only. */
typedef enum ert_create_mode {
    ERT_CREATE_TUNED = 0,   /* measure: cudnnFind per conv shape, cuBLASLt's candidates and cuDNN's fused
                               plans timed, conv layouts timed (seconds on a large model, once per
                               process unless a plan cache has the answers) */
    ERT_CREATE_FAST = 1,    /* heuristics only, nothing timed: cuDNN's heuristic order (the first
                               algorithm that runs within the workspace cap), cuBLASLt's first
                               heuristic answer, no fused cuDNN graph (conv + our epilogue kernel),
                               channels-last as the heuristics say. Same results within tolerance,
                               possibly slower kernels. The CPU backend ignores it. */
} ert_create_mode;

typedef struct ert_session_options {
    ert_device device;      /* default CPU */
    int batch;              /* replaces a dynamic leading dim of every input; 0: 1 */
    int n_threads;          /* CPU worker threads incl. the caller; 0: 1 */
    unsigned flags;         /* ERT_SESSION_* */
    const ert_input_shape *input_shapes; /* optional per-input shapes */
    int n_input_shapes;
    void *arena;            /* optional caller buffer, 64-byte aligned */
    size_t arena_bytes;     /* its size */
    ert_placement placement;/* CUDA memory placement (default AUTO); a caller arena must then be
                               memory of that kind (device, managed or mapped pinned) */
    ert_dtype precision;    /* float compute precision: UNDEFINED (0) or F32 = f32 (default); F16 or
                               BF16 = a CUDA session converts f32 weights to it at create and keeps
                               every f32 activation in it (half the activation bytes), accumulating
                               in f32; graph inputs and outputs stay f32 (converted inside the run).
                               Kept in f32 even so: the ops a mixed-precision model file computes in
                               f32 (most of its weights f16/bf16: its Casts are honoured), and with F16
                               any node reading a constant beyond f16's range (|v| > 65504; Clip, Min,
                               Max, Where exempt), with conversions inserted around it.
                               The CPU backend ignores it (computes in f32). Other values: ERT_E_ARG. */
    const struct ert_input_value *input_values; /* optional: graph inputs whose values are fixed at create */
    int n_input_values;
    /* optional (NULL: off): folder of the plan cache. A CUDA session keeps
     * what create measured (algorithm choices, fused-plan choices, conv layout
     * timings) in one file there per GPU, driver, CUDA/cuDNN/cuBLAS versions,
     * edgert version and model shape signature (graph, shapes, dtypes, these
     * options); a later create with the same key takes the answers from the
     * file instead of measuring. Missing folders are made. A corrupt,
     * truncated, foreign or unwritable file is ignored with a log line (INFO
     * when read, WARN when it cannot be written), never an error and never
     * trusted. Written atomically at the end of a create that measured. The
     * CPU backend ignores it. See ert_session_create_stats. */
    const char *plan_cache_dir;
    ert_create_mode create_mode;
} ert_session_options;

/* A graph input whose value is known when the session is created. A static
 * plan needs shape-like operands (Reshape's shape, axes, pads, Clip bounds,
 * Resize scales) to be constants; a model that takes them as graph inputs can
 * still run when they are given here. The session copies `data` (dtype and
 * dims as the model declares; a dynamic dim takes the given size), folds what
 * depends on it, and no longer lists the input (ert_session_n_inputs counts
 * the others). Unknown name: ERT_E_NOT_FOUND; dtype/shape mismatch: ERT_E_SHAPE. */
typedef struct ert_input_value {
    const char *name;
    ert_dtype dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    const void *data;       /* C order, little-endian; copied */
} ert_input_value;

/* Bytes of the arena by category. total_bytes = sum of the categories plus
 * alignment padding; it is what a caller-provided arena must hold. */
typedef struct ert_memory_report {
    size_t weights_bytes;       /* weights the session copies or makes (folded BN, the CPU's packed filters, etc.) */
    size_t activations_bytes;   /* planned peak of intermediate tensors */
    size_t activations_lower_bound; /* max over the schedule of live bytes */
    size_t workspace_bytes;     /* kernel scratch, planned with activations' lifetimes (included in activations_bytes) */
    size_t io_bytes;            /* graph inputs and outputs */
    size_t gradients_bytes;     /* training only */
    size_t optimizer_bytes;     /* training only */
    size_t saved_bytes;         /* training only: activations kept for backward */
    size_t mapped_weights_bytes;/* weights used in place from the model (not in the arena) */
    size_t total_bytes;
} ert_memory_report;

/* Plan without creating: fills *out with the exact arena size create needs.
 * Nothing is allocated past the return. Errors: as ert_session_create except
 * ERT_E_ARENA and ERT_E_CUDA from allocation. */
ert_status ert_session_plan(const ert_model *model, const ert_session_options *opts,
                            ert_memory_report *out);

/* Plan, then take the arena (opts->arena, or one allocation) and prepare all
 * kernels. Errors: ERT_E_ARENA (caller arena too small: message has the bytes
 * needed), ERT_E_SHAPE, ERT_E_UNSUPPORTED, ERT_E_NOMEM, ERT_E_CUDA. */
ert_status ert_session_create(const ert_model *model, const ert_session_options *opts,
                              ert_session **out);
void ert_session_free(ert_session *s);

/* The session's arena by category (what ert_session_plan reported).
 * Errors: ERT_E_ARG (NULL). */
ert_status ert_session_memory(const ert_session *s, ert_memory_report *out);
/* Nodes of a CUDA session that run on the CPU because the CUDA backend has
 * no kernel for them (op, dtype or variant): each is run by the CPU kernel in
 * order with the GPU work, its inputs and outputs copied through pinned
 * buffers made at create (still no allocation per run). Create logs each
 * such op type once (INFO). 0 on a CPU session or for NULL. */
int ert_session_n_cpu_fallback(const ert_session *s);

/* What session create did (ert_session_create_stats). Append-only. */
typedef enum ert_plan_cache_state {
    ERT_PLAN_CACHE_OFF = 0,     /* no plan_cache_dir, or a backend without a cache (CPU) */
    ERT_PLAN_CACHE_USED = 1,    /* the file matched: its answers were used */
    ERT_PLAN_CACHE_WRITTEN = 2, /* no usable file: create measured and wrote one */
    ERT_PLAN_CACHE_NOT_WRITTEN = 3, /* no usable file, and writing failed (logged) */
} ert_plan_cache_state;

typedef struct ert_create_stats {
    double create_ms;        /* wall time of ert_session_create */
    ert_create_mode mode;
    ert_plan_cache_state plan_cache;
    int n_searches;          /* measurements create ran: cudnnFind calls, cuBLASLt and fused-plan timings,
                                conv layout timings (0 on a CPU session; 0 when the cache had everything) */
    int n_cached;            /* answers taken from the plan cache */
    /* Where create_ms went, in ms (parts of it; what a backend does not
     * report stays 0). */
    double init_ms;          /* backend start: on the first CUDA session of a process the CUDA context,
                                cuDNN and cuBLAS handles and libraries; a stream and handles after */
    double graph_ms;         /* graph copy, shape inference and constant folding, passes (BatchNorm folding,
                                fusion, precision with the weight conversion, layout), memory plan */
    double upload_ms;        /* arena taken, weights copied into it */
    double bind_ms;          /* per-node setup: algorithm choices, measurements, fused plans, weight packing */
    /* parts of graph_ms + bind_ms (the channels-last decision measures convs
     * during the passes, the rest is measured at bind): */
    double measure_ms;       /* timing loops and cudnnFind calls (0 when the cache had everything) */
    double finalize_ms;      /* cuDNN fused-graph plans built and finalised (runtime compilation unless the
                                plan cache holds the compiled plan) and their numeric checks */
} ert_create_stats;

/* Fills *out. Errors: ERT_E_ARG (NULL). */
ert_status ert_session_create_stats(const ert_session *s, ert_create_stats *out);
int ert_session_n_inputs(const ert_session *s);
int ert_session_n_outputs(const ert_session *s);
/* Concrete shapes (no -1); the name points into the session.
 * Errors: ERT_E_ARG (NULL, index out of range). */
ert_status ert_session_input_info(const ert_session *s, int i, ert_tensor_info *out);
ert_status ert_session_output_info(const ert_session *s, int i, ert_tensor_info *out);
/* Index of a named input/output; ERT_E_NOT_FOUND if none. */
ert_status ert_session_find_input(const ert_session *s, const char *name, int *index);
ert_status ert_session_find_output(const ert_session *s, const char *name, int *index);

/* Pointer to input i's storage in the arena, to write in place. Valid for the
 * session's life; the session owns it. Errors: ERT_E_ARG (NULL, index). */
ert_status ert_session_input_data(ert_session *s, int i, void **data);
/* GPU address of input i's storage (CUDA sessions), for a kernel that writes
 * the input in place (ERT_SESSION_DEVICE_INPUTS). Valid for the session's
 * life. A CPU session: ERT_E_UNSUPPORTED. */
ert_status ert_session_input_device(ert_session *s, int i, void **dev);
/* GPU address of output i's storage (CUDA sessions), where a run leaves it
 * (zero-copy consumers such as DLPack views); valid for the session's life,
 * its contents until the next run. A CPU session: ERT_E_UNSUPPORTED. */
ert_status ert_session_output_device(ert_session *s, int i, void **dev);
/* ERT_SESSION_DEVICE_INPUTS sessions: copy the host view of every input
 * (ert_session_input_data) to the GPU now, for a run whose inputs were
 * written on the CPU after all (e.g. a fallback path). Otherwise a no-op.
 * Errors: ERT_E_ARG (NULL), ERT_E_CUDA. */
ert_status ert_session_sync_inputs(ert_session *s);
/* Copy `bytes` (must equal the input's size) into input i.
 * Errors: ERT_E_ARG (NULL, index), ERT_E_SHAPE (size differs). */
ert_status ert_session_set_input(ert_session *s, int i, const void *data, size_t bytes);
/* Run the graph. Never allocates. */
ert_status ert_session_run(ert_session *s);
/* Where ert_session_run_check_finite stopped. */
typedef struct ert_nonfinite {
    int node_index;       /* position in the schedule (run order); -1: every output was finite */
    const char *node;     /* node name, op type (ONNX) and output tensor name; valid for the session's life */
    const char *op;
    const char *output;
    int64_t count;        /* NaN/inf values in that output */
    int64_t first_index;  /* flat C-order index of the first one */
    float first_value;    /* NaN, +inf or -inf */
} ert_nonfinite;

/* A debugging run: the graph node by node, each float output scanned after its
 * node; stops after the first node (in schedule order) whose output holds a
 * NaN or an infinity: ERT_E_NUMERIC, *out filled and the message names node,
 * op, output, count and first index. All finite: ERT_OK, out->node_index = -1,
 * outputs as ert_session_run gives them. A NaN in a graph input is reported
 * at the first node that reads it. CPU sessions only (others:
 * ERT_E_UNSUPPORTED); never allocates; slower than run (one scan per output). */
ert_status ert_session_run_check_finite(ert_session *s, ert_nonfinite *out);
/* One node's time in a profiling run (ert_session_profile,
 * ert_trainer_profile). */
typedef struct ert_profile_entry {
    const char *node; /* node name (model node or one a pass made); valid for the session's/trainer's life */
    const char *op;   /* op type (ONNX name, or the fused op's) */
    double ms;
} ert_profile_entry;
/* A profiling run: the graph once, node by node, with the time of each node:
 * on CUDA the device time between events around the node (eager, no CUDA
 * graph, so the sum exceeds a graphed run by the launch gaps), on the CPU the
 * wall time of the node run alone. Outputs are those of ert_session_run.
 * Entry k of `out` (up to `cap`) is the k-th node of the schedule (after
 * fusion and elision; fused nodes carry the first node's name); *n gets the
 * number of scheduled nodes. For finding where a run's time goes (`edgert
 * bench --profile`); not for the run loop.
 * Errors: ERT_E_ARG (NULL), ERT_E_STATE (another thread is running the
 * session), as ert_session_run. */
ert_status ert_session_profile(ert_session *s, ert_profile_entry *out, int cap, int *n);
/* Pointer to output i's storage (owned by the session), valid until the next
 * run or free. A CUDA session made with ERT_SESSION_DEVICE_OUTPUTS copies
 * the output from the GPU into that storage first.
 * Errors: ERT_E_ARG (NULL, index), ERT_E_CUDA (that copy failed), ERT_E_STATE
 * (another thread is running the session). */
ert_status ert_session_output_data(ert_session *s, int i, const void **data);
/* Copy output i (bytes must equal its size); with ERT_SESSION_DEVICE_OUTPUTS
 * straight from the GPU. Errors: ERT_E_ARG (NULL, index), ERT_E_SHAPE (size
 * differs), ERT_E_CUDA (the copy from the GPU failed). */
ert_status ert_session_get_output(ert_session *s, int i, void *data, size_t bytes);

/* ---------------------------------------------------------------- images */

/* Interleaved 8-bit pixel layouts, rows top to bottom: the one pixel-format
 * enum of the API (images, JPEG, camera frames). Append-only. */
typedef enum ert_pixel_format {
    ERT_PIXEL_RGB = 0,
    ERT_PIXEL_BGR = 1,
    ERT_PIXEL_GRAY = 2,
    ERT_PIXEL_RGBA = 3, /* alpha written as 255 by decode, ignored by encode */
    ERT_PIXEL_BGRA = 4,
    ERT_PIXEL_YUYV = 5, /* YUYV 4:2:2 camera frames, 2 bytes per pixel: a row of w pixels holds (w + 1) / 2 * 4
                         * bytes (odd widths: the last U/V serve one pixel). ert_preprocessor_run only;
                         * the JPEG calls refuse it (ERT_E_ARG). */
    ERT_PIXEL_COUNT
} ert_pixel_format;

/* Bytes per pixel of a format (YUYV: 2; 0 if unknown). */
int ert_pixel_channels(ert_pixel_format fmt);

/* JPEG codec (TurboJPEG). Only built when the library was configured with
 * ERT_JPEG (see README); otherwise ert_jpeg_create returns ERT_E_UNSUPPORTED
 * and the other calls ERT_E_ARG (no codec). ert_jpeg_available() tells which.
 *
 * A codec holds one TurboJPEG decompressor and one compressor; make it once
 * and reuse it per frame. It reports errors on the context it was made with:
 * a codec (and its context) belong to one thread at a time, so a decode
 * thread gets its own context and codec. libjpeg-turbo itself allocates
 * per image inside decode/encode. Every input is treated as hostile: corrupt,
 * truncated or non-JPEG data, including data that libjpeg only warns about
 * (e.g. a premature end), gives ERT_E_FORMAT and a message, never a crash. */
typedef struct ert_jpeg ert_jpeg;

/* 1 when the library was built with TurboJPEG, else 0. */
int ert_jpeg_available(void);
/* Errors: ERT_E_UNSUPPORTED (built without JPEG), ERT_E_NOMEM. */
ert_status ert_jpeg_create(ert_context *ctx, ert_jpeg **out);
void ert_jpeg_free(ert_jpeg *j);

/* Width, height and colour channels in the file (1 grey, 3 colour) from the
 * headers. Errors: ERT_E_ARG, ERT_E_FORMAT (also for images over 2^28 pixels,
 * refused before any decoding). */
ert_status ert_jpeg_info(ert_jpeg *j, const void *data, size_t size,
                         int *width, int *height, int *channels);

/* Decode straight into the caller's buffer `dst` (no intermediate copy):
 * `height` rows of `dst_stride` bytes (0: width * channels(fmt), packed). The
 * image is decoded at full size; dst_bytes must hold it, else ERT_E_ARG with
 * the bytes needed (call ert_jpeg_info first to size it). On ERT_E_FORMAT the
 * contents of dst are unspecified. width/height may be NULL.
 * Errors: ERT_E_ARG, ERT_E_FORMAT. */
ert_status ert_jpeg_decode(ert_jpeg *j, const void *data, size_t size,
                           ert_pixel_format fmt, void *dst, size_t dst_bytes,
                           size_t dst_stride, int *width, int *height);

/* Decode at 1/denom of the full size (denom 1, 2, 4 or 8), scaled inside the
 * IDCT: cheaper than a full decode plus a resize when the network input is
 * far smaller than the camera frame (the entropy decoding stays). The image is ceil(w/denom) x
 * ceil(h/denom) (ert_jpeg_scaled_size); otherwise as ert_jpeg_decode, which
 * is denom 1. Errors: ERT_E_ARG (also for other denominators), ERT_E_FORMAT. */
ert_status ert_jpeg_decode_scaled(ert_jpeg *j, const void *data, size_t size, int denom,
                                  ert_pixel_format fmt, void *dst, size_t dst_bytes,
                                  size_t dst_stride, int *width, int *height);
/* ceil(width/denom), ceil(height/denom). */
void ert_jpeg_scaled_size(int width, int height, int denom, int *scaled_width, int *scaled_height);

/* Largest JPEG that ert_jpeg_encode can produce for a width x height image
 * (0 when built without JPEG or on bad sizes). */
size_t ert_jpeg_encode_bound(int width, int height);

/* Encode pixels (rows of src_stride bytes, 0: packed) at quality 1..100
 * (4:2:0 chroma for colour input, greyscale JPEG for ERT_PIXEL_GRAY) into the
 * caller's buffer `out` of out_cap bytes; *out_bytes gets the JPEG's length.
 * out_cap >= ert_jpeg_encode_bound(width, height) always suffices; a smaller
 * one is refused with ERT_E_ARG unless it holds TurboJPEG's own bound for the
 * chroma subsampling used. Errors: ERT_E_ARG, ERT_E_FORMAT (libjpeg error). */
ert_status ert_jpeg_encode(ert_jpeg *j, const void *src, int width, int height,
                           size_t src_stride, ert_pixel_format fmt, int quality,
                           void *out, size_t out_cap, size_t *out_bytes);

/* Binary PGM (P5, 1 channel) / PPM (P6, 3 channels), maxval 255. Always
 * built. Read: *pixels (packed rows, malloc'd: release with ert_free).
 * Errors: ERT_E_IO, ERT_E_FORMAT (incl. truncated, maxval != 255, sizes over
 * 32768 or whose product overflows), ERT_E_NOMEM. */
ert_status ert_image_read_pnm(ert_context *ctx, const char *path, int *width,
                              int *height, int *channels, uint8_t **pixels);
/* The same from memory. Errors: as ert_image_read_pnm except ERT_E_IO. */
ert_status ert_image_decode_pnm(ert_context *ctx, const void *data, size_t size,
                                int *width, int *height, int *channels,
                                uint8_t **pixels);
/* Write P5 (channels 1) or P6 (channels 3) from packed rows. Errors:
 * ERT_E_ARG, ERT_E_IO. */
ert_status ert_image_write_pnm(ert_context *ctx, const char *path, const uint8_t *pixels,
                               int width, int height, int channels);

/* ---------------------------------------------------------------- training */
/*
 * A trainer is a model planned for training: the forward graph (no BatchNorm
 * folding, parameters never constant-folded), backward nodes made by reverse
 * mode autodiff, a loss, and an optimizer, all in one arena planned once.
 *
 *     ert_trainer_options to = {0};
 *     to.session.batch = 32;
 *     to.loss.kind = ERT_LOSS_CROSS_ENTROPY;
 *     to.optim.kind = ERT_OPTIM_ADAMW; to.optim.lr = 1e-3f;
 *     ert_trainer *t;
 *     ert_trainer_create(model, &to, &t);           // all allocation happens here
 *     float *x; int64_t *y;
 *     ert_trainer_input_data(t, 0, (void **)&x);    // write a batch in place
 *     ert_trainer_target_data(t, (void **)&y);      // class indices for CE
 *     float loss;
 *     ert_trainer_step(t, &loss);                   // forward, backward, update
 *
 * The trainer keeps its own copy of every parameter (in the arena); the model
 * is only read at create and must outlive the trainer. One thread at a time
 * per trainer.
 *
 * On CUDA (to.session.device): the arena is device memory allocated once at
 * create; parameters are uploaded once; the input/target pointers are pinned
 * host staging the step copies in, and the loss, gradient norm and output
 * come back at the end of the step. The whole step (forward, backward,
 * gradient norm, optimizer) is captured once as a CUDA graph and replayed;
 * the learning rate and Adam's bias corrections reach it through device
 * memory, and the NaN/inf check runs on the device (the update is skipped
 * there, then reported by ert_trainer_step). f32, or mixed precision
 * (session.precision F16/BF16, see ert_trainer_options); a gradient the CUDA
 * kernels cannot take (a conv weight gradient cuDNN cannot describe: 3-D,
 * asymmetric pads) makes create fail with ERT_E_UNSUPPORTED naming it (AUTO
 * then trains on the CPU). Checkpoints and
 * export of a CUDA trainer copy its weights and state to the host (load
 * uploads them): a checkpoint saved on either device loads on the other.
 */
typedef struct ert_trainer ert_trainer;

/* Append-only. */
typedef enum ert_loss_kind {
    ERT_LOSS_CROSS_ENTROPY = 0, /* softmax CE on logits (N, C); targets int64 class indices (N) */
    ERT_LOSS_MSE = 1,           /* mean squared error; targets f32, the output's shape */
    ERT_LOSS_BCE_LOGITS = 2,    /* sigmoid + binary CE on logits; targets f32 in [0, 1], the output's shape */
} ert_loss_kind;

typedef struct ert_loss_options {
    ert_loss_kind kind;
    float label_smoothing;      /* CE: in [0, 1); 0 none */
    const float *class_weights; /* CE: NULL, or C weights (copied at create); the loss is the weighted mean */
    int n_class_weights;
} ert_loss_options;

/* Append-only. */
typedef enum ert_optim_kind {
    ERT_OPTIM_SGD = 0,   /* v = mu*v + g (+wd*w in g); w -= lr*(nesterov ? g + mu*v : v) (PyTorch SGD) */
    ERT_OPTIM_ADAM = 1,  /* L2 weight decay added to the gradient (PyTorch Adam) */
    ERT_OPTIM_ADAMW = 2, /* decoupled weight decay: w -= lr*wd*w (PyTorch AdamW) */
} ert_optim_kind;

typedef struct ert_optim_options {
    ert_optim_kind kind;
    float lr;                   /* base learning rate; 0 keeps 0 (gradients are still computed) */
    float momentum;             /* SGD */
    int nesterov;               /* SGD: needs momentum > 0 */
    float weight_decay;
    float beta1, beta2;         /* Adam/AdamW; 0: 0.9, 0.999 */
    float eps;                  /* Adam/AdamW; 0: 1e-8 */
    float clip_grad_norm;       /* > 0: scale all gradients so their global L2 norm is at most this */
} ert_optim_options;

/* Append-only. lr(step) for step = 0, 1, ... (the step about to be taken):
 * warm-up first (linear from lr/warmup_steps to lr over warmup_steps), then
 * the schedule on (step - warmup_steps). */
typedef enum ert_lr_schedule {
    ERT_LR_CONSTANT = 0,
    ERT_LR_STEP = 1,     /* lr * gamma^floor(s / step_size) */
    ERT_LR_COSINE = 2,   /* min_lr + (lr - min_lr) * (1 + cos(pi * min(s, total_steps) / total_steps)) / 2 */
} ert_lr_schedule;

typedef struct ert_lr_options {
    ert_lr_schedule kind;
    int warmup_steps;
    int step_size;              /* STEP */
    float gamma;                /* STEP; 0: 0.1 */
    int total_steps;            /* COSINE: steps after warm-up */
    float min_lr;               /* COSINE */
} ert_lr_options;

/* Append-only. */
typedef enum ert_trainable {
    ERT_TRAIN_ALL = 0,          /* every float weight a differentiable input reads */
    ERT_TRAIN_PATTERN = 1,      /* weights whose name matches `pattern` (fnmatch glob: * ? [..]) */
    ERT_TRAIN_LAST_N = 2,       /* weights of the last `last_n` nodes that have any (in graph order) */
} ert_trainable;

/* Append-only. */
typedef enum ert_bn_mode {
    ERT_BN_TRAIN = 0,           /* batch statistics; running mean/var updated with the node's momentum */
    ERT_BN_FROZEN = 1,          /* running statistics used and never updated (scale/bias may still train),
                                 * also for nodes exported with training_mode=1. Either mode: a node's running
                                 * mean/var outputs (training_mode=1) are not produced; create refuses a model
                                 * where a node or a graph output reads them (ERT_E_UNSUPPORTED) */
} ert_bn_mode;

typedef struct ert_trainer_options {
    ert_session_options session; /* device (CPU default; CUDA; AUTO = CUDA when a GPU is there and every node has a
                                  * CUDA kernel, else the CPU), batch, threads (CPU), arena (device memory on CUDA) */
    const char *output;         /* the graph output the loss reads; NULL: output 0 */
    ert_loss_options loss;
    ert_optim_options optim;
    ert_lr_options lr;
    ert_trainable trainable;
    const char *pattern;        /* ERT_TRAIN_PATTERN; a pattern matching no weight is ERT_E_NOT_FOUND */
    int last_n;                 /* ERT_TRAIN_LAST_N; >= 1 */
    ert_bn_mode bn;
    uint64_t seed;              /* Dropout RNG (Dropout keeps the model's ratio); 0: a fixed default */
    /* Mixed precision (like torch.autocast + GradScaler) is session.precision:
     * F16 or BF16 on CUDA runs every eligible convolution (no bias, no fused
     * epilogue, 2-D; its forward and both gradients) in that type on the
     * tensor cores with f32 accumulation, from a half copy of its f32 master
     * weight cast in the step; BatchNorm in training mode, the activations
     * (Relu, Gelu...), Max/Average/GlobalAverage pooling, same-shape Add and
     * reshapes keep their activations and activation gradients in the half
     * type (half the bytes) and compute in f32, BatchNorm statistics in f32/
     * double; Gemm/MatMul, softmax, the loss, parameter gradients and the
     * optimizer stay f32 (casts at the boundaries). A frozen prefix (no
     * gradient reaches it) runs wholly in the half type. On the CPU it is
     * ERT_E_UNSUPPORTED. F16 adds dynamic loss scaling: */
    float loss_scale;           /* F16: initial loss scale; 0: 65536 (torch's GradScaler); < 0: no scaling.
                                 * The loss gradient is multiplied by the scale, gradients are unscaled
                                 * before clipping and the update; a step whose gradients overflow is
                                 * skipped and the scale halved; after loss_scale_interval good steps in
                                 * a row it doubles. All on the device, inside the captured step. */
    int loss_scale_interval;    /* F16: good steps before the scale doubles; 0: 2000 */
    int amp_conv_only;          /* F16/BF16: 0 (default) = activations in the half type too (see above);
                                 * 1 = only convolutions run in it, every activation stays f32 */
    int bn_relu_unfused;        /* 0 (default): a Relu that alone reads a batch-statistics BatchNorm's output
                                 * runs inside it (forward and gradient); 1: two nodes */
    int keep_bn_outputs;        /* 0 (default): a batch-statistics BatchNorm's output (with its fused Relu)
                                 * that the backward reads (the next conv's weight gradient, a MaxPool's
                                 * gradient) is recomputed there from the BatchNorm's input and saved
                                 * statistics instead of being kept from the forward (one elementwise pass
                                 * for fewer saved bytes); 1: keep it */
    int64_t workspace_slack;    /* CUDA: how far kernel workspaces (cuDNN's convs) may raise the arena's
                                 * activation peak, in bytes. Each conv takes its fastest algorithm whose
                                 * workspace fits the room left under the peak of the activations
                                 * (saved ones, gradients) at its step plus this slack, unless cuDNN timed
                                 * that one over 1.25x slower than its fastest (then the fastest, and the
                                 * peak grows). 0: the default, max(32 MiB, peak / 8); < 0: no limit (every
                                 * conv its fastest algorithm, the largest arena). */
} ert_trainer_options;

/* Plan without creating: training arena bytes by category. activations_bytes
 * is the planned peak of everything with a lifetime (forward activations,
 * saved_bytes, activation gradients, workspace: saved_bytes and
 * workspace_bytes are included in it). weights_bytes = parameters and other
 * weights copied into the arena; gradients_bytes = parameter gradients;
 * optimizer_bytes = optimizer state. Errors as ert_trainer_create. */
ert_status ert_trainer_plan(const ert_model *model, const ert_trainer_options *opts, ert_memory_report *out);

/* Errors: ERT_E_ARG (bad options), ERT_E_NOT_FOUND (output name, or a
 * trainable pattern that matches no weight), ERT_E_UNSUPPORTED (an op with no
 * backward rule on the path to a trainable weight, device CUDA), ERT_E_SHAPE
 * (loss vs output shape), ERT_E_ARENA, ERT_E_NOMEM. */
ert_status ert_trainer_create(const ert_model *model, const ert_trainer_options *opts, ert_trainer **out);
void ert_trainer_free(ert_trainer *t);

/* Accessors below: Errors: ERT_E_ARG (NULL, index out of range). Pointers
 * they give are owned by the trainer and valid for its life. */
ert_status ert_trainer_memory(const ert_trainer *t, ert_memory_report *out);
int ert_trainer_n_inputs(const ert_trainer *t);
ert_status ert_trainer_input_info(const ert_trainer *t, int i, ert_tensor_info *out);
/* Graph input i's storage. */
ert_status ert_trainer_input_data(ert_trainer *t, int i, void **data);
/* Target storage: int64 (N) class indices for CE, else f32 with the output's
 * shape. Checked at step and eval, before anything runs: a class index out of
 * range is ERT_E_ARG (the message names it) and changes nothing. */
ert_status ert_trainer_target_data(ert_trainer *t, void **data);
ert_status ert_trainer_target_info(const ert_trainer *t, ert_tensor_info *out);
/* One training step: forward, loss, backward, gradient clipping, optimizer
 * update, step count + 1. Never allocates. *loss (may be NULL) gets the
 * batch's loss before the update. NaN/inf in the loss or gradients: the step
 * is skipped (weights and optimizer state untouched, step count unchanged;
 * BatchNorm running statistics have already seen the batch) and ERT_E_ARG
 * says so. A target class out of range: ERT_E_ARG, nothing updated. With
 * F16 loss scaling, a step whose loss is finite but whose gradients overflow
 * is skipped the same way and returns ERT_OK (the scale halves: see
 * ert_trainer_loss_scale / ert_trainer_skipped_steps). A Gather index out of
 * range: ERT_E_ARG naming the node and the index; on the CPU the forward
 * Gather refuses it, on CUDA its gradient kernel reports it after the step
 * and every update is skipped on the device (weights, optimizer state and
 * loss scale untouched, step count unchanged; as for NaN, BatchNorm running
 * statistics and the Dropout stream have seen the batch). On CUDA only a
 * Gather whose data gets a gradient is checked (a frozen table's forward
 * gives zeros for such an index). */
ert_status ert_trainer_step(ert_trainer *t, float *loss);
/* (ert_trainer_step's errors: ERT_E_ARG as above, ERT_E_CUDA.) */
/* Forward and loss only, BatchNorm with running statistics, Dropout off; no
 * update. Never allocates. Errors: ERT_E_ARG (target out of range, non-finite
 * loss), ERT_E_CUDA. */
ert_status ert_trainer_eval(ert_trainer *t, float *loss);
/* One training step like ert_trainer_step (it updates the weights), run node
 * by node with the time of each node measured: on CUDA the device time
 * between events around the node (no CUDA graph, so the sum exceeds a
 * graphed step by the launch gaps), on the CPU the wall time. Entry k of
 * `out` (up to `cap`) is the k-th node of the step's schedule: its name (a
 * model node, or a generated backward/optimizer node), op and milliseconds,
 * valid for the trainer's life. *n gets the number of nodes. For finding
 * where a step's time goes (`train_gpu --profile`); not for the step loop. */
/* Errors: as ert_trainer_step. */
ert_status ert_trainer_profile(ert_trainer *t, ert_profile_entry *out, int cap, int *n, float *loss);
/* The output the loss reads, after the last step or eval (valid until the
 * next one). */
ert_status ert_trainer_output_data(ert_trainer *t, const void **data);
ert_status ert_trainer_output_info(const ert_trainer *t, ert_tensor_info *out);
/* Steps taken and the learning rate the next step will use. */
int64_t ert_trainer_step_count(const ert_trainer *t);
float ert_trainer_lr(const ert_trainer *t);
/* Number of trainable parameter tensors / elements. */
int ert_trainer_n_trainable(const ert_trainer *t);
int64_t ert_trainer_n_trainable_elems(const ert_trainer *t);
/* The device the trainer runs on: ERT_DEVICE_CPU or ERT_DEVICE_CUDA (AUTO
 * resolved at create). */
ert_device ert_trainer_device(const ert_trainer *t);
/* Mixed precision (F16): the loss scale the next step will use (1 without
 * loss scaling) and the number of steps skipped because their gradients
 * overflowed (inf/NaN); both as of the last step. */
float ert_trainer_loss_scale(const ert_trainer *t);
int64_t ert_trainer_skipped_steps(const ert_trainer *t);

/* Checkpoint: every weight the trainer holds (parameters, BatchNorm running
 * statistics), optimizer state, step count and RNG state, with the model's
 * fingerprint. Written atomically (ert_file_writer_open): on any failure or
 * crash the previous file at PATH is intact.
 * Errors: ERT_E_IO, ERT_E_CUDA (copying a device trainer's weights). */
ert_status ert_trainer_save_checkpoint(ert_trainer *t, const char *path);
/* Restore a checkpoint saved from a trainer of the same model and options
 * (same parameters, shapes and optimizer). Checked completely before anything
 * is changed. Errors: ERT_E_IO, ERT_E_FORMAT (malformed, bad CRC), ERT_E_ARG
 * (made for another model or optimizer: the message says what differs). */
ert_status ert_trainer_load_checkpoint(ert_trainer *t, const char *path);
/* A new model: the trainer's model with its current weights (BatchNorm running
 * statistics included), for inference or ert_model_save (.ert). Release with
 * ert_model_free. Errors: ERT_E_NOMEM. */
ert_status ert_trainer_export(ert_trainer *t, ert_model **out);

/* Save a model as ONNX (opset 18, or 20 with Gelu; weights as initializers),
 * atomically like ert_model_save. For exporting trained models; ops without a
 * plain ONNX form (Silu, fused epilogues, internal ops) are refused.
 * Errors: ERT_E_UNSUPPORTED, ERT_E_IO, ERT_E_NOMEM. */
ert_status ert_model_save_onnx(const ert_model *model, const char *path);

/* ------------------------------------------------------ quantization */
/*
 * Post-training quantization: a float model plus a calibration set gives a
 * new model in QDQ form, the float graph with QuantizeLinear/
 * DequantizeLinear pairs inserted (what onnxruntime's quantize_static and
 * NVIDIA ModelOpt write), which sessions run like any other model (their
 * load-time passes turn the pairs around Conv/Gemm/MatMul/Add into integer
 * ops where a backend has them), ert_model_save stores as .ert (int8
 * weights, f32 scales) and ert_model_save_onnx as ONNX.
 *
 *     ert_quantize_options qo = {.version = ERT_QUANTIZE_OPTIONS_VERSION,
 *                                .method = ERT_CALIB_ENTROPY,
 *                                .n_samples = 500, .calib_data = inputs};
 *     ert_model *q;
 *     ert_model_quantize(model, &qo, &q);
 *     ert_model_save(q, "model.int8.ert");
 *
 * What is quantized: every Conv, Gemm and MatMul whose second operand is a
 * constant, and every Add of two activations (the "layers"), unless its name
 * matches keep_float. Weights: int8, symmetric, per output channel (axis 0
 * of a Conv filter and of a transB Gemm's B, the last axis of a MatMul's B)
 * or per tensor, values in [-127, 127]; a bias becomes int32 with scale
 * s_x * s_w (zero point 0), as onnxruntime writes it. Activations: int8,
 * symmetric (zero point 0): cuDNN's and cuBLASLt's int8 tensor-core paths
 * and TensorRT take int8 with zero point 0 only, and a zero point would add
 * correction terms to every integer dot product; the cost is one bit of
 * resolution on tensors that are never negative (after ReLU). With
 * asymmetric = 1 activations are uint8 with a zero point instead (what
 * onnxruntime's quantize_static writes by default): the range [lo, hi] is
 * the observed [min, max] clipped to the method's threshold on |x| and
 * widened to hold 0, scale (hi - lo) / 255, zero point round(-lo / scale);
 * a tensor that is never negative gets all 256 levels (entropy then aims at
 * 256). It keeps more accuracy (PaddleOCR's detector: bench/int8) and runs
 * on the CPU's integer kernels; int8 tensor-core paths want symmetric. Every
 * activation input of a layer and each layer's output (after a ReLU that
 * alone reads it; graph outputs stay float) gets one Q/DQ pair; MaxPool and
 * reshapes keep their input's scale so they commute with quantization.
 *
 * Calibration runs the float model on the CPU, one sample at a time, and
 * records for each of those tensors its min, max and 2048-bin histograms of
 * |x| over [0, max |x|] and of x over [min, max] (a second pass over the
 * set). The clipping threshold amax (scale = amax / 127) is max |x|
 * (MINMAX), the given percentile of |x| (PERCENTILE), TensorRT's entropy
 * method (ENTROPY: the threshold whose 128-level quantization of the
 * histogram has the least KL divergence from it), or (MSE, options version
 * 3) the range whose quantization to 255 levels (uint8 with a zero point)
 * or 254 (int8 symmetric) has the least squared error over the histogram,
 * searched on a grid of clipping points. A tensor read only by Relu,
 * HardSwish, HardSigmoid or Clip (constant bounds) is measured only over
 * the values those readers tell apart (a HardSwish reads every x <= -3 as
 * -3: [max(min, -3), max]), which loses nothing and narrows the step. The
 * same set gives the same ranges, bit for bit, every run.
 *
 * Cross-layer equalisation (equalize, options version 3; on by default):
 * before calibration, each Conv A -> [Relu] -> Conv B whose middle tensor is
 * read by nothing else is rescaled per channel (Nagel et al. 2019): A's
 * output channel c divided by s_c, B's weights on input channel c multiplied
 * by it, which leaves the float function unchanged (Relu(x/s) = Relu(x)/s).
 * s_c comes from the middle tensor's range per channel r_c over the set:
 * when B is depthwise, s_c = r_c / max r (every channel of the tensor, which
 * is quantized with one scale, gets the same range, and B's per-channel
 * weight scales absorb s_c); otherwise s_c = sqrt(r_c / w_c), w_c the
 * largest |weight| B applies to channel c. It costs one pass over the set.
 * On by default: it addresses the MobileNet-style failure of a per-tensor
 * scale over channels whose ranges differ by orders of magnitude (a test
 * model: int8 error 0.18 -> 0.03), never changes the float function, and
 * costs one pass; measured (bench/RESULTS.md): PaddleOCR's detector 0 to +2
 * boxes (its map error from 8% worse to 13% better, by method), its
 * classifier the same top-1 agreement, Fashion-MNIST's CNN has no pair.
 * HardSwish and SiLU are not positively homogeneous: their pairs are left
 * alone.
 *
 * Bias correction (bias_correct, options version 3; off by default): after
 * the model is built, each quantized Conv/Gemm with a bias (a Conv without
 * one gets a zero bias), in graph order, runs over the set in the quantized
 * model (the layers before it already corrected) and in the float model;
 * the difference of their per-output-channel means is taken off its bias
 * (the int32 bias in units of its scale). This removes the systematic shift
 * that rounding weights causes (a filter whose taps nearly cancel on an
 * input with a large mean) and part of what activation rounding causes. It
 * costs one pass over the set per layer (PaddleOCR's detector, 72 layers, 5
 * samples at 640x640: about 80 s on 2 cores), hence off by default.
 *
 * Sensitivity (sensitivity = 1, or max_drop > 0): each layer is quantized
 * alone and graph output 0 compared with the float model over the set
 * (relative L2 error, and top-1 drop in points: with labels the drop of the
 * accuracy, without them the share of samples whose top-1 class changed).
 * With max_drop, layers are then returned to float, worst first, until the
 * measured drop of the whole model is <= max_drop (on a CUDA f16 session a
 * float layer runs in f16). The drop: top-1 points when output 0 is
 * (N, classes) with classes > 1, else 100 x the relative L2 error. Bias
 * correction, when on, runs after this choice; the report gives the final
 * model's error.
 */

/* Append-only. */
typedef enum ert_calib_method {
    ERT_CALIB_MINMAX = 0,     /* amax = max |x| over the set */
    ERT_CALIB_PERCENTILE = 1, /* amax = the `percentile` of |x| (default 99.99) */
    ERT_CALIB_ENTROPY = 2,    /* TensorRT's KL-divergence threshold over 2048 bins */
    ERT_CALIB_MSE = 3,        /* the range whose quantization has the least squared error (options version >= 3) */
} ert_calib_method;

#define ERT_QUANTIZE_OPTIONS_VERSION 3 /* 2: asymmetric; 3: ERT_CALIB_MSE, equalize, bias_correct */

/* Per-tensor range chosen by calibration (see ert_quantize_report). */
typedef struct ert_quant_range {
    const char *tensor;       /* the float tensor that got a Q/DQ pair */
    float min, max;           /* observed over the calibration set */
    float amax;               /* clipping threshold on |x| chosen by the method */
    float scale;              /* amax / 127, asymmetric (hi - lo) / 255 (1 for a tensor that is zero everywhere) */
    float lo, hi;             /* the quantized range: -amax, amax; asymmetric the clipped [min, max] holding 0 */
    int zero_point;           /* 0; asymmetric the uint8 that stands for 0 */
} ert_quant_range;

/* Why a layer stayed float. Append-only. */
typedef enum ert_quant_keep {
    ERT_QUANT_QUANTIZED = 0,
    ERT_QUANT_KEEP_PATTERN = 1, /* its name matched keep_float */
    ERT_QUANT_KEEP_DROP = 2,    /* returned to float to meet max_drop */
} ert_quant_keep;

typedef struct ert_quant_layer {
    const char *node;         /* node name and ONNX op ("Conv") */
    const char *op;
    ert_quant_keep state;
    double rel_l2;            /* output 0's relative L2 error with this layer alone quantized; NaN: not measured */
    double drop;              /* the drop (see above) with this layer alone quantized; NaN: not measured */
} ert_quant_layer;

/* Filled by ert_model_quantize when options->report is set; every pointer in
 * it is owned by the report: release with ert_quantize_report_free. */
typedef struct ert_quantize_report {
    int n_samples;            /* calibration samples used */
    int n_ranges;
    ert_quant_range *ranges;
    int n_layers;             /* every candidate layer, in graph order */
    ert_quant_layer *layers;
    int n_kept_float;         /* layers with state != QUANTIZED */
    double float_top1;        /* calibration-set accuracy (%) of float and quantized models, with labels; */
    double quant_top1;        /* NaN without labels or without a (N, classes) output 0 */
    double rel_l2;            /* the returned model's output-0 relative L2 error vs float over the set */
    double drop;              /* the returned model's drop (the max_drop metric) */
    void *owned_;             /* internal */
} ert_quantize_report;
void ert_quantize_report_free(ert_quantize_report *r);

/* Zero-initialised except version and the calibration set means defaults. */
typedef struct ert_quantize_options {
    int version;              /* ERT_QUANTIZE_OPTIONS_VERSION (0 is read as 1; a newer one: ERT_E_ARG) */
    ert_calib_method method;  /* default MINMAX */
    float percentile;         /* PERCENTILE: in (0, 100]; 0 means 99.99 */
    int per_tensor;           /* 0: per-channel weight scales (default); 1: one scale per weight */
    const char *keep_float;   /* fnmatch glob(s) over node names, separated by ','; matching layers stay
                                 float. A pattern that matches no layer: ERT_E_NOT_FOUND */
    float max_drop;           /* > 0: sensitivity budget (see above), in the drop's unit; 0: none */
    int sensitivity;          /* 1: measure every layer alone (report) even without max_drop */
    int n_samples;            /* calibration samples (>= 1) */
    /* One pointer per graph input (model order): n_samples samples back to
     * back, each of the input's dtype and its shape at batch 1 (dynamic dims
     * given by input_shapes; a dynamic leading dim is 1). Read only during
     * the call. Every float value must be finite (ERT_E_ARG names the sample). */
    const void *const *calib_data;
    const int64_t *labels;    /* optional: n_samples class indices for output 0 (accuracy) */
    const ert_input_shape *input_shapes; /* fixes dynamic dims other than the leading one */
    int n_input_shapes;
    int n_threads;            /* CPU worker threads of the calibration runs; 0: 1 */
    ert_quantize_report *report; /* optional out: ranges, per-layer errors, kept-float layers */
    int asymmetric;           /* version >= 2. 0: activations int8 symmetric (default); 1: uint8 with a
                                 zero point over the clipped [min, max] (see above) */
    int equalize;             /* version >= 3. Cross-layer equalisation (see above): 1 on, -1 off, 0 default (on) */
    int bias_correct;         /* version >= 3. Empirical bias correction (see above): 1 on, -1 off, 0 default (off) */
} ert_quantize_options;

/* Quantize `model` (not changed; it may be freed afterwards) into *out, a
 * new model in QDQ form (release with ert_model_free). Messages go to the
 * model's context. Errors: ERT_E_ARG (NULL, version, n_samples < 1, no
 * calib_data, a bad method/percentile/max_drop, a NaN or infinity in a
 * sample or in a tensor the float model computes from it: the message
 * names the sample and the tensor), ERT_E_NOT_FOUND (keep_float matches no
 * layer), ERT_E_UNSUPPORTED (the model has no layer to quantize, or this
 * build has no QuantizeLinear/DequantizeLinear), ERT_E_SHAPE, ERT_E_NOMEM,
 * and any error of creating or running a CPU session of the model. */
ert_status ert_model_quantize(const ert_model *model, const ert_quantize_options *options, ert_model **out);

/* ------------------------------------------------------ GPU preprocessing */

/* A camera frame on the GPU: u8 RGB or YUYV 4:2:2 (BT.601 limited range) ->
 * bilinear resize with half-pixel centres, edges clamped (OpenCV INTER_LINEAR)
 * -> v * scale, then (v - mean) / std -> f32, in one kernel. Matches the CPU
 * preprocessing of the camera app (apps/camera/proc.c) to within 1e-5.
 *
 *     ert_preprocessor_options po = {.out_w = 224, .out_h = 224, .fit = ERT_FIT_CENTER_CROP,
 *                                    .mean = {...}, .std = {...}};
 *     ert_preprocessor *pp;
 *     ert_preprocessor_create(ctx, 1280, 720, &po, &pp); // allocates everything
 *     ert_session_input_data(s, 0, (void **)&in);
 *     ert_preprocessor_run(pp, frame, w, h, stride, ERT_PIXEL_YUYV, in); // no allocation
 *
 * A preprocessor reports errors on the context it was made with (which must
 * outlive it): like that context, one preprocessor belongs to one thread at
 * a time; several may run on several threads, each with its own context. */

/* Append-only. */
typedef enum ert_fit {
    ERT_FIT_STRETCH = 0,     /* whole frame to the whole input (aspect not kept) */
    ERT_FIT_LETTERBOX = 1,   /* whole frame, aspect kept, centred, padded with `pad` */
    ERT_FIT_CENTER_CROP = 2, /* input filled, aspect kept, the frame's centre cropped */
} ert_fit;

/* Zero-initialised means: stretch, pad 0, scale 1/255, mean 0, std 1, NCHW, RGB. */
typedef struct ert_preprocessor_options {
    int out_w, out_h;       /* the network input's width and height */
    ert_fit fit;
    uint8_t pad;            /* letterbox fill, in pixel units (e.g. 114) */
    float scale;            /* 0: 1/255 */
    float mean[3], std[3];  /* per RGB channel; std 0 means 1 */
    int nhwc;               /* 0: (3, H, W) planes; 1: (H, W, 3) */
    int bgr;                /* output channel order BGR */
    int gray;               /* 1 channel: 0.299 R + 0.587 G + 0.114 B, with mean[0], std[0] */
    int f16;                /* write IEEE half floats (round to nearest even), for f16 model inputs */
} ert_preprocessor_options;

typedef struct ert_preprocessor ert_preprocessor;

/* Allocates pinned staging and device buffers for frames up to max_w x max_h,
 * and a CUDA stream. *out owned by the caller (ert_preprocessor_free); ctx
 * (not NULL) gets the messages of this call and of every run.
 * Errors: ERT_E_ARG (NULL ctx/o/out, sizes outside 1..16384, unknown fit),
 * ERT_E_NOMEM, ERT_E_CUDA (no usable GPU, or its allocations failed),
 * ERT_E_UNSUPPORTED (edgert built without CUDA). */
ert_status ert_preprocessor_create(ert_context *ctx, int max_w, int max_h, const ert_preprocessor_options *o,
                                   ert_preprocessor **out);
/* Bytes one run writes: out_w * out_h * (3, or 1 with gray) * (4, or 2 with f16). */
size_t ert_preprocessor_output_bytes(const ert_preprocessor *p);
/* frame: w x h pixels (w <= max_w, h <= max_h), rows `stride` bytes apart,
 * host memory, read during the call only; fmt ERT_PIXEL_RGB or ERT_PIXEL_YUYV
 * (a YUYV row holds (w + 1) / 2 * 4 bytes). dst: host memory (e.g. a
 * session's ert_session_input_data) of ert_preprocessor_output_bytes bytes,
 * written before return. Never allocates. Errors: ERT_E_ARG (NULL pointers,
 * a frame over max_w x max_h, a stride under the row's bytes, another fmt),
 * ERT_E_CUDA, ERT_E_UNSUPPORTED. */
ert_status ert_preprocessor_run(ert_preprocessor *p, const uint8_t *frame, int w, int h, size_t stride,
                                ert_pixel_format fmt, void *dst);
/* As ert_preprocessor_run, but dst is GPU memory (e.g. ert_session_input_device
 * of a session created with ERT_SESSION_DEVICE_INPUTS): the result never goes
 * back through host memory. Complete on return (the preprocessor's stream is
 * synchronised), so a following ert_session_run on any stream sees it.
 * Errors: as ert_preprocessor_run. */
ert_status ert_preprocessor_run_device(ert_preprocessor *p, const uint8_t *frame, int w, int h, size_t stride,
                                       ert_pixel_format fmt, void *dst_dev);
/* NULL is a no-op. */
void ert_preprocessor_free(ert_preprocessor *p);

#ifdef __cplusplus
}
#endif
#endif /* EDGERT_H */
