/*
 * The one atomic file write (edgert.h: ert_file_writer_*, ert_file_write_atomic),
 * used by every writer: .ert models and checkpoints, ONNX export, the CLI's
 * .npy outputs.
 *
 * Steps of a save of PATH:
 *   1. Resolve PATH: follow symlinks (at most 40, relative ones against the
 *      link's own folder) to the real file R; the link itself is never
 *      replaced. If R exists and is not a regular file (character or block
 *      device, FIFO, socket, directory), refuse with ERT_E_IO naming what it
 *      is: nothing is opened, created or removed.
 *   2. In R's folder, remove stale temporary files of R ("R.tmp.XXXXXX") that
 *      a killed writer left: only those no live writer holds (each writer
 *      keeps an exclusive flock on its file, which the kernel drops when the
 *      process dies).
 *   3. Create the new file unnamed (O_TMPFILE) where the file system supports
 *      it; else as R.tmp.XXXXXX (mkstemp). Either way flock'd. The mode is
 *      R's if R exists, else 0644 (O_TMPFILE: less the umask).
 *   4. The caller writes (append, or at an offset to patch a header).
 *   5. Commit: fsync the file; an unnamed file is linked in as R.tmp.XXXXXX
 *      (linkat through /proc/self/fd); rename over R (atomic in one folder);
 *      fsync the folder. A crash at any point leaves R as it was or as the
 *      new complete file, never a mix; an abort or failure removes the
 *      temporary file.
 * Limits: a concurrent save of the same R is not serialised (the last rename
 * wins); a file system without flock makes step 2 keep every candidate.
 */
/* O_TMPFILE (Linux) is declared only with _GNU_SOURCE; without it the
 * named-temporary-file path is used. */
#define _GNU_SOURCE
#include "ert_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

#define MAX_LINKS 40
#define TMP_TAG ".tmp."
#define TMP_SUFFIX_LEN 6 /* mkstemp's XXXXXX */

struct ert_file_writer {
    ert_context *ctx;
    char *path;      /* as the caller gave it, for messages */
    char *dir;       /* folder of the real file */
    char *base;      /* name of the real file in dir */
    char *tmp;       /* named temporary file (dir/base.tmp.XXXXXX), NULL while unnamed */
    int fd, dirfd;
    bool unnamed;    /* O_TMPFILE */
    bool failed;     /* a write failed: commit refuses */
};

static const char *kind_of(mode_t m) {
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISDIR(m)) return "a directory";
    return "not a regular file";
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* Split p into folder and name (both malloc'd). "x" -> ".", "x"; "/x" -> "/", "x". */
static bool split_path(const char *p, char **dir, char **base) {
    const char *slash = strrchr(p, '/');
    if (!slash) {
        *dir = dup_n(".", 1);
        *base = dup_n(p, strlen(p));
    } else {
        *dir = slash == p ? dup_n("/", 1) : dup_n(p, (size_t)(slash - p));
        *base = dup_n(slash + 1, strlen(slash + 1));
    }
    if (*dir && *base) return true;
    free(*dir);
    free(*base);
    return false;
}

/* Follow symlinks from path to the real file; *real is malloc'd. *st gets its
 * lstat (st_mode 0 when it does not exist yet). */
static ert_status resolve(ert_context *ctx, const char *path, char **real, struct stat *st) {
    char *cur = dup_n(path, strlen(path));
    if (!cur) return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    for (int hop = 0;; hop++) {
        if (lstat(cur, st) != 0) {
            int e = errno;
            if (e == ENOENT) {
                memset(st, 0, sizeof *st);
                *real = cur;
                return ERT_OK;
            }
            ert_status r = ert_set_error(ctx, ERT_E_IO, "cannot write '%s': %s", path, strerror(e));
            free(cur);
            return r;
        }
        if (!S_ISLNK(st->st_mode)) {
            *real = cur;
            return ERT_OK;
        }
        if (hop == MAX_LINKS) {
            free(cur);
            return ert_set_error(ctx, ERT_E_IO, "cannot write '%s': more than %d symbolic links", path, MAX_LINKS);
        }
        char buf[PATH_MAX];
        ssize_t n = readlink(cur, buf, sizeof buf - 1);
        if (n < 0) {
            ert_status r = ert_set_error(ctx, ERT_E_IO, "cannot read link '%s': %s", cur, strerror(errno));
            free(cur);
            return r;
        }
        buf[n] = 0;
        char *next;
        const char *slash = strrchr(cur, '/');
        if (buf[0] == '/' || !slash) {
            next = dup_n(buf, (size_t)n);
        } else { /* relative to the link's own folder */
            size_t dl = (size_t)(slash - cur) + 1;
            next = malloc(dl + (size_t)n + 1);
            if (next) {
                memcpy(next, cur, dl);
                memcpy(next + dl, buf, (size_t)n + 1);
            }
        }
        free(cur);
        if (!next) return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
        cur = next;
    }
}

/* Step 2: remove dir/base.tmp.XXXXXX files that no live writer holds. */
static void remove_stale(int dirfd, const char *base) {
    int fd2 = dup(dirfd);
    if (fd2 < 0) return;
    DIR *d = fdopendir(fd2);
    if (!d) {
        close(fd2);
        return;
    }
    size_t bl = strlen(base), tl = strlen(TMP_TAG);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strlen(n) != bl + tl + TMP_SUFFIX_LEN || memcmp(n, base, bl) != 0 || memcmp(n + bl, TMP_TAG, tl) != 0)
            continue;
        int fd = openat(dirfd, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) continue;
        struct stat sb;
        /* a regular file whose writer is gone (its flock went with it) */
        if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0) unlinkat(dirfd, n, 0);
        close(fd);
    }
    closedir(d);
}

