/* Restart-marker segments: decoding only the part of a JPEG a crop needs.
 *
 * A baseline JPEG's entropy-coded data is one stream: the DC coefficient of
 * every block is coded as a difference from the previous block's, so a
 * decoder must Huffman-decode every MCU from the top of the image through
 * the last row a crop needs, the columns outside the crop included. Restart
 * markers (RSTn every `interval` MCUs, DRI) reset that chain, so each
 * segment between two markers decodes on its own. When the interval divides
 * the MCUs of a row, the segments form a grid of `per_row` columns, and the
 * segments covering a crop can be copied into a small, valid JPEG of their
 * own: the same tables, a frame header with the reduced size, and for each
 * needed MCU row the covering segments with their markers renumbered. Its
 * pixels are the original's pixels there (the DCT coefficients are the same
 * bytes), so libjpeg-turbo decodes only what the crop needs.
 *
 *     stk_jpeg_segments s = {0};
 *     if (stk_jpeg_segments_parse(data, len, &s) == STK_OK) {          // has a usable grid
 *         size_t n = stk_jpeg_segments_assemble(&s, data, mx0, mx1, my0, my1, buf, cap);
 *         ...decode buf[0..n) (width stk_jpeg_segments_width(&s, mx0, mx1)) ...
 *     }
 *     stk_jpeg_segments_free(&s);
 *
 * Pack time: stk_jpeg_restart_interval() picks the interval for an image;
 * pack/jpeg_prepare.c writes it (a lossless transcode, see there).
 * Everything here reads untrusted bytes: every offset is checked, and a
 * file that is not a clean single-scan baseline JPEG with an aligned
 * restart grid is STK_ERR_UNSUPPORTED (the caller decodes it the usual way);
 * a damaged marker sequence is STK_ERR_CORRUPT.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_jpeg_segments {
    uint32_t width, height; /* the image, from the frame header */
    int mcu_w, mcu_h;       /* pixels of one MCU */
    int mcus_x, mcus_y;     /* the MCU grid */
    int interval;           /* MCUs per segment (DRI) */
    int per_row;            /* segments per MCU row: mcus_x / interval */
    size_t sof_at, sof_len; /* the frame header (SOF0/SOF1) marker segment */
    size_t data_at;         /* the first entropy-coded byte (after SOS) */
    /* Segment k's bytes are [k ? end[k-1] + 2 : data_at, end[k]): end[k] is
     * where the marker after it (RSTn, or EOI for the last) begins. */
    uint32_t *end;
    size_t count, cap;
} stk_jpeg_segments;

/* Find the segment grid of data (reusing s->end's allocation). */
stk_status stk_jpeg_segments_parse(const uint8_t *data, size_t len, stk_jpeg_segments *s);
void stk_jpeg_segments_free(stk_jpeg_segments *s);

/* Width and height in pixels of the image made of MCU columns [mx0, mx1)
 * and rows [my0, my1) (the last column/row keeps the original's partial MCU). */
uint32_t stk_jpeg_segments_width(const stk_jpeg_segments *s, int mx0, int mx1);
uint32_t stk_jpeg_segments_height(const stk_jpeg_segments *s, int my0, int my1);

/* The segment-aligned MCU ranges covering source pixels [bx0, bx1) x
 * [by0, by1) with `margin` more MCUs on every side where there are some
 * (fancy upsampling reads one chroma sample across an edge); false when
 * they would be the whole image's first rows (nothing to gain: a region
 * decode already stops after the last row it needs). */
bool stk_jpeg_segments_cover(const stk_jpeg_segments *s, int bx0, int by0, int bx1, int by1,
                             int margin, int *mx0, int *mx1, int *my0, int *my1);

/* Bytes the JPEG of MCU columns [mx0, mx1) x rows [my0, my1) takes at most. */
size_t stk_jpeg_segments_bound(const stk_jpeg_segments *s, int mx0, int mx1, int my0, int my1);

/* Write that JPEG into out (cap >= the bound) and return its length. mx0 and
 * mx1 must lie on the segment grid (multiples of interval, or mcus_x), and
 * 0 <= mx0 < mx1 <= mcus_x, 0 <= my0 < my1 <= mcus_y. */
size_t stk_jpeg_segments_assemble(const stk_jpeg_segments *s, const uint8_t *data, int mx0, int mx1,
                                  int my0, int my1, uint8_t *out, size_t cap);

/* The restart interval Stoke writes for an image of mcus_x MCUs per row:
 * the largest divisor of mcus_x that is at most `target` MCUs (1 when
 * mcus_x is prime and larger than target). */
int stk_jpeg_restart_interval(int mcus_x, int target);

#ifdef __cplusplus
}
#endif
