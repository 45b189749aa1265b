/* The one atomic write (core/fileio.c, edgert.h ert_file_writer_*), through
 * its own API and through the writers that use it (ert_model_save,
 * ert_model_save_onnx):
 * - a target that is a FIFO, a socket, a directory, a character or block
 *   device node (mknod: root only, skipped with a message otherwise) is
 *   refused with ERT_E_IO naming what it is, and left as it was;
 * - a symlink chain (relative links, across folders) is followed: the real
 *   file gets the new bytes and keeps its mode, the links stay links;
 * - stale PATH.tmp.XXXXXX files of the same target are removed by the next
 *   save, those of other targets and those a live writer holds are kept;
 * - no temporary file is visible after a commit or an abort, and an abort
 *   or a failed write leaves the old contents.
 * The image writer (ert_image_write_pnm) goes through it too: a FIFO is
 * refused, a symlink's target gets the image, stale temporary files go.
 * (A writer killed mid-save: test_ert_format's sigkill test.)
 * Every case writes fresh random bytes and reads them back. */
#define _DEFAULT_SOURCE /* mknod, symlink, lstat, mkdtemp, flock */
#include "edgert.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

static char g_dir[256];
static ert_test_rng g_rng;

static void fill(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)ert_test_u64(&g_rng);
}

static const char *at(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* at() returns one of 4 rotating buffers: copy a path that must live longer. */

/* Whole file into a malloc'd buffer; NULL if it cannot be read. */
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *b = malloc(1 << 20);
    *n = b ? fread(b, 1, 1 << 20, f) : 0;
    fclose(f);
    return b;
}

static bool same_file(const char *path, const uint8_t *want, size_t n) {
    size_t got = 0;
    uint8_t *b = slurp(path, &got);
    bool ok = b && got == n && memcmp(b, want, n) == 0;
    free(b);
    return ok;
}

/* Entries of g_dir (and sub) whose name contains ".tmp.". */
static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static void test_basic(ert_context *ctx) {
    uint8_t a[3000], b[1777];
    fill(a, sizeof a);
    fill(b, sizeof b);
    const char *p = at("plain.bin");
    CHECK(ert_file_write_atomic(ctx, p, a, sizeof a) == ERT_OK, "write: %s", ert_last_error(ctx));
    CHECK(same_file(p, a, sizeof a), "first contents read back");
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) != 0, "mode set");
    /* a replaced file keeps its mode */
    CHECK(chmod(p, 0600) == 0, "chmod");
    CHECK(ert_file_write_atomic(ctx, p, b, sizeof b) == ERT_OK, "rewrite: %s", ert_last_error(ctx));
    CHECK(same_file(p, b, sizeof b), "second contents read back");
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600, "mode 0600 kept (got %o)", (unsigned)(sb.st_mode & 0777));
    /* streaming: append, then patch the head at offset 0 */
    ert_file_writer *w = NULL;
    CHECK(ert_file_writer_open(ctx, p, &w) == ERT_OK, "open: %s", ert_last_error(ctx));
    uint8_t head[16] = {0};
    CHECK(ert_file_writer_write(w, head, sizeof head) == ERT_OK, "write head");
    CHECK(ert_file_writer_write(w, a, sizeof a) == ERT_OK, "write body");
    CHECK(ert_file_writer_write_at(w, 0, b, sizeof head) == ERT_OK, "write_at");
    CHECK(same_file(p, b, sizeof b), "not visible before commit");
    CHECK(ert_file_writer_commit(w) == ERT_OK, "commit: %s", ert_last_error(ctx));
    uint8_t want[16 + sizeof a];
    memcpy(want, b, 16);
    memcpy(want + 16, a, sizeof a);
    CHECK(same_file(p, want, sizeof want), "streamed contents");
    /* abort: old contents, no temporary file */
    CHECK(ert_file_writer_open(ctx, p, &w) == ERT_OK, "open 2");
    CHECK(ert_file_writer_write(w, a, 10) == ERT_OK, "write 2");
    ert_file_writer_abort(w);
    CHECK(same_file(p, want, sizeof want), "abort leaves the old file");
    CHECK(count_tmp(g_dir) == 0, "no temporary file after commit/abort (%d)", count_tmp(g_dir));
    /* a missing folder is an error naming it, nothing created */
    CHECK(ert_file_write_atomic(ctx, at("no/such/dir/x.bin"), a, 4) == ERT_E_IO, "missing folder refused");
    CHECK(strstr(ert_last_error(ctx), "no/such/dir") != NULL, "message names the folder: %s", ert_last_error(ctx));
}

/* path exists as a non-regular file: refused, named, left as it is */
static void expect_refused(ert_context *ctx, const char *path, const char *kind, mode_t fmt) {
    uint8_t a[64];
    fill(a, sizeof a);
    ert_status st = ert_file_write_atomic(ctx, path, a, sizeof a);
    CHECK(st == ERT_E_IO, "%s: status %s", kind, ert_status_str(st));
    CHECK(strstr(ert_last_error(ctx), kind) != NULL, "%s named in: %s", kind, ert_last_error(ctx));
    struct stat sb;
    CHECK(lstat(path, &sb) == 0 && (sb.st_mode & S_IFMT) == fmt, "%s left as it was", kind);
    CHECK(count_tmp(g_dir) == 0, "%s: no temporary file", kind);
}

