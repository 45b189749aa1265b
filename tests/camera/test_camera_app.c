/* edgert-camera as a user meets it (issue 13, items 2, 3, 12):
 *  - usage errors: one line naming the option, the rejected value and what is
 *    allowed, then "see edgert-camera --help" (exit 2); --version; --help
 *    lists the defaults;
 *  - every output write checked: --out naming a file, a read-only folder (as
 *    root permissions do not stop writes: that case is skipped with a
 *    message), a full disk (RLIMIT_FSIZE for --out and --collect, /dev/full for
 *    --frames-jsonl and --mjpeg-out, and behind stdout for --json) end the
 *    run with exit 1 naming the file;
 *    --out makes missing parent folders;
 *  - a source without one good frame (empty file, random bytes, empty
 *    stdin) exits 1 with "no frames";
 *  - SIGTERM/SIGINT end a run stuck on /dev/zero, on a stalled stdin pipe and
 *    in --serve-wait within 1 s, with the summary printed.
 * The app runs as a child process with stdout/stderr in files; every child is
 * killed after 30 s so a hang fails instead of blocking ctest. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef ERT_CAMERA_BIN
#define ERT_CAMERA_BIN "edgert-camera"
#endif

enum { N_FRAMES = 6, W = 96, H = 64 }; /* noise frames: about 10 KB of JPEG each */

static char tmpdir[] = "/tmp/ert_cam_app_XXXXXX";
static char out_path[300], err_path[300];
static int stdout_full; /* the child's stdout is /dev/full */
static int as_nobody;   /* the child drops root for uid/gid 65534 (permissions apply) */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return calloc(1, 1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = calloc((size_t)n + 1, 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) b[0] = 0;
    fclose(f);
    return b;
}

typedef struct child {
    pid_t pid;
    int status;
    char *out, *err; /* after wait */
} child;

/* Starts the app with argv (NULL-terminated, argv[0] excluded). stdin_fd < 0:
 * /dev/null. fsize > 0: RLIMIT_FSIZE in bytes (SIGXFSZ ignored, so a write past
 * it fails with EFBIG like a full disk). */
static child start(const char *const *args, int stdin_fd, long fsize) {
    const char *argv[64];
    int n = 0;
    argv[n++] = ERT_CAMERA_BIN;
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    child c = {0};
    /* emptied here, not in the child: a waiter must not see the last run's stderr */
    unlink(out_path);
    unlink(err_path);
    c.pid = fork();
    if (c.pid == 0) {
        int in = stdin_fd >= 0 ? stdin_fd : open("/dev/null", O_RDONLY);
        int o = stdout_full ? open("/dev/full", O_WRONLY) : open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        if (as_nobody && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(126);
        if (fsize > 0) {
            struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
            signal(SIGXFSZ, SIG_IGN);
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        execv(ERT_CAMERA_BIN, (char *const *)argv);
        _exit(127);
    }
    return c;
}

/* Waits (at most 30 s, then SIGKILL and a failure) and reads the outputs. */
static void finish(child *c) {
    int done = 0;
    for (int i = 0; i < 3000 && !done; i++) {
        if (waitpid(c->pid, &c->status, WNOHANG) == c->pid) done = 1;
        else usleep(10000);
    }
    if (!done) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, &c->status, 0);
        CHECK(0, "edgert-camera still running after 30 s: killed");
    }
    c->out = slurp(out_path);
    c->err = slurp(err_path);
}

static int exit_code(const child *c) { return WIFEXITED(c->status) ? WEXITSTATUS(c->status) : 128 + WTERMSIG(c->status); }

static child run(const char *const *args, int stdin_fd, long fsize) {
    child c = start(args, stdin_fd, fsize);
    finish(&c);
    return c;
}

