/* The JPEG decode wrapper: header, full validation, scaled and region
 * decodes as the loader asks for them, both IDCT modes. */
#include "decode/jpeg_decoder.h"

static stk_jpeg_decoder *dec;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dec && stk_jpeg_decoder_create(4u << 20, &dec) != STK_OK) return 0;
    stk_jpeg_info info;
    if (stk_jpeg_decoder_header(dec, data, size, &info) != STK_OK) return 0;
    stk_pixel_stats stats = {{0}};
    stk_jpeg_decoder_validate(dec, data, size, &info, &stats);
    const uint8_t *px;
    uint32_t w, h;
    int c;
    stk_jpeg_decoder_pixels(dec, data, size, 1, &px, &w, &h, &c);
    for (int fast = 0; fast < 2; fast++) {
        stk_jpeg_decoder_set_fast(dec, fast);
        int iw = (int)info.width, ih = (int)info.height;
        stk_jpeg_region r;
        stk_jpeg_decoder_region(dec, data, size, iw / 4, ih / 4, iw - iw / 4, ih / 3 + 1,
                                iw / 2.0 + 1, ih / 2.0 + 1, 16, 16, 3, info.width, info.height, &r);
    }
    return 0;
}
