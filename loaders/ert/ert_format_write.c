/*
 * ert_format_write.c - write an ert_model as a .ert file (docs/ert-format.md).
 *
 * Steps:
 *   1. Check the model can be represented (dtypes, ranks, weight sizes).
 *   2. Build the metadata sections (strings, tensors, nodes, attributes, aux
 *      arrays, indices, graph) in memory; lay out the weight blob (every
 *      tensor 64-byte aligned) without copying it.
 *   3. Write through the one atomic writer (core/fileio.c: ert_file_writer):
 *      zeros where header and table go, metadata, then the weights streamed
 *      from the tensors while their CRC is computed, then the header and
 *      table written at offset 0.
 *   4. Commit: fsync, rename over PATH, fsync the directory.
 * Any failure before the commit discards the new file: PATH is untouched.
 *
 * Limits: counts and string offsets are u32 in the format; models past that
 * (4 GiB of names) are refused with ERT_E_UNSUPPORTED. Metadata is held in
 * memory once (small next to weights); weights are never copied.
 */
#include "ert_format_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ buffer */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

/* Reserve `len` zeroed bytes at the end; NULL (and oom set) on failure. */
static uint8_t *wb_grow(wbuf *b, size_t len) {
    if (b->oom) return NULL;
    size_t need;
    if (ert_add_ovf(b->n, len, &need)) { b->oom = true; return NULL; }
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) {
            if (ert_mul_ovf(cap, 2, &cap)) { b->oom = true; return NULL; }
        }
        uint8_t *np = realloc(b->p, cap);
        if (!np) { b->oom = true; return NULL; }
        b->p = np;
        b->cap = cap;
    }
    uint8_t *r = b->p + b->n;
    memset(r, 0, len);
    b->n = need;
    return r;
}

static void wb_u32(wbuf *b, uint32_t v) { uint8_t *p = wb_grow(b, 4); if (p) ertf_wr32(p, v); }
static void wb_u64(wbuf *b, uint64_t v) { uint8_t *p = wb_grow(b, 8); if (p) ertf_wr64(p, v); }
static void wb_align(wbuf *b, size_t a) { if (b->n % a) wb_grow(b, a - b->n % a); }

/* Append a string to the string table; returns its offset, or ERTF_NO_STRING
 * for NULL. *too_big is set when offsets would not fit in u32. */
static uint32_t wb_str(wbuf *b, const char *s, bool *too_big) {
    if (!s) return ERTF_NO_STRING;
    size_t off = b->n, len = strlen(s) + 1;
    if (off >= ERTF_NO_STRING || len > ERTF_NO_STRING - off) { *too_big = true; return 0; }
    uint8_t *p = wb_grow(b, len);
    if (p) memcpy(p, s, len);
    return (uint32_t)off;
}

/* ------------------------------------------------------------------ I/O */


static const uint8_t ZEROS[ERTF_WEIGHT_ALIGN];

/* Does tensor t go into the weight blob? */
static bool has_data(const ert_tensor *t) {
    if (t->role == ERT_ROLE_WEIGHT) return true;
    return (t->role == ERT_ROLE_GRAD || t->role == ERT_ROLE_OPT_STATE) && t->data != NULL;
}

/* ------------------------------------------------------------------ layout */

typedef struct layout {
    wbuf sec[ERTF_SEC_KNOWN_END]; /* metadata sections, by type (WEIGHTS unused) */
    uint64_t *data_off;           /* per tensor: offset in the weight blob */
    uint64_t weights_size;
} layout;

static void layout_free(layout *L) {
    for (int i = 0; i < ERTF_SEC_KNOWN_END; i++) free(L->sec[i].p);
    free(L->data_off);
}

