/* Restart-marker segments (decode/jpeg_segments.h) from untrusted bytes:
 * parse the grid, and for crops over the whole image (corners, middle,
 * single MCUs) assemble the crop's JPEG and decode a region from it, in
 * both IDCT modes; and the entropy decode of every segment into DCT
 * coefficients (decode/jpeg_entropy.h) one by one and all at once (the
 * AVX-512 decoder, which must agree), and Stoke's entropy decoder
 * against libjpeg-turbo's inside the crop decode (the same status and
 * pixels, or the fuzzer aborts). The seeds are the JPEG fixtures
 * with restart markers. */
#include "decode/jpeg_decoder.h"
#include "decode/jpeg_entropy.h"
#include "decode/jpeg_segments.h"

#include <stdlib.h>
#include <string.h>

static stk_jpeg_decoder *dec;
static stk_jpeg_segments seg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dec && stk_jpeg_decoder_create(4u << 20, &dec) != STK_OK) return 0;
    if (stk_jpeg_segments_parse(data, size, &seg) != STK_OK) return 0;
    static stk_jpeg_entropy e; /* 130 KB of tables */
    static stk_jpeg_entropy_scratch scratch;
    size_t whole = (size_t)seg.mcus_x * (size_t)seg.mcus_y; /* MCUs: a forged size can be huge */
    if (stk_jpeg_entropy_init(data, size, &e) == STK_OK && whole * (size_t)e.blocks <= 1u << 16) {
        /* every segment one by one, then all at once (the vector decoder
         * where the CPU has it): the same status, the same coefficients */
        size_t per = (size_t)seg.interval * (size_t)e.blocks * 64;
        int16_t *one = malloc(seg.count * per * sizeof *one);
        int16_t *all = malloc(seg.count * per * sizeof *all);
        stk_jpeg_segment_bytes *segs = malloc(seg.count * sizeof *segs);
        stk_status each = STK_OK;
        for (size_t k = 0; one && all && segs && k < seg.count; k++) {
            size_t begin = k ? seg.end[k - 1] + 2 : seg.data_at;
            segs[k] = (stk_jpeg_segment_bytes){data + begin, seg.end[k] - begin};
            stk_status st = stk_jpeg_entropy_decode(&e, segs[k].data, segs[k].len, seg.interval,
                                                    one + k * per, NULL);
            if (each == STK_OK) each = st;
        }
        if (one && all && segs) {
            stk_status st =
                stk_jpeg_entropy_decode_all(&e, segs, seg.count, seg.interval, all, &scratch);
            if (st != STK_ERR_NOMEM &&
                (st != each || (st == STK_OK && memcmp(one, all, seg.count * per * sizeof *one))))
                abort(); /* the two ways disagree */
        }
        free(one);
        free(all);
        free(segs);
    }
    int w = (int)seg.width, h = (int)seg.height;
    int crops[][4] = {{0, 0, w, h},
                      {w / 2, h / 2, w, h},
                      {0, h / 3, w / 3 + 1, h},
                      {w - 1, h - 1, w, h},
                      {w / 4, 0, w / 2 + 1, h / 4 + 1}};
    for (size_t c = 0; c < sizeof crops / sizeof *crops; c++) {
        int mx0, mx1, my0, my1;
        if (!stk_jpeg_segments_cover(&seg, crops[c][0], crops[c][1], crops[c][2], crops[c][3], 0,
                                     &mx0, &mx1, &my0, &my1))
            continue;
        size_t cap = stk_jpeg_segments_bound(&seg, mx0, mx1, my0, my1);
        uint8_t *out = malloc(cap);
        if (!out) return 0;
        size_t n = stk_jpeg_segments_assemble(&seg, data, mx0, mx1, my0, my1, out, cap);
        if (n > cap) abort(); /* the bound is a promise */
        stk_jpeg_info info;
        if (stk_jpeg_decoder_header(dec, out, n, &info) == STK_OK &&
            (info.width != stk_jpeg_segments_width(&seg, mx0, mx1) ||
             info.height != stk_jpeg_segments_height(&seg, my0, my1)))
            abort(); /* the frame header says the assembled size */
        free(out);
        /* accurate and fast IDCT; fast with libjpeg-turbo's entropy decoder
         * too, which must give the same status and pixels as Stoke's */
        uint8_t *first = NULL;
        stk_status first_st = STK_OK;
        for (int pass = 0; pass < 3; pass++) {
            stk_jpeg_decoder_set_fast(dec, pass > 0);
            stk_jpeg_decoder_set_entropy(dec, pass < 2);
            stk_jpeg_region r;
            int bw = crops[c][2] - crops[c][0], bh = crops[c][3] - crops[c][1];
            stk_status st = stk_jpeg_decoder_region(
                dec, data, size, crops[c][0], crops[c][1], crops[c][2], crops[c][3], bw, bh,
                bw < 16 ? bw : 16, bh < 16 ? bh : 16, 3, seg.width, seg.height, &r);
            size_t bytes = st == STK_OK ? r.stride * (size_t)r.height : 0;
            if (pass == 1) {
                first_st = st;
                first = malloc(bytes ? bytes : 1);
                if (!first) return 0;
                if (bytes) memcpy(first, r.pixels, bytes);
            } else if (pass == 2 && (st != first_st || (bytes && memcmp(first, r.pixels, bytes))))
                abort(); /* the two entropy decoders disagree */
        }
        free(first);
        stk_jpeg_decoder_set_entropy(dec, stk_jpeg_entropy_vector()); /* the default */
    }
    return 0;
}
