/* Baseline Huffman decoding of restart segments into DCT coefficients.
 *
 * The segment path (jpeg_segments.h) hands libjpeg-turbo a small JPEG of
 * the segments a crop needs, and libjpeg-turbo decodes its entropy-coded
 * data one symbol after another in one stream. The segments are
 * independent streams (each starts with fresh DC predictions and a fresh
 * bit buffer), so a decoder of its own can work on several at once. This
 * is that decoder: the coefficients libjpeg-turbo produces, bit for bit
 * (tests/test_augment.c compares them on every fixture and interval), one
 * segment at a time (stk_jpeg_entropy_decode, the stream functions) or
 * many at once (stk_jpeg_entropy_decode_all: on AVX-512 a segment in each
 * 64-bit lane, jpeg_entropy_simd.c), with its rate beside libjpeg-turbo's
 * own entropy decode in `bench_augment` lines (f), (g) and (h)
 * (bench/README.md). jpeg_entropy_hook.h puts it inside libjpeg-turbo's
 * crop decode; the loader does so where the CPU has AVX-512 (one segment
 * at a time measured no faster than libjpeg-turbo).
 *
 *     stk_jpeg_entropy e;
 *     if (stk_jpeg_entropy_init(data, len, &e) == STK_OK)         // tables and scan layout
 *         st = stk_jpeg_entropy_decode(&e, data + begin, end - begin, mcus, coef, &symbols);
 *
 * Everything here reads untrusted bytes. A stream that libjpeg-turbo would
 * decode only with a warning (a code no table has, data that ends before
 * the segment's MCUs do, or runs on after them) is STK_ERR_CORRUPT (or
 * false from the stream functions): the caller falls back to
 * libjpeg-turbo, which then decodes it its way.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_JPEG_MAX_MCU_BLOCKS 10 /* JPEG's limit on the blocks of one MCU */

/* One Huffman table, ready to decode: a code and its extra bits of up to
 * FAST_BITS bits together in one lookup (`fast`: the coefficient's value,
 * its zero run and the bits to drop), codes of up to LOOKUP_BITS bits in
 * another, longer ones by their length (JPEG's Annex F.2.2.3). */
#define STK_JPEG_FAST_BITS   12
#define STK_JPEG_LOOKUP_BITS 9
typedef struct stk_jpeg_huff {
    /* value << 16 | zigzag step (AC: run + 1, 16 for ZRL, 64 for EOB; DC: 1) << 8 | bits;
     * 0: not in one lookup. One word: taking the fields out of it measured
     * faster than loading them one by one from a struct (bench/README.md). */
    int32_t fast[1 << STK_JPEG_FAST_BITS];
    uint16_t lookup[1 << STK_JPEG_LOOKUP_BITS]; /* length << 8 | symbol; 0: longer code */
    int32_t maxcode[18];                        /* the largest code of each length, -1: none */
    int32_t valoffset[18];                      /* symbol index - code, per length */
    uint8_t symbols[256];
} stk_jpeg_huff;

typedef struct stk_jpeg_entropy {
    int blocks;                                     /* blocks in one MCU */
    uint8_t comp_of_block[STK_JPEG_MAX_MCU_BLOCKS]; /* the scan component of each */
    int ncomp;                                      /* components in the scan */
    stk_jpeg_huff dc[4], ac[4];                     /* by table slot */
    uint8_t dc_of[4], ac_of[4];                     /* each scan component's slots */
} stk_jpeg_entropy;

/* The tables (DHT), frame (SOF0/SOF1) and scan header (SOS) of a baseline
 * JPEG with one scan holding every component. STK_ERR_UNSUPPORTED for
 * anything else, STK_ERR_CORRUPT for a damaged header or table. */
stk_status stk_jpeg_entropy_init(const uint8_t *data, size_t len, stk_jpeg_entropy *e);

/* After a 0xFF byte at p[-1] of entropy-coded data ending at end: where
 * the data goes on when the 0xFF is a data byte (a stuffed 0x00 after it,
 * with any 0xFF fill bytes between, as libjpeg-turbo reads FF FF .. FF 00),
 * or NULL when a marker follows (the data ends there). Both readers, the
 * scalar one and the vector one's copy without stuffing, use it. */
static inline const uint8_t *stk_jpeg_after_stuffed_ff(const uint8_t *p, const uint8_t *end)
{
    while (p < end && *p == 0xFF) p++;
    return p < end && *p == 0x00 ? p + 1 : NULL;
}

