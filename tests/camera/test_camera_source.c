/* apps/camera frame sources: V4L2 negotiation and streaming against a fake
 * device behind the cam_v4l2_sys table (incl. missing/busy device, no usable
 * format, driver changing the format, select timeout, device vanishing
 * mid-stream, every buffer mapped/unmapped once); the MJPEG splitter
 * (garbage, thumbnails in APP1, truncated frames, arbitrary chunking); the
 * stream, stdin, folder and single-image sources. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "testutil.h"
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/videodev2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ fake device */

#define FAKE_FD 42
#define FAKE_MAX_BUFS 8
static struct fake {
    int exists, busy;
    uint32_t formats[4];
    int n_formats;
    uint32_t force_format;        /* S_FMT answers with this format if nonzero */
    int max_w, max_h;
    int grant_bufs;
    int timeout;                  /* select never ready */
    int vanish_after;             /* DQBUF count after which the device is gone (0: never) */
    volatile sig_atomic_t *stop;  /* set to 1 at select call number stop_at (a signal mid-wait) */
    int stop_at, n_select;
    long max_wait_us;             /* longest select timeout asked for */
    /* state */
    int open_count, close_count, mmap_count, munmap_count, streaming;
    uint32_t fmt;
    int w, h;
    size_t size;
    int n_bufs;
    uint8_t *buf[FAKE_MAX_BUFS];
    int queued[FAKE_MAX_BUFS];
    int n_dq, next_dq, double_q;
    uint8_t jpeg[65536];
    size_t jpeg_len;
} fk;

static void fake_reset(void) {
    for (int i = 0; i < fk.n_bufs; i++) free(fk.buf[i]);
    uint8_t jpeg[65536];
    size_t jl = fk.jpeg_len;
    memcpy(jpeg, fk.jpeg, sizeof jpeg);
    memset(&fk, 0, sizeof fk);
    memcpy(fk.jpeg, jpeg, sizeof jpeg);
    fk.jpeg_len = jl;
    fk.exists = 1;
    fk.formats[0] = V4L2_PIX_FMT_YUYV;
    fk.formats[1] = V4L2_PIX_FMT_MJPEG;
    fk.n_formats = 2;
    fk.max_w = 1280;
    fk.max_h = 720;
    fk.grant_bufs = 4;
}

static int f_open(const char *p, int fl) {
    (void)p; (void)fl;
    if (!fk.exists) { errno = ENOENT; return -1; }
    if (fk.busy) { errno = EBUSY; return -1; }
    fk.open_count++;
    return FAKE_FD;
}
static int f_close(int fd) { CHECK(fd == FAKE_FD, "close fd %d", fd); fk.close_count++; return 0; }

