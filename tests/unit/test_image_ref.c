/* Decoding the real photographs in ../shared/images (*.jpg) with ert_jpeg_decode
 * gives exactly the pixels of a reference decoder: djpeg (libjpeg-turbo-progs,
 * path in $ERT_DJPEG) run with its defaults (islow DCT, fancy upsampling), the
 * same settings TurboJPEG uses. SKIPPED without JPEG support, without djpeg or
 * without ../shared. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = sz > 0 ? malloc((size_t)sz) : NULL;
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

int main(void) {
    if (!ert_jpeg_available()) return ert_test_skip("image_ref", "built without JPEG support");
    const char *djpeg = getenv("ERT_DJPEG");
    if (!djpeg || !*djpeg || access(djpeg, X_OK) != 0)
        return ert_test_skip("image_ref", "no reference decoder: install libjpeg-turbo-progs (djpeg)");
    const char *shared = ert_test_shared_dir();
    if (!shared) return ert_test_skip("image_ref", "../shared not found");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/images", shared);
    DIR *d = opendir(dir);
    if (!d) return ert_test_skip("image_ref", "../shared/images not found");
    ert_context *ctx;
    ert_jpeg *j = NULL;
    if (ert_context_create(NULL, &ctx) != ERT_OK || ert_jpeg_create(ctx, &j) != ERT_OK) return 1;
    char tmp[] = "/tmp/ert_image_ref_XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) return 1;
    close(fd);
    int n_img = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".jpg") != 0) continue;
        char path[8400], cmd[17000];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n;
        uint8_t *jpg = slurp(path, &n);
        CHECK(jpg != NULL, "read %s", path);
        if (!jpg) continue;
        int w = 0, h = 0, c = 0;
        if (n < 2 || jpg[0] != 0xFF || jpg[1] != 0xD8) {
            /* The shared set has a PNG named .jpg (img_12.jpg): a real-world
             * non-JPEG that must be refused with a message. */
            ert_status st = ert_jpeg_info(j, jpg, n, &w, &h, &c);
            CHECK(st == ERT_E_FORMAT && strstr(ert_last_error(ctx), "not a JPEG"), "%s: not a JPEG -> %s",
                  e->d_name, ert_status_str(st));
            printf("  %s: not a JPEG (refused: %s)\n", e->d_name, ert_last_error(ctx));
            free(jpg);
            continue;
        }
        CHECK_OK(ert_jpeg_info(j, jpg, n, &w, &h, &c), ctx);
        /* djpeg writes PGM for greyscale JPEGs, PPM for colour. */
        ert_pixel_format fmt = c == 1 ? ERT_PIXEL_GRAY : ERT_PIXEL_RGB;
        size_t bytes = (size_t)w * h * c;
        uint8_t *got = malloc(bytes ? bytes : 1);
        CHECK_OK(ert_jpeg_decode(j, jpg, n, fmt, got, bytes, 0, NULL, NULL), ctx);
        snprintf(cmd, sizeof cmd, "'%s' -outfile '%s' '%s'", djpeg, tmp, path);
        CHECK(system(cmd) == 0, "%s", cmd);
        int rw, rh, rc;
        uint8_t *ref = NULL;
        CHECK_OK(ert_image_read_pnm(ctx, tmp, &rw, &rh, &rc, &ref), ctx);
        if (ref) {
            size_t diff = 0;
            if (rw == w && rh == h && rc == c)
                for (size_t i = 0; i < bytes; i++) diff += got[i] != ref[i];
            CHECK(rw == w && rh == h && rc == c && diff == 0, "%s: %dx%dx%d vs djpeg %dx%dx%d, %zu bytes differ",
                  e->d_name, w, h, c, rw, rh, rc, diff);
            if (diff == 0) printf("  %s: %dx%dx%d identical to djpeg\n", e->d_name, w, h, c);
        }
        n_img++;
        ert_free(ref);
        /* Scaled decodes (IDCT scaling) against djpeg -scale 1/d. */
        for (int dn = 2; dn <= 8; dn *= 2) {
            int sw, sh;
            ert_jpeg_scaled_size(w, h, dn, &sw, &sh);
            int gw = 0, gh = 0;
            CHECK_OK(ert_jpeg_decode_scaled(j, jpg, n, dn, fmt, got, bytes, 0, &gw, &gh), ctx);
            snprintf(cmd, sizeof cmd, "'%s' -scale 1/%d -outfile '%s' '%s'", djpeg, dn, tmp, path);
            CHECK(system(cmd) == 0, "%s", cmd);
            ref = NULL;
            CHECK_OK(ert_image_read_pnm(ctx, tmp, &rw, &rh, &rc, &ref), ctx);
            size_t diff = 0;
            if (ref && rw == sw && rh == sh && gw == sw && gh == sh)
                for (size_t i = 0; i < (size_t)sw * sh * c; i++) diff += got[i] != ref[i];
            CHECK(ref && rw == sw && rh == sh && gw == sw && gh == sh && diff == 0,
                  "%s 1/%d: %dx%d vs djpeg %dx%d, %zu bytes differ", e->d_name, dn, gw, gh, rw, rh, diff);
            ert_free(ref);
        }
        printf("  %s: 1/2, 1/4, 1/8 scaled decodes identical to djpeg -scale\n", e->d_name);
        free(got);
        free(jpg);
    }
    closedir(d);
    unlink(tmp);
    CHECK(n_img > 0, "no .jpg in %s", dir);
    ert_jpeg_free(j);
    ert_context_free(ctx);
    return ert_test_finish("image_ref");
}
