/* Optimal Huffman tables for a lossless transcode, from its coefficients.
 *
 * With optimize_coding, libjpeg's transcoder first runs the whole scan
 * through a statistics pass (encode_mcu_gather: 63 branches per block, in
 * C) to count the symbols, then makes optimal tables (JPEG Annex K.2) and
 * encodes. That pass was 28% of the time of `stoke pack` with restart
 * markers (perf, 2,000 photos). Here the same counts come from the
 * coefficient arrays directly, visiting only each block's nonzero
 * coefficients, and the tables are made by the same Annex K.2 procedure,
 * so the compressor, given them with optimize_coding off, writes the same
 * bytes as libjpeg's optimize_coding would (tests/test_augment.c checks).
 *
 *     jvirt_barray_ptr *coefs = jpeg_read_coefficients(&d);
 *     jpeg_copy_critical_parameters(&d, &c);
 *     c.restart_interval = ...;
 *     if (stk_jpeg_optimal_tables(&d, coefs, &c)) c.optimize_coding = FALSE;
 *     else c.optimize_coding = TRUE;              // libjpeg counts (and reports)
 *     jpeg_write_coefficients(&c, coefs);
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbol counts of the tables of one scan: [table][symbol], symbols 0..255. */
typedef struct stk_huff_counts {
    int64_t dc[NUM_HUFF_TBLS][256];
    int64_t ac[NUM_HUFF_TBLS][256];
} stk_huff_counts;

/* Count the symbols of the one interleaved baseline scan jpeg_write_coefficients
 * writes for coefs (the arrays of decompressor d) with c's restart interval
 * and table assignment, the padding blocks of partial edge MCUs included as
 * libjpeg makes them. False when a coefficient is out of baseline range (libjpeg
 * itself then reports it). */
bool stk_jpeg_count_symbols(j_decompress_ptr d, jvirt_barray_ptr *coefs, j_compress_ptr c,
                            stk_huff_counts *n);

/* The optimal table for these counts (Annex K.2: code lengths from merging
 * the two least frequent, ties to the larger symbol; one code point kept
 * free so that no code is all ones; lengths over 16 folded). False when a
 * code would be longer than 32 bits before folding (libjpeg refuses those
 * too). */
bool stk_huff_optimal_table(const int64_t freq[256], uint8_t bits[17], uint8_t huffval[256]);

/* Count, make every table c's components use, and install them in c;
 * false when a step fails (then c's tables may be partly replaced: set
 * optimize_coding, which makes them anew). */
bool stk_jpeg_optimal_tables(j_decompress_ptr d, jvirt_barray_ptr *coefs, j_compress_ptr c);

#ifdef __cplusplus
}
#endif
