/*
 * edgert-camera - camera pipeline demo: capture -> decode -> preprocess ->
 * infer -> postprocess -> annotate/encode, with per-stage latency and FPS.
 *
 *   edgert-camera --model M --source SRC [options]
 *
 * Threads: a producer thread captures and decodes frame N+1 into one of two
 * RGB slots while the main thread preprocesses (straight into the session's
 * input memory), runs and annotates frame N from the other slot. Corrupt
 * frames (JPEG the decoder refuses, short YUYV buffers) are counted and
 * skipped; the run still exits 0. Every output write is checked: the first
 * failure ends the run with exit 1 naming the file; so does a source that
 * yields no decodable frame at all. SIGINT/SIGTERM set a flag that every
 * wait (the source's reads, the slot hand-over, --serve-wait, --fps-limit
 * pacing) looks at within 100 ms, so the run ends within a second with the
 * summary; a second signal kills (SA_RESETHAND). See --help and
 * apps/camera/README.md.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "cli_util.h"
#include "draw.h"
#include "edgert.h"
#include "http.h"
#include "models.h"
#include "proc.h"
#include "source.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { ST_CAPTURE, ST_DECODE, ST_PRE, ST_INFER, ST_POST, ST_ENCODE, N_STAGES };
static const char *stage_names[N_STAGES] = {"capture", "decode", "preprocess", "infer", "postprocess", "encode"};

typedef enum { TASK_AUTO, TASK_CLASSIFY, TASK_DETECT, TASK_TEXTDET } task_kind;

typedef struct opts {
    const char *model, *source, *labels, *out_dir, *mjpeg_out, *serve, *json_path, *frames_jsonl;
    const char *v4l2_format, *collect_dir, *plan_cache;
    ert_device device;
    int collect_every, collect_max;
    double fps_limit;
    int threads, fp16, max_frames, json, decode_only, quiet, serve_wait_ms, topk, quality;
    int in_w, in_h;
    int decode_scale; /* 0 auto */
    task_kind task;
    int fit; /* -1: by task */
    float mean[3], std[3], scale;
    int have_mean, have_std;
    int gpu_pre; /* -1: on with --device cuda|auto, 0 off, 1 on */
    float score_thr, iou_thr;
} opts;

/* g_stop: end the run (a signal, --collect-max reached, a failed write);
 * g_signal: the signal that asked for it, for the summary. */
static volatile sig_atomic_t g_stop, g_signal;
static void on_signal(int sig) {
    g_signal = sig;
    g_stop = 1;
}

/* pthread_cond_wait for at most ms (the caller re-checks g_stop). */
static void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

/* ------------------------------------------------------------ producer */

typedef struct slot {
    uint8_t *rgb;
    size_t cap;
    int w, h;
    uint64_t seq;
    double t[2]; /* capture, decode (s) */
    char name[64];
    int full_w, full_h; /* the frame before a scaled decode */
} slot;

typedef struct pipe_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    slot slots[2];
    int head, count, done, failed;
    char err[320];
    uint64_t corrupt, captured, timeouts;
    cam_source *src;
    int max_frames;
    int decode_scale;  /* 1/2/4/8, or 0: auto from the network input (in_w, in_h, fit) */
    int in_w, in_h, fit;
    double fps_limit; /* pace capture to this rate (file replay at camera rate); 0: as fast as possible */
} pipe_state;

/* The IDCT scale for a JPEG frame: the largest 1/d (d = 8, 4, 2) that keeps
 * at least as many pixels as the network samples from the frame, so the
 * resize after it still only shrinks. */
static int pick_denom(const pipe_state *p, int w, int h) {
    if (p->decode_scale > 0) return p->decode_scale;
    if (p->in_w <= 0 || p->in_h <= 0) return 1;
    double rx = (double)w / p->in_w, ry = (double)h / p->in_h;
    double shrink = p->fit == CAM_FIT_LETTERBOX ? (rx > ry ? rx : ry) : (rx < ry ? rx : ry);
    for (int d = 8; d > 1; d /= 2)
        if (shrink >= d) return d;
    return 1;
}

