/* The confusion matrix as a heatmap (confusion_image.h). */
#include "runlog/confusion_image.h"

#include "runlog/image_text.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME 16 /* characters of a class name shown */

static void fill(uint8_t *px, int w, int x0, int y0, int cw, int ch, const uint8_t rgb[3])
{
    for (int y = y0; y < y0 + ch; y++)
        for (int x = x0; x < x0 + cw; x++)
            memcpy(px + ((size_t)y * (size_t)w + (size_t)x) * 3, rgb, 3);
}

stk_status stk_confusion_image(const uint64_t *cm, int classes, const char *const *names,
                               uint8_t **rgb, int *width, int *height)
{
    *rgb = NULL;
    if (classes < 1 || classes > 1000)
        return stk_error(STK_ERR_INVALID_ARG, "confusion image: %d classes (1..1000)", classes);
    int scale = classes <= 20 ? 2 : 1;
    int cell = 800 / classes;
    cell = cell < 4 ? 4 : cell > 48 ? 48 : cell;
    int glyph_w = STK_TEXT_CELL_W * scale, glyph_h = STK_TEXT_CELL_H * scale;
    bool row_labels = cell >= glyph_h;
    int pad = 6;
    int left = row_labels ? (MAX_NAME + 5) * glyph_w + pad : pad;
    int top = 2 * glyph_h + 3 * pad;
    int w = left + classes * cell + pad, h = top + classes * cell + pad;
    uint8_t *px = malloc((size_t)w * (size_t)h * 3);
    if (!px) return stk_error(STK_ERR_NOMEM, "out of memory for a %dx%d confusion image", w, h);
    memset(px, 255, (size_t)w * (size_t)h * 3);
    stk_image_draw_text(px, w, h, 3, pad, pad, scale, "ROWS TRUE / COLUMNS PREDICTED", 0);
    char text[64];
    for (int k = 0; k < classes; k++) {
        uint64_t row = 0;
        for (int j = 0; j < classes; j++) row += cm[(size_t)k * (size_t)classes + (size_t)j];
        int y = top + k * cell;
        if (row_labels) {
            char num[16];
            snprintf(num, sizeof num, "%d", k);
            const char *name = names && names[k] ? names[k] : "";
            snprintf(text, sizeof text, "%4s %.*s", num, MAX_NAME, name);
            stk_image_draw_text(px, w, h, 3, pad, y + (cell - glyph_h) / 2 + scale, scale, text, 0);
        }
        snprintf(text, sizeof text, "%d", k); /* column numbers, where they fit */
        int tw = (int)strlen(text) * glyph_w;
        if (tw <= cell)
            stk_image_draw_text(px, w, h, 3, left + k * cell + (cell - tw) / 2 + scale,
                                top - glyph_h - pad / 2, scale, text, 0);
        for (int j = 0; j < classes; j++) {
            uint64_t n = cm[(size_t)k * (size_t)classes + (size_t)j];
            double t = row ? (double)n / (double)row : 0; /* white .. dark blue */
            uint8_t c[3] = {(uint8_t)(255 - t * (255 - 8)), (uint8_t)(255 - t * (255 - 48)),
                            (uint8_t)(255 - t * (255 - 107))};
            int x = left + j * cell;
            fill(px, w, x, y, cell, cell, c);
            if (cell > 6) { /* a light grid line */
                const uint8_t line[3] = {225, 225, 225};
                fill(px, w, x, y, cell, 1, line);
                fill(px, w, x, y, 1, cell, line);
            }
            snprintf(text, sizeof text, "%" PRIu64, n);
            tw = (int)strlen(text) * glyph_w;
            if (n && tw + 2 <= cell && glyph_h + 2 <= cell)
                stk_image_draw_text(px, w, h, 3, x + (cell - tw) / 2 + scale,
                                    y + (cell - glyph_h) / 2 + scale, scale, text,
                                    t > 0.5 ? 255 : 0);
        }
    }
    *rgb = px, *width = w, *height = h;
    return STK_OK;
}
