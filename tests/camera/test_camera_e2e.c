/* edgert-camera end to end: an MJPEG stream generated here (synthetic frames
 * of a dominant colour, plus deliberately corrupt frames: truncated, bit
 * garbage, a non-JPEG blob) through the app with a small colour classifier
 * built with the C builder API (saved as .ert when the writer is available,
 * else the same model built in-process by the app: builtin:tiny).
 * Checks: exit 0; every good frame processed and classified as its colour;
 * corrupt ones counted; the --mjpeg-out stream splits and decodes into as
 * many frames; --out wrote one JPEG per frame. Then the HTTP preview: the app
 * serves on 127.0.0.1, a client here reads the page and well-formed
 * multipart JPEG parts from /stream. Everything bounded in time. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "testutil.h"
#include "models.h"
#include "source.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef ERT_CAMERA_BIN
#define ERT_CAMERA_BIN "edgert-camera"
#endif

enum { N_GOOD = 60, W = 96, H = 72 };

static char tmpdir[] = "/tmp/ert_cam_e2e_XXXXXX";

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
    if (b) b[sz] = 0;
    fclose(f);
    if (n) *n = (size_t)sz;
    return b;
}

/* The stream; returns the number of corrupt frames put in. colours[i] is the
 * class of good frame i. */
static int make_stream(ert_test_rng *r, const char *path, int *colours) {
    ert_context *ctx;
    ert_jpeg *j;
    ert_context_create(NULL, &ctx);
    ert_jpeg_create(ctx, &j);
    FILE *f = fopen(path, "wb");
    static uint8_t px[W * H * 3];
    size_t cap = ert_jpeg_encode_bound(W, H), len;
    uint8_t *jpg = malloc(cap);
    int corrupt = 0;
    for (int i = 0; i < N_GOOD; i++) {
        int c = ert_test_int(r, 0, 2);
        colours[i] = c;
        for (int p = 0; p < W * H; p++)
            for (int k = 0; k < 3; k++)
                px[p * 3 + k] = (uint8_t)((k == c ? 200 : 40) + ert_test_int(r, -20, 20));
        CHECK_OK(ert_jpeg_encode(j, px, W, H, 0, ERT_PIXEL_RGB, 90, jpg, cap, &len), ctx);
        fwrite(jpg, 1, len, f);
        if (i % 10 == 3) { /* truncated frame (the next SOI ends it) */
            fwrite(jpg, 1, len / 2, f);
            corrupt++;
        } else if (i % 10 == 6) { /* SOI + headers, garbage entropy data, EOI */
            size_t hdr = 0;
            for (size_t k = 2; k + 1 < len; k++)
                if (jpg[k] == 0xFF && jpg[k + 1] == 0xDA) { hdr = k + 2 + ((size_t)jpg[k + 2] << 8 | jpg[k + 3]); break; }
            fwrite(jpg, 1, hdr, f);
            for (int k = 0; k < 300; k++) fputc(ert_test_int(r, 0, 254), f);
            fputc(0xFF, f);
            fputc(0xD9, f);
            corrupt++;
        } else if (i == 50) { /* not a JPEG at all between frames: skipped bytes, not a frame */
            fputs("this is not a frame", f);
        }
    }
    fclose(f);
    free(jpg);
    ert_jpeg_free(j);
    ert_context_free(ctx);
    return corrupt;
}

