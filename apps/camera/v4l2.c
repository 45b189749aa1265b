/* V4L2 capture: open -> QUERYCAP -> ENUM_FMT (pick MJPEG or YUYV) -> S_FMT ->
 * S_PARM (fps, best effort) -> REQBUFS (mmap ring) -> QUERYBUF + mmap + QBUF
 * each -> STREAMON; per frame: select with a timeout -> DQBUF; the buffer
 * goes back (QBUF) when the next frame is asked for. Every system call goes
 * through a cam_v4l2_sys table so the tests drive this code against a fake
 * device (tests/camera/test_camera_source.c).
 *
 * Known limits: single-planar capture only (V4L2_BUF_TYPE_VIDEO_CAPTURE);
 * not yet tried on a real camera (see apps/camera/README.md). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/videodev2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <unistd.h>

#define CAM_V4L2_MAX_BUFS 16

struct cam_v4l2 {
    const cam_v4l2_sys *sys;
    int fd;
    char path[128];
    char desc[256];
    uint32_t pixfmt;
    int width, height;
    size_t stride;
    int n_bufs;
    void *map[CAM_V4L2_MAX_BUFS];
    size_t map_len[CAM_V4L2_MAX_BUFS];
    int held;          /* index of the buffer the caller has, or -1 */
    int streaming;
    int have_bufs;     /* REQBUFS succeeded: free them with count 0 on close */
    int timeout_ms;
    const volatile sig_atomic_t *stop;
};

static int sys_open(const char *p, int fl) { return open(p, fl); }
static int sys_ioctl(int fd, unsigned long req, void *arg) { return ioctl(fd, req, arg); }
static void *sys_mmap(void *a, size_t l, int pr, int fl, int fd, off_t off) { return mmap(a, l, pr, fl, fd, off); }

static const cam_v4l2_sys real_sys = {
    .open = sys_open, .close = close, .ioctl = sys_ioctl, .mmap = sys_mmap, .munmap = munmap, .select = select,
};

const cam_v4l2_sys *cam_v4l2_sys_default(void) { return &real_sys; }

static cam_status fail(char *err, size_t errlen, cam_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return st;
}

/* ioctl, retried on EINTR as the V4L2 docs ask. */
static int xioctl(cam_v4l2 *v, unsigned long req, void *arg) {
    int r;
    do r = v->sys->ioctl(v->fd, req, arg);
    while (r < 0 && errno == EINTR);
    return r;
}

static void fourcc_str(uint32_t f, char out[5]) {
    for (int i = 0; i < 4; i++) {
        char c = (char)((f >> (8 * i)) & 0xFF);
        out[i] = (c >= 32 && c < 127) ? c : '?';
    }
    out[4] = 0;
}

/* errno of a failed call while streaming -> status: ENODEV/EIO/ENXIO mean the
 * camera went away (USB unplug), the rest are I/O errors. */
static cam_status gone(char *err, size_t errlen, const cam_v4l2 *v, const char *what, int e) {
    if (e == ENODEV || e == EIO || e == ENXIO)
        return fail(err, errlen, CAM_E_NODEV, "%s: device disconnected (%s: %s)", v->path, what, strerror(e));
    return fail(err, errlen, CAM_E_IO, "%s: %s: %s", v->path, what, strerror(e));
}

