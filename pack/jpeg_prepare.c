#include "pack/jpeg_prepare.h"

#include "augment/resize.h"
#include "decode/image_decode.h"
#include "decode/jpeg_error.h"
#include "decode/jpeg_huffman.h"
#include "decode/jpeg_segments.h"

#include <stdlib.h>
#include <string.h>

struct stk_jpeg_preparer {
    stk_jpeg_prepare_options opts;
    stk_jpeg_decoder *dec;
    /* Transcoding needs a decompressor whose coefficients stay alive while a
     * compressor writes them, so it has its own pair. */
    struct jpeg_decompress_struct d;
    struct jpeg_compress_struct c;
    stk_jpeg_error err;    /* shared by d and c: one jump target */
    unsigned char *outbuf; /* jpeg_mem_dest output; in the struct, not a local, so
                              it survives a longjmp */
    unsigned long outsize;
    uint8_t *resized;
    size_t resized_cap;
    stk_jpeg_segments seg; /* an input's existing restart grid */
    bool counted_tables;   /* Huffman statistics from jpeg_huffman.c, not libjpeg's pass */
};

stk_status stk_jpeg_preparer_create(const stk_jpeg_prepare_options *opts, stk_jpeg_preparer **out)
{
    *out = NULL;
    if (opts->quality < 1 || opts->quality > 100)
        return stk_error(STK_ERR_INVALID_ARG, "JPEG quality %d is not in 1..100", opts->quality);
    stk_jpeg_preparer *p = calloc(1, sizeof *p);
    if (!p) return stk_error(STK_ERR_NOMEM, "out of memory");
    p->opts = *opts;
    p->counted_tables = true;
    stk_status st = stk_jpeg_decoder_create(opts->max_pixels, &p->dec);
    if (st != STK_OK) {
        free(p);
        return st;
    }
    p->d.err = p->c.err = stk_jpeg_error_init(&p->err, STK_JPEG_MAX_SCANS);
    if (setjmp(p->err.jump)) {
        stk_jpeg_decoder_destroy(p->dec);
        free(p);
        return stk_error(STK_ERR_NOMEM, "cannot create JPEG codec state");
    }
    jpeg_create_decompress(&p->d);
    jpeg_create_compress(&p->c);
    stk_jpeg_error_attach_progress(&p->err, (j_common_ptr)&p->d);
    *out = p;
    return STK_OK;
}

void stk_jpeg_preparer_destroy(stk_jpeg_preparer *p)
{
    if (!p) return;
    jpeg_destroy_decompress(&p->d);
    jpeg_destroy_compress(&p->c);
    stk_jpeg_decoder_destroy(p->dec);
    free(p->resized);
    stk_jpeg_segments_free(&p->seg);
    free(p);
}

void stk_jpeg_preparer_set_counted_tables(stk_jpeg_preparer *p, bool on) { p->counted_tables = on; }

void stk_jpeg_prepared_free(stk_jpeg_prepared *out, const uint8_t *in)
{
    if (out->data && out->data != in) free(out->data);
    out->data = NULL;
}

/* The restart interval for the compressor's image (restart_mcus > 0): an
 * MCU is one block for a single component, else max sampling x 8 pixels. */
static void set_restarts(stk_jpeg_preparer *p)
{
    if (p->opts.restart_mcus <= 0) return;
    struct jpeg_compress_struct *c = &p->c;
    int maxh = 1;
    for (int i = 0; i < c->num_components; i++)
        if (c->comp_info[i].h_samp_factor > maxh) maxh = c->comp_info[i].h_samp_factor;
    int mcu_w = c->num_components == 1 ? 8 : 8 * maxh;
    int mcus_x = (int)((c->image_width + (JDIMENSION)mcu_w - 1) / (JDIMENSION)mcu_w);
    c->restart_interval = (unsigned)stk_jpeg_restart_interval(mcus_x, p->opts.restart_mcus);
}

/* Lossless rewrite to baseline Huffman: copy the quantised DCT coefficients
 * into a new file (no decode to pixels, no quality loss), for progressive or
 * arithmetic-coded files, and for restart markers. With optimal Huffman
 * tables, counted by jpeg_huffman.c (libjpeg's own count, a pass over the
 * whole scan, was 28% of the time of a pack), or by libjpeg when that
 * count fails (a coefficient out of range: libjpeg then reports it). */
