/* Restart-marker segments of a baseline JPEG (jpeg_segments.h). */
#include "decode/jpeg_segments.h"

#include <stdlib.h>
#include <string.h>

static unsigned be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

void stk_jpeg_segments_free(stk_jpeg_segments *s)
{
    free(s->end);
    memset(s, 0, sizeof *s);
}

/* The frame header's payload (after the length): P, Y, X, Nf, components. */
static stk_status parse_sof(const uint8_t *p, size_t n, stk_jpeg_segments *s, int *ncomp)
{
    if (n < 6) return stk_error(STK_ERR_CORRUPT, "frame header of %zu bytes", n);
    int nf = p[5];
    if (n != 6 + 3 * (size_t)nf || nf < 1 || nf > 4)
        return stk_error(STK_ERR_CORRUPT, "frame header with %d components in %zu bytes", nf, n);
    if (p[0] != 8) return stk_error(STK_ERR_UNSUPPORTED, "%d-bit samples", p[0]);
    s->height = be16(p + 1);
    s->width = be16(p + 3);
    if (s->height == 0) return stk_error(STK_ERR_UNSUPPORTED, "height given by a DNL marker");
    if (s->width == 0) return stk_error(STK_ERR_CORRUPT, "image width 0");
    int maxh = 1, maxv = 1;
    for (int i = 0; i < nf; i++) {
        int h = p[7 + 3 * i] >> 4, v = p[7 + 3 * i] & 15;
        if (h < 1 || h > 4 || v < 1 || v > 4)
            return stk_error(STK_ERR_CORRUPT, "sampling factors %dx%d", h, v);
        if (h > maxh) maxh = h;
        if (v > maxv) maxv = v;
    }
    /* one component: the scan is not interleaved and an MCU is one block */
    s->mcu_w = nf == 1 ? 8 : 8 * maxh;
    s->mcu_h = nf == 1 ? 8 : 8 * maxv;
    *ncomp = nf;
    return STK_OK;
}

/* The markers before the scan: frame, restart interval, scan header. */
static stk_status parse_headers(const uint8_t *d, size_t len, stk_jpeg_segments *s)
{
    if (len < 4 || d[0] != 0xFF || d[1] != 0xD8)
        return stk_error(STK_ERR_UNSUPPORTED, "not a JPEG");
    size_t pos = 2;
    int ncomp = 0;
    for (;;) {
        if (pos >= len || d[pos] != 0xFF)
            return stk_error(STK_ERR_UNSUPPORTED, "bytes between markers at %zu", pos);
        while (pos < len && d[pos] == 0xFF) pos++; /* fill bytes */
        if (pos + 3 > len) return stk_error(STK_ERR_CORRUPT, "ends before its scan");
        size_t at = pos - 1; /* the FF right before the marker code */
        int m = d[pos++];
        if (m == 0xD8 || m == 0xD9 || m == 0x01 || (m >= 0xD0 && m <= 0xD7))
            return stk_error(STK_ERR_UNSUPPORTED, "marker %02X before the scan", m);
        size_t l = be16(d + pos);
        if (l < 2 || pos + l > len)
            return stk_error(STK_ERR_CORRUPT, "marker %02X of %zu bytes at %zu runs past the end",
                             m, l, at);
        const uint8_t *p = d + pos + 2;
        size_t n = l - 2;
        if (m == 0xC0 || m == 0xC1) {
            if (ncomp) return stk_error(STK_ERR_UNSUPPORTED, "two frame headers");
            STK_TRY(parse_sof(p, n, s, &ncomp));
            s->sof_at = at;
            s->sof_len = l + 2;
        } else if ((m >= 0xC2 && m <= 0xCF) && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            return stk_error(STK_ERR_UNSUPPORTED, "not baseline Huffman (SOF%d)", m - 0xC0);
        } else if (m == 0xCC) {
            return stk_error(STK_ERR_UNSUPPORTED, "arithmetic coding");
        } else if (m == 0xDD) {
            if (n != 2)
                return stk_error(STK_ERR_CORRUPT, "restart interval marker of %zu bytes", n);
            s->interval = (int)be16(p);
        } else if (m == 0xDA) {
            if (!ncomp) return stk_error(STK_ERR_CORRUPT, "scan before the frame header");
            int ns = n ? p[0] : 0;
            if (n != 4 + 2 * (size_t)ns)
                return stk_error(STK_ERR_CORRUPT, "scan header of %zu bytes for %d components", n,
                                 ns);
            if (ns != ncomp)
                return stk_error(STK_ERR_UNSUPPORTED, "a scan without every component");
            const uint8_t *t = p + 1 + 2 * ns;
            if (t[0] != 0 || t[1] != 63 || t[2] != 0)
                return stk_error(STK_ERR_UNSUPPORTED, "not a sequential scan");
            s->data_at = pos + l;
            return STK_OK;
        }
        pos += l;
    }
}

