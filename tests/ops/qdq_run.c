/* qdq_run: the session side of tests/ops/quant_ort.py's fold and gpu suites.
 *
 *   qdq_run MODEL OUTDIR [--no-fuse] [--no-nhwc] [--no-pack] [--device cpu|cuda] NAME=RAW...
 *
 * Loads MODEL, creates a session (--no-fuse: ERT_SESSION_NO_FUSE, which
 * leaves every Q/DQ pattern unfolded: the float reference; --no-nhwc:
 * ERT_SESSION_NO_NHWC, CUDA int8 convs NCHW; --no-pack: ERT_SESSION_NO_PACK,
 * every CUDA int8 conv on the CUDA cores), copies each raw
 * little-endian input file into the input NAME (sizes must match), runs,
 * writes output i to OUTDIR/out<i>.bin and prints one JSON line: outputs
 * (name, dtype, shape, file), the scheduled ops by name (what the Q/DQ pass
 * made of the graph), the nodes on the CUDA backend's CPU fallback, and its
 * int8 convs on the tensor cores and those its create-time self-check kept
 * on the CUDA cores (from its log lines), and its channels-last int8 convs;
 * the arena's weights bytes, and the constant weights the arena holds no
 * copy of (their readers run from the backend's packing alone: count, bytes).
 * Exit 77 when --device cuda has no GPU or no CUDA backend (ctest SKIPPED).
 * Internal headers: the scheduled ops are not public. */
#include "session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The CUDA backend's word on each int8 conv: packed for the tensor cores,
 * or kept on the CUDA-core kernel after its create-time self-check. */
static int g_n_mma, g_n_mma_rejected, g_n_mma_only;
static void count_log(void *user, ert_log_level level, const char *msg) {
    (void)user, (void)level;
    if (strstr(msg, "): int8 tensor cores")) g_n_mma++;
    if (strstr(msg, "): int8 tensor cores, filter packed only")) g_n_mma_only++;
    if (strstr(msg, "int8 tensor-core kernel disagrees")) g_n_mma_rejected++;
}

static int fail(ert_context *ctx, const char *what) {
    fprintf(stderr, "qdq_run: %s: %s\n", what, ctx ? ert_last_error(ctx) : "");
    return 1;
}

