/* Binary PPM (P6) and PGM (P5) files (decode/image_decode_impl.h), as
 * netpbm defines them: a header of whitespace-separated width, height and
 * maxval (comments from '#' to the line's end), one whitespace byte, then
 * the samples, 1 byte each when maxval < 256, else 2 (big-endian). Samples
 * are scaled to 0..255 (v * 255 / maxval, rounded; maxval 255 unchanged). */
#include "decode/image_decode_impl.h"

#include <stdlib.h>

/* The next header number at *at; -1 if none. */
static long number(const uint8_t *d, size_t len, size_t *at)
{
    size_t i = *at;
    for (;;) {
        while (i < len && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r' ||
                           d[i] == '\v' || d[i] == '\f'))
            i++;
        if (i < len && d[i] == '#') {
            while (i < len && d[i] != '\n') i++;
            continue;
        }
        break;
    }
    long v = 0;
    size_t start = i;
    while (i < len && d[i] >= '0' && d[i] <= '9' && v <= 1000000) v = v * 10 + (d[i++] - '0');
    if (i == start || v > 1000000) return -1;
    *at = i;
    return v;
}

stk_status stk_pnm_decode(const uint8_t *d, size_t len, uint64_t max_pixels, uint8_t **pixels,
                          uint32_t *width, uint32_t *height, int *channels)
{
    *pixels = NULL;
    if (len < 2 || d[0] != 'P' || (d[1] != '5' && d[1] != '6')) {
        if (len >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '4')
            return stk_error(STK_ERR_UNSUPPORTED,
                             "PNM: ASCII or bitmap P%c files are not supported (binary P5/P6 "
                             "are)",
                             d[1]);
        return stk_error(STK_ERR_CORRUPT, "not a binary PPM/PGM file");
    }
    int c = d[1] == '6' ? 3 : 1;
    size_t at = 2;
    long w = number(d, len, &at), h = number(d, len, &at), maxval = number(d, len, &at);
    if (w < 1 || h < 1 || w > 65535 || h > 65535 || maxval < 1 || maxval > 65535)
        return stk_error(STK_ERR_CORRUPT, "PNM: a bad header (%ldx%ld, maxval %ld)", w, h, maxval);
    if (at >= len) return stk_error(STK_ERR_CORRUPT, "PNM: truncated header");
    at++; /* the one whitespace byte before the samples */
    if ((uint64_t)w * (uint64_t)h > (max_pixels ? max_pixels : 64000000))
        return stk_error(STK_ERR_LIMIT, "PNM: %ldx%ld pixels, above the limit", w, h);
    size_t n = (size_t)w * (size_t)h * (size_t)c, bytes = maxval < 256 ? 1 : 2;
    if (len - at < n * bytes)
        return stk_error(STK_ERR_CORRUPT, "PNM: truncated: %zu bytes of samples, %zu in the file",
                         n * bytes, len - at);
    uint8_t *out = malloc(n);
    if (!out) return stk_error(STK_ERR_NOMEM, "out of memory");
    const uint8_t *s = d + at;
    for (size_t i = 0; i < n; i++) {
        unsigned v = bytes == 1 ? s[i] : (unsigned)s[2 * i] << 8 | s[2 * i + 1];
        if (v > (unsigned)maxval) v = (unsigned)maxval;
        out[i] = maxval == 255
                     ? (uint8_t)v
                     : (uint8_t)((v * 255u * 2 + (unsigned)maxval) / (2u * (unsigned)maxval));
    }
    *pixels = out;
    *width = (uint32_t)w;
    *height = (uint32_t)h;
    *channels = c;
    return STK_OK;
}