/* Where each segment ends: its RSTn (in order) or, for the last, EOI. */
static stk_status find_markers(const uint8_t *d, size_t len, stk_jpeg_segments *s, size_t n)
{
    size_t p = s->data_at, k = 0;
    for (;;) {
        const uint8_t *f = p < len ? memchr(d + p, 0xFF, len - p) : NULL;
        if (!f) return stk_error(STK_ERR_CORRUPT, "the scan ends without an EOI marker");
        size_t i = (size_t)(f - d), j = i + 1;
        while (j < len && d[j] == 0xFF) j++;
        if (j >= len) return stk_error(STK_ERR_CORRUPT, "the scan ends without an EOI marker");
        int b = d[j];
        p = j + 1;
        if (b == 0x00) continue; /* a stuffed FF in the data */
        if (b >= 0xD0 && b <= 0xD7) {
            if (k + 1 >= n)
                return stk_error(STK_ERR_CORRUPT, "more restart markers than %zu segments", n);
            if (b != 0xD0 + (int)(k % 8))
                return stk_error(STK_ERR_CORRUPT,
                                 "restart marker %d where %d belongs (segment %zu)", b - 0xD0,
                                 (int)(k % 8), k);
            s->end[k++] = (uint32_t)(j - 1);
            continue;
        }
        if (b == 0xD9) {
            if (k + 1 != n)
                return stk_error(STK_ERR_CORRUPT, "%zu segments where the image has %zu", k + 1, n);
            s->end[k] = (uint32_t)(j - 1);
            s->count = n;
            return STK_OK;
        }
        return stk_error(STK_ERR_UNSUPPORTED, "marker %02X inside the scan", b);
    }
}

stk_status stk_jpeg_segments_parse(const uint8_t *d, size_t len, stk_jpeg_segments *s)
{
    uint32_t *keep = s->end;
    size_t cap = s->cap;
    memset(s, 0, sizeof *s);
    s->end = keep;
    s->cap = cap;
    if (len > UINT32_MAX) return stk_error(STK_ERR_UNSUPPORTED, "over 4 GB");
    STK_TRY(parse_headers(d, len, s));
    if (s->interval == 0) return stk_error(STK_ERR_UNSUPPORTED, "no restart markers");
    s->mcus_x = (int)((s->width + (uint32_t)s->mcu_w - 1) / (uint32_t)s->mcu_w);
    s->mcus_y = (int)((s->height + (uint32_t)s->mcu_h - 1) / (uint32_t)s->mcu_h);
    if (s->mcus_x % s->interval)
        return stk_error(STK_ERR_UNSUPPORTED, "restart interval %d does not divide %d MCUs a row",
                         s->interval, s->mcus_x);
    s->per_row = s->mcus_x / s->interval;
    size_t n = (size_t)s->per_row * (size_t)s->mcus_y;
    if (n > (len - s->data_at) / 2 + 1) /* each marker takes 2 bytes: no bomb allocation */
        return stk_error(STK_ERR_CORRUPT, "%zu segments cannot fit in %zu bytes", n, len);
    if (n > s->cap) {
        uint32_t *e = realloc(s->end, n * sizeof *e);
        if (!e) return stk_error(STK_ERR_NOMEM, "out of memory");
        s->end = e;
        s->cap = n;
    }
    return find_markers(d, len, s, n);
}

uint32_t stk_jpeg_segments_width(const stk_jpeg_segments *s, int mx0, int mx1)
{
    uint32_t x0 = (uint32_t)mx0 * (uint32_t)s->mcu_w, x1 = (uint32_t)mx1 * (uint32_t)s->mcu_w;
    return (x1 < s->width ? x1 : s->width) - x0;
}

