/* Many restart segments decoded at once (jpeg_entropy.h,
 * stk_jpeg_entropy_decode_all).
 *
 * One segment's Huffman decode is a chain: a symbol's length is known only
 * after its table lookup, and the next lookup starts there. The segments
 * of a crop are independent chains, so here each 64-bit lane of an
 * AVX-512 register decodes its own segment: per step, every lane loads the
 * 8 bytes under its bit position (a gather), looks its next bits up in its
 * current table (a second gather: DC or AC, of its block's component) and
 * moves on by the entry's length and zigzag step. Two groups of 8 lanes
 * run in turn so that one group's gathers overlap the other's. A lane at
 * the end of its segment takes the next one.
 *
 * What would be scatters (each lane's coefficient to its own block) are
 * two plain vector stores to a log that a scalar pass replays in order:
 * a scatter cost about 6 cycles a symbol. Before the decode, each segment
 * is copied without its stuffed zero bytes (0xFF 0x00, or 0xFF 0xFF ..
 * 0x00 as libjpeg-turbo reads it, -> 0xFF), up to the 0xFF fill before its
 * marker, with 16 zero bytes after it: a
 * lane then reads any 8 bytes at its position without checking.
 *
 * The rules are the scalar decoder's: the same tables (a window of
 * STK_JPEG_FAST_BITS bits; longer codes and values decoded the slow way
 * per lane, stk_jpeg_slow_entry), the same coefficients to the bit (a run
 * past the 63rd position lands on the 63rd, the DC sum kept to 16 bits),
 * and the same refusals: a code no table has, bits used past the data, or
 * a whole byte of data left over after the segment's MCUs
 * (tests/test_augment.c compares both decoders on every fixture and on
 * damaged segments).
 *
 * Measured (bench/README.md, issue 36): 1.6-1.8x the scalar decoder on an
 * Intel Xeon with AVX-512 (Sapphire Rapids class).
 */
#include "decode/jpeg_entropy.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define STK_ENTROPY_AVX512 1
#endif

void stk_jpeg_entropy_scratch_free(stk_jpeg_entropy_scratch *s)
{
    free(s->clean);
    free(s->at);
    free(s->log);
    memset(s, 0, sizeof *s);
}

/* Copy each segment without its stuffed bytes into s->clean: segment i at
 * s->at[2i], its length at s->at[2i + 1], then 16 zero bytes. */
static stk_status unstuff(const stk_jpeg_segment_bytes *segs, size_t n, stk_jpeg_entropy_scratch *s)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++) need += segs[i].len + 16;
    if (need > s->clean_cap) {
        uint8_t *p = realloc(s->clean, need);
        if (!p) return stk_error(STK_ERR_NOMEM, "out of memory for %zu bytes", need);
        s->clean = p;
        s->clean_cap = need;
    }
    if (2 * n > s->at_cap) {
        uint64_t *p = realloc(s->at, 2 * n * sizeof *p);
        if (!p) return stk_error(STK_ERR_NOMEM, "out of memory for %zu segments", n);
        s->at = p;
        s->at_cap = 2 * n;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *d = segs[i].data;
        size_t len = segs[i].len, j = 0;
        s->at[2 * i] = o;
        while (j < len) {
            const uint8_t *f = memchr(d + j, 0xFF, len - j);
            size_t run = f ? (size_t)(f - d) - j : len - j;
            memcpy(s->clean + o, d + j, run);
            o += run;
            j += run;
            if (!f) break;
            const uint8_t *next = stk_jpeg_after_stuffed_ff(d + j + 1, d + len);
            if (next) {
                s->clean[o++] = 0xFF;
                j = (size_t)(next - d);
            } else {
                break; /* a marker's fill bytes: the data ends (as in the scalar reader) */
            }
        }
        s->at[2 * i + 1] = o - s->at[2 * i];
        memset(s->clean + o, 0, 16);
        o += 16;
    }
    return STK_OK;
}

#ifdef STK_ENTROPY_AVX512

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
enum { GROUPS = 2, LOG = 256 };

