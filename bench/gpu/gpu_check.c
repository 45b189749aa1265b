/* gpu_check: run a model once on a CUDA session and write output 0, for the
 * GPU benchmark's correctness check (bench/gpu/run_gpu_bench.sh).
 *
 *   gpu_check MODEL INPUT.f32 OUTPUT.f32 BATCH f32|f16|bf16
 *
 * INPUT.f32 holds input 0 as raw little-endian f32 (exactly its size at
 * BATCH); OUTPUT.f32 receives output 0 as raw f32. Prints the arena bytes
 * and the counts of fused / unfused / direct convolutions. With a 6th argument
 * "profile" it runs once more between cudaProfilerStart and cudaProfilerStop
 * (for `ncu --profile-from-start off`: the kernels of one replayed run).
 * Exit status 0 on success. */
#include "edgert.h"
#ifdef ERT_BENCH_HAVE_CUDA
#include <cuda_profiler_api.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Counts the CUDA backend's per-conv DEBUG lines (fused / unfused / direct). */
static int n_fused, n_unfused, n_direct;
static void on_log(void *user, ert_log_level lvl, const char *msg) {
    (void)user;
    if (lvl != ERT_LOG_DEBUG) return;
    if (strstr(msg, "unfused")) n_unfused++;
    else if (strstr(msg, "fused")) n_fused++;
    else if (strstr(msg, "direct kernel")) n_direct++;
    if (getenv("GPU_CHECK_VERBOSE")) fprintf(stderr, "%s\n", msg);
}

static int fail(ert_context *ctx, const char *what, ert_status st) {
    fprintf(stderr, "gpu_check: %s: %s (%s)\n", what, ert_status_str(st), ctx ? ert_last_error(ctx) : "");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: gpu_check MODEL INPUT.f32 OUTPUT.f32 BATCH f32|f16|bf16\n");
        return 2;
    }
    ert_dtype prec = strcmp(argv[5], "f16") == 0    ? ERT_DTYPE_F16
                     : strcmp(argv[5], "bf16") == 0 ? ERT_DTYPE_BF16
                                                    : ERT_DTYPE_F32;
    ert_context *ctx = NULL;
    ert_model *m = NULL;
    ert_session *s = NULL;
    ert_status st;
    int rc = 1;
    void *buf = NULL;
    ert_context_options co = {.log = on_log, .log_level = ERT_LOG_DEBUG};
    if ((st = ert_context_create(&co, &ctx)) != ERT_OK) return fail(NULL, "context", st);
    if ((st = ert_model_load_file(ctx, argv[1], &m)) != ERT_OK) {
        fail(ctx, "load", st);
        goto out;
    }
    ert_session_options o = {.device = ERT_DEVICE_CUDA, .batch = atoi(argv[4]), .precision = prec};
    if ((st = ert_session_create(m, &o, &s)) != ERT_OK) {
        fail(ctx, "session", st);
        goto out;
    }
    ert_tensor_info ii, oi;
    ert_session_input_info(s, 0, &ii);
    ert_session_output_info(s, 0, &oi);
    size_t in_n = 1, out_n = 1;
    for (int d = 0; d < ii.ndim; d++) in_n *= (size_t)ii.dims[d];
    for (int d = 0; d < oi.ndim; d++) out_n *= (size_t)oi.dims[d];
    buf = malloc((in_n > out_n ? in_n : out_n) * sizeof(float));
    FILE *f = fopen(argv[2], "rb");
    if (!buf || !f || fread(buf, sizeof(float), in_n, f) != in_n) {
        fprintf(stderr, "gpu_check: cannot read %zu floats from %s\n", in_n, argv[2]);
        if (f) fclose(f);
        goto out;
    }
    fclose(f);
    if ((st = ert_session_set_input(s, 0, buf, in_n * sizeof(float))) != ERT_OK ||
        (st = ert_session_run(s)) != ERT_OK || (st = ert_session_run(s)) != ERT_OK ||
        (st = ert_session_get_output(s, 0, buf, out_n * sizeof(float))) != ERT_OK) {
        fail(ctx, "run", st);
        goto out;
    }
    if (argc == 7) {
#ifdef ERT_BENCH_HAVE_CUDA
        cudaProfilerStart();
        st = ert_session_run(s);
        cudaProfilerStop();
        if (st != ERT_OK) {
            fail(ctx, "profiled run", st);
            goto out;
        }
#endif
    }
    f = fopen(argv[3], "wb");
    if (!f || fwrite(buf, sizeof(float), out_n, f) != out_n) {
        fprintf(stderr, "gpu_check: cannot write %s\n", argv[3]);
        if (f) fclose(f);
        goto out;
    }
    fclose(f);
    ert_memory_report mem;
    ert_session_memory(s, &mem);
    printf("arena_bytes %zu weights %zu activations %zu io %zu convs fused %d unfused %d direct %d\n",
           mem.total_bytes, mem.weights_bytes, mem.activations_bytes, mem.io_bytes, n_fused, n_unfused, n_direct);
    rc = 0;
out:
    free(buf);
    ert_session_free(s);
    ert_model_free(m);
    ert_context_free(ctx);
    return rc;
}
