/* .ert format: round trips compared structurally and byte-exactly (weights in
 * place in the mapping, 64-byte aligned), hostile files (every truncation,
 * every bit of the header and section table, random mutations with and
 * without fixed-up CRCs, targeted semantic errors), atomic save under I/O
 * failure and under SIGKILL mid-save. Runs under ASan/UBSan in CI: hostile
 * buffers are copied into exactly-sized allocations so over-reads show. */
/* fork, mkdtemp, memmem, clock_gettime: POSIX and GNU extras on top of C11. */
#define _GNU_SOURCE
#include "runtime_internal.h"
#include "testutil.h"
#include "ert/ert_format_internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static ert_context *ctx;
static ert_test_rng rng;
static char dir[256];

/* ------------------------------------------------------------------ helpers */

static uint8_t *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) { free(p); p = NULL; }
    fclose(f);
    *size = (size_t)n;
    return p;
}

/* Load from an exactly-sized heap copy (so ASan sees over-reads). */
static ert_status load_copy(const uint8_t *p, size_t n, ert_model **m) {
    uint8_t *c = malloc(n ? n : 1);
    memcpy(c, p, n);
    *m = NULL;
    ert_status st = ert_model_load_memory(ctx, c, n, 0, m);
    free(c);
    return st;
}

/* Recompute every CRC after a deliberate edit (semantic tests). */
static void fix_crcs(uint8_t *f, size_t n) {
    if (n < ERTF_HEADER_SIZE) return;
    uint32_t ns = ertf_rd32(f + ERTF_H_N_SECTIONS);
    if (ns > ERTF_MAX_SECTIONS || ERTF_HEADER_SIZE + (size_t)ns * 32 > n) {
        ertf_wr32(f + ERTF_H_CRC, ert_crc32(0, f, ERTF_H_CRC));
        return;
    }
    for (uint32_t i = 0; i < ns; i++) {
        uint8_t *e = f + ERTF_HEADER_SIZE + 32 * i;
        uint64_t off = ertf_rd64(e + 8), sz = ertf_rd64(e + 16);
        if (off <= n && sz <= n - off) ertf_wr32(e + 24, ert_crc32(0, f + off, (size_t)sz));
    }
    ertf_wr32(f + ERTF_H_TABLE_CRC, ert_crc32(0, f + ERTF_HEADER_SIZE, (size_t)ns * 32));
    ertf_wr32(f + ERTF_H_CRC, ert_crc32(0, f, ERTF_H_CRC));
}

/* Section of a valid file by type: offset and size. */
static bool find_sec(const uint8_t *f, uint32_t type, uint64_t *off, uint64_t *size) {
    uint32_t ns = ertf_rd32(f + ERTF_H_N_SECTIONS);
    for (uint32_t i = 0; i < ns; i++) {
        const uint8_t *e = f + ERTF_HEADER_SIZE + 32 * i;
        if (ertf_rd32(e) == type) { *off = ertf_rd64(e + 8); *size = ertf_rd64(e + 16); return true; }
    }
    return false;
}

/* A copy of the file with one more section (type, flags, payload): the table
 * grows by 32 bytes and 32 bytes of padding keep every old section's
 * alignment (shift of 64). */
static uint8_t *add_section(const uint8_t *f, size_t n, uint32_t type, uint32_t flags, const void *pl, size_t pln,
                            size_t *out_n) {
    uint32_t ns = ertf_rd32(f + ERTF_H_N_SECTIONS);
    size_t tab_end = ERTF_HEADER_SIZE + (size_t)ns * 32;
    size_t nn = ert_align_up(n + 64, 8) + pln;
    uint8_t *g = calloc(1, nn);
    memcpy(g, f, tab_end);
    memcpy(g + tab_end + 64, f + tab_end, n - tab_end);
    for (uint32_t i = 0; i < ns; i++) ertf_wr64(g + ERTF_HEADER_SIZE + 32 * i + 8, ertf_rd64(g + ERTF_HEADER_SIZE + 32 * i + 8) + 64);
    uint8_t *e = g + tab_end;
    memset(e, 0, 32);
    ertf_wr32(e, type);
    ertf_wr32(e + 4, flags);
    ertf_wr64(e + 8, ert_align_up(n + 64, 8));
    ertf_wr64(e + 16, pln);
    memcpy(g + ert_align_up(n + 64, 8), pl, pln);
    ertf_wr32(g + ERTF_H_N_SECTIONS, ns + 1);
    ertf_wr64(g + ERTF_H_FILE_SIZE, nn);
    fix_crcs(g, nn);
    *out_n = nn;
    return g;
}

static bool failed_cleanly(ert_status st) {
    return (st == ERT_E_FORMAT || st == ERT_E_UNSUPPORTED) && ert_last_error(ctx)[0] != 0;
}

