#include "augment/augment.h"

#include "augment/geometry.h"
#include "augment/pixel_ops.h"
#include "augment/resize.h"
#include "common/clock.h"
#include "common/half.h"
#include "common/trace.h"
#include "decode/jpeg_decoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct stk_augment {
    stk_transform t;
    stk_pixel_format format;
    int channels;
    uint64_t seed;
    float scale[3], bias[3]; /* float outputs: value * scale + bias */
    stk_jpeg_decoder *dec;
    stk_resizer *rz;
    uint8_t *tile; /* u8 HWC result before a layout change */
    size_t tile_cap;
    float *ftile; /* f32 CHW result before conversion to f16 */
    size_t ftile_cap;
    stk_pixel_scratch scratch; /* the pixel ops' */
    stk_pixel_op drawn[STK_PIXEL_MAX_DRAWN];
};

stk_status stk_augment_create(const stk_augment_options *o, stk_augment **out)
{
    *out = NULL;
    stk_transform t;
    stk_status st = stk_transform_parse(o->spec ? o->spec : "none", &t);
    if (st != STK_OK) return st;
    if (o->channels != 1 && o->channels != 3)
        return stk_error(STK_ERR_INVALID_ARG, "augment: %d channels (1 or 3)", o->channels);
    if (o->format < STK_PIXELS_U8_HWC || o->format > STK_PIXELS_F16_CHW)
        return stk_error(STK_ERR_INVALID_ARG, "augment: unknown output format %d", (int)o->format);
    if (t.norm == STK_NORM_EXPLICIT && t.norm_values == 3 && o->channels == 1)
        return stk_error(STK_ERR_INVALID_ARG,
                         "transform \"%s\": 3 means/stds for a 1-channel dataset", o->spec);
    stk_augment *a = calloc(1, sizeof *a);
    if (!a) return stk_error(STK_ERR_NOMEM, "out of memory");
    a->t = t;
    a->format = o->format;
    a->channels = o->channels;
    a->seed = o->seed;
    float means[3], stds[3];
    stk_transform_norm_values(&t, o->mean, o->std, means, stds);
    for (int c = 0; c < 3; c++) {
        float mean = means[c], std = stds[c];
        if (!(std > 0)) {
            free(a);
            return stk_error(STK_ERR_INVALID_ARG,
                             "transform \"%s\": norm needs the dataset's mean/std, which it "
                             "does not have (packed with --no-validate?); give norm:MEAN/STD",
                             o->spec);
        }
        a->scale[c] = t.norm ? 1.0f / (255.0f * std) : 1.0f / 255.0f;
        a->bias[c] = t.norm ? -mean / std : 0.0f;
    }
    if ((st = stk_jpeg_decoder_create(o->max_pixels ? o->max_pixels : 64000000, &a->dec)) ||
        (st = stk_resizer_create(&a->rz))) {
        stk_augment_destroy(a);
        return st;
    }
    stk_jpeg_decoder_set_fast(a->dec, o->fast_decode);
    *out = a;
    return STK_OK;
}

void stk_augment_destroy(stk_augment *a)
{
    if (!a) return;
    stk_jpeg_decoder_destroy(a->dec);
    stk_resizer_destroy(a->rz);
    free(a->tile);
    free(a->ftile);
    stk_pixel_scratch_deinit(&a->scratch);
    free(a);
}

const stk_transform *stk_augment_transform(const stk_augment *a) { return &a->t; }

static int grow(void **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap) return 0;
    void *p = realloc(*buf, bytes);
    if (!p) return -1;
    *buf = p;
    *cap = bytes;
    return 0;
}

/* The source pixels the plan needs: a view of a raw payload, or a region
 * decoded from the JPEG; the plan's window is moved into view coordinates. */
