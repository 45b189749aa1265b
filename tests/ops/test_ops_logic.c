/* Logical ops on the CPU (kernels/cpu/logic.c, core/ops/logic.c): Not on
 * random bool tensors of random rank (0 to 4) with the output poisoned,
 * against !x computed here; Not on f32 refused at prepare. */
#include "op_harness.h"

static ert_context *ctx;
static ert_test_rng rng;

int main(void) {
    ert_test_rng_init(&rng, "ops_logic");
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    for (int rep = 0; rep < 20; rep++) {
        int64_t d[4];
        int nd = rand_dims(&rng, 0, 4, 9, d);
        tt x = tt_new(ERT_DTYPE_BOOL, nd, d);
        uint8_t *xp = x.data;
        for (int64_t i = 0; i < tt_n(&x); i++) xp[i] = (uint8_t)ert_test_int(&rng, 0, 1);
        tt y;
        ert_status st = run_op(ctx, ERT_OP_NOT, NULL, 0, &x, 1, &y, 1, NULL); /* y poisoned (0xFF) first */
        CHECK(st == ERT_OK, "not rank %d: %s (%s)", nd, ert_status_str(st), ert_last_error(ctx));
        if (st == ERT_OK) {
            CHECK(y.dt == ERT_DTYPE_BOOL && same_shape(&y, nd, d), "not rank %d: output dtype/shape", nd);
            int64_t bad = -1;
            for (int64_t i = 0; i < tt_n(&x) && bad < 0; i++)
                if (((uint8_t *)y.data)[i] != !xp[i]) bad = i;
            CHECK(bad < 0, "not rank %d: element %lld wrong", nd, (long long)bad);
            tt_free(&y);
        }
        tt_free(&x);
    }
    int64_t d = 3;
    tt f = tt_new(ERT_DTYPE_F32, 1, &d), y;
    ert_status st = run_op(ctx, ERT_OP_NOT, NULL, 0, &f, 1, &y, 1, NULL);
    if (st == ERT_OK) tt_free(&y);
    CHECK(st == ERT_E_UNSUPPORTED && strstr(ert_last_error(ctx), "bool"), "Not on f32: %s (%s)", ert_status_str(st),
          ert_last_error(ctx));
    tt_free(&f);
    ert_context_free(ctx);
    return ert_test_finish("ops_logic");
}
