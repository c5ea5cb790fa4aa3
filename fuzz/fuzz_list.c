/* List-file parse: "path label" lines, comments, spaces, NULs, huge labels. */
#include "fuzz_input.h"
#include "pack/source.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A label of 999,999 makes the source name a million numbered classes,
     * by design (tens of ms): the limit itself is tested in tests/cli, so
     * the fuzzer keeps to labels below 10,000 and stays fast. */
    for (size_t i = 0, run = 0; i < size; i++) {
        run = data[i] >= '0' && data[i] <= '9' ? run + 1 : 0;
        if (run > 4) return 0;
    }
    char path[64];
    int fd = fuzz_as_file(data, size, path, sizeof path);
    if (fd < 0) return 0;
    stk_source *src;
    if (stk_source_open_list(path, &src) == STK_OK) stk_source_destroy(src);
    close(fd);
    return 0;
}
