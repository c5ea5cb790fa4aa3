#include "decode/jpeg_decoder.h"
#include "decode/jpeg_entropy.h"
#include "decode/jpeg_entropy_hook.h"
#include "decode/jpeg_segments.h"

#include "decode/jpeg_error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

struct stk_jpeg_decoder {
    struct jpeg_decompress_struct d;
    bool fast; /* region decodes: fast IDCT, merged upsampling */
    stk_jpeg_error err;
    uint64_t max_pixels;
    uint8_t *scratch; /* decoded pixels or one row */
    size_t scratch_cap;
    bool segments;         /* region decodes: use restart-marker segments */
    stk_jpeg_segments seg; /* the last image's segment grid */
    uint8_t *sub;          /* the JPEG of a crop's segments */
    size_t sub_cap;
    stk_jpeg_hook *hook; /* Stoke's entropy decoder for them; NULL: libjpeg-turbo's */
};

/* The segments a crop's JPEG was assembled from (for the hook). */
typedef struct crop_segments {
    const uint8_t *data; /* the original file */
    int mx0, mx1, my0, my1;
} crop_segments;

stk_status stk_jpeg_decoder_create(uint64_t max_pixels, stk_jpeg_decoder **out)
{
    stk_jpeg_decoder *dec = calloc(1, sizeof *dec);
    if (!dec) return stk_error(STK_ERR_NOMEM, "out of memory");
    dec->max_pixels = max_pixels;
    dec->segments = true;
    /* Stoke's entropy decoder for the segments where it is the faster one:
     * its vector decoder (jpeg_entropy_simd.c; the scalar one measured no
     * faster than libjpeg-turbo's). Without memory for it, libjpeg-turbo's. */
    if (stk_jpeg_entropy_vector()) dec->hook = stk_jpeg_hook_create();
    dec->d.err = stk_jpeg_error_init(&dec->err, STK_JPEG_MAX_SCANS);
    if (setjmp(dec->err.jump)) { /* jpeg_create_decompress fails only without memory */
        stk_error(STK_ERR_NOMEM, "cannot create a JPEG decoder: %s", dec->err.message);
        free(dec);
        return STK_ERR_NOMEM;
    }
    jpeg_create_decompress(&dec->d);
    stk_jpeg_error_attach_progress(&dec->err, (j_common_ptr)&dec->d);
    *out = dec;
    return STK_OK;
}

void stk_jpeg_decoder_set_fast(stk_jpeg_decoder *dec, bool fast) { dec->fast = fast; }

void stk_jpeg_decoder_set_segments(stk_jpeg_decoder *dec, bool on) { dec->segments = on; }

bool stk_jpeg_decoder_set_entropy(stk_jpeg_decoder *dec, bool stoke)
{
    if (stoke && !dec->hook) dec->hook = stk_jpeg_hook_create();
    if (!stoke) {
        stk_jpeg_hook_destroy(dec->hook);
        dec->hook = NULL;
    }
    return dec->hook != NULL || !stoke;
}

int64_t stk_jpeg_decoder_entropy_mcus(const stk_jpeg_decoder *dec)
{
    return dec->hook ? stk_jpeg_hook_mcus(dec->hook) : 0;
}

void stk_jpeg_decoder_set_max_scans(stk_jpeg_decoder *dec, int max_scans)
{
    dec->err.max_scans = max_scans;
}

void stk_jpeg_decoder_destroy(stk_jpeg_decoder *dec)
{
    if (!dec) return;
    jpeg_destroy_decompress(&dec->d);
    free(dec->scratch);
    stk_jpeg_segments_free(&dec->seg);
    free(dec->sub);
    stk_jpeg_hook_destroy(dec->hook);
    free(dec);
}

static stk_status reserve(stk_jpeg_decoder *dec, size_t bytes)
{
    if (bytes <= dec->scratch_cap) return STK_OK;
    uint8_t *p = realloc(dec->scratch, bytes);
    if (!p) return stk_error(STK_ERR_NOMEM, "out of memory for %zu bytes of pixels", bytes);
    dec->scratch = p;
    dec->scratch_cap = bytes;
    return STK_OK;
}

