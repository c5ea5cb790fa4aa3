/* PNG decoding (png_decoder.h), from the PNG specification (W3C, 3rd ed.):
 * chunks, zlib-compressed scanlines, the five filters, samples to u8. */
#include "augment/png_decoder.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

bool stk_png_sniff(const uint8_t *data, size_t len)
{
    return len >= 8 && memcmp(data, signature, 8) == 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

typedef struct header {
    uint32_t w, h;
    int depth, color, interlace;
    int samples; /* per pixel: 1 grey, 3 RGB, 1 palette, 2 grey+alpha, 4 RGBA */
    size_t row;  /* bytes per scanline, without the filter byte */
    int bpp;     /* bytes per complete pixel (at least 1): the filters' distance */
    uint8_t pal[256][3];
    int n_pal;
} header;

static stk_status parse_ihdr(const uint8_t *d, uint32_t len, header *h)
{
    if (len != 13) return stk_error(STK_ERR_CORRUPT, "PNG: IHDR of %u bytes", len);
    h->w = be32(d), h->h = be32(d + 4), h->depth = d[8], h->color = d[9], h->interlace = d[12];
    if (!h->w || !h->h || h->w > 0x7fffffff || h->h > 0x7fffffff)
        return stk_error(STK_ERR_CORRUPT, "PNG: a %ux%u image", h->w, h->h);
    static const struct {
        int color, samples;
        const char *depths; /* the bit depths allowed */
    } kinds[] = {{0, 1, "\x01\x02\x04\x08\x10"},
                 {2, 3, "\x08\x10"},
                 {3, 1, "\x01\x02\x04\x08"},
                 {4, 2, "\x08\x10"},
                 {6, 4, "\x08\x10"}};
    h->samples = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].color == h->color && strchr(kinds[i].depths, h->depth) && h->depth)
            h->samples = kinds[i].samples;
    if (!h->samples)
        return stk_error(STK_ERR_CORRUPT, "PNG: colour type %d with bit depth %d", h->color,
                         h->depth);
    if (d[10] != 0 || d[11] != 0 || h->interlace > 1)
        return stk_error(STK_ERR_CORRUPT, "PNG: unknown compression, filter or interlace method");
    if (h->interlace)
        return stk_error(STK_ERR_UNSUPPORTED, "PNG: interlaced (Adam7) images are not supported");
    uint64_t bits = (uint64_t)h->w * (uint64_t)h->samples * (uint64_t)h->depth;
    h->row = (size_t)((bits + 7) / 8);
    h->bpp = h->samples * h->depth / 8 ? h->samples * h->depth / 8 : 1;
    return STK_OK;
}

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Undo the filters in place: rows of 1 + row bytes. */
static stk_status unfilter(uint8_t *raw, const header *h)
{
    size_t stride = h->row + 1;
    for (uint32_t y = 0; y < h->h; y++) {
        uint8_t *r = raw + (size_t)y * stride, *line = r + 1;
        const uint8_t *up = y ? raw + (size_t)(y - 1) * stride + 1 : NULL;
        int bpp = h->bpp;
        switch (r[0]) {
        case 0: break;
        case 1:
            for (size_t i = (size_t)bpp; i < h->row; i++) line[i] += line[i - (size_t)bpp];
            break;
        case 2:
            for (size_t i = 0; up && i < h->row; i++) line[i] += up[i];
            break;
        case 3:
            for (size_t i = 0; i < h->row; i++) {
                int a = i >= (size_t)bpp ? line[i - (size_t)bpp] : 0, b = up ? up[i] : 0;
                line[i] += (uint8_t)((a + b) / 2);
            }
            break;
        case 4:
            for (size_t i = 0; i < h->row; i++) {
                int a = i >= (size_t)bpp ? line[i - (size_t)bpp] : 0, b = up ? up[i] : 0,
                    c = up && i >= (size_t)bpp ? up[i - (size_t)bpp] : 0;
                line[i] += (uint8_t)paeth(a, b, c);
            }
            break;
        default: return stk_error(STK_ERR_CORRUPT, "PNG: row %u has filter type %d", y, r[0]);
        }
    }
    return STK_OK;
}

/* Sample s of pixel x in a row, scaled to 8 bits (16-bit: the high byte;
 * 1/2/4-bit grey: stretched to 0..255; palette: the index). */
static int sample(const uint8_t *line, const header *h, uint32_t x, int s)
{
    if (h->depth == 8) return line[(size_t)x * (size_t)h->samples + (size_t)s];
    if (h->depth == 16) return line[((size_t)x * (size_t)h->samples + (size_t)s) * 2];
    size_t bit = (size_t)x * (size_t)h->depth; /* one sample per pixel below 8 bits */
    int v = (line[bit / 8] >> (8 - h->depth - (int)(bit % 8))) & ((1 << h->depth) - 1);
    return h->color == 3 ? v : v * 255 / ((1 << h->depth) - 1);
}

