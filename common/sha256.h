/* SHA-256 (FIPS 180-4), for naming a file's exact bytes: the checkpoint an
 * exported model came from.
 *
 *     char hex[65];
 *     STK_TRY(stk_sha256_file("run/best.safetensors", hex));
 */
#pragma once

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t used;
} stk_sha256;

void stk_sha256_init(stk_sha256 *s);
void stk_sha256_update(stk_sha256 *s, const void *data, size_t n);
void stk_sha256_final(stk_sha256 *s, uint8_t digest[32]);

/* The digest of a file's bytes as 64 lowercase hex digits. Errors:
 * STK_ERR_IO naming the file. */
stk_status stk_sha256_file(const char *path, char hex[65]);

#ifdef __cplusplus
}
#endif
