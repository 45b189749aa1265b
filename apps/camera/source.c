/* Frame sources: single image, folder, MJPEG stream (file or stdin); V4L2 is
 * in v4l2.c. See source.h. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "source.h"
#include "cli_util.h" /* cli_fopen_regular */
#include "edgert.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum { SRC_IMAGE, SRC_DIR, SRC_STREAM, SRC_V4L2 } src_kind;

struct cam_source {
    src_kind kind;
    char err[256];
    char desc[320];
    uint64_t seq;
    /* image / folder */
    char **files;
    int n_files, next_file;
    uint8_t *file_buf;   /* current file's bytes (or decoded PNM pixels) */
    char name[256];
    /* stream */
    int fd;
    int own_fd;
    int eof;
    uint8_t *buf;
    size_t cap, lo, hi, max_frame;
    uint64_t skipped;
    /* v4l2 */
    cam_v4l2 *v4l2;
    const volatile sig_atomic_t *stop;
};

const char *cam_status_str(cam_status s) {
    switch (s) {
    case CAM_OK: return "ok";
    case CAM_EOF: return "end of stream";
    case CAM_TIMEOUT: return "timeout";
    case CAM_E_ARG: return "bad argument";
    case CAM_E_IO: return "I/O error";
    case CAM_E_NODEV: return "no device";
    case CAM_E_BUSY: return "device busy";
    case CAM_E_UNSUPPORTED: return "unsupported";
    case CAM_E_NOMEM: return "out of memory";
    }
    return "?";
}