static stk_status transcode(stk_jpeg_preparer *p, const uint8_t *in, size_t len,
                            stk_jpeg_action action, stk_jpeg_prepared *out)
{
    p->outbuf = NULL;
    p->outsize = 0;
    p->err.status = STK_OK;
    if (setjmp(p->err.jump)) {
        jpeg_abort_compress(&p->c);
        jpeg_abort_decompress(&p->d);
        free(p->outbuf);
        return stk_jpeg_error_status(&p->err);
    }
    jpeg_mem_src(&p->d, in, (unsigned long)len);
    jpeg_read_header(&p->d, TRUE);
    jvirt_barray_ptr *coefs = jpeg_read_coefficients(&p->d);
    jpeg_mem_dest(&p->c, &p->outbuf, &p->outsize);
    jpeg_copy_critical_parameters(&p->d, &p->c); /* also resets to baseline Huffman */
    set_restarts(p);
    p->c.optimize_coding = !(p->counted_tables && stk_jpeg_optimal_tables(&p->d, coefs, &p->c));
    jpeg_write_coefficients(&p->c, coefs);
    jpeg_finish_compress(&p->c);
    jpeg_finish_decompress(&p->d);
    out->data = p->outbuf;
    out->len = p->outsize;
    out->action = action;
    return STK_OK;
}

static stk_status encode(stk_jpeg_preparer *p, const uint8_t *pixels, uint32_t w, uint32_t h,
                         int channels, stk_jpeg_prepared *out)
{
    p->outbuf = NULL;
    p->outsize = 0;
    p->err.status = STK_OK;
    if (setjmp(p->err.jump)) {
        jpeg_abort_compress(&p->c);
        free(p->outbuf);
        return stk_jpeg_error_status(&p->err);
    }
    jpeg_mem_dest(&p->c, &p->outbuf, &p->outsize);
    p->c.image_width = w;
    p->c.image_height = h;
    p->c.input_components = channels;
    p->c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&p->c);
    jpeg_set_quality(&p->c, p->opts.quality, TRUE);
    p->c.optimize_coding = TRUE;
    set_restarts(p);
    jpeg_start_compress(&p->c, TRUE);
    while (p->c.next_scanline < h) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)p->c.next_scanline * w * (size_t)channels);
        jpeg_write_scanlines(&p->c, &row, 1);
    }
    jpeg_finish_compress(&p->c);
    out->data = p->outbuf;
    out->len = p->outsize;
    return STK_OK;
}

/* Shrink pixels to max_side if asked (the longer side), then encode. */
static stk_status shrink_encode(stk_jpeg_preparer *p, const uint8_t *pixels, uint32_t w, uint32_t h,
                                int channels, bool shrink, stk_jpeg_prepared *out)
{
    if (shrink) {
        uint32_t target = p->opts.max_side, dw, dh;
        if (w >= h) {
            dw = target;
            dh = (uint32_t)(((uint64_t)h * target * 2 + w) / (2 * (uint64_t)w));
        } else {
            dh = target;
            dw = (uint32_t)(((uint64_t)w * target * 2 + h) / (2 * (uint64_t)h));
        }
        if (dw < 1) dw = 1;
        if (dh < 1) dh = 1;
        size_t need = (size_t)dw * dh * (size_t)channels;
        if (need > p->resized_cap) {
            uint8_t *r = realloc(p->resized, need);
            if (!r) return stk_error(STK_ERR_NOMEM, "out of memory resizing");
            p->resized = r;
            p->resized_cap = need;
        }
        stk_status st =
            stk_resize_u8(pixels, (int)w, (int)h, channels, p->resized, (int)dw, (int)dh);
        if (st != STK_OK) return st;
        pixels = p->resized;
        w = dw;
        h = dh;
    }
    return encode(p, pixels, w, h, channels, out);
}

/* Decode (CMYK converted to RGB), shrink to max_side if asked, re-encode. */
static stk_status reencode(stk_jpeg_preparer *p, const uint8_t *in, size_t len,
                           const stk_jpeg_info *info, bool shrink, stk_jpeg_prepared *out)
{
    uint32_t longer = info->width > info->height ? info->width : info->height;
    uint32_t target = shrink ? p->opts.max_side : longer;
    /* The smallest DCT scale whose output still covers the target size,
     * among 8/8, 4/8, 2/8 and 1/8 only: libjpeg-turbo has SIMD IDCTs for
     * those, and the others measured slower than a full decode (bench/README.md,
     * "Measurements behind choices in the code"). */
    int scale = 8;
    while (scale > 1 && (uint64_t)longer * (unsigned)(scale / 2) >= (uint64_t)target * 8)
        scale /= 2;
    const uint8_t *pixels;
    uint32_t w, h;
    int channels;
    stk_status st = stk_jpeg_decoder_pixels(p->dec, in, len, scale, &pixels, &w, &h, &channels);
    if (st != STK_OK) return st;
    if ((st = shrink_encode(p, pixels, w, h, channels, shrink, out))) return st;
    out->action = shrink ? STK_JPEG_RESIZED : STK_JPEG_CONVERTED;
    return STK_OK;
}