static int f_ioctl(int fd, unsigned long req, void *arg) {
    CHECK(fd == FAKE_FD, "ioctl on fd %d", fd);
    if (fk.vanish_after && fk.n_dq >= fk.vanish_after && req != VIDIOC_STREAMOFF && req != VIDIOC_REQBUFS) {
        errno = ENODEV;
        return -1;
    }
    switch (req) {
    case VIDIOC_QUERYCAP: {
        struct v4l2_capability *c = arg;
        memset(c, 0, sizeof *c);
        strcpy((char *)c->card, "fake cam");
        c->capabilities = V4L2_CAP_VIDEO_CAPTURE | V4L2_CAP_STREAMING;
        return 0;
    }
    case VIDIOC_ENUM_FMT: {
        struct v4l2_fmtdesc *d = arg;
        if (d->index >= (uint32_t)fk.n_formats) { errno = EINVAL; return -1; }
        d->pixelformat = fk.formats[d->index];
        return 0;
    }
    case VIDIOC_S_FMT: {
        struct v4l2_format *f = arg;
        struct v4l2_pix_format *p = &f->fmt.pix;
        int ok = 0;
        for (int i = 0; i < fk.n_formats; i++) ok |= fk.formats[i] == p->pixelformat;
        if (!ok || fk.force_format) p->pixelformat = fk.force_format ? fk.force_format : fk.formats[0];
        if ((int)p->width > fk.max_w) p->width = (uint32_t)fk.max_w;
        if ((int)p->height > fk.max_h) p->height = (uint32_t)fk.max_h;
        p->bytesperline = p->pixelformat == V4L2_PIX_FMT_YUYV ? p->width * 2 : 0;
        p->sizeimage = p->width * p->height * 2;
        fk.fmt = p->pixelformat;
        fk.w = (int)p->width;
        fk.h = (int)p->height;
        fk.size = p->sizeimage;
        return 0;
    }
    case VIDIOC_S_PARM: return 0;
    case VIDIOC_REQBUFS: {
        struct v4l2_requestbuffers *r = arg;
        CHECK(!fk.streaming, "REQBUFS while streaming");
        for (int i = 0; i < fk.n_bufs; i++) { free(fk.buf[i]); fk.buf[i] = NULL; fk.queued[i] = 0; }
        fk.n_bufs = 0;
        if (r->count == 0) return 0;
        r->count = r->count < (uint32_t)fk.grant_bufs ? r->count : (uint32_t)fk.grant_bufs;
        for (uint32_t i = 0; i < r->count; i++) fk.buf[i] = calloc(1, fk.size);
        fk.n_bufs = (int)r->count;
        return 0;
    }
    case VIDIOC_QUERYBUF: {
        struct v4l2_buffer *b = arg;
        if (b->index >= (uint32_t)fk.n_bufs) { errno = EINVAL; return -1; }
        b->length = (uint32_t)fk.size;
        b->m.offset = b->index * 4096;
        return 0;
    }
    case VIDIOC_QBUF: {
        struct v4l2_buffer *b = arg;
        if (b->index >= (uint32_t)fk.n_bufs || fk.queued[b->index]) { fk.double_q++; errno = EINVAL; return -1; }
        fk.queued[b->index] = 1;
        return 0;
    }
    case VIDIOC_STREAMON: fk.streaming = 1; return 0;
    case VIDIOC_STREAMOFF: fk.streaming = 0; for (int i = 0; i < fk.n_bufs; i++) fk.queued[i] = 0; return 0;
    case VIDIOC_DQBUF: {
        struct v4l2_buffer *b = arg;
        if (!fk.streaming) { errno = EINVAL; return -1; }
        /* Buffers complete in queue order (round robin). */
        for (int k = 0; k < fk.n_bufs; k++) {
            int i = (fk.next_dq + k) % fk.n_bufs;
            if (!fk.queued[i]) continue;
            fk.queued[i] = 0;
            fk.next_dq = (i + 1) % fk.n_bufs;
            b->index = (uint32_t)i;
            if (fk.fmt == V4L2_PIX_FMT_MJPEG) {
                memcpy(fk.buf[i], fk.jpeg, fk.jpeg_len);
                b->bytesused = (uint32_t)fk.jpeg_len;
            } else {
                for (size_t j = 0; j < fk.size; j++) fk.buf[i][j] = (uint8_t)(fk.n_dq + j);
                b->bytesused = (uint32_t)fk.size;
            }
            fk.n_dq++;
            return 0;
        }
        errno = EAGAIN;
        return -1;
    }
    }
    errno = ENOTTY;
    return -1;
}

static void *f_mmap(void *a, size_t l, int pr, int fl, int fd, off_t off) {
    (void)a; (void)pr; (void)fl;
    CHECK(fd == FAKE_FD && l == fk.size && off % 4096 == 0, "mmap args");
    if (off / 4096 >= fk.n_bufs) { errno = EINVAL; return MAP_FAILED; }
    fk.mmap_count++;
    return fk.buf[off / 4096];
}
static int f_munmap(void *a, size_t l) { (void)a; (void)l; fk.munmap_count++; return 0; }
static int f_select(int n, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv) {
    (void)n; (void)wr; (void)ex;
    CHECK(tv && (tv->tv_sec > 0 || tv->tv_usec > 0), "select has a timeout");
    CHECK(rd && FD_ISSET(FAKE_FD, rd), "select on the device");
    long us = tv ? (long)tv->tv_sec * 1000000L + (long)tv->tv_usec : 0;
    if (us > fk.max_wait_us) fk.max_wait_us = us;
    if (++fk.n_select == fk.stop_at && fk.stop) *fk.stop = 1;
    if (fk.timeout) return 0;
    return 1;
}

