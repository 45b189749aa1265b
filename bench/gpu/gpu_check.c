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
 * Environment, for bisecting a wrong answer:
 *   GPU_CHECK_FLAGS      comma list of nhwc, no-nhwc, conv-graph, no-conv-graph,
 *                        gemm1x1, no-fuse, fast (ERT_CREATE_FAST)
 *   GPU_CHECK_PLACEMENT  auto, device, unified or mapped (default auto)
 *   GPU_CHECK_SHAPE      input 0's shape, e.g. 2x3x224x320 (dynamic dims)
 *   GPU_CHECK_VERBOSE    the backend's DEBUG lines on stderr
 *   GPU_CHECK_DEVICE     cpu: a CPU session instead (the reference for a bisect)
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
    const char *dev = getenv("GPU_CHECK_DEVICE");
    if (dev && !strcmp(dev, "cpu")) {
        o.device = ERT_DEVICE_CPU;
        o.precision = ERT_DTYPE_F32;
        o.n_threads = 8;
    }
    const char *fl = getenv("GPU_CHECK_FLAGS"), *pl = getenv("GPU_CHECK_PLACEMENT"), *shp = getenv("GPU_CHECK_SHAPE");
    static const struct { const char *name; unsigned flag; } flag_names[] = {
        {"no-nhwc", ERT_SESSION_NO_NHWC},       {"nhwc", ERT_SESSION_NHWC},
        {"no-conv-graph", ERT_SESSION_NO_CONV_GRAPH}, {"conv-graph", ERT_SESSION_CONV_GRAPH},
        {"gemm1x1", ERT_SESSION_GEMM_1X1},      {"no-fuse", ERT_SESSION_NO_FUSE},
    };
    for (const char *t = fl; t && *t; t += strcspn(t, ",") + (t[strcspn(t, ",")] == ',')) {
        size_t len = strcspn(t, ",");
        if (len == 4 && !strncmp(t, "fast", 4)) o.create_mode = ERT_CREATE_FAST;
        for (size_t i = 0; i < sizeof flag_names / sizeof flag_names[0]; i++)
            if (strlen(flag_names[i].name) == len && !strncmp(t, flag_names[i].name, len)) o.flags |= flag_names[i].flag;
    }
    if (pl) o.placement = !strcmp(pl, "device")    ? ERT_PLACEMENT_DEVICE
                          : !strcmp(pl, "unified") ? ERT_PLACEMENT_UNIFIED
                          : !strcmp(pl, "mapped")  ? ERT_PLACEMENT_MAPPED
                                                   : ERT_PLACEMENT_AUTO;
    ert_input_shape ishape = {0};
    ert_tensor_info mi;
    if (shp && ert_model_input_info(m, 0, &mi) == ERT_OK) {
        ishape.name = mi.name;
        for (const char *t = shp; *t && ishape.ndim < ERT_MAX_DIMS; ishape.ndim++) {
            ishape.dims[ishape.ndim] = strtoll(t, NULL, 10);
            t += strcspn(t, "x");
            if (*t == 'x') t++;
        }
        o.input_shapes = &ishape;
        o.n_input_shapes = 1;
    }
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
    /* the zero-copy view must say what the copy says (a bisect once hinged on it) */
    const float *view = NULL;
    if (ert_session_output_data(s, 0, (const void **)&view) == ERT_OK && view) {
        size_t n_diff = 0;
        for (size_t k = 0; k < out_n; k++) n_diff += memcmp(&view[k], &((float *)buf)[k], sizeof(float)) != 0;
        if (n_diff) printf("output_data differs from get_output at %zu of %zu elements\n", n_diff, out_n);
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