cam_status cam_v4l2_open(const char *path, const cam_source_options *o, cam_v4l2 **out,
                         char *err, size_t errlen) {
    *out = NULL;
    cam_v4l2 *v = calloc(1, sizeof *v);
    if (!v) return fail(err, errlen, CAM_E_NOMEM, "out of memory");
    v->sys = o->sys ? o->sys : &real_sys;
    v->fd = -1;
    v->held = -1;
    v->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 2000;
    v->stop = o->stop;
    snprintf(v->path, sizeof v->path, "%s", path);
    /* Options after '?' in the path: v4l2:/dev/video0?fmt=yuyv&w=1280&h=720&fps=30 */
    int want_w = o->width > 0 ? o->width : 640, want_h = o->height > 0 ? o->height : 480;
    int fps = o->fps;
    const char *fmt = o->v4l2_format;
    char fmtbuf[16] = "";
    char *q = strchr(v->path, '?');
    if (q) {
        *q++ = 0;
        for (char *tok = strtok(q, "&"); tok; tok = strtok(NULL, "&")) {
            if (strncmp(tok, "w=", 2) == 0) want_w = atoi(tok + 2);
            else if (strncmp(tok, "h=", 2) == 0) want_h = atoi(tok + 2);
            else if (strncmp(tok, "fps=", 4) == 0) fps = atoi(tok + 4);
            else if (strncmp(tok, "fmt=", 4) == 0) { snprintf(fmtbuf, sizeof fmtbuf, "%s", tok + 4); fmt = fmtbuf; }
        }
    }
    cam_status st = CAM_OK;
    uint32_t want = 0; /* 0: MJPEG, else YUYV */
    if (fmt && strcmp(fmt, "mjpeg") == 0) want = V4L2_PIX_FMT_MJPEG;
    else if (fmt && strcmp(fmt, "yuyv") == 0) want = V4L2_PIX_FMT_YUYV;
    else if (fmt && *fmt && strcmp(fmt, "auto") != 0) {
        st = fail(err, errlen, CAM_E_ARG, "v4l2 format '%s': use mjpeg, yuyv or auto", fmt);
        goto out;
    }

    v->fd = v->sys->open(v->path, O_RDWR | O_NONBLOCK);
    if (v->fd >= FD_SETSIZE) { /* select() cannot watch it: FD_SET would write past the set */
        st = fail(err, errlen, CAM_E_IO, "%s: fd %d >= FD_SETSIZE (too many open files)", v->path, v->fd);
        goto out;
    }
    if (v->fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENODEV || e == ENXIO)
            st = fail(err, errlen, CAM_E_NODEV, "%s: no such camera (%s); is it plugged in? (ls /dev/video*)", v->path, strerror(e));
        else if (e == EBUSY)
            st = fail(err, errlen, CAM_E_BUSY, "%s: camera busy: another program is using it", v->path);
        else if (e == EACCES || e == EPERM)
            st = fail(err, errlen, CAM_E_IO, "%s: permission denied (add the user to group 'video')", v->path);
        else
            st = fail(err, errlen, CAM_E_IO, "%s: open: %s", v->path, strerror(e));
        goto out;
    }

    struct v4l2_capability cap;
    memset(&cap, 0, sizeof cap);
    if (xioctl(v, VIDIOC_QUERYCAP, &cap) < 0) {
        st = fail(err, errlen, CAM_E_UNSUPPORTED, "%s: not a V4L2 device (VIDIOC_QUERYCAP: %s)", v->path, strerror(errno));
        goto out;
    }
    uint32_t caps = (cap.capabilities & V4L2_CAP_DEVICE_CAPS) ? cap.device_caps : cap.capabilities;
    if (!(caps & V4L2_CAP_VIDEO_CAPTURE) || !(caps & V4L2_CAP_STREAMING)) {
        st = fail(err, errlen, CAM_E_UNSUPPORTED, "%s (%.32s): no single-planar video capture with streaming I/O",
                  v->path, (const char *)cap.card);
        goto out;
    }

    /* Formats the device offers; MJPEG preferred (less USB bandwidth, and the
     * decode goes straight into the input buffer), YUYV otherwise. */
    int has_mjpeg = 0, has_yuyv = 0;
    char offered[128] = "";
    for (uint32_t i = 0; i < 64; i++) {
        struct v4l2_fmtdesc fd;
        memset(&fd, 0, sizeof fd);
        fd.index = i;
        fd.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        if (xioctl(v, VIDIOC_ENUM_FMT, &fd) < 0) break;
        has_mjpeg |= fd.pixelformat == V4L2_PIX_FMT_MJPEG || fd.pixelformat == V4L2_PIX_FMT_JPEG;
        has_yuyv |= fd.pixelformat == V4L2_PIX_FMT_YUYV;
        char cc[5];
        fourcc_str(fd.pixelformat, cc);
        size_t l = strlen(offered);
        snprintf(offered + l, sizeof offered - l, "%s%s", l ? " " : "", cc);
    }
    uint32_t pick = 0;
    if (want == V4L2_PIX_FMT_MJPEG) pick = has_mjpeg ? V4L2_PIX_FMT_MJPEG : 0;
    else if (want == V4L2_PIX_FMT_YUYV) pick = has_yuyv ? V4L2_PIX_FMT_YUYV : 0;
    else pick = has_mjpeg ? V4L2_PIX_FMT_MJPEG : has_yuyv ? V4L2_PIX_FMT_YUYV : 0;
    if (!pick) {
        st = fail(err, errlen, CAM_E_UNSUPPORTED, "%s: no %s format (device offers: %s)", v->path,
                  want == V4L2_PIX_FMT_YUYV ? "YUYV" : want ? "MJPEG" : "MJPEG or YUYV", offered[0] ? offered : "none");
        goto out;
    }

    struct v4l2_format f;
    memset(&f, 0, sizeof f);
    f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    f.fmt.pix.width = (uint32_t)want_w;
    f.fmt.pix.height = (uint32_t)want_h;
    f.fmt.pix.pixelformat = pick;
    f.fmt.pix.field = V4L2_FIELD_ANY;
    if (xioctl(v, VIDIOC_S_FMT, &f) < 0) {
        st = fail(err, errlen, errno == EBUSY ? CAM_E_BUSY : CAM_E_UNSUPPORTED, "%s: VIDIOC_S_FMT: %s", v->path, strerror(errno));
        goto out;
    }
    /* The driver may change what it cannot do: the size silently (we use
     * what it gives), the format too (refused: we cannot decode others). */
    if (f.fmt.pix.pixelformat != pick && !(pick == V4L2_PIX_FMT_MJPEG && f.fmt.pix.pixelformat == V4L2_PIX_FMT_JPEG)) {
        char a[5], b[5];
        fourcc_str(pick, a);
        fourcc_str(f.fmt.pix.pixelformat, b);
        st = fail(err, errlen, CAM_E_UNSUPPORTED, "%s: asked for %s, driver set %s", v->path, a, b);
        goto out;
    }
    if (f.fmt.pix.width == 0 || f.fmt.pix.height == 0 || f.fmt.pix.width > 16384 || f.fmt.pix.height > 16384) {
        st = fail(err, errlen, CAM_E_UNSUPPORTED, "%s: driver set size %ux%u", v->path, f.fmt.pix.width, f.fmt.pix.height);
        goto out;
    }
    v->pixfmt = pick;
    v->width = (int)f.fmt.pix.width;
    v->height = (int)f.fmt.pix.height;
    v->stride = f.fmt.pix.bytesperline ? f.fmt.pix.bytesperline : (size_t)v->width * 2;
    if (pick == V4L2_PIX_FMT_YUYV && v->stride < (size_t)v->width * 2) {
        st = fail(err, errlen, CAM_E_UNSUPPORTED, "%s: bytesperline %zu < 2*width", v->path, v->stride);
        goto out;
    }

    if (fps > 0) { /* best effort: many drivers ignore or round it */
        struct v4l2_streamparm parm;
        memset(&parm, 0, sizeof parm);
        parm.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        parm.parm.capture.timeperframe.numerator = 1;
        parm.parm.capture.timeperframe.denominator = (uint32_t)fps;
        (void)xioctl(v, VIDIOC_S_PARM, &parm);
    }

    struct v4l2_requestbuffers rb;
    memset(&rb, 0, sizeof rb);
    rb.count = (uint32_t)(o->n_buffers > 0 ? o->n_buffers : 4);
    if (rb.count > CAM_V4L2_MAX_BUFS) rb.count = CAM_V4L2_MAX_BUFS;
    rb.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    rb.memory = V4L2_MEMORY_MMAP;
    if (xioctl(v, VIDIOC_REQBUFS, &rb) < 0) {
        st = fail(err, errlen, errno == EBUSY ? CAM_E_BUSY : CAM_E_UNSUPPORTED, "%s: VIDIOC_REQBUFS (mmap): %s%s",
                  v->path, strerror(errno), errno == EBUSY ? " (another program is streaming)" : "");
        goto out;
    }
    v->have_bufs = 1;
    if (rb.count < 2 || rb.count > CAM_V4L2_MAX_BUFS) {
        st = fail(err, errlen, CAM_E_UNSUPPORTED, "%s: driver gave %u buffers (need 2..%d)", v->path, rb.count, CAM_V4L2_MAX_BUFS);
        goto out;
    }
    for (uint32_t i = 0; i < rb.count; i++) {
        struct v4l2_buffer b;
        memset(&b, 0, sizeof b);
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        b.memory = V4L2_MEMORY_MMAP;
        b.index = i;
        if (xioctl(v, VIDIOC_QUERYBUF, &b) < 0) {
            st = gone(err, errlen, v, "VIDIOC_QUERYBUF", errno);
            goto out;
        }
        void *m = v->sys->mmap(NULL, b.length, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, (off_t)b.m.offset);
        if (m == MAP_FAILED) {
            st = fail(err, errlen, CAM_E_IO, "%s: mmap of buffer %u: %s", v->path, i, strerror(errno));
            goto out;
        }
        v->map[i] = m;
        v->map_len[i] = b.length;
        v->n_bufs = (int)i + 1;
        if (xioctl(v, VIDIOC_QBUF, &b) < 0) {
            st = gone(err, errlen, v, "VIDIOC_QBUF", errno);
            goto out;
        }
    }
    enum v4l2_buf_type type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    if (xioctl(v, VIDIOC_STREAMON, &type) < 0) {
        st = errno == EBUSY ? fail(err, errlen, CAM_E_BUSY, "%s: VIDIOC_STREAMON: busy", v->path)
                            : gone(err, errlen, v, "VIDIOC_STREAMON", errno);
        goto out;
    }
    v->streaming = 1;
    char cc[5];
    fourcc_str(pick, cc);
    snprintf(v->desc, sizeof v->desc, "v4l2 %s (%.32s) %s %dx%d, %d mmap buffers", v->path,
             (const char *)cap.card, cc, v->width, v->height, v->n_bufs);
