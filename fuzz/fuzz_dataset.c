/* Dataset open from bytes: Stoke's LMDB reader, the meta, the record index,
 * then every record read and checked (the path every reading command takes). */
#include "fuzz_input.h"
#include "storage/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_as_file(data, size, path, sizeof path);
    if (fd < 0) return 0;
    stk_dataset *ds;
    if (stk_dataset_open(path, &ds) == STK_OK) {
        uint64_t n = stk_dataset_count(ds);
        uint8_t *buf = malloc(stk_dataset_max_record_bytes(ds) + 1);
        for (uint64_t i = 0; i < n && i < 4096; i++) {
            stk_record r;
            size_t len;
            stk_dataset_get(ds, i, &r, true);
            if (buf &&
                stk_dataset_pread(ds, i, buf, stk_dataset_max_record_bytes(ds), &len) == STK_OK)
                stk_dataset_decode(ds, buf, len, true, &r);
        }
        free(buf);
        stk_dataset_close(ds);
    }
    close(fd);
    return 0;
}
