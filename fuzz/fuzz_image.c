/* The other image formats pack and predict read: PNG (libpng), WebP
 * (libwebp), BMP and PPM/PGM (Stoke's own parsers), in both channel
 * counts, under a small pixel limit. */
#include "decode/image_decode.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int c = 0; c <= 3; c += 3) {
        uint8_t *px;
        uint32_t w, h;
        int got;
        if (stk_image_decode(data, size, c, 1u << 20, &px, &w, &h, &got) == STK_OK) free(px);
    }
    return 0;
}
