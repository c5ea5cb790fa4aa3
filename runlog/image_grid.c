#include "runlog/image_grid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BORDER 2

stk_status stk_image_grid_nchw(const float *x, int n, int c, int height, int width,
                               const float mean[3], const float std[3], int max_cells,
                               uint8_t **pixels, int *grid_w, int *grid_h)
{
    *pixels = NULL;
    if (n < 1 || (c != 1 && c != 3) || height < 1 || width < 1 || max_cells < 1 || height > 4096 ||
        width > 4096)
        return stk_error(STK_ERR_INVALID_ARG, "image grid: cannot tile %d images of %dx%dx%d", n, c,
                         height, width);
    if (n > max_cells) n = max_cells;
    int cols = (int)ceil(sqrt((double)n));
    int rows = (n + cols - 1) / cols;
    int gw = cols * width + (cols + 1) * BORDER, gh = rows * height + (rows + 1) * BORDER;
    uint8_t *g = malloc((size_t)gw * (size_t)gh * (size_t)c);
    if (!g) return stk_error(STK_ERR_NOMEM, "image grid: no memory for %dx%d", gw, gh);
    memset(g, 64, (size_t)gw * (size_t)gh * (size_t)c); /* dark grey borders */
    size_t plane = (size_t)height * (size_t)width;
    for (int i = 0; i < n; i++) {
        int gx = BORDER + (i % cols) * (width + BORDER);
        int gy = BORDER + (i / cols) * (height + BORDER);
        for (int ch = 0; ch < c; ch++) {
            const float *src = x + ((size_t)i * (size_t)c + (size_t)ch) * plane;
            for (int y = 0; y < height; y++)
                for (int xx = 0; xx < width; xx++) {
                    float v =
                        (src[(size_t)y * (size_t)width + (size_t)xx] * std[ch] + mean[ch]) * 255.f;
                    v = v < 0 ? 0 : v > 255 ? 255 : v; /* NaN stays 0 */
                    g[(((size_t)(gy + y) * (size_t)gw) + (size_t)(gx + xx)) * (size_t)c +
                      (size_t)ch] = (uint8_t)lrintf(v == v ? v : 0);
                }
        }
    }
    *pixels = g;
    *grid_w = gw;
    *grid_h = gh;
    return STK_OK;
}