static void drop(child *c) {
    free(c->out);
    free(c->err);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* ------------------------------------------------------------ usage */

static void test_usage(const char *stream) {
    /* option, rejected value, a piece of the allowed range the message must give */
    static const char *const bad[][3] = {
        {"--quality", "0", "1..100"},        {"--quality", "85x", "1..100"},  {"--topk", "99", "1..16"},
        {"--threads", "abc", "1..256"},      {"--serve-wait", "-1", "0..3600000"},
        {"--decode-scale", "3", "1, 2, 4, 8 or auto"}, {"--input-size", "0x5", "WxH"},
        {"--device", "gpu", "cpu, cuda or auto"}, {"--std", "0", "> 0"}, {"--mean", "1,2", "one or three"},
        {"--score", "1.5", "0..1"},          {"--fps-limit", "fast", "0..1000"}, {"--fit", "zoom", "stretch, letterbox or crop"},
        {"--task", "segment", "classify, detect or textdet"}, {"--collect-every", "0", "1..1000000"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"--model", "builtin:tiny", "--source", stream, bad[i][0], bad[i][1], NULL};
        child c = run(args, -1, 0);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i][1]);
        const char *nl = strchr(c.err, '\n');
        CHECK(exit_code(&c) == 2, "%s %s: exit %d", bad[i][0], bad[i][1], exit_code(&c));
        CHECK(count_lines(c.err) == 2 && nl && strstr(c.err, bad[i][0]) && strstr(c.err, quoted) &&
                  strstr(c.err, bad[i][2]) && strstr(c.err, bad[i][2]) < nl && strcmp(nl + 1, "see edgert-camera --help\n") == 0,
              "%s %s: stderr '%s'", bad[i][0], bad[i][1], c.err);
        drop(&c);
    }
    const char *unknown[] = {"--model", "builtin:tiny", "--source", stream, "--frobnicate", NULL};
    child c = run(unknown, -1, 0);
    CHECK(exit_code(&c) == 2 && count_lines(c.err) == 2 && strstr(c.err, "'--frobnicate'"), "unknown option: %s", c.err);
    drop(&c);
    const char *nosrc[] = {"--model", "builtin:tiny", NULL};
    c = run(nosrc, -1, 0);
    CHECK(exit_code(&c) == 2 && strstr(c.err, "--source is required") && count_lines(c.err) == 2, "no --source: %s", c.err);
    drop(&c);
    const char *version[] = {"--version", NULL};
    c = run(version, -1, 0);
    char want[64];
    snprintf(want, sizeof want, "edgert-camera %s\n", ert_version());
    CHECK(exit_code(&c) == 0 && strcmp(c.out, want) == 0, "--version: '%s'", c.out);
    drop(&c);
    const char *help[] = {"--help", NULL};
    c = run(help, -1, 0);
    CHECK(exit_code(&c) == 0 && strstr(c.out, "--version") && strstr(c.out, "(default 85)") &&
              strstr(c.out, "(default 5)") && strstr(c.out, "(default 640x640)") && strstr(c.out, "(default cpu)"),
          "--help lists the defaults: %s", c.out);
    drop(&c);
    /* ... and neither ends in exit 0 when stdout cannot take it */
    const char *const *asks[] = {version, help};
    stdout_full = 1;
    for (int k = 0; k < 2; k++) {
        c = run(asks[k], -1, 0);
        CHECK(exit_code(&c) == 1 && strstr(c.err, "cannot write to standard output: No space left"), "%s > /dev/full: exit %d: %s",
              asks[k][0], exit_code(&c), c.err);
        drop(&c);
    }
    stdout_full = 0;
}

/* ------------------------------------------------------------ writes */

static int count_jpegs(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += strncmp(e->d_name, "frame_", 6) == 0 && strstr(e->d_name, ".jpg") && !strstr(e->d_name, ".tmp");
    closedir(d);
    return n;
}

