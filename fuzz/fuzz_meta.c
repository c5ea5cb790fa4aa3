/* Meta parse: the input is key NUL value NUL key NUL value ... as the meta
 * database would hold them; decode checks every value. */
#include "storage/meta.h"

#include <string.h>

typedef struct pairs {
    const char *key[64], *value[64];
    size_t key_len[64], value_len[64];
    int n;
} pairs;

static const char *get(void *ctx, const char *key)
{
    pairs *p = ctx;
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->key[i], key)) return p->value[i];
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || data[size - 1] != 0) return 0; /* every string NUL-terminated */
    pairs p = {.n = 0};
    const char *s = (const char *)data, *end = s + size;
    while (s < end && p.n < 64) {
        size_t kl = strlen(s);
        const char *v = s + kl + 1;
        if (v >= end) break;
        size_t vl = strlen(v);
        p.key[p.n] = s, p.key_len[p.n] = kl, p.value[p.n] = v, p.value_len[p.n] = vl;
        p.n++;
        s = v + vl + 1;
    }
    stk_meta m;
    if (stk_meta_decode(&m, get, &p) == STK_OK) stk_meta_deinit(&m);
    stk_meta_pair mp[64];
    for (int i = 0; i < p.n; i++)
        mp[i] = (stk_meta_pair){p.key[i], p.key_len[i], p.value[i], p.value_len[i]};
    (void)stk_meta_checksum(mp, (size_t)p.n);
    return 0;
}
