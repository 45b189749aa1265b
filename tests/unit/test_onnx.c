/* ONNX loader: hand-built models (IR content, opset normalisation), hostile
 * inputs (each must give a status and a message naming the problem, never a
 * crash), external data confinement, TensorProto .pb reading, and the real
 * models in ../shared/models. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, symlink */
#include "runtime_internal.h"
#include "onnx_enc.h"
#include "testutil.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S(...) ((const char *const[]){__VA_ARGS__, NULL})

#define PCAP 4096

static ert_context *ctx;

static ert_status load(const pbuf *m, const char *dir, ert_model **out) {
    return ert_onnx_read(ctx, m->p, m->n, dir, out);
}

static const ert_node *node_by_op(const ert_model *m, ert_op op, int nth) {
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == op && nth-- == 0) return &m->nodes[i];
    return NULL;
}

static int count_op(const ert_model *m, ert_op op) {
    int c = 0;
    for (int i = 0; i < m->n_nodes; i++) c += m->nodes[i].op == op;
    return c;
}

/* Expect a failure with `st` and a message containing `needle`. */
static void expect_fail(const char *what, pbuf *m, const char *dir, ert_status st, const char *needle) {
    ert_model *mod = NULL;
    ert_status got = load(m, dir, &mod);
    CHECK(got == st, "%s: got %s (%s), expected %s", what, ert_status_str(got), ert_last_error(ctx), ert_status_str(st));
    CHECK(!needle || strstr(ert_last_error(ctx), needle), "%s: message '%s' lacks '%s'", what, ert_last_error(ctx), needle);
    if (got == ERT_OK) ert_model_free(mod);
    pb_free(m);
}

/* x[N,3] -> Relu -> r; r + b -> s; LeakyRelu(s, alpha 0.2) -> y. b is an
 * initializer also listed as a graph input (IR < 4 style). */
static pbuf small_model(void) {
    oxg g = {0};
    int64_t xd[2] = {-1, 3}, bd[1] = {3};
    float b[3] = {1, 2, 3};
    pbuf a[1] = {ox_attr_f("alpha", 0.2f)};
    ox_g_node(&g, ox_node("Relu", "relu1", NULL, S("x"), S("r"), NULL, 0));
    ox_g_node(&g, ox_node("Add", "add1", "", S("r", "b"), S("s"), NULL, 0));
    ox_g_node(&g, ox_node("LeakyRelu", "lrelu", NULL, S("s"), S("y"), a, 1));
    ox_g_init(&g, ox_tensor("b", OX_FLOAT, 1, bd, b, sizeof b));
    ox_g_input(&g, ox_value_info("x", OX_FLOAT, 2, xd));
    ox_g_input(&g, ox_value_info("b", OX_FLOAT, 1, bd));
    ox_g_output(&g, ox_value_info("y", OX_FLOAT, 2, xd));
    return ox_model(&g, 13);
}

static void test_small(void) {
    pbuf mb = small_model();
    ert_model *m = NULL;
    CHECK_OK(load(&mb, NULL, &m), ctx);
    if (m) {
        CHECK(m->n_inputs == 1 && m->n_outputs == 1, "io %d %d", m->n_inputs, m->n_outputs);
        CHECK(m->n_nodes == 3, "nodes %d", m->n_nodes);
        CHECK(m->opset == 13, "opset %d", m->opset);
        const ert_tensor *x = &m->tensors[m->inputs[0]];
        CHECK(strcmp(x->name, "x") == 0 && x->role == ERT_ROLE_INPUT && x->dtype == ERT_DTYPE_F32 && x->ndim == 2 &&
                  x->dims[0] == -1 && x->dims[1] == 3, "input x");
        int32_t bi = ert_model_find_tensor(m, "b");
        CHECK(bi >= 0 && m->tensors[bi].role == ERT_ROLE_WEIGHT && m->tensors[bi].data &&
                  ((const float *)m->tensors[bi].data)[2] == 3.0f, "weight b");
        const ert_node *add = node_by_op(m, ERT_OP_ADD, 0), *lr = node_by_op(m, ERT_OP_LEAKY_RELU, 0);
        CHECK(add && add->n_in == 2 && add->in[1] == bi && strcmp(add->name, "add1") == 0, "Add node");
        CHECK(lr && lr->n_attrs == 1 && ert_attr_float(lr, "alpha", 0) == 0.2f, "LeakyRelu alpha");
        CHECK(m->nodes[0].op == ERT_OP_RELU, "topological order");
        const ert_tensor *y = &m->tensors[m->outputs[0]];
        CHECK(strcmp(y->name, "y") == 0 && y->role == ERT_ROLE_OUTPUT, "output y");
        ert_model_free(m);
    }
    /* every proper prefix is malformed, never a crash */
    int bad = 0;
    for (size_t cut = 0; cut < mb.n; cut++) {
        ert_model *t = NULL;
        ert_status st = ert_onnx_read(ctx, mb.p, cut, NULL, &t);
        if (st != ERT_E_FORMAT) bad++;
        if (st == ERT_OK) ert_model_free(t);
    }
    CHECK(bad == 0, "%d truncations not ERT_E_FORMAT", bad);
    /* and every single-byte flip gives a status (any) without crashing */
    for (size_t i = 0; i < mb.n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            mb.p[i] ^= (uint8_t)(1u << bit);
            ert_model *t = NULL;
            if (ert_onnx_read(ctx, mb.p, mb.n, NULL, &t) == ERT_OK) ert_model_free(t);
            mb.p[i] ^= (uint8_t)(1u << bit);
        }
    }
    pb_free(&mb);
}