/* ------------------------------------------------------------------ models */

/* Small model touching every attribute type, several dtypes, an omitted
 * input, a dynamic dim, a zero-size weight and two outputs. */
static ert_model *build_small(void) {
    ert_builder *b;
    ert_model *m = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int32_t x, w, bias, y, r, sc, y2, z, ids, e, rs, out2;
    int64_t xd[4] = {-1, 3, 8, 8}, wd[4] = {4, 3, 3, 3}, bd[1] = {4}, sd[4] = {4}, ed[2] = {0, 5}, id[2] = {2, 3};
    float wv[108], bv[4] = {0.5f, -1, 2, 3}, sv[4] = {1, 1, 2, 2};
    for (int i = 0; i < 108; i++) wv[i] = (float)ert_test_uniform(&rng, -1, 1);
    int64_t iv[6] = {1, -2, INT64_MAX, INT64_MIN, 0, 42};
    uint16_t h16[5] = {0};
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_weight(b, "conv1.weight", ERT_DTYPE_F32, 4, wd, wv, &w), ctx);
    CHECK_OK(ert_builder_weight(b, "conv1.bias", ERT_DTYPE_F32, 1, bd, bv, &bias), ctx);
    CHECK_OK(ert_builder_weight(b, "scales", ERT_DTYPE_F32, 1, sd, sv, &sc), ctx);
    CHECK_OK(ert_builder_weight(b, "ints", ERT_DTYPE_I64, 2, id, iv, &ids), ctx);
    CHECK_OK(ert_builder_weight(b, "empty", ERT_DTYPE_F16, 2, ed, h16, &e), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, w, bias, 1, 1, 1, 1, &y), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", y, &r), ctx);
    float fl[3] = {0.25f, -0.0f, 1e30f};
    ert_attr at[3] = {ERT_ATTR_S("mode", "nearest"), ERT_ATTR_FS("ert_test_floats", fl, 3),
                      ERT_ATTR_F("extrapolation_value", -1.5f)};
    int32_t rin[3] = {r, -1, sc};
    CHECK_OK(ert_builder_node(b, "Resize", "up", rin, 3, at, 3, &y2, 1), ctx);
    CHECK_OK(ert_builder_maxpool2d(b, y2, 2, 2, 0, &z), ctx);
    int32_t sin[2] = {z, ids};
    ert_attr rat[1] = {ERT_ATTR_I("allowzero", 0)};
    CHECK_OK(ert_builder_node(b, "Reshape", NULL, sin, 2, rat, 1, &rs, 1), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", r, r, &out2), ctx);
    CHECK_OK(ert_builder_output(b, rs, "logits"), ctx);
    CHECK_OK(ert_builder_output(b, out2, NULL), ctx);
    (void)e;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    if (m) m->opset = 17;
    return m;
}

/* A model with `mb` MiB of weights (a chain of Adds), filled with `seed`. */
static ert_model *build_big(int mb, uint8_t seed) {
    ert_builder *b;
    ert_model *m = NULL;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t d[2] = {256, 1024}; /* 1 MiB of f32 */
    float *buf = malloc(256 * 1024 * sizeof(float));
    int32_t x, cur, w;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, d, &x), ctx);
    cur = x;
    for (int i = 0; i < mb; i++) {
        for (int k = 0; k < 256 * 1024; k++) buf[k] = (float)(seed + i + k % 7);
        char nm[32];
        snprintf(nm, sizeof nm, "w%d", i);
        CHECK_OK(ert_builder_weight(b, nm, ERT_DTYPE_F32, 2, d, buf, &w), ctx);
        CHECK_OK(ert_builder_binary(b, "Add", cur, w, &cur), ctx);
    }
    CHECK_OK(ert_builder_output(b, cur, "y"), ctx);
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    free(buf);
    return m;
}

/* ------------------------------------------------------------------ compare */

static bool same_attr(const ert_attr_val *a, const ert_attr_val *b) {
    if (strcmp(a->name, b->name) || a->type != b->type) return false;
    switch (a->type) {
    case ERT_ATTR_INT: return a->i == b->i;
    case ERT_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case ERT_ATTR_INTS: return a->n == b->n && (!a->n || memcmp(a->ints, b->ints, (size_t)a->n * 8) == 0);
    case ERT_ATTR_FLOATS: return a->n == b->n && (!a->n || memcmp(a->floats, b->floats, (size_t)a->n * 4) == 0);
    case ERT_ATTR_STRING: return strcmp(a->s, b->s) == 0;
    }
    return false;
}

/* Structure equal: tensors by index, nodes matched by first output (the
 * loader re-sorts topologically, which may reorder independent nodes). */
