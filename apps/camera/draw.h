/* Drawing on packed RGB frames: rectangles and text in a built-in 5x7 bitmap
 * font (digits, A-Z, and . : % - _ / ( ) = , + # ' ? ! ; lower case is drawn
 * as upper case, anything else as a box). */
#ifndef CAM_DRAW_H
#define CAM_DRAW_H
#include <stddef.h>
#include <stdint.h>

typedef struct cam_image {
    uint8_t *px;
    int w, h;
    size_t stride;
} cam_image;

void cam_draw_rect(cam_image *im, int x0, int y0, int x1, int y1, int thick, const uint8_t rgb[3]);
void cam_fill_rect(cam_image *im, int x0, int y0, int x1, int y1, const uint8_t rgb[3]);
/* Text with its top-left at (x, y), each font pixel `scale` pixels, on a
 * dark background box. Returns the width drawn. */
int cam_draw_text(cam_image *im, int x, int y, int scale, const char *text, const uint8_t rgb[3]);
/* A distinct colour per class id. */
void cam_class_color(int cls, uint8_t rgb[3]);

#endif
