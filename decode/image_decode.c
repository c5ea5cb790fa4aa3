/* stk_image_decode: the kind by content, then its decoder; WebP here
 * through libwebp; grey <-> RGB as PIL converts. */
#include "decode/image_decode_impl.h"
#include "decode/luma.h"
#include "decode/png_decoder.h"

#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>

stk_image_kind stk_image_sniff(const uint8_t *d, size_t len)
{
    if (len >= 2 && d[0] == 0xFF && d[1] == 0xD8) return STK_IMAGE_JPEG;
    if (stk_png_sniff(d, len)) return STK_IMAGE_PNG;
    if (len >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return STK_IMAGE_WEBP;
    if (len >= 2 && d[0] == 'B' && d[1] == 'M') return STK_IMAGE_BMP;
    if (len >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6') return STK_IMAGE_PNM;
    if (len >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return STK_IMAGE_GIF;
    if (len >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0))
        return STK_IMAGE_TIFF;
    return STK_IMAGE_UNKNOWN;
}

const char *stk_image_kind_name(stk_image_kind kind)
{
    static const char *const names[] = {"unknown", "JPEG",    "PNG", "WebP",
                                        "BMP",     "PPM/PGM", "GIF", "TIFF"};
    return kind >= 0 && kind <= STK_IMAGE_TIFF ? names[kind] : "unknown";
}

bool stk_image_decodable(stk_image_kind kind)
{
    return kind == STK_IMAGE_PNG || kind == STK_IMAGE_WEBP || kind == STK_IMAGE_BMP ||
           kind == STK_IMAGE_PNM;
}

static stk_status webp_decode(const uint8_t *d, size_t len, uint64_t max_pixels, uint8_t **pixels,
                              uint32_t *width, uint32_t *height)
{
    WebPBitstreamFeatures f;
    if (WebPGetFeatures(d, len, &f) != VP8_STATUS_OK || f.width <= 0 || f.height <= 0)
        return stk_error(STK_ERR_CORRUPT, "WebP: a damaged or truncated header");
    if (f.has_animation)
        return stk_error(STK_ERR_UNSUPPORTED, "WebP: animated images are not supported");
    if ((uint64_t)f.width * (uint64_t)f.height > (max_pixels ? max_pixels : 64000000))
        return stk_error(STK_ERR_LIMIT, "WebP: %dx%d pixels, above the limit", f.width, f.height);
    size_t n = (size_t)f.width * (size_t)f.height * 3;
    uint8_t *out = malloc(n);
    if (!out) return stk_error(STK_ERR_NOMEM, "out of memory");
    /* RGB without alpha: the colour samples as stored (PIL's RGBA -> RGB) */
    if (!WebPDecodeRGBInto(d, len, out, n, f.width * 3)) {
        free(out);
        return stk_error(STK_ERR_CORRUPT, "WebP: the image data is damaged or truncated");
    }
    *pixels = out;
    *width = (uint32_t)f.width;
    *height = (uint32_t)f.height;
    return STK_OK;
}

/* In place: RGB -> L as PIL makes it, or L -> RGB
 * into a new buffer. */
static stk_status convert(uint8_t **px, size_t n, int from, int to)
{
    if (from == to) return STK_OK;
    uint8_t *p = *px;
    if (to == 1) {
        for (size_t i = 0; i < n; i++) p[i] = stk_image_luma(p + 3 * i);
        return STK_OK;
    }
    uint8_t *rgb = malloc(n * 3);
    if (!rgb) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = p[i];
    free(p);
    *px = rgb;
    return STK_OK;
}

stk_status stk_image_decode(const uint8_t *data, size_t len, int channels, uint64_t max_pixels,
                            uint8_t **pixels, uint32_t *width, uint32_t *height, int *channels_out)
{
    *pixels = NULL;
    if (channels != 0 && channels != 1 && channels != 3)
        return stk_error(STK_ERR_INVALID_ARG, "image decode: %d channels (0, 1 or 3)", channels);
    stk_image_kind kind = stk_image_sniff(data, len);
    int own = 3;
    stk_status st;
    switch (kind) {
    case STK_IMAGE_PNG:
        own = stk_png_channels(data, len);
        st =
            stk_png_decode(data, len, channels ? channels : own, max_pixels, pixels, width, height);
        if (st == STK_OK) *channels_out = channels ? channels : own;
        return st;
    case STK_IMAGE_WEBP: st = webp_decode(data, len, max_pixels, pixels, width, height); break;
    case STK_IMAGE_BMP: st = stk_bmp_decode(data, len, max_pixels, pixels, width, height); break;
    case STK_IMAGE_PNM:
        st = stk_pnm_decode(data, len, max_pixels, pixels, width, height, &own);
        break;
    default:
        return stk_error(STK_ERR_UNSUPPORTED,
                         "a %s image: not one of JPEG, PNG, WebP, BMP, "
                         "PPM/PGM (convert it to one of those)",
                         stk_image_kind_name(kind));
    }
    if (st != STK_OK) return st;
    int want = channels ? channels : own;
    if ((st = convert(pixels, (size_t)*width * *height, own, want)) != STK_OK) {
        free(*pixels);
        *pixels = NULL;
        return st;
    }
    *channels_out = want;
    return STK_OK;
}
