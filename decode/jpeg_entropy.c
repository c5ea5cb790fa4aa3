/* Baseline Huffman decoding of restart segments (jpeg_entropy.h). The
 * decoding rules are JPEG's (ITU T.81 Annex F.2.2) as libjpeg-turbo's
 * jdhuff.c applies them: the same tables, the same coefficients, including
 * its 16 extra zigzag entries that send a run past the 63rd coefficient to
 * the 63rd. */
#include "decode/jpeg_entropy.h"

#include <stddef.h>
#include <string.h>

static unsigned be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

/* Natural (row-major) position of each zigzag position. The entries past
 * 63 send a position past the end to the 63rd: a corrupt stream's run
 * past the end lands there as in libjpeg-turbo (jdhuff.c's table has 16
 * such entries), and the zero that decode_ac writes for an end of block
 * (at k + 63) or 16 zeros (at k + 15) lands on a coefficient not written
 * yet. */
const uint8_t stk_jpeg_natural_of[128] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

/* The value of `size` extra bits v: JPEG's EXTEND (F.2.2.1). */
static inline int extend(uint32_t v, int size)
{
    return v < (1u << (size - 1)) ? (int)v - ((1 << size) - 1) : (int)v;
}

/* How far an AC symbol moves the zigzag position: past its zero run and
 * its coefficient, past 16 zeros (ZRL), or out of the block (EOB). */
static int ac_step(int sym)
{
    int run = sym >> 4, size = sym & 15;
    return size ? run + 1 : run == 15 ? 16 : 64;
}

/* The `fast` entries of symbol sym, whose code is `code` of l <= FAST_BITS
 * bits: every FAST_BITS-bit window that starts with it, its value when
 * the extra bits fit too, else 0 (decode the slow way). The value depends
 * only on the extra bits, so each value fills a run of windows (4,096
 * entries a table, and every image has its own tables: this runs for
 * each). DC entries step 1 (the vector decoder moves every lane's position
 * by the step; the scalar one ignores it there). */
static void fill_fast(stk_jpeg_huff *t, int32_t code, int l, int sym, bool dc)
{
    int size = dc ? sym : sym & 15, step = dc ? 1 : ac_step(sym), rest = STK_JPEG_FAST_BITS - l;
    int32_t *at = t->fast + (code << rest);
    if (size > rest) {
        memset(at, 0, sizeof *at << rest);
        return;
    }
    int run = 1 << (rest - size);
    for (int v = 0; v < 1 << size; v++) {
        int value = size ? extend((uint32_t)v, size) : 0;
        int32_t entry = (int32_t)((uint32_t)value << 16) | step << 8 | (l + size);
        for (int j = 0; j < run; j++) at[v * run + j] = entry;
    }
}

/* A DHT table: 16 counts of codes by length, then the symbols. */
static stk_status build_table(const uint8_t *counts, const uint8_t *syms, int total, bool dc,
                              stk_jpeg_huff *t)
{
    /* everything but `fast`, which fill_fast and the tail below write once */
    memset(t->lookup, 0, sizeof *t - offsetof(stk_jpeg_huff, lookup));
    int32_t code = 0, fast_end = 0; /* windows filled: canonical codes come in order */
    int p = 0;
    for (int l = 1; l <= 16; l++) {
        int n = counts[l - 1];
        t->maxcode[l] = -1;
        if (n) {
            t->valoffset[l] = p - code;
            for (int i = 0; i < n; i++, p++, code++) {
                if (code >= 1 << l)
                    return stk_error(STK_ERR_CORRUPT, "Huffman table with bad counts");
                if (dc && syms[p] > 15)
                    return stk_error(STK_ERR_CORRUPT, "DC Huffman symbol %d", syms[p]);
                if (l <= STK_JPEG_FAST_BITS) {
                    fill_fast(t, code, l, syms[p], dc);
                    fast_end = (code + 1) << (STK_JPEG_FAST_BITS - l);
                }
                if (l <= STK_JPEG_LOOKUP_BITS) {
                    int shift = STK_JPEG_LOOKUP_BITS - l;
                    for (int j = 0; j < 1 << shift; j++)
                        t->lookup[(code << shift) | j] = (uint16_t)(l << 8 | syms[p]);
                }
            }
            t->maxcode[l] = code - 1;
        }
        code <<= 1;
    }
    /* windows of longer codes, or of none */
    memset(t->fast + fast_end, 0, sizeof *t->fast * (size_t)((1 << STK_JPEG_FAST_BITS) - fast_end));
    t->maxcode[17] = 0x7FFFFFFF; /* a sentinel: every code ends by 17 bits */
    memcpy(t->symbols, syms, (size_t)total);
    return STK_OK;
}

