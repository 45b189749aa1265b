/* A tiny MJPEG-over-HTTP preview server: one client at a time (others wait
 * in the listen backlog), loopback unless told otherwise, every socket
 * operation under a timeout so a stuck client cannot stall the pipeline.
 *   GET /        an HTML page showing the stream
 *   GET /stream  multipart/x-mixed-replace; boundary=ertframe, one JPEG per part
 * The pipeline publishes frames; the server thread sends the newest one (a
 * slow client skips frames rather than queueing them). */
#ifndef CAM_HTTP_H
#define CAM_HTTP_H
#include <stddef.h>
#include <stdint.h>

typedef struct cam_http cam_http;

/* addr: "127.0.0.1:8080", ":8080" or "8080" (loopback), port 0 = any free
 * port. Returns 0, or -1 with err filled. */
int cam_http_start(const char *addr, cam_http **out, char *err, size_t errlen);
int cam_http_port(const cam_http *h);
const char *cam_http_host(const cam_http *h);
/* Copies the JPEG; the newest frame replaces an unsent one. */
void cam_http_publish(cam_http *h, const uint8_t *jpeg, size_t n);
/* Waits until a client is streaming; 1 if one is, 0 after timeout_ms. */
int cam_http_wait_client(cam_http *h, int timeout_ms);
uint64_t cam_http_frames_sent(cam_http *h);
void cam_http_stop(cam_http *h);

#endif
