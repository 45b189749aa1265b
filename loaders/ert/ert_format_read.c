/*
 * ert_format_read.c - parse a .ert file (docs/ert-format.md) into an ert_model.
 *
 * The bytes are hostile (models arrive over the air). Steps, each finished
 * before the next touches anything it vouches for:
 *   1. Header: size, magic, version, flags, header_size, file_size == size,
 *      header CRC.
 *   2. Section table: its range and CRC; per entry: range (overflow-safe),
 *      alignment, flags, duplicates, unknown types (skipped if OPTIONAL, else
 *      ERT_E_UNSUPPORTED), no overlap, CRC of the section.
 *   3. Section shapes: STRINGS ends in NUL, tables are whole entries.
 *   4. Every tensor, node, attribute and graph field: string offsets, enums,
 *      counts, index ranges, dims, data ranges; op names known (else
 *      ERT_E_UNSUPPORTED naming op and node); names unique.
 *   5. Build the model with the core/model.c helpers, point weights into
 *      the buffer (borrow) or a single 64-byte-aligned copy, and run
 *      ert_model_validate (cycles, tensors defined once).
 * Every failure is ERT_E_FORMAT (or UNSUPPORTED) with a message naming the
 * item, field and offset. No recursion; memory is O(metadata).
 *
 * Limits: little-endian hosts only (weights are used in place); at most 64
 * sections; counts are u32.
 */
#include "ert_format_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sec {
    const uint8_t *p;
    uint64_t off, size;
    bool present;
} sec;

typedef struct reader {
    ert_context *ctx;
    const uint8_t *base;
    size_t size;
    sec s[ERTF_SEC_KNOWN_END];
    uint32_t n_tensors, n_nodes, n_attrs, n_indices;
} reader;

