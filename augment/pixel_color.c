/* The pointwise colour ops on u8 HWC pixels (brightness, contrast,
 * saturation, hue, grayscale, invert, posterize, solarize), as torchvision
 * 0.14's functional ops compute them on uint8 tensors: float32 arithmetic,
 * clamped to 0..255, then truncated (`.to(torch.uint8)`). A run of them is
 * one float pass per stretch between contrasts; with AVX-512 VBMI the ops
 * that map every byte alike become byte tables on the passes' loads and
 * stores (tabled_run). autocontrast and equalize: pixel_histogram.c. */
#include "augment/pixel_ops_impl.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* The pointwise ops run on chunks of pixels held as floats (one array per
 * channel, in L1), every op of a run over the chunk before the next chunk:
 * the u8 <-> float conversions happen once per run, not once per op, and
 * the loops vectorise. Each op truncates to an integer as its u8 result
 * would, so a run equals the ops one after the other. Measured: bench/README.md
 * "Pixel ops". */
#define CHUNK 512

/* Inlined into each ISA's clone of run(). */
#define CHUNK_FN static inline __attribute__((always_inline))

/* One clone of run() per ISA, picked by an ifunc resolver at load time;
 * not under ThreadSanitizer, whose runtime is not up when resolvers run
 * (every program crashed at start). */
#if defined(__SANITIZE_THREAD__)
#define ISA_CLONES
#else
#define ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

typedef struct chunk {
    float v[3][CHUNK];
} chunk;

/* (float)(uint8_t)x for x in 0..255: truncation by conversion (SSE2 vectorises it). */
static inline float trunc_pos(float x) { return (float)(int)x; }

static inline float clamp255(float x) { return x < 0.0f ? 0.0f : x > 255.0f ? 255.0f : x; }

/* _blend(x, other, ratio): ratio * x + rest, rest = (1 - ratio) * other. */
/* Each op's result truncated to a whole value as its u8 result would be;
 * not the last op of a pass that only stores (the store truncates). */
CHUNK_FN float whole_if(float x, bool whole) { return whole ? trunc_pos(x) : x; }

CHUNK_FN void blend(float *x, int n, float ratio, float rest, bool whole)
{
    for (int i = 0; i < n; i++) x[i] = whole_if(clamp255(ratio * x[i] + rest), whole);
}

CHUNK_FN void gray_chunk(chunk *k, int n, float *gray)
{
    for (int i = 0; i < n; i++) {
        float l = 0.2989f * k->v[0][i];
        l = l + 0.587f * k->v[1][i];
        l = l + 0.114f * k->v[2][i];
        gray[i] = trunc_pos(l);
    }
}

/* The sum of the chunk's grayscale as gray_chunk truncates it, in one
 * loop (not stored first), or of its values (one channel). */
CHUNK_FN uint32_t gray_sum_chunk(const chunk *k, int n)
{
    uint32_t sum = 0;
    for (int i = 0; i < n; i++) {
        float l = 0.2989f * k->v[0][i];
        l = l + 0.587f * k->v[1][i];
        l = l + 0.114f * k->v[2][i];
        sum += (uint32_t)(int)l;
    }
    return sum;
}

CHUNK_FN uint32_t value_sum_chunk(const chunk *k, int n)
{
    uint32_t sum = 0;
    for (int i = 0; i < n; i++) sum += (uint32_t)(int)k->v[0][i];
    return sum;
}

CHUNK_FN void saturation_chunk(chunk *k, int n, double ratio, bool whole)
{
    float gray[CHUNK], r = (float)ratio, rest = (float)(1.0 - ratio);
    gray_chunk(k, n, gray);
    for (int i = 0; i < n; i++) gray[i] *= rest; /* once, not per channel */
    for (int c = 0; c < 3; c++) {
        float *x = k->v[c];
        for (int i = 0; i < n; i++) x[i] = whole_if(clamp255(r * x[i] + gray[i]), whole);
    }
}

/* adjust_hue, computed on the 0..255 values without a division: a hue
 * rotation keeps each pixel's max M and min m. With d = M - m, the hue in
 * sixths of the circle is h6 / d (h6 from the channel holding the max, as
 * torchvision's _rgb2hsv); shifted by 6 * hue and wrapped into [0, 6) it
 * is x, and each channel is M - d * t with t = clamp(min(x - 1, 5 - x)) for
 * R, clamp(max(1 - x, x - 3)) for G, clamp(max(3 - x, x - 5)) for B
 * (clamp to [0, 1]): _hsv2rgb's choice of v, p, q, t by sextant, without a
 * branch or a modulo. All of it times d: X = x * d = h6 + d * 6 * hue,
 * wrapped into [0, 6d), and d * t = clamp(min(X - d, 5d - X)) to [0, d]...
 * (the division per pixel cost a third of the op: bench/README.md).
 * torchvision's float32 path lands within 1 of these values (its x / 255 *
 * 255 is not always x): tests/test_pixel_ops.c measures the PSNR. */