/* Body of header(): call only under a setjmp of dec->err.jump. */
static stk_status read_header(stk_jpeg_decoder *dec, const uint8_t *data, size_t len,
                              stk_jpeg_info *info)
{
    char what[96];
    if (stk_jpeg_sniff_not_jpeg(data, len, what, sizeof what))
        return stk_error(STK_ERR_UNSUPPORTED, "%s", what);
    struct jpeg_decompress_struct *d = &dec->d;
    jpeg_mem_src(d, data, (unsigned long)len);
    if (jpeg_read_header(d, TRUE) != JPEG_HEADER_OK)
        return stk_error(STK_ERR_CORRUPT, "bad JPEG: no image in the file");
    memset(info, 0, sizeof *info);
    info->width = d->image_width;
    info->height = d->image_height;
    info->components = d->num_components;
    info->progressive = d->progressive_mode;
    info->arithmetic = d->arith_code;
    info->adobe_inverted = d->saw_Adobe_marker;
    /* libjpeg can return "OK" for a start marker followed by junk without
     * setting the size: that is not an image. */
    if (info->width == 0 || info->height == 0)
        return stk_error(STK_ERR_CORRUPT, "bad JPEG: no image size in the header");
    if ((uint64_t)info->width * info->height > dec->max_pixels)
        return stk_error(STK_ERR_LIMIT,
                         "%ux%u = %.1f megapixels is over the limit of %.1f (decompression bomb?)",
                         info->width, info->height, (double)info->width * info->height / 1e6,
                         (double)dec->max_pixels / 1e6);
    J_COLOR_SPACE cs = d->jpeg_color_space;
    if (cs == JCS_GRAYSCALE && info->components == 1)
        info->kind = STK_JPEG_GRAY;
    else if (cs == JCS_YCbCr && info->components == 3)
        info->kind = STK_JPEG_YCBCR;
    else if (cs == JCS_RGB && info->components == 3)
        info->kind = STK_JPEG_RGB;
    else if ((cs == JCS_CMYK || cs == JCS_YCCK) && info->components == 4)
        info->kind = STK_JPEG_CMYK;
    else
        return stk_error(STK_ERR_UNSUPPORTED,
                         "JPEG colour space %d with %d components is not supported", (int)cs,
                         info->components);
    return STK_OK;
}

stk_status stk_jpeg_decoder_header(stk_jpeg_decoder *dec, const uint8_t *data, size_t len,
                                   stk_jpeg_info *info)
{
    dec->err.status = STK_OK;
    if (setjmp(dec->err.jump)) {
        jpeg_abort_decompress(&dec->d);
        return stk_jpeg_error_status(&dec->err);
    }
    stk_status st = read_header(dec, data, len, info);
    jpeg_abort_decompress(&dec->d);
    return st;
}

/* Invert-aware CMYK -> RGB, as PIL does: R = (255 - C)(255 - K) / 255, where
 * Adobe files store 255 - C etc. */
static void cmyk_to_rgb(const uint8_t *in, uint8_t *out, uint32_t n, bool inverted)
{
    for (uint32_t i = 0; i < n; i++, in += 4, out += 3) {
        unsigned k = inverted ? in[3] : 255u - in[3];
        for (int c = 0; c < 3; c++) {
            unsigned v = inverted ? in[c] : 255u - in[c];
            out[c] = (uint8_t)((v * k + 127) / 255);
        }
    }
}

/* Add one row's per-channel sums to s (gray counts for all three channels).
 * 48 bytes (16 RGB or 48 gray pixels) at a time into 48 u32 lanes; lane j
 * belongs to channel j % nc. SSE2 (every x86-64) where available: the
 * compiler does not vectorise the plain loop at -O2, and the plain loop made
 * the pack of 6,000 photos 2x slower. Overflow: a row has at most 65535 x 3
 * bytes, so a lane adds at most 4096 values, and 4096 x 255^2 fits in 32
 * bits. Not inlined: in the caller, setjmp keeps the compiler from
 * optimising. */
