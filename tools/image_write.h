/* Writing u8 images to files for `stoke peek`: PNG or binary PPM/PGM
 * (lossless), or JPEG (libjpeg-turbo), chosen by the file name's extension. */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stdint.h>

/* True when `path` ends in an extension stk_image_write knows. */
bool stk_image_path_supported(const char *path);

/* pixels: width x height x channels (1 or 3), rows packed. Errors: STK_ERR_IO,
 * STK_ERR_INVALID_ARG (an extension other than .png/.ppm/.pgm/.pnm/.jpg/.jpeg). */
stk_status stk_image_write(const char *path, const uint8_t *pixels, int width, int height,
                           int channels, int jpeg_quality);