/* Fill input idx from a raw file of exactly its size. */
static bool fill_input(ert_session *s, int idx, const char *path) {
    ert_tensor_info ti;
    void *dst;
    if (ert_session_input_info(s, idx, &ti) || ert_session_input_data(s, idx, &dst)) return false;
    size_t bytes = ert_dtype_size(ti.dtype);
    for (int d = 0; d < ti.ndim; d++) bytes *= (size_t)ti.dims[d];
    FILE *f = fopen(path, "rb");
    bool ok = f && fread(dst, 1, bytes, f) == bytes && fgetc(f) == EOF;
    if (f) fclose(f);
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: qdq_run MODEL OUTDIR [--no-fuse] [--no-nhwc] [--no-pack] [--device cpu|cuda] NAME=RAW...\n");
        return 2;
    }
    ert_session_options so = {.device = ERT_DEVICE_CPU};
    int a = 3;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--no-fuse")) so.flags |= ERT_SESSION_NO_FUSE;
        else if (!strcmp(argv[a], "--no-nhwc")) so.flags |= ERT_SESSION_NO_NHWC;
        else if (!strcmp(argv[a], "--no-pack")) so.flags |= ERT_SESSION_NO_PACK;
        else if (!strcmp(argv[a], "--device") && a + 1 < argc)
            so.device = !strcmp(argv[++a], "cuda") ? ERT_DEVICE_CUDA : ERT_DEVICE_CPU;
        else return fprintf(stderr, "qdq_run: unknown option %s\n", argv[a]), 2;
    }
    ert_context *ctx;
    ert_model *m;
    ert_session *s;
    ert_context_options co = {.log = count_log, .log_level = ERT_LOG_DEBUG};
    if (ert_context_create(&co, &ctx)) return fail(NULL, "context");
    if (ert_model_load_file(ctx, argv[1], &m)) return fail(ctx, "load");
    ert_status st = ert_session_create(m, &so, &s);
    if (st && so.device == ERT_DEVICE_CUDA && (st == ERT_E_CUDA || st == ERT_E_UNSUPPORTED)) {
        printf("SKIP: no CUDA device or backend: %s\n", ert_last_error(ctx));
        ert_model_free(m);
        ert_context_free(ctx);
        return 77;
    }
    if (st) return fail(ctx, "session");
    for (; a < argc; a++) {
        char *eq = strchr(argv[a], '=');
        if (!eq) return fprintf(stderr, "qdq_run: expected NAME=RAW, got %s\n", argv[a]), 2;
        *eq = 0;
        int idx;
        if (ert_session_find_input(s, argv[a], &idx)) return fail(ctx, argv[a]);
        if (!fill_input(s, idx, eq + 1)) return fail(ctx, eq + 1);
    }
    if (ert_session_run(s)) return fail(ctx, "run");
    printf("{\"outputs\": [");
    for (int i = 0; i < ert_session_n_outputs(s); i++) {
        ert_tensor_info ti;
        const void *data;
        char path[4096];
        if (ert_session_output_info(s, i, &ti) || ert_session_output_data(s, i, &data)) return fail(ctx, "output");
        snprintf(path, sizeof path, "%s/out%d.bin", argv[2], i);
        size_t bytes = ert_dtype_size(ti.dtype);
        printf("%s{\"name\": \"%s\", \"dtype\": \"%s\", \"file\": \"%s\", \"shape\": [", i ? ", " : "", ti.name,
               ert_dtype_name(ti.dtype), path);
        for (int d = 0; d < ti.ndim; d++) printf("%s%lld", d ? ", " : "", (long long)ti.dims[d]), bytes *= (size_t)ti.dims[d];
        printf("]}");
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(data, 1, bytes, f) != bytes) return fail(NULL, path);
        fclose(f);
    }
    printf("], \"ops\": {");
    int count[ERT_OP_COUNT] = {0}, k = 0, n_nhwc = 0;
    for (int i = 0; i < s->n_sched; i++) {
        const ert_gnode *n = &s->g.n[s->sched[i]];
        count[n->op]++;
        n_nhwc += (n->op == ERT_OP_QLINEAR_CONV || n->op == ERT_OP_CONV_INTEGER) && n->params.quant.conv.nhwc;
    }
    for (int op = 1; op < ERT_OP_COUNT; op++)
        if (count[op]) printf("%s\"%s\": %d", k++ ? ", " : "", ert_op_get((ert_op)op)->name, count[op]);
    int n_only = 0;
    size_t only_bytes = 0;
    for (int i = 0; i < s->g.nt; i++) {
        const ert_gtensor *t = &s->g.t[i];
        if (t->n_uses > 0 && t->n_packed_uses == t->n_uses) n_only++, only_bytes += t->nbytes;
    }
    ert_memory_report mem;
    if (ert_session_memory(s, &mem)) return fail(ctx, "memory");
    printf("}, \"n_cpu_fallback\": %d, \"n_int8_mma\": %d, \"n_int8_mma_rejected\": %d, \"n_int8_nhwc\": %d, "
           "\"n_int8_mma_packed_only\": %d, \"weights_bytes\": %zu, \"n_packed_only\": %d, \"packed_only_bytes\": %zu}\n",
           ert_session_n_cpu_fallback(s), g_n_mma, g_n_mma_rejected, n_nhwc, g_n_mma_only, mem.weights_bytes, n_only,
           only_bytes);
    ert_session_free(s);
    ert_model_free(m);
    ert_context_free(ctx);
    return 0;
}