static ert_status fail(reader *r, ert_status st, const char *fmt, ...) ERT_PRINTF(3, 4);
static ert_status fail(reader *r, ert_status st, const char *fmt, ...) {
    char msg[ERT_ERRMSG_SIZE - 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ert_set_error(r->ctx, st, ".ert: %s", msg);
}
#define FORMAT(...) fail(r, ERT_E_FORMAT, __VA_ARGS__)

/* [off, off + len) inside [0, limit)? Written so nothing can overflow. */
static bool in_range(uint64_t off, uint64_t len, uint64_t limit) {
    return off <= limit && len <= limit - off;
}

static const char *sec_name(uint32_t t) {
    static const char *const names[] = {"?", "STRINGS", "TENSORS", "NODES", "ATTRS",
                                        "AUX", "INDICES", "GRAPH", "WEIGHTS"};
    return t < ERTF_SEC_KNOWN_END ? names[t] : "unknown";
}

/* String at offset `off` of the string table, or NULL (reported) if out of
 * range. Step 3 made the table end in NUL, so the string is terminated.
 * ERTF_NO_STRING gives *out = NULL when allow_null. */
static bool get_str(reader *r, uint32_t off, bool allow_null, const char **out, const char *what) {
    const sec *S = &r->s[ERTF_SEC_STRINGS];
    if (off == ERTF_NO_STRING && allow_null) { *out = NULL; return true; }
    if (off >= S->size) {
        FORMAT("%s: string offset %u past end of string table (%llu bytes)", what, off,
               (unsigned long long)S->size);
        return false;
    }
    *out = (const char *)S->p + off;
    return true;
}

/* ------------------------------------------------------------------ 1-3 */

static ert_status check_header_and_sections(reader *r) {
    const uint8_t *h = r->base;
    if (r->size < ERTF_HEADER_SIZE)
        return FORMAT("file is %zu bytes, smaller than the %u-byte header", r->size, ERTF_HEADER_SIZE);
    if (memcmp(h, ERTF_MAGIC, ERTF_MAGIC_SIZE) != 0) return FORMAT("bad magic at offset 0 (not an .ert file)");
    uint32_t version = ertf_rd32(h + ERTF_H_VERSION);
    if (ert_crc32(0, h, ERTF_H_CRC) != ertf_rd32(h + ERTF_H_CRC))
        return FORMAT("header CRC mismatch (offset %d): file corrupted", ERTF_H_CRC);
    if (version != ERTF_VERSION)
        return fail(r, ERT_E_UNSUPPORTED, "format version %u at offset %d; this edgert reads version %u",
                    version, ERTF_H_VERSION, ERTF_VERSION);
    uint32_t flags = ertf_rd32(h + ERTF_H_FLAGS);
    if (flags) return fail(r, ERT_E_UNSUPPORTED, "unknown header flags 0x%x at offset %d", flags, ERTF_H_FLAGS);
    if (ertf_rd32(h + ERTF_H_HEADER_SIZE) != ERTF_HEADER_SIZE)
        return FORMAT("header_size %u at offset %d, expected %u", ertf_rd32(h + ERTF_H_HEADER_SIZE),
                      ERTF_H_HEADER_SIZE, ERTF_HEADER_SIZE);
    uint64_t fsize = ertf_rd64(h + ERTF_H_FILE_SIZE);
    if (fsize != (uint64_t)r->size)
        return FORMAT("file_size field says %llu bytes but the file has %zu (truncated or padded)",
                      (unsigned long long)fsize, r->size);
    for (int k = 44; k < ERTF_H_CRC; k++)
        if (h[k]) return FORMAT("reserved header byte at offset %d is not 0", k);
    uint32_t n_sec = ertf_rd32(h + ERTF_H_N_SECTIONS);
    uint64_t toff = ertf_rd64(h + ERTF_H_TABLE_OFFSET);
    if (n_sec == 0 || n_sec > ERTF_MAX_SECTIONS)
        return FORMAT("n_sections %u at offset %d out of range [1, %u]", n_sec, ERTF_H_N_SECTIONS, ERTF_MAX_SECTIONS);
    if (toff != ERTF_HEADER_SIZE)
        return FORMAT("section table offset %llu, expected %u", (unsigned long long)toff, ERTF_HEADER_SIZE);
    uint64_t tsize = (uint64_t)n_sec * ERTF_SECTION_ENTRY_SIZE;
    if (!in_range(toff, tsize, r->size))
        return FORMAT("section table [%llu, %llu) past end of file (%zu bytes)", (unsigned long long)toff,
                      (unsigned long long)(toff + tsize), r->size);
    if (ert_crc32(0, h + toff, (size_t)tsize) != ertf_rd32(h + ERTF_H_TABLE_CRC))
        return FORMAT("section table CRC mismatch: file corrupted");
    uint64_t data_start = toff + tsize;

    uint64_t offs[ERTF_MAX_SECTIONS], ends[ERTF_MAX_SECTIONS];
    for (uint32_t i = 0; i < n_sec; i++) {
        const uint8_t *e = h + toff + (uint64_t)i * ERTF_SECTION_ENTRY_SIZE;
        uint32_t type = ertf_rd32(e), sflags = ertf_rd32(e + 4);
        uint64_t off = ertf_rd64(e + 8), size = ertf_rd64(e + 16);
        uint32_t crc = ertf_rd32(e + 24);
        uint64_t eoff = toff + (uint64_t)i * ERTF_SECTION_ENTRY_SIZE;
        if (sflags & ~ERTF_SEC_OPTIONAL)
            return FORMAT("section %u (type %u, entry at offset %llu): unknown flags 0x%x", i, type,
                          (unsigned long long)eoff, sflags);
        if (ertf_rd32(e + 28)) return FORMAT("section %u: reserved field is not 0", i);
        if (!in_range(off, size, r->size) || off < data_start)
            return FORMAT("section %u (%s): range [%llu, +%llu) outside the data area [%llu, %zu)", i,
                          sec_name(type), (unsigned long long)off, (unsigned long long)size,
                          (unsigned long long)data_start, r->size);
        uint64_t align = type == ERTF_SEC_WEIGHTS ? ERTF_WEIGHT_ALIGN : ERTF_SECTION_ALIGN;
        if (off % align)
            return FORMAT("section %u (%s): offset %llu not a multiple of %llu", i, sec_name(type),
                          (unsigned long long)off, (unsigned long long)align);
        for (uint32_t j = 0; j < i; j++)
            if (off < ends[j] && offs[j] < off + size && size && ends[j] > offs[j])
                return FORMAT("section %u [%llu, %llu) overlaps section %u [%llu, %llu)", i,
                              (unsigned long long)off, (unsigned long long)(off + size), j,
                              (unsigned long long)offs[j], (unsigned long long)ends[j]);
        offs[i] = off;
        ends[i] = off + size;
        if (ert_crc32(0, h + off, (size_t)size) != crc)
            return FORMAT("section %u (%s) at offset %llu: CRC mismatch: file corrupted", i, sec_name(type),
                          (unsigned long long)off);
        if (type == 0 || type >= ERTF_SEC_KNOWN_END) {
            if (sflags & ERTF_SEC_OPTIONAL) continue; /* a newer writer's extra data we may ignore */
            return fail(r, ERT_E_UNSUPPORTED,
                        "section %u has unknown type %u and is not optional (written by a newer edgert?)", i, type);
        }
        if (r->s[type].present) return FORMAT("section %u: second %s section", i, sec_name(type));
        r->s[type] = (sec){.p = h + off, .off = off, .size = size, .present = true};
    }

    static const uint32_t required[] = {ERTF_SEC_STRINGS, ERTF_SEC_TENSORS, ERTF_SEC_GRAPH};
    for (size_t k = 0; k < sizeof required / sizeof required[0]; k++)
        if (!r->s[required[k]].present) return FORMAT("required %s section missing", sec_name(required[k]));
    /* Absent optional sections read as empty; give them a valid pointer. */
    for (uint32_t t = 1; t < ERTF_SEC_KNOWN_END; t++)
        if (!r->s[t].present) r->s[t].p = h;

    const sec *S = &r->s[ERTF_SEC_STRINGS];
    if (S->size == 0 || S->p[S->size - 1] != 0)
        return FORMAT("string table at offset %llu is empty or does not end with NUL", (unsigned long long)S->off);
    static const struct { uint32_t type, entry; } tables[] = {
        {ERTF_SEC_TENSORS, ERTF_TENSOR_ENTRY_SIZE}, {ERTF_SEC_NODES, ERTF_NODE_ENTRY_SIZE},
        {ERTF_SEC_ATTRS, ERTF_ATTR_ENTRY_SIZE}, {ERTF_SEC_INDICES, 4}};
    uint32_t *counts[] = {&r->n_tensors, &r->n_nodes, &r->n_attrs, &r->n_indices};
    for (size_t k = 0; k < sizeof tables / sizeof tables[0]; k++) {
        const sec *t = &r->s[tables[k].type];
        if (t->size % tables[k].entry)
            return FORMAT("%s section size %llu is not a multiple of its %u-byte entries", sec_name(tables[k].type),
                          (unsigned long long)t->size, tables[k].entry);
        if (t->size / tables[k].entry > INT32_MAX)
            return FORMAT("%s section has more than 2^31 entries", sec_name(tables[k].type));
        *counts[k] = (uint32_t)(t->size / tables[k].entry);
    }
    if (r->s[ERTF_SEC_GRAPH].size != ERTF_GRAPH_SIZE)
        return FORMAT("GRAPH section is %llu bytes, expected %u", (unsigned long long)r->s[ERTF_SEC_GRAPH].size,
                      ERTF_GRAPH_SIZE);
    return ERT_OK;
}

/* ------------------------------------------------------------------ 4 */

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Tensor entries. Fills names[i] (NULL if unnamed). */
static ert_status check_tensors(reader *r, const char **names) {
    const sec *T = &r->s[ERTF_SEC_TENSORS];
    const sec *W = &r->s[ERTF_SEC_WEIGHTS];
    char what[96];
    for (uint32_t i = 0; i < r->n_tensors; i++) {
        const uint8_t *e = T->p + (size_t)i * ERTF_TENSOR_ENTRY_SIZE;
        uint64_t eoff = T->off + (uint64_t)i * ERTF_TENSOR_ENTRY_SIZE;
        snprintf(what, sizeof what, "tensor %u (entry at offset %llu)", i, (unsigned long long)eoff);
        if (!get_str(r, ertf_rd32(e), true, &names[i], what)) return ERT_E_FORMAT;
        const char *nm = names[i] ? names[i] : "";
        uint32_t dtype = ertf_rd32(e + 4), role = ertf_rd32(e + 8), ndim = ertf_rd32(e + 12);
        uint32_t flags = ertf_rd32(e + 16);
        uint64_t doff = ertf_rd64(e + 24), dsize = ertf_rd64(e + 32);
        if (dtype >= ERT_DTYPE_COUNT) return FORMAT("tensor %u '%.64s': invalid dtype %u", i, nm, dtype);
        if (role > ERT_ROLE_OPT_STATE) return FORMAT("tensor %u '%.64s': invalid role %u", i, nm, role);
        if (ndim > ERT_MAX_DIMS) return FORMAT("tensor %u '%.64s': ndim %u > %d", i, nm, ndim, ERT_MAX_DIMS);
        if (flags & ~ERTF_T_HAS_DATA) return FORMAT("tensor %u '%.64s': unknown flags 0x%x", i, nm, flags);
        if (ertf_rd32(e + 20)) return FORMAT("tensor %u '%.64s': reserved field is not 0", i, nm);
        bool dyn = false;
        uint64_t nbytes = ert_dtype_size((ert_dtype)dtype);
        bool ovf = false;
        for (uint32_t k = 0; k < ERT_MAX_DIMS; k++) {
            int64_t d = (int64_t)ertf_rd64(e + 40 + 8 * k);
            if (k >= ndim) {
                if (d != 0) return FORMAT("tensor %u '%.64s': dims[%u] = %lld beyond ndim %u is not 0", i, nm, k, (long long)d, ndim);
                continue;
            }
            if (d < -1) return FORMAT("tensor %u '%.64s': dims[%u] = %lld < -1", i, nm, k, (long long)d);
            if (d == -1) { dyn = true; continue; }
            if (__builtin_mul_overflow(nbytes, (uint64_t)d, &nbytes)) ovf = true;
        }
        bool data = flags & ERTF_T_HAS_DATA;
        if (role == ERT_ROLE_WEIGHT && !data) return FORMAT("tensor %u '%.64s': weight without data", i, nm);
        if (!data) {
            if (role != ERT_ROLE_WEIGHT && role != ERT_ROLE_GRAD && role != ERT_ROLE_OPT_STATE && (doff || dsize))
                return FORMAT("tensor %u '%.64s': data range on a tensor without data", i, nm);
            if (doff || dsize) return FORMAT("tensor %u '%.64s': data range without HAS_DATA flag", i, nm);
            continue;
        }
        if (role == ERT_ROLE_ACTIVATION || role == ERT_ROLE_INPUT || role == ERT_ROLE_OUTPUT)
            return FORMAT("tensor %u '%.64s': role %u cannot carry data", i, nm, role);
        if (dtype == ERT_DTYPE_UNDEFINED) return FORMAT("tensor %u '%.64s': data tensor with dtype UNDEFINED", i, nm);
        if (dyn) return FORMAT("tensor %u '%.64s': data tensor has a dynamic (-1) dim", i, nm);
        if (ovf || nbytes > SIZE_MAX)
            return FORMAT("tensor %u '%.64s': element count x dtype size overflows", i, nm);
        if (nbytes != dsize)
            return FORMAT("tensor %u '%.64s': data_size %llu but dims x dtype give %llu bytes", i, nm,
                          (unsigned long long)dsize, (unsigned long long)nbytes);
        if (doff % ERTF_WEIGHT_ALIGN)
            return FORMAT("tensor %u '%.64s': data offset %llu not %u-byte aligned", i, nm,
                          (unsigned long long)doff, ERTF_WEIGHT_ALIGN);
        if (!in_range(doff, dsize, W->size))
            return FORMAT("tensor %u '%.64s': data range [%llu, +%llu) past end of weight section (%llu bytes at file offset %llu)",
                          i, nm, (unsigned long long)doff, (unsigned long long)dsize,
                          (unsigned long long)W->size, (unsigned long long)W->off);
    }
    /* Unique names: sort pointers, compare neighbours (O(n log n) even for
     * hostile counts). */
    const char **sorted = malloc(((size_t)r->n_tensors + 1) * sizeof *sorted);
    if (!sorted) return fail(r, ERT_E_NOMEM, "out of memory checking %u tensor names", r->n_tensors);
    size_t n = 0;
    for (uint32_t i = 0; i < r->n_tensors; i++)
        if (names[i]) sorted[n++] = names[i];
    qsort(sorted, n, sizeof *sorted, cmp_str_ptr);
    for (size_t i = 1; i < n; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            ert_status st = FORMAT("tensor name '%.64s' used twice", sorted[i]);
            free(sorted);
            return st;
        }
    free(sorted);
    return ERT_OK;
}

static int32_t rd_index(const reader *r, uint32_t k) {
    return (int32_t)ertf_rd32(r->s[ERTF_SEC_INDICES].p + (size_t)k * 4);
}

/* Node and attribute entries (without building anything). */
static ert_status check_nodes(reader *r) {
    const sec *N = &r->s[ERTF_SEC_NODES], *A = &r->s[ERTF_SEC_ATTRS], *X = &r->s[ERTF_SEC_AUX];
    char what[96];
    /* Totals over all nodes: entries of the index and attribute tables and
     * AUX bytes may each be used once, so a small file cannot expand into a
     * huge model by pointing many nodes at the same ranges. */
    uint64_t used_idx = 0, used_attrs = 0, used_aux = 0;
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        const uint8_t *e = N->p + (size_t)i * ERTF_NODE_ENTRY_SIZE;
        uint64_t eoff = N->off + (uint64_t)i * ERTF_NODE_ENTRY_SIZE;
        const char *op, *name;
        snprintf(what, sizeof what, "node %u (entry at offset %llu) op", i, (unsigned long long)eoff);
        if (!get_str(r, ertf_rd32(e), false, &op, what)) return ERT_E_FORMAT;
        snprintf(what, sizeof what, "node %u (entry at offset %llu) name", i, (unsigned long long)eoff);
        if (!get_str(r, ertf_rd32(e + 4), true, &name, what)) return ERT_E_FORMAT;
        const char *nm = name ? name : "";
        const ert_op_def *def = ert_op_find(op);
        if (!def) return fail(r, ERT_E_UNSUPPORTED, "node %u '%.64s': unsupported op '%.64s'", i, nm, op);
        uint32_t n_in = ertf_rd32(e + 8), n_out = ertf_rd32(e + 12), io = ertf_rd32(e + 16);
        uint32_t af = ertf_rd32(e + 20), na = ertf_rd32(e + 24);
        if (ertf_rd32(e + 28)) return FORMAT("node %u '%.64s': reserved field is not 0", i, nm);
        if (n_in < (uint32_t)def->min_in || (def->max_in >= 0 && n_in > (uint32_t)def->max_in) ||
            n_out < (uint32_t)def->min_out || (def->max_out >= 0 && n_out > (uint32_t)def->max_out))
            return FORMAT("node %u '%.64s' (%s): %u inputs / %u outputs outside the op's range", i, nm, op, n_in, n_out);
        if (!in_range(io, (uint64_t)n_in + n_out, r->n_indices))
            return FORMAT("node %u '%.64s': I/O indices [%u, +%llu) past end of index table (%u entries)", i, nm,
                          io, (unsigned long long)n_in + n_out, r->n_indices);
        for (uint32_t k = 0; k < n_in + n_out; k++) {
            int32_t t = rd_index(r, io + k);
            bool omitted_ok = k < n_in;
            if (t >= (int64_t)r->n_tensors || t < (omitted_ok ? -1 : 0))
                return FORMAT("node %u '%.64s': %s %u is tensor index %d, valid [%d, %u)", i, nm,
                              k < n_in ? "input" : "output", k < n_in ? k : k - n_in, t, omitted_ok ? -1 : 0,
                              r->n_tensors);
        }
        if (!in_range(af, na, r->n_attrs))
            return FORMAT("node %u '%.64s': attributes [%u, +%u) past end of attribute table (%u entries)", i, nm,
                          af, na, r->n_attrs);
        used_idx += (uint64_t)n_in + n_out;
        used_attrs += na;
        if (used_idx > r->n_indices || used_attrs > r->n_attrs)
            return FORMAT("node %u '%.64s': index or attribute entries shared between nodes", i, nm);
        for (uint32_t k = 0; k < na; k++) {
            const uint8_t *a = A->p + (size_t)(af + k) * ERTF_ATTR_ENTRY_SIZE;
            const char *an, *sv;
            snprintf(what, sizeof what, "node %u '%.32s' attribute %u name", i, nm, k);
            if (!get_str(r, ertf_rd32(a), false, &an, what)) return ERT_E_FORMAT;
            uint32_t type = ertf_rd32(a + 4), cnt = ertf_rd32(a + 8);
            uint64_t val = ertf_rd64(a + 16);
            if (ertf_rd32(a + 12)) return FORMAT("node %u '%.64s' attribute '%.64s': reserved field is not 0", i, nm, an);
            bool arr = type == ERT_ATTR_INTS || type == ERT_ATTR_FLOATS;
            if (type < ERT_ATTR_INT || type > ERT_ATTR_STRING)
                return FORMAT("node %u '%.64s' attribute '%.64s': invalid type %u", i, nm, an, type);
            if (!arr && cnt) return FORMAT("node %u '%.64s' attribute '%.64s': count %u on a scalar", i, nm, an, cnt);
            if (arr) {
                uint64_t esz = type == ERT_ATTR_INTS ? 8 : 4;
                if (cnt > INT32_MAX || val % esz || !in_range(val, (uint64_t)cnt * esz, X->size))
                    return FORMAT("node %u '%.64s' attribute '%.64s': array [%llu, +%llu) misaligned or past end of AUX section (%llu bytes)",
                                  i, nm, an, (unsigned long long)val, (unsigned long long)cnt * esz,
                                  (unsigned long long)X->size);
                used_aux += (uint64_t)cnt * esz;
                if (used_aux > X->size)
                    return FORMAT("node %u '%.64s' attribute '%.64s': AUX arrays overlap (%llu bytes used of %llu)", i,
                                  nm, an, (unsigned long long)used_aux, (unsigned long long)X->size);
            } else if (type == ERT_ATTR_FLOAT && (val >> 32)) {
                return FORMAT("node %u '%.64s' attribute '%.64s': float value has high bits set", i, nm, an);
            } else if (type == ERT_ATTR_STRING) {
                snprintf(what, sizeof what, "node %u '%.32s' attribute '%.32s' value", i, nm, an);
                if (val > UINT32_MAX || !get_str(r, (uint32_t)val, false, &sv, what)) {
                    if (val > UINT32_MAX) return FORMAT("%s: string offset %llu out of range", what, (unsigned long long)val);
                    return ERT_E_FORMAT;
                }
            }
        }
    }
    const uint8_t *g = r->s[ERTF_SEC_GRAPH].p;
    uint8_t *seen = calloc((size_t)r->n_tensors + 1, 1); /* graph inputs listed once */
    if (!seen) return fail(r, ERT_E_NOMEM, "out of memory checking graph inputs");
    ert_status st = ERT_OK;
    for (int io = 0; io < 2 && st == ERT_OK; io++) {
        uint32_t n = ertf_rd32(g + 8 * io), first = ertf_rd32(g + 8 * io + 4);
        const char *which = io ? "outputs" : "inputs";
        if (!in_range(first, n, r->n_indices)) {
            st = FORMAT("graph %s [%u, +%u) past end of index table (%u entries)", which, first, n, r->n_indices);
            break;
        }
        used_idx += n;
        if (used_idx > r->n_indices) { st = FORMAT("graph %s share index entries with nodes", which); break; }
        for (uint32_t k = 0; k < n && st == ERT_OK; k++) {
            int32_t t = rd_index(r, first + k);
            if (t < 0 || (uint32_t)t >= r->n_tensors) {
                st = FORMAT("graph %s[%u] is tensor index %d, valid [0, %u)", which, k, t, r->n_tensors);
                break;
            }
            if (io) continue;
            /* A session writes into its inputs: never let one alias a weight
             * (read-only in a mapping), a node's output or another input. */
            uint32_t role = ertf_rd32(r->s[ERTF_SEC_TENSORS].p + (size_t)t * ERTF_TENSOR_ENTRY_SIZE + 8);
            if (role != ERT_ROLE_INPUT) st = FORMAT("graph input %u is tensor %d with role %u, not INPUT", k, t, role);
            else if (seen[t]) st = FORMAT("graph input %u: tensor %d listed twice", k, t);
            seen[t] = 1;
        }
    }
    free(seen);
    if (st != ERT_OK) return st;
    const char *producer;
    if (!get_str(r, ertf_rd32(g + 20), true, &producer, "graph producer")) return ERT_E_FORMAT;
    if (ertf_rd64(g + 24)) return FORMAT("GRAPH reserved field is not 0");
    return ERT_OK;
}

