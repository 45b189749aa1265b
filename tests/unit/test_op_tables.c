/* Every per-op table has a row for every op: the op table (name, counts,
 * prepare) is indexed by ert_op and finds each op back by its name, and the
 * CPU backend runs every op (DESIGN §6: the CPU is the reference for all).
 * The _Static_assert(ERT_OP_COUNT == N) guards catch a new op at compile
 * time; this catches a hole a designated initializer would leave. */
#include "runtime_internal.h"
#include "testutil.h"

#include <string.h>

int main(void) {
    int n_named = 0;
    for (int op = ERT_OP_INVALID + 1; op < ERT_OP_COUNT; op++) {
        const ert_op_def *d = ert_op_get((ert_op)op);
        CHECK(d != NULL, "op %d has no row in the op table", op);
        if (!d) continue;
        CHECK(d->op == (ert_op)op, "op %d: row says %d", op, (int)d->op);
        CHECK(d->name && d->name[0] && d->prepare, "op %d: name and prepare", op);
        CHECK(ert_op_find(d->name) == d, "op %d (%s): found back by name", op, d->name);
        CHECK(ert_cpu_backend.supports((ert_op)op, ERT_DTYPE_F32), "op %d (%s): no CPU kernel", op, d->name);
        for (int o2 = ERT_OP_INVALID + 1; o2 < op; o2++) {
            const ert_op_def *e = ert_op_get((ert_op)o2);
            CHECK(!e || strcmp(e->name, d->name) != 0, "ops %d and %d share the name %s", o2, op, d->name);
        }
        n_named++;
    }
    CHECK(ert_op_get(ERT_OP_INVALID) == NULL && ert_op_get(ERT_OP_COUNT) == NULL, "out-of-range ops have no row");
    CHECK(ert_op_find("NoSuchOp") == NULL && ert_op_find(NULL) == NULL, "unknown names");
    CHECK(n_named == ERT_OP_COUNT - 1, "%d of %d ops named", n_named, ERT_OP_COUNT - 1);
    return ert_test_finish("op_tables");
}
