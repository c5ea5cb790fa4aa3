/* Optimal Huffman tables for a lossless transcode (jpeg_huffman.h). */
#include "decode/jpeg_huffman.h"

#include <pthread.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Position in the zigzag scan of each coefficient in natural (row-major)
 * order, and back: JPEG's Figure A.6. */
static const uint8_t zigzag_of[64] = {
    0,  1,  5,  6,  14, 15, 27, 28, 2,  4,  7,  13, 16, 26, 29, 42, 3,  8,  12, 17, 25, 30,
    41, 43, 9,  11, 18, 24, 31, 40, 44, 53, 10, 19, 23, 32, 39, 45, 52, 54, 20, 22, 33, 38,
    46, 51, 55, 60, 21, 34, 37, 47, 50, 56, 59, 61, 35, 36, 48, 49, 57, 58, 62, 63};
static const uint8_t natural_of[64] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

/* zigzag_bytes[i][m]: the zigzag positions (as bits) of the natural
 * positions 8i..8i+7 whose bits are set in m; eight lookups move a block's
 * mask of nonzeros into zigzag order (a loop per nonzero took as long as
 * the rest of the counting). 16 KB, made once. */
static uint64_t zigzag_bytes[8][256];
static pthread_once_t zigzag_once = PTHREAD_ONCE_INIT;

static void make_zigzag_bytes(void)
{
    for (int i = 0; i < 8; i++)
        for (int m = 0; m < 256; m++) {
            uint64_t z = 0;
            for (int j = 0; j < 8; j++)
                if (m >> j & 1) z |= (uint64_t)1 << zigzag_of[8 * i + j];
            zigzag_bytes[i][m] = z;
        }
}

#define MAX_AC_BITS 10 /* 8-bit samples: |AC| < 1024, |DC difference| < 2048 */

/* Bits of a value's magnitude: the size category that codes it. */
static int category(int v)
{
    unsigned a = (unsigned)(v < 0 ? -v : v);
    return a ? 32 - __builtin_clz(a) : 0;
}

/* Bit k set when the coefficient at natural position k is nonzero. */
static uint64_t nonzero_mask(const JCOEF *b)
{
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    uint64_t m = 0;
    for (int i = 0; i < 4; i++) {
        __m128i lo = _mm_loadu_si128((const __m128i *)(b + 16 * i));
        __m128i hi = _mm_loadu_si128((const __m128i *)(b + 16 * i + 8));
        __m128i is_zero = _mm_packs_epi16(_mm_cmpeq_epi16(lo, zero), _mm_cmpeq_epi16(hi, zero));
        m |= (uint64_t)(uint16_t)~_mm_movemask_epi8(is_zero) << (16 * i);
    }
    return m;
#else
    uint64_t m = 0;
    for (int k = 0; k < 64; k++) m |= (uint64_t)(b[k] != 0) << k;
    return m;
#endif
}

/* The AC symbols of one block, as the encoder emits them: a (run, size)
 * per nonzero coefficient in zigzag order, ZRL (0xF0) for every 16 zeros
 * before one, EOB (0x00) when zeros end the block. Only the nonzero
 * coefficients are visited. */
static bool count_ac(const JCOEF *b, int64_t *ac)
{
    uint64_t nat = nonzero_mask(b) & ~(uint64_t)1, zz = 0;
    for (int i = 0; i < 8; i++) zz |= zigzag_bytes[i][(nat >> (8 * i)) & 0xFF];
    int last = 0; /* zigzag position of the previous nonzero (0: the DC) */
    while (zz) {
        int k = __builtin_ctzll(zz), run = k - last - 1, size = category(b[natural_of[k]]);
        zz &= zz - 1;
        if (size > MAX_AC_BITS) return false;
        for (; run > 15; run -= 16) ac[0xF0]++;
        ac[(run << 4) + size]++;
        last = k;
    }
    if (last < 63) ac[0x00]++;
    return true;
}

/* Count the blocks of one component in MCU (mx, my); `rows` are its block
 * rows of that MCU row. Blocks past the component's edge are the padding
 * ("dummy") blocks jctrans.c writes: DC equal to the block before (a
 * difference of 0), no AC (EOB). */