typedef struct entropy_log {
    int64_t block[LOG][GROUPS][8];  /* the lane's block (int16_t *) */
    uint32_t entry[LOG][GROUPS][8]; /* value << 16 | zigzag position */
    int16_t sink[64]; /* where dead lanes' entries land (never read; per decoder: threads) */
} entropy_log;

static void replay(const entropy_log *log, int steps)
{
    for (int i = 0; i < steps; i++)
        for (int g = 0; g < GROUPS; g++)
            for (int l = 0; l < 8; l++) {
                uint32_t w = log->entry[i][g][l];
                ((int16_t *)log->block[i][g][l])[stk_jpeg_natural_of[w & 0x7F]] =
                    (int16_t)(w >> 16);
            }
}

/* The lanes of one group, spilled while segments are handed out. */
typedef struct lanes {
    int64_t seg[8], pos[8], base[8], blk[8], bim[8], out[8], pred[4][8];
} lanes;

/* Give lane l of `ln` segment `next` (or retire it: *live). */
static void take_segment(lanes *ln, int l, size_t next, size_t n, const uint8_t *clean,
                         const uint64_t *at, int16_t *coef, size_t seg_coefs, __mmask8 *live)
{
    ln->pos[l] = ln->blk[l] = ln->bim[l] = 0;
    for (int c = 0; c < 4; c++) ln->pred[c][l] = 0;
    if (next < n) {
        ln->seg[l] = (int64_t)next;
        ln->base[l] = (int64_t)(clean + at[2 * next]);
        ln->out[l] = (int64_t)(coef + next * seg_coefs);
        *live |= (__mmask8)(1u << l);
    } else {
        ln->seg[l] = -1;
        ln->base[l] = (int64_t)clean;
        ln->out[l] = (int64_t)coef;
        *live &= (__mmask8) ~(1u << l);
    }
}