/* One node `op` on x[2,3,4] (f32) with attributes and extra named inputs. */
static pbuf one_node(int opset, const char *op, const char *const *ins, const char *const *outs, pbuf *attrs, int n_attrs,
                     pbuf *inits, int n_inits) {
    oxg g = {0};
    int64_t xd[3] = {2, 3, 4};
    ox_g_node(&g, ox_node(op, "n", NULL, ins, outs, attrs, n_attrs));
    for (int i = 0; i < n_inits; i++) ox_g_init(&g, inits[i]);
    ox_g_input(&g, ox_value_info("x", OX_FLOAT, 3, xd));
    for (const char *const *o = outs; *o; o++) ox_g_output(&g, ox_value_info(*o, OX_FLOAT, -1, NULL));
    return ox_model(&g, opset);
}

static const int64_t *weight_i64(const ert_model *m, int32_t id, int *n) {
    if (id < 0 || m->tensors[id].role != ERT_ROLE_WEIGHT || m->tensors[id].dtype != ERT_DTYPE_I64 || m->tensors[id].ndim != 1)
        return NULL;
    *n = (int)m->tensors[id].dims[0];
    return m->tensors[id].data;
}

static void test_normalise(void) {
    int64_t ax[2] = {0, 3};
    int64_t axd[1] = {2};
    ert_model *a = NULL, *b = NULL;
    /* Unsqueeze: axes attribute (opset 11) == axes input (opset 13) */
    pbuf at[1] = {ox_attr_is("axes", ax, 2, 1)};
    pbuf ma = one_node(11, "Unsqueeze", S("x"), S("y"), at, 1, NULL, 0);
    pbuf ini[1] = {ox_tensor("axes", OX_INT64, 1, axd, ax, sizeof ax)};
    pbuf mb = one_node(13, "Unsqueeze", S("x", "axes"), S("y"), NULL, 0, ini, 1);
    CHECK_OK(load(&ma, NULL, &a), ctx);
    CHECK_OK(load(&mb, NULL, &b), ctx);
    if (a && b) {
        const ert_node *na = &a->nodes[0], *nb = &b->nodes[0];
        int ca = 0, cb = 0;
        const int64_t *va = weight_i64(a, na->in[1], &ca), *vb = weight_i64(b, nb->in[1], &cb);
        CHECK(na->op == ERT_OP_UNSQUEEZE && nb->op == na->op && na->n_in == 2 && nb->n_in == 2, "Unsqueeze form");
        CHECK(na->n_attrs == 0 && nb->n_attrs == 0, "no attrs left: %d %d", na->n_attrs, nb->n_attrs);
        CHECK(va && vb && ca == 2 && cb == 2 && va[0] == vb[0] && va[1] == vb[1] && va[1] == 3, "axes equal");
    }
    ert_model_free(a);
    ert_model_free(b);
    pb_free(&ma);
    pb_free(&mb);

    /* ReduceMean axes attr at 13 -> input; keepdims passes through */
    pbuf rat[2] = {ox_attr_is("axes", ax, 1, 0), ox_attr_i("keepdims", 0)};
    ma = one_node(13, "ReduceMean", S("x"), S("y"), rat, 2, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        int c = 0;
        const int64_t *v = weight_i64(a, a->nodes[0].in[1], &c);
        CHECK(a->nodes[0].n_in == 2 && v && c == 1 && v[0] == 0, "ReduceMean axes input");
        CHECK(a->nodes[0].n_attrs == 1 && ert_attr_int(&a->nodes[0], "keepdims", 1) == 0, "keepdims kept");
        ert_model_free(a);
    }
    pb_free(&ma);

    /* Split 'split' attr (opset 11) -> input */
    int64_t sp[2] = {1, 3};
    pbuf sat[2] = {ox_attr_i("axis", 2), ox_attr_is("split", sp, 2, 0)};
    ma = one_node(11, "Split", S("x"), S("y0", "y1"), sat, 2, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        int c = 0;
        const int64_t *v = weight_i64(a, a->nodes[0].in[1], &c);
        CHECK(a->nodes[0].n_out == 2 && v && c == 2 && v[1] == 3 && ert_attr_int(&a->nodes[0], "axis", 0) == 2, "Split");
        ert_model_free(a);
    }
    pb_free(&ma);

    /* Clip opset 6: min/max attributes -> f32 scalar inputs */
    pbuf cat[1] = {ox_attr_f("max", 6.0f)};
    ma = one_node(6, "Clip", S("x"), S("y"), cat, 1, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        const ert_node *n = &a->nodes[0];
        CHECK(n->n_in == 3 && n->in[1] == -1 && n->in[2] >= 0 && a->tensors[n->in[2]].dtype == ERT_DTYPE_F32 &&
                  a->tensors[n->in[2]].ndim == 0 && *(const float *)a->tensors[n->in[2]].data == 6.0f && n->n_attrs == 0,
              "Clip max input");
        ert_model_free(a);
    }
    pb_free(&ma);

    /* Slice opset 9 attrs -> inputs; Pad opset 2 -> pads input + value */
    int64_t st[1] = {1}, en[1] = {3}, sx[1] = {2}, pads[6] = {0, 0, 1, 0, 0, 1};
    pbuf slat[3] = {ox_attr_is("starts", st, 1, 0), ox_attr_is("ends", en, 1, 0), ox_attr_is("axes", sx, 1, 0)};
    ma = one_node(9, "Slice", S("x"), S("y"), slat, 3, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        CHECK(a->nodes[0].op == ERT_OP_SLICE && a->nodes[0].n_in == 4 && a->nodes[0].n_attrs == 0, "Slice inputs");
        ert_model_free(a);
    }
    pb_free(&ma);
    pbuf pat[3] = {ox_attr_is("pads", pads, 6, 0), ox_attr_f("value", 1.5f), ox_attr_s("mode", "constant")};
    ma = one_node(2, "Pad", S("x"), S("y"), pat, 3, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        const ert_node *n = &a->nodes[0];
        int c = 0;
        CHECK(n->n_in == 3 && weight_i64(a, n->in[1], &c) && c == 6 && *(const float *)a->tensors[n->in[2]].data == 1.5f &&
                  n->n_attrs == 1 && strcmp(ert_attr_str(n, "mode", ""), "constant") == 0, "Pad inputs");
        ert_model_free(a);
    }
    pb_free(&ma);

    /* Upsample opset 7 (scales attr) and Resize opset 10 -> Resize(X, -, scales) */
    float sc[3] = {1, 2, 2};
    pbuf uat[2] = {ox_attr_s("mode", "nearest"), ox_attr_fs("scales", sc, 3)};
    ma = one_node(7, "Upsample", S("x"), S("y"), uat, 2, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        const ert_node *n = &a->nodes[0];
        CHECK(n->op == ERT_OP_RESIZE && n->n_in == 3 && n->in[1] == -1 && a->tensors[n->in[2]].dtype == ERT_DTYPE_F32 &&
                  a->tensors[n->in[2]].dims[0] == 3 && strcmp(ert_attr_str(n, "coordinate_transformation_mode", ""), "asymmetric") == 0 &&
                  strcmp(ert_attr_str(n, "nearest_mode", ""), "floor") == 0 && strcmp(ert_attr_str(n, "mode", ""), "nearest") == 0,
              "Upsample -> Resize");
        ert_model_free(a);
    }
    pb_free(&ma);
    int64_t scd[1] = {3};
    pbuf rini[1] = {ox_tensor("sc", OX_FLOAT, 1, scd, sc, sizeof sc)};
    pbuf rsat[1] = {ox_attr_s("mode", "linear")};
    ma = one_node(10, "Resize", S("x", "sc"), S("y"), rsat, 1, rini, 1);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        const ert_node *n = &a->nodes[0];
        CHECK(n->n_in == 3 && n->in[1] == -1 && n->in[2] == ert_model_find_tensor(a, "sc") && !ert_node_attr(n, "nearest_mode"),
              "Resize-10");
        ert_model_free(a);
    }
    pb_free(&ma);

    /* Softmax opset 11, axis 1 on rank 3: Shape + Flatten -> Softmax -> Reshape;
     * axis 2 (last) stays one node */
    pbuf smat[1] = {ox_attr_i("axis", 1)};
    ma = one_node(11, "Softmax", S("x"), S("y"), smat, 1, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        CHECK(a->n_nodes == 4 && count_op(a, ERT_OP_FLATTEN) == 1 && count_op(a, ERT_OP_RESHAPE) == 1 &&
                  count_op(a, ERT_OP_SHAPE) == 1 && count_op(a, ERT_OP_SOFTMAX) == 1, "Softmax-11 decomposed (%d nodes)", a->n_nodes);
        const ert_node *f = node_by_op(a, ERT_OP_FLATTEN, 0), *s = node_by_op(a, ERT_OP_SOFTMAX, 0);
        CHECK(f && s && ert_attr_int(f, "axis", -9) == 1 && ert_attr_int(s, "axis", -9) == 1, "axes");
        ert_model_free(a);
    }
    pb_free(&ma);
    pbuf smat2[1] = {ox_attr_i("axis", 2)};
    ma = one_node(11, "LogSoftmax", S("x"), S("y"), smat2, 1, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        CHECK(a->n_nodes == 1 && a->nodes[0].op == ERT_OP_LOGSOFTMAX && ert_attr_int(&a->nodes[0], "axis", -9) == 2,
              "LogSoftmax-11 on the last axis kept");
        ert_model_free(a);
    }
    pb_free(&ma);

    /* variadic Max -> chain; Sum of 2 -> Add; Dropout ratio dropped */
    ma = one_node(13, "Max", S("x", "x", "x"), S("y"), NULL, 0, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        CHECK(a->n_nodes == 2 && count_op(a, ERT_OP_MAX) == 2, "Max chain");
        ert_model_free(a);
    }
    pb_free(&ma);
    ma = one_node(13, "Sum", S("x", "x"), S("y"), NULL, 0, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        CHECK(a->n_nodes == 1 && a->nodes[0].op == ERT_OP_ADD, "Sum -> Add");
        ert_model_free(a);
    }
    pb_free(&ma);
    pbuf dat[1] = {ox_attr_f("ratio", 0.3f)};
    ma = one_node(10, "Dropout", S("x"), S("y"), dat, 1, NULL, 0);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        CHECK(a->nodes[0].op == ERT_OP_DROPOUT && a->nodes[0].n_attrs == 0, "Dropout ratio dropped");
        ert_model_free(a);
    }
    pb_free(&ma);

    /* CastLike(w, x) with x a graph input -> Cast(w, to = FLOAT) */
    int64_t i1 = 3, cd1[1] = {1};
    pbuf cini[1] = {ox_tensor("w", OX_INT64, 1, cd1, &i1, sizeof i1)};
    ma = one_node(15, "CastLike", S("w", "x"), S("y"), NULL, 0, cini, 1);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        CHECK(a->nodes[0].op == ERT_OP_CAST && a->nodes[0].n_in == 1 && ert_attr_int(&a->nodes[0], "to", 0) == 1, "CastLike");
        ert_model_free(a);
    }
    pb_free(&ma);

    /* ConstantOfShape value tensor -> value (INTS) + value_dtype; Constant -> weight */
    int64_t one = 1, seven = 7;
    pbuf vt = ox_tensor(NULL, OX_INT64, 1, &one, &seven, sizeof seven);
    oxg g = {0};
    int64_t shp[2] = {2, 2}, shd[1] = {2};
    pbuf cv = ox_tensor(NULL, OX_INT64, 1, shd, shp, sizeof shp);
    pbuf ca[1] = {ox_attr_t("value", &cv)};
    pbuf coa[1] = {ox_attr_t("value", &vt)};
    ox_g_node(&g, ox_node("Constant", NULL, NULL, NULL, S("shape"), ca, 1));
    ox_g_node(&g, ox_node("ConstantOfShape", "cos", NULL, S("shape"), S("y"), coa, 1));
    ox_g_output(&g, ox_value_info("y", OX_INT64, 2, shp));
    ma = ox_model(&g, 13);
    a = NULL;
    CHECK_OK(load(&ma, NULL, &a), ctx);
    if (a) {
        const ert_node *n = &a->nodes[0];
        const ert_attr_val *v = ert_node_attr(n, "value");
        int c = 0;
        CHECK(a->n_nodes == 1 && n->op == ERT_OP_CONSTANT_OF_SHAPE, "ConstantOfShape node");
        CHECK(v && v->type == ERT_ATTR_INTS && v->n == 1 && v->ints[0] == 7 && ert_attr_int(n, "value_dtype", 0) == ERT_DTYPE_I64,
              "value/value_dtype");
        const int64_t *sv = weight_i64(a, n->in[0], &c);
        CHECK(sv && c == 2 && sv[0] == 2 && strcmp(a->tensors[n->in[0]].name, "shape") == 0, "Constant -> weight");
        ert_model_free(a);
    }
    pb_free(&ma);
}