static void test_not_regular(ert_context *ctx) {
    const char *fifo = at("fifo");
    CHECK(mkfifo(fifo, 0644) == 0, "mkfifo: %s", strerror(errno));
    expect_refused(ctx, fifo, "FIFO", S_IFIFO);
    const char *dir = at("adir");
    CHECK(mkdir(dir, 0755) == 0, "mkdir");
    expect_refused(ctx, dir, "directory", S_IFDIR);

    const char *sock = at("sock");
    int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    if (sfd >= 0 && strlen(sock) < sizeof sa.sun_path && bind(sfd, (struct sockaddr *)&sa, sizeof sa) == 0)
        expect_refused(ctx, sock, "socket", S_IFSOCK);
    else
        printf("SKIP part: cannot bind a unix socket at %s\n", sock);
    if (sfd >= 0) close(sfd);

    /* device nodes made here (the same major/minor as /dev/null and loop0),
     * never the system's own */
    const char *chr = at("null_dev"), *blk = at("blk_dev");
    if (mknod(chr, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        expect_refused(ctx, chr, "character device", S_IFCHR);
        CHECK(mknod(blk, S_IFBLK | 0600, makedev(7, 0)) == 0, "mknod block: %s", strerror(errno));
        expect_refused(ctx, blk, "block device", S_IFBLK);
        /* a link to a device is refused too, and the message names both */
        CHECK(symlink("null_dev", at("link_to_dev")) == 0, "symlink");
        expect_refused(ctx, at("link_to_dev"), "character device", S_IFLNK);
        CHECK(strstr(ert_last_error(ctx), "null_dev") != NULL, "real target named: %s", ert_last_error(ctx));
        /* through a model writer as well */
        ert_builder *b = NULL;
        ert_model *m = NULL;
        int64_t dims[2] = {1, 4};
        int32_t x, y;
        CHECK(ert_builder_create(ctx, &b) == ERT_OK, "builder");
        CHECK(ert_builder_input(b, "x", ERT_DTYPE_F32, 2, dims, &x) == ERT_OK, "input");
        CHECK(ert_builder_unary(b, "Relu", x, &y) == ERT_OK, "relu");
        CHECK(ert_builder_output(b, y, "y") == ERT_OK, "output");
        CHECK(ert_builder_finish(b, &m) == ERT_OK, "finish: %s", ert_last_error(ctx));
        ert_builder_free(b);
        CHECK(ert_model_save(m, chr) == ERT_E_IO, "ert_model_save refuses a device");
        CHECK(ert_model_save_onnx(m, chr) == ERT_E_IO, "ert_model_save_onnx refuses a device");
        struct stat sb;
        CHECK(lstat(chr, &sb) == 0 && S_ISCHR(sb.st_mode), "device node kept");
        ert_model_free(m);
    } else {
        printf("SKIP part: mknod needs root (%s): device-node cases not run\n", strerror(errno));
    }
}

static void test_symlinks(ert_context *ctx) {
    /* g_dir/l1 -> sub/l2 -> ../real.bin  (relative, across folders) */
    CHECK(mkdir(at("sub"), 0755) == 0, "mkdir sub");
    uint8_t a[500], b[900];
    fill(a, sizeof a);
    fill(b, sizeof b);
    const char *real = at("real.bin");
    CHECK(ert_file_write_atomic(ctx, real, a, sizeof a) == ERT_OK, "real");
    CHECK(chmod(real, 0640) == 0, "chmod");
    CHECK(symlink("../real.bin", at("sub/l2")) == 0, "symlink l2");
    CHECK(symlink("sub/l2", at("l1")) == 0, "symlink l1");
    CHECK(ert_file_write_atomic(ctx, at("l1"), b, sizeof b) == ERT_OK, "through links: %s", ert_last_error(ctx));
    CHECK(same_file(real, b, sizeof b), "real file updated");
    struct stat sb;
    CHECK(lstat(at("l1"), &sb) == 0 && S_ISLNK(sb.st_mode), "l1 still a link");
    CHECK(lstat(at("sub/l2"), &sb) == 0 && S_ISLNK(sb.st_mode), "l2 still a link");
    CHECK(stat(real, &sb) == 0 && (sb.st_mode & 0777) == 0640, "real file's mode kept");
    CHECK(count_tmp(g_dir) == 0 && count_tmp(at("sub")) == 0, "no temporary files");
    /* a dangling link: the file it names is created */
    CHECK(symlink("made.bin", at("dangling")) == 0, "symlink dangling");
    CHECK(ert_file_write_atomic(ctx, at("dangling"), a, sizeof a) == ERT_OK, "dangling: %s", ert_last_error(ctx));
    CHECK(same_file(at("made.bin"), a, sizeof a), "dangling link's target created");
    CHECK(lstat(at("dangling"), &sb) == 0 && S_ISLNK(sb.st_mode), "dangling link kept");
    /* a loop */
    CHECK(symlink("loop_b", at("loop_a")) == 0 && symlink("loop_a", at("loop_b")) == 0, "loop links");
    CHECK(ert_file_write_atomic(ctx, at("loop_a"), a, 4) == ERT_E_IO, "link loop refused");
}

/* ert_image_write_pnm: the same rules as every other writer (it used to
 * fopen() the target: a FIFO blocked it, a symlink's target was truncated in
 * place, a crash left half an image). */
static void test_image_writer(ert_context *ctx) {
    enum { W = 5, H = 3 };
    uint8_t px[W * H * 3];
    fill(px, sizeof px);
    const char *fifo = at("img_fifo.ppm");
    CHECK(mkfifo(fifo, 0644) == 0, "mkfifo: %s", strerror(errno));
    ert_status st = ert_image_write_pnm(ctx, fifo, px, W, H, 3);
    CHECK(st == ERT_E_IO && strstr(ert_last_error(ctx), "FIFO"), "PNM onto a FIFO: %s: %s", ert_status_str(st),
          ert_last_error(ctx));
    struct stat sb;
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "FIFO left as it was");

    char real[512], link[512], stale[512];
    snprintf(real, sizeof real, "%s", at("img_real.ppm"));
    snprintf(link, sizeof link, "%s", at("img_link.ppm"));
    snprintf(stale, sizeof stale, "%s", at("img_real.ppm.tmp.Zz9Yy8"));
    FILE *f = fopen(stale, "wb");
    CHECK(f && fclose(f) == 0, "stale temp file");
    CHECK(symlink("img_real.ppm", link) == 0, "symlink");
    CHECK(ert_image_write_pnm(ctx, link, px, W, H, 3) == ERT_OK, "PNM through a link: %s", ert_last_error(ctx));
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode), "the link stays a link");
    char head[32];
    int hn = snprintf(head, sizeof head, "P6\n%d %d\n255\n", W, H);
    uint8_t want[sizeof head + sizeof px];
    memcpy(want, head, (size_t)hn);
    memcpy(want + hn, px, sizeof px);
    CHECK(same_file(real, want, (size_t)hn + sizeof px), "the link's target holds the image");
    CHECK(access(stale, F_OK) != 0, "the stale temp file was removed");
    CHECK(count_tmp(g_dir) == 0, "no temporary file");
    unlink(fifo);
}