static ert_status build_layout(const ert_model *m, layout *L) {
    ert_context *ctx = m->ctx;
    bool too_big = false;
    wbuf *S = &L->sec[ERTF_SEC_STRINGS], *T = &L->sec[ERTF_SEC_TENSORS], *N = &L->sec[ERTF_SEC_NODES],
         *A = &L->sec[ERTF_SEC_ATTRS], *X = &L->sec[ERTF_SEC_AUX], *I = &L->sec[ERTF_SEC_INDICES],
         *G = &L->sec[ERTF_SEC_GRAPH];

    wb_grow(S, 1); /* offset 0 is "" so the table is never empty */

    if (m->n_tensors < 0 || m->n_nodes < 0 || m->n_inputs < 0 || m->n_outputs < 0)
        return ert_set_error(ctx, ERT_E_INTERNAL, ".ert write: negative count in model");
    L->data_off = calloc((size_t)m->n_tensors + 1, sizeof *L->data_off);
    if (!L->data_off) return ert_set_error(ctx, ERT_E_NOMEM, ".ert write: out of memory");

    uint64_t woff = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const ert_tensor *t = &m->tensors[i];
        const char *nm = t->name ? t->name : "";
        /* Activations may be UNDEFINED (inferred at session create). */
        if ((unsigned)t->dtype >= ERT_DTYPE_COUNT || (has_data(t) && ert_dtype_size(t->dtype) == 0))
            return ert_set_error(ctx, ERT_E_ARG, ".ert write: tensor %d '%s': invalid dtype %d", i, nm, (int)t->dtype);
        if (t->ndim < 0 || t->ndim > ERT_MAX_DIMS)
            return ert_set_error(ctx, ERT_E_ARG, ".ert write: tensor %d '%s': ndim %d", i, nm, t->ndim);
        if ((unsigned)t->role > ERT_ROLE_OPT_STATE)
            return ert_set_error(ctx, ERT_E_ARG, ".ert write: tensor %d '%s': invalid role %d", i, nm, (int)t->role);
        uint32_t flags = 0;
        uint64_t dsize = 0;
        if (has_data(t)) {
            size_t nb = ert_dtype_size(t->dtype);
            for (int k = 0; k < t->ndim; k++) {
                if (t->dims[k] < 0 || ert_mul_ovf(nb, (size_t)t->dims[k], &nb))
                    return ert_set_error(ctx, ERT_E_ARG, ".ert write: tensor %d '%s': data tensor with dynamic or huge dims", i, nm);
            }
            if (nb > 0 && !t->data)
                return ert_set_error(ctx, ERT_E_ARG, ".ert write: tensor %d '%s': weight without data", i, nm);
            flags |= ERTF_T_HAS_DATA;
            dsize = nb;
            woff = ert_align_up(woff, ERTF_WEIGHT_ALIGN);
            L->data_off[i] = woff;
            if (__builtin_add_overflow(woff, dsize, &woff))
                return ert_set_error(ctx, ERT_E_ARG, ".ert write: weights exceed 2^64 bytes");
        }
        wb_u32(T, wb_str(S, t->name, &too_big));
        wb_u32(T, (uint32_t)t->dtype);
        wb_u32(T, (uint32_t)t->role);
        wb_u32(T, (uint32_t)t->ndim);
        wb_u32(T, flags);
        wb_u32(T, 0);
        wb_u64(T, flags ? L->data_off[i] : 0);
        wb_u64(T, dsize);
        for (int k = 0; k < ERT_MAX_DIMS; k++) wb_u64(T, k < t->ndim ? (uint64_t)t->dims[k] : 0);
    }
    L->weights_size = woff;

    /* Op names repeat on every node: intern them once per op. */
    uint32_t op_str[ERT_OP_COUNT];
    for (int k = 0; k < ERT_OP_COUNT; k++) op_str[k] = ERTF_NO_STRING;
    uint32_t n_idx = 0, n_attr = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const ert_node *nd = &m->nodes[i];
        const ert_op_def *def = ert_op_get(nd->op);
        if (!def || (unsigned)nd->op >= ERT_OP_COUNT)
            return ert_set_error(ctx, ERT_E_ARG, ".ert write: node %d: invalid op %d", i, (int)nd->op);
        if (op_str[nd->op] == ERTF_NO_STRING) op_str[nd->op] = wb_str(S, def->name, &too_big);
        if (nd->n_in < 0 || nd->n_out < 0 || nd->n_attrs < 0)
            return ert_set_error(ctx, ERT_E_ARG, ".ert write: node %d: negative count", i);
        wb_u32(N, op_str[nd->op]);
        wb_u32(N, wb_str(S, nd->name, &too_big));
        wb_u32(N, (uint32_t)nd->n_in);
        wb_u32(N, (uint32_t)nd->n_out);
        wb_u32(N, n_idx);
        wb_u32(N, n_attr);
        wb_u32(N, (uint32_t)nd->n_attrs);
        wb_u32(N, 0);
        for (int k = 0; k < nd->n_in; k++) wb_u32(I, (uint32_t)nd->in[k]);
        for (int k = 0; k < nd->n_out; k++) wb_u32(I, (uint32_t)nd->out[k]);
        n_idx += (uint32_t)nd->n_in + (uint32_t)nd->n_out;
        for (int k = 0; k < nd->n_attrs; k++) {
            const ert_attr_val *a = &nd->attrs[k];
            uint64_t val = 0;
            uint32_t cnt = 0;
            switch (a->type) {
            case ERT_ATTR_INT: val = (uint64_t)a->i; break;
            case ERT_ATTR_FLOAT: val = ertf_f32_bits(a->f); break;
            case ERT_ATTR_INTS:
                wb_align(X, 8);
                val = X->n;
                cnt = (uint32_t)(a->n > 0 ? a->n : 0);
                for (uint32_t e = 0; e < cnt; e++) wb_u64(X, (uint64_t)a->ints[e]);
                break;
            case ERT_ATTR_FLOATS:
                wb_align(X, 4);
                val = X->n;
                cnt = (uint32_t)(a->n > 0 ? a->n : 0);
                for (uint32_t e = 0; e < cnt; e++) wb_u32(X, ertf_f32_bits(a->floats[e]));
                break;
            case ERT_ATTR_STRING: val = wb_str(S, a->s ? a->s : "", &too_big); break;
            default:
                return ert_set_error(ctx, ERT_E_ARG, ".ert write: node %d attribute '%s': invalid type %d", i,
                                     a->name ? a->name : "", (int)a->type);
            }
            wb_u32(A, wb_str(S, a->name ? a->name : "", &too_big));
            wb_u32(A, (uint32_t)a->type);
            wb_u32(A, cnt);
            wb_u32(A, 0);
            wb_u64(A, val);
        }
        n_attr += (uint32_t)nd->n_attrs;
    }
    uint32_t in_first = n_idx;
    for (int k = 0; k < m->n_inputs; k++) wb_u32(I, (uint32_t)m->inputs[k]);
    uint32_t out_first = in_first + (uint32_t)m->n_inputs;
    for (int k = 0; k < m->n_outputs; k++) wb_u32(I, (uint32_t)m->outputs[k]);

    wb_u32(G, (uint32_t)m->n_inputs);
    wb_u32(G, in_first);
    wb_u32(G, (uint32_t)m->n_outputs);
    wb_u32(G, out_first);
    wb_u32(G, (uint32_t)m->opset);
    wb_u32(G, wb_str(S, "edgert " ERT_VERSION_STRING, &too_big));
    wb_u64(G, 0);

    for (int k = 0; k < ERTF_SEC_KNOWN_END; k++)
        if (L->sec[k].oom) return ert_set_error(ctx, ERT_E_NOMEM, ".ert write: out of memory building metadata");
    if (too_big || I->n / 4 > UINT32_MAX || A->n / ERTF_ATTR_ENTRY_SIZE > UINT32_MAX)
        return ert_set_error(ctx, ERT_E_UNSUPPORTED, ".ert write: model metadata exceeds the format's 32-bit offsets");
    return ERT_OK;
}