/* ------------------------------------------------------------------ 5 */

/* Arrays of a node's attributes are decoded into one scratch buffer (the file
 * may be unaligned for int64 when not borrowed, and is little-endian). */
static ert_status add_nodes(reader *r, ert_model *m) {
    const sec *N = &r->s[ERTF_SEC_NODES], *A = &r->s[ERTF_SEC_ATTRS], *X = &r->s[ERTF_SEC_AUX];
    ert_attr *attrs = NULL;
    uint8_t *scratch = NULL;
    size_t attrs_cap = 0, scratch_cap = 0;
    ert_status st = ERT_OK;
    for (uint32_t i = 0; i < r->n_nodes && st == ERT_OK; i++) {
        const uint8_t *e = N->p + (size_t)i * ERTF_NODE_ENTRY_SIZE;
        const char *op = (const char *)r->s[ERTF_SEC_STRINGS].p + ertf_rd32(e);
        uint32_t nmo = ertf_rd32(e + 4);
        const char *name = nmo == ERTF_NO_STRING ? NULL : (const char *)r->s[ERTF_SEC_STRINGS].p + nmo;
        uint32_t n_in = ertf_rd32(e + 8), n_out = ertf_rd32(e + 12), io = ertf_rd32(e + 16);
        uint32_t af = ertf_rd32(e + 20), na = ertf_rd32(e + 24);
        /* Scratch: ints (8-aligned) first, then I/O indices. */
        size_t arr_bytes = 0;
        for (uint32_t k = 0; k < na; k++) {
            const uint8_t *a = A->p + (size_t)(af + k) * ERTF_ATTR_ENTRY_SIZE;
            uint32_t type = ertf_rd32(a + 4), cnt = ertf_rd32(a + 8);
            if (type == ERT_ATTR_INTS || type == ERT_ATTR_FLOATS) arr_bytes += (size_t)cnt * 8; /* bounded by AUX */
        }
        size_t need = arr_bytes + ((size_t)n_in + n_out) * sizeof(int32_t) + 8;
        if (need > scratch_cap) {
            free(scratch);
            scratch = malloc(need);
            scratch_cap = scratch ? need : 0;
        }
        if (na > attrs_cap) {
            free(attrs);
            attrs = malloc((size_t)na * sizeof *attrs);
            attrs_cap = attrs ? na : 0;
        }
        if (!scratch || (na && !attrs)) { st = fail(r, ERT_E_NOMEM, "out of memory reading node %u", i); break; }
        uint8_t *sp = scratch;
        for (uint32_t k = 0; k < na; k++) {
            const uint8_t *a = A->p + (size_t)(af + k) * ERTF_ATTR_ENTRY_SIZE;
            ert_attr *d = &attrs[k];
            memset(d, 0, sizeof *d);
            d->name = (const char *)r->s[ERTF_SEC_STRINGS].p + ertf_rd32(a);
            d->type = (ert_attr_type)ertf_rd32(a + 4);
            uint32_t cnt = ertf_rd32(a + 8);
            uint64_t val = ertf_rd64(a + 16);
            switch (d->type) {
            case ERT_ATTR_INT: d->i = (int64_t)val; break;
            case ERT_ATTR_FLOAT: d->f = ertf_bits_f32((uint32_t)val); break;
            case ERT_ATTR_INTS: {
                int64_t *v = (int64_t *)(void *)sp;
                for (uint32_t q = 0; q < cnt; q++) v[q] = (int64_t)ertf_rd64(X->p + val + 8 * (size_t)q);
                d->ints = v;
                d->n = (int)cnt;
                sp += (size_t)cnt * 8;
                break;
            }
            case ERT_ATTR_FLOATS: {
                float *v = (float *)(void *)sp;
                for (uint32_t q = 0; q < cnt; q++) v[q] = ertf_bits_f32(ertf_rd32(X->p + val + 4 * (size_t)q));
                d->floats = v;
                d->n = (int)cnt;
                sp += (size_t)cnt * 8;
                break;
            }
            case ERT_ATTR_STRING: d->s = (const char *)r->s[ERTF_SEC_STRINGS].p + val; break;
            }
        }
        int32_t *ids = (int32_t *)(void *)sp;
        for (uint32_t k = 0; k < n_in + n_out; k++) ids[k] = rd_index(r, io + k);
        const ert_op_def *def = ert_op_find(op);
        st = ert_model_add_node(m, def->op, name, ids, (int)n_in, ids + n_in, (int)n_out, attrs, (int)na);
        if (st != ERT_OK) {
            char inner[ERT_ERRMSG_SIZE];
            snprintf(inner, sizeof inner, "%s", ert_last_error(r->ctx));
            st = fail(r, st == ERT_E_NOMEM ? ERT_E_NOMEM : ERT_E_FORMAT, "node %u '%.64s' (%s): %s", i,
                      name ? name : "", op, inner);
        }
    }
    free(attrs);
    free(scratch);
    return st;
}

