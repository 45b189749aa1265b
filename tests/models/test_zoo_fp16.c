/* ert_model_save_opts(weights_dtype = F16), the library side of
 * `edgert convert --fp16`: which weights become f16 (and which stay f32 on
 * purpose), that the saved file loads and runs close to the f32 model, that
 * the model saved from is unchanged, and the statuses. The end-to-end check
 * on real networks against onnxruntime is the `zoo` test (run_zoo.py). */
#include "runtime_internal.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ert_context *ctx;

enum { CIN = 4, COUT = 16, HW = 6 };

/* y = Relu(Conv3x3(x, w, bias) * scale) + big * 0:
 * - w (16x4x3x3 = 576 elements): becomes f16;
 * - bias (16 elements, exactly the threshold): becomes f16;
 * - scale (1 element, 1/3): stays f32 (an op parameter, kept exact);
 * - big (16 elements, one of 1e6): stays f32 (would overflow f16). */
static ert_model *build(ert_test_rng *r, float *w, float *bias) {
    ert_builder *b;
    CHECK_OK(ert_builder_create(ctx, &b), ctx);
    int64_t xd[4] = {-1, CIN, HW, HW}, wd[4] = {COUT, CIN, 3, 3}, bd[1] = {COUT}, sd[1] = {1},
            gd[4] = {1, COUT, 1, 1};
    ert_test_fill(r, w, COUT * CIN * 9, -0.5f, 0.5f);
    ert_test_fill(r, bias, COUT, -0.1f, 0.1f);
    float scale = 1.0f / 3, big[COUT], zero = 0;
    for (int i = 0; i < COUT; i++) big[i] = i == 5 ? 1e6f : (float)i;
    int32_t x, wi, bi, si, gi, zi, c, m1, y, g0, out;
    CHECK_OK(ert_builder_input(b, "x", ERT_DTYPE_F32, 4, xd, &x), ctx);
    CHECK_OK(ert_builder_weight(b, "w", ERT_DTYPE_F32, 4, wd, w, &wi), ctx);
    CHECK_OK(ert_builder_weight(b, "bias", ERT_DTYPE_F32, 1, bd, bias, &bi), ctx);
    CHECK_OK(ert_builder_weight(b, "scale", ERT_DTYPE_F32, 1, sd, &scale, &si), ctx);
    CHECK_OK(ert_builder_weight(b, "big", ERT_DTYPE_F32, 4, gd, big, &gi), ctx);
    CHECK_OK(ert_builder_weight(b, "zero", ERT_DTYPE_F32, 1, sd, &zero, &zi), ctx);
    CHECK_OK(ert_builder_conv2d(b, x, wi, bi, 1, 1, 1, 1, &c), ctx);
    CHECK_OK(ert_builder_binary(b, "Mul", c, si, &m1), ctx);
    CHECK_OK(ert_builder_unary(b, "Relu", m1, &y), ctx);
    CHECK_OK(ert_builder_binary(b, "Mul", gi, zi, &g0), ctx);
    CHECK_OK(ert_builder_binary(b, "Add", y, g0, &out), ctx);
    CHECK_OK(ert_builder_output(b, out, "y"), ctx);
    ert_model *m = NULL;
    CHECK_OK(ert_builder_finish(b, &m), ctx);
    ert_builder_free(b);
    return m;
}

static ert_dtype weight_dtype(const ert_model *m, const char *name) {
    int32_t id = ert_model_find_tensor(m, name);
    return id >= 0 ? m->tensors[id].dtype : ERT_DTYPE_UNDEFINED;
}

/* Run batch 2 on x; returns a malloc'd copy of the output (n elements). */
static float *run(const ert_model *m, const float *x, int64_t *n) {
    ert_session_options so = {.batch = 2};
    ert_session *s = NULL;
    CHECK_OK(ert_session_create(m, &so, &s), ctx);
    if (!s) return NULL;
    ert_tensor_info ti;
    CHECK_OK(ert_session_output_info(s, 0, &ti), ctx);
    *n = 2 * COUT * HW * HW;
    float *y = malloc((size_t)*n * sizeof *y);
    CHECK_OK(ert_session_set_input(s, 0, x, 2 * CIN * HW * HW * sizeof *x), ctx);
    CHECK_OK(ert_session_run(s), ctx);
    CHECK_OK(ert_session_get_output(s, 0, y, (size_t)*n * sizeof *y), ctx);
    ert_session_free(s);
    return y;
}