/* PRelu-6 applies a 1-D slope per channel: the loader reshapes it to (C, 1)
 * for x (2,3,4) and the session computes per-channel values; from opset 7 the
 * slope broadcasts numpy-style and is kept as given. */
static void test_prelu_old(ert_test_rng *r) {
    int64_t sd3 = 3, sd4 = 4;
    float s3[3], s4[4];
    ert_test_fill(r, s3, 3, -2, 2);
    ert_test_fill(r, s4, 4, -2, 2);
    for (int v = 0; v < 2; v++) {
        int opset = v ? 9 : 6;
        pbuf ini[1] = {v ? ox_tensor("s", OX_FLOAT, 1, &sd4, s4, sizeof s4) : ox_tensor("s", OX_FLOAT, 1, &sd3, s3, sizeof s3)};
        pbuf mb = one_node(opset, "PRelu", S("x", "s"), S("y"), NULL, 0, ini, 1);
        ert_model *m = NULL;
        CHECK_OK(load(&mb, NULL, &m), ctx);
        pb_free(&mb);
        if (!m) continue;
        const ert_node *n = node_by_op(m, ERT_OP_PRELU, 0);
        const ert_tensor *st = n ? &m->tensors[n->in[1]] : NULL;
        CHECK(st && (v ? st->ndim == 1 && st->dims[0] == 4 : st->ndim == 2 && st->dims[0] == 3 && st->dims[1] == 1),
              "PRelu-%d slope shape", opset);
        ert_session *s = NULL;
        CHECK_OK(ert_session_create(m, &(ert_session_options){0}, &s), ctx);
        if (s) {
            float x[24], y[24];
            double ref[24];
            ert_test_fill(r, x, 24, -3, 3);
            for (int i = 0; i < 24; i++) {
                double sl = v ? s4[i % 4] : s3[(i / 4) % 3]; /* x is (2,3,4) */
                ref[i] = x[i] < 0 ? sl * x[i] : x[i];
            }
            CHECK_OK(ert_session_set_input(s, 0, x, sizeof x), ctx);
            CHECK_OK(ert_session_run(s), ctx);
            CHECK_OK(ert_session_get_output(s, 0, y, sizeof y), ctx);
            CHECK(ert_test_close("prelu", y, ref, 24, 1e-6, 1e-6), "PRelu-%d values", opset);
            ert_session_free(s);
        }
        ert_model_free(m);
    }
}

