/* One record of a Stoke dataset: a fixed 32-byte little-endian header, the
 * source name, then the payload (docs/FORMAT.md has the byte layout).
 *
 *     stk_record r = {.encoding = STK_ENCODING_JPEG, .channels = 3, .width = w,
 *                     .height = h, .label = 7, .name = "cat/0001.jpg",
 *                     .name_len = 12, .payload = jpeg, .payload_len = n};
 *     uint8_t *buf = malloc(stk_record_size(&r));
 *     stk_record_encode(&r, buf);                  // fills in r.crc too
 *     stk_record back;
 *     stk_record_decode(buf, stk_record_size(&r), true, &back);  // views into buf
 *
 * Decoded records point into the buffer they were decoded from; they are valid
 * as long as that buffer is.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_RECORD_MAGIC       0x524B5453u /* "STKR" as little-endian bytes */
#define STK_RECORD_VERSION     2           /* written; 1 is still read */
#define STK_RECORD_HEADER_SIZE 32
#define STK_RECORD_MAX_NAME    4096

/* Limits shared by the writer and every reader, so that what packs also
 * opens: labels 0..STK_MAX_CLASSES-1, sides up to JPEG's largest (which also
 * keeps crop and resize arithmetic far from integer overflow). */
#define STK_MAX_CLASSES 1000000u
#define STK_MAX_SIDE    65535u

typedef enum stk_encoding {
    STK_ENCODING_JPEG = 1,   /* baseline JPEG bytes, 1 or 3 components */
    STK_ENCODING_RAW_U8 = 2, /* height x width x channels u8, HWC order */
} stk_encoding;

typedef struct stk_record {
    uint8_t version;  /* record version: 0 when encoding means STK_RECORD_VERSION */
    uint8_t encoding; /* stk_encoding */
    uint8_t channels; /* components in the payload (JPEG: 1 gray, 3 colour) */
    uint32_t width;
    uint32_t height;
    int32_t label;
    const char *name; /* source name, UTF-8, not NUL-terminated */
    uint32_t name_len;
    const uint8_t *payload;
    uint32_t payload_len;
    uint32_t crc; /* version 2: CRC-32C of header bytes 0..27, name, payload;
                   * version 1: of name and payload only */
} stk_record;

/* Encoded size: header + name + payload. */
size_t stk_record_size(const stk_record *r);

/* Write r (header, name, payload) into dst[0..stk_record_size(r)) and set
 * r->crc. Writes version r->version (1 only for compatibility tests), else
 * STK_RECORD_VERSION. */
void stk_record_encode(stk_record *r, uint8_t *dst);

/* Check the header fields a writer is given: encoding, channels, sizes
 * within STK_MAX_SIDE, label within STK_MAX_CLASSES, name length, raw
 * payload size. Errors: STK_ERR_CORRUPT / STK_ERR_LIMIT with the reason. */
stk_status stk_record_check(const stk_record *r);

/* Parse a record from buf[0..len): checks magic, version (1 or 2), the
 * fields (stk_record_check), sizes and, when check_crc, the CRC. Errors:
 * STK_ERR_CORRUPT (message says what is wrong; the caller adds which
 * record), STK_ERR_FORMAT (newer record version). */
stk_status stk_record_decode(const void *buf, size_t len, bool check_crc, stk_record *out);

/* The `records` key of record `index`: 8 bytes, big-endian, so that LMDB's
 * byte order is index order. */
void stk_record_key(uint64_t index, uint8_t key[8]);

/* "jpeg" / "raw_u8" / "unknown". */
const char *stk_encoding_name(int encoding);

#ifdef __cplusplus
}
#endif