__attribute__((noinline)) static void add_row_stats(const uint8_t *p, uint32_t len, int nc,
                                                    stk_pixel_stats *s)
{
    uint32_t sum[48] = {0}, sq[48] = {0};
    uint32_t i = 0;
#if defined(__SSE2__)
    /* Two passes so that each keeps its accumulators in registers. Sums: u16
     * lanes (at most 256 blocks between flushes, 256 x 255 < 65536). */
    const __m128i zero = _mm_setzero_si128();
    uint32_t blocks = len / 48;
    for (uint32_t b0 = 0; b0 < blocks; b0 += 256) {
        uint32_t b1 = blocks - b0 < 256 ? blocks : b0 + 256;
        __m128i a[6] = {zero, zero, zero, zero, zero, zero};
        for (uint32_t b = b0; b < b1; b++)
            for (int k = 0; k < 3; k++) {
                __m128i v = _mm_loadu_si128((const __m128i *)(p + 48 * b + 16 * k));
                a[2 * k] = _mm_add_epi16(a[2 * k], _mm_unpacklo_epi8(v, zero));
                a[2 * k + 1] = _mm_add_epi16(a[2 * k + 1], _mm_unpackhi_epi8(v, zero));
            }
        uint16_t lanes[48];
        for (int k = 0; k < 6; k++) _mm_storeu_si128((__m128i *)(lanes + 8 * k), a[k]);
        for (int j = 0; j < 48; j++) sum[j] += lanes[j];
    }
    /* Squares: 255^2 fits u16, sums of them need u32 lanes. */
    __m128i q[12];
    for (int k = 0; k < 12; k++) q[k] = zero;
    for (uint32_t b = 0; b < blocks; b++)
        for (int k = 0; k < 3; k++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + 48 * b + 16 * k));
            __m128i lo = _mm_unpacklo_epi8(v, zero), hi = _mm_unpackhi_epi8(v, zero);
            lo = _mm_mullo_epi16(lo, lo);
            hi = _mm_mullo_epi16(hi, hi);
            q[4 * k + 0] = _mm_add_epi32(q[4 * k + 0], _mm_unpacklo_epi16(lo, zero));
            q[4 * k + 1] = _mm_add_epi32(q[4 * k + 1], _mm_unpackhi_epi16(lo, zero));
            q[4 * k + 2] = _mm_add_epi32(q[4 * k + 2], _mm_unpacklo_epi16(hi, zero));
            q[4 * k + 3] = _mm_add_epi32(q[4 * k + 3], _mm_unpackhi_epi16(hi, zero));
        }
    for (int k = 0; k < 12; k++) _mm_storeu_si128((__m128i *)(sq + 4 * k), q[k]);
    i = blocks * 48;
#else
    for (; i + 48 <= len; i += 48)
        for (int j = 0; j < 48; j++) {
            uint32_t v = p[i + (uint32_t)j];
            sum[j] += v;
            sq[j] += v * v;
        }
#endif
    /* Fold lanes into channels (no division: this runs once per row). */
    uint64_t total[3] = {0}, total_sq[3] = {0};
    for (int j = 0; j < 48; j += nc)
        for (int c = 0; c < nc; c++) {
            total[c] += sum[j + c];
            total_sq[c] += sq[j + c];
        }
    for (int c = 0; i < len; i++) { /* i starts at a multiple of 48, so of nc too */
        total[c] += p[i];
        total_sq[c] += (uint32_t)p[i] * p[i];
        if (++c == nc) c = 0;
    }
    for (int c = 0; c < 3; c++) {
        s->sum[c] += total[nc == 1 ? 0 : c];
        s->sumsq[c] += total_sq[nc == 1 ? 0 : c];
    }
}

