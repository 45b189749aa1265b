/* The ONNX backend node tests (../shared/conformance/onnx-node, written by the
 * ONNX project) for the element-wise and tensor ops, run through the same
 * prepare + ert_cpu_run_node path as the other op tests.
 *
 * Steps: read INDEX.tsv; for each single-node test whose op is element-wise or
 * data movement (Relu .. Range), decode model.onnx just enough to get the
 * node's attributes and input slots (a minimal protobuf walker, independent of
 * the ONNX loader), load every input_k.pb / output_k.pb, mark all inputs
 * constant (their values are known, as after folding), run, and compare.
 * A refusal (ERT_E_UNSUPPORTED: int16, cubic...) is counted and listed, not a
 * failure; a wrong value or any other error is. Skipped (77) without the data. */
#include "op_harness.h"

#include <stdio.h>

/* ------------------------------------------------------------------ protobuf walker */

typedef struct pb {
    const uint8_t *p, *end;
} pb;

static bool pb_varint(pb *b, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && b->p < b->end; s += 7) {
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* Next field: number, wire type, and for length-delimited fields a sub-buffer;
 * varint / fixed values in *v. */
static bool pb_next(pb *b, int *field, int *wt, uint64_t *v, pb *sub) {
    uint64_t key;
    if (b->p >= b->end || !pb_varint(b, &key)) return false;
    *field = (int)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0: return pb_varint(b, v);
    case 1: if (b->end - b->p < 8) return false; memcpy(v, b->p, 8); b->p += 8; return true;
    case 5: { uint32_t u; if (b->end - b->p < 4) return false; memcpy(&u, b->p, 4); *v = u; b->p += 4; return true; }
    case 2:
        if (!pb_varint(b, v) || *v > (uint64_t)(b->end - b->p)) return false;
        sub->p = b->p;
        sub->end = b->p + *v;
        b->p += *v;
        return true;
    default: return false;
    }
}

static ert_dtype onnx_dt(uint64_t c) {
    switch (c) {
    case 1: return ERT_DTYPE_F32;
    case 2: return ERT_DTYPE_U8;
    case 3: return ERT_DTYPE_I8;
    case 6: return ERT_DTYPE_I32;
    case 7: return ERT_DTYPE_I64;
    case 9: return ERT_DTYPE_BOOL;
    case 10: return ERT_DTYPE_F16;
    case 16: return ERT_DTYPE_BF16;
    default: return ERT_DTYPE_UNDEFINED;
    }
}

/* TensorProto -> tt. Handles raw_data and the typed repeated fields. */
static bool pb_tensor(pb b, tt *t) {
    int64_t dims[ERT_MAX_DIMS];
    int nd = 0, field, wt;
    uint64_t v, code = 0;
    pb sub, raw = {NULL, NULL}, typed = {NULL, NULL};
    int typed_field = 0;
    while (pb_next(&b, &field, &wt, &v, &sub)) {
        if (field == 1) {
            if (wt == 2) {
                while (sub.p < sub.end && nd < ERT_MAX_DIMS && pb_varint(&sub, &v)) dims[nd++] = (int64_t)v;
            } else if (nd < ERT_MAX_DIMS) {
                dims[nd++] = (int64_t)v;
            }
        } else if (field == 2) {
            code = v;
        } else if (field == 9 && wt == 2) {
            raw = sub;
        } else if ((field == 4 || field == 5 || field == 7) && wt == 2) {
            typed = sub; /* packed */
            typed_field = field;
        } else if (field == 4 || field == 5 || field == 7) {
            return false; /* unpacked repeated values: not used by these tests */
        }
    }
    ert_dtype dt = onnx_dt(code);
    if (dt == ERT_DTYPE_UNDEFINED) return false;
    int64_t cnt = 1;
    for (int d = 0; d < nd; d++) {
        if (dims[d] < 0 || dims[d] > (1 << 24)) return false;
        cnt *= dims[d];
        if (cnt > (1 << 24)) return false;
    }
    *t = tt_new(dt, nd, dims);
    int64_t n = tt_n(t);
    size_t es = ert_dtype_size(dt);
    if (raw.p) {
        if ((size_t)(raw.end - raw.p) != (size_t)n * es) return tt_free(t), false;
        if (n) memcpy(t->data, raw.p, (size_t)n * es);
        return true;
    }
    for (int64_t i = 0; i < n; i++) {
        if (typed_field == 4) { /* float_data, fixed32 */
            if (typed.end - typed.p < 4) return tt_free(t), false;
            memcpy((float *)t->data + i, typed.p, 4);
            typed.p += 4;
            continue;
        }
        if (!typed.p || !pb_varint(&typed, &v)) return tt_free(t), false;
        switch (dt) { /* int32_data carries all the narrow types, f16/bf16 bits included */
        case ERT_DTYPE_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
        case ERT_DTYPE_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
        case ERT_DTYPE_F16: case ERT_DTYPE_BF16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
        default: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
        }
    }
    return true;
}