static bool count_blocks(const jpeg_component_info *comp, bool one, JBLOCKARRAY rows, JDIMENSION mx,
                         JDIMENSION my, int *pred, int64_t *dc, int64_t *ac)
{
    int h = one ? 1 : comp->h_samp_factor, v = one ? 1 : comp->v_samp_factor;
    for (int yy = 0; yy < v; yy++)
        for (int xx = 0; xx < h; xx++) {
            JDIMENSION bx = mx * (JDIMENSION)h + (JDIMENSION)xx;
            JDIMENSION by = my * (JDIMENSION)v + (JDIMENSION)yy;
            if (bx >= comp->width_in_blocks || by >= comp->height_in_blocks) {
                dc[0]++;
                ac[0x00]++;
                continue;
            }
            const JCOEF *b = rows[yy][bx];
            int size = category(b[0] - *pred);
            if (size > MAX_AC_BITS + 1 || !count_ac(b, ac)) return false;
            dc[size]++;
            *pred = b[0];
        }
    return true;
}

bool stk_jpeg_count_symbols(j_decompress_ptr d, jvirt_barray_ptr *coefs, j_compress_ptr c,
                            stk_huff_counts *n)
{
    pthread_once(&zigzag_once, make_zigzag_bytes);
    memset(n, 0, sizeof *n);
    int nc = d->num_components;
    if (nc < 1 || nc > 4 || c->num_components != nc) return false;
    /* One component: not interleaved, an MCU is one block. Otherwise MCUs of
     * h x v blocks per component (count_blocks). */
    bool one = nc == 1;
    JDIMENSION mcus_x, mcus_y;
    if (one) {
        mcus_x = d->comp_info[0].width_in_blocks;
        mcus_y = d->comp_info[0].height_in_blocks;
    } else {
        JDIMENSION mw = (JDIMENSION)(8 * d->max_h_samp_factor);
        JDIMENSION mh = (JDIMENSION)(8 * d->max_v_samp_factor);
        mcus_x = (d->image_width + mw - 1) / mw;
        mcus_y = (d->image_height + mh - 1) / mh;
    }
    int dc_tbl[4], ac_tbl[4];
    for (int ci = 0; ci < nc; ci++) {
        dc_tbl[ci] = c->comp_info[ci].dc_tbl_no;
        ac_tbl[ci] = c->comp_info[ci].ac_tbl_no;
        if (dc_tbl[ci] < 0 || dc_tbl[ci] >= NUM_HUFF_TBLS || ac_tbl[ci] < 0 ||
            ac_tbl[ci] >= NUM_HUFF_TBLS)
            return false;
    }
    unsigned interval = c->restart_interval;
    int pred[4] = {0};
    unsigned long mcu = 0;
    for (JDIMENSION my = 0; my < mcus_y; my++) {
        JBLOCKARRAY rows[4];
        for (int ci = 0; ci < nc; ci++) {
            JDIMENSION v = one ? 1 : (JDIMENSION)d->comp_info[ci].v_samp_factor;
            rows[ci] = (*d->mem->access_virt_barray)((j_common_ptr)d, coefs[ci], my * v, v, FALSE);
        }
        for (JDIMENSION mx = 0; mx < mcus_x; mx++, mcu++) {
            if (interval && mcu % interval == 0) memset(pred, 0, sizeof pred);
            for (int ci = 0; ci < nc; ci++)
                if (!count_blocks(&d->comp_info[ci], one, rows[ci], mx, my, &pred[ci],
                                  n->dc[dc_tbl[ci]], n->ac[ac_tbl[ci]]))
                    return false;
        }
    }
    return true;
}

/* Tree a merges before tree b: the smaller count, on a tie the larger
 * symbol (the order in which the spec's flow chart finds them). */
static bool before(const int64_t *freq, int a, int b)
{
    return freq[a] < freq[b] || (freq[a] == freq[b] && a > b);
}