stk_status stk_jpeg_decoder_validate(stk_jpeg_decoder *dec, const uint8_t *data, size_t len,
                                     stk_jpeg_info *info, stk_pixel_stats *stats)
{
    struct jpeg_decompress_struct *d = &dec->d;
    dec->err.status = STK_OK;
    if (setjmp(dec->err.jump)) {
        jpeg_abort_decompress(d);
        return stk_jpeg_error_status(&dec->err);
    }
    stk_status st = read_header(dec, data, len, info);
    if (st != STK_OK) goto fail;
    /* Decode to the stored colour layout; CMYK stays 4 channels. */
    d->out_color_space = info->kind == STK_JPEG_GRAY   ? JCS_GRAYSCALE
                         : info->kind == STK_JPEG_CMYK ? JCS_CMYK
                                                       : JCS_RGB;
    jpeg_start_decompress(d);
    int nc = d->output_components;
    /* Several rows per call: libjpeg-turbo's upsamplers make 2 rows at a time
     * for 4:2:0, and one row per call costs it an extra copy. */
    enum { ROWS = 16 };
    size_t row_bytes = (size_t)d->output_width * (size_t)nc;
    if ((st = reserve(dec, row_bytes * ROWS))) goto fail;
    JSAMPROW rows[ROWS];
    for (int r = 0; r < ROWS; r++) rows[r] = dec->scratch + (size_t)r * row_bytes;
    stk_pixel_stats s = {0};
    while (d->output_scanline < d->output_height) {
        JDIMENSION got = jpeg_read_scanlines(d, rows, ROWS);
        if (nc == 4) continue;
        for (JDIMENSION r = 0; r < got; r++) add_row_stats(rows[r], (uint32_t)row_bytes, nc, &s);
    }
    jpeg_finish_decompress(d);
    if (stats && nc != 4) {
        s.pixels = (uint64_t)info->width * info->height;
        for (int c = 0; c < 3; c++) {
            stats->sum[c] += s.sum[c];
            stats->sumsq[c] += s.sumsq[c];
        }
        stats->pixels += s.pixels;
    }
    return STK_OK;
fail:
    jpeg_abort_decompress(d);
    return st;
}

stk_status stk_jpeg_decoder_pixels(stk_jpeg_decoder *dec, const uint8_t *data, size_t len,
                                   int scale_num, const uint8_t **pixels, uint32_t *width,
                                   uint32_t *height, int *channels)
{
    struct jpeg_decompress_struct *d = &dec->d;
    dec->err.status = STK_OK;
    if (setjmp(dec->err.jump)) {
        jpeg_abort_decompress(d);
        return stk_jpeg_error_status(&dec->err);
    }
    stk_jpeg_info info;
    stk_status st = read_header(dec, data, len, &info);
    if (st != STK_OK) goto fail;
    d->scale_num = (unsigned)(scale_num < 1 ? 1 : scale_num > 8 ? 8 : scale_num);
    d->scale_denom = 8;
    d->out_color_space = info.kind == STK_JPEG_GRAY   ? JCS_GRAYSCALE
                         : info.kind == STK_JPEG_CMYK ? JCS_CMYK
                                                      : JCS_RGB;
    jpeg_start_decompress(d);
    uint32_t w = d->output_width, h = d->output_height;
    int nc = d->output_components;
    /* CMYK rows are decoded at the end of the buffer and converted in place
     * to RGB at the start: RGB row y ends before CMYK row y begins. */
    size_t out_c = nc == 4 ? 3 : (size_t)nc;
    size_t rgb_bytes = (size_t)w * h * out_c;
    size_t need = nc == 4 ? rgb_bytes + (size_t)w * 4 : rgb_bytes;
    if ((st = reserve(dec, need))) goto fail;
    while (d->output_scanline < h) {
        uint32_t y = d->output_scanline;
        JSAMPROW row = nc == 4 ? dec->scratch + rgb_bytes : dec->scratch + (size_t)y * w * out_c;
        jpeg_read_scanlines(d, &row, 1);
        if (nc == 4) cmyk_to_rgb(row, dec->scratch + (size_t)y * w * 3, w, info.adobe_inverted);
    }
    jpeg_finish_decompress(d);
    *pixels = dec->scratch;
    *width = w;
    *height = h;
    *channels = (int)out_c;
    return STK_OK;
fail:
    jpeg_abort_decompress(d);
    return st;
}

/* Smallest SIMD DCT scale at which the window still spans the output. */
static int pick_scale(double win_w, double win_h, int out_w, int out_h)
{
    for (int s = 1; s < 8; s *= 2)
        if (win_w * s / 8 >= out_w && win_h * s / 8 >= out_h) return s;
    return 8;
}

/* Decode pixels [bx0, bx1) x [by0, by1) of data. With segs (data is then
 * the JPEG assembled of their segments), Stoke's entropy decoder decodes
 * the segments where it can (jpeg_entropy_hook.h). */