/* One segment's decoding state: its bit reader and the DC predictions. */
typedef struct stk_jpeg_bits {
    uint64_t buf;           /* the next bits, the next one the most significant */
    int64_t n;              /* bits in buf */
    const uint8_t *p, *end; /* the bytes not yet in buf */
    int64_t zeros;          /* bits fed past the data's end */
} stk_jpeg_bits;

typedef struct stk_jpeg_stream {
    stk_jpeg_bits bits;
    int32_t pred[4]; /* the last DC of each scan component */
} stk_jpeg_stream;

/* Begin a segment: its entropy-coded bytes [data, data + len), up to the
 * marker after them. */
void stk_jpeg_stream_start(stk_jpeg_stream *s, const uint8_t *data, size_t len);

/* The segment's next MCU into blocks[0 .. e->blocks), each 64 coefficients
 * that the caller zeroed (as libjpeg-turbo's coefficient controller does),
 * written in natural order with the DC absolute. False for a code no table
 * has or data that ends before the MCU does. */
bool stk_jpeg_stream_mcu(const stk_jpeg_entropy *e, stk_jpeg_stream *s, int16_t *const *blocks);

/* After the segment's last MCU: false when a whole byte of data is left
 * over (libjpeg-turbo would warn of extraneous data). */
bool stk_jpeg_stream_done(const stk_jpeg_stream *s);

/* Decode one segment: `mcus` MCUs from the entropy-coded bytes [data,
 * data + len) (up to the marker after them) into coef: mcus x blocks x 64
 * coefficients in natural (row-major) order, the DC coefficient absolute,
 * as libjpeg-turbo stores them. STK_ERR_CORRUPT also for data left over
 * after them. With symbols (else NULL; a slower decode that counts them),
 * *symbols receives the number of Huffman symbols decoded. */
stk_status stk_jpeg_entropy_decode(const stk_jpeg_entropy *e, const uint8_t *data, size_t len,
                                   int mcus, int16_t *coef, int64_t *symbols);

/* One segment's entropy-coded bytes, up to the marker after it. */
typedef struct stk_jpeg_segment_bytes {
    const uint8_t *data;
    size_t len;
} stk_jpeg_segment_bytes;

/* Memory stk_jpeg_entropy_decode_all reuses from call to call ({0} to
 * start; stk_jpeg_entropy_scratch_free at the end). */
typedef struct stk_jpeg_entropy_scratch {
    uint8_t *clean; /* the segments without their stuffed zero bytes */
    size_t clean_cap;
    uint64_t *at; /* where each segment starts there, and its length */
    size_t at_cap;
    void *log; /* the vector decoder's coefficient log */
} stk_jpeg_entropy_scratch;

void stk_jpeg_entropy_scratch_free(stk_jpeg_entropy_scratch *s);

/* Decode n segments of `mcus` MCUs each into coef: n x mcus x blocks x 64
 * coefficients, natural order, DC absolute (zeroed here first). Where the
 * CPU has AVX-512 (F, BW, DQ, VL), 16 segments at once, one in each 64-bit
 * lane of two groups of eight (jpeg_entropy_simd.c); elsewhere one after
 * another with stk_jpeg_entropy_decode. The same coefficients either way;
 * STK_ERR_CORRUPT when any segment is what stk_jpeg_entropy_decode
 * refuses, STK_ERR_NOMEM. */
stk_status stk_jpeg_entropy_decode_all(const stk_jpeg_entropy *e,
                                       const stk_jpeg_segment_bytes *segs, size_t n, int mcus,
                                       int16_t *coef, stk_jpeg_entropy_scratch *scratch);

/* Whether stk_jpeg_entropy_decode_all runs the vector decoder here. */
bool stk_jpeg_entropy_vector(void);

/* For jpeg_entropy_simd.c: the natural position of each zigzag position
 * (64 more entries send a run past the end to the 63rd), and one symbol
 * decoded the slow way from the top of `bits` into *entry as a `fast`
 * entry (false: a code no table has). */
extern const uint8_t stk_jpeg_natural_of[128];
bool stk_jpeg_slow_entry(const stk_jpeg_huff *t, uint64_t bits, bool dc, int32_t *entry);

#ifdef __cplusplus
}
#endif
