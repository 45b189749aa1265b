/* Seed generator for the fuzz corpora: small, valid models that reach deep
 * into the loaders (every attribute type, several dtypes, omitted inputs,
 * dynamic dims, zero-size weights, multi-output nodes). Usage:
 *   fuzz_gen_seeds OUT_ROOT   -> OUT_ROOT/ert/seed_*.ert, OUT_ROOT/onnx/seed_*.onnx
 * scripts/gen_fuzz_seeds.sh builds and runs it. Seeds stay tiny (< 4 KB each)
 * because libFuzzer mutates small inputs best. */
#include "edgert.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ert_context *ctx;
static int failures;

#define OK(x) do { ert_status st_ = (x); if (st_) { fprintf(stderr, "%s: %s (%s)\n", #x, ert_status_str(st_), ert_last_error(ctx)); failures++; } } while (0)

static void save(ert_builder *b, const char *root, const char *name) {
    ert_model *m = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/ert/%s.ert", root, name);
    OK(ert_builder_finish(b, &m));
    if (m) OK(ert_model_save(m, path));
    ert_model_free(m);
    ert_builder_free(b);
}

static void seed_relu(const char *root) {
    ert_builder *b;
    int32_t x, y;
    int64_t d[2] = {-1, 4};
    OK(ert_builder_create(ctx, &b));
    OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, d, &x));
    OK(ert_builder_unary(b, "Relu", x, &y));
    OK(ert_builder_output(b, y, "y"));
    save(b, root, "seed_relu");
}

static void seed_conv(const char *root) {
    ert_builder *b;
    int32_t x, w, bias, y, r, p, g, fc, fw, out;
    int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 2, 3, 3}, bd[1] = {3}, fd[2] = {4, 3};
    float wv[54], bv[3] = {0.1f, 0.2f, 0.3f}, fv[12];
    for (int i = 0; i < 54; i++) wv[i] = (float)(i % 5) - 2;
    for (int i = 0; i < 12; i++) fv[i] = (float)i * 0.5f;
    OK(ert_builder_create(ctx, &b));
    OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x));
    OK(ert_builder_weight(b, "w", ERT_DTYPE_F32, 4, wd, wv, &w));
    OK(ert_builder_weight(b, "b", ERT_DTYPE_F32, 1, bd, bv, &bias));
    OK(ert_builder_weight(b, "fc", ERT_DTYPE_F32, 2, fd, fv, &fw));
    OK(ert_builder_conv2d(b, x, w, bias, 1, 1, 1, 1, &y));
    OK(ert_builder_unary(b, "Relu", y, &r));
    OK(ert_builder_maxpool2d(b, r, 2, 2, 0, &p));
    OK(ert_builder_unary(b, "GlobalAveragePool", p, &g));
    OK(ert_builder_unary(b, "Flatten", g, &fc));
    OK(ert_builder_linear(b, fc, fw, -1, &out));
    OK(ert_builder_output(b, out, "logits"));
    save(b, root, "seed_conv");
}

static void seed_attrs(const char *root) {
    ert_builder *b;
    int32_t x, sc, e, q, y, s[2], z;
    int64_t xd[4] = {1, 1, 2, 2}, sd[1] = {4}, ed[2] = {0, 3}, qd[3] = {2, 2, 1};
    float sv[4] = {1, 1, 2, 2};
    uint16_t h[1] = {0};
    int64_t qv[4] = {1, -1, INT64_MAX, INT64_MIN};
    float fl[2] = {0.5f, -3.0f};
    int64_t split[2] = {1, 1};
    OK(ert_builder_create(ctx, &b));
    OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x));
    OK(ert_builder_weight(b, "scales", ERT_DTYPE_F32, 1, sd, sv, &sc));
    OK(ert_builder_weight(b, "empty", ERT_DTYPE_F16, 2, ed, h, &e));
    OK(ert_builder_weight(b, "q", ERT_DTYPE_I64, 3, qd, qv, &q));
    ert_attr at[3] = {ERT_ATTR_S("mode", "linear"), ERT_ATTR_FS("extra", fl, 2), ERT_ATTR_F("cubic_coeff_a", -0.75f)};
    int32_t in[3] = {x, -1, sc};
    OK(ert_builder_node(b, "Resize", "resize", in, 3, at, 3, &y, 1));
    ert_attr sat[2] = {ERT_ATTR_I("axis", 1), ERT_ATTR_IS("split", split, 2)};
    OK(ert_builder_node(b, "Split", "split", &y, 1, sat, 2, s, 2));
    OK(ert_builder_binary(b, "Mul", s[0], s[1], &z));
    OK(ert_builder_output(b, z, "z"));
    OK(ert_builder_output(b, s[1], NULL));
    (void)e; (void)q;
    save(b, root, "seed_attrs");
}