static stk_status region_decode(stk_jpeg_decoder *dec, const uint8_t *data, size_t len, int bx0,
                                int by0, int bx1, int by1, double win_w, double win_h, int out_w,
                                int out_h, int channels, uint32_t expect_w, uint32_t expect_h,
                                const crop_segments *segs, stk_jpeg_region *out)
{
    struct jpeg_decompress_struct *d = &dec->d;
    volatile bool hooked = false; /* set after the setjmp */
    dec->err.status = STK_OK;
    if (setjmp(dec->err.jump)) {
        jpeg_abort_decompress(d);
        return stk_jpeg_error_status(&dec->err);
    }
    stk_jpeg_info info;
    stk_status st = read_header(dec, data, len, &info);
    if (st != STK_OK) goto fail;
    if ((expect_w && info.width != expect_w) || (expect_h && info.height != expect_h)) {
        st = stk_error(STK_ERR_CORRUPT, "JPEG is %ux%u but its record says %ux%u", info.width,
                       info.height, expect_w, expect_h);
        goto fail;
    }
    if (channels == 1 && info.kind == STK_JPEG_CMYK) {
        st = stk_error(STK_ERR_UNSUPPORTED, "CMYK JPEG to one gray channel is not supported");
        goto fail;
    }
    if (bx0 < 0 || by0 < 0 || bx1 > (int)info.width || by1 > (int)info.height || bx0 >= bx1 ||
        by0 >= by1) {
        st = stk_error(STK_ERR_INVALID_ARG, "region [%d,%d)x[%d,%d) is outside the %ux%u image",
                       bx0, bx1, by0, by1, info.width, info.height);
        goto fail;
    }
    int s = pick_scale(win_w, win_h, out_w, out_h);
    d->scale_num = (unsigned)s;
    d->scale_denom = 8;
    if (dec->fast) {
        d->dct_method = JDCT_IFAST;
        d->do_fancy_upsampling = FALSE;
        /* libjpeg-turbo 2.1.5 (Debian 12) bug, fixed in 3.1.2: with merged
         * upsampling, jpeg_skip_scanlines on a reused decompressor can call a
         * colour converter freed with the previous image. */
        d->cconvert = NULL;
        d->cquantize = NULL;
    } else {
        d->dct_method = JDCT_ISLOW;
        d->do_fancy_upsampling = TRUE;
    }
    d->out_color_space = channels == 1                ? JCS_GRAYSCALE
                         : info.kind == STK_JPEG_CMYK ? JCS_CMYK
                                                      : JCS_RGB;
    jpeg_start_decompress(d);
    if (segs && dec->hook)
        hooked = stk_jpeg_hook_install(dec->hook, d, segs->data, &dec->seg, segs->mx0, segs->mx1,
                                       segs->my0, segs->my1);
    int sw = (int)d->output_width, sh = (int)d->output_height;
    int sx0 = (int)floor(bx0 * s / 8.0), sx1 = (int)ceil(bx1 * s / 8.0);
    int sy0 = (int)floor(by0 * s / 8.0), sy1 = (int)ceil(by1 * s / 8.0);
    if (sx1 > sw) sx1 = sw;
    if (sy1 > sh) sy1 = sh;
    if (sx1 <= sx0) sx1 = sx0 + 1;
    if (sy1 <= sy0) sy1 = sy0 + 1;
    /* One column more on each side: fancy chroma upsampling has no context at
     * a crop edge, so the edge column comes out different from a full decode
     * (by up to 12 grey levels on 4:2:2, measured); with the margin, the
     * columns that differ lie outside what was asked for. */
    int cx0 = sx0 > 0 ? sx0 - 1 : 0, cx1 = sx1 < sw ? sx1 + 1 : sw;
    JDIMENSION xoff = (JDIMENSION)cx0, cw = (JDIMENSION)(cx1 - cx0);
    if ((int)cw < sw) jpeg_crop_scanline(d, &xoff, &cw); /* widens to iMCU boundaries */
    if (sy0 > 0) jpeg_skip_scanlines(d, (JDIMENSION)sy0);
    int nc = d->output_components, oc = nc == 4 ? 3 : nc;
    int rows = sy1 - sy0;
    size_t out_stride = (size_t)d->output_width * (size_t)oc;
    size_t cmyk_row = nc == 4 ? (size_t)d->output_width * 4 * 16 : 0;
    if ((st = reserve(dec, out_stride * (size_t)rows + cmyk_row))) goto fail;
    uint8_t *cmyk = dec->scratch + out_stride * (size_t)rows;
    while ((int)d->output_scanline < sy1) {
        int y = (int)d->output_scanline - sy0;
        JSAMPROW ptrs[16];
        int n = sy1 - (int)d->output_scanline < 16 ? sy1 - (int)d->output_scanline : 16;
        for (int r = 0; r < n; r++)
            ptrs[r] = nc == 4 ? cmyk + (size_t)r * d->output_width * 4
                              : dec->scratch + (size_t)(y + r) * out_stride;
        JDIMENSION got = jpeg_read_scanlines(d, ptrs, (JDIMENSION)n);
        if (nc == 4)
            for (JDIMENSION r = 0; r < got; r++)
                cmyk_to_rgb(ptrs[r], dec->scratch + (size_t)(y + (int)r) * out_stride,
                            d->output_width, info.adobe_inverted);
    }
    *out = (stk_jpeg_region){.pixels = dec->scratch,
                             .stride = out_stride,
                             .width = (int)d->output_width,
                             .height = rows,
                             .channels = oc,
                             .origin_x = (int)xoff,
                             .origin_y = sy0,
                             .scale = s};
    /* Stop here: rows below the region are never entropy-decoded. After
     * the hook, libjpeg-turbo's source still stands at the scan's start. */
    if (hooked || d->output_scanline < d->output_height)
        jpeg_abort_decompress(d);
    else
        jpeg_finish_decompress(d);
    return STK_OK;
fail:
    jpeg_abort_decompress(d);
    return st;
}