/* A Constant that is itself a graph output becomes weight -> Identity -> output. */
static void test_constant_output(void) {
    oxg g = {0};
    int64_t d[1] = {2};
    float v[2] = {4, 5};
    pbuf t = ox_tensor(NULL, OX_FLOAT, 1, d, v, sizeof v);
    pbuf a[1] = {ox_attr_t("value", &t)};
    ox_g_node(&g, ox_node("Constant", NULL, NULL, NULL, S("c"), a, 1));
    ox_g_output(&g, ox_value_info("c", OX_FLOAT, 1, d));
    pbuf m = ox_model(&g, 13);
    ert_model *mod = NULL;
    CHECK_OK(load(&m, NULL, &mod), ctx);
    if (mod) {
        const ert_node *n = &mod->nodes[0];
        CHECK(mod->n_nodes == 1 && n->op == ERT_OP_IDENTITY && mod->tensors[n->in[0]].role == ERT_ROLE_WEIGHT &&
                  ((const float *)mod->tensors[n->in[0]].data)[1] == 5.0f && strcmp(mod->tensors[mod->outputs[0]].name, "c") == 0,
              "constant output");
        ert_model_free(mod);
    }
    pb_free(&m);
}

static void test_hostile(void) {
    int64_t d3[1] = {3};
    float w[3] = {1, 2, 3};
    pbuf m;
    /* varint overflow: 11 continuation bytes for ir_version */
    m = (pbuf){0};
    pb_tag(&m, 1, 0);
    for (int i = 0; i < 10; i++) pb_raw(&m, "\xff", 1);
    pb_raw(&m, "\x01", 1);
    expect_fail("varint 11 bytes", &m, NULL, ERT_E_FORMAT, "overflows");
    m = (pbuf){0};
    pb_tag(&m, 1, 0);
    for (int i = 0; i < 9; i++) pb_raw(&m, "\xff", 1);
    pb_raw(&m, "\x02", 1); /* bit 64 */
    expect_fail("varint bit 64", &m, NULL, ERT_E_FORMAT, "overflows");
    /* length past the end */
    m = (pbuf){0};
    pb_vfield(&m, 1, 8);
    pb_tag(&m, 7, 2);
    pb_varint(&m, 1000);
    pb_raw(&m, "\x0a\x00", 2);
    expect_fail("length past end", &m, NULL, ERT_E_FORMAT, "past the end");
    /* group wire type */
    m = (pbuf){0};
    pb_tag(&m, 5, 3);
    expect_fail("group", &m, NULL, ERT_E_FORMAT, "wire type");

    /* initializer problems, each in an otherwise valid Relu graph */
    struct {
        const char *what;
        int dtype;
        int ndim;
        int64_t dims[3];
        size_t raw_n;
        ert_status st;
        const char *needle;
    } inits[] = {
        {"negative dim", OX_FLOAT, 1, {-3}, 12, ERT_E_FORMAT, "('w'): negative dim"},
        {"huge dims", OX_FLOAT, 3, {1ll << 40, 1ll << 40, 1ll << 40}, 12, ERT_E_FORMAT, "overflow"},
        {"huge bytes", OX_FLOAT, 2, {1ll << 30, 1ll << 30}, 12, ERT_E_FORMAT, "raw_data"},
        {"short raw_data", OX_FLOAT, 1, {4}, 12, ERT_E_FORMAT, "raw_data has 12 bytes"},
        {"unknown dtype", 99, 1, {3}, 12, ERT_E_FORMAT, "unknown data_type 99"},
        {"double", OX_DOUBLE, 1, {3}, 24, ERT_E_UNSUPPORTED, "DOUBLE"},
        {"string", OX_STRING, 1, {3}, 12, ERT_E_UNSUPPORTED, "STRING"},
        {"no data", OX_FLOAT, 1, {3}, 0, ERT_E_FORMAT, "no data"},
    };
    for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++) {
        oxg g = {0};
        uint8_t raw[24] = {0};
        ox_g_node(&g, ox_node("Add", NULL, NULL, S("x", "w"), S("y"), NULL, 0));
        ox_g_init(&g, ox_tensor("w", inits[i].dtype, inits[i].ndim, inits[i].dims, inits[i].raw_n ? raw : NULL, inits[i].raw_n));
        ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d3));
        ox_g_output(&g, ox_value_info("y", OX_FLOAT, 1, d3));
        m = ox_model(&g, 13);
        expect_fail(inits[i].what, &m, NULL, inits[i].st, inits[i].needle);
    }
    /* string tensor via string_data */
    {
        oxg g = {0};
        pbuf t = ox_tensor("w", OX_STRING, 1, d3, NULL, 0);
        pb_str(&t, 6, "a");
        ox_g_node(&g, ox_node("Relu", NULL, NULL, S("x"), S("y"), NULL, 0));
        ox_g_init(&g, t);
        ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d3));
        ox_g_output(&g, ox_value_info("y", OX_FLOAT, 1, d3));
        m = ox_model(&g, 13);
        expect_fail("string_data", &m, NULL, ERT_E_UNSUPPORTED, "string tensors");
    }

    /* graph-level problems */
    struct {
        const char *what;
        const char *op, *domain;
        const char *const *ins, *const *outs;
        ert_status st;
        const char *needle;
    } graphs[] = {
        {"undefined input", "Relu", NULL, S("nope"), S("y"), ERT_E_FORMAT, "'nope' is not defined"},
        {"unknown op", "FooBar", NULL, S("x"), S("y"), ERT_E_UNSUPPORTED, "FooBar"},
        {"unknown domain", "Relu", "com.microsoft", S("x"), S("y"), ERT_E_UNSUPPORTED, "com.microsoft"},
        {"output is input", "Relu", NULL, S("x"), S("x"), ERT_E_FORMAT, "defined more than once"},
    };
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) {
        oxg g = {0};
        ox_g_node(&g, ox_node(graphs[i].op, "bad_node", graphs[i].domain, graphs[i].ins, graphs[i].outs, NULL, 0));
        ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d3));
        ox_g_output(&g, ox_value_info("y", OX_FLOAT, 1, d3));
        m = ox_model(&g, 13);
        expect_fail(graphs[i].what, &m, NULL, graphs[i].st, graphs[i].needle);
    }
    /* the unknown-op message names the node too */
    {
        oxg g = {0};
        ox_g_node(&g, ox_node("FooBar", "my_node", NULL, S("x"), S("y"), NULL, 0));
        ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d3));
        ox_g_output(&g, ox_value_info("y", OX_FLOAT, 1, d3));
        m = ox_model(&g, 13);
        expect_fail("unknown op names node", &m, NULL, ERT_E_UNSUPPORTED, "my_node");
    }
    /* duplicate outputs */
    {
        oxg g = {0};
        ox_g_node(&g, ox_node("Relu", "a", NULL, S("x"), S("y"), NULL, 0));
        ox_g_node(&g, ox_node("Neg", "b", NULL, S("x"), S("y"), NULL, 0));
        ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d3));
        ox_g_output(&g, ox_value_info("y", OX_FLOAT, 1, d3));
        m = ox_model(&g, 13);
        expect_fail("duplicate output", &m, NULL, ERT_E_FORMAT, "'y' is defined more than once");
    }
    /* cycle: a = Add(x, c); c = Relu(a) */
    {
        oxg g = {0};
        ox_g_node(&g, ox_node("Add", "a", NULL, S("x", "c"), S("a"), NULL, 0));
        ox_g_node(&g, ox_node("Relu", "c", NULL, S("a"), S("c"), NULL, 0));
        ox_g_node(&g, ox_node("Relu", "out", NULL, S("a"), S("y"), NULL, 0));
        ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d3));
        ox_g_output(&g, ox_value_info("y", OX_FLOAT, 1, d3));
        m = ox_model(&g, 13);
        expect_fail("cycle", &m, NULL, ERT_E_FORMAT, "cycle");
    }
    /* wrong attribute type: Softmax axis as FLOAT; subgraph attribute */
    {
        pbuf a[1] = {ox_attr_f("axis", 1.0f)};
        m = one_node(13, "Softmax", S("x"), S("y"), a, 1, NULL, 0);
        expect_fail("axis FLOAT", &m, NULL, ERT_E_FORMAT, "attribute 'axis' has type FLOAT, expected INT");
        pbuf ga = {0};
        pbuf sub = {0};
        pb_str(&ga, 1, "then_branch");
        pb_str(&sub, 2, "g");
        pb_msg(&ga, 6, &sub);
        pb_vfield(&ga, 20, 5);
        pbuf b[1] = {ga};
        m = one_node(13, "If", S("x"), S("y"), b, 1, NULL, 0);
        expect_fail("subgraph", &m, NULL, ERT_E_UNSUPPORTED, "subgraph");
    }
    /* graph output not produced; no opset; no graph */
    {
        oxg g = {0};
        ox_g_node(&g, ox_node("Relu", NULL, NULL, S("x"), S("y"), NULL, 0));
        ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d3));
        ox_g_output(&g, ox_value_info("z", OX_FLOAT, 1, d3));
        m = ox_model(&g, 13);
        expect_fail("undefined output", &m, NULL, ERT_E_FORMAT, "'z' is not produced");
        m = (pbuf){0};
        pb_vfield(&m, 1, 8);
        pbuf gg = {0};
        pb_msg(&m, 7, &gg);
        expect_fail("no opset", &m, NULL, ERT_E_FORMAT, "opset_import");
        m = (pbuf){0};
        pb_raw(&m, "hello world, not a model", 24);
        CHECK(load(&m, NULL, &(ert_model *){NULL}) != ERT_OK, "text");
        pb_free(&m);
    }
    (void)w;
}