out:
    if (st != CAM_OK) {
        cam_v4l2_close(v);
        return st;
    }
    *out = v;
    return CAM_OK;
}

cam_status cam_v4l2_next(cam_v4l2 *v, cam_frame *f, char *err, size_t errlen) {
    if (v->held >= 0) { /* the caller is done with the previous frame */
        struct v4l2_buffer b;
        memset(&b, 0, sizeof b);
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        b.memory = V4L2_MEMORY_MMAP;
        b.index = (uint32_t)v->held;
        v->held = -1;
        if (xioctl(v, VIDIOC_QBUF, &b) < 0) return gone(err, errlen, v, "VIDIOC_QBUF", errno);
    }
    int waited_ms = 0;
    for (;;) {
        if (v->stop && *v->stop) return fail(err, errlen, CAM_EOF, "stopped");
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(v->fd, &rd);
        /* with a stop flag, wait in 100 ms slices so a stop is seen in time */
        int slice = v->stop && v->timeout_ms - waited_ms > 100 ? 100 : v->timeout_ms - waited_ms;
        struct timeval tv = {slice / 1000, (slice % 1000) * 1000};
        int r = v->sys->select(v->fd + 1, &rd, NULL, NULL, &tv);
        if (r < 0) {
            if (errno == EINTR) continue;
            return gone(err, errlen, v, "select", errno);
        }
        if (r == 0 && (waited_ms += slice) < v->timeout_ms) continue;
        if (r == 0)
            return fail(err, errlen, CAM_TIMEOUT, "%s: no frame within %d ms", v->path, v->timeout_ms);
        struct v4l2_buffer b;
        memset(&b, 0, sizeof b);
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        b.memory = V4L2_MEMORY_MMAP;
        if (xioctl(v, VIDIOC_DQBUF, &b) < 0) {
            if (errno == EAGAIN) continue;
            return gone(err, errlen, v, "VIDIOC_DQBUF", errno);
        }
        if (b.index >= (uint32_t)v->n_bufs) /* a driver bug; never index past the ring */
            return fail(err, errlen, CAM_E_IO, "%s: driver returned buffer %u of %d", v->path, b.index, v->n_bufs);
        v->held = (int)b.index;
        memset(f, 0, sizeof *f);
        f->data = v->map[b.index];
        f->bytes = b.bytesused <= v->map_len[b.index] ? b.bytesused : v->map_len[b.index];
        f->name = "";
        if (v->pixfmt == V4L2_PIX_FMT_YUYV) {
            f->kind = CAM_FRAME_YUYV;
            f->width = v->width;
            f->height = v->height;
            f->stride = v->stride;
            if (b.flags & V4L2_BUF_FLAG_ERROR || f->bytes < v->stride * (size_t)(v->height - 1) + (size_t)v->width * 2) {
                /* Short or flagged YUYV frame: corrupt; the pipeline counts
                 * it (bytes 0 marks it). */
                f->bytes = 0;
            }
        } else {
            f->kind = CAM_FRAME_JPEG;
            if (b.flags & V4L2_BUF_FLAG_ERROR) f->bytes = 0;
        }
        return CAM_OK;
    }
}

const char *cam_v4l2_describe(const cam_v4l2 *v) { return v->desc; }

void cam_v4l2_close(cam_v4l2 *v) {
    if (!v) return;
    if (v->streaming) {
        enum v4l2_buf_type type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        (void)xioctl(v, VIDIOC_STREAMOFF, &type);
    }
    for (int i = 0; i < v->n_bufs; i++)
        if (v->map[i]) v->sys->munmap(v->map[i], v->map_len[i]);
    if (v->have_bufs) { /* free the driver's buffers */
        struct v4l2_requestbuffers rb;
        memset(&rb, 0, sizeof rb);
        rb.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        rb.memory = V4L2_MEMORY_MMAP;
        (void)xioctl(v, VIDIOC_REQBUFS, &rb);
    }
    if (v->fd >= 0) v->sys->close(v->fd);
    free(v);
}
