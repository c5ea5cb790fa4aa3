/* Record decode: header fields, lengths and the CRC of every version. */
#include "storage/record.h"

#include <stdbool.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    stk_record r;
    for (int crc = 0; crc < 2; crc++)
        if (stk_record_decode(data, size, crc, &r) == STK_OK) {
            /* A decoded record's views lie inside the input. */
            if (r.name + r.name_len > (const char *)data + size ||
                r.payload + r.payload_len > data + size)
                __builtin_trap();
        }
    return 0;
}
