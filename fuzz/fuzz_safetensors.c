/* Checkpoint (safetensors) read: header length, JSON, shapes, byte ranges. */
#include "storage/safetensors.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_as_file(data, size, path, sizeof path);
    if (fd < 0) return 0;
    stk_safetensors *f;
    if (stk_safetensors_read(path, &f) == STK_OK) {
        for (int i = 0; i < f->n; i++) {
            const stk_st_entry *e = stk_safetensors_find(f, f->entries[i].name);
            if (e != &f->entries[i]) __builtin_trap(); /* names are unique */
            const uint8_t *p = stk_safetensors_data(f, e);
            volatile uint8_t sink = e->end > e->begin ? p[e->end - e->begin - 1] : 0;
            (void)sink;
        }
        (void)stk_safetensors_meta(f, "format");
        stk_safetensors_free(f);
    }
    close(fd);
    return 0;
}