static cam_status fail(char *err, size_t errlen, cam_status st, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

static int has_ext(const char *name, const char *ext) {
    size_t n = strlen(name), e = strlen(ext);
    return n > e && strcasecmp(name + n - e, ext) == 0;
}

static int is_image_name(const char *name) {
    return has_ext(name, ".jpg") || has_ext(name, ".jpeg") || has_ext(name, ".ppm") || has_ext(name, ".pgm");
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static cam_status read_file(const char *path, uint8_t **data, size_t *n, char *err, size_t errlen) {
    /* a FIFO named like an image would block fopen() past SIGTERM */
    FILE *f = cli_fopen_regular(path);
    if (!f) return fail(err, errlen, CAM_E_IO, "%s: %s", path, cli_fopen_why(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size > ((uint64_t)1 << 31)) {
        fclose(f);
        return fail(err, errlen, CAM_E_IO, "%s: not a regular file of sane size", path);
    }
    size_t sz = (size_t)st.st_size;
    uint8_t *b = malloc(sz ? sz : 1);
    if (!b) { fclose(f); return fail(err, errlen, CAM_E_NOMEM, "%s: out of memory", path); }
    if (fread(b, 1, sz, f) != sz) {
        free(b);
        fclose(f);
        return fail(err, errlen, CAM_E_IO, "%s: read error", path);
    }
    fclose(f);
    *data = b;
    *n = sz;
    return CAM_OK;
}

cam_status cam_source_open(const char *spec, const cam_source_options *opts, cam_source **out,
                           char *err, size_t errlen) {
    cam_source_options o = {0};
    if (opts) o = *opts;
    if (!spec || !out) return fail(err, errlen, CAM_E_ARG, "no source given");
    *out = NULL;
    cam_source *s = calloc(1, sizeof *s);
    if (!s) return fail(err, errlen, CAM_E_NOMEM, "out of memory");
    s->fd = -1;
    s->stop = o.stop;
    cam_status st = CAM_OK;
    struct stat sb;
    if (strncmp(spec, "v4l2:", 5) == 0) {
        s->kind = SRC_V4L2;
        st = cam_v4l2_open(spec + 5, &o, &s->v4l2, err, errlen);
        if (st == CAM_OK) snprintf(s->desc, sizeof s->desc, "%s", cam_v4l2_describe(s->v4l2));
    } else if (strcmp(spec, "-") != 0 && stat(spec, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        s->kind = SRC_DIR;
        DIR *d = opendir(spec);
        if (!d) {
            st = fail(err, errlen, CAM_E_IO, "%s: %s", spec, strerror(errno));
        } else {
            struct dirent *e;
            int cap = 0;
            while (st == CAM_OK && (e = readdir(d)) != NULL) {
                if (!is_image_name(e->d_name)) continue;
                if (s->n_files == cap) {
                    cap = cap ? cap * 2 : 64;
                    char **nf = realloc(s->files, (size_t)cap * sizeof *nf);
                    if (!nf) { st = fail(err, errlen, CAM_E_NOMEM, "out of memory"); break; }
                    s->files = nf;
                }
                size_t len = strlen(spec) + strlen(e->d_name) + 2;
                char *p = malloc(len);
                if (!p) { st = fail(err, errlen, CAM_E_NOMEM, "out of memory"); break; }
                snprintf(p, len, "%s/%s", spec, e->d_name);
                struct stat es; /* images only: not a FIFO or folder named like one */
                if (stat(p, &es) != 0 || !S_ISREG(es.st_mode)) {
                    free(p);
                    continue;
                }
                s->files[s->n_files++] = p;
            }
            closedir(d);
            if (st == CAM_OK && s->n_files == 0)
                st = fail(err, errlen, CAM_E_IO, "%s: no .jpg/.jpeg/.ppm/.pgm files", spec);
            if (st == CAM_OK) qsort(s->files, (size_t)s->n_files, sizeof *s->files, cmp_str);
            snprintf(s->desc, sizeof s->desc, "folder %s (%d images)", spec, s->n_files);
        }
    } else if (strcmp(spec, "-") != 0 && is_image_name(spec)) {
        s->kind = SRC_IMAGE;
        s->files = calloc(1, sizeof *s->files);
        if (s->files) s->n_files = 1; /* close frees files[0], NULL or not */
        if (s->files) s->files[0] = strdup(spec);
        if (!s->files || !s->files[0]) st = fail(err, errlen, CAM_E_NOMEM, "out of memory");
        else if (access(spec, R_OK) != 0) st = fail(err, errlen, CAM_E_IO, "%s: %s", spec, strerror(errno));
        snprintf(s->desc, sizeof s->desc, "image %s", spec);
    } else {
        s->kind = SRC_STREAM;
        if (strcmp(spec, "-") == 0) {
            s->fd = 0;
            snprintf(s->desc, sizeof s->desc, "mjpeg stream on stdin");
        } else {
            /* With a stop flag (the app), a FIFO whose writer has not started
             * yet is opened without waiting for it: the poll below waits in
             * slices instead, so SIGTERM ends the run with its summary (a
             * blocking open ended it with "Interrupted system call"). Linux
             * reports no POLLHUP until a writer has come and gone. */
            s->fd = open(spec, O_RDONLY | (s->stop ? O_NONBLOCK : 0));
            if (s->fd >= 0 && s->stop && fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) & ~O_NONBLOCK) != 0)
                st = fail(err, errlen, CAM_E_IO, "%s: %s", spec, strerror(errno));
            s->own_fd = 1;
            if (s->fd < 0) st = fail(err, errlen, CAM_E_IO, "%s: %s", spec, strerror(errno));
            snprintf(s->desc, sizeof s->desc, "mjpeg stream %s", spec);
        }
        s->max_frame = o.max_frame_bytes ? o.max_frame_bytes : (size_t)32 << 20;
        s->cap = (size_t)1 << 20;
        s->buf = malloc(s->cap);
        if (!s->buf && st == CAM_OK) st = fail(err, errlen, CAM_E_NOMEM, "out of memory");
    }
    if (st != CAM_OK) {
        cam_source_close(s);
        return st;
    }
    *out = s;
    return CAM_OK;
}

static cam_status next_file(cam_source *s, cam_frame *f) {
    free(s->file_buf);
    s->file_buf = NULL;
    if (s->next_file >= s->n_files) return CAM_EOF;
    const char *path = s->files[s->next_file++];
    const char *base = strrchr(path, '/');
    snprintf(s->name, sizeof s->name, "%s", base ? base + 1 : path);
    memset(f, 0, sizeof *f);
    f->name = s->name;
    if (has_ext(path, ".ppm") || has_ext(path, ".pgm")) {
        int w, h, c;
        uint8_t *px;
        ert_context *ctx;
        if (ert_context_create(NULL, &ctx) != ERT_OK) return CAM_E_NOMEM;
        ert_status est = ert_image_read_pnm(ctx, path, &w, &h, &c, &px);
        if (est != ERT_OK) {
            snprintf(s->err, sizeof s->err, "%s", ert_last_error(ctx));
            ert_context_free(ctx);
            /* An unreadable image is a corrupt frame, like a bad JPEG: hand
             * out an empty JPEG frame the decoder refuses. */
            f->kind = CAM_FRAME_JPEG;
            f->data = (const uint8_t *)"";
            f->bytes = 0;
            f->seq = s->seq++;
            return CAM_OK;
        }
        ert_context_free(ctx);
        if (c == 1) { /* grey -> RGB, so one frame kind covers both */
            uint8_t *rgb = malloc((size_t)w * h * 3);
            if (!rgb) { ert_free(px); return CAM_E_NOMEM; }
            for (size_t i = 0; i < (size_t)w * h; i++) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = px[i];
            ert_free(px);
            px = rgb;
        } else {
            uint8_t *cp = malloc((size_t)w * h * 3);
            if (!cp) { ert_free(px); return CAM_E_NOMEM; }
            memcpy(cp, px, (size_t)w * h * 3);
            ert_free(px);
            px = cp;
        }
        s->file_buf = px;
        f->kind = CAM_FRAME_RGB;
        f->data = px;
        f->width = w;
        f->height = h;
        f->stride = (size_t)w * 3;
        f->bytes = f->stride * (size_t)h;
    } else {
        size_t n = 0;
        cam_status st = read_file(path, &s->file_buf, &n, s->err, sizeof s->err);
        if (st != CAM_OK) return st;
        f->kind = CAM_FRAME_JPEG;
        f->data = s->file_buf;
        f->bytes = n;
    }
    f->seq = s->seq++;
    return CAM_OK;
}

static cam_status next_stream(cam_source *s, cam_frame *f) {
    for (;;) {
        size_t start = 0, end = 0;
        int got = cam_mjpeg_split(s->buf + s->lo, s->hi - s->lo, s->eof, &start, &end);
        if (got) {
            memset(f, 0, sizeof *f);
            f->kind = CAM_FRAME_JPEG;
            f->data = s->buf + s->lo + start;
            f->bytes = end - start;
            f->seq = s->seq++;
            f->name = "";
            s->skipped += start;
            s->lo += end;
            return CAM_OK;
        }
        s->skipped += start;
        s->lo += start;
        if (s->eof) return CAM_EOF;
        if (s->hi - s->lo > s->max_frame) {
            /* Runaway "frame" (no EOI, no next SOI): hand it out as the
             * corrupt frame it is and go on after it. */
            memset(f, 0, sizeof *f);
            f->kind = CAM_FRAME_JPEG;
            f->data = s->buf + s->lo;
            f->bytes = s->hi - s->lo;
            f->seq = s->seq++;
            f->name = "";
            s->lo = s->hi;
            return CAM_OK;
        }
        /* Make room: move the unread tail down, grow if still full. */
        if (s->lo > 0) {
            memmove(s->buf, s->buf + s->lo, s->hi - s->lo);
            s->hi -= s->lo;
            s->lo = 0;
        }
        if (s->stop && *s->stop) {
            snprintf(s->err, sizeof s->err, "stopped");
            return CAM_EOF;
        }
        if (s->hi == s->cap) {
            size_t ncap = s->cap * 2;
            uint8_t *nb = realloc(s->buf, ncap);
            if (!nb) { snprintf(s->err, sizeof s->err, "out of memory"); return CAM_E_NOMEM; }
            s->buf = nb;
            s->cap = ncap;
        }
        if (s->stop) { /* wait in slices so a stop request is seen */
            struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
            int pr = poll(&pfd, 1, 100);
            if (pr == 0 || (pr < 0 && errno == EINTR)) continue;
        }
        ssize_t r = read(s->fd, s->buf + s->hi, s->cap - s->hi);
        if (r < 0) {
            if (errno == EINTR) continue;
            snprintf(s->err, sizeof s->err, "read: %s", strerror(errno));
            return CAM_E_IO;
        }
        if (r == 0) s->eof = 1;
        s->hi += (size_t)r;
    }
}

cam_status cam_source_next(cam_source *s, cam_frame *f) {
    if (!s || !f) return CAM_E_ARG;
    switch (s->kind) {
    case SRC_IMAGE:
    case SRC_DIR: return next_file(s, f);
    case SRC_STREAM: return next_stream(s, f);
    case SRC_V4L2: {
        cam_status st = cam_v4l2_next(s->v4l2, f, s->err, sizeof s->err);
        if (st == CAM_OK) f->seq = s->seq++;
        return st;
    }
    }
    return CAM_E_ARG;
}

const char *cam_source_error(const cam_source *s) { return s ? s->err : ""; }
const char *cam_source_describe(const cam_source *s) { return s ? s->desc : ""; }
uint64_t cam_source_skipped_bytes(const cam_source *s) { return s ? s->skipped : 0; }

void cam_source_close(cam_source *s) {
    if (!s) return;
    if (s->v4l2) cam_v4l2_close(s->v4l2);
    for (int i = 0; i < s->n_files; i++) free(s->files[i]);
    free(s->files);
    free(s->file_buf);
    free(s->buf);
    if (s->own_fd && s->fd >= 0) close(s->fd);
    free(s);
}
