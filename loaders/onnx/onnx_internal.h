/* onnx_internal.h - the protobuf wire-format reader and TensorProto decoder
 * shared by the ONNX graph loader (onnx_loader.c) and ert_tensor_load_pb. */
#ifndef ERT_ONNX_INTERNAL_H
#define ERT_ONNX_INTERNAL_H

#include "loaders.h"

/* A window of the input. `base` is the start of the whole file, kept so error
 * messages can give absolute byte offsets. */
typedef struct ert_pb {
    const uint8_t *p, *end, *base;
} ert_pb;

/* Protobuf wire types. 3/4 (groups) are deprecated and never used by ONNX: they
 * are rejected rather than skipped, which also removes the only construct that
 * would need a nesting stack. */
enum { ERT_PB_VARINT = 0, ERT_PB_I64 = 1, ERT_PB_LEN = 2, ERT_PB_I32 = 5 };

/* One decoded field header plus its payload: for VARINT/I64/I32 `v` holds the
 * value (I32/I64 as raw bits), for LEN `sub` is the payload window. */
typedef struct ert_pb_field {
    uint32_t num;
    int wt;
    uint64_t v;
    ert_pb sub;
    size_t off;               /* offset of the field's tag in the file */
} ert_pb_field;

/* Read the next field. Returns 1 and fills *f, 0 at the end of the window, or
 * -1 on malformed input with a reason in *why (static text). */
int ert_pb_next(ert_pb *b, ert_pb_field *f, const char **why);

/* One bare varint (packed repeated values). 0 ok, -1 truncated, -2 overflow. */
int ert_pb_varint(ert_pb *b, uint64_t *v);

/* Sub-window over a LEN field's payload. */
static inline ert_pb ert_pb_sub(const ert_pb_field *f) { return f->sub; }
static inline size_t ert_pb_off(const ert_pb *b) { return (size_t)(b->p - b->base); }

/* Count of values in a repeated scalar field segment: a packed LEN payload of
 * varints / fixed32 / fixed64, or one unpacked value. -1 if malformed. */
int64_t ert_pb_count_varints(ert_pb sub);

/* Decoded TensorProto (dims, dtype, data copied into malloc'd memory). */
typedef struct ert_onnx_tensor {
    const uint8_t *name;      /* points into the input, name_len bytes, not NUL-terminated */
    size_t name_len;
    int onnx_type;            /* ONNX TensorProto.DataType code */
    ert_dtype dtype;
    int ndim;
    int64_t dims[ERT_MAX_DIMS];
    int64_t n_elems;
    void *data;               /* malloc'd (at least 1 byte), little-endian C order */
    size_t bytes;
} ert_onnx_tensor;

/* Decode one TensorProto from `b`. `dir` is the directory for external data
 * (NULL: refused). `what` names the tensor's place for messages ("initializer
 * 'w'"). On error sets ctx's message and returns the status; *t holds nothing
 * to free. */
ert_status ert_onnx_decode_tensor(ert_context *ctx, ert_pb b, const char *dir, const char *what,
                                  ert_onnx_tensor *t);

/* ert_onnx_dtype() (ONNX elem type -> ert_dtype) is in ert_internal.h. */
/* Name of an ONNX data type code ("DOUBLE"), "?" when unknown. */
const char *ert_onnx_dtype_name(int onnx_type);

#endif