static const cam_v4l2_sys fake_sys = {
    .open = f_open, .close = f_close, .ioctl = f_ioctl, .mmap = f_mmap, .munmap = f_munmap, .select = f_select,
};

static void check_released(const char *what) {
    CHECK(fk.open_count == fk.close_count, "%s: fd closed (%d opens, %d closes)", what, fk.open_count, fk.close_count);
    CHECK(fk.mmap_count == fk.munmap_count, "%s: %d mmaps, %d munmaps", what, fk.mmap_count, fk.munmap_count);
    CHECK(!fk.streaming, "%s: stream off", what);
    CHECK(fk.n_bufs == 0, "%s: driver buffers freed", what);
}

static void test_v4l2(void) {
    char err[256];
    cam_source *s = NULL;
    cam_source_options o = {.sys = &fake_sys, .timeout_ms = 50};
    cam_frame f;

    /* Missing and busy devices. */
    fake_reset();
    fk.exists = 0;
    CHECK(cam_source_open("v4l2:/dev/video9", &o, &s, err, sizeof err) == CAM_E_NODEV && !s, "missing");
    CHECK(strstr(err, "/dev/video9") && strstr(err, "no such camera"), "missing msg: %s", err);
    fake_reset();
    fk.busy = 1;
    CHECK(cam_source_open("v4l2:/dev/video0", &o, &s, err, sizeof err) == CAM_E_BUSY, "busy");
    CHECK(strstr(err, "busy") != NULL, "busy msg: %s", err);

    /* No usable format: fd closed, message lists what the device offers. */
    fake_reset();
    fk.formats[0] = V4L2_PIX_FMT_H264;
    fk.n_formats = 1;
    CHECK(cam_source_open("v4l2:/dev/video0", &o, &s, err, sizeof err) == CAM_E_UNSUPPORTED, "no format");
    CHECK(strstr(err, "H264") != NULL, "offers listed: %s", err);
    check_released("no format");
    /* Asked for YUYV, device has MJPEG only. */
    fake_reset();
    fk.formats[0] = V4L2_PIX_FMT_MJPEG;
    fk.n_formats = 1;
    CHECK(cam_source_open("v4l2:/dev/video0?fmt=yuyv", &o, &s, err, sizeof err) == CAM_E_UNSUPPORTED, "no yuyv");
    check_released("no yuyv");
    /* Driver silently switches the format. */
    fake_reset();
    fk.force_format = V4L2_PIX_FMT_RGB24;
    CHECK(cam_source_open("v4l2:/dev/video0", &o, &s, err, sizeof err) == CAM_E_UNSUPPORTED, "format changed");
    CHECK(strstr(err, "driver set") != NULL, "msg: %s", err);
    check_released("format changed");
    /* Too few buffers. */
    fake_reset();
    fk.grant_bufs = 1;
    CHECK(cam_source_open("v4l2:/dev/video0", &o, &s, err, sizeof err) == CAM_E_UNSUPPORTED, "1 buffer");
    check_released("1 buffer");

    /* MJPEG preferred; size clamped by the driver is taken. Stream 20 frames
     * through a ring of 3: each frame is the JPEG, at most one buffer out. */
    fake_reset();
    fk.grant_bufs = 3;
    o.width = 1920;
    o.height = 1080;
    CHECK(cam_source_open("v4l2:/dev/video0", &o, &s, err, sizeof err) == CAM_OK, "open: %s", err);
    if (s) {
        CHECK(fk.fmt == V4L2_PIX_FMT_MJPEG, "MJPEG picked");
        CHECK(strstr(cam_source_describe(s), "MJPG 1280x720, 3 mmap buffers") != NULL, "desc: %s", cam_source_describe(s));
        int good = 1;
        for (int i = 0; i < 20; i++) {
            cam_status st = cam_source_next(s, &f);
            int out = 0;
            for (int k = 0; k < fk.n_bufs; k++) out += !fk.queued[k];
            good &= st == CAM_OK && f.kind == CAM_FRAME_JPEG && f.bytes == fk.jpeg_len &&
                    memcmp(f.data, fk.jpeg, f.bytes) == 0 && f.seq == (uint64_t)i && out == 1;
        }
        CHECK(good && fk.double_q == 0, "20 MJPEG frames through the ring");
        cam_source_close(s);
        check_released("mjpeg stream");
    }

    /* YUYV on request, via the spec's options. */
    fake_reset();
    o.width = o.height = 0;
    CHECK(cam_source_open("v4l2:/dev/video0?fmt=yuyv&w=320&h=240&fps=15", &o, &s, err, sizeof err) == CAM_OK,
          "open yuyv: %s", err);
    if (s) {
        CHECK(cam_source_next(s, &f) == CAM_OK && f.kind == CAM_FRAME_YUYV && f.width == 320 && f.height == 240 &&
                  f.stride == 640 && f.bytes == 320 * 240 * 2 && f.data[5] == 5,
              "yuyv frame");
        /* Select timeout: a status, the stream still usable afterwards. */
        fk.timeout = 1;
        CHECK(cam_source_next(s, &f) == CAM_TIMEOUT, "timeout");
        CHECK(strstr(cam_source_error(s), "50 ms") != NULL, "timeout msg: %s", cam_source_error(s));
        fk.timeout = 0;
        CHECK(cam_source_next(s, &f) == CAM_OK, "frame after timeout");
        /* Unplugged mid-stream. */
        fk.vanish_after = fk.n_dq;
        CHECK(cam_source_next(s, &f) == CAM_E_NODEV, "vanished");
        CHECK(strstr(cam_source_error(s), "disconnected") != NULL, "vanish msg: %s", cam_source_error(s));
        CHECK(cam_source_next(s, &f) == CAM_E_NODEV, "still gone");
        cam_source_close(s);
        CHECK(fk.open_count == fk.close_count && fk.mmap_count == fk.munmap_count, "released after unplug");
    }
    fake_reset();
}