/* A name dir/base.tmp.XXXXXX for linking the unnamed file: XXXXXX from the
 * pid, the fd, the clock and the attempt (no global state). */
static void tmp_name(char *out, size_t cap, const char *base, int fd, int attempt) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t h = 1469598103934665603ull;
    uint64_t v[4] = {(uint64_t)getpid(), (uint64_t)fd, (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30), (uint64_t)attempt};
    for (int i = 0; i < 4; i++) h = (h ^ v[i]) * 1099511628211ull;
    char sfx[TMP_SUFFIX_LEN + 1];
    for (int i = 0; i < TMP_SUFFIX_LEN; i++, h /= 62) sfx[i] = al[h % 62];
    sfx[TMP_SUFFIX_LEN] = 0;
    snprintf(out, cap, "%s" TMP_TAG "%s", base, sfx);
}

void ert_file_writer_abort(ert_file_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) unlinkat(w->dirfd, w->tmp, 0);
    if (w->dirfd >= 0) close(w->dirfd);
    free(w->path);
    free(w->dir);
    free(w->base);
    free(w->tmp);
    free(w);
}

static ert_status fail_errno(ert_file_writer *w, const char *what, const char *name, int e) {
    w->failed = true;
    return ert_set_error(w->ctx, ERT_E_IO, "%s '%s': %s", what, name, strerror(e));
}

ert_status ert_file_writer_open(ert_context *ctx, const char *path, ert_file_writer **out) {
    if (!path || !*path || !out) return ert_set_error(ctx, ERT_E_ARG, "ert_file_writer_open: empty path or NULL out");
    char *real = NULL;
    struct stat st;
    ert_status r = resolve(ctx, path, &real, &st);
    if (r) return r;
    if (st.st_mode != 0 && !S_ISREG(st.st_mode)) {
        r = strcmp(real, path) == 0
                ? ert_set_error(ctx, ERT_E_IO, "'%s' is %s, not a regular file: refusing to replace it", path,
                                kind_of(st.st_mode))
                : ert_set_error(ctx, ERT_E_IO, "'%s' (a link to '%s') is %s, not a regular file: refusing to replace it",
                                path, real, kind_of(st.st_mode));
        free(real);
        return r;
    }
    ert_file_writer *w = calloc(1, sizeof *w);
    if (!w) {
        free(real);
        return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    }
    w->ctx = ctx;
    w->fd = w->dirfd = -1;
    w->path = dup_n(path, strlen(path));
    bool ok = w->path && split_path(real, &w->dir, &w->base);
    free(real);
    if (!ok) {
        ert_file_writer_abort(w);
        return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
    }
    if (!*w->base) {
        ert_file_writer_abort(w);
        return ert_set_error(ctx, ERT_E_IO, "'%s' names a directory, not a file", path);
    }
    w->dirfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->dirfd < 0) {
        r = ert_set_error(ctx, ERT_E_IO, "cannot write '%s': folder '%s': %s", path, w->dir, strerror(errno));
        ert_file_writer_abort(w);
        return r;
    }
    remove_stale(w->dirfd, w->base);
    mode_t mode = st.st_mode ? (st.st_mode & 07777) : 0644;
#ifdef O_TMPFILE
    /* commit names the file through /proc/self/fd: without /proc, a named one */
    if (access("/proc/self/fd", X_OK) == 0) w->fd = openat(w->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
    if (w->fd >= 0) {
        w->unnamed = true;
        /* an existing file's mode exactly (O_TMPFILE applied the umask) */
        if (st.st_mode && fchmod(w->fd, mode) != 0) {
            r = ert_set_error(ctx, ERT_E_IO, "cannot write '%s': fchmod: %s", path, strerror(errno));
            ert_file_writer_abort(w);
            return r;
        }
    }
#endif
    if (w->fd < 0) { /* no O_TMPFILE here: a named temporary file */
        size_t n = strlen(w->dir) + strlen(w->base) + sizeof "/" TMP_TAG "XXXXXX";
        char *t = malloc(n);
        if (!t) {
            ert_file_writer_abort(w);
            return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
        }
        snprintf(t, n, "%s/%s" TMP_TAG "XXXXXX", w->dir, w->base);
        w->fd = mkstemp(t);
        if (w->fd >= 0) (void)fcntl(w->fd, F_SETFD, FD_CLOEXEC);
        if (w->fd < 0) {
            r = ert_set_error(ctx, ERT_E_IO, "cannot create temporary file '%s': %s", t, strerror(errno));
            free(t);
            ert_file_writer_abort(w);
            return r;
        }
        w->tmp = dup_n(t + strlen(w->dir) + 1, strlen(t + strlen(w->dir) + 1));
        free(t);
        if (!w->tmp) { /* cannot name it for removal: remove it now */
            ert_file_writer_abort(w);
            return ert_set_error(ctx, ERT_E_NOMEM, "out of memory");
        }
        /* mkstemp makes 0600: the replaced file's mode, else 0644 */
        if (fchmod(w->fd, mode) != 0) {
            r = ert_set_error(ctx, ERT_E_IO, "cannot write '%s': fchmod: %s", path, strerror(errno));
            ert_file_writer_abort(w);
            return r;
        }
    }
    /* held until close: marks the file as a live writer's (step 2) */
    (void)flock(w->fd, LOCK_EX | LOCK_NB);
    *out = w;
    return ERT_OK;
}