CHUNK_FN float clamp0d(float t, float d) { return t < 0.0f ? 0.0f : t > d ? d : t; }

CHUNK_FN void hue_chunk(chunk *k, int n, float hue, bool whole)
{
    float *R = k->v[0], *G = k->v[1], *B = k->v[2], shift = 6.0f * hue;
    for (int i = 0; i < n; i++) {
        float r = R[i], g = G[i], b = B[i];
        float M = r > g ? r : g, m = r < g ? r : g;
        M = M > b ? M : b, m = m < b ? m : b;
        float d = M - m, d3 = 3.0f * d, d5 = 5.0f * d, d6 = 6.0f * d;
        float h6 = M == r ? g - b : M == g ? 2.0f * d + b - r : 4.0f * d + r - g;
        float x = h6 + d * shift; /* in [-4d, 8d) */
        x = x < 0.0f ? x + d6 : x;
        x = x >= d6 ? x - d6 : x;
        float a = x - d, c = d5 - x, tr = clamp0d(a < c ? a : c, d);
        float e = d - x, f = x - d3, tg = clamp0d(e > f ? e : f, d);
        float u = d3 - x, v = x - d5, tb = clamp0d(u > v ? u : v, d);
        R[i] = whole_if(M - tr, whole);
        G[i] = whole_if(M - tg, whole);
        B[i] = whole_if(M - tb, whole);
    }
}

static bool is_pointwise(stk_pixel_op_kind k)
{
    return k == STK_OP_BRIGHTNESS || k == STK_OP_CONTRAST || k == STK_OP_SATURATION ||
           k == STK_OP_HUE || k == STK_OP_GRAYSCALE || k == STK_OP_INVERT ||
           k == STK_OP_POSTERIZE || k == STK_OP_SOLARIZE;
}

/* One op on the chunk's n pixels; contrast blends towards `mean`; whole:
 * see whole_if. */
CHUNK_FN void chunk_op(const stk_pixel_op *op, float mean, chunk *k, int n, int c, bool whole)
{
    double a = op->arg[0];
    float gray[CHUNK];
    switch (op->kind) {
    case STK_OP_BRIGHTNESS:
    case STK_OP_CONTRAST: {
        float rest = op->kind == STK_OP_CONTRAST ? (float)(1.0 - a) * mean : 0.0f;
        for (int ch = 0; ch < c; ch++) blend(k->v[ch], n, (float)a, rest, whole);
        return;
    }
    case STK_OP_SATURATION:
        if (c == 3) saturation_chunk(k, n, a, whole);
        return;
    case STK_OP_HUE:
        if (c == 3) hue_chunk(k, n, (float)a, whole);
        return;
    case STK_OP_GRAYSCALE:
        if (c != 3) return;
        gray_chunk(k, n, gray);
        for (int ch = 0; ch < 3; ch++) memcpy(k->v[ch], gray, (size_t)n * sizeof *gray);
        return;
    case STK_OP_INVERT:
        for (int ch = 0; ch < c; ch++)
            for (int i = 0; i < n; i++) k->v[ch][i] = 255.0f - k->v[ch][i];
        return;
    case STK_OP_POSTERIZE: { /* v & mask == floor(v / q) * q, q = 2^(8 - bits) */
        float q = (float)(1 << (8 - (int)a)), keep = a > 0 ? 1.0f : 0.0f;
        for (int ch = 0; ch < c; ch++)
            for (int i = 0; i < n; i++) k->v[ch][i] = trunc_pos(k->v[ch][i] / q) * q * keep;
        return;
    }
    case STK_OP_SOLARIZE: { /* thresholds are whole or float32 values: exact as floats */
        float thr = (float)a;
        for (int ch = 0; ch < c; ch++)
            for (int i = 0; i < n; i++) {
                float v = k->v[ch][i];
                k->v[ch][i] = v >= thr ? 255.0f - v : v;
            }
        return;
    }
    default: return;
    }
}

/* Where a pass reads or writes: the HWC image (rows `stride` bytes apart),
 * or planes (c planes of w * h bytes) between the passes of one run, which
 * load and store without the de-interleaving that costs most of a pass;
 * and a byte table (or none) each byte goes through on the way. */
typedef struct view {
    uint8_t *base;
    size_t stride;        /* HWC: bytes between rows */
    size_t plane;         /* planar: bytes between planes (0: HWC) */
    const uint8_t *table; /* 256 entries, or NULL */
} view;

