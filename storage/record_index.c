/* The persisted record index (record_index.h): checked field by field when
 * read. (Written by index_writer.c.) */
#include "storage/record_index.h"

#include "common/crc32c.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p) { return get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

stk_status stk_record_index_parse(const uint8_t *value, uint64_t len, uint64_t file_txnid,
                                  uint64_t count, uint64_t file_size, stk_index_entry **entries)
{
    *entries = NULL;
    if (len < STK_INDEX_HEADER || memcmp(value, STK_INDEX_MAGIC, 8) != 0)
        return stk_error(STK_ERR_CORRUPT, "not a record index (no %s header)", STK_INDEX_MAGIC);
    uint64_t txnid = get_u64(value + 8), n = get_u64(value + 16);
    uint32_t size = get_u32(value + 24), crc = get_u32(value + 28);
    if (txnid != file_txnid)
        return stk_error(STK_ERR_CORRUPT,
                         "written by transaction %" PRIu64 ", the file's newest is %" PRIu64
                         ": the file changed after its index was written",
                         txnid, file_txnid);
    if (n != count || size != STK_INDEX_ENTRY_SIZE ||
        len != STK_INDEX_HEADER + n * (uint64_t)STK_INDEX_ENTRY_SIZE)
        return stk_error(STK_ERR_CORRUPT,
                         "%" PRIu64 " entries of %u bytes in %" PRIu64 " bytes, for %" PRIu64
                         " records",
                         n, size, len, count);
    const uint8_t *e = value + STK_INDEX_HEADER;
    if (stk_crc32c(0, e, len - STK_INDEX_HEADER) != crc)
        return stk_error(STK_ERR_CORRUPT, "its entries do not match their CRC");
    stk_index_entry *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++, e += STK_INDEX_ENTRY_SIZE) {
        out[i] = (stk_index_entry){get_u64(e), get_u32(e + 8), get_u32(e + 12),
                                   (int32_t)get_u32(e + 16)};
        if (out[i].offset > file_size || out[i].length > file_size - out[i].offset) {
            free(out);
            return stk_error(STK_ERR_CORRUPT, "record %" PRIu64 " lies outside the file", i);
        }
    }
    *entries = out;
    return STK_OK;
}
