/* The loaders/ floor as runtime/ sees it: the .ert reader and writer and the
 * ONNX reader. The public entry points (ert_model_load_file, ert_model_save,
 * ...) are in loaders/model_io.c; the ONNX writer (ert_model_export_onnx) in
 * loaders/onnx/onnx_write.c. Sees only core/. */
#ifndef ERT_LOADERS_H
#define ERT_LOADERS_H
#include "ert_internal.h"

/* .ert format (loaders/ert/ert_format_read.c, ert_format_write.c) */
ert_status ert_format_write(const ert_model *m, const char *path);
/* Parse `size` bytes at `data` (64-byte aligned). If `borrow` the model keeps
 * pointers into data (weights used in place) and the caller hands ownership of
 * the mapping to the model via map_base/map_size; else it copies what it needs. */
ert_status ert_format_read(ert_context *ctx, const void *data, size_t size, bool borrow, ert_model **out);
bool ert_format_sniff(const void *data, size_t size);

/* ONNX (loaders/onnx/onnx_loader.c). `dir` is the model's directory for
 * external data (NULL: external data refused). */
ert_status ert_onnx_read(ert_context *ctx, const void *data, size_t size, const char *dir, ert_model **out);

#endif /* ERT_LOADERS_H */