static void test_stale(ert_context *ctx) {
    uint8_t a[256];
    fill(a, sizeof a);
    char p[512], stale[3][512], other[512], held[512];
    snprintf(p, sizeof p, "%s", at("ckpt.ert"));
    snprintf(stale[0], sizeof stale[0], "%s", at("ckpt.ert.tmp.Ab12Cd"));
    snprintf(stale[1], sizeof stale[1], "%s", at("ckpt.ert.tmp.zzzzzz"));
    snprintf(stale[2], sizeof stale[2], "%s", at("ckpt.ert.tmp.000000"));
    snprintf(other, sizeof other, "%s", at("other.ert.tmp.Ab12Cd"));
    snprintf(held, sizeof held, "%s", at("ckpt.ert.tmp.HELD00"));
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(stale[i], "wb");
        CHECK(f && fwrite(a, 1, 100, f) == 100 && fclose(f) == 0, "stale file %d", i);
    }
    FILE *f = fopen(other, "wb");
    CHECK(f && fclose(f) == 0, "other target's temp file");
    /* a live writer's file: an flock held on its own open file description */
    int hfd = open(held, O_CREAT | O_WRONLY, 0600);
    CHECK(hfd >= 0 && flock(hfd, LOCK_EX) == 0, "held temp file");
    CHECK(ert_file_write_atomic(ctx, p, a, sizeof a) == ERT_OK, "save: %s", ert_last_error(ctx));
    for (int i = 0; i < 3; i++) CHECK(access(stale[i], F_OK) != 0, "stale %s removed", stale[i]);
    CHECK(access(other, F_OK) == 0, "another target's temp file kept");
    CHECK(access(held, F_OK) == 0, "a live writer's temp file kept");
    CHECK(same_file(p, a, sizeof a), "saved");
    close(hfd);
    /* once its writer is gone, the next save removes it */
    CHECK(ert_file_write_atomic(ctx, p, a, 7) == ERT_OK, "save 2");
    CHECK(access(held, F_OK) != 0, "released temp file removed");
    unlink(other);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ert_file_write_XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL, "mkdtemp");
    ert_test_rng_init(&g_rng, "file_write");
    ert_context *ctx = NULL;
    ert_context_options co = {0};
    CHECK(ert_context_create(&co, &ctx) == ERT_OK, "context");
    test_basic(ctx);
    test_not_regular(ctx);
    test_symlinks(ctx);
    test_stale(ctx);
    test_image_writer(ctx);
    ert_context_free(ctx);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", g_dir);
    return ert_test_finish("file_write");
}