/* The payload of a DHT marker: one or more tables. */
static stk_status parse_dht(const uint8_t *p, size_t n, stk_jpeg_entropy *e, uint8_t *defined)
{
    while (n) {
        if (n < 17) return stk_error(STK_ERR_CORRUPT, "Huffman table marker cut short");
        int tc = p[0] >> 4, th = p[0] & 15, total = 0;
        for (int i = 0; i < 16; i++) total += p[1 + i];
        if (tc > 1 || th > 3 || total > 256 || n < 17 + (size_t)total)
            return stk_error(STK_ERR_CORRUPT, "Huffman table %d/%d with %d symbols", tc, th, total);
        STK_TRY(build_table(p + 1, p + 17, total, tc == 0, tc ? &e->ac[th] : &e->dc[th]));
        defined[tc] |= (uint8_t)(1 << th);
        p += 17 + total;
        n -= 17 + (size_t)total;
    }
    return STK_OK;
}

typedef struct frame {
    int ncomp;
    uint8_t id[4], h[4], v[4];
} frame;

static stk_status parse_sof(const uint8_t *p, size_t n, frame *f)
{
    if (n < 6 || n != 6 + 3 * (size_t)p[5] || p[5] < 1 || p[5] > 4)
        return stk_error(STK_ERR_CORRUPT, "frame header of %zu bytes", n);
    if (p[0] != 8) return stk_error(STK_ERR_UNSUPPORTED, "%d-bit samples", p[0]);
    f->ncomp = p[5];
    for (int i = 0; i < f->ncomp; i++) {
        f->id[i] = p[6 + 3 * i];
        f->h[i] = p[7 + 3 * i] >> 4;
        f->v[i] = p[7 + 3 * i] & 15;
        if (f->h[i] < 1 || f->h[i] > 4 || f->v[i] < 1 || f->v[i] > 4)
            return stk_error(STK_ERR_CORRUPT, "sampling factors %dx%d", f->h[i], f->v[i]);
    }
    return STK_OK;
}

/* The scan header: its components, their tables, the blocks of an MCU. */
static stk_status parse_sos(const uint8_t *p, size_t n, const frame *f, const uint8_t *defined,
                            stk_jpeg_entropy *e)
{
    int ns = n ? p[0] : 0;
    if (!f->ncomp) return stk_error(STK_ERR_CORRUPT, "scan before the frame header");
    if (n != 4 + 2 * (size_t)ns) return stk_error(STK_ERR_CORRUPT, "scan header of %zu bytes", n);
    if (ns != f->ncomp) return stk_error(STK_ERR_UNSUPPORTED, "a scan without every component");
    const uint8_t *t = p + 1 + 2 * ns;
    if (t[0] != 0 || t[1] != 63 || t[2] != 0)
        return stk_error(STK_ERR_UNSUPPORTED, "not a sequential scan");
    e->ncomp = ns;
    e->blocks = 0;
    for (int i = 0; i < ns; i++) {
        int fc = 0;
        while (fc < f->ncomp && f->id[fc] != p[1 + 2 * i]) fc++;
        if (fc == f->ncomp)
            return stk_error(STK_ERR_CORRUPT, "scan component %d not in the frame", p[1 + 2 * i]);
        e->dc_of[i] = p[2 + 2 * i] >> 4;
        e->ac_of[i] = p[2 + 2 * i] & 15;
        if (e->dc_of[i] > 3 || e->ac_of[i] > 3 || !(defined[0] >> e->dc_of[i] & 1) ||
            !(defined[1] >> e->ac_of[i] & 1))
            return stk_error(STK_ERR_UNSUPPORTED, "a scan table not defined in the file");
        /* one component: not interleaved, an MCU is one block */
        int nb = ns == 1 ? 1 : f->h[fc] * f->v[fc];
        if (e->blocks + nb > STK_JPEG_MAX_MCU_BLOCKS)
            return stk_error(STK_ERR_CORRUPT, "more than %d blocks in an MCU",
                             STK_JPEG_MAX_MCU_BLOCKS);
        for (int b = 0; b < nb; b++) e->comp_of_block[e->blocks++] = (uint8_t)i;
    }
    return STK_OK;
}