CHUNK_FN void load(chunk *k, const view *v, int w, int y, int x0, int n, int c)
{
    const uint8_t *t = v->table;
    if (v->plane || c == 1) {
        for (int ch = 0; ch < c; ch++) {
            const uint8_t *p =
                v->plane ? v->base + (size_t)ch * v->plane + (size_t)y * (size_t)w + (size_t)x0
                         : v->base + (size_t)y * v->stride + (size_t)x0;
            if (t)
                for (int i = 0; i < n; i++) k->v[ch][i] = (float)t[p[i]];
            else
                for (int i = 0; i < n; i++) k->v[ch][i] = (float)p[i];
        }
        return;
    }
    stk_pixel_rgb_load(v->base + (size_t)y * v->stride + (size_t)x0 * 3, n, t, k->v[0], k->v[1],
                       k->v[2]);
}

CHUNK_FN void store(const chunk *k, const view *v, int w, int y, int x0, int n, int c)
{
    const uint8_t *t = v->table;
    if (v->plane || c == 1) {
        for (int ch = 0; ch < c; ch++) {
            uint8_t *p = v->plane
                             ? v->base + (size_t)ch * v->plane + (size_t)y * (size_t)w + (size_t)x0
                             : v->base + (size_t)y * v->stride + (size_t)x0;
            if (t)
                for (int i = 0; i < n; i++) p[i] = t[(int)k->v[ch][i]];
            else
                for (int i = 0; i < n; i++) p[i] = (uint8_t)(int)k->v[ch][i];
        }
        return;
    }
    stk_pixel_rgb_store(k->v[0], k->v[1], k->v[2], n, t,
                        v->base + (size_t)y * v->stride + (size_t)x0 * 3);
}

/* Run ops[0..n) from src into dst (NULL: store nothing); with `sum`, also
 * add up the result's grayscale (3 channels) or values (1): the mean a
 * contrast after these ops blends towards. Vectorised for AVX2 and AVX-512
 * where the CPU has them (bench/README.md "Pixel ops"). */
ISA_CLONES static void run(const stk_pixel_op *ops, const float *means, int n, const view *src,
                           const view *dst, int w, int h, int c, uint64_t *sum)
{
    chunk k;
    for (int y = 0; y < h; y++)
        for (int x0 = 0; x0 < w; x0 += CHUNK) {
            int m = w - x0 < CHUNK ? w - x0 : CHUNK;
            load(&k, src, w, y, x0, m, c);
            for (int i = 0; i < n; i++) /* `whole` a constant in each call: one loop each */
                if (i + 1 < n || sum)
                    chunk_op(&ops[i], means[i], &k, m, c, true);
                else
                    chunk_op(&ops[i], means[i], &k, m, c, false);
            if (dst) store(&k, dst, w, y, x0, m, c);
            if (sum) *sum += c == 3 ? gray_sum_chunk(&k, m) : value_sum_chunk(&k, m);
        }
}

/* A run of pointwise ops: one pass per stretch up to the next contrast,
 * which needs the mean of the image the stretch leaves; between passes the
 * pixels wait as planes in the scratch. */
static stk_status pointwise_run(const stk_pixel_op *ops, int n, uint8_t *img, size_t stride, int w,
                                int h, int c, stk_pixel_scratch *s)
{
    float means[STK_PIXEL_MAX_DRAWN] = {0};
    float pixels = (float)w * (float)h;
    view image = {img, stride, 0, NULL}, planes = {NULL, 0, (size_t)w * (size_t)h, NULL};
    bool split = false;
    for (int i = 1; i < n; i++) split |= ops[i].kind == STK_OP_CONTRAST;
    if (split) {
        STK_TRY(stk_pixel_scratch_copy(s, planes.plane * (size_t)c));
        planes.base = s->copy;
    }
    if (ops[0].kind == STK_OP_CONTRAST) { /* the mean of the image as it is */
        uint64_t sum = 0;
        run(ops, means, 0, &image, NULL, w, h, c, &sum);
        means[0] = (float)sum / pixels; /* torch.mean in float32 */
    }
    for (int start = 0; start < n;) {
        int end = start + 1;
        while (end < n && ops[end].kind != STK_OP_CONTRAST) end++;
        uint64_t sum = 0;
        run(ops + start, means + start, end - start, start == 0 ? &image : &planes,
            end == n ? &image : &planes, w, h, c, end < n ? &sum : NULL);
        if (end < n) means[end] = (float)sum / pixels;
        start = end;
    }
    return STK_OK;
}