static bool load_pb(const char *path, tt *t) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    static uint8_t buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n == sizeof buf) return false; /* too big for these tests */
    pb b = {buf, buf + n};
    return pb_tensor(b, t);
}

/* The one node of a node test: op type, input slots, attributes. */
#define MAXA 16
typedef struct node_desc {
    char op[64];
    int n_in, n_out;
    bool in_given[24];
    int n_attrs;
    ert_attr_val attrs[MAXA];
    char names[MAXA][64], strs[MAXA][64];
    int64_t ints[MAXA][16];
    float floats[MAXA][16];
} node_desc;

static void copy_str(char *dst, size_t cap, pb s) {
    size_t n = (size_t)(s.end - s.p);
    if (n >= cap) n = cap - 1;
    memcpy(dst, s.p, n);
    dst[n] = 0;
}

static bool pb_attr(pb b, node_desc *nd) {
    if (nd->n_attrs >= MAXA - 1) return false; /* room for value_dtype too */
    int k = nd->n_attrs, field, wt, ni = 0, nf = 0;
    uint64_t v;
    pb sub;
    ert_attr_val *a = &nd->attrs[k];
    memset(a, 0, sizeof *a);
    a->name = nd->names[k];
    int type = 0;
    bool has_t = false;
    tt t = {0};
    while (pb_next(&b, &field, &wt, &v, &sub)) {
        switch (field) {
        case 1: copy_str(nd->names[k], sizeof nd->names[k], sub); break;
        case 2: { uint32_t u = (uint32_t)v; memcpy(&a->f, &u, 4); break; }
        case 3: a->i = (int64_t)v; break;
        case 4: copy_str(nd->strs[k], sizeof nd->strs[k], sub); a->s = nd->strs[k]; break;
        case 5: has_t = pb_tensor(sub, &t); break;
        case 7:
            if (wt == 2) while (sub.end - sub.p >= 4 && nf < 16) memcpy(&nd->floats[k][nf++], sub.p, 4), sub.p += 4;
            else if (nf < 16) { uint32_t u = (uint32_t)v; memcpy(&nd->floats[k][nf++], &u, 4); }
            break;
        case 8:
            if (wt == 2) while (sub.p < sub.end && ni < 16 && pb_varint(&sub, &v)) nd->ints[k][ni++] = (int64_t)v;
            else if (ni < 16) nd->ints[k][ni++] = (int64_t)v;
            break;
        case 20: type = (int)v; break;
        default: break;
        }
    }
    switch (type) { /* AttributeProto.AttributeType */
    case 1: a->type = ERT_ATTR_FLOAT; break;
    case 2: a->type = ERT_ATTR_INT; break;
    case 3: a->type = ERT_ATTR_STRING; break;
    case 6: a->type = ERT_ATTR_FLOATS; a->floats = nd->floats[k]; a->n = nf; break;
    case 7: a->type = ERT_ATTR_INTS; a->ints = nd->ints[k]; a->n = ni; break;
    case 4: /* TENSOR: ConstantOfShape's value, passed by our convention */
        if (!has_t || tt_n(&t) != 1) return false;
        if (t.dt == ERT_DTYPE_F32 || t.dt == ERT_DTYPE_F16 || t.dt == ERT_DTYPE_BF16) {
            nd->floats[k][0] = (float)tt_get(&t, 0);
            a->type = ERT_ATTR_FLOATS, a->floats = nd->floats[k], a->n = 1;
        } else {
            nd->ints[k][0] = t.dt == ERT_DTYPE_I64 ? *(int64_t *)t.data : (int64_t)tt_get(&t, 0);
            a->type = ERT_ATTR_INTS, a->ints = nd->ints[k], a->n = 1;
        }
        nd->n_attrs++;
        nd->attrs[nd->n_attrs] = A_I("value_dtype", t.dt);
        tt_free(&t);
        break;
    default: return false;
    }
    nd->n_attrs++;
    return true;
}

static bool load_node(const char *path, node_desc *nd) {
    static uint8_t buf[1 << 20];
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    memset(nd, 0, sizeof *nd);
    pb m = {buf, buf + n}, g, sub;
    int field, wt, nodes = 0;
    uint64_t v;
    bool ok = true;
    while (pb_next(&m, &field, &wt, &v, &sub)) {
        if (field != 7 || wt != 2) continue;
        g = sub;
        while (pb_next(&g, &field, &wt, &v, &sub)) {
            if (field != 1 || wt != 2 || nodes++) continue;
            pb nb = sub, s2;
            while (pb_next(&nb, &field, &wt, &v, &s2)) {
                if (field == 1 && nd->n_in < 24) nd->in_given[nd->n_in++] = s2.end > s2.p;
                else if (field == 2) nd->n_out++;
                else if (field == 4) copy_str(nd->op, sizeof nd->op, s2);
                else if (field == 5) ok = ok && pb_attr(s2, nd);
            }
        }
    }
    return ok && nodes == 1;
}