/* External data: a valid file inside the model's directory, then each escape. */
static void test_external(void) {
    char tmpl[] = "/tmp/ert_onnx_XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    char p[PCAP], sub[PCAP], outside[PCAP];
    float w[4] = {1.5f, 2.5f, 3.5f, 4.5f};
    snprintf(p, sizeof p, "%s/weights.bin", dir);
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite("PAD!", 1, 4, f);
        fwrite(w, 1, sizeof w, f);
        fclose(f);
    }
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0755);
    snprintf(outside, sizeof outside, "%s.outside", dir);
    f = fopen(outside, "wb");
    if (f) {
        fwrite(w, 1, sizeof w, f);
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/sub/escape.bin", dir);
    CHECK(symlink(outside, p) == 0, "symlink");
    snprintf(p, sizeof p, "%s/sub/inside.bin", dir);
    CHECK(symlink("../weights.bin", p) == 0, "symlink");

    struct {
        const char *what, *loc, *off, *len;
        ert_status st;
        const char *needle;
    } cases[] = {
        {"valid", "weights.bin", "4", "16", ERT_OK, NULL},
        {"valid via symlink inside", "sub/inside.bin", "4", NULL, ERT_OK, NULL},
        {"dotdot", "../x", NULL, NULL, ERT_E_FORMAT, "leaves the model's directory"},
        {"dotdot inner", "sub/../../x", NULL, NULL, ERT_E_FORMAT, "leaves"},
        {"absolute", "/etc/passwd", NULL, NULL, ERT_E_FORMAT, "absolute"},
        {"symlink escape", "sub/escape.bin", NULL, NULL, ERT_E_FORMAT, "outside the model's directory"},
        {"past end", "weights.bin", "8", NULL, ERT_E_FORMAT, "past the end"},
        {"huge offset", "weights.bin", "18446744073709551615", NULL, ERT_E_FORMAT, "past the end"},
        {"wrong length", "weights.bin", "4", "12", ERT_E_FORMAT, "length"},
        {"missing file", "nope.bin", NULL, NULL, ERT_E_IO, "nope.bin"},
        {"empty location", "", NULL, NULL, ERT_E_FORMAT, "location"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t d4[1] = {4};
        pbuf t = ox_tensor("w", OX_FLOAT, 1, d4, NULL, 0);
        const char *kv[3][2] = {{"location", cases[i].loc}, {"offset", cases[i].off}, {"length", cases[i].len}};
        for (int k = 0; k < 3; k++) {
            if (!kv[k][1]) continue;
            pbuf e = {0};
            pb_str(&e, 1, kv[k][0]);
            pb_str(&e, 2, kv[k][1]);
            pb_msg(&t, 13, &e);
        }
        pb_vfield(&t, 14, 1);
        oxg g = {0};
        ox_g_node(&g, ox_node("Add", NULL, NULL, S("x", "w"), S("y"), NULL, 0));
        ox_g_init(&g, t);
        ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d4));
        ox_g_output(&g, ox_value_info("y", OX_FLOAT, 1, d4));
        pbuf m = ox_model(&g, 13);
        if (cases[i].st == ERT_OK) {
            /* through the public file loader, which passes the model's directory */
            snprintf(p, sizeof p, "%s/model.onnx", dir);
            f = fopen(p, "wb");
            if (f) {
                fwrite(m.p, 1, m.n, f);
                fclose(f);
            }
            ert_model *mod = NULL;
            CHECK_OK(ert_model_load_file(ctx, p, &mod), ctx);
            if (mod) {
                int32_t id = ert_model_find_tensor(mod, "w");
                CHECK(id >= 0 && memcmp(mod->tensors[id].data, w, sizeof w) == 0, "%s: data", cases[i].what);
                ert_model_free(mod);
            }
            pb_free(&m);
        } else {
            expect_fail(cases[i].what, &m, dir, cases[i].st, cases[i].needle);
        }
    }
    /* no directory (loaded from memory): refused */
    {
        int64_t d4[1] = {4};
        pbuf t = ox_tensor("w", OX_FLOAT, 1, d4, NULL, 0), e = {0};
        pb_str(&e, 1, "location");
        pb_str(&e, 2, "weights.bin");
        pb_msg(&t, 13, &e);
        pb_vfield(&t, 14, 1);
        oxg g = {0};
        ox_g_node(&g, ox_node("Add", NULL, NULL, S("x", "w"), S("y"), NULL, 0));
        ox_g_init(&g, t);
        ox_g_input(&g, ox_value_info("x", OX_FLOAT, 1, d4));
        ox_g_output(&g, ox_value_info("y", OX_FLOAT, 1, d4));
        pbuf m = ox_model(&g, 13);
        expect_fail("no dir", &m, NULL, ERT_E_UNSUPPORTED, "directory");
    }
    snprintf(p, sizeof p, "%s/sub/escape.bin", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/sub/inside.bin", dir);
    unlink(p);
    rmdir(sub);
    snprintf(p, sizeof p, "%s/weights.bin", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.onnx", dir);
    unlink(p);
    rmdir(dir);
    unlink(outside);
}

/* ert_tensor_load_pb: float_data (unpacked and packed), int32_data for fp16. */
static void test_pb(void) {
    char tmpl[] = "/tmp/ert_pb_XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    char p[PCAP];
    snprintf(p, sizeof p, "%s/t.pb", dir);
    pbuf t = {0}, packed = {0};
    pb_vfield(&t, 1, 2);
    pb_vfield(&t, 1, 2);
    pb_vfield(&t, 2, OX_FLOAT);
    pb_f32(&t, 4, 1.0f);
    float rest[3] = {2, 3, 4};
    pb_raw(&packed, rest, sizeof rest);
    pb_msg(&t, 4, &packed);
    pb_str(&t, 8, "input_0");
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(t.p, 1, t.n, f);
        fclose(f);
    }
    ert_tensor_info info;
    void *data = NULL;
    size_t bytes = 0;
    CHECK_OK(ert_tensor_load_pb(ctx, p, &info, &data, &bytes), ctx);
    if (data) {
        const float *v = data;
        CHECK(bytes == 16 && info.ndim == 2 && info.dims[1] == 2 && info.dtype == ERT_DTYPE_F32 && v[0] == 1 && v[3] == 4 &&
                  strcmp(info.name, "input_0") == 0, "float pb");
        ert_free(data);
    }
    /* fp16 bits in int32_data (packed varints) */
    pb_free(&t);
    pb_vfield(&t, 1, 2);
    pb_vfield(&t, 2, OX_FLOAT16);
    pb_varint(&packed, 0x3c00);
    pb_varint(&packed, 0xc000);
    pb_msg(&t, 5, &packed);
    f = fopen(p, "wb");
    if (f) {
        fwrite(t.p, 1, t.n, f);
        fclose(f);
    }
    data = NULL;
    CHECK_OK(ert_tensor_load_pb(ctx, p, &info, &data, &bytes), ctx);
    if (data) {
        const uint16_t *h = data;
        CHECK(bytes == 4 && info.dtype == ERT_DTYPE_F16 && h[0] == 0x3c00 && h[1] == 0xc000 && info.name[0] == 0, "f16 pb");
        ert_free(data);
    }
    /* truncated file */
    f = fopen(p, "wb");
    if (f) {
        fwrite(t.p, 1, t.n - 1, f);
        fclose(f);
    }
    CHECK(ert_tensor_load_pb(ctx, p, &info, &data, &bytes) == ERT_E_FORMAT, "truncated pb");
    CHECK(ert_tensor_load_pb(ctx, "/nonexistent/x.pb", &info, &data, &bytes) == ERT_E_IO, "missing pb");
    pb_free(&t);
    unlink(p);
    rmdir(dir);
}