static void compare_models(const char *what, const ert_model *a, const ert_model *b) {
    CHECK(a->n_tensors == b->n_tensors, "%s: %d vs %d tensors", what, a->n_tensors, b->n_tensors);
    CHECK(a->n_nodes == b->n_nodes, "%s: %d vs %d nodes", what, a->n_nodes, b->n_nodes);
    if (a->n_tensors != b->n_tensors || a->n_nodes != b->n_nodes) return;
    int bad = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const ert_tensor *s = &a->tensors[i], *t = &b->tensors[i];
        bool ok = strcmp(s->name, t->name) == 0 && s->dtype == t->dtype && s->role == t->role && s->ndim == t->ndim &&
                  memcmp(s->dims, t->dims, sizeof(int64_t) * (size_t)s->ndim) == 0;
        if (ok && s->role == ERT_ROLE_WEIGHT) {
            size_t nb = 0;
            ok = ert_tensor_nbytes(s, &nb) && t->data && (!nb || memcmp(s->data, t->data, nb) == 0);
            ok = ok && ((uintptr_t)t->data % 64) == 0;
        }
        if (!ok) { bad++; fprintf(stderr, "  %s: tensor %d '%s' differs\n", what, i, s->name); }
    }
    CHECK(bad == 0, "%s: %d tensors differ", what, bad);
    bad = 0;
    for (int i = 0; i < a->n_nodes; i++) {
        const ert_node *n = &a->nodes[i], *o = NULL;
        for (int j = 0; j < b->n_nodes && !o; j++)
            if (b->nodes[j].n_out > 0 && n->n_out > 0 && b->nodes[j].out[0] == n->out[0]) o = &b->nodes[j];
        bool ok = o && o->op == n->op && strcmp(o->name, n->name) == 0 && o->n_in == n->n_in &&
                  o->n_out == n->n_out && o->n_attrs == n->n_attrs &&
                  memcmp(o->in, n->in, sizeof(int32_t) * (size_t)n->n_in) == 0 &&
                  memcmp(o->out, n->out, sizeof(int32_t) * (size_t)n->n_out) == 0;
        for (int k = 0; ok && k < n->n_attrs; k++) ok = same_attr(&n->attrs[k], &o->attrs[k]);
        if (!ok) { bad++; fprintf(stderr, "  %s: node %d '%s' differs\n", what, i, n->name); }
    }
    CHECK(bad == 0, "%s: %d nodes differ", what, bad);
    CHECK(a->n_inputs == b->n_inputs && a->n_outputs == b->n_outputs &&
              memcmp(a->inputs, b->inputs, sizeof(int32_t) * (size_t)a->n_inputs) == 0 &&
              memcmp(a->outputs, b->outputs, sizeof(int32_t) * (size_t)a->n_outputs) == 0,
          "%s: graph inputs/outputs differ", what);
    CHECK(a->opset == b->opset, "%s: opset %d vs %d", what, a->opset, b->opset);
}

/* Every weight's data lies inside [base, base + size). */
static bool weights_inside(const ert_model *m, const void *base, size_t size) {
    for (int i = 0; i < m->n_tensors; i++) {
        const ert_tensor *t = &m->tensors[i];
        if (t->role != ERT_ROLE_WEIGHT) continue;
        size_t nb = 0;
        ert_tensor_nbytes(t, &nb);
        const uint8_t *p = t->data, *b = base;
        if (p < b || p + nb > b + size || t->data_owned) return false;
    }
    return true;
}

/* ------------------------------------------------------------------ tests */