static void seed_dtypes(const char *root) {
    ert_builder *b;
    int32_t x, w8, wb, wi, y, c;
    int64_t d[1] = {3};
    uint8_t u8[3] = {1, 2, 255}, bl[3] = {0, 1, 1};
    int32_t i32[3] = {-1, 0, 7};
    OK(ert_builder_create(ctx, &b));
    OK(ert_builder_input(b, "x", ERT_DTYPE_U8, 1, d, &x));
    OK(ert_builder_weight(b, "u8", ERT_DTYPE_U8, 1, d, u8, &w8));
    OK(ert_builder_weight(b, "bool", ERT_DTYPE_BOOL, 1, d, bl, &wb));
    OK(ert_builder_weight(b, "i32", ERT_DTYPE_I32, 1, d, i32, &wi));
    OK(ert_builder_binary(b, "Add", x, w8, &y));
    int32_t win[3] = {wb, y, w8};
    OK(ert_builder_node(b, "Where", NULL, win, 3, NULL, 0, &c, 1));
    ert_attr cat[1] = {ERT_ATTR_I("to", ERT_DTYPE_F32)};
    int32_t z;
    OK(ert_builder_node(b, "Cast", NULL, &c, 1, cat, 1, &z, 1));
    OK(ert_builder_output(b, z, "z"));
    (void)wi;
    save(b, root, "seed_dtypes");
}

/* ---- a tiny protobuf writer for the ONNX seed ---- */
typedef struct pb { uint8_t b[512]; size_t n; } pb;
static void pb_varint(pb *p, uint64_t v) { do { uint8_t c = v & 0x7f; v >>= 7; p->b[p->n++] = c | (v ? 0x80 : 0); } while (v); }
static void pb_key(pb *p, int field, int wt) { pb_varint(p, (uint64_t)field << 3 | (uint64_t)wt); }
static void pb_int(pb *p, int field, uint64_t v) { pb_key(p, field, 0); pb_varint(p, v); }
static void pb_bytes(pb *p, int field, const void *d, size_t n) { pb_key(p, field, 2); pb_varint(p, n); memcpy(p->b + p->n, d, n); p->n += n; }
static void pb_str(pb *p, int field, const char *s) { pb_bytes(p, field, s, strlen(s)); }
static void pb_msg(pb *p, int field, const pb *m) { pb_bytes(p, field, m->b, m->n); }

/* ValueInfoProto{name, type{tensor_type{elem_type=FLOAT, shape{dim{dim_value=4}}}}} */
static void value_info(pb *out, int field, const char *name) {
    pb dim = {0}, shape = {0}, tt = {0}, type = {0}, vi = {0};
    pb_int(&dim, 1, 4);
    pb_msg(&shape, 1, &dim);
    pb_int(&tt, 1, 1);
    pb_msg(&tt, 2, &shape);
    pb_msg(&type, 1, &tt);
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, &type);
    pb_msg(out, field, &vi);
}

static void seed_onnx(const char *root) {
    pb node = {0}, graph = {0}, opset = {0}, model = {0}, attr = {0};
    pb_str(&node, 1, "x");
    pb_str(&node, 2, "y");
    pb_str(&node, 3, "lrelu");
    pb_str(&node, 4, "LeakyRelu");
    pb_str(&attr, 1, "alpha"); /* AttributeProto{name, f=0.1, type=FLOAT} */
    float a = 0.1f;
    pb_key(&attr, 2, 5);
    memcpy(attr.b + attr.n, &a, 4);
    attr.n += 4;
    pb_int(&attr, 20, 1);
    pb_msg(&node, 5, &attr);
    pb_msg(&graph, 1, &node);
    pb_str(&graph, 2, "g");
    value_info(&graph, 11, "x");
    value_info(&graph, 12, "y");
    pb_int(&opset, 2, 17);
    pb_int(&model, 1, 8);          /* ir_version */
    pb_str(&model, 2, "edgert-seed"); /* producer_name */
    pb_msg(&model, 7, &graph);
    pb_msg(&model, 8, &opset);
    char path[1024];
    snprintf(path, sizeof path, "%s/onnx/seed_leakyrelu.onnx", root);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(model.b, 1, model.n, f) != model.n) failures++;
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_ROOT (writes OUT_ROOT/ert/*.ert and OUT_ROOT/onnx/*.onnx)\n", argv[0]);
        return 2;
    }
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    seed_relu(argv[1]);
    seed_conv(argv[1]);
    seed_attrs(argv[1]);
    seed_dtypes(argv[1]);
    seed_onnx(argv[1]);
    ert_context_free(ctx);
    return failures ? 1 : 0;
}