static ert_status build(reader *r, const char **names, bool borrow, ert_model **out) {
    ert_model *m = ert_model_new(r->ctx);
    if (!m) return fail(r, ERT_E_NOMEM, "out of memory creating the model");
    const sec *T = &r->s[ERTF_SEC_TENSORS], *W = &r->s[ERTF_SEC_WEIGHTS];
    ert_status st = ERT_OK;
    const uint8_t *wbase = W->p;
    if (!borrow) {
        /* One aligned copy keeps every weight 64-byte aligned, as in a mapping;
         * never empty, so 0-byte weights do not point into the caller's buffer. */
        size_t bsz = ert_align_up((size_t)W->size, ERTF_WEIGHT_ALIGN) + ERTF_WEIGHT_ALIGN;
        void *blob = aligned_alloc(ERTF_WEIGHT_ALIGN, bsz);
        if (!blob) { st = fail(r, ERT_E_NOMEM, "out of memory copying %llu bytes of weights", (unsigned long long)W->size); goto out; }
        memcpy(blob, W->p, (size_t)W->size);
        m->blob = blob;
        wbase = blob;
    }
    for (uint32_t i = 0; i < r->n_tensors; i++) {
        const uint8_t *e = T->p + (size_t)i * ERTF_TENSOR_ENTRY_SIZE;
        int64_t dims[ERT_MAX_DIMS];
        int ndim = (int)ertf_rd32(e + 12);
        for (int k = 0; k < ndim; k++) dims[k] = (int64_t)ertf_rd64(e + 40 + 8 * (size_t)k);
        int32_t id = ert_model_add_tensor(m, names[i], (ert_dtype)ertf_rd32(e + 4), (ert_role)ertf_rd32(e + 8), ndim, dims);
        if (id != (int32_t)i) {
            char inner[ERT_ERRMSG_SIZE];
            snprintf(inner, sizeof inner, "%s", ert_last_error(r->ctx));
            st = FORMAT("tensor %u '%.64s': %s", i, names[i] ? names[i] : "", id < 0 ? inner : "index mismatch");
            goto out;
        }
        if (ertf_rd32(e + 16) & ERTF_T_HAS_DATA) {
            m->tensors[i].data = wbase + ertf_rd64(e + 24);
            m->tensors[i].data_owned = false;
        }
    }
    st = add_nodes(r, m);
    if (st != ERT_OK) goto out;

    const uint8_t *g = r->s[ERTF_SEC_GRAPH].p;
    uint32_t nin = ertf_rd32(g), inf = ertf_rd32(g + 4), nout = ertf_rd32(g + 8), outf = ertf_rd32(g + 12);
    for (uint32_t k = 0; k < nin && st == ERT_OK; k++) st = ert_model_add_graph_input(m, rd_index(r, inf + k));
    for (uint32_t k = 0; k < nout && st == ERT_OK; k++) st = ert_model_add_graph_output(m, rd_index(r, outf + k));
    if (st != ERT_OK) goto out;
    m->opset = (int)(int32_t)ertf_rd32(g + 16);

    st = ert_model_validate(m);
    if (st != ERT_OK) {
        char inner[ERT_ERRMSG_SIZE];
        snprintf(inner, sizeof inner, "%s", ert_last_error(r->ctx));
        st = fail(r, st == ERT_E_NOMEM ? ERT_E_NOMEM : ERT_E_FORMAT, "invalid graph: %s", inner);
    }
out:
    if (st != ERT_OK) {
        ert_model_free(m);
        return st;
    }
    *out = m;
    return ERT_OK;
}

