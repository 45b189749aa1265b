/* Built-in models (see models.h). */
#include "models.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nb {
    ert_builder *b;
    uint64_t rng;
    ert_status st;
    int n;
} nb;

static float rnd(nb *m) { /* uniform [0,1), xorshift64* */
    m->rng ^= m->rng >> 12;
    m->rng ^= m->rng << 25;
    m->rng ^= m->rng >> 27;
    return (float)((m->rng * 2685821657736338717ull) >> 40) / (float)(1 << 24);
}

/* A weight: He-uniform when fan_in > 0, else small; `fill` overrides. */
static int32_t w_(nb *m, int ndim, const int64_t *dims, int64_t fan_in, const float *fill) {
    int32_t id = -1;
    if (m->st != ERT_OK) return id;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    float *w = malloc((size_t)n * sizeof *w);
    if (!w) { m->st = ERT_E_NOMEM; return id; }
    float a = fan_in > 0 ? sqrtf(6.0f / (float)fan_in) : 0.05f;
    for (int64_t i = 0; i < n; i++) w[i] = fill ? fill[i] : (2 * rnd(m) - 1) * a;
    char name[32];
    snprintf(name, sizeof name, "w%d", m->n++);
    m->st = ert_builder_weight(m->b, name, ERT_DTYPE_F32, ndim, dims, w, &id);
    free(w);
    return id;
}

static int32_t conv(nb *m, int32_t x, int cin, int cout, int k, int stride, int pad, int relu) {
    int64_t wd[4] = {cout, cin, k, k}, bd[1] = {cout};
    int32_t w = w_(m, 4, wd, (int64_t)cin * k * k, NULL), b = w_(m, 1, bd, 0, NULL), y = -1;
    if (m->st == ERT_OK) m->st = ert_builder_conv2d(m->b, x, w, b, stride, pad, 1, 1, &y);
    if (relu && m->st == ERT_OK) m->st = ert_builder_unary(m->b, "Relu", y, &y);
    return y;
}

static int32_t block(nb *m, int32_t x, int cin, int cout, int stride) {
    int32_t y = conv(m, x, cin, cout, 3, stride, 1, 1);
    y = conv(m, y, cout, cout, 3, 1, 1, 0);
    int32_t skip = (stride != 1 || cin != cout) ? conv(m, x, cin, cout, 1, stride, 0, 0) : x;
    if (m->st == ERT_OK) m->st = ert_builder_binary(m->b, "Add", y, skip, &y);
    if (m->st == ERT_OK) m->st = ert_builder_unary(m->b, "Relu", y, &y);
    return y;
}

ert_status cam_builtin_model(ert_context *ctx, const char *name, ert_model **out) {
    int tiny = strcmp(name, "tiny") == 0;
    if (!tiny && strcmp(name, "resnet18") != 0) return ERT_E_NOT_FOUND;
    nb m = {.rng = 0x9E3779B97F4A7C15ull};
    m.st = ert_builder_create(ctx, &m.b);
    if (m.st != ERT_OK) return m.st;
    int64_t side = tiny ? 64 : 224, in_dims[4] = {1, 3, side, side};
    int32_t x = -1, y = -1;
    m.st = ert_builder_input(m.b, "image", ERT_DTYPE_F32, 4, in_dims, &x);
    int classes = tiny ? 3 : 1000, feat = tiny ? 3 : 512;
    if (tiny) {
        static const float eye[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
        int64_t wd[4] = {3, 3, 1, 1}, bd[1] = {3};
        static const float zero[3] = {0, 0, 0};
        int32_t w = w_(&m, 4, wd, 0, eye), b = w_(&m, 1, bd, 0, zero);
        if (m.st == ERT_OK) m.st = ert_builder_conv2d(m.b, x, w, b, 1, 0, 1, 1, &y);
        if (m.st == ERT_OK) m.st = ert_builder_unary(m.b, "Relu", y, &y);
    } else {
        y = conv(&m, x, 3, 64, 7, 2, 3, 1);
        if (m.st == ERT_OK) m.st = ert_builder_maxpool2d(m.b, y, 3, 2, 1, &y);
        int c = 64;
        for (int l = 0; l < 4; l++) {
            int co = 64 << l;
            y = block(&m, y, c, co, l ? 2 : 1);
            y = block(&m, y, co, co, 1);
            c = co;
        }
    }
    if (m.st == ERT_OK) m.st = ert_builder_unary(m.b, "GlobalAveragePool", y, &y);
    if (m.st == ERT_OK) m.st = ert_builder_unary(m.b, "Flatten", y, &y);
    int64_t fd[2] = {classes, feat}, fb[1] = {classes};
    float *fill = NULL;
    static const float eye10[9] = {10, 0, 0, 0, 10, 0, 0, 0, 10};
    static const float zero3[3] = {0, 0, 0};
    if (tiny) fill = (float *)eye10;
    int32_t fw = w_(&m, 2, fd, tiny ? 0 : feat, fill), fbias = w_(&m, 1, fb, 0, tiny ? zero3 : NULL);
    if (m.st == ERT_OK) m.st = ert_builder_linear(m.b, y, fw, fbias, &y);
    if (tiny && m.st == ERT_OK) m.st = ert_builder_unary(m.b, "Softmax", y, &y);
    if (m.st == ERT_OK) m.st = ert_builder_output(m.b, y, tiny ? "prob" : "logits");
    if (m.st == ERT_OK) m.st = ert_builder_finish(m.b, out);
    ert_builder_free(m.b);
    return m.st;
}