static stk_status source_view(stk_augment *a, const stk_sample *s, const stk_sample_plan *p,
                              stk_view *v, stk_window *w, int *dct_scale)
{
    *w = (stk_window){p->x0, p->y0, p->w, p->h, p->bx0, p->by0, p->bx1, p->by1};
    *dct_scale = 0;
    if (s->encoding == 2) { /* raw u8 */
        if (s->channels != a->channels)
            return stk_error(STK_ERR_INVALID_ARG, "raw image has %d channels, the output %d",
                             s->channels, a->channels);
        size_t need = (size_t)s->width * s->height * (size_t)s->channels;
        if (s->len != need)
            return stk_error(STK_ERR_CORRUPT, "raw payload is %zu bytes, not %ux%ux%d", s->len,
                             s->height, s->width, s->channels);
        *v = (stk_view){s->data, (size_t)s->width * (size_t)s->channels, (int)s->width,
                        (int)s->height, s->channels};
        return STK_OK;
    }
    if (s->encoding != 1) return stk_error(STK_ERR_UNSUPPORTED, "unknown encoding %d", s->encoding);
    /* Copies (crop without resize, none) need every pixel at full scale. */
    int ow = p->resize ? p->out_w : (int)ceil(p->w), oh = p->resize ? p->out_h : (int)ceil(p->h);
    double ww = p->resize ? p->w : ow, wh = p->resize ? p->h : oh; /* copies: scale 8/8 */
    /* A copy window may leave the image (zero padding): decode its part inside. */
    int bx0 = p->bx0, by0 = p->by0, bx1 = p->bx1, by1 = p->by1;
    if (!p->resize) {
        int x0 = (int)p->x0, y0 = (int)p->y0;
        bx0 = x0 > 0 ? x0 : 0, by0 = y0 > 0 ? y0 : 0;
        bx1 = x0 + ow < (int)s->width ? x0 + ow : (int)s->width;
        by1 = y0 + oh < (int)s->height ? y0 + oh : (int)s->height;
        if (bx1 <= bx0 || by1 <= by0) bx0 = by0 = 0, bx1 = by1 = 1; /* all padding */
    }
    stk_jpeg_region r;
    stk_status st = stk_jpeg_decoder_region(a->dec, s->data, s->len, bx0, by0, bx1, by1, ww, wh, ow,
                                            oh, a->channels, s->width, s->height, &r);
    if (st != STK_OK) return st;
    *dct_scale = r.scale;
    *v = (stk_view){r.pixels, r.stride, r.width, r.height, r.channels};
    /* Source pixels -> region pixels: scale, then shift by the region's origin. */
    double k = r.scale / 8.0;
    w->x0 = p->x0 * k - r.origin_x, w->y0 = p->y0 * k - r.origin_y;
    w->w = p->w * k, w->h = p->h * k;
    int lx0 = (int)floor(p->bx0 * k) - r.origin_x, ly0 = (int)floor(p->by0 * k) - r.origin_y;
    int lx1 = (int)ceil(p->bx1 * k) - r.origin_x, ly1 = (int)ceil(p->by1 * k) - r.origin_y;
    w->bx0 = lx0 < 0 ? 0 : lx0, w->by0 = ly0 < 0 ? 0 : ly0;
    w->bx1 = lx1 > r.width ? r.width : lx1, w->by1 = ly1 > r.height ? r.height : ly1;
    if (w->bx1 <= w->bx0) w->bx1 = w->bx0 + 1;
    if (w->by1 <= w->by0) w->by1 = w->by0 + 1;
    return STK_OK;
}

/* u8 HWC tile -> the requested layout. */
static void write_u8_chw(const uint8_t *tile, int w, int h, int c, stk_augment_out *out)
{
    uint8_t *dst = out->data;
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++) {
            uint8_t *o = dst + ((size_t)ch * (size_t)h + (size_t)y) * out->stride;
            const uint8_t *in = tile + (size_t)y * (size_t)w * (size_t)c + (size_t)ch;
            for (int x = 0; x < w; x++) o[x] = in[(size_t)x * (size_t)c];
        }
}

static void write_f32_from_u8(const stk_augment *a, const uint8_t *tile, int w, int h, int c,
                              float *dst, size_t row, size_t plane)
{
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++) {
            float *o = dst + (size_t)ch * plane + (size_t)y * row;
            const uint8_t *in = tile + (size_t)y * (size_t)w * (size_t)c + (size_t)ch;
            for (int x = 0; x < w; x++)
                o[x] = in[(size_t)x * (size_t)c] * a->scale[ch] + a->bias[ch];
        }
}

stk_status stk_augment_output_size(const stk_augment *a, uint32_t width, uint32_t height,
                                   int *out_w, int *out_h)
{
    stk_sample_plan p;
    stk_status st = stk_plan_sample(&a->t, width, height, a->seed, 0, 0, &p);
    if (st != STK_OK) return st;
    *out_w = p.out_w;
    *out_h = p.out_h;
    return STK_OK;
}

/* f32 CHW planes (w floats per row) -> f16 CHW at out->stride. */
static void write_f16(const float *in, int w, int h, int c, stk_augment_out *out)
{
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++) {
            uint16_t *o = (uint16_t *)((uint8_t *)out->data +
                                       ((size_t)ch * (size_t)h + (size_t)y) * out->stride);
            const float *row = in + ((size_t)ch * (size_t)h + (size_t)y) * (size_t)w;
            for (int x = 0; x < w; x++) o[x] = stk_f32_to_f16(row[x]);
        }
}

/* The spec's pixel ops on the u8 tile, drawn for this sample. */
static stk_status pixel_ops(stk_augment *a, uint8_t *tile, size_t stride, int w, int h,
                            uint64_t epoch, uint64_t index)
{
    stk_rng r;
    stk_rng_for_sample_ops(&r, a->seed, epoch, index);
    int n = stk_pixel_ops_draw(a->t.ops, a->t.n_ops, &r, w, h, a->drawn);
    /* all at once: runs of colour ops share their passes over the tile */
    return stk_pixel_ops_apply(a->drawn, n, tile, stride, w, h, a->channels, &a->scratch);
}