static long file_size(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

int main(void) {
    CHECK_OK(ert_context_create(NULL, &ctx), NULL);
    ert_test_rng r;
    ert_test_rng_init(&r, "zoo_fp16");
    static float w[COUT * CIN * 9], bias[COUT], x[2 * CIN * HW * HW];
    ert_model *m = build(&r, w, bias);
    if (!m) return ert_test_finish("zoo_fp16");
    ert_test_fill(&r, x, 2 * CIN * HW * HW, -1, 1);

    char p32[64], p16[64];
    snprintf(p32, sizeof p32, "/tmp/ert_zoo_fp16_%ld_a.ert", (long)getpid());
    snprintf(p16, sizeof p16, "/tmp/ert_zoo_fp16_%ld_b.ert", (long)getpid());
    ert_save_options so16 = {.weights_dtype = ERT_DTYPE_F16};
    CHECK_OK(ert_model_save_opts(m, p32, NULL), ctx);
    CHECK_OK(ert_model_save_opts(m, p16, &so16), ctx);
    /* the model saved from keeps its f32 weights, bit for bit */
    CHECK(weight_dtype(m, "w") == ERT_DTYPE_F32, "source model changed");
    int32_t wid = ert_model_find_tensor(m, "w");
    CHECK(wid >= 0 && memcmp(m->tensors[wid].data, w, sizeof w) == 0, "source weights changed");

    long s32 = file_size(p32), s16 = file_size(p16);
    /* w shrinks by 576 * 2 bytes, bias by 32 (before 64-byte alignment) */
    CHECK(s16 > 0 && s32 - s16 >= 1100, "f16 file %ld bytes, f32 %ld", s16, s32);

    ert_model *m16 = NULL, *m32 = NULL;
    CHECK_OK(ert_model_load_file(ctx, p16, &m16), ctx);
    CHECK_OK(ert_model_load_file(ctx, p32, &m32), ctx);
    if (m16 && m32) {
        CHECK(weight_dtype(m16, "w") == ERT_DTYPE_F16, "w is %s", ert_dtype_name(weight_dtype(m16, "w")));
        CHECK(weight_dtype(m16, "bias") == ERT_DTYPE_F16, "bias is %s", ert_dtype_name(weight_dtype(m16, "bias")));
        CHECK(weight_dtype(m16, "scale") == ERT_DTYPE_F32, "scale (1 element) is %s",
              ert_dtype_name(weight_dtype(m16, "scale")));
        CHECK(weight_dtype(m16, "big") == ERT_DTYPE_F32, "big (1e6 > f16 max) is %s",
              ert_dtype_name(weight_dtype(m16, "big")));
        CHECK(weight_dtype(m32, "w") == ERT_DTYPE_F32, "NULL options must keep f32");
        /* stored values are the round-to-nearest f16 of the f32 ones */
        int32_t id = ert_model_find_tensor(m16, "w");
        int bad = 0;
        for (int i = 0; id >= 0 && i < COUT * CIN * 9; i++)
            bad += ((const uint16_t *)m16->tensors[id].data)[i] != ert_f32_to_f16(w[i]);
        CHECK(bad == 0, "%d f16 weights not rounded to nearest", bad);

        int64_t n = 0, n16 = 0;
        float *y32 = run(m32, x, &n), *y16 = run(m16, x, &n16), *yref = run(m, x, &n);
        if (y32 && y16 && yref && n == n16) {
            double e2 = 0, r2 = 0, d32 = 0;
            for (int64_t i = 0; i < n; i++) {
                e2 += ((double)y16[i] - yref[i]) * ((double)y16[i] - yref[i]);
                r2 += (double)yref[i] * yref[i];
                d32 = fmax(d32, fabs((double)y32[i] - yref[i]));
            }
            double rel = sqrt(e2 / r2);
            printf("f16 weights: rel L2 %.2e against f32; f32 .ert max |diff| %g\n", rel, d32);
            /* weights rounded with unit roundoff 2^-11 ~ 4.9e-4 */
            CHECK(rel > 0 && rel < 2e-3, "f16 .ert rel L2 %.3g", rel);
            CHECK(d32 == 0, "f32 .ert differs by %g", d32);
        }
        free(y32);
        free(y16);
        free(yref);
    }

    /* statuses: unsupported target dtype, NULL arguments; nothing written */
    ert_save_options bad = {.weights_dtype = ERT_DTYPE_I8};
    unlink(p16);
    CHECK(ert_model_save_opts(m, p16, &bad) == ERT_E_UNSUPPORTED, "i8 weights accepted");
    CHECK(strstr(ert_last_error(ctx), "weights_dtype") != NULL, "message: %s", ert_last_error(ctx));
    CHECK(file_size(p16) < 0, "file written on failure");
    CHECK(ert_model_save_opts(NULL, p16, &so16) == ERT_E_ARG, "NULL model");
    CHECK(ert_model_save_opts(m, NULL, &so16) == ERT_E_ARG, "NULL path");

    unlink(p32);
    unlink(p16);
    ert_model_free(m16);
    ert_model_free(m32);
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_finish("zoo_fp16");
}
