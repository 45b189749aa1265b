/* Links with -static against libedgert.a, using only the public header, the
 * way robotics firmware embeds the library: a context, a one-node model made
 * with the builder (Relu), a session, one run, the output checked.
 * Prints "static_link: ok" and exits 0 on success. */
#include "edgert.h"

#include <stdio.h>

static int fail(ert_context *ctx, const char *what, ert_status st) {
    fprintf(stderr, "static_link: %s: %s (%s)\n", what, ert_status_str(st), ctx ? ert_last_error(ctx) : "");
    return 1;
}

int main(void) {
    ert_context *ctx = NULL;
    ert_status st = ert_context_create(NULL, &ctx);
    if (st != ERT_OK) return fail(NULL, "ert_context_create", st);

    /* y = Relu(x), x is (1, 8) f32 */
    static const int64_t dims[2] = {1, 8};
    static const float x[8] = {-3.f, -1.f, -0.f, 0.f, 0.5f, 1.f, 2.f, 1e30f};
    static const float want[8] = {0.f, 0.f, 0.f, 0.f, 0.5f, 1.f, 2.f, 1e30f};
    ert_builder *b = NULL;
    ert_model *model = NULL;
    ert_session *s = NULL;
    int32_t in_id, out_id, rc = 1;
    float y[8];

    if ((st = ert_builder_create(ctx, &b)) != ERT_OK) { fail(ctx, "ert_builder_create", st); goto done; }
    if ((st = ert_builder_input(b, "x", ERT_DTYPE_F32, 2, dims, &in_id)) != ERT_OK) { fail(ctx, "ert_builder_input", st); goto done; }
    if ((st = ert_builder_unary(b, "Relu", in_id, &out_id)) != ERT_OK) { fail(ctx, "ert_builder_unary", st); goto done; }
    if ((st = ert_builder_output(b, out_id, "y")) != ERT_OK) { fail(ctx, "ert_builder_output", st); goto done; }
    if ((st = ert_builder_finish(b, &model)) != ERT_OK) { fail(ctx, "ert_builder_finish", st); goto done; }

    ert_session_options so = {0};
    if ((st = ert_session_create(model, &so, &s)) != ERT_OK) { fail(ctx, "ert_session_create", st); goto done; }
    if ((st = ert_session_set_input(s, 0, x, sizeof x)) != ERT_OK) { fail(ctx, "ert_session_set_input", st); goto done; }
    if ((st = ert_session_run(s)) != ERT_OK) { fail(ctx, "ert_session_run", st); goto done; }
    if ((st = ert_session_get_output(s, 0, y, sizeof y)) != ERT_OK) { fail(ctx, "ert_session_get_output", st); goto done; }
    for (int i = 0; i < 8; i++) {
        if (y[i] != want[i]) {
            fprintf(stderr, "static_link: y[%d] = %g, want %g\n", i, (double)y[i], (double)want[i]);
            goto done;
        }
    }
    printf("static_link: ok (edgert %s)\n", ert_version());
    rc = 0;
done:
    ert_session_free(s);
    ert_model_free(model);
    ert_builder_free(b);
    ert_context_free(ctx);
    return rc;
}