static void *producer(void *arg) {
    pipe_state *p = arg;
    ert_context *ctx = NULL; /* the decode thread's own context (one thread per context) */
    ert_jpeg *jpg = NULL;
    if (ert_context_create(NULL, &ctx) != ERT_OK || ert_jpeg_create(ctx, &jpg) != ERT_OK) {
        pthread_mutex_lock(&p->mu);
        p->failed = 1;
        snprintf(p->err, sizeof p->err, "JPEG decoder: %s", ctx ? ert_last_error(ctx) : "out of memory");
        p->done = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        ert_context_free(ctx);
        return NULL;
    }
    int tail = 0, consecutive_timeouts = 0;
    uint64_t n_in = 0;
    double t_begin = cli_now();
    while (!g_stop && (p->max_frames <= 0 || n_in < (uint64_t)p->max_frames)) {
        while (p->fps_limit > 0 && !g_stop) { /* pace in slices of <= 100 ms: a stop is seen */
            double wait = t_begin + (double)n_in / p->fps_limit - cli_now();
            if (wait <= 0) break;
            if (wait > 0.1) wait = 0.1;
            struct timespec ts = {0, (long)(wait * 1e9)};
            nanosleep(&ts, NULL);
        }
        if (g_stop) break;
        double t0 = cli_now();
        cam_frame f;
        cam_status st = cam_source_next(p->src, &f);
        double t1 = cli_now();
        if (st == CAM_EOF) break;
        if (st == CAM_TIMEOUT) {
            pthread_mutex_lock(&p->mu);
            p->timeouts++;
            pthread_mutex_unlock(&p->mu);
            if (++consecutive_timeouts < 5) continue;
        }
        if (st != CAM_OK) {
            pthread_mutex_lock(&p->mu);
            p->failed = 1;
            snprintf(p->err, sizeof p->err, "source: %s", cam_source_error(p->src));
            pthread_mutex_unlock(&p->mu);
            break;
        }
        consecutive_timeouts = 0;
        pthread_mutex_lock(&p->mu);
        p->captured++;
        while (p->count == 2 && !g_stop) cond_wait_ms(&p->cv, &p->mu, 100);
        pthread_mutex_unlock(&p->mu);
        if (g_stop) break;
        double t_dec = cli_now(); /* decode time starts once a slot is free */
        slot *s = &p->slots[tail]; /* free: the consumer is done with it */
        int w = f.width, h = f.height, ok = 1;
        int full_w = w, full_h = h, denom = 1;
        if (f.kind == CAM_FRAME_JPEG) {
            ok = ert_jpeg_info(jpg, f.data, f.bytes, &full_w, &full_h, NULL) == ERT_OK;
            denom = ok ? pick_denom(p, full_w, full_h) : 1;
            ert_jpeg_scaled_size(full_w, full_h, denom, &w, &h);
        } else {
            ok = f.bytes > 0 && w > 0 && h > 0;
        }
        size_t need = ok ? (size_t)w * h * 3 : 0;
        if (ok && s->cap < need) {
            uint8_t *nb = realloc(s->rgb, need);
            if (!nb) ok = 0;
            else { s->rgb = nb; s->cap = need; }
        }
        if (ok && f.kind == CAM_FRAME_JPEG)
            ok = ert_jpeg_decode_scaled(jpg, f.data, f.bytes, denom, ERT_PIXEL_RGB, s->rgb, s->cap, 0, NULL, NULL) == ERT_OK;
        else if (ok && f.kind == CAM_FRAME_YUYV)
            cam_yuyv_to_rgb(f.data, w, h, f.stride, s->rgb);
        else if (ok)
            for (int y = 0; y < h; y++) memcpy(s->rgb + (size_t)y * w * 3, f.data + (size_t)y * f.stride, (size_t)w * 3);
        n_in++;
        if (!ok) {
            pthread_mutex_lock(&p->mu);
            p->corrupt++;
            pthread_mutex_unlock(&p->mu);
            continue;
        }
        s->w = w;
        s->full_w = full_w;
        s->full_h = full_h;
        s->h = h;
        s->seq = f.seq;
        s->t[0] = t1 - t0;
        s->t[1] = cli_now() - t_dec;
        snprintf(s->name, sizeof s->name, "%s", f.name ? f.name : "");
        pthread_mutex_lock(&p->mu);
        p->count++;
        tail ^= 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_lock(&p->mu);
    p->done = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    ert_jpeg_free(jpg);
    ert_context_free(ctx);
    return NULL;
}

/* ------------------------------------------------------------ stats */

typedef struct stage_log {
    double *v;
    int n, cap;
} stage_log;

static void log_add(stage_log *l, double x) {
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 1024;
        double *nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) return;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
}

/* ------------------------------------------------------------ collect */