static void test_writes(const char *stream) {
    char dir[400], file[400], jsonl[400];
    /* Missing parents are made; a clean run writes every frame and exits 0. */
    snprintf(dir, sizeof dir, "%s/made/on/the/fly", tmpdir);
    snprintf(jsonl, sizeof jsonl, "%s/r.jsonl", tmpdir);
    const char *ok[] = {"--model", "builtin:tiny", "--source", stream, "--out", dir, "--frames-jsonl", jsonl, "--quiet", NULL};
    child c = run(ok, -1, 0);
    char *jl = slurp(jsonl);
    CHECK(exit_code(&c) == 0 && count_jpegs(dir) == N_FRAMES && count_lines(jl) == N_FRAMES,
          "clean run: exit %d, %d JPEGs, %d JSONL lines: %s", exit_code(&c), count_jpegs(dir), count_lines(jl), c.err);
    free(jl);
    drop(&c);

    /* --out names a regular file. */
    snprintf(file, sizeof file, "%s/a_file", tmpdir);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    const char *onfile[] = {"--model", "builtin:tiny", "--source", stream, "--out", file, "--quiet", NULL};
    c = run(onfile, -1, 0);
    CHECK(exit_code(&c) == 1 && strstr(c.err, file), "--out FILE: exit %d: %s", exit_code(&c), c.err);
    drop(&c);

    /* A full disk: the first JPEG in --out cannot be written. */
    snprintf(dir, sizeof dir, "%s/full", tmpdir);
    const char *full[] = {"--model", "builtin:tiny", "--source", stream, "--out", dir, "--quiet", NULL};
    c = run(full, -1, 4096); /* below one frame, above the summary on stderr */
    CHECK(exit_code(&c) == 1 && strstr(c.err, dir) && strstr(c.err, "frame_000000.jpg") && strstr(c.err, "write failed"),
          "--out on a full disk: exit %d: %s", exit_code(&c), c.err);
    CHECK(count_jpegs(dir) == 0, "--out on a full disk left %d JPEGs", count_jpegs(dir));
    drop(&c);
    snprintf(dir, sizeof dir, "%s/collect_full", tmpdir);
    const char *cfull[] = {"--source", stream, "--collect", dir, "--quiet", NULL};
    c = run(cfull, -1, 4096);
    CHECK(exit_code(&c) == 1 && strstr(c.err, "--collect") && strstr(c.err, dir) && strstr(c.err, "write failed"),
          "--collect on a full disk: exit %d: %s", exit_code(&c), c.err);
    CHECK(count_jpegs(dir) == 0, "--collect on a full disk left %d JPEGs", count_jpegs(dir));
    drop(&c);

    /* /dev/full behind the streaming outputs. */
    const char *opts2[] = {"--frames-jsonl", "--mjpeg-out"};
    for (int k = 0; k < 2; k++) {
        const char *devfull[] = {"--model", "builtin:tiny", "--source", stream, opts2[k], "/dev/full", "--quiet", NULL};
        c = run(devfull, -1, 0);
        CHECK(exit_code(&c) == 1 && strstr(c.err, "/dev/full") && strstr(c.err, opts2[k]) && strstr(c.err, "No space left"),
              "%s /dev/full: exit %d: %s", opts2[k], exit_code(&c), c.err);
        /* the run stopped at the first frame */
        CHECK(strstr(c.err, "edgert-camera: 1 frames in") != NULL, "%s /dev/full: did not stop at once: %s", opts2[k], c.err);
        drop(&c);
    }

    /* --json on a full stdout. */
    const char *js[] = {"--model", "builtin:tiny", "--source", stream, "--json", "--quiet", NULL};
    stdout_full = 1;
    c = run(js, -1, 0);
    stdout_full = 0;
    CHECK(exit_code(&c) == 1 && strstr(c.err, "cannot write to standard output"), "--json > /dev/full: exit %d: %s", exit_code(&c), c.err);
    drop(&c);

    /* A read-only folder. As root (CI) permissions do not stop writes: the
     * app then runs as uid 65534, which may read the stream (the folders on
     * the way are opened up for the run) but not write the 0555 folder. */
    snprintf(dir, sizeof dir, "%s/readonly", tmpdir);
    mkdir(dir, 0555);
    chmod(dir, 0555);
    int root = geteuid() == 0;
    if (root) {
        chmod(tmpdir, 0755);
        chmod(stream, 0644);
    }
    as_nobody = root;
    const char *ro[] = {"--model", "builtin:tiny", "--source", stream, "--out", dir, "--quiet", NULL};
    c = run(ro, -1, 0);
    as_nobody = 0;
    CHECK(exit_code(&c) == 1 && strstr(c.err, dir) && strstr(c.err, "Permission denied"), "read-only --out%s: exit %d: %s",
          root ? " (as uid 65534)" : "", exit_code(&c), c.err);
    CHECK(count_jpegs(dir) == 0, "read-only --out: %d JPEGs written", count_jpegs(dir));
    drop(&c);
    if (root) chmod(tmpdir, 0700);
    chmod(dir, 0755);

    /* --out goes through the library's atomic write (issue 13 item 1): a
     * symlinked frame file gets the JPEG in its target and stays a link, a
     * killed run's temporary file goes, and a FIFO in the way is refused
     * (exit 1 naming it) and left as it was. */
    snprintf(dir, sizeof dir, "%s/links", tmpdir);
    mkdir(dir, 0755);
    char lnk[500], target[500], stale[500], fifo[500];
    snprintf(lnk, sizeof lnk, "%s/frame_000001.jpg", dir);
    snprintf(target, sizeof target, "%s/kept_elsewhere.jpg", tmpdir);
    snprintf(stale, sizeof stale, "%s/frame_000002.jpg.tmp.Ab3dE6", dir);
    CHECK(symlink(target, lnk) == 0, "symlink");
    FILE *sf = fopen(stale, "w");
    if (sf) fclose(sf);
    const char *to_links[] = {"--model", "builtin:tiny", "--source", stream, "--out", dir, "--quiet", NULL};
    c = run(to_links, -1, 0);
    struct stat sb;
    char *tj = slurp(target);
    CHECK(exit_code(&c) == 0 && lstat(lnk, &sb) == 0 && S_ISLNK(sb.st_mode), "--out over a symlink: exit %d, link kept: %s",
          exit_code(&c), c.err);
    CHECK((unsigned char)tj[0] == 0xFF && (unsigned char)tj[1] == 0xD8, "the link's target holds no JPEG");
    CHECK(access(stale, F_OK) != 0, "a killed run's temporary file is still there");
    free(tj);
    drop(&c);
    snprintf(dir, sizeof dir, "%s/fifo", tmpdir);
    mkdir(dir, 0755);
    snprintf(fifo, sizeof fifo, "%s/frame_000000.jpg", dir);
    CHECK(mkfifo(fifo, 0644) == 0, "mkfifo");
    const char *to_fifo[] = {"--model", "builtin:tiny", "--source", stream, "--out", dir, "--quiet", NULL};
    c = run(to_fifo, -1, 0);
    CHECK(exit_code(&c) == 1 && strstr(c.err, fifo) && strstr(c.err, "FIFO"), "--out onto a FIFO: exit %d: %s",
          exit_code(&c), c.err);
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    drop(&c);
}

