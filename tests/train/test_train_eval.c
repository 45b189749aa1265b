/* `edgert train` on held-out sets smaller than one batch (issue 13 item 4:
 * the usual on-device fine-tune has 12-40 images; evaluation used to drop
 * the partial batch and report accuracy 0).
 *
 * An ImageFolder of 8x8 PGM bars made here (DIR/train/<class>, DIR/test/<class>,
 * 3 classes, fresh noise each run): 60 training images, 20% held out for
 * validation (12 < batch 16), 15 test images (< 16). Checks:
 *  - test_acc and test_loss equal an independent count: the exported model
 *    run image by image in a batch-1 inference session, argmax against the
 *    label, cross-entropy from its logits in double;
 *  - val_acc is a count out of 12, and above chance;
 *  - --val-split 0: validation "n/a" (JSON null), not 0;
 *  - one-class data is refused (exit 1, the message says why);
 *  - the human output says which device trains. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "testutil.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef ERT_CLI_BIN
#define ERT_CLI_BIN "edgert"
#endif

enum { S = 8, C = 3, N_TRAIN_PER = 20, N_TEST_PER = 5, BATCH = 16 };

static char tmpdir[] = "/tmp/ert_train_eval_XXXXXX";
static uint8_t test_px[C * N_TEST_PER][S * S];
static int test_lab[C * N_TEST_PER];

/* class 0: a horizontal bar, 1: a vertical bar, 2: a diagonal, on noise */
static void draw(ert_test_rng *r, int cls, uint8_t *px) {
    int pos = ert_test_int(r, 1, S - 2);
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) {
            int on = cls == 0 ? y == pos : cls == 1 ? x == pos : x == y;
            px[y * S + x] = (uint8_t)(on ? ert_test_int(r, 190, 250) : ert_test_int(r, 0, 60));
        }
}

static void write_pgm(const char *path, const uint8_t *px) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fprintf(f, "P5\n%d %d\n255\n", S, S);
    fwrite(px, 1, S * S, f);
    fclose(f);
}

static void make_folder(ert_test_rng *r, const char *root, int n_classes, int with_test) {
    char path[512];
    mkdir(root, 0755);
    const char *parts[2] = {"train", "test"};
    for (int p = 0; p < (with_test ? 2 : 1); p++) {
        snprintf(path, sizeof path, "%s/%s", root, parts[p]);
        mkdir(path, 0755);
        for (int c = 0; c < n_classes; c++) {
            snprintf(path, sizeof path, "%s/%s/class%d", root, parts[p], c);
            mkdir(path, 0755);
            int n = p ? N_TEST_PER : N_TRAIN_PER;
            for (int i = 0; i < n; i++) {
                uint8_t px[S * S];
                draw(r, c, px);
                snprintf(path, sizeof path, "%s/%s/class%d/%03d.pgm", root, parts[p], c, i);
                write_pgm(path, px);
                if (p == 1) {
                    memcpy(test_px[c * N_TEST_PER + i], px, sizeof px);
                    test_lab[c * N_TEST_PER + i] = c;
                }
            }
        }
    }
}