/* Real models: op counts as exported. */
static void test_real_models(const char *shared) {
    struct {
        const char *file;
        int n_nodes;
        const char *ops; /* "Op=count ..." checked per op */
    } models[] = {
        {"mnist_8/model.onnx", 12, "Conv=2 Add=3 Relu=2 MaxPool=2 Reshape=2 MatMul=1"},
        {"super_resolution_10/model.onnx", 10, "Conv=4 Relu=3 Reshape=2 Transpose=1"},
        {"ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx", 167, "Conv=53 BatchNormalization=35 HardSwish=18 Softmax=1"},
        {"ppocr/ch_ppocr_mobile_v2.0_cls_infer_fp16.onnx", 169, "Conv=53 Cast=5 Softmax=1"},
        {"ppocr/en_PP-OCRv3_det_infer.onnx", 220, "Conv=72 Resize=6 ConvTranspose=2 Sigmoid=1"},
        {"ppocr/en_PP-OCRv3_det_infer_fp16.onnx", 245, "Conv=72 Cast=25 Resize=6"},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char p[PCAP];
        snprintf(p, sizeof p, "%s/models/%s", shared, models[i].file);
        ert_model *m = NULL;
        CHECK_OK(ert_model_load_file(ctx, p, &m), ctx);
        if (!m) continue;
        CHECK(m->n_nodes == models[i].n_nodes, "%s: %d nodes, expected %d", models[i].file, m->n_nodes, models[i].n_nodes);
        CHECK(m->n_inputs == 1 && m->n_outputs == 1, "%s: io", models[i].file);
        char ops[256];
        snprintf(ops, sizeof ops, "%s", models[i].ops);
        for (char *tok = strtok(ops, " "); tok; tok = strtok(NULL, " ")) {
            char *eq = strchr(tok, '=');
            *eq = 0;
            const ert_op_def *d = ert_op_find(tok);
            CHECK(d && count_op(m, d->op) == atoi(eq + 1), "%s: %s count %d, expected %s", models[i].file, tok,
                  d ? count_op(m, d->op) : -1, eq + 1);
        }
        if (strstr(models[i].file, "fp16")) {
            int f16 = 0;
            for (int t = 0; t < m->n_tensors; t++) f16 += m->tensors[t].role == ERT_ROLE_WEIGHT && m->tensors[t].dtype == ERT_DTYPE_F16;
            CHECK(f16 > 50, "%s: f16 weights kept as f16 (%d)", models[i].file, f16);
        }
        ert_model_free(m);
    }
}