stk_status stk_jpeg_entropy_init(const uint8_t *d, size_t len, stk_jpeg_entropy *e)
{
    /* Not the tables (40 KB, cleared as each is built; the scan uses only
     * tables its file defines): this runs once per image of the loader. */
    e->blocks = e->ncomp = 0;
    if (len < 4 || d[0] != 0xFF || d[1] != 0xD8)
        return stk_error(STK_ERR_UNSUPPORTED, "not a JPEG");
    frame f = {0};
    uint8_t defined[2] = {0, 0}; /* bit th: DC / AC table th defined */
    size_t pos = 2;
    for (;;) {
        if (pos >= len || d[pos] != 0xFF)
            return stk_error(STK_ERR_UNSUPPORTED, "bytes between markers at %zu", pos);
        while (pos < len && d[pos] == 0xFF) pos++;
        if (pos + 3 > len) return stk_error(STK_ERR_CORRUPT, "ends before its scan");
        int m = d[pos++];
        size_t l = be16(d + pos);
        if (l < 2 || pos + l > len)
            return stk_error(STK_ERR_CORRUPT, "marker %02X runs past the end", m);
        const uint8_t *p = d + pos + 2;
        size_t n = l - 2;
        if (m == 0xC0 || m == 0xC1) {
            if (f.ncomp) return stk_error(STK_ERR_UNSUPPORTED, "two frame headers");
            STK_TRY(parse_sof(p, n, &f));
        } else if (m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8) {
            return stk_error(STK_ERR_UNSUPPORTED, "not baseline Huffman (marker %02X)", m);
        } else if (m == 0xC4) {
            STK_TRY(parse_dht(p, n, e, defined));
        } else if (m == 0xDA) {
            return parse_sos(p, n, &f, defined, e);
        } else if (m == 0xD8 || m == 0xD9 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            return stk_error(STK_ERR_UNSUPPORTED, "marker %02X before the scan", m);
        }
        pos += l;
    }
}

/* ---- decoding ---------------------------------------------------------- */

/* The bit reader (stk_jpeg_bits): up to 64 bits in buf, the next one the
 * most significant. A 0xFF byte is followed by a stuffed 0x00 in the data;
 * any other byte after it is a marker (or the fill bytes before one),
 * where the data ends; past the end the reader feeds zeros (as
 * libjpeg-turbo does) and counts them, so that a segment that used them
 * can be refused. */
static inline void refill(stk_jpeg_bits *r)
{
    if (r->end - r->p >= 8) { /* whole bytes at once when none of them is 0xFF */
        uint64_t w;
        memcpy(&w, r->p, 8);
        w = __builtin_bswap64(w);
        int k = (64 - r->n) >> 3;
        uint64_t t = ~w, top = ~(uint64_t)0 << (64 - 8 * k);
        if (!((t - 0x0101010101010101u) & ~t & 0x8080808080808080u & top)) {
            r->buf |= (w & top) >> r->n;
            r->n += 8 * k;
            r->p += k;
            return;
        }
    }
    while (r->n <= 56) {
        uint64_t byte = 0;
        if (r->p < r->end) {
            byte = *r->p++;
            if (byte == 0xFF) {
                const uint8_t *next = stk_jpeg_after_stuffed_ff(r->p, r->end);
                if (next) {
                    r->p = next;
                } else { /* a marker (or fill bytes before one): the data ends */
                    r->p = r->end;
                    byte = 0;
                    r->zeros += 8;
                }
            }
        } else {
            r->zeros += 8;
        }
        r->buf |= byte << (56 - r->n);
        r->n += 8;
    }
}

