/*
 * imgfolder.h - an ImageFolder dataset (root/<class>/<image>) of PGM/PPM
 * files (P2, P3, P5, P6, maxval 1..255), for `edgert train`.
 *
 * Classes are the sub-directories in byte order of their names (index 0, 1,
 * ...). JPEG files are decoded with the library's TurboJPEG codec when one is
 * given (ert_jpeg_available()); PGM/PPM are parsed here (P2/P3 ASCII and any
 * maxval too, which the library's binary-only reader refuses). Every image is
 * converted to grayscale (luma 0.299/0.587/0.114) and
 * resized with nearest neighbour to H x W. Files that cannot be read or
 * parsed are skipped and counted; other extensions (.png, or .jpg without a
 * codec) are skipped and counted separately. Files are treated as
 * hostile: header fields bounded, sizes overflow-checked, truncation and
 * out-of-range samples refused.
 *
 * Part of the apps, not of the library.
 */
#ifndef ERT_APPS_IMGFOLDER_H
#define ERT_APPS_IMGFOLDER_H

#include "edgert.h"

#include <stddef.h>
#include <stdint.h>

typedef struct imgfolder {
    int64_t n, h, w;        /* n images of h x w bytes */
    uint8_t *pixels;        /* n * h * w, malloc'd */
    uint8_t *labels;        /* n */
    int n_classes;
    int64_t n_corrupt;      /* unreadable or malformed PGM/PPM files */
    int64_t n_unsupported;  /* other file types */
} imgfolder;

/* h, w <= 0: the first readable image's size. jpeg may be NULL (JPEG files
 * then count as other types). Returns -1 with a message in
 * err on failure (no class directories, no readable image, out of memory). */
int imgfolder_load(const char *root, int64_t h, int64_t w, ert_jpeg *jpeg, imgfolder *out, char *err, size_t err_size);
void imgfolder_free(imgfolder *f);
/* Parse one PGM/PPM image held in memory into gray (malloc'd *px, *ph x *pw). */
int pnm_parse_gray(const uint8_t *buf, size_t n, uint8_t **px, int64_t *ph, int64_t *pw);

#endif