/* ------------------------------------------------------------ MJPEG split */

static size_t make_jpeg(ert_jpeg *j, int w, int h, int seed, uint8_t *out, size_t cap) {
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) px[i] = (uint8_t)(i * 7 + seed * 31);
    size_t n = 0;
    ert_status st = ert_jpeg_encode(j, px, w, h, 0, ERT_PIXEL_RGB, 80, out, cap, &n);
    CHECK(st == ERT_OK, "encode");
    free(px);
    return n;
}

static void write_all(const char *path, const uint8_t *d, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(d, 1, n, f) == n, "write %s", path);
    if (f) fclose(f);
}

/* A stop flag (set by the app's signal handler) ends a wait: the V4L2 select
 * runs in 100 ms slices and a stalled stream pipe is polled. */
static void test_stop(void) {
    static volatile sig_atomic_t stop;
    char err[256];
    cam_source *s = NULL;
    cam_frame f;
    cam_source_options o = {.sys = &fake_sys, .timeout_ms = 2000, .stop = &stop};
    fake_reset();
    CHECK(cam_source_open("v4l2:/dev/video0", &o, &s, err, sizeof err) == CAM_OK, "open: %s", err);
    if (s) {
        fk.timeout = 1;
        CHECK(cam_source_next(s, &f) == CAM_TIMEOUT && fk.n_select == 20 && fk.max_wait_us == 100000,
              "2 s timeout in 100 ms slices: %d selects, longest %ld us", fk.n_select, fk.max_wait_us);
        fk.n_select = 0;
        fk.stop = &stop;
        fk.stop_at = 3;
        CHECK(cam_source_next(s, &f) == CAM_EOF && fk.n_select == 3, "stop mid-wait: %d selects", fk.n_select);
        fk.stop = NULL;
        cam_source_close(s);
        check_released("stopped");
    }
    int p[2];
    if (pipe(p) != 0) return;
    int saved = dup(0);
    dup2(p[0], 0); /* a stalled "-" stream: the writer stays open and silent */
    stop = 0;
    CHECK(cam_source_open("-", &o, &s, err, sizeof err) == CAM_OK, "open -: %s", err);
    if (s) {
        stop = 1; /* already requested: returns at once instead of blocking in read() */
        CHECK(cam_source_next(s, &f) == CAM_EOF, "stalled pipe, stop requested");
        cam_source_close(s);
    }
    dup2(saved, 0);
    close(saved);
    close(p[0]);
    close(p[1]);
}