/* mnist_8 end to end, when the session and kernels can run it. */
static void test_mnist_run(const char *shared) {
    char p[PCAP];
    snprintf(p, sizeof p, "%s/models/mnist_8/model.onnx", shared);
    ert_model *m = NULL;
    if (ert_model_load_file(ctx, p, &m) != ERT_OK) return;
    ert_session *s = NULL;
    ert_status st = ert_session_create(m, &(ert_session_options){0}, &s);
    if (st != ERT_OK) {
        printf("note: mnist_8 session not runnable yet: %s\n", ert_last_error(ctx));
        CHECK(st == ERT_E_UNSUPPORTED, "mnist_8 create: %s", ert_last_error(ctx));
        ert_model_free(m);
        return;
    }
    for (int ds = 0; ds < 3; ds++) {
        ert_tensor_info ii, oi;
        void *in = NULL, *ref = NULL;
        size_t ib = 0, ob = 0;
        snprintf(p, sizeof p, "%s/models/mnist_8/test_data_set_%d/input_0.pb", shared, ds);
        CHECK_OK(ert_tensor_load_pb(ctx, p, &ii, &in, &ib), ctx);
        snprintf(p, sizeof p, "%s/models/mnist_8/test_data_set_%d/output_0.pb", shared, ds);
        CHECK_OK(ert_tensor_load_pb(ctx, p, &oi, &ref, &ob), ctx);
        if (in && ref) {
            CHECK_OK(ert_session_set_input(s, 0, in, ib), ctx);
            st = ert_session_run(s);
            if (st == ERT_E_UNSUPPORTED) {
                printf("note: mnist_8 run: %s\n", ert_last_error(ctx));
            } else {
                CHECK_OK(st, ctx);
                const float *got = NULL;
                ert_session_output_data(s, 0, (const void **)&got);
                double r[10];
                for (int k = 0; k < 10; k++) r[k] = ((const float *)ref)[k];
                if (got) CHECK(ert_test_close("mnist_8", got, r, 10, 1e-4, 1e-3), "mnist_8 set %d", ds);
            }
        }
        ert_free(in);
        ert_free(ref);
    }
    ert_session_free(s);
    ert_model_free(m);
}