static stk_status apply(stk_augment *a, const stk_sample *s, uint64_t epoch, uint64_t index,
                        stk_augment_out *out)
{
    stk_sample_plan p;
    stk_status st = stk_plan_sample(&a->t, s->width, s->height, a->seed, epoch, index, &p);
    if (st != STK_OK) return st;
    int c = a->channels, w = p.out_w, h = p.out_h;
    size_t elem = a->format == STK_PIXELS_F32_CHW ? 4 : a->format == STK_PIXELS_F16_CHW ? 2 : 1;
    size_t row_bytes = (size_t)w * elem * (a->format == STK_PIXELS_U8_HWC ? (size_t)c : 1);
    size_t need = a->format == STK_PIXELS_U8_HWC
                      ? out->stride * (size_t)(h - 1) + row_bytes
                      : out->stride * ((size_t)c * (size_t)h - 1) + row_bytes;
    if (out->stride < row_bytes || out->capacity < need)
        return stk_error(STK_ERR_INVALID_ARG,
                         "augment: output of %dx%dx%d needs %zu bytes at a stride of at least %zu; "
                         "got %zu at %zu",
                         w, h, c, need, row_bytes, out->capacity, out->stride);
    out->width = w, out->height = h;
    stk_view v;
    stk_window win;
    uint64_t t0 = stk_clock_ns();
    stk_trace_begin("decode", "loader");
    st = source_view(a, s, &p, &v, &win, &out->dct_scale);
    stk_trace_end();
    out->decode_ns = stk_clock_ns() - t0;
    if (st != STK_OK) return st;

    bool float_out = a->format == STK_PIXELS_F32_CHW || a->format == STK_PIXELS_F16_CHW;
    if (float_out && p.resize && !a->t.n_ops) { /* the float path: no rounding to u8 */
        float *dst = out->data;
        size_t row = out->stride / 4;
        if (a->format == STK_PIXELS_F16_CHW) {
            if (grow((void **)&a->ftile, &a->ftile_cap, (size_t)w * (size_t)h * (size_t)c * 4))
                return stk_error(STK_ERR_NOMEM, "out of memory");
            dst = a->ftile;
            row = (size_t)w;
        }
        st = stk_resize_f32_window(a->rz, &v, &win, dst, row, row * (size_t)h, w, h, p.flip,
                                   a->scale, a->bias);
        if (st != STK_OK || a->format == STK_PIXELS_F32_CHW) return st;
        write_f16(a->ftile, w, h, c, out);
        return STK_OK;
    }
    /* u8 result: straight into the destination for HWC, else into the tile. */
    uint8_t *tile = out->data;
    size_t tile_stride = out->stride;
    if (a->format != STK_PIXELS_U8_HWC) {
        if (grow((void **)&a->tile, &a->tile_cap, (size_t)w * (size_t)h * (size_t)c))
            return stk_error(STK_ERR_NOMEM, "out of memory");
        tile = a->tile;
        tile_stride = (size_t)w * (size_t)c;
    }
    if (p.resize) {
        st = stk_resize_u8_window(a->rz, &v, &win, tile, tile_stride, w, h, p.flip);
        if (st != STK_OK) return st;
    } else {
        stk_copy_window_u8(&v, (int)lround(win.x0), (int)lround(win.y0), tile, tile_stride, w, h,
                           p.flip);
    }
    if (a->t.n_ops && (st = pixel_ops(a, tile, tile_stride, w, h, epoch, index)) != STK_OK)
        return st;
    if (a->format == STK_PIXELS_U8_CHW) write_u8_chw(tile, w, h, c, out);
    if (a->format == STK_PIXELS_F32_CHW)
        write_f32_from_u8(a, tile, w, h, c, out->data, out->stride / 4,
                          out->stride / 4 * (size_t)h);
    if (a->format == STK_PIXELS_F16_CHW) {
        if (grow((void **)&a->ftile, &a->ftile_cap, (size_t)w * (size_t)h * (size_t)c * 4))
            return stk_error(STK_ERR_NOMEM, "out of memory");
        write_f32_from_u8(a, tile, w, h, c, a->ftile, (size_t)w, (size_t)w * (size_t)h);
        write_f16(a->ftile, w, h, c, out);
    }
    return STK_OK;
}

/* The sample as a span of the trace, its decode (inside) another. */
stk_status stk_augment_apply(stk_augment *a, const stk_sample *s, uint64_t epoch, uint64_t index,
                             stk_augment_out *out)
{
    stk_trace_begin("augment", "loader");
    stk_status st = apply(a, s, epoch, index, out);
    stk_trace_end();
    return st;
}