static int run(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static long json_int(const char *json, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(json, k);
    return p ? strtol(p + strlen(k), NULL, 10) : -1;
}

static void test_pipeline(ert_test_rng *r, const char *model) {
    char stream[256], cmd[2048], out[256], jl[256], mj[256], dir[256];
    snprintf(stream, sizeof stream, "%s/in.mjpeg", tmpdir);
    snprintf(out, sizeof out, "%s/summary.json", tmpdir);
    snprintf(jl, sizeof jl, "%s/frames.jsonl", tmpdir);
    snprintf(mj, sizeof mj, "%s/out.mjpeg", tmpdir);
    snprintf(dir, sizeof dir, "%s/frames", tmpdir);
    int colours[N_GOOD];
    int n_corrupt = make_stream(r, stream, colours);
    snprintf(cmd, sizeof cmd, "%s --model %s --source %s --json --quiet --frames-jsonl %s --mjpeg-out %s --out %s > %s 2> %s.err",
             ERT_CAMERA_BIN, model, stream, jl, mj, dir, out, out);
    int rc = run(cmd);
    CHECK(rc == 0, "exit %d: %s", rc, cmd);
    char *js = slurp(out, NULL);
    CHECK(js != NULL, "summary");
    if (!js) return;
    CHECK(json_int(js, "frames") == N_GOOD, "frames %ld want %d: %s", json_int(js, "frames"), N_GOOD, js);
    CHECK(json_int(js, "corrupt") == n_corrupt, "corrupt %ld want %d", json_int(js, "corrupt"), n_corrupt);
    CHECK(json_int(js, "skipped_bytes") == (long)strlen("this is not a frame"), "skipped %ld", json_int(js, "skipped_bytes"));
    CHECK(strstr(js, "\"stages_ms\":{\"capture\"") && strstr(js, "\"infer\"") && strstr(js, "\"fps\":"), "stages: %s", js);
    free(js);
    /* Per-frame results: in order, each classified as its colour. */
    char *lines = slurp(jl, NULL);
    int n = 0, right = 0;
    for (char *p = lines; p && *p; n++) {
        char *top = strstr(p, "\"top\":[[");
        int cls = top ? atoi(top + 8) : -1;
        if (n < N_GOOD) right += cls == colours[n];
        char *nl = strchr(p, '\n');
        if (!nl) break;
        p = nl + 1;
    }
    CHECK(n == N_GOOD && right == N_GOOD, "%d result lines, %d classified right (want %d)", n, right, N_GOOD);
    free(lines);
    /* The annotated stream: as many frames, all decodable. */
    size_t mn;
    char *m = slurp(mj, &mn);
    ert_context *ctx;
    ert_jpeg *j;
    ert_context_create(NULL, &ctx);
    ert_jpeg_create(ctx, &j);
    size_t off = 0, s, e;
    int frames = 0, good = 0;
    static uint8_t px[W * H * 3];
    while (m && cam_mjpeg_split((uint8_t *)m + off, mn - off, 1, &s, &e)) {
        frames++;
        good += ert_jpeg_decode(j, m + off + s, e - s, ERT_PIXEL_RGB, px, sizeof px, 0, NULL, NULL) == ERT_OK;
        off += e;
    }
    CHECK(frames == N_GOOD && good == N_GOOD, "mjpeg-out: %d frames, %d decode", frames, good);
    free(m);
    char fp[300];
    snprintf(fp, sizeof fp, "%s/frame_%06d.jpg", dir, 0);
    struct stat sb;
    CHECK(stat(fp, &sb) == 0 && sb.st_size > 0, "%s written", fp);
    ert_jpeg_free(j);
    ert_context_free(ctx);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s' '%s' '%s.err'", dir, jl, mj, out, out);
    run(cmd);
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sa.sin_port);
}

static int connect_to(int port) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int tries = 0; tries < 100; tries++) { /* the server may still be starting: up to 5 s */
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct timeval tv = {5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
        close(fd);
        usleep(50000);
    }
    return -1;
}

/* Reads until `delim` is in buf (or n bytes when delim is NULL). */
static size_t read_until(int fd, char *buf, size_t cap, size_t have, const char *delim, size_t need) {
    while (have < cap - 1) {
        buf[have] = 0;
        if (delim && strstr(buf, delim)) break;
        if (!delim && have >= need) break;
        ssize_t r = recv(fd, buf + have, cap - 1 - have, 0);
        if (r <= 0) break;
        have += (size_t)r;
    }
    buf[have] = 0;
    return have;
}

