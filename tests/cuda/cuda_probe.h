/* For GPU tests that need only the public API: can this build and machine
 * make a CUDA session of model m? If not, m and ctx are freed and the test's
 * exit status (77, ctest SKIPPED, with the reason) is returned; 0 means go on. */
#ifndef ERT_TEST_CUDA_PROBE_H
#define ERT_TEST_CUDA_PROBE_H
#include "edgert.h"
#include "testutil.h"

#include <stdio.h>

static inline int ert_test_cuda_probe(const char *name, ert_context *ctx, ert_model *m) {
    ert_session *probe = NULL;
    ert_session_options po = {.device = ERT_DEVICE_CUDA};
    if (m && ert_session_create(m, &po, &probe) == ERT_OK) {
        ert_session_free(probe);
        return 0;
    }
    char why[300];
    snprintf(why, sizeof why, "no CUDA session: %s", ert_last_error(ctx));
    ert_model_free(m);
    ert_context_free(ctx);
    return ert_test_skip(name, why);
}
#endif