/* mkdir -p: ImageFolder roots are made on the fly (root/<class>). */
static int mkdir_p(const char *dir) {
    char path[1024];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) return -1;
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (path[i] == '/' || path[i] == 0) {
            char c = path[i];
            path[i] = 0;
            if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
            path[i] = c;
        }
    struct stat st;
    if (stat(dir, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* One frame file (--collect, --out), through the library's one atomic write
 * (ert_file_write_atomic: temporary file, fsync, rename): a crash or a full
 * disk mid-write never leaves a truncated image (for the trainer, or a
 * viewer), a FIFO or device in the way is refused, a symlink's target is
 * replaced, and a killed run's temporary files go at the next save. On
 * failure -1 with `path` the file and ert_last_error(ctx) the reason. */
static int save_frame(ert_context *ctx, const char *dir, uint64_t seq, const uint8_t *jpg, size_t len, char *path,
                      size_t path_n) {
    snprintf(path, path_n, "%s/frame_%06llu.jpg", dir, (unsigned long long)seq);
    return ert_file_write_atomic(ctx, path, jpg, len) == ERT_OK ? 0 : -1;
}

/* A streaming output (--frames-jsonl, --mjpeg-out) after a frame's writes:
 * flushed so a full disk shows now, not at exit. 0, or -1 with errno. */
static int stream_flushed(FILE *f) {
    if (fflush(f) != 0) return -1;
    if (ferror(f)) {
        errno = errno ? errno : EIO;
        return -1;
    }
    return 0;
}

/* Closes a streaming output; a regular file is fsync'd so a power cut after
 * a clean exit keeps it. Reports a failure naming the option and file unless
 * one was already reported (`quiet`). */
static int stream_close(FILE *f, const char *opt, const char *path, int quiet) {
    if (!f) return 0;
    int ok = fflush(f) == 0 && !ferror(f), e = errno;
    struct stat st;
    if (ok && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && fsync(fileno(f)) != 0) ok = 0, e = errno;
    if (fclose(f) != 0 && ok) ok = 0, e = errno;
    if (ok) return 0;
    if (!quiet) fprintf(stderr, "edgert-camera: %s %s: write failed: %s\n", opt, path, strerror(e ? e : EIO));
    return -1;
}

/* ------------------------------------------------------------ options */

static void usage(FILE *f) {
    fputs("usage: edgert-camera --model M --source SRC [options]\n"
          "       edgert-camera --source SRC --collect DIR [options]     (no model needed)\n"
          "  --model PATH|builtin:tiny|builtin:resnet18   model file (.ert/.onnx) or a built-in test model\n"
          "  --source SRC       v4l2:/dev/video0[?fmt=mjpeg|yuyv&w=W&h=H&fps=F] | image.jpg|.ppm | DIR/ |\n"
          "                     stream.mjpeg (concatenated JPEGs) | - (MJPEG on stdin)\n"
          "  --v4l2-format F    mjpeg | yuyv | auto (default auto: MJPEG preferred)\n"
          "  --labels FILE      class names, one per line (default: class numbers)\n"
          "  --task T           classify | detect (YOLO boxes + NMS) | textdet (DB text boxes); default: from the output shape\n"
          "  --input-size WxH   network input size when the model's is dynamic (default 640x640)\n"
          "  --fit F            stretch | letterbox | crop (default: crop for classify, letterbox for detect, stretch for textdet)\n"
          "  --mean R,G,B --std R,G,B --scale S   normalisation (default ImageNet 0.485,0.456,0.406 and\n"
          "                     0.229,0.224,0.225, scale 1/255; detect: mean 0, std 1);\n"
          "                     one value sets all channels. A 1-channel model input gets the frame's luma\n"
          "                     (BT.601), normalised with the first mean/std: e.g. --mean 0.286 --std 0.353\n"
          "  --topk K           classes listed per frame, 1..16 (default 5)\n"
          "  --score T --iou T  detection score and NMS IoU thresholds, 0..1 (defaults 0.25, 0.45)\n"
          "  --device D         cpu | cuda | auto (default cpu)\n"
          "  --threads N        CPU threads, 1..256 (default 1)\n"
          "  --fp16             f16 compute in CUDA sessions (default f32)\n"
          "  --plan-cache DIR|off  where CUDA sessions keep what create measured, so the next start\n"
          "                     skips it (default $XDG_CACHE_HOME/edgert, else ~/.cache/edgert)\n"
          "  --gpu-preprocess on|off  resize + normalise frames on the GPU (default on with --device cuda|auto;\n"
          "                     falls back to the CPU when no GPU can be used)\n"
          "  --out DIR          annotated JPEGs DIR/frame_NNNNNN.jpg (missing folders are made)\n"
          "  --mjpeg-out FILE   annotated frames as one MJPEG stream file\n"
          "  --serve [IP:]PORT  MJPEG over HTTP (default IP 127.0.0.1); open http://IP:PORT/\n"
          "  --serve-wait MS    wait up to MS for a viewer before starting, 0..3600000 (default 0)\n"
          "  --quality Q        JPEG quality of the outputs, 1..100 (default 85)\n"
          "  --max-frames N     stop after N captured frames (default 0: until the source ends)\n"
          "  --fps-limit F      replay a file source at F frames/s like a camera, 0..1000 (default 0: as fast as possible)\n"
          "  --decode-only      capture + decode only (measures the decode bound)\n"
          "  --decode-scale S   JPEG decode at 1/S size: 1, 2, 4, 8 or auto (default auto: the largest that still\n"
          "                     covers the network input; outputs are then annotated at that size)\n"
          "  --frames-jsonl F   one JSON line per processed frame (results)\n"
          "  --collect DIR      save the frames (as captured, before annotation) as DIR/frame_NNNNNN.jpg, e.g.\n"
          "                     into ImageFolder/<class>/ for `edgert train`; --model is optional then\n"
          "  --collect-every K  save every K-th good frame (default 1)\n"
          "  --collect-max N    stop after saving N frames (default 0: no limit)\n"
          "  --json             JSON summary on stdout (human summary goes to stderr)\n"
          "  --quiet            no per-second status lines\n"
          "  --version          print the version\n"
          "Exit status: 0 done; 1 error (a failed write, a source error, no decodable frame at all); 2 usage.\n"
          "SIGINT/SIGTERM end the run within a second, with the summary.\n",
          f);
}

/* A rejected value: one line naming the option, the value and what is allowed. */
static int bad_value(const char *opt, const char *val, const char *allowed) {
    fprintf(stderr, "edgert-camera: %s '%s': %s\nsee edgert-camera --help\n", opt, val, allowed);
    return -1;
}

static int int_arg(const char *opt, const char *v, long lo, long hi, int *out) {
    long l;
    if (cli_parse_int(v, lo, hi, &l) != 0) {
        char allowed[96];
        snprintf(allowed, sizeof allowed, "must be an integer in %ld..%ld", lo, hi);
        return bad_value(opt, v, allowed);
    }
    *out = (int)l;
    return 0;
}

/* A finite number in [lo, hi] (lo excluded when lo_open). */
static int float_arg(const char *opt, const char *v, double lo, double hi, int lo_open, float *out) {
    char *end;
    double d = strtod(v, &end);
    if (!*v || *end || !(d >= lo && d <= hi) || (lo_open && d == lo)) {
        char allowed[96];
        if (lo_open) snprintf(allowed, sizeof allowed, "must be a number > %g and <= %g", lo, hi);
        else snprintf(allowed, sizeof allowed, "must be a number in %g..%g", lo, hi);
        return bad_value(opt, v, allowed);
    }
    *out = (float)d;
    return 0;
}

/* "R,G,B" or one value for all channels; std values must be > 0. */
static int floats3_arg(const char *opt, const char *s, int positive, float v[3]) {
    char *end;
    const char *p = s;
    int n = 0;
    for (; n < 3; n++) {
        double d = strtod(p, &end);
        if (end == p || !(d > -1e30 && d < 1e30) || (positive && !(d > 0))) break;
        v[n] = (float)d;
        p = end;
        if (*p != ',') { n++; break; }
        p++;
    }
    if (*p || (n != 1 && n != 3))
        return bad_value(opt, s, positive ? "must be one or three numbers > 0, e.g. 0.229,0.224,0.225"
                                          : "must be one or three numbers, e.g. 0.485,0.456,0.406");
    if (n == 1) v[1] = v[2] = v[0]; /* one value: all channels (a gray model uses the first) */
    return 0;
}

/* 0: parsed; 1: --help/--version printed (exit 0); -1: a usage error, already reported. */
static int parse_args(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->threads = 1;
    o->topk = 5;
    o->quality = 85;
    o->score_thr = 0.25f;
    o->iou_thr = 0.45f;
    o->fit = -1;
    o->gpu_pre = -1;
    o->in_w = o->in_h = 640;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char *missing = NULL;
#define ARG(name) (strcmp(a, name) == 0 && (v ? (++i, 1) : (missing = name, 0)))
#define CHECK(x) do { if ((x) != 0) return -1; } while (0)
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage(stdout); return 1; }
        else if (strcmp(a, "--version") == 0) { printf("edgert-camera %s\n", ert_version()); return 1; }
        else if (ARG("--model")) o->model = v;
        else if (ARG("--source")) o->source = v;
        else if (ARG("--labels")) o->labels = v;
        else if (ARG("--out")) o->out_dir = v;
        else if (ARG("--plan-cache")) o->plan_cache = v;
        else if (ARG("--mjpeg-out")) o->mjpeg_out = v;
        else if (ARG("--serve")) o->serve = v;
        else if (ARG("--serve-wait")) CHECK(int_arg(a, v, 0, 3600000, &o->serve_wait_ms));
        else if (ARG("--frames-jsonl")) o->frames_jsonl = v;
        else if (ARG("--collect")) o->collect_dir = v;
        else if (ARG("--collect-every")) CHECK(int_arg(a, v, 1, 1000000, &o->collect_every));
        else if (ARG("--collect-max")) CHECK(int_arg(a, v, 0, 1000000000, &o->collect_max));
        else if (ARG("--v4l2-format")) {
            if (strcmp(v, "mjpeg") && strcmp(v, "yuyv") && strcmp(v, "auto")) return bad_value(a, v, "must be mjpeg, yuyv or auto");
            o->v4l2_format = v;
        }
        else if (ARG("--threads")) CHECK(int_arg(a, v, 1, 256, &o->threads));
        else if (ARG("--max-frames")) CHECK(int_arg(a, v, 0, 2147483647, &o->max_frames));
        else if (ARG("--fps-limit")) {
            float f;
            CHECK(float_arg(a, v, 0, 1000, 0, &f));
            o->fps_limit = f;
        }
        else if (ARG("--decode-scale")) {
            if (strcmp(v, "auto") == 0) o->decode_scale = 0;
            else if (strcmp(v, "1") && strcmp(v, "2") && strcmp(v, "4") && strcmp(v, "8")) return bad_value(a, v, "must be 1, 2, 4, 8 or auto");
            else o->decode_scale = atoi(v);
        }
        else if (ARG("--topk")) CHECK(int_arg(a, v, 1, 16, &o->topk));
        else if (ARG("--quality")) CHECK(int_arg(a, v, 1, 100, &o->quality));
        else if (ARG("--score")) CHECK(float_arg(a, v, 0, 1, 0, &o->score_thr));
        else if (ARG("--iou")) CHECK(float_arg(a, v, 0, 1, 0, &o->iou_thr));
        else if (ARG("--scale")) CHECK(float_arg(a, v, 0, 1e6, 1, &o->scale));
        else if (ARG("--mean")) { CHECK(floats3_arg(a, v, 0, o->mean)); o->have_mean = 1; }
        else if (ARG("--std")) { CHECK(floats3_arg(a, v, 1, o->std)); o->have_std = 1; }
        else if (ARG("--input-size")) {
            char tail;
            if (sscanf(v, "%dx%d%c", &o->in_w, &o->in_h, &tail) != 2 || o->in_w < 1 || o->in_h < 1 || o->in_w > 16384 || o->in_h > 16384)
                return bad_value(a, v, "must be WxH, each 1..16384, e.g. 640x480");
        }
        else if (ARG("--gpu-preprocess")) {
            if (strcmp(v, "on") == 0) o->gpu_pre = 1;
            else if (strcmp(v, "off") == 0) o->gpu_pre = 0;
            else return bad_value(a, v, "must be on or off");
        }
        else if (ARG("--device")) {
            if (strcmp(v, "cpu") == 0) o->device = ERT_DEVICE_CPU;
            else if (strcmp(v, "cuda") == 0) o->device = ERT_DEVICE_CUDA;
            else if (strcmp(v, "auto") == 0) o->device = ERT_DEVICE_AUTO;
            else return bad_value(a, v, "must be cpu, cuda or auto");
        } else if (ARG("--task")) {
            if (strcmp(v, "classify") == 0) o->task = TASK_CLASSIFY;
            else if (strcmp(v, "detect") == 0) o->task = TASK_DETECT;
            else if (strcmp(v, "textdet") == 0) o->task = TASK_TEXTDET;
            else return bad_value(a, v, "must be classify, detect or textdet");
        } else if (ARG("--fit")) {
            if (strcmp(v, "stretch") == 0) o->fit = CAM_FIT_STRETCH;
            else if (strcmp(v, "letterbox") == 0) o->fit = CAM_FIT_LETTERBOX;
            else if (strcmp(v, "crop") == 0) o->fit = CAM_FIT_CENTER_CROP;
            else return bad_value(a, v, "must be stretch, letterbox or crop");
        }
        else if (strcmp(a, "--fp16") == 0) o->fp16 = 1;
        else if (strcmp(a, "--json") == 0) o->json = 1;
        else if (strcmp(a, "--decode-only") == 0) o->decode_only = 1;
        else if (strcmp(a, "--quiet") == 0) o->quiet = 1;
        else if (missing) { fprintf(stderr, "edgert-camera: %s needs a value\nsee edgert-camera --help\n", missing); return -1; }
        else { fprintf(stderr, "edgert-camera: unknown option '%s'\nsee edgert-camera --help\n", a); return -1; }
#undef ARG
#undef CHECK
    }
    if (o->collect_dir && !o->model) o->decode_only = 1; /* collecting needs no model */
    if (!o->source || (!o->model && !o->decode_only)) {
        fprintf(stderr, "edgert-camera: %s is required\nsee edgert-camera --help\n", !o->source ? "--source" : "--model (or --collect/--decode-only)");
        return -1;
    }
    if (o->collect_every == 0) o->collect_every = 1;
    return 0;
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv) {
    opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr != 0) return pr > 0 ? cli_stdout_finish("edgert-camera", 0, 0) : 2; /* --help/--version > /dev/full: exit 1 */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second signal kills */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (!ert_jpeg_available()) {
        fprintf(stderr, "edgert-camera: this build has no JPEG support (configure with libturbojpeg0-dev installed)\n");
        return 1;
    }
    if (o.fp16 && o.device == ERT_DEVICE_CPU)
        fprintf(stderr, "edgert-camera: note: --fp16 applies to CUDA sessions; the CPU computes in f32\n");

    ert_context *ctx = NULL;
    ert_model *model = NULL;
    ert_session *sess = NULL;
    ert_preprocessor *gpre = NULL; /* made at the first frame (its size bounds the staging) */
    int gpre_w = 0, gpre_h = 0;
    ert_jpeg *enc = NULL;
    cam_source *src = NULL;
    cam_http *http = NULL;
    FILE *mjpeg = NULL, *fjl = NULL;
    char **labels = NULL;
    int n_labels = 0, rc = 1;
    uint8_t *jpg_out = NULL;
    size_t jpg_cap = 0;
    int *work = NULL;
    cam_box *boxes = NULL;
    const int max_boxes = 512;
    pipe_state ps;
    memset(&ps, 0, sizeof ps);
    pthread_mutex_init(&ps.mu, NULL);
    pthread_cond_init(&ps.cv, NULL);
    stage_log logs[N_STAGES];
    memset(logs, 0, sizeof logs);
    int thread_started = 0;

    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    if (ert_jpeg_create(ctx, &enc) != ERT_OK) { fprintf(stderr, "edgert-camera: %s\n", ert_last_error(ctx)); goto done; }

    /* Model and session. */
    task_kind task = o.task;
    int in_nhwc = 0, in_gray = 0, in_f16 = 0, in_w = 0, in_h = 0, out_n = 0, out_rows = 0, out_cols = 0, out_transposed = 0;
    float *in_data = NULL, *dev_in = NULL; /* dev_in: the input's GPU address (ERT_SESSION_DEVICE_INPUTS) */
    if (!o.decode_only) {
        ert_status st;
        if (strncmp(o.model, "builtin:", 8) == 0) {
            st = cam_builtin_model(ctx, o.model + 8, &model);
            if (st == ERT_E_NOT_FOUND) { fprintf(stderr, "edgert-camera: unknown built-in model '%s' (tiny, resnet18)\n", o.model + 8); goto done; }
        } else {
            st = ert_model_load_file(ctx, o.model, &model);
        }
        if (st != ERT_OK) { fprintf(stderr, "edgert-camera: %s: %s\n", o.model, ert_last_error(ctx)); goto done; }
        ert_tensor_info ii;
        if (ert_model_input_info(model, 0, &ii) != ERT_OK || ii.ndim != 4 ||
            (ii.dtype != ERT_DTYPE_F32 && ii.dtype != ERT_DTYPE_F16)) {
            fprintf(stderr, "edgert-camera: input 0 must be a 4-D f32 or f16 image tensor\n");
            goto done;
        }
        /* NCHW (N, 3|1, H, W) unless the last dim is the channel one; 1 channel: gray */
        in_nhwc = (ii.dims[3] == 3 || ii.dims[3] == 1) && ii.dims[1] != 3 && ii.dims[1] != 1;
        in_gray = (in_nhwc ? ii.dims[3] : ii.dims[1]) == 1;
        in_f16 = ii.dtype == ERT_DTYPE_F16; /* preprocessing writes halves */
        ert_input_shape shape = {.name = ii.name, .ndim = 4};
        int64_t hh = in_nhwc ? ii.dims[1] : ii.dims[2], ww = in_nhwc ? ii.dims[2] : ii.dims[3];
        if (hh < 0) hh = o.in_h;
        if (ww < 0) ww = o.in_w;
        int64_t ch = in_gray ? 1 : 3, dn[4] = {1, ch, hh, ww}, dh[4] = {1, hh, ww, ch};
        memcpy(shape.dims, in_nhwc ? dh : dn, sizeof dn);
        /* GPU preprocessing writes the input on the GPU: no host round trip */
        int want_dev_in = o.device != ERT_DEVICE_CPU && o.gpu_pre != 0;
        ert_session_options so = {.device = o.device, .n_threads = o.threads, .batch = 1,
                                  .input_shapes = &shape, .n_input_shapes = 1,
                                  .precision = o.fp16 ? ERT_DTYPE_F16 : ERT_DTYPE_F32,
                                  .flags = want_dev_in ? ERT_SESSION_DEVICE_INPUTS : 0};
        char plan_dir[1024];
        so.plan_cache_dir = cli_plan_cache_dir(o.plan_cache, plan_dir, sizeof plan_dir);
        if (ert_session_create(model, &so, &sess) != ERT_OK) {
            fprintf(stderr, "edgert-camera: session: %s\n", ert_last_error(ctx));
            goto done;
        }
        in_w = (int)ww;
        in_h = (int)hh;
        ert_session_input_data(sess, 0, (void **)&in_data);
        if (want_dev_in && ert_session_input_device(sess, 0, (void **)&dev_in) != ERT_OK) dev_in = NULL; /* CPU session */
        ert_tensor_info oi;
        ert_session_output_info(sess, 0, &oi);
        if (task == TASK_AUTO)
            task = oi.ndim == 2 ? TASK_CLASSIFY : oi.ndim == 3 ? TASK_DETECT : (oi.ndim == 4 && oi.dims[1] == 1) ? TASK_TEXTDET : TASK_AUTO;
        if (task == TASK_AUTO) {
            fprintf(stderr, "edgert-camera: cannot tell the task from output shape; use --task\n");
            goto done;
        }
        out_n = 1;
        for (int k = 1; k < oi.ndim; k++) out_n *= (int)oi.dims[k];
        if (task == TASK_DETECT) {
            out_rows = (int)oi.dims[1];
            out_cols = (int)oi.dims[2];
            out_transposed = out_rows < out_cols;
        } else if (task == TASK_TEXTDET) {
            out_rows = (int)oi.dims[2];
            out_cols = (int)oi.dims[3];
            work = malloc(2 * (size_t)out_rows * out_cols * sizeof *work);
            if (!work) goto done;
        }
        boxes = malloc(max_boxes * sizeof *boxes);
        if (!boxes) goto done;
    }
    if (o.labels && (n_labels = cam_labels_load(o.labels, &labels)) == 0) {
        fprintf(stderr, "edgert-camera: %s: cannot read labels\n", o.labels);
        goto done;
    }
    cam_pre_options pre = {.out_w = in_w, .out_h = in_h, .nhwc = in_nhwc, .gray = in_gray, .f16 = in_f16, .pad = 114,
                           .scale = o.scale};
    pre.fit = o.fit >= 0 ? (cam_fit)o.fit : task == TASK_DETECT ? CAM_FIT_LETTERBOX : task == TASK_TEXTDET ? CAM_FIT_STRETCH : CAM_FIT_CENTER_CROP;
    static const float imnet_mean[3] = {0.485f, 0.456f, 0.406f}, imnet_std[3] = {0.229f, 0.224f, 0.225f};
    for (int c = 0; c < 3; c++) {
        pre.mean[c] = o.have_mean ? o.mean[c] : task == TASK_DETECT ? 0.0f : imnet_mean[c];
        pre.std[c] = o.have_std ? o.std[c] : task == TASK_DETECT ? 1.0f : imnet_std[c];
    }

    /* Source and outputs. */
    char err[320];
    cam_source_options sopt = {.v4l2_format = o.v4l2_format, .stop = &g_stop};
    if (cam_source_open(o.source, &sopt, &src, err, sizeof err) != CAM_OK) {
        fprintf(stderr, "edgert-camera: %s\n", err);
        goto done;
    }
    if (o.collect_dir && mkdir_p(o.collect_dir) != 0) {
        fprintf(stderr, "edgert-camera: --collect %s: %s\n", o.collect_dir, strerror(errno));
        goto done;
    }
    if (o.out_dir && mkdir_p(o.out_dir) != 0) {
        fprintf(stderr, "edgert-camera: --out %s: %s\n", o.out_dir, strerror(errno));
        goto done;
    }
    if (o.mjpeg_out && !(mjpeg = fopen(o.mjpeg_out, "wb"))) {
        fprintf(stderr, "edgert-camera: --mjpeg-out %s: %s\n", o.mjpeg_out, strerror(errno));
        goto done;
    }
    if (o.frames_jsonl && !(fjl = fopen(o.frames_jsonl, "w"))) {
        fprintf(stderr, "edgert-camera: --frames-jsonl %s: %s\n", o.frames_jsonl, strerror(errno));
        goto done;
    }
    if (o.serve) {
        if (cam_http_start(o.serve, &http, err, sizeof err) != 0) {
            fprintf(stderr, "edgert-camera: %s\n", err);
            goto done;
        }
        fprintf(stderr, "edgert-camera: serving on http://%s:%d/\n", cam_http_host(http), cam_http_port(http));
        int waited = 0, viewer = 0; /* in slices: a signal ends the wait */
        while (!g_stop && waited < o.serve_wait_ms && !viewer) {
            int slice = o.serve_wait_ms - waited < 100 ? o.serve_wait_ms - waited : 100;
            viewer = cam_http_wait_client(http, slice);
            waited += slice;
        }
        if (o.serve_wait_ms > 0 && !viewer && !g_stop)
            fprintf(stderr, "edgert-camera: no viewer after %d ms; going on\n", o.serve_wait_ms);
    }
    int want_encode = o.out_dir || mjpeg || http;
    int use_gpu_pre = !o.decode_only && (o.gpu_pre == 1 || (o.gpu_pre < 0 && o.device != ERT_DEVICE_CPU));
    if (!o.quiet)
        fprintf(stderr, "edgert-camera: %s -> %s%s\n", cam_source_describe(src),
                o.decode_only ? "decode only" : o.model, o.decode_only ? "" : task == TASK_CLASSIFY ? " (classify)" : task == TASK_DETECT ? " (detect)" : " (textdet)");

    ps.src = src;
    ps.max_frames = o.max_frames;
    ps.decode_scale = o.decode_scale;
    ps.in_w = in_w;
    ps.in_h = in_h;
    ps.fit = pre.fit;
    ps.fps_limit = o.fps_limit;
    pthread_t th;
    if (pthread_create(&th, NULL, producer, &ps) != 0) goto done;
    thread_started = 1;

    double t_start = cli_now(), t_window = t_start;
    uint64_t processed = 0, window_frames = 0, collected = 0;
    int collect_failed = 0, write_failed = 0;
    char write_err[1400] = "";
    double window_sum[N_STAGES] = {0};
    float fps_shown = 0;
    int head = 0;
    for (;;) {
        pthread_mutex_lock(&ps.mu);
        while (ps.count == 0 && !ps.done && !g_stop) cond_wait_ms(&ps.cv, &ps.mu, 100);
        if (ps.count == 0) { pthread_mutex_unlock(&ps.mu); break; }
        pthread_mutex_unlock(&ps.mu);
        slot *s = &ps.slots[head];
        double t[N_STAGES] = {s->t[0], s->t[1], 0, 0, 0, 0};
        cam_image im = {s->rgb, s->w, s->h, (size_t)s->w * 3};
        int n_boxes = 0, n_top = 0, top_idx[16];
        float top_p[16];
        if (!o.decode_only) {
            double a = cli_now();
            cam_xform xf;
            if (use_gpu_pre && (s->w > gpre_w || s->h > gpre_h)) {
                ert_preprocessor_free(gpre);
                gpre = NULL;
                gpre_w = s->w > gpre_w ? s->w : gpre_w;
                gpre_h = s->h > gpre_h ? s->h : gpre_h;
                ert_preprocessor_options gpo = {.out_w = pre.out_w, .out_h = pre.out_h, .fit = (ert_fit)pre.fit,
                                                .pad = pre.pad, .scale = pre.scale, .nhwc = pre.nhwc,
                                                .bgr = pre.bgr, .gray = pre.gray, .f16 = pre.f16};
                memcpy(gpo.mean, pre.mean, sizeof gpo.mean);
                memcpy(gpo.std, pre.std, sizeof gpo.std);
                ert_status gst = ert_preprocessor_create(ctx, gpre_w, gpre_h, &gpo, &gpre);
                if (gst != ERT_OK) {
                    if (!o.quiet)
                        fprintf(stderr, "edgert-camera: note: GPU preprocessing unavailable (%s); using the CPU\n",
                                ert_last_error(ctx));
                    use_gpu_pre = 0;
                }
            }
            if (gpre && (dev_in ? ert_preprocessor_run_device(gpre, s->rgb, s->w, s->h, (size_t)s->w * 3, ERT_PIXEL_RGB, dev_in)
                                : ert_preprocessor_run(gpre, s->rgb, s->w, s->h, (size_t)s->w * 3, ERT_PIXEL_RGB, in_data)) == ERT_OK) {
                xf = cam_pre_xform(s->w, s->h, &pre);
            } else {
                cam_preprocess(s->rgb, s->w, s->h, (size_t)s->w * 3, &pre, in_data, &xf);
                if (dev_in && ert_session_sync_inputs(sess) != ERT_OK) { /* the session reads the GPU copy */
                    fprintf(stderr, "edgert-camera: %s\n", ert_last_error(ctx));
                    g_stop = 1;
                }
            }
            double b = cli_now();
            if (ert_session_run(sess) != ERT_OK) {
                fprintf(stderr, "edgert-camera: run: %s\n", ert_last_error(ctx));
                g_stop = 1;
            }
            double c = cli_now();
            const float *out = NULL;
            ert_session_output_data(sess, 0, (const void **)&out);
            if (task == TASK_CLASSIFY) {
                int k = o.topk < 16 ? o.topk : 16;
                /* Softmax unless the model already ends in one (sums to 1). */
                double sum = 0;
                int probs = 1;
                for (int i = 0; i < out_n; i++) { sum += out[i]; probs &= out[i] >= 0; }
                n_top = cam_topk(out, out_n, k, !(probs && sum > 0.999 && sum < 1.001), top_idx, top_p);
            } else if (task == TASK_DETECT) {
                n_boxes = cam_yolo_decode(out, out_rows, out_cols, out_transposed, o.score_thr, o.iou_thr, &xf, boxes, max_boxes);
            } else {
                n_boxes = cam_db_boxes(out, out_cols, out_rows, NULL, &xf, work, boxes, max_boxes);
            }
            double d = cli_now();
            t[ST_PRE] = b - a;
            t[ST_INFER] = c - b;
            t[ST_POST] = d - c;
        }
        if (o.collect_dir && (o.collect_max == 0 || collected < (uint64_t)o.collect_max) &&
            (processed % (uint64_t)o.collect_every) == 0) {
            /* the frame as decoded, before any annotation is drawn on it */
            size_t need = ert_jpeg_encode_bound(s->w, s->h), len = 0;
            if (need > jpg_cap) {
                free(jpg_out);
                jpg_out = malloc(need);
                jpg_cap = jpg_out ? need : 0;
            }
            char path[1100];
            if (!jpg_out ||
                ert_jpeg_encode(enc, s->rgb, s->w, s->h, 0, ERT_PIXEL_RGB, 95, jpg_out, jpg_cap, &len) != ERT_OK) {
                fprintf(stderr, "edgert-camera: --collect: cannot encode frame %llu\n", (unsigned long long)s->seq);
                g_stop = 1;
                collect_failed = 1;
            } else if (save_frame(ctx, o.collect_dir, s->seq, jpg_out, len, path, sizeof path) != 0) {
                fprintf(stderr, "edgert-camera: --collect %s: write failed: %s\n", path, ert_last_error(ctx));
                g_stop = 1;
                collect_failed = 1;
            } else if (++collected == (uint64_t)o.collect_max) {
                g_stop = 1; /* enough */
            }
        }
        if (fjl) {
            fprintf(fjl, "{\"seq\":%llu,\"name\":", (unsigned long long)s->seq);
            cli_json_str(fjl, s->name);
            fprintf(fjl, ",\"width\":%d,\"height\":%d,\"decoded\":[%d,%d],\"top\":[", s->full_w, s->full_h, s->w, s->h);
            for (int i = 0; i < n_top; i++) fprintf(fjl, "%s[%d,%.6f]", i ? "," : "", top_idx[i], top_p[i]);
            fprintf(fjl, "],\"boxes\":[");
            /* Boxes in full-frame pixels (the decode may have been scaled). */
            float sx = (float)s->full_w / (float)s->w, sy = (float)s->full_h / (float)s->h;
            for (int i = 0; i < n_boxes; i++)
                fprintf(fjl, "%s[%.1f,%.1f,%.1f,%.1f,%.4f,%d]", i ? "," : "", boxes[i].x0 * sx, boxes[i].y0 * sy,
                        boxes[i].x1 * sx, boxes[i].y1 * sy, boxes[i].score, boxes[i].cls);
            fprintf(fjl, "]}\n");
            if (stream_flushed(fjl) != 0 && !write_failed) {
                snprintf(write_err, sizeof write_err, "--frames-jsonl %s: write failed: %s", o.frames_jsonl, strerror(errno));
                write_failed = 1;
            }
        }
        if (want_encode) {
            double a = cli_now();
            char text[160];
            int scale = s->w >= 640 ? 2 : 1;
            static const uint8_t white[3] = {255, 255, 255};
            for (int i = 0; i < n_boxes; i++) {
                uint8_t col[3];
                cam_class_color(boxes[i].cls, col);
                cam_draw_rect(&im, (int)boxes[i].x0, (int)boxes[i].y0, (int)boxes[i].x1, (int)boxes[i].y1, scale, col);
                if (task == TASK_DETECT) {
                    const char *nm = boxes[i].cls < n_labels ? labels[boxes[i].cls] : NULL;
                    if (nm) snprintf(text, sizeof text, "%s %.2f", nm, boxes[i].score);
                    else snprintf(text, sizeof text, "%d %.2f", boxes[i].cls, boxes[i].score);
                    cam_draw_text(&im, (int)boxes[i].x0, (int)boxes[i].y0 - 9 * scale, scale, text, col);
                }
            }
            int y = 2;
            for (int i = 0; i < n_top && i < 3; i++) {
                const char *nm = top_idx[i] < n_labels ? labels[top_idx[i]] : NULL;
                if (nm) snprintf(text, sizeof text, "%s %.1f%%", nm, 100 * top_p[i]);
                else snprintf(text, sizeof text, "class %d %.1f%%", top_idx[i], 100 * top_p[i]);
                cam_draw_text(&im, 2, y, scale, text, white);
                y += 10 * scale;
            }
            snprintf(text, sizeof text, "%.1f FPS  #%llu", fps_shown, (unsigned long long)s->seq);
            cam_draw_text(&im, 2, s->h - 10 * scale, scale, text, white);
            size_t need = ert_jpeg_encode_bound(s->w, s->h), len = 0;
            if (need > jpg_cap) {
                free(jpg_out);
                jpg_out = malloc(need);
                jpg_cap = jpg_out ? need : 0;
            }
            if (jpg_out && ert_jpeg_encode(enc, s->rgb, s->w, s->h, 0, ERT_PIXEL_RGB, o.quality, jpg_out, jpg_cap, &len) == ERT_OK) {
                char path[1100];
                if (mjpeg && (fwrite(jpg_out, 1, len, mjpeg) != len || stream_flushed(mjpeg) != 0) && !write_failed) {
                    snprintf(write_err, sizeof write_err, "--mjpeg-out %s: write failed: %s", o.mjpeg_out, strerror(errno));
                    write_failed = 1;
                }
                if (http) cam_http_publish(http, jpg_out, len);
                if (o.out_dir && !write_failed && save_frame(ctx, o.out_dir, s->seq, jpg_out, len, path, sizeof path) != 0) {
                    snprintf(write_err, sizeof write_err, "--out %s: write failed: %s", path, ert_last_error(ctx));
                    write_failed = 1;
                }
            }
            t[ST_ENCODE] = cli_now() - a;
        }
        pthread_mutex_lock(&ps.mu);
        ps.count--;
        pthread_cond_broadcast(&ps.cv);
        pthread_mutex_unlock(&ps.mu);
        head ^= 1;
        processed++;
        window_frames++;
        for (int k = 0; k < N_STAGES; k++) {
            log_add(&logs[k], t[k] * 1e3);
            window_sum[k] += t[k];
        }
        double now = cli_now();
        if (now - t_window >= 1.0) {
            fps_shown = (float)(window_frames / (now - t_window));
            if (!o.quiet) {
                pthread_mutex_lock(&ps.mu);
                uint64_t corrupt = ps.corrupt;
                pthread_mutex_unlock(&ps.mu);
                fprintf(stderr, "[%6.1fs] %6.1f fps |", now - t_start, fps_shown);
                for (int k = 0; k < N_STAGES; k++)
                    fprintf(stderr, " %s %.2f", stage_names[k], 1e3 * window_sum[k] / (double)window_frames);
                fprintf(stderr, " ms | %llu frames, %llu corrupt\n", (unsigned long long)processed, (unsigned long long)corrupt);
            }
            t_window = now;
            window_frames = 0;
            memset(window_sum, 0, sizeof window_sum);
        }
        if (write_failed) g_stop = 1; /* reported after the summary */
        if (g_stop) break;
    }
    g_stop = 1; /* stop the producer if we left early */
    pthread_mutex_lock(&ps.mu);
    pthread_cond_broadcast(&ps.cv);
    pthread_mutex_unlock(&ps.mu);
    pthread_join(th, NULL);
    thread_started = 0;
    double secs = cli_now() - t_start;
    double fps = secs > 0 ? processed / secs : 0;

    /* Summary. */
    cli_stats stats[N_STAGES];
    for (int k = 0; k < N_STAGES; k++) stats[k] = logs[k].n ? cli_stats_compute(logs[k].v, logs[k].n) : (cli_stats){0};
    fprintf(stderr, "edgert-camera: %llu frames in %.2f s (%.1f fps), %llu corrupt skipped, %llu bytes of garbage skipped\n",
            (unsigned long long)processed, secs, fps, (unsigned long long)ps.corrupt,
            (unsigned long long)cam_source_skipped_bytes(src));
    for (int k = 0; k < N_STAGES; k++)
        fprintf(stderr, "  %-12s mean %7.3f  p50 %7.3f  p90 %7.3f ms\n", stage_names[k], stats[k].mean, stats[k].p50, stats[k].p90);
    if (ps.failed) fprintf(stderr, "edgert-camera: %s\n", ps.err);
    if (g_signal) fprintf(stderr, "edgert-camera: stopped by %s\n", g_signal == SIGINT ? "SIGINT" : "SIGTERM");
    if (write_failed) fprintf(stderr, "edgert-camera: %s\n", write_err);
    if (processed == 0 && g_signal)
        fprintf(stderr, "edgert-camera: no frames: stopped before the first one\n");
    else if (processed == 0)
        fprintf(stderr, "edgert-camera: no frames: %s gave no decodable frame\n", cam_source_describe(src));
    if (o.collect_dir)
        fprintf(stderr, "edgert-camera: collected %llu frames into %s\n", (unsigned long long)collected, o.collect_dir);
    if (o.json) {
        printf("{\"source\":");
        cli_json_str(stdout, o.source);
        printf(",\"model\":");
        cli_json_str(stdout, o.decode_only ? "" : o.model);
        printf(",\"device\":\"%s\",\"fp16\":%s,\"threads\":%d,\"decode_only\":%s,\"input\":[%d,%d],",
               o.device == ERT_DEVICE_CUDA ? "cuda" : o.device == ERT_DEVICE_AUTO ? "auto" : "cpu", o.fp16 ? "true" : "false", o.threads,
               o.decode_only ? "true" : "false", in_w, in_h);
        printf("\"frames\":%llu,\"captured\":%llu,\"corrupt\":%llu,\"timeouts\":%llu,\"skipped_bytes\":%llu,"
               "\"seconds\":%.4f,\"fps\":%.3f,",
               (unsigned long long)processed, (unsigned long long)ps.captured, (unsigned long long)ps.corrupt,
               (unsigned long long)ps.timeouts, (unsigned long long)cam_source_skipped_bytes(src), secs, fps);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("\"max_rss_kb\":%ld,\"collected\":%llu,", ru.ru_maxrss, (unsigned long long)collected);
        printf("\"http_frames_sent\":%llu,\"error\":", (unsigned long long)(http ? cam_http_frames_sent(http) : 0));
        cli_json_str(stdout, write_failed ? write_err : ps.failed ? ps.err : processed == 0 ? "no frames" : "");
        printf(",\"stages_ms\":{");
        for (int k = 0; k < N_STAGES; k++)
            printf("%s\"%s\":{\"mean\":%.4f,\"p50\":%.4f,\"p90\":%.4f}", k ? "," : "", stage_names[k], stats[k].mean,
                   stats[k].p50, stats[k].p90);
        printf("}}\n");
    }
    rc = ps.failed || collect_failed || write_failed || processed == 0 ? 1 : 0;
    if (stream_close(mjpeg, "--mjpeg-out", o.mjpeg_out, write_failed) != 0) rc = 1;
    if (stream_close(fjl, "--frames-jsonl", o.frames_jsonl, write_failed) != 0) rc = 1;
    mjpeg = fjl = NULL;
    rc = cli_stdout_finish("edgert-camera", rc, 0);

done:
    if (thread_started) {
        g_stop = 1;
        pthread_join(th, NULL);
    }
    for (int k = 0; k < N_STAGES; k++) free(logs[k].v);
    for (int i = 0; i < 2; i++) free(ps.slots[i].rgb);
    pthread_mutex_destroy(&ps.mu);
    pthread_cond_destroy(&ps.cv);
    cam_http_stop(http);
    if (mjpeg) fclose(mjpeg);
    if (fjl) fclose(fjl);
    cam_source_close(src);
    cam_labels_free(labels, n_labels);
    free(jpg_out);
    free(work);
    free(boxes);
    ert_jpeg_free(enc);
    ert_preprocessor_free(gpre);
    ert_session_free(sess);
    ert_model_free(model);
    ert_context_free(ctx);
    return rc;
}
