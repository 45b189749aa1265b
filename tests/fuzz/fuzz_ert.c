/* libFuzzer target: .ert bytes -> ert_model_load_memory, then the public
 * queries on a model that loaded. Any crash, sanitizer report or leak is a
 * bug; a status is the expected outcome for garbage. Also linked into
 * fuzz_regress.
 *
 * Each input is loaded twice: as given (copying path), and with every CRC
 * recomputed (in place, ERT_LOAD_NO_COPY). Without the second load nearly
 * every mutation dies at a CRC check and the fuzzer never reaches the field
 * validation behind it; fixing CRCs here keeps the library free of a
 * fuzzing-only mode. */
#include "runtime_internal.h"
#include "../../loaders/ert/ert_format_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void poke(ert_model *m) {
    ert_tensor_info ti;
    for (int i = 0; i < ert_model_n_inputs(m); i++) ert_model_input_info(m, i, &ti);
    for (int i = 0; i < ert_model_n_outputs(m); i++) ert_model_output_info(m, i, &ti);
    for (int i = 0; i < ert_model_n_nodes(m); i++) {
        (void)ert_model_node_op(m, i);
        (void)ert_model_node_name(m, i);
    }
    (void)ert_model_n_params(m);
}

/* Recompute the section, table and header CRCs where the table is in range. */
static void fix_crcs(uint8_t *f, size_t n) {
    if (n < ERTF_HEADER_SIZE || !ert_format_sniff(f, n)) return;
    uint32_t ns = ertf_rd32(f + ERTF_H_N_SECTIONS);
    if (ns <= ERTF_MAX_SECTIONS && ERTF_HEADER_SIZE + (size_t)ns * ERTF_SECTION_ENTRY_SIZE <= n) {
        for (uint32_t i = 0; i < ns; i++) {
            uint8_t *e = f + ERTF_HEADER_SIZE + ERTF_SECTION_ENTRY_SIZE * i;
            uint64_t off = ertf_rd64(e + 8), sz = ertf_rd64(e + 16);
            if (off <= n && sz <= n - off) ertf_wr32(e + 24, ert_crc32(0, f + off, (size_t)sz));
        }
        ertf_wr32(f + ERTF_H_TABLE_CRC, ert_crc32(0, f + ERTF_HEADER_SIZE, (size_t)ns * ERTF_SECTION_ENTRY_SIZE));
    }
    ertf_wr32(f + ERTF_H_CRC, ert_crc32(0, f, ERTF_H_CRC));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ert_context *ctx;
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 0;
    ert_model *m = NULL;
    if (ert_model_load_memory(ctx, data, size, 0, &m) == ERT_OK) {
        poke(m);
        ert_model_free(m);
    } else if (ert_last_error(ctx)[0] == 0) {
        __builtin_trap(); /* every failure must say why */
    }
    /* In place: the buffer must be 64-byte aligned and outlive the model. */
    uint8_t *al = aligned_alloc(64, (size + 63) / 64 * 64 + 64);
    if (al) {
        memcpy(al, data, size);
        fix_crcs(al, size);
        m = NULL;
        if (ert_model_load_memory(ctx, al, size, ERT_LOAD_NO_COPY, &m) == ERT_OK) {
            poke(m);
            ert_model_free(m);
        }
        free(al);
    }
    ert_context_free(ctx);
    return 0;
}