static void test_roundtrip(ert_model *m, const char *path, bool is_small) {
    CHECK_OK(ert_model_save(m, path), ctx);
    size_t n;
    uint8_t *f = read_all(path, &n);
    CHECK(f && n > ERTF_HEADER_SIZE, "read back %s", path);
    if (!f) return;
    CHECK(ert_format_sniff(f, n) && !ert_format_sniff(f, 7) && !ert_format_sniff("\x08\x07", 2), "sniff");

    ert_model *a = NULL;
    CHECK_OK(ert_model_load_file(ctx, path, &a), ctx);
    if (a) {
        compare_models("load_file", m, a);
        CHECK(a->map_base && weights_inside(a, a->map_base, a->map_size), "weights used in place from the mapping");
        ert_tensor_info ti;
        CHECK_OK(ert_model_input_info(a, 0, &ti), ctx);
        if (is_small) {
            CHECK(strcmp(ti.name, "x") == 0 && ti.dims[0] == -1 && ti.ndim == 4, "input info");
            CHECK(strcmp(ert_model_node_op(a, 0), "Conv") == 0, "node 0 op %s", ert_model_node_op(a, 0));
            CHECK(ert_model_n_outputs(a) == 2 && ert_model_n_params(a) == 108 + 4 + 4, "outputs %d params %lld",
                  ert_model_n_outputs(a), (long long)ert_model_n_params(a));
        }
        /* Saving the loaded model gives the same bytes (writer is deterministic). */
        char p2[320];
        snprintf(p2, sizeof p2, "%s.again", path);
        CHECK_OK(ert_model_save(a, p2), ctx);
        size_t n2;
        uint8_t *f2 = read_all(p2, &n2);
        CHECK(f2 && n2 == n && memcmp(f, f2, n) == 0, "re-save is byte-identical");
        free(f2);
        unlink(p2);
        /* Saving over the very file the model is mapped from: the mapping
         * keeps the old inode alive, so the weights being written stay valid. */
        CHECK_OK(ert_model_save(a, path), ctx);
        f2 = read_all(path, &n2);
        CHECK(f2 && n2 == n && memcmp(f, f2, n) == 0, "save over own mapping is byte-identical");
        free(f2);
        ert_model_free(a);
    }
    ert_model *c = NULL;
    CHECK_OK(load_copy(f, n, &c), ctx);
    if (c) {
        compare_models("load_memory copy", m, c);
        CHECK(c->blob && weights_inside(c, c->blob, n), "copied weights live in the model's blob");
        ert_model_free(c);
    }
    void *al = aligned_alloc(64, ert_align_up(n, 64));
    memcpy(al, f, n);
    ert_model *d = NULL;
    CHECK_OK(ert_model_load_memory(ctx, al, n, ERT_LOAD_NO_COPY, &d), ctx);
    if (d) {
        compare_models("load_memory no-copy", m, d);
        CHECK(weights_inside(d, al, n), "no-copy weights point into the caller's buffer");
        ert_model_free(d);
    }
    free(al);
    free(f);
}

static void test_truncation(const uint8_t *f, size_t n) {
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        ert_model *m;
        ert_status st = load_copy(f, len, &m);
        if (st == ERT_OK) ert_model_free(m);
        /* Below 8 bytes the magic is incomplete, so the bytes go to the ONNX loader. */
        if (len >= ERTF_MAGIC_SIZE && !failed_cleanly(st)) {
            if (bad++ < 5) fprintf(stderr, "  truncated to %zu: %s\n", len, ert_status_str(st));
        }
    }
    CHECK(bad == 0, "%d truncations not rejected cleanly", bad);
}

/* The mmap path (ert_model_load_file) on truncated files: reading past the
 * end of a mapping would fault, not just trip ASan. */
static void test_truncated_files(const uint8_t *f, size_t n) {
    char p[320];
    snprintf(p, sizeof p, "%s/trunc.ert", dir);
    int bad = 0;
    for (int k = 0; k < 60; k++) {
        size_t len = k < 10 ? (size_t)k * 8 : (size_t)(ert_test_u64(&rng) % n);
        FILE *o = fopen(p, "wb");
        if (!o) { bad++; continue; }
        fwrite(f, 1, len, o);
        fclose(o);
        ert_model *m = NULL;
        ert_status st = ert_model_load_file(ctx, p, &m);
        if (st == ERT_OK) ert_model_free(m);
        if (len >= ERTF_MAGIC_SIZE ? !failed_cleanly(st) : st == ERT_OK) bad++;
    }
    unlink(p);
    CHECK(bad == 0, "%d truncated files loaded or failed without a message", bad);
}

static void test_bitflips(const uint8_t *f, size_t n) {
    size_t span = ERTF_HEADER_SIZE + (size_t)ertf_rd32(f + ERTF_H_N_SECTIONS) * ERTF_SECTION_ENTRY_SIZE;
    uint8_t *g = malloc(n);
    int bad = 0;
    for (size_t bit = 0; bit < span * 8; bit++) {
        memcpy(g, f, n);
        g[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        ert_model *m;
        ert_status st = load_copy(g, n, &m);
        if (st == ERT_OK) ert_model_free(m);
        /* Flips in the magic route the bytes to the ONNX loader: any error will do. */
        bool ok = bit / 8 < ERTF_MAGIC_SIZE ? st != ERT_OK : failed_cleanly(st);
        if (!ok && bad++ < 5) fprintf(stderr, "  bit %zu: %s\n", bit, ert_status_str(st));
    }
    CHECK(bad == 0, "%d header/table bit flips not rejected", bad);
    free(g);
}

/* Random byte mutations anywhere: every mutated byte covered by a CRC must be
 * caught; padding between sections is not covered and may load. */
static void test_random_mutations(const uint8_t *f, size_t n, int iters) {
    uint8_t *covered = calloc(1, n), *g = malloc(n);
    size_t span = ERTF_HEADER_SIZE + (size_t)ertf_rd32(f + ERTF_H_N_SECTIONS) * 32;
    memset(covered, 1, span);
    for (uint32_t i = 0; i < ertf_rd32(f + ERTF_H_N_SECTIONS); i++) {
        const uint8_t *e = f + ERTF_HEADER_SIZE + 32 * i;
        memset(covered + ertf_rd64(e + 8), 1, ertf_rd64(e + 16));
    }
    int bad = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(g, f, n);
        int k = ert_test_int(&rng, 1, 4);
        bool any_covered = false;
        for (int j = 0; j < k; j++) {
            size_t pos = (size_t)(ert_test_u64(&rng) % n);
            uint8_t v = (uint8_t)ert_test_u64(&rng);
            if (v == g[pos]) v ^= 0x80;
            g[pos] = v;
            any_covered |= covered[pos];
        }
        ert_model *m;
        ert_status st = load_copy(g, n, &m);
        if (st == ERT_OK) ert_model_free(m);
        bool ok = any_covered ? (st != ERT_OK && ert_last_error(ctx)[0]) : (st == ERT_OK || failed_cleanly(st));
        if (!ok && bad++ < 5) fprintf(stderr, "  mutation %d: %s\n", it, ert_status_str(st));
    }
    CHECK(bad == 0, "%d random mutations not handled", bad);
    free(covered);
    free(g);
}