/* ------------------------------------------------------------ no frames */

static void test_no_frames(ert_test_rng *r) {
    char empty[400], rnd[400];
    snprintf(empty, sizeof empty, "%s/empty.mjpeg", tmpdir);
    snprintf(rnd, sizeof rnd, "%s/random.mjpeg", tmpdir);
    FILE *f = fopen(empty, "wb");
    if (f) fclose(f);
    f = fopen(rnd, "wb");
    for (int i = 0; f && i < 65536; i++) fputc(ert_test_int(r, 0, 255), f);
    if (f) fclose(f);
    const char *sources[] = {empty, rnd, "-"};
    for (int k = 0; k < 3; k++) {
        const char *args[] = {"--model", "builtin:tiny", "--source", sources[k], "--quiet", NULL};
        child c = run(args, -1, 0); /* "-": stdin is /dev/null, empty */
        CHECK(exit_code(&c) == 1 && strstr(c.err, "no frames"), "source %s: exit %d: %s", sources[k], exit_code(&c), c.err);
        drop(&c);
        const char *dec[] = {"--decode-only", "--source", sources[k], "--quiet", NULL};
        c = run(dec, -1, 0);
        CHECK(exit_code(&c) == 1 && strstr(c.err, "no frames"), "--decode-only source %s: exit %d: %s", sources[k],
              exit_code(&c), c.err);
        drop(&c);
    }
}

/* ------------------------------------------------------------ signals */

/* Waits until stderr holds `marker` (the app reached the state), then 0.3 s
 * more, sends sig and times the exit. */
static void stop_with(const char *what, child *c, const char *marker, int sig) {
    for (int i = 0; i < 3000; i++) {
        char *e = slurp(err_path);
        int seen = strstr(e, marker) != NULL;
        free(e);
        if (seen) break;
        usleep(10000);
    }
    usleep(300000);
    int status;
    CHECK(waitpid(c->pid, &status, WNOHANG) == 0, "%s: the app ended before the signal", what);
    double t0 = now_s();
    kill(c->pid, sig);
    double t1 = t0;
    for (int i = 0; i < 3000; i++) {
        if (waitpid(c->pid, &c->status, WNOHANG) == c->pid) { t1 = now_s(); c->pid = -1; break; }
        usleep(2000);
    }
    if (c->pid > 0) finish(c);
    else {
        c->out = slurp(out_path);
        c->err = slurp(err_path);
    }
    double dt = t1 - t0;
    printf("camera_app: %s: exit %.3f s after %s\n", what, dt, sig == SIGINT ? "SIGINT" : "SIGTERM");
    CHECK(WIFEXITED(c->status) && dt > 0 && dt < 1.0, "%s: ended %.3f s after the signal (status %d)", what, dt, c->status);
    CHECK(strstr(c->err, "frames in") && strstr(c->err, "infer") &&
              strstr(c->err, sig == SIGINT ? "stopped by SIGINT" : "stopped by SIGTERM"),
          "%s: no summary: %s", what, c->err);
}