bool stk_huff_optimal_table(const int64_t counts[256], uint8_t bits[17], uint8_t huffval[256])
{
    /* Symbols with a count, plus a pseudo-symbol 256 counted once: its code
     * point is taken away at the end, so that no real code is all ones. */
    int64_t freq[257];
    int size[257], next[257], live[257], n = 0;
    for (int i = 0; i < 257; i++) {
        freq[i] = i < 256 ? counts[i] : 1;
        size[i] = 0;
        next[i] = -1;
        if (freq[i]) live[n++] = i;
    }
    /* Merge the two least frequent trees until one is left (ties go to the
     * larger symbol, as the spec's flow chart scans); every symbol of both
     * gets one bit longer. `next` chains the symbols of a tree. */
    while (n > 1) {
        int a = -1, b = -1; /* positions in live of the least and next least */
        for (int j = 0; j < n; j++)
            if (a < 0 || before(freq, live[j], live[a])) a = j;
        for (int j = 0; j < n; j++)
            if (j != a && (b < 0 || before(freq, live[j], live[b]))) b = j;
        int s1 = live[a], s2 = live[b];
        freq[s1] += freq[s2];
        int t = s1;
        for (size[t]++; next[t] >= 0; size[t]++) t = next[t];
        next[t] = s2;
        for (t = s2; t >= 0; t = next[t]) size[t]++;
        live[b] = live[--n];
    }
    for (int i = 0; i < 257; i++)
        if (size[i] > 32) return false; /* as libjpeg: no deeper code */
    /* Count the codes of each length; fold lengths over 16 (Annex K.3:
     * move a pair from the longest length up, one code from a shorter
     * length down), then give the pseudo-symbol's point back. */
    int count[33] = {0};
    for (int i = 0; i < 257; i++) count[size[i]]++;
    count[0] = 0;
    for (int l = 32; l > 16; l--)
        while (count[l] > 0) {
            int j = l - 2;
            while (count[j] == 0) j--;
            count[l] -= 2;
            count[l - 1]++;
            count[j + 1] += 2;
            count[j]--;
        }
    int longest = 16;
    while (longest > 0 && count[longest] == 0) longest--;
    if (longest) count[longest]--;
    bits[0] = 0;
    for (int l = 1; l <= 16; l++) bits[l] = (uint8_t)count[l];
    /* Symbols sorted by the length of their code, then by value. */
    int p = 0;
    for (int l = 1; l <= 32; l++)
        for (int s = 0; s < 256; s++)
            if (size[s] == l) huffval[p++] = (uint8_t)s;
    for (; p < 256; p++) huffval[p] = 0;
    return true;
}

bool stk_jpeg_optimal_tables(j_decompress_ptr d, jvirt_barray_ptr *coefs, j_compress_ptr c)
{
    static __thread stk_huff_counts n; /* 16 KB: off the stack */
    if (!stk_jpeg_count_symbols(d, coefs, c, &n)) return false;
    bool done_dc[NUM_HUFF_TBLS] = {false}, done_ac[NUM_HUFF_TBLS] = {false};
    for (int ci = 0; ci < c->num_components; ci++) {
        int t[2] = {c->comp_info[ci].dc_tbl_no, c->comp_info[ci].ac_tbl_no};
        bool *done[2] = {&done_dc[t[0]], &done_ac[t[1]]};
        JHUFF_TBL **slot[2] = {&c->dc_huff_tbl_ptrs[t[0]], &c->ac_huff_tbl_ptrs[t[1]]};
        const int64_t *counts[2] = {n.dc[t[0]], n.ac[t[1]]};
        for (int k = 0; k < 2; k++) {
            if (*done[k]) continue;
            if (!*slot[k]) *slot[k] = jpeg_alloc_huff_table((j_common_ptr)c);
            uint8_t bits[17], vals[256];
            if (!stk_huff_optimal_table(counts[k], bits, vals)) return false;
            memcpy((*slot[k])->bits, bits, sizeof bits);
            memcpy((*slot[k])->huffval, vals, sizeof vals);
            (*slot[k])->sent_table = FALSE;
            *done[k] = true;
        }
    }
    return true;
}