uint32_t stk_jpeg_segments_height(const stk_jpeg_segments *s, int my0, int my1)
{
    uint32_t y0 = (uint32_t)my0 * (uint32_t)s->mcu_h, y1 = (uint32_t)my1 * (uint32_t)s->mcu_h;
    return (y1 < s->height ? y1 : s->height) - y0;
}

bool stk_jpeg_segments_cover(const stk_jpeg_segments *s, int bx0, int by0, int bx1, int by1,
                             int margin, int *mx0, int *mx1, int *my0, int *my1)
{
    int x0 = bx0 / s->mcu_w - margin, x1 = (bx1 + s->mcu_w - 1) / s->mcu_w + margin;
    int y0 = by0 / s->mcu_h - margin, y1 = (by1 + s->mcu_h - 1) / s->mcu_h + margin;
    x0 = x0 < 0 ? 0 : x0 / s->interval * s->interval;
    x1 = x1 >= s->mcus_x ? s->mcus_x : (x1 + s->interval - 1) / s->interval * s->interval;
    y0 = y0 < 0 ? 0 : y0;
    y1 = y1 > s->mcus_y ? s->mcus_y : y1;
    *mx0 = x0, *mx1 = x1, *my0 = y0, *my1 = y1;
    return !(x0 == 0 && x1 == s->mcus_x && y0 == 0);
}

static size_t seg_start(const stk_jpeg_segments *s, size_t k)
{
    return k ? (size_t)s->end[k - 1] + 2 : s->data_at;
}

size_t stk_jpeg_segments_bound(const stk_jpeg_segments *s, int mx0, int mx1, int my0, int my1)
{
    size_t c0 = (size_t)(mx0 / s->interval), c1 = (size_t)((mx1 + s->interval - 1) / s->interval);
    size_t total = s->data_at + 2;
    for (int y = my0; y < my1; y++) {
        size_t k0 = (size_t)y * (size_t)s->per_row + c0, k1 = (size_t)y * (size_t)s->per_row + c1;
        /* the row's segments and the markers between them, as in the file */
        total += s->end[k1 - 1] - seg_start(s, k0) + 2;
    }
    return total;
}

size_t stk_jpeg_segments_assemble(const stk_jpeg_segments *s, const uint8_t *d, int mx0, int mx1,
                                  int my0, int my1, uint8_t *out, size_t cap)
{
    (void)cap; /* the caller sized out with stk_jpeg_segments_bound */
    size_t o = 0;
    memcpy(out, d, s->sof_at); /* SOI, tables, APPn before the frame */
    o = s->sof_at;
    memcpy(out + o, d + s->sof_at, s->sof_len);
    uint32_t w = stk_jpeg_segments_width(s, mx0, mx1), h = stk_jpeg_segments_height(s, my0, my1);
    out[o + 5] = (uint8_t)(h >> 8), out[o + 6] = (uint8_t)h;
    out[o + 7] = (uint8_t)(w >> 8), out[o + 8] = (uint8_t)w;
    o += s->sof_len;
    size_t rest = s->data_at - (s->sof_at + s->sof_len); /* tables, DRI, scan header */
    memcpy(out + o, d + s->sof_at + s->sof_len, rest);
    o += rest;
    size_t c0 = (size_t)(mx0 / s->interval), c1 = (size_t)((mx1 + s->interval - 1) / s->interval);
    unsigned rst = 0;
    for (int y = my0; y < my1; y++)
        for (size_t c = c0; c < c1; c++) {
            if (y > my0 || c > c0) {
                out[o++] = 0xFF;
                out[o++] = (uint8_t)(0xD0 + rst++ % 8);
            }
            size_t k = (size_t)y * (size_t)s->per_row + c, a = seg_start(s, k);
            memcpy(out + o, d + a, s->end[k] - a);
            o += s->end[k] - a;
        }
    out[o++] = 0xFF;
    out[o++] = 0xD9;
    return o;
}

int stk_jpeg_restart_interval(int mcus_x, int target)
{
    for (int d = target < mcus_x ? target : mcus_x; d > 1; d--)
        if (mcus_x % d == 0) return d;
    return 1;
}