ert_status ert_format_read(ert_context *ctx, const void *data, size_t size, bool borrow, ert_model **out) {
    if (!out || (!data && size)) return ert_set_error(ctx, ERT_E_ARG, ".ert: NULL argument");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    return ert_set_error(ctx, ERT_E_UNSUPPORTED, ".ert: weights are little-endian; this host is not");
#endif
    if (borrow && ((uintptr_t)data % ERTF_WEIGHT_ALIGN))
        return ert_set_error(ctx, ERT_E_ARG, ".ert: buffer used in place must be %u-byte aligned", ERTF_WEIGHT_ALIGN);
    reader r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.base = data;
    r.size = size;
    ert_status st = check_header_and_sections(&r);
    if (st != ERT_OK) return st;
    const char **names = malloc(((size_t)r.n_tensors + 1) * sizeof *names);
    if (!names) return fail(&r, ERT_E_NOMEM, "out of memory for %u tensor names", r.n_tensors);
    st = check_tensors(&r, names);
    if (st == ERT_OK) st = check_nodes(&r);
    if (st == ERT_OK) st = build(&r, names, borrow, out);
    free(names);
    return st;
}

bool ert_format_sniff(const void *data, size_t size) {
    return data && size >= ERTF_MAGIC_SIZE && memcmp(data, ERTF_MAGIC, ERTF_MAGIC_SIZE) == 0;
}