AVX512 static bool decode_vector(const stk_jpeg_entropy *e, size_t n, int mcus, int16_t *coef,
                                 stk_jpeg_entropy_scratch *s)
{
    const int64_t nblk = (int64_t)mcus * e->blocks;
    const size_t seg_coefs = (size_t)nblk * 64;
    const int32_t *T = (const int32_t *)(const void *)e; /* table offsets count from here */
    int64_t dc_of_bim[16] = {0}, ac_of_bim[16] = {0}, comp_of_bim[16] = {0};
    for (int b = 0; b < e->blocks; b++) {
        int c = e->comp_of_block[b];
        dc_of_bim[b] = e->dc[e->dc_of[c]].fast - T;
        ac_of_bim[b] = e->ac[e->ac_of[c]].fast - T;
        comp_of_bim[b] = c;
    }
    const __m512i dc0 = _mm512_loadu_si512(dc_of_bim), dc1 = _mm512_loadu_si512(dc_of_bim + 8);
    const __m512i ac0 = _mm512_loadu_si512(ac_of_bim), ac1 = _mm512_loadu_si512(ac_of_bim + 8);
    const __m512i cp0 = _mm512_loadu_si512(comp_of_bim), cp1 = _mm512_loadu_si512(comp_of_bim + 8);
    const __m512i bswap = _mm512_set4_epi32(0x08090a0b, 0x0c0d0e0f, 0x00010203, 0x04050607);
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi64(1);
    const __m512i n63 = _mm512_set1_epi64(63), n64 = _mm512_set1_epi64(64);
    const __m512i vblocks = _mm512_set1_epi64(e->blocks), vnblk = _mm512_set1_epi64(nblk);
    entropy_log *log = s->log;
    const __m512i sinkv = _mm512_set1_epi64((int64_t)log->sink);
    bool failed = false;

    lanes ln[GROUPS];
    __mmask8 live[GROUPS] = {0};
    size_t next = 0;
    for (int g = 0; g < GROUPS; g++)
        for (int l = 0; l < 8; l++)
            take_segment(&ln[g], l, next++, n, s->clean, s->at, coef, seg_coefs, &live[g]);
    __m512i pos[GROUPS], base[GROUPS], k[GROUPS], blk[GROUPS], bim[GROUPS], out[GROUPS],
        pred[GROUPS][4];
    for (int g = 0; g < GROUPS; g++) {
        pos[g] = _mm512_loadu_si512(ln[g].pos);
        base[g] = _mm512_loadu_si512(ln[g].base);
        blk[g] = _mm512_loadu_si512(ln[g].blk);
        bim[g] = _mm512_loadu_si512(ln[g].bim);
        out[g] = _mm512_loadu_si512(ln[g].out);
        k[g] = zero;
        for (int c = 0; c < 4; c++) pred[g][c] = zero;
    }
    int steps = 0;
    while (live[0] | live[1]) {
        if (steps == LOG) {
            replay(log, steps);
            steps = 0;
        }
        for (int g = 0; g < GROUPS; g++) {
            __mmask8 lv = live[g];
            __m512i comp = _mm512_permutex2var_epi64(cp0, bim[g], cp1);
            __mmask8 isdc = _mm512_cmpeq_epi64_mask(k[g], zero);
            __m512i table =
                _mm512_mask_blend_epi64(isdc, _mm512_permutex2var_epi64(ac0, bim[g], ac1),
                                        _mm512_permutex2var_epi64(dc0, bim[g], dc1));
            /* the next bits: 8 bytes at the lane's byte, big-endian, shifted to its bit */
            __m512i word = _mm512_mask_i64gather_epi64(
                zero, lv, _mm512_add_epi64(base[g], _mm512_srli_epi64(pos[g], 3)), NULL, 1);
            word = _mm512_shuffle_epi8(word, bswap);
            __m512i bits = _mm512_sllv_epi64(word, _mm512_and_si512(pos[g], _mm512_set1_epi64(7)));
            __m512i at = _mm512_add_epi64(table, _mm512_srli_epi64(bits, 64 - STK_JPEG_FAST_BITS));
            __m512i f = _mm512_cvtepi32_epi64(
                _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), lv, at, T, 4));
            __mmask8 slow = _mm512_mask_cmpeq_epi64_mask(lv, f, zero);
            if (__builtin_expect(slow != 0, 0)) { /* a long code or value: lane by lane */
                int64_t F[8], B[8], K[8], BI[8];
                _mm512_storeu_si512(F, f);
                _mm512_storeu_si512(B, bits);
                _mm512_storeu_si512(K, k[g]);
                _mm512_storeu_si512(BI, bim[g]);
                for (int l = 0; l < 8; l++)
                    if (slow >> l & 1) {
                        int c = e->comp_of_block[BI[l]];
                        bool dc = K[l] == 0;
                        int32_t entry;
                        if (!stk_jpeg_slow_entry(dc ? &e->dc[e->dc_of[c]] : &e->ac[e->ac_of[c]],
                                                 (uint64_t)B[l], dc, &entry)) {
                            failed = true; /* a code no table has: end the block, refuse */
                            entry = 64 << 8 | 1;
                        }
                        F[l] = entry;
                    }
                f = _mm512_loadu_si512(F);
            }
            __m512i len = _mm512_and_si512(f, _mm512_set1_epi64(0xFF));
            __m512i step = _mm512_and_si512(_mm512_srli_epi64(f, 8), _mm512_set1_epi64(0xFF));
            __m512i value = _mm512_srai_epi64(f, 16);
            pos[g] = _mm512_mask_add_epi64(pos[g], lv, pos[g], len);
            for (int c = 0; c < e->ncomp; c++) { /* DC: the difference added to the prediction */
                __mmask8 m = isdc & _mm512_cmpeq_epi64_mask(comp, _mm512_set1_epi64(c));
                pred[g][c] = _mm512_mask_add_epi64(pred[g][c], m, pred[g][c], value);
                value = _mm512_mask_mov_epi64(value, m, pred[g][c]);
            }
            k[g] = _mm512_mask_add_epi64(k[g], lv, k[g], step);
            __m512i zz = _mm512_min_epi64(_mm512_sub_epi64(k[g], one), n63);
            _mm512_storeu_si512(log->block[steps][g], _mm512_mask_mov_epi64(sinkv, lv, out[g]));
            _mm256_storeu_si256((__m256i *)log->entry[steps][g],
                                _mm512_cvtepi64_epi32(_mm512_or_si512(_mm512_slli_epi64(value, 16),
                                                                      _mm512_and_si512(zz, n63))));
            /* the end of a block: the next block of the MCU, or of the next MCU */
            __mmask8 done = _mm512_mask_cmpge_epi64_mask(lv, k[g], n64);
            k[g] = _mm512_mask_mov_epi64(k[g], done, zero);
            blk[g] = _mm512_mask_add_epi64(blk[g], done, blk[g], one);
            bim[g] = _mm512_mask_add_epi64(bim[g], done, bim[g], one);
            bim[g] = _mm512_mask_mov_epi64(
                bim[g], _mm512_mask_cmpeq_epi64_mask(done, bim[g], vblocks), zero);
            out[g] = _mm512_mask_add_epi64(out[g], done, out[g], _mm512_set1_epi64(64 * 2));
            __mmask8 ended = _mm512_mask_cmpeq_epi64_mask(done, blk[g], vnblk);
            if (__builtin_expect(ended != 0,
                                 0)) { /* the end of a segment: check it, take the next */
                _mm512_storeu_si512(ln[g].pos, pos[g]);
                _mm512_storeu_si512(ln[g].base, base[g]);
                _mm512_storeu_si512(ln[g].blk, blk[g]);
                _mm512_storeu_si512(ln[g].bim, bim[g]);
                _mm512_storeu_si512(ln[g].out, out[g]);
                for (int c = 0; c < 4; c++) _mm512_storeu_si512(ln[g].pred[c], pred[g][c]);
                for (int l = 0; l < 8; l++)
                    if (ended >> l & 1) {
                        int64_t data_bits = (int64_t)s->at[2 * ln[g].seg[l] + 1] * 8;
                        int64_t used = ln[g].pos[l];
                        if (used > data_bits || data_bits - used >= 8) failed = true;
                        take_segment(&ln[g], l, next++, n, s->clean, s->at, coef, seg_coefs,
                                     &live[g]);
                    }
                pos[g] = _mm512_loadu_si512(ln[g].pos);
                base[g] = _mm512_loadu_si512(ln[g].base);
                blk[g] = _mm512_loadu_si512(ln[g].blk);
                bim[g] = _mm512_loadu_si512(ln[g].bim);
                out[g] = _mm512_loadu_si512(ln[g].out);
                for (int c = 0; c < 4; c++) pred[g][c] = _mm512_loadu_si512(ln[g].pred[c]);
            }
        }
        steps++;
    }
    replay(log, steps);
    return !failed;
}