/* Mutate metadata and fix the CRCs, so the reader's field checks (not the
 * CRCs) must catch it. Success is allowed (a benign edit); a crash is not. */
static void test_semantic_mutations(const uint8_t *f, size_t n, int iters) {
    uint64_t lo, sz, go, gs;
    find_sec(f, ERTF_SEC_STRINGS, &lo, &sz);
    find_sec(f, ERTF_SEC_GRAPH, &go, &gs);
    size_t meta_end = (size_t)(go + gs); /* metadata sections precede GRAPH's end */
    static const uint32_t interesting[] = {0, 1, 2, 3, 7, 8, 9, 63, 64, 0x7fffffff, 0x80000000u, 0xffffffffu, 0xfffffffeu, 4096, 100000};
    uint8_t *g = malloc(n);
    int bad = 0, loaded = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(g, f, n);
        int k = ert_test_int(&rng, 1, 3);
        for (int j = 0; j < k; j++) {
            size_t pos = (size_t)lo + (size_t)(ert_test_u64(&rng) % (meta_end - lo));
            if (ert_test_int(&rng, 0, 1) && pos + 4 <= meta_end) {
                pos &= ~(size_t)3;
                uint32_t v = interesting[ert_test_u64(&rng) % (sizeof interesting / sizeof interesting[0])];
                if (ert_test_int(&rng, 0, 3) == 0) v = ertf_rd32(g + pos) + (uint32_t)ert_test_int(&rng, -2, 2);
                ertf_wr32(g + pos, v);
            } else {
                g[pos] ^= (uint8_t)(1u << ert_test_int(&rng, 0, 7));
            }
        }
        fix_crcs(g, n);
        ert_model *m;
        ert_status st = load_copy(g, n, &m);
        if (st == ERT_OK) { loaded++; ert_model_free(m); }
        bool ok = st == ERT_OK || failed_cleanly(st);
        if (!ok && bad++ < 5) fprintf(stderr, "  semantic mutation %d: %s %s\n", it, ert_status_str(st), ert_last_error(ctx));
    }
    CHECK(bad == 0, "%d semantic mutations not handled", bad);
    printf("ert_format: %d semantic mutations, %d still loaded (benign edits)\n", iters, loaded);
    free(g);
}

/* Expect a load of g (CRCs fixed) to fail with st and a message holding `frag`. */
static void expect_fail(const char *what, uint8_t *g, size_t n, ert_status want, const char *frag) {
    fix_crcs(g, n);
    ert_model *m = NULL;
    ert_status st = load_copy(g, n, &m);
    if (st == ERT_OK) ert_model_free(m);
    CHECK(st == want && strstr(ert_last_error(ctx), frag), "%s: got %s '%s', want %s with '%s'", what,
          ert_status_str(st), ert_last_error(ctx), ert_status_str(want), frag);
}

