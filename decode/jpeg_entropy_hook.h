/* Stoke's entropy decoder inside libjpeg-turbo's decode of a crop.
 *
 * The segment path (jpeg_segments.h) hands libjpeg-turbo a small JPEG of
 * the restart segments a crop needs. libjpeg-turbo's coefficient
 * controller asks its entropy decoder for one MCU after another
 * (cinfo->entropy->decode_mcu, libjpeg-turbo's jpegint.h) and runs the
 * IDCT on what it gets. The hook takes that place after
 * jpeg_start_decompress: it first decodes all the crop's segments from the
 * original file's bytes with stk_jpeg_entropy_decode_all (on AVX-512, 16
 * at once), then hands libjpeg-turbo each MCU's coefficients as it asks.
 * Everything after the entropy decode (IDCT, upsampling, colour
 * conversion, cropping, skipping rows) stays libjpeg-turbo's, so the
 * pixels are those of libjpeg-turbo's own decode whenever the coefficients
 * are (they are, bit for bit: test_augment).
 *
 * A segment jpeg_entropy.c refuses (a code no table has, data that ends
 * early or runs on: what libjpeg-turbo would decode only with a warning)
 * makes install return false, d untouched: libjpeg-turbo then decodes the
 * crop and reports the damage its usual way. After a hooked decode, end
 * with jpeg_abort_decompress: libjpeg-turbo's source was never read past
 * the scan header, so jpeg_finish_decompress would take the segments for
 * extraneous bytes.
 *
 *     stk_jpeg_hook *h = stk_jpeg_hook_create();
 *     jpeg_start_decompress(d);
 *     bool hooked = stk_jpeg_hook_install(h, d, data, &seg, mx0, mx1, my0, my1);
 *     ...jpeg_crop_scanline, jpeg_skip_scanlines, jpeg_read_scanlines...
 *     jpeg_abort_decompress(d);
 */
#pragma once

#include "decode/jpeg_segments.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */

#include <jpeglib.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_jpeg_hook stk_jpeg_hook;

stk_jpeg_hook *stk_jpeg_hook_create(void); /* NULL when out of memory */
void stk_jpeg_hook_destroy(stk_jpeg_hook *h);

/* Take over the entropy decoding of d, a decompressor started
 * (jpeg_start_decompress) on the JPEG that stk_jpeg_segments_assemble made
 * of MCU columns [mx0, mx1) and rows [my0, my1) of `data`, whose grid `s`
 * holds, after decoding all those segments. False, and d untouched, when
 * the scan is not one the hook decodes the same way (its tables are not
 * jpeg_entropy.c's to read, or libjpeg-turbo's MCU layout differs), when a
 * segment is refused, or without memory. */
bool stk_jpeg_hook_install(stk_jpeg_hook *h, j_decompress_ptr d, const uint8_t *data,
                           const stk_jpeg_segments *s, int mx0, int mx1, int my0, int my1);

/* MCUs the hook handed libjpeg-turbo since it was created (tests check it ran). */
int64_t stk_jpeg_hook_mcus(const stk_jpeg_hook *h);

#ifdef __cplusplus
}
#endif