/* The ops that send every byte through the same function: brightness,
 * contrast (once the mean it blends towards is known), invert, posterize,
 * solarize. With VBMI such an op is a byte table applied as a pass loads
 * or stores its pixels, not float arithmetic on three channels. */
static bool maps_bytes(stk_pixel_op_kind k)
{
    return k == STK_OP_BRIGHTNESS || k == STK_OP_CONTRAST || k == STK_OP_INVERT ||
           k == STK_OP_POSTERIZE || k == STK_OP_SOLARIZE;
}

/* t = op after t: the op's table computed by the passes' own float code on
 * the values 0..255, so a table gives the bytes the float pass would. */
static void compose(uint8_t t[256], const stk_pixel_op *op, float mean)
{
    _Static_assert(CHUNK >= 256, "a chunk holds the 256 byte values");
    chunk k;
    for (int v = 0; v < 256; v++) k.v[0][v] = (float)v;
    chunk_op(op, mean, &k, 256, 1, true);
    for (int v = 0; v < 256; v++) t[v] = (uint8_t)(int)k.v[0][(int)t[v]];
}

/* The mean of the image's grayscale (after the table if any): a pass that
 * only sums. */
static float gray_mean(uint8_t *img, int pixels, const uint8_t *table)
{
    uint64_t sum = 0;
    view src = {img, (size_t)pixels * 3, 0, table};
    run(NULL, NULL, 0, &src, NULL, pixels, 1, 3, &sum);
    return (float)sum / (float)pixels; /* torch.mean in float32 */
}

/* A run of pointwise ops on `pixels` RGB pixels back to back, with VBMI:
 * byte-mapping ops fold into the table of the next pass's loads (or, after
 * the last op that needs floats, of its stores); a contrast's mean comes
 * from the pass before it, or from a pass that only sums when byte-mapping
 * ops alone precede it; a run of byte-mapping ops alone is one table over
 * the bytes. One float pass per stretch between contrasts, in place. */
static void tabled_run(const stk_pixel_op *ops, int n, uint8_t *img, int pixels)
{
    static const float no_means[STK_PIXEL_MAX_DRAWN];
    uint8_t in[256], out[256];
    float mean = 0.0f;
    bool mean_known = false; /* mean: of the image as it stands (after the last pass) */
    for (int i = 0; i < n;) {
        bool tabled = false;
        for (int v = 0; v < 256; v++) in[v] = (uint8_t)v;
        for (; i < n && maps_bytes(ops[i].kind); i++, tabled = true) {
            if (ops[i].kind == STK_OP_CONTRAST && !(mean_known && !tabled)) {
                mean = gray_mean(img, pixels, tabled ? in : NULL);
            }
            compose(in, &ops[i], mean);
        }
        if (i == n) {
            if (tabled) stk_pixel_vbmi_table_bytes(img, (size_t)pixels * 3, in);
            return;
        }
        int end = i; /* this pass: up to the next contrast */
        while (end < n && ops[end].kind != STK_OP_CONTRAST) end++;
        int floats = end; /* the last pass stores through the table of its trailing byte ops */
        if (end == n)
            while (floats > i && maps_bytes(ops[floats - 1].kind)) floats--;
        for (int v = 0; v < 256; v++) out[v] = (uint8_t)v;
        for (int j = floats; j < end; j++) compose(out, &ops[j], 0.0f);
        view src = {img, (size_t)pixels * 3, 0, tabled ? in : NULL};
        view dst = {img, (size_t)pixels * 3, 0, floats < end ? out : NULL};
        uint64_t sum = 0;
        run(ops + i, no_means, floats - i, &src, &dst, pixels, 1, 3, end < n ? &sum : NULL);
        mean = (float)sum / (float)pixels, mean_known = end < n;
        i = end;
    }
}

stk_status stk_pixel_color(const stk_pixel_op *ops, int n, uint8_t *img, size_t stride, int w,
                           int h, int c, stk_pixel_scratch *s, int *ran)
{
    int run_end = 0;
    while (run_end < n && is_pointwise(ops[run_end].kind)) run_end++;
    if (run_end == 0) {
        stk_pixel_histogram_op(ops, img, stride, w, h, c);
        *ran = 1;
        return STK_OK;
    }
    *ran = run_end;
    if (stride == (size_t)w * (size_t)c && (size_t)w * (size_t)h <= INT_MAX) {
        w *= h, h = 1; /* rows back to back: one long row, so chunks are whole */
        if (c == 3 && stk_pixel_vbmi()) {
            tabled_run(ops, run_end, img, w);
            return STK_OK;
        }
    }
    return pointwise_run(ops, run_end, img, stride, w, h, c, s);
}