/* ------------------------------------------------------------------ runner */

static ert_context *ctx;

static bool close_out(const tt *got, const tt *want, char *why, size_t cap) {
    if (got->dt != want->dt || !same_shape(got, want->nd, want->dims)) {
        snprintf(why, cap, "dtype/shape: got %s rank %d, want %s rank %d", ert_dtype_name(got->dt), got->nd,
                 ert_dtype_name(want->dt), want->nd);
        return false;
    }
    bool fl = want->dt == ERT_DTYPE_F32 || want->dt == ERT_DTYPE_F16 || want->dt == ERT_DTYPE_BF16;
    size_t es = ert_dtype_size(want->dt);
    for (int64_t i = 0; i < tt_n(want); i++) {
        double g = tt_get(got, i), w = tt_get(want, i);
        bool ok;
        if (fl) ok = g == w || (isnan(g) && isnan(w)) || fabs(g - w) <= 1e-4 + 1e-3 * fabs(w);
        else ok = memcmp((const char *)got->data + i * (int64_t)es, (const char *)want->data + i * (int64_t)es, es) == 0;
        if (!ok) {
            snprintf(why, cap, "element %lld: got %.9g want %.9g", (long long)i, g, w);
            return false;
        }
    }
    return true;
}

int main(void) {
    const char *sh = ert_test_shared_dir();
    char dir[4096], path[4600], line[1024];
    if (!sh) return ert_test_skip("ops_onnx_node", "no ../shared");
    snprintf(dir, sizeof dir, "%s/conformance/onnx-node", sh);
    snprintf(path, sizeof path, "%s/INDEX.tsv", dir);
    FILE *idx = fopen(path, "r");
    if (!idx) return ert_test_skip("ops_onnx_node", "no conformance/onnx-node/INDEX.tsv");
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    int n_run = 0, n_refused = 0;
    static node_desc nd;
    while (fgets(line, sizeof line, idx)) {
        char name[256], types[256];
        if (sscanf(line, "%255[^\t]\t%*[^\t]\t%*[^\t]\t%255[^\t]", name, types) != 2 || strchr(types, ',')) continue;
        const ert_op_def *def = ert_op_find(types);
        /* Relu .. Range, and the inference ops appended after the training block */
        if (!def || def->op < ERT_OP_RELU || (def->op > ERT_OP_RANGE && def->op < ERT_OP_SIZE)) continue;
        snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
        if (!load_node(path, &nd) || nd.n_out > 24) {
            printf("  %-55s skipped: attributes not understood\n", name);
            continue;
        }
        tt in[24], out[24], want[24];
        int k, gi = 0, bad_load = 0, n_want = 0;
        for (k = 0; k < nd.n_in; k++) {
            if (!nd.in_given[k]) {
                in[k] = tt_omitted();
                continue;
            }
            snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%d.pb", dir, name, gi++);
            if (!load_pb(path, &in[k])) in[k] = tt_omitted(), bad_load++;
            in[k].cst = true;
        }
        for (; n_want < nd.n_out; n_want++) {
            snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_%d.pb", dir, name, n_want);
            if (!load_pb(path, &want[n_want])) break;
        }
        if (bad_load || n_want < nd.n_out) {
            printf("  %-55s skipped: unsupported dtype in the test data\n", name);
        } else {
            ert_op op = def->op;
            int stage;
            ert_status st = run_op(ctx, op, nd.attrs, nd.n_attrs, in, nd.n_in, out, nd.n_out, &stage);
            if (st == ERT_E_UNSUPPORTED) {
                printf("  %-55s refused (%s): %s\n", name, stage ? "kernel" : "prepare", ert_last_error(ctx));
                n_refused++;
            } else {
                CHECK(st == ERT_OK, "%s: %s %s", name, ert_status_str(st), stage ? "(kernel)" : ert_last_error(ctx));
                if (st == ERT_OK) {
                    n_run++;
                    for (int o = 0; o < nd.n_out; o++) {
                        char why[256] = "";
                        /* Dropout's mask is only defined in training mode */
                        if (!(op == ERT_OP_DROPOUT && o == 1)) CHECK(close_out(&out[o], &want[o], why, sizeof why), "%s output %d: %s", name, o, why);
                        tt_free(&out[o]);
                    }
                }
            }
        }
        for (k = 0; k < nd.n_in; k++) tt_free(&in[k]);
        for (k = 0; k < n_want; k++) tt_free(&want[k]);
    }
    fclose(idx);
    printf("ops_onnx_node: %d node tests run, %d refused as unsupported\n", n_run, n_refused);
    ert_context_free(ctx);
    return ert_test_finish("ops_onnx_node");
}