/* A PNG, WebP, BMP or PPM/PGM file: decoded (PIL's RGB or L pixels), shrunk
 * if asked, stored as JPEG at the preparer's quality (README "Formats": the
 * measurements behind storing JPEG rather than the original). */
static stk_status encode_other(stk_jpeg_preparer *p, const uint8_t *in, size_t len,
                               stk_jpeg_prepared *out)
{
    uint8_t *pixels;
    uint32_t w, h;
    int channels;
    stk_status st = stk_image_decode(in, len, 0, p->opts.max_pixels, &pixels, &w, &h, &channels);
    if (st != STK_OK) return st;
    uint32_t longer = w > h ? w : h;
    st = shrink_encode(p, pixels, w, h, channels, p->opts.max_side && longer > p->opts.max_side,
                       out);
    free(pixels);
    if (st != STK_OK) return st;
    out->action = STK_JPEG_ENCODED;
    return STK_OK;
}

/* The file already has an aligned restart grid no coarser than asked. */
static bool has_grid(stk_jpeg_preparer *p, const uint8_t *in, size_t len)
{
    return stk_jpeg_segments_parse(in, len, &p->seg) == STK_OK &&
           p->seg.interval <= p->opts.restart_mcus;
}

/* What is stored for a JPEG file (see the header). */
static stk_status prepare_jpeg(stk_jpeg_preparer *p, const uint8_t *in, size_t len,
                               const stk_jpeg_info *info, stk_jpeg_prepared *out)
{
    uint32_t longer = info->width > info->height ? info->width : info->height;
    bool shrink = p->opts.max_side && longer > p->opts.max_side;
    if (shrink || info->kind == STK_JPEG_CMYK) return reencode(p, in, len, info, shrink, out);
    if (info->progressive || info->arithmetic)
        return transcode(p, in, len, STK_JPEG_TRANSCODED, out);
    if (p->opts.restart_mcus > 0 && p->opts.validate && !has_grid(p, in, len))
        return transcode(p, in, len, STK_JPEG_SEGMENTED, out);
    out->data = (uint8_t *)in;
    out->len = len;
    out->action = STK_JPEG_STORED;
    return STK_OK;
}

stk_status stk_jpeg_prepare(stk_jpeg_preparer *p, const uint8_t *in, size_t len,
                            stk_jpeg_prepared *out)
{
    memset(out, 0, sizeof *out);
    stk_jpeg_info info;
    stk_status st;
    stk_image_kind kind = stk_image_sniff(in, len);
    if (stk_image_decodable(kind)) /* PNG, WebP, BMP, PPM/PGM */
        st = encode_other(p, in, len, out);
    else if (kind != STK_IMAGE_JPEG && kind != STK_IMAGE_UNKNOWN) /* GIF, TIFF */
        return stk_error(STK_ERR_UNSUPPORTED,
                         "a %s image: not one of JPEG, PNG, WebP, BMP, PPM/PGM (convert it to "
                         "one of those)",
                         stk_image_kind_name(kind));
    else if ((st = stk_jpeg_decoder_header(p->dec, in, len, &info)) == STK_OK)
        st = prepare_jpeg(p, in, len, &info, out);
    if (st != STK_OK) return st;
    /* Validate what will be stored, and take its size from it. */
    if (p->opts.validate) {
        st = stk_jpeg_decoder_validate(p->dec, out->data, out->len, &info, &out->stats);
        out->has_stats = st == STK_OK;
    } else if (out->data != in) {
        st = stk_jpeg_decoder_header(p->dec, out->data, out->len, &info);
    }
    if (st != STK_OK) {
        stk_jpeg_prepared_free(out, in);
        return st;
    }
    out->width = info.width;
    out->height = info.height;
    out->channels = info.components == 1 ? 1 : 3;
    return STK_OK;
}
