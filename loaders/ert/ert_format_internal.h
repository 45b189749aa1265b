/*
 * ert_format_internal.h - on-disk constants of the .ert format, shared by the
 * reader (ert_format_read.c) and the writer (ert_format_write.c). The layout is
 * specified in docs/ert-format.md; keep the two in step.
 *
 * Every multi-byte field is little-endian and accessed through the helpers
 * below (byte by byte), so neither the reader nor the writer depends on the
 * host's alignment rules. Weight bytes are the exception: they are used in
 * place, so a big-endian host refuses the format (see the reader).
 */
#ifndef ERT_FORMAT_INTERNAL_H
#define ERT_FORMAT_INTERNAL_H

#include "loaders.h"

#include <stdint.h>
#include <string.h>

/* PNG-style magic: the high byte catches 7-bit transfers, CR LF and ^Z catch
 * text-mode conversions, and it is not valid UTF-8 or protobuf. */
#define ERTF_MAGIC "\x89" "ERT\r\n\x1a\n"
#define ERTF_MAGIC_SIZE 8
#define ERTF_VERSION 1u

#define ERTF_HEADER_SIZE 64u
#define ERTF_SECTION_ENTRY_SIZE 32u
#define ERTF_TENSOR_ENTRY_SIZE 104u
#define ERTF_NODE_ENTRY_SIZE 32u
#define ERTF_ATTR_ENTRY_SIZE 24u
#define ERTF_GRAPH_SIZE 32u
#define ERTF_MAX_SECTIONS 64u

/* Header field offsets. */
#define ERTF_H_VERSION 8
#define ERTF_H_FLAGS 12
#define ERTF_H_HEADER_SIZE 16
#define ERTF_H_N_SECTIONS 20
#define ERTF_H_FILE_SIZE 24
#define ERTF_H_TABLE_OFFSET 32
#define ERTF_H_TABLE_CRC 40
#define ERTF_H_CRC 60 /* CRC-32 of bytes [0, 60) */

/* Section entry flags. */
#define ERTF_SEC_OPTIONAL 1u /* a reader that does not know the type skips it */

/* Section types. Append-only; values are stored in files. */
enum {
    ERTF_SEC_STRINGS = 1,
    ERTF_SEC_TENSORS = 2,
    ERTF_SEC_NODES = 3,
    ERTF_SEC_ATTRS = 4,
    ERTF_SEC_AUX = 5,
    ERTF_SEC_INDICES = 6,
    ERTF_SEC_GRAPH = 7,
    ERTF_SEC_WEIGHTS = 8,
    ERTF_SEC_KNOWN_END /* first type this version does not know */
};
/* Types from 256 on are reserved for training checkpoints (optimizer state,
 * step counter, RNG state), written OPTIONAL where an inference-only reader
 * may ignore them. */
#define ERTF_SEC_TRAIN_BASE 256u

/* Tensor entry flags. */
#define ERTF_T_HAS_DATA 1u

/* "No string" (NULL name). */
#define ERTF_NO_STRING 0xffffffffu

/* Section and tensor data alignment. */
#define ERTF_SECTION_ALIGN 8u
#define ERTF_WEIGHT_ALIGN 64u /* == ERT_HOST_ALIGN */

static inline uint32_t ertf_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ertf_rd64(const uint8_t *p) {
    return (uint64_t)ertf_rd32(p) | (uint64_t)ertf_rd32(p + 4) << 32;
}
static inline void ertf_wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void ertf_wr64(uint8_t *p, uint64_t v) {
    ertf_wr32(p, (uint32_t)v);
    ertf_wr32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t ertf_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float ertf_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

#endif /* ERT_FORMAT_INTERNAL_H */
