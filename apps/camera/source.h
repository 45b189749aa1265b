/* Frame sources for the camera pipeline, behind one interface:
 *
 *   v4l2:/dev/video0[?fmt=mjpeg|yuyv&w=640&h=480&fps=30]   a V4L2 device
 *   file.jpg | file.ppm | file.pgm                          one image
 *   dir/                                                    images in a folder, sorted by name
 *   stream.mjpeg (anything else)                            concatenated JPEGs
 *   -                                                       concatenated JPEGs on stdin
 *
 * cam_source_next() hands out one frame; its bytes stay valid until the next
 * call or close (a V4L2 buffer is queued back to the driver on the next call).
 * Not thread-safe: one thread drives a source. Nothing here prints: errors
 * come back as a cam_status and a message (cam_source_error). */
#ifndef CAM_SOURCE_H
#define CAM_SOURCE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/select.h>
#include <sys/types.h>

typedef enum cam_status {
    CAM_OK = 0,
    CAM_EOF,            /* no more frames (files); not an error */
    CAM_TIMEOUT,        /* no frame within the timeout (V4L2); retry or give up */
    CAM_E_ARG,
    CAM_E_IO,           /* read error */
    CAM_E_NODEV,        /* device missing, or unplugged while streaming */
    CAM_E_BUSY,         /* device in use by another process */
    CAM_E_UNSUPPORTED,  /* device cannot capture / stream / give MJPEG or YUYV */
    CAM_E_NOMEM,
} cam_status;

const char *cam_status_str(cam_status s);

typedef enum cam_frame_kind {
    CAM_FRAME_JPEG = 0, /* data/bytes: one JPEG (possibly corrupt: the decoder decides) */
    CAM_FRAME_YUYV,     /* packed YUYV 4:2:2, width x height, rows of stride bytes */
    CAM_FRAME_RGB,      /* packed RGB (from PPM/PGM files), rows of stride bytes */
} cam_frame_kind;

typedef struct cam_frame {
    cam_frame_kind kind;
    const uint8_t *data;
    size_t bytes;
    int width, height;  /* YUYV/RGB only (JPEG: from its header) */
    size_t stride;
    uint64_t seq;       /* 0, 1, 2, ... in the order handed out */
    const char *name;   /* file name for image/folder sources, else "" */
} cam_frame;

/* The system calls the V4L2 source makes, so tests can put a fake device
 * behind them. cam_v4l2_sys_default() is the real one. */
typedef struct cam_v4l2_sys {
    int (*open)(const char *path, int flags);
    int (*close)(int fd);
    int (*ioctl)(int fd, unsigned long request, void *arg);
    void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd, off_t off);
    int (*munmap)(void *addr, size_t len);
    int (*select)(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *timeout);
} cam_v4l2_sys;

const cam_v4l2_sys *cam_v4l2_sys_default(void);

typedef struct cam_source_options {
    int width, height;        /* V4L2 request; 0: 640x480 */
    int fps;                  /* V4L2 request; 0: driver default */
    const char *v4l2_format;  /* "mjpeg", "yuyv" or NULL/"auto" (MJPEG preferred) */
    int n_buffers;            /* V4L2 mmap ring; 0: 4 */
    int timeout_ms;           /* V4L2 wait per frame; 0: 2000 */
    size_t max_frame_bytes;   /* MJPEG stream: larger "frames" are dropped as corrupt; 0: 32 MiB */
    const cam_v4l2_sys *sys;  /* NULL: the real system calls */
    /* When set and *stop becomes non-zero (a signal handler's flag), a waiting
     * cam_source_next returns CAM_EOF within about 100 ms: a stream that
     * never yields a frame (/dev/zero, a stalled pipe) or a silent camera
     * cannot hold the caller. The stream is then polled, not read blocking. */
    const volatile sig_atomic_t *stop;
} cam_source_options;

typedef struct cam_source cam_source;

/* opts may be NULL. On failure *out is NULL and `err` (errlen bytes) says why. */
cam_status cam_source_open(const char *spec, const cam_source_options *opts, cam_source **out,
                           char *err, size_t errlen);
/* CAM_OK with *f filled, CAM_EOF, CAM_TIMEOUT or an error (see cam_source_error). */
cam_status cam_source_next(cam_source *s, cam_frame *f);
const char *cam_source_error(const cam_source *s);
/* "v4l2 /dev/video0 MJPEG 640x480, 4 buffers", "mjpeg stream x.mjpeg", ... */
const char *cam_source_describe(const cam_source *s);
/* Bytes skipped between frames of an MJPEG stream (garbage, resyncs). */
uint64_t cam_source_skipped_bytes(const cam_source *s);
void cam_source_close(cam_source *s);

/* The MJPEG splitter, exposed for tests. Looks in buf[0..n) for the next
 * frame: skips bytes before an SOI (FF D8 FF), then follows the marker
 * segments (so thumbnails inside APPn segments do not end the frame) and the
 * entropy-coded data to EOI (FF D9). A new SOI inside the data or a broken
 * marker ends the current frame early (a truncated/corrupt frame the decoder
 * will refuse) so the next frame is still found.
 * Returns 1 and [*start, *end) when a frame is complete; 0 when more data is
 * needed (*start = bytes that can be dropped); at eof, a partial frame is
 * returned as a frame (1). */
int cam_mjpeg_split(const uint8_t *buf, size_t n, int eof, size_t *start, size_t *end);

/* ---- internal to the sources (source.c / v4l2.c) ---- */
typedef struct cam_v4l2 cam_v4l2;
cam_status cam_v4l2_open(const char *path, const cam_source_options *o, cam_v4l2 **out,
                         char *err, size_t errlen);
cam_status cam_v4l2_next(cam_v4l2 *v, cam_frame *f, char *err, size_t errlen);
const char *cam_v4l2_describe(const cam_v4l2 *v);
void cam_v4l2_close(cam_v4l2 *v);

#endif