ert_status ert_file_writer_write(ert_file_writer *w, const void *data, size_t n) {
    if (!w || (n && !data)) return ERT_E_ARG;
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t k = write(w->fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return fail_errno(w, "cannot write", w->path, k < 0 ? errno : EIO);
        p += k;
        n -= (size_t)k;
    }
    return ERT_OK;
}

ert_status ert_file_writer_write_at(ert_file_writer *w, uint64_t offset, const void *data, size_t n) {
    if (!w || (n && !data) || offset > (uint64_t)INT64_MAX) return ERT_E_ARG;
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t k = pwrite(w->fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n, (off_t)offset);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return fail_errno(w, "cannot write", w->path, k < 0 ? errno : EIO);
        p += k;
        n -= (size_t)k;
        offset += (uint64_t)k;
    }
    return ERT_OK;
}

ert_status ert_file_writer_commit(ert_file_writer *w) {
    if (!w) return ERT_E_ARG;
    ert_status r = ERT_OK;
    if (w->failed) r = ert_set_error(w->ctx, ERT_E_IO, "'%s' not written: an earlier write failed", w->path);
    else if (fsync(w->fd) != 0) r = fail_errno(w, "cannot write (fsync)", w->path, errno);
    if (r == ERT_OK && w->unnamed) {
        char proc[64], name[NAME_MAX + 1];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", w->fd);
        bool linked = false;
        int e = 0;
        for (int attempt = 0; attempt < 100 && !linked; attempt++) {
            tmp_name(name, sizeof name, w->base, w->fd, attempt);
            if (linkat(AT_FDCWD, proc, w->dirfd, name, AT_SYMLINK_FOLLOW) == 0) linked = true;
            else if ((e = errno) != EEXIST) break;
        }
        if (linked) w->tmp = dup_n(name, strlen(name));
        if (!linked) r = fail_errno(w, "cannot write (link)", w->path, e);
        else if (!w->tmp) { /* cannot remember the name: remove it now */
            unlinkat(w->dirfd, name, 0);
            r = ert_set_error(w->ctx, ERT_E_NOMEM, "out of memory");
        }
    }
    if (r == ERT_OK && renameat(w->dirfd, w->tmp, w->dirfd, w->base) != 0)
        r = fail_errno(w, "cannot replace", w->path, errno);
    if (r == ERT_OK) {
        free(w->tmp); /* renamed: nothing left to remove */
        w->tmp = NULL;
        /* make the rename durable; some file systems refuse fsync on a folder */
        if (fsync(w->dirfd) != 0 && errno != EINVAL)
            r = ert_set_error(w->ctx, ERT_E_IO, "'%s' written, but fsync of folder '%s' failed (the rename may not be durable): %s",
                              w->path, w->dir, strerror(errno));
    }
    ert_file_writer_abort(w);
    return r;
}

ert_status ert_file_open_read(ert_context *ctx, const char *path, int *fd, uint64_t *size) {
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) return ert_set_error(ctx, ERT_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    ert_status r = ERT_OK;
    if (fstat(*fd, &sb) != 0) r = ert_set_error(ctx, ERT_E_IO, "cannot open '%s': %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode) || sb.st_size < 0)
        r = ert_set_error(ctx, ERT_E_IO, "'%s' is not a regular file (%s)", path, kind_of(sb.st_mode));
    else if (fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK) != 0)
        r = ert_set_error(ctx, ERT_E_IO, "cannot open '%s': %s", path, strerror(errno));
    if (r != ERT_OK) {
        close(*fd);
        *fd = -1;
        return r;
    }
    *size = (uint64_t)sb.st_size;
    return ERT_OK;
}

ert_status ert_file_write_atomic(ert_context *ctx, const char *path, const void *data, size_t n) {
    ert_file_writer *w = NULL;
    ert_status r = ert_file_writer_open(ctx, path, &w);
    if (r) return r;
    r = ert_file_writer_write(w, data, n);
    if (r) {
        ert_file_writer_abort(w);
        return r;
    }
    return ert_file_writer_commit(w);
}
