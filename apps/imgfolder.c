/* ImageFolder of JPEG/PGM/PPM images (see imgfolder.h). Steps: list the class
 * directories (sorted), list each one's files (sorted, so the order is the
 * same on every run), read and decode each JPEG/PGM/PPM, convert to gray, resize
 * to the target size, append. */
#define _POSIX_C_SOURCE 200809L
#include "imgfolder.h"
#include "cli_util.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define PNM_MAX_DIM 16384

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names of the entries of dir that are directories (want_dir) or
 * regular files; NULL on error. *n gets the count. */
static char **list_dir(const char *dir, int want_dir, int *n) {
    DIR *d = opendir(dir);
    *n = 0;
    if (!d) return NULL;
    char **v = NULL;
    int cap = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        struct stat st;
        if (stat(path, &st) != 0 || (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) break;
            v = nv;
        }
        if (!(v[*n] = strdup(e->d_name))) break;
        (*n)++;
    }
    closedir(d);
    if (!v) v = calloc(1, sizeof *v);
    if (v) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* Next header integer (skipping whitespace and # comments); -1 on error. */
static int64_t pnm_int(const uint8_t *b, size_t n, size_t *pos) {
    while (*pos < n) {
        if (b[*pos] == '#') {
            while (*pos < n && b[*pos] != '\n') (*pos)++;
        } else if (b[*pos] == ' ' || b[*pos] == '\t' || b[*pos] == '\n' || b[*pos] == '\r') {
            (*pos)++;
        } else {
            break;
        }
    }
    int64_t v = 0;
    int digits = 0;
    while (*pos < n && b[*pos] >= '0' && b[*pos] <= '9' && digits < 9) v = v * 10 + (b[(*pos)++] - '0'), digits++;
    if (!digits || (*pos < n && b[*pos] >= '0' && b[*pos] <= '9')) return -1;
    return v;
}

int pnm_parse_gray(const uint8_t *b, size_t n, uint8_t **px, int64_t *ph, int64_t *pw) {
    *px = NULL;
    if (n < 3 || b[0] != 'P' || (b[1] != '2' && b[1] != '3' && b[1] != '5' && b[1] != '6')) return -1;
    bool ascii = b[1] == '2' || b[1] == '3', color = b[1] == '3' || b[1] == '6';
    size_t pos = 2;
    int64_t w = pnm_int(b, n, &pos), h = pnm_int(b, n, &pos), mx = pnm_int(b, n, &pos);
    if (w < 1 || h < 1 || w > PNM_MAX_DIM || h > PNM_MAX_DIM || mx < 1 || mx > 255) return -1;
    int ch = color ? 3 : 1;
    size_t cnt = (size_t)w * (size_t)h * (size_t)ch;
    if (!ascii) {
        if (pos >= n) return -1;
        pos++; /* the single whitespace after maxval */
        if (n - pos < cnt) return -1;
    }
    uint8_t *g = malloc((size_t)w * (size_t)h);
    if (!g) return -1;
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
        int64_t s[3];
        for (int c = 0; c < ch; c++) {
            s[c] = ascii ? pnm_int(b, n, &pos) : b[pos + i * (size_t)ch + (size_t)c];
            if (s[c] < 0 || s[c] > mx) {
                free(g);
                return -1;
            }
            s[c] = s[c] * 255 / mx;
        }
        g[i] = (uint8_t)(color ? (299 * s[0] + 587 * s[1] + 114 * s[2] + 500) / 1000 : s[0]);
    }
    *px = g;
    *ph = h;
    *pw = w;
    return 0;
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = cli_fopen_regular(path);
    if (!f) return NULL;
    uint8_t *b = NULL;
    long sz = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) >= 0 && sz <= (1L << 28) && fseek(f, 0, SEEK_SET) == 0 &&
        (b = malloc((size_t)sz + 1)) && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = sz > 0 ? (size_t)sz : 0;
    return b;
}

static bool has_ext(const char *name, const char *const *exts) {
    const char *dot = strrchr(name, '.');
    for (; dot && *exts; exts++)
        if (strcasecmp(dot + 1, *exts) == 0) return true;
    return false;
}

void imgfolder_free(imgfolder *f) {
    if (!f) return;
    free(f->pixels);
    free(f->labels);
    memset(f, 0, sizeof *f);
}