/* Runs `edgert train ...`; stdout and stderr into malloc'd strings. */
static int run_train(const char *const *args, char **out, char **err) {
    char op[600], ep[600];
    snprintf(op, sizeof op, "%s/stdout", tmpdir);
    snprintf(ep, sizeof ep, "%s/stderr", tmpdir);
    const char *argv[40];
    int n = 0;
    argv[n++] = ERT_CLI_BIN;
    argv[n++] = "train";
    for (int i = 0; args[i] && n < 39; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(op, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        execv(ERT_CLI_BIN, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    const char *paths[2] = {op, ep};
    char **dst[2] = {out, err};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(paths[k], "rb");
        size_t cap = 1 << 20, len = f ? fread(*dst[k] = calloc(cap, 1), 1, cap - 1, f) : 0;
        if (!f) *dst[k] = calloc(1, 1);
        (void)len;
        if (f) fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The value after "key": in the last line that has it; NAN for null/missing. */
static double json_last(const char *s, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = NULL;
    for (const char *q = strstr(s, pat); q; q = strstr(q + 1, pat)) p = q;
    if (!p || strncmp(p + strlen(pat), "null", 4) == 0) return NAN;
    return strtod(p + strlen(pat), NULL);
}

/* Test accuracy and loss of the exported model, one image per run. */
static void reference(const char *model_path, double *acc, double *loss) {
    ert_context *ctx = NULL;
    ert_model *m = NULL;
    ert_session *s = NULL;
    *acc = *loss = NAN;
    ert_context_create(NULL, &ctx);
    CHECK_OK(ert_model_load_file(ctx, model_path, &m), ctx);
    ert_session_options so = {.device = ERT_DEVICE_CPU, .batch = 1, .n_threads = 1};
    if (m) CHECK_OK(ert_session_create(m, &so, &s), ctx);
    if (s) {
        float *x;
        const float *z;
        ert_session_input_data(s, 0, (void **)&x);
        int ok = 0, n = C * N_TEST_PER;
        double ls = 0;
        for (int i = 0; i < n; i++) {
            for (int q = 0; q < S * S; q++) x[q] = (float)((test_px[i][q] / 255.0 - 0.286) / 0.353);
            CHECK_OK(ert_session_run(s), ctx);
            ert_session_output_data(s, 0, (const void **)&z);
            int best = 0;
            double mx = z[0], se = 0;
            for (int c = 1; c < C; c++) {
                if (z[c] > z[best]) best = c;
                if (z[c] > mx) mx = z[c];
            }
            for (int c = 0; c < C; c++) se += exp(z[c] - mx);
            ls += mx + log(se) - z[test_lab[i]];
            ok += best == test_lab[i];
        }
        *acc = (double)ok / n;
        *loss = ls / n;
        printf("train_eval: reference: %d of %d test images right\n", ok, n);
    }
    ert_session_free(s);
    ert_model_free(m);
    ert_context_free(ctx);
}

int main(void) {
#ifdef ERT_TEST_CROSS
    return ert_test_skip("train_eval", "cross build: the edgert CLI cannot be started from a test under qemu-user");
#endif
    if (access(ERT_CLI_BIN, X_OK) != 0) return ert_test_skip("train_eval", "edgert CLI not built");
    if (!mkdtemp(tmpdir)) return ert_test_skip("train_eval", "no temporary folder");
    ert_test_rng r;
    ert_test_rng_init(&r, "train_eval");
    char root[600], one[600], model[600], seed[32];
    snprintf(root, sizeof root, "%s/data", tmpdir);
    snprintf(one, sizeof one, "%s/one", tmpdir);
    snprintf(model, sizeof model, "%s/m.ert", tmpdir);
    snprintf(seed, sizeof seed, "%d", ert_test_int(&r, 1, 1000000));
    make_folder(&r, root, C, 1);
    char *out, *err;

    /* Held-out sets of 12 and 15 with a batch of 16. */
    const char *a1[] = {"small-cnn", "--data", root, "--batch", "16", "--epochs", "3", "--val-split", "0.2", "--lr", "0.01",
                        "--seed", seed, "--json", "--export", model, NULL};
    int rc = run_train(a1, &out, &err);
    CHECK(rc == 0, "train: exit %d\n%s\n%s", rc, out, err);
    double tacc = json_last(out, "test_acc"), tloss = json_last(out, "test_loss"), vacc = json_last(out, "val_acc");
    double ntest = json_last(out, "test"), nval = json_last(out, "val");
    double racc, rloss;
    reference(model, &racc, &rloss);
    printf("train_eval: test_acc %.4f (reference %.4f), test_loss %.5f (reference %.5f), val_acc %.4f\n", tacc, racc,
           tloss, rloss, vacc);
    CHECK(ntest == C * N_TEST_PER && nval == 12, "set sizes: test %g, val %g", ntest, nval);
    CHECK(fabs(tacc - racc) < 1e-4, "test_acc %.4f, an independent count gives %.4f", tacc, racc);
    CHECK(fabs(tloss - rloss) < 1e-3 * (1 + fabs(rloss)), "test_loss %.5f, reference %.5f", tloss, rloss);
    double k = vacc * 12;
    CHECK(fabs(k - floor(k + 0.5)) < 1e-3 && vacc > 0, "val_acc %.4f is not a non-zero count out of 12", vacc);
    CHECK(racc > 0.34, "the model did not learn (reference accuracy %.4f): the check above proves little", racc);
    free(out);
    free(err);

    /* No validation images: n/a, not 0; the device is named. */
    const char *a2[] = {"small-cnn", "--data", root, "--batch", "16", "--epochs", "1", "--val-split", "0", "--seed", seed, NULL};
    rc = run_train(a2, &out, &err);
    CHECK(rc == 0 && strstr(err, "validation n/a") && strstr(err, "training on cpu"), "--val-split 0: exit %d\n%s", rc, err);
    free(out);
    free(err);
    const char *a3[] = {"small-cnn", "--data", root, "--batch", "16", "--epochs", "1", "--val-split", "0", "--seed", seed,
                        "--json", NULL};
    rc = run_train(a3, &out, &err);
    CHECK(rc == 0 && strstr(out, "\"val_loss\":null,\"val_acc\":null"), "--val-split 0 --json: exit %d\n%s", rc, out);
    free(out);
    free(err);

    /* One class: refused. */
    make_folder(&r, one, 1, 0);
    char one_train[640];
    snprintf(one_train, sizeof one_train, "%s/train", one);
    const char *a4[] = {"small-cnn", "--data", one_train, "--batch", "8", "--epochs", "1", NULL};
    rc = run_train(a4, &out, &err);
    CHECK(rc == 1 && strstr(err, "1 class") && strstr(err, "at least 2"), "one class: exit %d\n%s", rc, err);
    free(out);
    free(err);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "train_eval: could not remove %s\n", tmpdir);
    return ert_test_finish("train_eval");
}