static void test_targeted(const uint8_t *f, size_t n) {
    uint8_t *g = malloc(n);
    uint64_t so, ss, to, ts, no, ns, xo, xs;
    find_sec(f, ERTF_SEC_STRINGS, &so, &ss);
    find_sec(f, ERTF_SEC_TENSORS, &to, &ts);
    find_sec(f, ERTF_SEC_NODES, &no, &ns);
    find_sec(f, ERTF_SEC_INDICES, &xo, &xs);

    /* unknown op: rename "Relu" in the string table */
    memcpy(g, f, n);
    uint8_t *s = memmem(g + so, ss, "Relu\0", 5);
    CHECK(s != NULL, "Relu in string table");
    if (s) { memcpy(s, "Rel_", 4); expect_fail("unknown op", g, n, ERT_E_UNSUPPORTED, "'Rel_'"); }

    /* tensor 1 (conv1.weight): data offset pushed past the weight blob */
    memcpy(g, f, n);
    ertf_wr64(g + to + ERTF_TENSOR_ENTRY_SIZE + 24, 1u << 20);
    expect_fail("data past end", g, n, ERT_E_FORMAT, "tensor 1 'conv1.weight': data range [1048576");
    memcpy(g, f, n);
    ertf_wr64(g + to + ERTF_TENSOR_ENTRY_SIZE + 24, UINT64_MAX - 63);
    expect_fail("data offset overflow", g, n, ERT_E_FORMAT, "past end of weight section");
    memcpy(g, f, n);
    ertf_wr64(g + to + ERTF_TENSOR_ENTRY_SIZE + 32, 432 + 4);
    expect_fail("data size mismatch", g, n, ERT_E_FORMAT, "data_size 436");
    memcpy(g, f, n);
    ertf_wr64(g + to + ERTF_TENSOR_ENTRY_SIZE + 40, (uint64_t)-2);
    expect_fail("dim -2", g, n, ERT_E_FORMAT, "< -1");
    memcpy(g, f, n);
    ertf_wr64(g + to + ERTF_TENSOR_ENTRY_SIZE + 40, (uint64_t)1 << 62);
    ertf_wr64(g + to + ERTF_TENSOR_ENTRY_SIZE + 48, (uint64_t)1 << 62);
    expect_fail("element count overflow", g, n, ERT_E_FORMAT, "overflows");
    memcpy(g, f, n);
    ertf_wr32(g + to + ERTF_TENSOR_ENTRY_SIZE + 12, 9);
    expect_fail("ndim 9", g, n, ERT_E_FORMAT, "ndim 9");
    memcpy(g, f, n);
    ertf_wr32(g + to + ERTF_TENSOR_ENTRY_SIZE + 4, 99);
    expect_fail("dtype 99", g, n, ERT_E_FORMAT, "invalid dtype 99");
    memcpy(g, f, n);
    ertf_wr32(g + to + ERTF_TENSOR_ENTRY_SIZE, (uint32_t)ss);
    expect_fail("name past string table", g, n, ERT_E_FORMAT, "string offset");
    /* duplicate tensor name: tensor 2 named like tensor 1 */
    memcpy(g, f, n);
    ertf_wr32(g + to + 2 * ERTF_TENSOR_ENTRY_SIZE, ertf_rd32(g + to + ERTF_TENSOR_ENTRY_SIZE));
    expect_fail("duplicate name", g, n, ERT_E_FORMAT, "used twice");

    /* node 0 (Conv) input 0 -> its own output: a cycle */
    memcpy(g, f, n);
    uint32_t io = ertf_rd32(g + no + 16), nin = ertf_rd32(g + no + 8);
    ertf_wr32(g + xo + 4 * io, ertf_rd32(g + xo + 4 * (io + nin)));
    expect_fail("cycle", g, n, ERT_E_FORMAT, "cycle");
    memcpy(g, f, n);
    ertf_wr32(g + xo + 4 * io, 1000);
    expect_fail("input index out of range", g, n, ERT_E_FORMAT, "tensor index 1000");
    memcpy(g, f, n);
    ertf_wr32(g + no + 8, 7);
    expect_fail("Conv with 7 inputs", g, n, ERT_E_FORMAT, "outside the op's range");
    memcpy(g, f, n);
    ertf_wr32(g + no + 16, 0xfffffff0u);
    expect_fail("node io range", g, n, ERT_E_FORMAT, "past end of index table");

    /* graph input 0 -> tensor 1 (a weight): a session would write into it */
    uint64_t go, gs, ao, as;
    find_sec(f, ERTF_SEC_GRAPH, &go, &gs);
    memcpy(g, f, n);
    ertf_wr32(g + xo + 4 * ertf_rd32(g + go + 4), 1);
    expect_fail("graph input is a weight", g, n, ERT_E_FORMAT, "not INPUT");
    /* two nodes sharing one attribute range (memory amplification) */
    CHECK(find_sec(f, ERTF_SEC_ATTRS, &ao, &as), "ATTRS section");
    memcpy(g, f, n);
    ertf_wr32(g + no + ERTF_NODE_ENTRY_SIZE + 20, 0);
    ertf_wr32(g + no + ERTF_NODE_ENTRY_SIZE + 24, (uint32_t)(as / ERTF_ATTR_ENTRY_SIZE));
    expect_fail("shared attributes", g, n, ERT_E_FORMAT, "shared between nodes");

    /* header fields */
    memcpy(g, f, n);
    ertf_wr32(g + ERTF_H_VERSION, 2);
    expect_fail("version 2", g, n, ERT_E_UNSUPPORTED, "version 2");
    memcpy(g, f, n);
    ertf_wr32(g + ERTF_H_FLAGS, 4);
    expect_fail("header flag", g, n, ERT_E_UNSUPPORTED, "flags");
    memcpy(g, f, n);
    ertf_wr64(g + ERTF_H_FILE_SIZE, n + 64);
    expect_fail("file_size", g, n, ERT_E_FORMAT, "file_size");
    memcpy(g, f, n);
    ertf_wr32(g + ERTF_H_N_SECTIONS, 100000);
    expect_fail("n_sections", g, n, ERT_E_FORMAT, "n_sections");
    /* section 1 overlapping section 0 */
    memcpy(g, f, n);
    ertf_wr64(g + ERTF_HEADER_SIZE + 32 + 8, ertf_rd64(g + ERTF_HEADER_SIZE + 8));
    expect_fail("overlap", g, n, ERT_E_FORMAT, "overlaps");
    memcpy(g, f, n);
    ertf_wr64(g + ERTF_HEADER_SIZE + 16, UINT64_MAX);
    expect_fail("section size overflow", g, n, ERT_E_FORMAT, "outside the data area");
    /* string table not NUL-terminated */
    memcpy(g, f, n);
    g[so + ss - 1] = 'x';
    expect_fail("string table NUL", g, n, ERT_E_FORMAT, "NUL");
    /* CRC itself wrong */
    memcpy(g, f, n);
    g[so + 1] ^= 1;
    ert_model *m = NULL;
    ert_status st = load_copy(g, n, &m);
    CHECK(st == ERT_E_FORMAT && strstr(ert_last_error(ctx), "CRC"), "section CRC: %s", ert_last_error(ctx));
    if (st == ERT_OK) ert_model_free(m);

    /* extra sections: optional unknown ones are skipped, required ones refused */
    size_t n2;
    uint8_t *h = add_section(f, n, 300, ERTF_SEC_OPTIONAL, "optimizer state", 16, &n2);
    m = NULL;
    CHECK_OK(load_copy(h, n2, &m), ctx);
    if (m) ert_model_free(m);
    free(h);
    h = add_section(f, n, 300, 0, "rng", 4, &n2);
    expect_fail("unknown required section", h, n2, ERT_E_UNSUPPORTED, "unknown type 300");
    free(h);
    h = add_section(f, n, ERTF_SEC_GRAPH, 0, g, 32, &n2);
    expect_fail("duplicate section", h, n2, ERT_E_FORMAT, "second GRAPH");
    free(h);
    free(g);
}