/* ------------------------------------------------------------------ write */

/* Write the whole file to fw. Returns ERT_OK or ERT_E_IO with ctx's message. */
static ert_status write_file(const ert_model *m, const layout *L, ert_file_writer *fw) {
    ert_status st;
    static const int order[] = {ERTF_SEC_STRINGS, ERTF_SEC_TENSORS, ERTF_SEC_NODES, ERTF_SEC_ATTRS,
                                ERTF_SEC_AUX, ERTF_SEC_INDICES, ERTF_SEC_GRAPH};
    enum { NSEC = sizeof order / sizeof order[0] + 1 };
    uint8_t head[ERTF_HEADER_SIZE + NSEC * ERTF_SECTION_ENTRY_SIZE];
    memset(head, 0, sizeof head);

    if ((st = ert_file_writer_write(fw, head, sizeof head))) return st;
    uint64_t pos = sizeof head;
    for (size_t k = 0; k < NSEC; k++) {
        bool weights = k == NSEC - 1;
        int type = weights ? ERTF_SEC_WEIGHTS : order[k];
        size_t align = weights ? ERTF_WEIGHT_ALIGN : ERTF_SECTION_ALIGN;
        size_t pad = (size_t)(ert_align_up((size_t)pos, align) - pos);
        if (pad && (st = ert_file_writer_write(fw, ZEROS, pad))) return st;
        pos += pad;
        uint64_t start = pos, size;
        uint32_t crc = 0;
        if (!weights) {
            const wbuf *b = &L->sec[type];
            if (b->n && (st = ert_file_writer_write(fw, b->p, b->n))) return st;
            crc = ert_crc32(0, b->p, b->n);
            size = b->n;
        } else {
            /* Stream each weight at its 64-aligned blob offset. */
            uint64_t w = 0;
            for (int i = 0; i < m->n_tensors; i++) {
                const ert_tensor *t = &m->tensors[i];
                if (!has_data(t)) continue;
                size_t nb = 0;
                uint64_t off = L->data_off[i];
                size_t gap = (size_t)(off - w);
                if (gap) {
                    if ((st = ert_file_writer_write(fw, ZEROS, gap))) return st;
                    crc = ert_crc32(crc, ZEROS, gap);
                }
                /* Size recomputed exactly as in build_layout (checked there). */
                nb = ert_dtype_size(t->dtype);
                for (int d = 0; d < t->ndim; d++) nb *= (size_t)t->dims[d];
                if (nb && (st = ert_file_writer_write(fw, t->data, nb))) return st;
                if (nb) crc = ert_crc32(crc, t->data, nb);
                w = off + nb;
            }
            size = w;
        }
        uint8_t *e = head + ERTF_HEADER_SIZE + k * ERTF_SECTION_ENTRY_SIZE;
        ertf_wr32(e + 0, (uint32_t)type);
        ertf_wr32(e + 4, 0);
        ertf_wr64(e + 8, start);
        ertf_wr64(e + 16, size);
        ertf_wr32(e + 24, crc);
        pos += size;
    }
    memcpy(head, ERTF_MAGIC, ERTF_MAGIC_SIZE);
    ertf_wr32(head + ERTF_H_VERSION, ERTF_VERSION);
    ertf_wr32(head + ERTF_H_FLAGS, 0);
    ertf_wr32(head + ERTF_H_HEADER_SIZE, ERTF_HEADER_SIZE);
    ertf_wr32(head + ERTF_H_N_SECTIONS, NSEC);
    ertf_wr64(head + ERTF_H_FILE_SIZE, pos);
    ertf_wr64(head + ERTF_H_TABLE_OFFSET, ERTF_HEADER_SIZE);
    ertf_wr32(head + ERTF_H_TABLE_CRC, ert_crc32(0, head + ERTF_HEADER_SIZE, NSEC * ERTF_SECTION_ENTRY_SIZE));
    ertf_wr32(head + ERTF_H_CRC, ert_crc32(0, head, ERTF_H_CRC));
    return ert_file_writer_write_at(fw, 0, head, sizeof head);
}

ert_status ert_format_write(const ert_model *m, const char *path) {
    if (!m) return ERT_E_ARG;
    ert_context *ctx = m->ctx;
    if (!path || !*path) return ert_set_error(ctx, ERT_E_ARG, ".ert write: empty path");

    layout L;
    memset(&L, 0, sizeof L);
    ert_status st = build_layout(m, &L);
    if (st != ERT_OK) { layout_free(&L); return st; }

    /* the one atomic write (core/fileio.c): links followed, devices refused */
    ert_file_writer *w = NULL;
    if ((st = ert_file_writer_open(ctx, path, &w)) == ERT_OK) {
        st = write_file(m, &L, w);
        if (st == ERT_OK) st = ert_file_writer_commit(w);
        else ert_file_writer_abort(w);
    }
    layout_free(&L);
    return st;
}