static void test_mjpeg(ert_test_rng *r) {
    ert_context *ctx;
    ert_jpeg *j;
    if (ert_context_create(NULL, &ctx) != ERT_OK || ert_jpeg_create(ctx, &j) != ERT_OK) {
        CHECK(0, "jpeg");
        return;
    }
    static uint8_t a[65536], b[65536], c[65536], st[1 << 20];
    size_t na = make_jpeg(j, 48, 32, 1, a, sizeof a), nb = make_jpeg(j, 16, 16, 2, b, sizeof b),
           nc = make_jpeg(j, 40, 24, 3, c, sizeof c);
    /* c2: c with an APP1 segment holding a whole JPEG (b) as a thumbnail. */
    static uint8_t c2[65536];
    size_t nc2 = 0;
    memcpy(c2, c, 2); nc2 = 2;
    c2[nc2++] = 0xFF; c2[nc2++] = 0xE1;
    c2[nc2++] = (uint8_t)((nb + 2) >> 8); c2[nc2++] = (uint8_t)(nb + 2);
    memcpy(c2 + nc2, b, nb); nc2 += nb;
    memcpy(c2 + nc2, c + 2, nc - 2); nc2 += nc - 2;
    /* Stream: garbage, a, c2, a truncated to half then b, garbage, a, b cut at the end. */
    size_t n = 0;
    const char junk[] = "junk\xFF\xD8 not a frame";
    struct { const uint8_t *p; size_t n; } expect[8];
    int ne = 0;
    memcpy(st + n, junk, sizeof junk - 1); n += sizeof junk - 1;
    memcpy(st + n, a, na); expect[ne].p = st + n; expect[ne++].n = na; n += na;
    memcpy(st + n, c2, nc2); expect[ne].p = st + n; expect[ne++].n = nc2; n += nc2;
    memcpy(st + n, a, na / 2); expect[ne].p = st + n; expect[ne++].n = na / 2; n += na / 2;
    memcpy(st + n, b, nb); expect[ne].p = st + n; expect[ne++].n = nb; n += nb;
    memcpy(st + n, junk, sizeof junk - 1); n += sizeof junk - 1;
    memcpy(st + n, a, na); expect[ne].p = st + n; expect[ne++].n = na; n += na;
    memcpy(st + n, b, nb - 10); expect[ne].p = st + n; expect[ne++].n = nb - 10; n += nb - 10;

    /* Whole buffer at once. */
    size_t off = 0, s0, e0;
    int k = 0;
    while (cam_mjpeg_split(st + off, n - off, 1, &s0, &e0)) {
        CHECK(k < ne && st + off + s0 == expect[k].p && e0 - s0 == expect[k].n, "frame %d at %zu len %zu", k,
              (size_t)(st + off + s0 - st), e0 - s0);
        off += e0;
        k++;
    }
    CHECK(k == ne, "%d frames, want %d", k, ne);

    /* A frame cut inside a table segment whose length reaches past the cut,
     * the garbage and the next frame's SOI: the next frame must still be
     * found (found by the 10,000-frame soak run: every 100th good frame was
     * swallowed before the fix). */
    {
        static uint8_t t[65536 * 2];
        size_t cut = 0, tn = 0;
        for (size_t i = 2; i + 1 < na; i++)
            if (a[i] == 0xFF && a[i + 1] == 0xC4) { cut = i + 6; break; }
        CHECK(cut > 0, "DHT found");
        memcpy(t, a, cut); tn = cut;
        for (int i = 0; i < 20; i++) t[tn++] = (uint8_t)(0x20 + i);
        t[tn++] = 0xFF; t[tn++] = 0xD9;
        memcpy(t + tn, b, nb);
        size_t bstart = tn;
        tn += nb;
        size_t s1, e1, s2, e2;
        int got1 = cam_mjpeg_split(t, tn, 1, &s1, &e1);
        int got2 = got1 ? cam_mjpeg_split(t + e1, tn - e1, 1, &s2, &e2) : 0;
        CHECK(got1 && got2 && e1 + s2 == bstart && e2 - s2 == nb, "frame after a cut header: %d %d at %zu want %zu",
              got1, got2, got1 ? e1 + s2 : 0, bstart);
    }

    /* Through the stream source in a file, with a 1-frame decode check:
     * good frames decode, the truncated ones do not. */
    char path[] = "/tmp/ert_cam_stream_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    write_all(path, st, n);
    char err[256];
    cam_source *s = NULL;
    CHECK(cam_source_open(path, NULL, &s, err, sizeof err) == CAM_OK, "open stream: %s", err);
    static uint8_t px[48 * 32 * 3 * 4];
    int n_frames = 0, n_good = 0;
    cam_frame f;
    cam_status cs;
    while (s && (cs = cam_source_next(s, &f)) == CAM_OK) {
        n_frames++;
        n_good += ert_jpeg_decode(j, f.data, f.bytes, ERT_PIXEL_RGB, px, sizeof px, 0, NULL, NULL) == ERT_OK;
    }
    CHECK(n_frames == ne && n_good == 4, "stream: %d frames, %d good", n_frames, n_good);
    if (s) {
        CHECK(cam_source_skipped_bytes(s) == 2 * (sizeof junk - 1), "skipped %llu",
              (unsigned long long)cam_source_skipped_bytes(s));
        cam_source_close(s);
    }

    /* stdin, fed through a pipe in random-sized writes (the reader sees
     * arbitrary chunk boundaries). */
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        size_t o2 = 0;
        while (o2 < n) {
            size_t c1 = (size_t)ert_test_int(r, 1, 3000);
            if (c1 > n - o2) c1 = n - o2;
            if (write(p[1], st + o2, c1) != (ssize_t)c1) _exit(1);
            o2 += c1;
        }
        _exit(0);
    }
    close(p[1]);
    int saved = dup(0);
    dup2(p[0], 0);
    close(p[0]);
    CHECK(cam_source_open("-", NULL, &s, err, sizeof err) == CAM_OK, "stdin: %s", err);
    n_frames = n_good = 0;
    while (s && cam_source_next(s, &f) == CAM_OK) {
        n_frames++;
        n_good += ert_jpeg_decode(j, f.data, f.bytes, ERT_PIXEL_RGB, px, sizeof px, 0, NULL, NULL) == ERT_OK;
    }
    CHECK(n_frames == ne && n_good == 4, "stdin: %d frames, %d good", n_frames, n_good);
    cam_source_close(s);
    dup2(saved, 0);
    close(saved);

    /* Folder (sorted by name; other files ignored) and a single image. */
    char dir[] = "/tmp/ert_cam_dir_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char fp[256];
    snprintf(fp, sizeof fp, "%s/b.jpg", dir); write_all(fp, b, nb);
    snprintf(fp, sizeof fp, "%s/a.jpg", dir); write_all(fp, a, na);
    snprintf(fp, sizeof fp, "%s/notes.txt", dir); write_all(fp, (const uint8_t *)"x", 1);
    uint8_t rgb[6 * 4 * 3];
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)i;
    snprintf(fp, sizeof fp, "%s/c.ppm", dir);
    CHECK(ert_image_write_pnm(ctx, fp, rgb, 6, 4, 3) == ERT_OK, "ppm");
    /* a FIFO and a folder named like images are not listed (reading the FIFO
     * blocked the app past SIGTERM) */
    snprintf(fp, sizeof fp, "%s/b2.jpg", dir);
    CHECK(mkfifo(fp, 0600) == 0, "mkfifo");
    snprintf(fp, sizeof fp, "%s/b3.jpg", dir);
    CHECK(mkdir(fp, 0700) == 0, "mkdir");
    CHECK(cam_source_open(dir, NULL, &s, err, sizeof err) == CAM_OK, "dir: %s", err);
    const char *names[] = {"a.jpg", "b.jpg", "c.ppm"};
    for (int i = 0; s && i < 3; i++) {
        CHECK(cam_source_next(s, &f) == CAM_OK && strcmp(f.name, names[i]) == 0, "dir entry %d: %s", i, f.name);
        if (i == 0) CHECK(f.kind == CAM_FRAME_JPEG && f.bytes == na && memcmp(f.data, a, na) == 0, "a.jpg bytes");
        if (i == 2) CHECK(f.kind == CAM_FRAME_RGB && f.width == 6 && f.height == 4 && memcmp(f.data, rgb, sizeof rgb) == 0, "c.ppm");
    }
    CHECK(s && cam_source_next(s, &f) == CAM_EOF, "dir EOF");
    cam_source_close(s);
    snprintf(fp, sizeof fp, "%s/a.jpg", dir);
    CHECK(cam_source_open(fp, NULL, &s, err, sizeof err) == CAM_OK, "image: %s", err);
    CHECK(s && cam_source_next(s, &f) == CAM_OK && f.bytes == na, "image frame");
    CHECK(s && cam_source_next(s, &f) == CAM_EOF, "image EOF");
    cam_source_close(s);
    /* a FIFO given as the image: an error at once, not a blocked read */
    snprintf(fp, sizeof fp, "%s/b2.jpg", dir);
    CHECK(cam_source_open(fp, NULL, &s, err, sizeof err) == CAM_OK, "FIFO image: %s", err);
    CHECK(s && cam_source_next(s, &f) == CAM_E_IO && strstr(cam_source_error(s), "not a regular file"), "FIFO image read: %s",
          s ? cam_source_error(s) : "");
    cam_source_close(s);
    snprintf(fp, sizeof fp, "%s/b3.jpg", dir);
    rmdir(fp);
    CHECK(cam_source_open("/nonexistent.jpg", NULL, &s, err, sizeof err) == CAM_E_IO && !s, "missing image");
    CHECK(cam_source_open("/nonexistent.mjpeg", NULL, &s, err, sizeof err) == CAM_E_IO && !s, "missing stream");
    const char *rm[] = {"a.jpg", "b.jpg", "c.ppm", "notes.txt", "b2.jpg"};
    for (int i = 0; i < 5; i++) { snprintf(fp, sizeof fp, "%s/%s", dir, rm[i]); unlink(fp); }
    rmdir(dir);
    unlink(path);
    ert_jpeg_free(j);
    ert_context_free(ctx);
}

int main(void) {
    ert_test_rng r;
    ert_test_rng_init(&r, "camera_source");
    if (!ert_jpeg_available()) {
        /* The V4L2 part needs no decoder: the fake camera's "JPEG" is just
         * bytes to carry (this also runs it in the aarch64 cross build,
         * where the ioctl numbers and struct layouts differ). */
        static const uint8_t fake[] = {0xFF, 0xD8, 0xFF, 0xE0, 0, 2, 0xFF, 0xD9};
        memcpy(fk.jpeg, fake, sizeof fake);
        fk.jpeg_len = sizeof fake;
        test_v4l2();
        printf("camera_source: MJPEG/stream/folder part skipped: built without JPEG support\n");
        return ert_test_finish("camera_source");
    }
    ert_context *ctx;
    ert_jpeg *j;
    if (ert_context_create(NULL, &ctx) != ERT_OK || ert_jpeg_create(ctx, &j) != ERT_OK) return 1;
    fk.jpeg_len = make_jpeg(j, 32, 24, 9, fk.jpeg, sizeof fk.jpeg);
    ert_jpeg_free(j);
    ert_context_free(ctx);
    test_v4l2();
    test_stop();
    test_mjpeg(&r);
    return ert_test_finish("camera_source");
}