/* (libgcc's constructor has run __builtin_cpu_init by now) */
static bool cpu_has_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
#endif

bool stk_jpeg_entropy_vector(void)
{
#ifdef STK_ENTROPY_AVX512
    return cpu_has_avx512();
#else
    return false;
#endif
}

stk_status stk_jpeg_entropy_decode_all(const stk_jpeg_entropy *e,
                                       const stk_jpeg_segment_bytes *segs, size_t n, int mcus,
                                       int16_t *coef, stk_jpeg_entropy_scratch *scratch)
{
    size_t seg_coefs = (size_t)mcus * (size_t)e->blocks * 64;
#ifdef STK_ENTROPY_AVX512
    /* a lane's segment ends at its last MCU: at least one MCU each */
    if (mcus > 0 && n >= 2 * 8 && stk_jpeg_entropy_vector()) {
        if (!scratch->log && !(scratch->log = malloc(sizeof(entropy_log))))
            return stk_error(STK_ERR_NOMEM, "out of memory");
        STK_TRY(unstuff(segs, n, scratch));
        memset(coef, 0, n * seg_coefs * sizeof *coef);
        if (!decode_vector(e, n, mcus, coef, scratch))
            return stk_error(STK_ERR_CORRUPT,
                             "a restart segment with a code no table has, or whose data ends "
                             "early or runs on");
        return STK_OK;
    }
#endif
    (void)scratch;
    (void)unstuff;
    for (size_t i = 0; i < n; i++)
        STK_TRY(stk_jpeg_entropy_decode(e, segs[i].data, segs[i].len, mcus, coef + i * seg_coefs,
                                        NULL));
    return STK_OK;
}