/* Softmax-11 with axis 1 on (2,3,4) means softmax over the 12 values of each
 * row of the (2,12) view; the decomposed graph must compute exactly that
 * (runs once the session has Shape/Flatten/Softmax/Reshape kernels). */
static void test_softmax_old_run(void) {
    pbuf at[1] = {ox_attr_i("axis", 1)};
    pbuf mb = one_node(11, "Softmax", S("x"), S("y"), at, 1, NULL, 0);
    ert_model *m = NULL;
    CHECK_OK(load(&mb, NULL, &m), ctx);
    pb_free(&mb);
    if (!m) return;
    ert_session *s = NULL;
    ert_status st = ert_session_create(m, &(ert_session_options){0}, &s);
    if (st != ERT_OK) {
        printf("note: Softmax-11 decomposition not runnable yet: %s\n", ert_last_error(ctx));
        CHECK(st == ERT_E_UNSUPPORTED, "create: %s", ert_last_error(ctx));
        ert_model_free(m);
        return;
    }
    float x[24], y[24];
    double ref[24];
    for (int i = 0; i < 24; i++) x[i] = (float)((i * 37) % 11) * 0.25f - 1.0f;
    for (int r = 0; r < 2; r++) {
        double mx = -1e30, sum = 0;
        for (int k = 0; k < 12; k++) mx = x[r * 12 + k] > mx ? x[r * 12 + k] : mx; /* no fmax: gcc 12 aarch64 ICE at -O3 */
        for (int k = 0; k < 12; k++) sum += exp(x[r * 12 + k] - mx);
        for (int k = 0; k < 12; k++) ref[r * 12 + k] = exp(x[r * 12 + k] - mx) / sum;
    }
    CHECK_OK(ert_session_set_input(s, 0, x, sizeof x), ctx);
    st = ert_session_run(s);
    if (st == ERT_E_UNSUPPORTED) {
        printf("note: Softmax-11 run: %s\n", ert_last_error(ctx));
    } else {
        CHECK_OK(st, ctx);
        ert_tensor_info oi;
        ert_session_output_info(s, 0, &oi);
        CHECK(oi.ndim == 3 && oi.dims[0] == 2 && oi.dims[1] == 3 && oi.dims[2] == 4, "output shape restored");
        CHECK_OK(ert_session_get_output(s, 0, y, sizeof y), ctx);
        CHECK(ert_test_close("softmax-11", y, ref, 24, 1e-6, 1e-5), "Softmax-11 values");
    }
    ert_session_free(s);
    ert_model_free(m);
}

int main(void) {
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    test_small();
    test_normalise();
    test_constant_output();
    test_softmax_old_run();
    {
        ert_test_rng r;
        ert_test_rng_init(&r, "onnx");
        test_prelu_old(&r);
    }
    test_hostile();
    test_external();
    test_pb();
    const char *shared = ert_test_shared_dir();
    if (shared) {
        test_real_models(shared);
        test_mnist_run(shared);
    } else {
        printf("note: ../shared not found: real-model checks skipped\n");
    }
    ert_context_free(ctx);
    return ert_test_finish("onnx");
}