stk_status stk_jpeg_decoder_region(stk_jpeg_decoder *dec, const uint8_t *data, size_t len, int bx0,
                                   int by0, int bx1, int by1, double win_w, double win_h, int out_w,
                                   int out_h, int channels, uint32_t expect_w, uint32_t expect_h,
                                   stk_jpeg_region *out)
{
    stk_jpeg_segments *s = &dec->seg;
    int mx0, mx1, my0, my1;
    /* Anything unusual (no usable grid, a wrong size, bad bounds, damaged
     * markers) takes the whole-stream path, which reports it as before. The
     * accurate decode's fancy upsampling reads one chroma sample across a
     * crop's edge: one MCU of margin keeps the pixels exact. */
    if (!dec->segments || stk_jpeg_segments_parse(data, len, s) != STK_OK ||
        (uint64_t)s->width * s->height > dec->max_pixels || /* refused there, as any other */
        (expect_w && s->width != expect_w) || (expect_h && s->height != expect_h) || bx0 < 0 ||
        by0 < 0 || bx1 > (int)s->width || by1 > (int)s->height || bx0 >= bx1 || by0 >= by1 ||
        !stk_jpeg_segments_cover(s, bx0, by0, bx1, by1, dec->fast ? 0 : 1, &mx0, &mx1, &my0, &my1))
        return region_decode(dec, data, len, bx0, by0, bx1, by1, win_w, win_h, out_w, out_h,
                             channels, expect_w, expect_h, NULL, out);
    size_t need = stk_jpeg_segments_bound(s, mx0, mx1, my0, my1);
    if (need > dec->sub_cap) {
        uint8_t *p = realloc(dec->sub, need);
        if (!p) return stk_error(STK_ERR_NOMEM, "out of memory for %zu bytes", need);
        dec->sub = p;
        dec->sub_cap = need;
    }
    size_t n = stk_jpeg_segments_assemble(s, data, mx0, mx1, my0, my1, dec->sub, need);
    int ox = mx0 * s->mcu_w, oy = my0 * s->mcu_h; /* multiples of 8: exact at every scale */
    crop_segments segs = {data, mx0, mx1, my0, my1};
    STK_TRY(region_decode(dec, dec->sub, n, bx0 - ox, by0 - oy, bx1 - ox, by1 - oy, win_w, win_h,
                          out_w, out_h, channels, 0, 0, &segs, out));
    out->origin_x += ox * out->scale / 8;
    out->origin_y += oy * out->scale / 8;
    return STK_OK;
}