static stk_status to_pixels(const uint8_t *raw, const header *h, int channels, uint8_t *out)
{
    for (uint32_t y = 0; y < h->h; y++) {
        const uint8_t *line = raw + (size_t)y * (h->row + 1) + 1;
        for (uint32_t x = 0; x < h->w; x++) {
            int rgb[3];
            if (h->color == 3) {
                int i = sample(line, h, x, 0);
                if (i >= h->n_pal)
                    return stk_error(STK_ERR_CORRUPT, "PNG: palette index %d of %d colours", i,
                                     h->n_pal);
                for (int c = 0; c < 3; c++) rgb[c] = h->pal[i][c];
            } else if (h->samples <= 2) { /* grey, grey + alpha */
                rgb[0] = rgb[1] = rgb[2] = sample(line, h, x, 0);
            } else {
                for (int c = 0; c < 3; c++) rgb[c] = sample(line, h, x, c);
            }
            uint8_t *o = out + ((size_t)y * h->w + x) * (size_t)channels;
            if (channels == 3)
                o[0] = (uint8_t)rgb[0], o[1] = (uint8_t)rgb[1], o[2] = (uint8_t)rgb[2];
            else /* PIL's L, in its fixed point: 0.299 R + 0.587 G + 0.114 B, rounded */
                o[0] = (uint8_t)((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
        }
    }
    return STK_OK;
}

stk_status stk_png_decode(const uint8_t *data, size_t len, int channels, uint64_t max_pixels,
                          uint8_t **pixels, uint32_t *width, uint32_t *height)
{
    *pixels = NULL;
    if (channels != 1 && channels != 3)
        return stk_error(STK_ERR_INVALID_ARG, "PNG: %d channels (1 or 3)", channels);
    if (!stk_png_sniff(data, len)) return stk_error(STK_ERR_CORRUPT, "not a PNG file");
    header h = {0};
    bool have_header = false, ended = false;
    z_stream z = {0};
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    stk_status st = STK_OK;
    bool z_open = false;
    for (size_t at = 8; st == STK_OK && !ended;) {
        if (len - at < 12) {
            st = stk_error(STK_ERR_CORRUPT, "PNG: truncated (no IEND chunk)");
            break;
        }
        uint32_t n = be32(data + at);
        const uint8_t *type = data + at + 4, *body = data + at + 8;
        if (n > len - at - 12) {
            st = stk_error(STK_ERR_CORRUPT, "PNG: a %.4s chunk of %u bytes past the file's end",
                           (const char *)type, n);
            break;
        }
        uint32_t crc = (uint32_t)crc32(0, type, n + 4);
        if (crc != be32(body + n)) {
            st = stk_error(STK_ERR_CORRUPT, "PNG: the %.4s chunk's CRC does not match",
                           (const char *)type);
            break;
        }
        at += 12 + (size_t)n;
        if (!have_header && memcmp(type, "IHDR", 4)) {
            st = stk_error(STK_ERR_CORRUPT, "PNG: the first chunk is not IHDR");
        } else if (!memcmp(type, "IHDR", 4)) {
            if ((st = parse_ihdr(body, n, &h)) != STK_OK) break;
            have_header = true;
            if ((uint64_t)h.w * h.h > (max_pixels ? max_pixels : 64000000)) {
                st = stk_error(STK_ERR_LIMIT, "PNG: %ux%u pixels, above the limit", h.w, h.h);
                break;
            }
            raw_len = (h.row + 1) * (size_t)h.h;
            if (!(raw = malloc(raw_len)) || inflateInit(&z) != Z_OK) {
                st = stk_error(STK_ERR_NOMEM, "out of memory");
                break;
            }
            z_open = true;
            z.next_out = raw;
            z.avail_out = (uInt)raw_len;
        } else if (!memcmp(type, "PLTE", 4)) {
            h.n_pal = (int)(n / 3 < 256 ? n / 3 : 256);
            for (int i = 0; i < h.n_pal; i++) memcpy(h.pal[i], body + 3 * i, 3);
        } else if (!memcmp(type, "IDAT", 4)) {
            z.next_in = (Bytef *)body;
            z.avail_in = n;
            int zr = inflate(&z, Z_NO_FLUSH);
            if (zr != Z_OK && zr != Z_STREAM_END && !(zr == Z_BUF_ERROR && z.avail_out == 0))
                st = stk_error(STK_ERR_CORRUPT, "PNG: damaged image data (zlib: %s)",
                               z.msg ? z.msg : "error");
        } else if (!memcmp(type, "IEND", 4)) {
            ended = true;
        } else if (!(type[0] & 0x20)) { /* an unknown critical chunk */
            st = stk_error(STK_ERR_UNSUPPORTED, "PNG: unknown critical chunk %.4s",
                           (const char *)type);
        }
    }
    if (st == STK_OK && z.avail_out != 0)
        st = stk_error(STK_ERR_CORRUPT, "PNG: the image data stops after %zu of %zu bytes",
                       raw_len - z.avail_out, raw_len);
    if (st == STK_OK && h.color == 3 && !h.n_pal)
        st = stk_error(STK_ERR_CORRUPT, "PNG: a palette image without a PLTE chunk");
    if (z_open) inflateEnd(&z);
    uint8_t *out = NULL;
    if (st == STK_OK) st = unfilter(raw, &h);
    if (st == STK_OK && !(out = malloc((size_t)h.w * h.h * (size_t)channels)))
        st = stk_error(STK_ERR_NOMEM, "out of memory");
    if (st == STK_OK) st = to_pixels(raw, &h, channels, out);
    free(raw);
    if (st != STK_OK) {
        free(out);
        return st;
    }
    *pixels = out;
    *width = h.w;
    *height = h.h;
    return STK_OK;
}
