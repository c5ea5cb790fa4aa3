/* Image files to raw RGB pixels for `stoke pack --store raw` (raw_prepare.h). */
#include "pack/raw_prepare.h"

#include "decode/image_decode.h"

#include <stdlib.h>
#include <string.h>

struct stk_raw_preparer {
    stk_jpeg_decoder *dec;
    uint64_t max_pixels;
};

stk_status stk_raw_preparer_create(uint64_t max_pixels, stk_raw_preparer **out)
{
    *out = NULL;
    stk_raw_preparer *p = calloc(1, sizeof *p);
    if (!p) return stk_error(STK_ERR_NOMEM, "out of memory");
    p->max_pixels = max_pixels;
    stk_status st = stk_jpeg_decoder_create(max_pixels, &p->dec);
    if (st != STK_OK) {
        free(p);
        return st;
    }
    *out = p;
    return STK_OK;
}

void stk_raw_preparer_destroy(stk_raw_preparer *p)
{
    if (!p) return;
    stk_jpeg_decoder_destroy(p->dec);
    free(p);
}

/* RGB rows from `channels`-channel ones (1: grey repeated), into a new buffer. */
static uint8_t *as_rgb(const uint8_t *px, uint32_t w, uint32_t h, int channels)
{
    size_t n = (size_t)w * h;
    uint8_t *rgb = malloc(n > 0 ? n * 3 : 1);
    if (!rgb) return NULL;
    if (channels == 3) return memcpy(rgb, px, n * 3);
    for (size_t i = 0; i < n; i++) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = px[i];
    return rgb;
}

static void sum_pixels(const uint8_t *rgb, size_t n, stk_pixel_stats *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) {
            uint64_t v = rgb[3 * i + (size_t)c];
            s->sum[c] += v;
            s->sumsq[c] += v * v;
        }
    s->pixels = n;
}

stk_status stk_raw_prepare(stk_raw_preparer *p, const uint8_t *in, size_t len,
                           stk_raw_prepared *out)
{
    memset(out, 0, sizeof *out);
    if (len == 0) return stk_error(STK_ERR_UNSUPPORTED, "empty file");
    stk_image_kind kind = stk_image_sniff(in, len);
    uint8_t *rgb = NULL;
    uint32_t w = 0, h = 0;
    if (kind == STK_IMAGE_JPEG) {
        const uint8_t *px;
        int c;
        STK_TRY(stk_jpeg_decoder_pixels(p->dec, in, len, 8, &px, &w, &h, &c));
        if (!(rgb = as_rgb(px, w, h, c))) return stk_error(STK_ERR_NOMEM, "out of memory");
    } else if (stk_image_decodable(kind)) {
        int c;
        STK_TRY(stk_image_decode(in, len, 3, p->max_pixels, &rgb, &w, &h, &c));
    } else {
        return stk_error(STK_ERR_UNSUPPORTED,
                         "a %s file: --store raw reads JPEG, PNG, WebP, BMP and PPM/PGM",
                         stk_image_kind_name(kind));
    }
    sum_pixels(rgb, (size_t)w * h, &out->stats);
    out->pixels = rgb;
    out->width = w;
    out->height = h;
    return STK_OK;
}