/* A save that fails mid-write (file size limit: works even as root, where
 * permission bits do not stop writes) leaves PATH byte-identical and no temp. */
static void test_failing_save(ert_model *small, ert_model *big, const char *path) {
    CHECK_OK(ert_model_save(small, path), ctx);
    size_t n0;
    uint8_t *before = read_all(path, &n0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {.rlim_cur = 1 << 20, .rlim_max = RLIM_INFINITY};
        setrlimit(RLIMIT_FSIZE, &rl);
        ert_status st = ert_model_save(big, path);
        bool msg = strstr(ert_last_error(ctx), "too large") != NULL || strstr(ert_last_error(ctx), "File") != NULL;
        _exit(st == ERT_E_IO && msg ? 0 : 1);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "save under RLIMIT_FSIZE gives ERT_E_IO with strerror text");
    size_t n1;
    uint8_t *after = read_all(path, &n1);
    CHECK(after && n1 == n0 && memcmp(before, after, n0) == 0, "failed save left the file byte-identical");
    free(before);
    free(after);
    /* no temp file left behind */
    DIR *d = opendir(dir);
    int tmps = 0;
    for (struct dirent *e; d && (e = readdir(d));) tmps += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    CHECK(tmps == 0, "%d temp files left after a failed save", tmps);

    char missing[300];
    snprintf(missing, sizeof missing, "%s/no/such/dir/m.ert", dir);
    ert_status st = ert_model_save(small, missing);
    CHECK(st == ERT_E_IO && strstr(ert_last_error(ctx), "No such file"), "save into a missing dir: %s %s",
          ert_status_str(st), ert_last_error(ctx));
}

static void remove_tmps(void) {
    DIR *d = opendir(dir);
    char p[600];
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) { snprintf(p, sizeof p, "%s/%s", dir, e->d_name); unlink(p); }
    if (d) closedir(d);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* SIGKILL a child in the middle of saving: PATH holds the old or the new
 * model, complete, never a torn file. */