static void test_signals(const char *stream) {
    const char *zero[] = {"--model", "builtin:tiny", "--source", "/dev/zero", NULL};
    child c = start(zero, -1, 0);
    stop_with("--source /dev/zero", &c, "->", SIGTERM);
    drop(&c);

    int p[2];
    if (pipe(p) == 0) { /* a stalled pipe: the writer stays open and silent */
        const char *pipe_src[] = {"--model", "builtin:tiny", "--source", "-", NULL};
        c = start(pipe_src, p[0], 0);
        close(p[0]);
        stop_with("stalled stdin pipe", &c, "->", SIGINT);
        close(p[1]);
        drop(&c);
    }

    /* a named FIFO whose writer has not started: the open must not block
     * (it ended with "Interrupted system call" and no summary) */
    char fifo[400];
    snprintf(fifo, sizeof fifo, "%s/cam.fifo", tmpdir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    const char *fifo_src[] = {"--model", "builtin:tiny", "--source", fifo, NULL};
    c = start(fifo_src, -1, 0);
    stop_with("FIFO without a writer", &c, "->", SIGTERM);
    drop(&c);
    /* ... and once the writer comes, its frames are read to the end */
    const char *fifo_late[] = {"--model", "builtin:tiny", "--source", fifo, "--quiet", NULL};
    c = start(fifo_late, -1, 0);
    usleep(300000);
    char *data = slurp(stream);
    size_t len = 0;
    FILE *sf = fopen(stream, "rb");
    if (sf) {
        fseek(sf, 0, SEEK_END);
        len = (size_t)ftell(sf);
        fclose(sf);
    }
    FILE *w = fopen(fifo, "wb");
    CHECK(w && fwrite(data, 1, len, w) == len, "writing the stream into the FIFO");
    if (w) fclose(w);
    free(data);
    finish(&c);
    char want[64];
    snprintf(want, sizeof want, "%d frames in", N_FRAMES);
    CHECK(exit_code(&c) == 0 && strstr(c.err, want), "FIFO writer started late: exit %d: %s", exit_code(&c), c.err);
    drop(&c);

    const char *wait_viewer[] = {"--model", "builtin:tiny", "--source", stream, "--serve", "127.0.0.1:0",
                                 "--serve-wait", "60000", NULL};
    c = start(wait_viewer, -1, 0);
    stop_with("--serve-wait 60000", &c, "serving on", SIGTERM);
    drop(&c);
}

/* ------------------------------------------------------------ main */

static void make_stream(ert_test_rng *r, const char *path) {
    ert_context *ctx;
    ert_jpeg *j;
    ert_context_create(NULL, &ctx);
    CHECK_OK(ert_jpeg_create(ctx, &j), ctx);
    FILE *f = fopen(path, "wb");
    static uint8_t px[W * H * 3];
    size_t cap = ert_jpeg_encode_bound(W, H), len = 0;
    uint8_t *jpg = malloc(cap);
    for (int i = 0; f && jpg && i < N_FRAMES; i++) {
        for (int p = 0; p < W * H * 3; p++) px[p] = (uint8_t)ert_test_int(r, 0, 255);
        CHECK_OK(ert_jpeg_encode(j, px, W, H, 0, ERT_PIXEL_RGB, 90, jpg, cap, &len), ctx);
        fwrite(jpg, 1, len, f);
    }
    if (f) fclose(f);
    free(jpg);
    ert_jpeg_free(j);
    ert_context_free(ctx);
}

int main(void) {
#ifdef ERT_TEST_CROSS
    return ert_test_skip("camera_app", "cross build: edgert-camera cannot be started from a test under qemu-user");
#endif
    if (!ert_jpeg_available()) return ert_test_skip("camera_app", "built without JPEG support");
    if (access(ERT_CAMERA_BIN, X_OK) != 0) return ert_test_skip("camera_app", "edgert-camera not built");
    if (!mkdtemp(tmpdir)) return ert_test_skip("camera_app", "no temporary folder");
    snprintf(out_path, sizeof out_path, "%s/stdout", tmpdir);
    snprintf(err_path, sizeof err_path, "%s/stderr", tmpdir);
    ert_test_rng r;
    ert_test_rng_init(&r, "camera_app");
    char stream[400];
    snprintf(stream, sizeof stream, "%s/in.mjpeg", tmpdir);
    make_stream(&r, stream);
    test_usage(stream);
    test_writes(stream);
    test_no_frames(&r);
    test_signals(stream);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "camera_app: could not remove %s\n", tmpdir);
    return ert_test_finish("camera_app");
}