/* Decode a JPEG to gray with the library's codec (*px malloc'd). */
static int jpeg_gray(ert_jpeg *j, const uint8_t *buf, size_t n, uint8_t **px, int64_t *ph, int64_t *pw) {
    int w = 0, h = 0, ch = 0;
    *px = NULL;
    if (ert_jpeg_info(j, buf, n, &w, &h, &ch) != ERT_OK || w < 1 || h < 1 || w > PNM_MAX_DIM || h > PNM_MAX_DIM) return -1;
    uint8_t *g = malloc((size_t)w * (size_t)h);
    if (!g) return -1;
    if (ert_jpeg_decode(j, buf, n, ERT_PIXEL_GRAY, g, (size_t)w * (size_t)h, 0, NULL, NULL) != ERT_OK) {
        free(g);
        return -1;
    }
    *px = g, *ph = h, *pw = w;
    return 0;
}

int imgfolder_load(const char *root, int64_t h, int64_t w, ert_jpeg *jpeg, imgfolder *out, char *err, size_t cap) {
    static const char *const pnm[] = {"pgm", "ppm", "pnm", NULL}, *const jpg[] = {"jpg", "jpeg", NULL};
    memset(out, 0, sizeof *out);
    int nc = 0;
    char **cls = list_dir(root, 1, &nc);
    if (!cls || nc == 0) {
        free_list(cls, nc);
        return snprintf(err, cap, "%s: no class directories", root), -1;
    }
    if (nc > 255) {
        free_list(cls, nc);
        return snprintf(err, cap, "%s: %d classes (at most 255)", root, nc), -1;
    }
    int64_t room = 0;
    int rc = 0;
    char path[4096];
    for (int c = 0; c < nc && rc == 0; c++) {
        char dir[4096];
        if (snprintf(dir, sizeof dir, "%s/%s", root, cls[c]) >= (int)sizeof dir) continue;
        int nf = 0;
        char **files = list_dir(dir, 0, &nf);
        for (int i = 0; files && i < nf && rc == 0; i++) {
            bool is_jpg = jpeg && has_ext(files[i], jpg);
            if (!has_ext(files[i], pnm) && !is_jpg) {
                out->n_unsupported++;
                continue;
            }
            if (snprintf(path, sizeof path, "%s/%s", dir, files[i]) >= (int)sizeof path) {
                out->n_corrupt++; /* a path too long to open */
                continue;
            }
            size_t n = 0;
            uint8_t *buf = read_file(path, &n), *g = NULL;
            int64_t ih = 0, iw = 0;
            if (!buf || (is_jpg ? jpeg_gray(jpeg, buf, n, &g, &ih, &iw) : pnm_parse_gray(buf, n, &g, &ih, &iw)) != 0) {
                free(buf);
                out->n_corrupt++;
                continue;
            }
            free(buf);
            if (h <= 0 || w <= 0) h = ih, w = iw;
            if (out->n == room) {
                room = room ? room * 2 : 256;
                uint8_t *np = realloc(out->pixels, (size_t)(room * h * w)), *nl = np ? realloc(out->labels, (size_t)room) : NULL;
                if (np) out->pixels = np;
                if (nl) out->labels = nl;
                if (!np || !nl) {
                    free(g);
                    snprintf(err, cap, "out of memory reading %s", root);
                    rc = -1;
                    break;
                }
            }
            uint8_t *dst = out->pixels + out->n * h * w;
            for (int64_t y = 0; y < h; y++)
                for (int64_t x = 0; x < w; x++) dst[y * w + x] = g[(y * ih / h) * iw + x * iw / w];
            out->labels[out->n++] = (uint8_t)c;
            free(g);
        }
        free_list(files, nf);
    }
    free_list(cls, nc);
    if (rc == 0 && out->n == 0) {
        snprintf(err, cap, "%s: no readable PGM/PPM image", root);
        rc = -1;
    }
    if (rc != 0) {
        int64_t bad = out->n_corrupt, uns = out->n_unsupported;
        imgfolder_free(out);
        out->n_corrupt = bad, out->n_unsupported = uns;
        return -1;
    }
    out->h = h, out->w = w, out->n_classes = nc;
    return 0;
}