static void test_kill_during_save(ert_model *old_m, ert_model *new_m, const char *path) {
    CHECK_OK(ert_model_save(old_m, path), ctx);
    size_t nold;
    uint8_t *old_bytes = read_all(path, &nold);
    double t0 = now_s();
    char p2[320];
    snprintf(p2, sizeof p2, "%s.new", path);
    CHECK_OK(ert_model_save(new_m, p2), ctx);
    double dt = now_s() - t0;
    size_t nnew;
    uint8_t *new_bytes = read_all(p2, &nnew);
    unlink(p2);
    int olds = 0, news = 0, bad = 0;
    for (int it = 0; it < 6; it++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) _exit(ert_model_save(new_m, path) == ERT_OK ? 0 : 1);
        double wait = ert_test_uniform(&rng, 0, 1.1) * dt;
        struct timespec ts = {.tv_sec = (time_t)wait, .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        size_t n;
        uint8_t *cur = read_all(path, &n);
        bool is_old = cur && n == nold && memcmp(cur, old_bytes, n) == 0;
        bool is_new = cur && n == nnew && memcmp(cur, new_bytes, n) == 0;
        olds += is_old;
        news += is_new;
        ert_model *m = NULL;
        ert_status st = ert_model_load_file(ctx, path, &m);
        if (!(is_old || is_new) || st != ERT_OK) bad++;
        ert_model_free(m);
        free(cur);
        remove_tmps();
        if (is_new) { /* put the old one back for the next round */
            CHECK_OK(ert_model_save(old_m, path), ctx);
        }
    }
    printf("ert_format: kill-during-save: save takes %.0f ms; %d rounds ended old, %d new\n", dt * 1e3, olds, news);
    CHECK(bad == 0, "%d kill-during-save rounds left a torn or unloadable file", bad);
    free(old_bytes);
    free(new_bytes);
}

/* Outputs through a session on a model loaded in place from the file equal
 * the hand-computed result: y = Relu(x) + w. Kernels are written elsewhere;
 * while they report UNSUPPORTED this part only says so. */
static void test_session_outputs(const char *path) {
    ert_builder *b;
    int32_t x, w, r, y;
    int64_t d[2] = {2, 3};
    float wv[6] = {0.5f, -1, 2, 3, -4, 0.25f}, xv[6] = {-1, 2, -3, 4, 0, 6}, got[6];
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, d, &x), ctx);
    CHECK_OK(ert_builder_weight(b, "w", ERT_DTYPE_F32, 2, d, wv, &w), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", x, &r), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", r, w, &y), ctx);
    CHECK_OK(ert_builder_output(b, y, "y"), ctx);
    ert_model *m = NULL, *l = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    if (!m) return;
    CHECK_OK(ert_model_save(m, path), ctx);
    CHECK_OK(ert_model_load_file(ctx, path, &l), ctx);
    ert_model_free(m);
    if (!l) return;
    ert_session_options so = {0};
    ert_session *s = NULL;
    ert_status st = ert_session_create(l, &so, &s);
    if (st == ERT_OK) {
        CHECK_OK(ert_session_set_input(s, 0, xv, sizeof xv), ctx);
        st = ert_session_run(s);
        if (st == ERT_OK) {
            CHECK_OK(ert_session_get_output(s, 0, got, sizeof got), ctx);
            double ref[6];
            for (int i = 0; i < 6; i++) ref[i] = (xv[i] > 0 ? xv[i] : 0) + wv[i];
            CHECK(ert_test_close("Relu+Add from a mapped .ert", got, ref, 6, 0, 0), "session output");
        }
    }
    if (st == ERT_E_UNSUPPORTED)
        printf("ert_format: session outputs not checked: %s\n", ert_last_error(ctx));
    else
        CHECK(st == ERT_OK, "session on loaded model: %s %s", ert_status_str(st), ert_last_error(ctx));
    ert_session_free(s);
    ert_model_free(l);
}

int main(void) {
    ert_test_rng_init(&rng, "ert_format");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    snprintf(dir, sizeof dir, "/tmp/ert_format_test.XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[300], bigpath[300];
    snprintf(path, sizeof path, "%s/small.ert", dir);
    snprintf(bigpath, sizeof bigpath, "%s/big.ert", dir);

    ert_model *small = build_small();
    if (!small) return ert_test_finish("ert_format");
    test_roundtrip(small, path, true);
    size_t n;
    uint8_t *f = read_all(path, &n);
    printf("ert_format: small model file is %zu bytes\n", n);
    if (f) {
        test_truncation(f, n);
        test_truncated_files(f, n);
        test_bitflips(f, n);
        test_random_mutations(f, n, 4000);
        test_semantic_mutations(f, n, 6000);
        test_targeted(f, n);
    }
    test_session_outputs(path);
    ert_model *big = build_big(16, 1), *big2 = build_big(16, 2);
    if (big) test_roundtrip(big, bigpath, false);
    if (big) test_failing_save(small, big, path);
    if (big && big2) test_kill_during_save(big, big2, bigpath);

    ert_model_free(big);
    ert_model_free(big2);
    ert_model_free(small);
    free(f);
    unlink(path);
    unlink(bigpath);
    remove_tmps();
    rmdir(dir);
    ert_context_free(ctx);
    return ert_test_finish("ert_format");
}
