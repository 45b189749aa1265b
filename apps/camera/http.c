/* MJPEG preview server (see http.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IO_TIMEOUT_S 2
#define MAX_REQUEST 4096

struct cam_http {
    int lfd, port;
    char host[64];
    uint64_t refused;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, streaming;
    uint8_t *frame;
    size_t frame_len, frame_cap;
    uint64_t frame_seq, sent;
};

static const char page[] =
    "<!doctype html><html><head><title>edgert-camera</title></head>"
    "<body style=\"background:#222;color:#ddd;font-family:sans-serif\">"
    "<h3>edgert-camera</h3><img id=\"stream\" src=\"/stream\" alt=\"stream\"></body></html>";

static int send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t r = send(fd, c, n, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static void abs_deadline(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) { ts->tv_sec++; ts->tv_nsec -= 1000000000L; }
}

/* One client at a time: anyone else who connects meanwhile gets a short
 * 503 instead of hanging in the backlog. */
static void refuse_waiting(cam_http *h) {
    struct pollfd p = {h->lfd, POLLIN, 0};
    while (poll(&p, 1, 0) > 0) {
        int fd = accept(h->lfd, NULL, NULL);
        if (fd < 0) return;
        struct timeval tv = {0, 200000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        const char busy[] = "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 32\r\n"
                            "Connection: close\r\n\r\none viewer at a time: try later\n";
        send_all(fd, busy, sizeof busy - 1);
        close(fd);
        pthread_mutex_lock(&h->mu);
        h->refused++;
        pthread_mutex_unlock(&h->mu);
    }
}

static void serve_stream(cam_http *h, int fd) {
    const char hdr[] = "HTTP/1.0 200 OK\r\nCache-Control: no-cache\r\nConnection: close\r\n"
                       "Content-Type: multipart/x-mixed-replace; boundary=ertframe\r\n\r\n";
    if (send_all(fd, hdr, sizeof hdr - 1)) return;
    uint8_t *buf = NULL;
    size_t cap = 0;
    uint64_t seen = 0;
    pthread_mutex_lock(&h->mu);
    h->streaming = 1;
    pthread_cond_broadcast(&h->cv);
    for (;;) {
        while (!h->stop && h->frame_seq == seen) {
            struct timespec ts;
            abs_deadline(&ts, 200);
            pthread_cond_timedwait(&h->cv, &h->mu, &ts);
            pthread_mutex_unlock(&h->mu);
            refuse_waiting(h);
            pthread_mutex_lock(&h->mu);
        }
        if (h->stop) break;
        if (cap < h->frame_len) {
            uint8_t *nb = realloc(buf, h->frame_len);
            if (!nb) break;
            buf = nb;
            cap = h->frame_len;
        }
        size_t n = h->frame_len;
        memcpy(buf, h->frame, n);
        seen = h->frame_seq;
        pthread_mutex_unlock(&h->mu);
        refuse_waiting(h);
        char part[128];
        int pl = snprintf(part, sizeof part, "--ertframe\r\nContent-Type: image/jpeg\r\nContent-Length: %zu\r\n\r\n", n);
        int bad = send_all(fd, part, (size_t)pl) || send_all(fd, buf, n) || send_all(fd, "\r\n", 2);
        pthread_mutex_lock(&h->mu);
        if (bad) break;
        h->sent++;
    }
    h->streaming = 0;
    pthread_mutex_unlock(&h->mu);
    free(buf);
}

static void serve_client(cam_http *h, int fd) {
    struct timeval tv = {IO_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char req[MAX_REQUEST + 1];
    size_t n = 0;
    while (n < MAX_REQUEST) { /* read the request head, bounded in size and time */
        ssize_t r = recv(fd, req + n, MAX_REQUEST - n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return;
        n += (size_t)r;
        req[n] = 0;
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n")) break;
    }
    req[n] = 0;
    if (strncmp(req, "GET /stream", 11) == 0 && (req[11] == ' ' || req[11] == '?')) {
        serve_stream(h, fd);
    } else if (strncmp(req, "GET / ", 6) == 0 || strncmp(req, "GET /index.html ", 16) == 0) {
        char hdr[160];
        int hl = snprintf(hdr, sizeof hdr, "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n\r\n", sizeof page - 1);
        if (send_all(fd, hdr, (size_t)hl) == 0) send_all(fd, page, sizeof page - 1);
    } else {
        const char nf[] = "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        send_all(fd, nf, sizeof nf - 1);
    }
}

static void *server_main(void *arg) {
    cam_http *h = arg;
    for (;;) {
        pthread_mutex_lock(&h->mu);
        int stop = h->stop;
        pthread_mutex_unlock(&h->mu);
        if (stop) break;
        struct pollfd p = {h->lfd, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0) continue;
        int fd = accept(h->lfd, NULL, NULL);
        if (fd < 0) continue;
        serve_client(h, fd);
        close(fd);
    }
    return NULL;
}

int cam_http_start(const char *addr, cam_http **out, char *err, size_t errlen) {
    char host[64] = "127.0.0.1";
    const char *colon = strrchr(addr, ':');
    const char *port_s = colon ? colon + 1 : addr;
    if (colon && colon != addr) {
        size_t hl = (size_t)(colon - addr);
        if (hl >= sizeof host) { snprintf(err, errlen, "--serve %s: bad address", addr); return -1; }
        memcpy(host, addr, hl);
        host[hl] = 0;
    }
    char *end;
    long port = strtol(port_s, &end, 10);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (*port_s == 0 || *end || port < 0 || port > 65535 || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "--serve %s: expected IPV4:PORT, e.g. 127.0.0.1:8080", addr);
        return -1;
    }
    cam_http *h = calloc(1, sizeof *h);
    if (!h) { snprintf(err, errlen, "out of memory"); return -1; }
    h->lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    if (h->lfd < 0 || setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(h->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(h->lfd, 1) != 0) {
        snprintf(err, errlen, "--serve %s: %s", addr, strerror(errno));
        if (h->lfd >= 0) close(h->lfd);
        free(h);
        return -1;
    }
    socklen_t sl = sizeof sa;
    getsockname(h->lfd, (struct sockaddr *)&sa, &sl);
    h->port = ntohs(sa.sin_port);
    snprintf(h->host, sizeof h->host, "%s", host);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (pthread_create(&h->thread, NULL, server_main, h) != 0) {
        snprintf(err, errlen, "--serve: cannot start thread");
        close(h->lfd);
        free(h);
        return -1;
    }
    *out = h;
    return 0;
}

int cam_http_port(const cam_http *h) { return h->port; }
const char *cam_http_host(const cam_http *h) { return h->host; }

void cam_http_publish(cam_http *h, const uint8_t *jpeg, size_t n) {
    pthread_mutex_lock(&h->mu);
    if (!h->streaming) { /* nobody watching: skip the copy */
        pthread_mutex_unlock(&h->mu);
        return;
    }
    if (h->frame_cap < n) {
        uint8_t *nb = realloc(h->frame, n);
        if (!nb) { pthread_mutex_unlock(&h->mu); return; }
        h->frame = nb;
        h->frame_cap = n;
    }
    memcpy(h->frame, jpeg, n);
    h->frame_len = n;
    h->frame_seq++;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

int cam_http_wait_client(cam_http *h, int timeout_ms) {
    struct timespec ts;
    abs_deadline(&ts, timeout_ms);
    pthread_mutex_lock(&h->mu);
    while (!h->streaming && !h->stop)
        if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT) break;
    int s = h->streaming;
    pthread_mutex_unlock(&h->mu);
    return s;
}

uint64_t cam_http_frames_sent(cam_http *h) {
    pthread_mutex_lock(&h->mu);
    uint64_t s = h->sent;
    pthread_mutex_unlock(&h->mu);
    return s;
}

void cam_http_stop(cam_http *h) {
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thread, NULL);
    close(h->lfd);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h->frame);
    free(h);
}