static inline uint32_t take(stk_jpeg_bits *r, int k)
{
    uint32_t v = (uint32_t)(r->buf >> (64 - k));
    r->buf <<= k;
    r->n -= k;
    return v;
}

/* The next symbol of table t (the reader holds at least 16 bits); -1 for a
 * code no table has. */
static inline int decode_symbol(stk_jpeg_bits *r, const stk_jpeg_huff *t)
{
    uint16_t hit = t->lookup[r->buf >> (64 - STK_JPEG_LOOKUP_BITS)];
    if (hit) {
        r->buf <<= hit >> 8;
        r->n -= hit >> 8;
        return hit & 0xFF;
    }
    int l = STK_JPEG_LOOKUP_BITS + 1;
    int32_t code = (int32_t)(r->buf >> (64 - l));
    while (code > t->maxcode[l]) {
        if (++l > 16) return -1;
        code = (int32_t)(r->buf >> (64 - l));
    }
    r->buf <<= l;
    r->n -= l;
    return t->symbols[(code + t->valoffset[l]) & 0xFF];
}

bool stk_jpeg_slow_entry(const stk_jpeg_huff *t, uint64_t bits, bool dc, int32_t *entry)
{
    stk_jpeg_bits r = {bits, 64, NULL, NULL, 0};
    int sym = decode_symbol(&r, t);
    if (sym < 0) return false;
    int size = dc ? sym : sym & 15, value = size ? extend(take(&r, size), size) : 0;
    int used = 64 - (int)r.n;
    *entry =
        (int32_t)((uint32_t)value << 16 | (uint32_t)(dc ? 1 : ac_step(sym)) << 8 | (uint32_t)used);
    return true;
}

/* The fast entry under the reader's next bits (0: decode the slow way). */
static inline int32_t fast_entry(const stk_jpeg_bits *r, const stk_jpeg_huff *t)
{
    return t->fast[r->buf >> (64 - STK_JPEG_FAST_BITS)];
}

static inline void drop(stk_jpeg_bits *r, int k)
{
    r->buf <<= k;
    r->n -= k;
}

/* The DC coefficient of a block: its difference added to the prediction. */
static inline bool decode_dc(stk_jpeg_bits *r, const stk_jpeg_huff *dc, int32_t *pred,
                             int16_t *block)
{
    if (r->n < 32) refill(r);
    int32_t f = fast_entry(r, dc);
    int diff = 0;
    if (f) {
        drop(r, f & 0xFF);
        diff = f >> 16;
    } else {
        int s = decode_symbol(r, dc);
        if (s < 0) return false;
        if (s) diff = extend(take(r, s), s);
    }
    /* A damaged stream's differences can carry the sum past 32 bits:
     * wrapped, not undefined; libjpeg-turbo stores the sum as a JCOEF, its
     * low 16 bits, the same either way. */
    *pred = (int32_t)((uint32_t)*pred + (uint32_t)diff);
    block[0] = (int16_t)*pred;
    return true;
}

/* One AC symbol of a block at zigzag position *k: a coefficient after its
 * run of zeros, 16 zeros (ZRL) or the end of the block (*k past 63). No
 * branch on which: each writes its value at k + step - 1 (a zero for ZRL
 * and EOB, where stk_jpeg_natural_of says no coefficient is yet). */
