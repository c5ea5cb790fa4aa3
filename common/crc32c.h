/* CRC-32C (Castagnoli), as used by iSCSI, ext4 and the Stoke record format.
 *
 *     uint32_t crc = stk_crc32c(0, name, name_len);
 *     crc = stk_crc32c(crc, payload, payload_len);   // chained = one call on both
 *
 * Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run
 * time), a table otherwise; both give identical results. Thread-safe.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CRC-32C of `len` bytes continuing from `crc` (0 to start). */
uint32_t stk_crc32c(uint32_t crc, const void *data, size_t len);

/* The table implementation, exposed so tests can compare both paths. */
uint32_t stk_crc32c_table(uint32_t crc, const void *data, size_t len);

/* 64-bit FNV-1a, chained like the CRC (start from STK_FNV1A64_BASIS): a
 * fingerprint to compare, not a check against corruption (the ranks'
 * configuration, a dataset's content). */
#define STK_FNV1A64_BASIS 0xcbf29ce484222325ull
uint64_t stk_fnv1a64(uint64_t h, const void *data, size_t len);

/* Non-zero when stk_crc32c uses the SSE4.2 instruction. */
int stk_crc32c_hw(void);

#ifdef __cplusplus
}
#endif