static void test_http(const char *model) {
    char stream[256];
    snprintf(stream, sizeof stream, "%s/in.mjpeg", tmpdir);
    int port = free_port();
    CHECK(port > 0, "free port");
    char serve[32];
    snprintf(serve, sizeof serve, "127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execl(ERT_CAMERA_BIN, ERT_CAMERA_BIN, "--model", model, "--source", stream, "--serve", serve,
              "--serve-wait", "8000", "--fps-limit", "50", "--quiet", (char *)NULL);
        _exit(127);
    }
    /* The page. */
    int fd = connect_to(port);
    CHECK(fd >= 0, "connect to %d", port);
    if (fd >= 0) {
        const char get[] = "GET / HTTP/1.0\r\n\r\n";
        CHECK(send(fd, get, sizeof get - 1, 0) == (ssize_t)(sizeof get - 1), "send");
        static char buf[1 << 20];
        size_t n = read_until(fd, buf, sizeof buf, 0, "</html>", 0);
        CHECK(n > 0 && strstr(buf, "200 OK") && strstr(buf, "text/html") && strstr(buf, "src=\"/stream\""), "page: %.200s", buf);
        close(fd);
    }
    /* The stream: a multipart header, then parts of JPEGs. */
    fd = connect_to(port);
    int parts = 0, decoded = 0;
    if (fd >= 0) {
        const char get[] = "GET /stream HTTP/1.0\r\n\r\n";
        send(fd, get, sizeof get - 1, 0);
        static char buf[1 << 20];
        size_t n = read_until(fd, buf, sizeof buf, 0, "\r\n\r\n", 0);
        CHECK(strstr(buf, "200 OK") && strstr(buf, "Content-Type: multipart/x-mixed-replace; boundary=ertframe"),
              "stream header: %.200s", buf);
        char *body = strstr(buf, "\r\n\r\n");
        size_t have = body ? n - (size_t)(body + 4 - buf) : 0;
        if (body) memmove(buf, body + 4, have);
        ert_context *ctx;
        ert_jpeg *j;
        ert_context_create(NULL, &ctx);
        ert_jpeg_create(ctx, &j);
        static uint8_t px[W * H * 3];
        while (parts < 5) {
            have = read_until(fd, buf, sizeof buf, have, "\r\n\r\n", 0);
            char *hdr_end = strstr(buf, "\r\n\r\n");
            if (!hdr_end) break;
            int ok_hdr = strncmp(buf, "--ertframe\r\n", 12) == 0 && strstr(buf, "Content-Type: image/jpeg") != NULL;
            char *cl = strstr(buf, "Content-Length: ");
            size_t len = cl ? strtoul(cl + 16, NULL, 10) : 0;
            size_t start = (size_t)(hdr_end + 4 - buf);
            have = read_until(fd, buf, sizeof buf, have, NULL, start + len + 2);
            if (have < start + len + 2) break;
            CHECK(ok_hdr && len > 0 && buf[start + len] == '\r' && buf[start + len + 1] == '\n', "part %d framing", parts);
            decoded += ert_jpeg_decode(j, buf + start, len, ERT_PIXEL_RGB, px, sizeof px, 0, NULL, NULL) == ERT_OK;
            parts++;
            if (parts == 2) { /* a second viewer meanwhile: told to come back later */
                int fd2 = connect_to(port);
                static char b2[4096];
                const char g2[] = "GET /stream HTTP/1.0\r\n\r\n";
                if (fd2 >= 0) send(fd2, g2, sizeof g2 - 1, MSG_NOSIGNAL);
                size_t n2 = fd2 >= 0 ? read_until(fd2, b2, sizeof b2, 0, "later", 0) : 0;
                CHECK(n2 > 0 && strstr(b2, "503") != NULL, "second viewer: %.80s", b2);
                if (fd2 >= 0) close(fd2);
            }
            memmove(buf, buf + start + len + 2, have - start - len - 2);
            have -= start + len + 2;
        }
        ert_jpeg_free(j);
        ert_context_free(ctx);
        close(fd);
    }
    CHECK(parts >= 3 && decoded == parts, "HTTP: %d parts, %d decoded JPEGs", parts, decoded);
    /* The app ends with its source; bounded: kill it after 20 s. */
    int status = 0;
    for (int i = 0; i < 200; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) { pid = 0; break; }
        usleep(100000);
    }
    if (pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        CHECK(0, "app did not exit after the stream");
    } else {
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "app exit status %d", status);
    }
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "camera_e2e");
    if (!ert_jpeg_available()) return ert_test_skip("camera_e2e", "built without JPEG support");
    if (access(ERT_CAMERA_BIN, X_OK) != 0) return ert_test_skip("camera_e2e", "edgert-camera not built");
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(tmpdir)) return 1;
    /* The classifier, built with the C API; a .ert file when it can be saved. */
    ert_context *ctx;
    ert_model *m = NULL;
    ert_context_create(NULL, &ctx);
    CHECK_OK(cam_builtin_model(ctx, "tiny", &m), ctx);
    char model[300] = "builtin:tiny";
    char ert_path[280];
    snprintf(ert_path, sizeof ert_path, "%s/tiny.ert", tmpdir);
    if (m && ert_model_save(m, ert_path) == ERT_OK) snprintf(model, sizeof model, "%s", ert_path);
    else printf("camera_e2e: .ert writer not available (%s): the app builds the model in-process\n", ert_last_error(ctx));
    ert_model_free(m);
    ert_context_free(ctx);
    test_pipeline(&r, model);
    test_http(model);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    run(cmd);
    return ert_test_finish("camera_e2e");
}