static inline bool decode_ac(stk_jpeg_bits *r, const stk_jpeg_huff *ac, int *k,
                             int16_t *restrict block)
{
    if (r->n < 32) refill(r);
    int32_t f = fast_entry(r, ac);
    int step, value;
    if (__builtin_expect(f != 0, 1)) {
        drop(r, f & 0xFF);
        step = f >> 8 & 0x7F;
        value = f >> 16;
    } else {
        int rs = decode_symbol(r, ac);
        if (rs < 0) return false;
        int size = rs & 15;
        value = size ? extend(take(r, size), size) : 0;
        step = ac_step(rs);
    }
    block[stk_jpeg_natural_of[*k + step - 1]] = (int16_t)value;
    *k += step;
    return true;
}

/* One block; with count, its symbols added to *symbols. */
static inline __attribute__((always_inline)) bool
decode_block(stk_jpeg_bits *r, const stk_jpeg_huff *dc, const stk_jpeg_huff *ac, int32_t *pred,
             int16_t *restrict block, bool count, int64_t *symbols)
{
    if (!decode_dc(r, dc, pred, block)) return false;
    int k = 1;
    int64_t n = 1;
    for (; k < 64; n++)
        if (!decode_ac(r, ac, &k, block)) return false;
    if (count) *symbols += n;
    return true;
}

/* One MCU (the reader in locals for the whole MCU, written back once:
 * through the pointer, GCC reloaded it around every store of a
 * coefficient). */
static inline __attribute__((always_inline)) bool decode_mcu(const stk_jpeg_entropy *e,
                                                             stk_jpeg_stream *s,
                                                             int16_t *const *blocks, bool count,
                                                             int64_t *symbols)
{
    stk_jpeg_bits r = s->bits;
    for (int b = 0; b < e->blocks; b++) {
        int c = e->comp_of_block[b];
        if (!decode_block(&r, &e->dc[e->dc_of[c]], &e->ac[e->ac_of[c]], &s->pred[c], blocks[b],
                          count, symbols))
            return false;
    }
    s->bits = r;
    return r.zeros <= r.n; /* bits past the data used: libjpeg-turbo warns */
}

void stk_jpeg_stream_start(stk_jpeg_stream *s, const uint8_t *data, size_t len)
{
    memset(s, 0, sizeof *s);
    s->bits.p = data;
    s->bits.end = data + len;
}

bool stk_jpeg_stream_mcu(const stk_jpeg_entropy *e, stk_jpeg_stream *s, int16_t *const *blocks)
{
    return decode_mcu(e, s, blocks, false, NULL);
}

/* libjpeg-turbo counts the whole bytes left in its bit buffer at a marker
 * (and any it skips to reach it) as extraneous data, and warns. */
bool stk_jpeg_stream_done(const stk_jpeg_stream *s)
{
    return s->bits.p == s->bits.end && s->bits.n - s->bits.zeros < 8;
}

stk_status stk_jpeg_entropy_decode(const stk_jpeg_entropy *e, const uint8_t *data, size_t len,
                                   int mcus, int16_t *coef, int64_t *symbols)
{
    stk_jpeg_stream s;
    stk_jpeg_stream_start(&s, data, len);
    memset(coef, 0, (size_t)mcus * (size_t)e->blocks * 64 * sizeof *coef);
    int16_t *blocks[STK_JPEG_MAX_MCU_BLOCKS];
    int64_t count = 0;
    for (int m = 0; m < mcus; m++) {
        for (int b = 0; b < e->blocks; b++)
            blocks[b] = coef + ((size_t)m * (size_t)e->blocks + (size_t)b) * 64;
        if (!(symbols ? decode_mcu(e, &s, blocks, true, &count)
                      : stk_jpeg_stream_mcu(e, &s, blocks)))
            return stk_error(STK_ERR_CORRUPT,
                             "a Huffman code no table has, or the data ends, in MCU %d of %d", m,
                             mcus);
    }
    if (!stk_jpeg_stream_done(&s))
        return stk_error(STK_ERR_CORRUPT, "data left over after the segment's %d MCUs", mcus);
    if (symbols) *symbols = count;
    return STK_OK;
}
