/*
 * cli_util.h - small helpers shared by the apps (CLI, demo, benchmarks):
 * deterministic random numbers, timing, latency statistics, JSON strings,
 * formatting. Not part of the library.
 */
#ifndef ERT_APPS_CLI_UTIL_H
#define ERT_APPS_CLI_UTIL_H

#include "edgert.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* splitmix64: tiny, seedable, the same sequence on every platform. */
typedef struct cli_rng {
    uint64_t s;
} cli_rng;
void cli_rng_seed(cli_rng *r, uint64_t seed);
uint64_t cli_rng_next(cli_rng *r);
/* Uniform in [lo, hi). */
float cli_rng_uniform(cli_rng *r, float lo, float hi);

/* Fill `bytes` of a tensor of `dt` with random values: floats in [-1, 1),
 * integers and bools 0 or 1 (safe as indices). */
void cli_fill_random(cli_rng *r, ert_dtype dt, void *data, size_t bytes);

/* IEEE half and bfloat16 <-> float, round to nearest even. */
float cli_f16_to_f32(uint16_t h);
uint16_t cli_f32_to_f16(float f);
float cli_bf16_to_f32(uint16_t h);
uint16_t cli_f32_to_bf16(float f);
/* Element i of a tensor of dt as a double (for printing and comparing). */
double cli_elem(ert_dtype dt, const void *data, size_t i);

/* The plan cache folder the apps use (ert_session_options.plan_cache_dir):
 * `opt` (a --plan-cache value) if given, NULL for "off"; else
 * $XDG_CACHE_HOME/edgert, else $HOME/.cache/edgert (into buf), else NULL. */
const char *cli_plan_cache_dir(const char *opt, char *buf, size_t n);
/* "off", "used", "written", "not_written" */
const char *cli_plan_cache_state_str(ert_plan_cache_state st);

/* fopen(path, "rb") for a file the apps read whole (a tensor, a reference,
 * an image): only a regular file is opened, and opening never blocks (a FIFO
 * with no writer hung `edgert run -i`/`--expect`). NULL with errno set
 * (EINVAL for a FIFO, device or socket; EISDIR for a folder); cli_fopen_why
 * gives the message. Inline: the apps' sources that tests compile on their
 * own (npy.c, imgfolder.c) need no other file. */
static inline FILE *cli_fopen_regular(const char *path) {
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat sb;
    int e = 0;
    if (fstat(fd, &sb) != 0) e = errno;
    else if (S_ISDIR(sb.st_mode)) e = EISDIR;
    else if (!S_ISREG(sb.st_mode)) e = EINVAL;
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) e = errno;
    FILE *f = e ? NULL : fdopen(fd, "rb");
    if (!f) {
        if (!e) e = errno;
        close(fd);
        errno = e;
    }
    return f;
}
static inline const char *cli_fopen_why(int err) {
    return err == EINVAL ? "not a regular file (a FIFO, device or socket)" : strerror(err);
}

/* stdout is where results go (help, version, reports): a failed write (full
 * disk, closed pipe) must not end in exit 0. Flushes stdout; on a failure now
 * or earlier (first_errno, 0 if none seen) prints "WHO: cannot write to
 * standard output: REASON" to stderr and returns rc, or 1 if rc is 0. */
int cli_stdout_finish(const char *who, int rc, int first_errno);

/* Monotonic time in seconds. */
double cli_now(void);

typedef struct cli_stats {
    double p50, p90, mean, min, max; /* same unit as the samples */
} cli_stats;
/* Sorts `v` in place. Percentiles by nearest rank. */
cli_stats cli_stats_compute(double *v, int n);

/* Elements of a shape (dims must be >= 0); -1 on overflow. */
int64_t cli_numel(int ndim, const int64_t *dims);
/* "(1, 3, 224, 224)", dynamic dims as "?". */
const char *cli_shape_str(char *buf, size_t n, int ndim, const int64_t *dims);
/* "1.50 MiB" */
const char *cli_bytes_str(char *buf, size_t n, size_t bytes);
/* Write s as a JSON string literal (with quotes). */
void cli_json_str(FILE *f, const char *s);
/* Make an output name safe as a file name: keep [A-Za-z0-9._-], map the rest
 * to '_', never "", "." or ".."; at most n-1 bytes. */
void cli_sanitize_name(char *out, size_t n, const char *name);
/* Parse a whole decimal int in [lo, hi]; 0 on success. */
int cli_parse_int(const char *s, long lo, long hi, long *out);

#endif
