/* autocontrast and equalize, as torchvision 0.14 computes them on uint8
 * tensors: a 256-entry table per channel from the image's own statistics
 * (min and max, or the histogram), then applied. */
#include "augment/pixel_ops_impl.h"

#include <string.h>

/* clamp(0, 255) then .to(uint8), which truncates. */
static inline uint8_t to_u8(float x)
{
    x = x < 0.0f ? 0.0f : x > 255.0f ? 255.0f : x;
    return (uint8_t)x;
}

static void apply_luts(uint8_t luts[3][256], uint8_t *img, size_t stride, int w, int h, int c)
{
    for (int y = 0; y < h; y++) {
        uint8_t *row = img + (size_t)y * stride;
        if (c == 1) {
            for (int x = 0; x < w; x++) row[x] = luts[0][row[x]];
            continue;
        }
        for (int x = 0; x < w; x++) {
            uint8_t *p = row + (size_t)x * 3;
            p[0] = luts[0][p[0]], p[1] = luts[1][p[1]], p[2] = luts[2][p[2]];
        }
    }
}

/* autocontrast: each channel stretched from its min..max to 0..255. */
static void autocontrast_luts(const uint8_t *img, size_t stride, int w, int h, int c,
                              uint8_t luts[3][256])
{
    uint8_t lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    for (int y = 0; y < h; y++) {
        const uint8_t *row = img + (size_t)y * stride;
        for (int ch = 0; ch < c; ch++) {
            uint8_t l = lo[ch], u = hi[ch];
            for (int x = 0; x < w; x++) {
                uint8_t v = row[(size_t)x * (size_t)c + (size_t)ch];
                l = v < l ? v : l, u = v > u ? v : u;
            }
            lo[ch] = l, hi[ch] = u;
        }
    }
    for (int ch = 0; ch < c; ch++) {
        float minimum = lo[ch], scale = 255.0f / ((float)hi[ch] - (float)lo[ch]);
        if (hi[ch] == lo[ch]) minimum = 0.0f, scale = 1.0f;
        for (int v = 0; v < 256; v++) luts[ch][v] = to_u8(((float)v - minimum) * scale);
    }
}

/* equalize (torchvision's _scale_channel): the histogram's cumulative
 * counts spread over 0..255 in steps of (all but the last non-empty bin's
 * count) / 255; a channel with step 0 is left alone. */
static void equalize_luts(const uint8_t *img, size_t stride, int w, int h, int c,
                          uint8_t luts[3][256])
{
    uint64_t hist[3][256];
    memset(hist, 0, sizeof hist);
    for (int y = 0; y < h; y++) {
        const uint8_t *row = img + (size_t)y * stride;
        if (c == 1)
            for (int x = 0; x < w; x++) hist[0][row[x]]++;
        else
            for (int x = 0; x < w; x++) {
                const uint8_t *p = row + (size_t)x * 3;
                hist[0][p[0]]++, hist[1][p[1]]++, hist[2][p[2]]++;
            }
    }
    for (int ch = 0; ch < c; ch++) {
        uint64_t total = 0, last = 0;
        for (int v = 0; v < 256; v++)
            if (hist[ch][v]) total += hist[ch][v], last = hist[ch][v];
        uint64_t step = (total - last) / 255;
        uint64_t cum = 0;
        for (int v = 0; v < 256; v++) {
            if (step == 0) {
                luts[ch][v] = (uint8_t)v;
                continue;
            }
            uint64_t q = (cum + step / 2) / step; /* lut shifted by one: cumsum before v */
            luts[ch][v] = (uint8_t)(q > 255 ? 255 : q);
            cum += hist[ch][v];
        }
    }
}

void stk_pixel_histogram_op(const stk_pixel_op *op, uint8_t *img, size_t stride, int w, int h,
                            int c)
{
    uint8_t luts[3][256];
    if (op->kind == STK_OP_AUTOCONTRAST)
        autocontrast_luts(img, stride, w, h, c, luts);
    else
        equalize_luts(img, stride, w, h, c, luts);
    apply_luts(luts, img, stride, w, h, c);
}
