/* BMP files to RGB (decode/image_decode_impl.h), as PIL's BmpImagePlugin
 * reads them: Windows (40/52/56/108/124-byte headers) and OS/2 (12 and 64)
 * headers, bottom-up and top-down rows, 1/4/8-bit palettes, 16-bit 5-5-5,
 * 24-bit BGR, 32-bit BGRX, and 16/32-bit bit fields (a field's top 8 bits
 * at most, scaled v * 255 / max rounded down, as PIL). RLE compression is
 * refused. */
#include "decode/image_decode_impl.h"

#include <stdlib.h>
#include <string.h>

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const uint8_t *p) { return le16(p) | le16(p + 2) << 16; }

/* One bit field: where it sits and how wide it is (at most 8 bits used). */
typedef struct field {
    int shift, bits;
} field;

static field field_of(uint32_t mask)
{
    field f = {0, 0};
    if (!mask) return f;
    while (!(mask >> f.shift & 1)) f.shift++;
    while (f.shift + f.bits < 32 && (mask >> (f.shift + f.bits) & 1)) f.bits++;
    if (f.bits > 8) f.shift += f.bits - 8, f.bits = 8; /* keep the top 8 bits */
    return f;
}

/* A field's value scaled to 0..255 as PIL's unpackers do: v * 255 / max,
 * rounded down. */
static uint8_t expand(uint32_t v, field f)
{
    if (!f.bits) return 0;
    uint32_t max = (1u << f.bits) - 1;
    return (uint8_t)((v >> f.shift & max) * 255u / max);
}

stk_status stk_bmp_decode(const uint8_t *d, size_t len, uint64_t max_pixels, uint8_t **pixels,
                          uint32_t *width, uint32_t *height)
{
    *pixels = NULL;
    if (len < 26 || d[0] != 'B' || d[1] != 'M') return stk_error(STK_ERR_CORRUPT, "not a BMP file");
    uint32_t offset = le32(d + 10), hsize = le32(d + 14);
    if (hsize != 12 && hsize != 40 && hsize != 52 && hsize != 56 && hsize != 64 && hsize != 108 &&
        hsize != 124)
        return stk_error(STK_ERR_UNSUPPORTED, "BMP: a %u-byte header (unknown version)", hsize);
    if (len < 14 + (size_t)hsize) return stk_error(STK_ERR_CORRUPT, "BMP: truncated header");
    const uint8_t *h = d + 14;
    int64_t w, ht;
    uint32_t bpp, compression = 0, colors = 0;
    if (hsize == 12) {
        w = le16(h + 4), ht = (int16_t)le16(h + 6), bpp = le16(h + 10);
    } else {
        w = (int32_t)le32(h + 4), ht = (int32_t)le32(h + 8), bpp = le16(h + 14);
        compression = le32(h + 16), colors = le32(h + 32);
    }
    bool top_down = ht < 0;
    if (top_down) ht = -ht;
    if (w <= 0 || ht <= 0 || w > 65535 || ht > 65535)
        return stk_error(STK_ERR_CORRUPT, "BMP: a %lldx%lld image", (long long)w, (long long)ht);
    if ((uint64_t)w * (uint64_t)ht > (max_pixels ? max_pixels : 64000000))
        return stk_error(STK_ERR_LIMIT, "BMP: %lldx%lld pixels, above the limit", (long long)w,
                         (long long)ht);
    if (compression == 1 || compression == 2)
        return stk_error(STK_ERR_UNSUPPORTED, "BMP: RLE compression is not supported (save it "
                                              "uncompressed, or as PNG)");
    if (compression != 0 && compression != 3 && compression != 6)
        return stk_error(STK_ERR_UNSUPPORTED, "BMP: compression %u is not supported", compression);
    if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32)
        return stk_error(STK_ERR_UNSUPPORTED, "BMP: %u bits per pixel", bpp);
    /* Bit fields: in the header (v3+) or right after a 40-byte one. */
    field rgb[3];
    uint32_t masks[3] = {0x7c00, 0x3e0, 0x1f}; /* 16-bit BI_RGB: 5-5-5 */
    if (bpp == 32 || bpp == 24) masks[0] = 0xff0000, masks[1] = 0xff00, masks[2] = 0xff;
    if (compression == 3 || compression == 6) {
        if (bpp != 16 && bpp != 32)
            return stk_error(STK_ERR_CORRUPT, "BMP: bit fields with %u bits per pixel", bpp);
        if (len < 14 + 40 + 12) return stk_error(STK_ERR_CORRUPT, "BMP: truncated bit fields");
        for (int i = 0; i < 3; i++) masks[i] = le32(h + 40 + 4 * i);
    }
    for (int i = 0; i < 3; i++) rgb[i] = field_of(masks[i]);
    /* The palette: after the header (and a 40-byte header's bit fields). */
    uint8_t pal[256][3];
    memset(pal, 0, sizeof pal);
    if (bpp <= 8) {
        size_t entry = hsize == 12 ? 3 : 4, at = 14 + (size_t)hsize;
        if (compression == 3) at += 12;
        if (compression == 6) at += 16;
        uint32_t n = colors && colors < (1u << bpp) ? colors : 1u << bpp;
        for (uint32_t i = 0; i < n && at + entry * (i + 1) <= len; i++) {
            const uint8_t *e = d + at + entry * i;
            pal[i][0] = e[2], pal[i][1] = e[1], pal[i][2] = e[0];
        }
    }
    size_t stride = ((size_t)w * bpp + 31) / 32 * 4;
    if (offset > len || stride * (size_t)ht > len - offset)
        return stk_error(STK_ERR_CORRUPT, "BMP: truncated: %zu bytes of pixels, %zu in the file",
                         stride * (size_t)ht, offset > len ? (size_t)0 : len - offset);
    uint8_t *out = malloc((size_t)w * (size_t)ht * 3);
    if (!out) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int64_t y = 0; y < ht; y++) {
        const uint8_t *row = d + offset + stride * (size_t)(top_down ? y : ht - 1 - y);
        uint8_t *o = out + (size_t)y * (size_t)w * 3;
        for (int64_t x = 0; x < w; x++, o += 3) {
            if (bpp <= 8) {
                size_t bit = (size_t)x * bpp;
                unsigned idx = (unsigned)(row[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
                memcpy(o, pal[idx], 3);
            } else if (bpp == 24) {
                const uint8_t *p = row + 3 * x;
                o[0] = p[2], o[1] = p[1], o[2] = p[0];
            } else {
                uint32_t v = bpp == 16 ? le16(row + 2 * x) : le32(row + 4 * x);
                for (int c = 0; c < 3; c++) o[c] = expand(v, rgb[c]);
            }
        }
    }
    *pixels = out;
    *width = (uint32_t)w;
    *height = (uint32_t)ht;
    return STK_OK;
}
