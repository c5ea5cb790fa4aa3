#include "storage/record.h"

#include "common/crc32c.h"

#include <string.h>

/* Header layout (little-endian):
 *   0 u32 magic      4 u8 version   5 u8 encoding  6 u8 channels  7 u8 reserved (0)
 *   8 u32 width     12 u32 height  16 i32 label
 *  20 u32 name_len  24 u32 payload_len  28 u32 crc32c(header[0..28) || name || payload)
 * (version 1: crc32c(name || payload), so its header fields were unchecked) */

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16),
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void stk_record_key(uint64_t index, uint8_t key[8])
{
    for (int i = 7; i >= 0; i--, index >>= 8) key[i] = (uint8_t)index;
}

size_t stk_record_size(const stk_record *r)
{
    return STK_RECORD_HEADER_SIZE + (size_t)r->name_len + (size_t)r->payload_len;
}

const char *stk_encoding_name(int encoding)
{
    switch (encoding) {
    case STK_ENCODING_JPEG: return "jpeg";
    case STK_ENCODING_RAW_U8: return "raw_u8";
    }
    return "unknown";
}

static uint32_t record_crc(const uint8_t *header, int version, const void *name, uint32_t name_len,
                           const void *payload, uint32_t payload_len)
{
    uint32_t crc = version >= 2 ? stk_crc32c(0, header, 28) : 0;
    crc = stk_crc32c(crc, name, name_len);
    return stk_crc32c(crc, payload, payload_len);
}

void stk_record_encode(stk_record *r, uint8_t *dst)
{
    int version = r->version == 1 ? 1 : STK_RECORD_VERSION;
    put_u32(dst + 0, STK_RECORD_MAGIC);
    dst[4] = (uint8_t)version;
    dst[5] = r->encoding;
    dst[6] = r->channels;
    dst[7] = 0;
    put_u32(dst + 8, r->width);
    put_u32(dst + 12, r->height);
    put_u32(dst + 16, (uint32_t)r->label);
    put_u32(dst + 20, r->name_len);
    put_u32(dst + 24, r->payload_len);
    r->crc = record_crc(dst, version, r->name, r->name_len, r->payload, r->payload_len);
    put_u32(dst + 28, r->crc);
    memcpy(dst + STK_RECORD_HEADER_SIZE, r->name, r->name_len);
    memcpy(dst + STK_RECORD_HEADER_SIZE + r->name_len, r->payload, r->payload_len);
}

stk_status stk_record_check(const stk_record *r)
{
    if (r->encoding != STK_ENCODING_JPEG && r->encoding != STK_ENCODING_RAW_U8)
        return stk_error(STK_ERR_CORRUPT, "unknown encoding %u", r->encoding);
    if (r->channels != 1 && r->channels != 3)
        return stk_error(STK_ERR_CORRUPT, "bad channel count %u", r->channels);
    if (r->width == 0 || r->height == 0)
        return stk_error(STK_ERR_CORRUPT, "bad image size %ux%u", r->width, r->height);
    if (r->width > STK_MAX_SIDE || r->height > STK_MAX_SIDE)
        return stk_error(STK_ERR_LIMIT, "image size %ux%u: sides are limited to %u", r->width,
                         r->height, STK_MAX_SIDE);
    if (r->label < 0 || (uint32_t)r->label >= STK_MAX_CLASSES)
        return stk_error(STK_ERR_LIMIT, "label %d: labels are limited to 0..%u", r->label,
                         STK_MAX_CLASSES - 1);
    if (r->name_len > STK_RECORD_MAX_NAME)
        return stk_error(STK_ERR_CORRUPT, "name of %u bytes (at most %d)", r->name_len,
                         STK_RECORD_MAX_NAME);
    if (r->encoding == STK_ENCODING_RAW_U8 &&
        (uint64_t)r->width * r->height * r->channels != r->payload_len)
        return stk_error(STK_ERR_CORRUPT, "raw payload is %u bytes, not %ux%ux%u", r->payload_len,
                         r->height, r->width, r->channels);
    return STK_OK;
}

stk_status stk_record_decode(const void *buf, size_t len, bool check_crc, stk_record *out)
{
    const uint8_t *p = buf;
    memset(out, 0, sizeof *out);
    if (len < STK_RECORD_HEADER_SIZE)
        return stk_error(STK_ERR_CORRUPT, "record is %zu bytes, shorter than its header", len);
    if (get_u32(p) != STK_RECORD_MAGIC)
        return stk_error(STK_ERR_CORRUPT, "bad record magic 0x%08X", get_u32(p));
    if (p[4] != 1 && p[4] != STK_RECORD_VERSION)
        return stk_error(STK_ERR_FORMAT, "record version %u (this stoke reads versions 1 and %d)",
                         p[4], STK_RECORD_VERSION);
    out->version = p[4];
    out->encoding = p[5];
    out->channels = p[6];
    out->width = get_u32(p + 8);
    out->height = get_u32(p + 12);
    out->label = (int32_t)get_u32(p + 16);
    out->name_len = get_u32(p + 20);
    out->payload_len = get_u32(p + 24);
    out->crc = get_u32(p + 28);
    out->name = (const char *)p + STK_RECORD_HEADER_SIZE;
    out->payload = p + STK_RECORD_HEADER_SIZE + out->name_len;
    if (out->name_len > STK_RECORD_MAX_NAME ||
        (uint64_t)STK_RECORD_HEADER_SIZE + out->name_len + out->payload_len != len) {
        stk_status st =
            stk_error(STK_ERR_CORRUPT, "record is %zu bytes but its header says 32 + %u + %u", len,
                      out->name_len, out->payload_len);
        out->name = NULL; /* not inside the record: callers must not print it */
        return st;
    }
    /* The CRC first: a flipped header field then reads as what it is. */
    if (check_crc) {
        uint32_t crc =
            record_crc(p, p[4], out->name, out->name_len, out->payload, out->payload_len);
        if (crc != out->crc)
            return stk_error(STK_ERR_CORRUPT, "CRC mismatch (stored %08X, computed %08X)", out->crc,
                             crc);
    }
    stk_status st = stk_record_check(out);
    return st == STK_ERR_LIMIT ? stk_error(STK_ERR_CORRUPT, "%s", stk_last_error()) : st;
}
