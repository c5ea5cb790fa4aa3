/* A fingerprint of a dataset's content (dataset.h), for ranks of a
 * data-parallel job to check that they read the same data. */
#include "storage/dataset.h"

#include "common/crc32c.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES 64 /* records whose CRC joins the fingerprint */

stk_status stk_dataset_fingerprint(const stk_dataset *ds, uint64_t *out)
{
    const stk_meta *m = stk_dataset_meta(ds);
    uint64_t h = STK_FNV1A64_BASIS;
    /* what the meta says of the content; not its source path or the tool
     * that packed it, which differ between copies of one dataset */
    h = stk_fnv1a64(h, &m->count, sizeof m->count);
    h = stk_fnv1a64(h, &m->encoding, sizeof m->encoding);
    h = stk_fnv1a64(h, &m->channels, sizeof m->channels);
    h = stk_fnv1a64(h, &m->num_classes, sizeof m->num_classes);
    for (uint32_t c = 0; c < m->num_classes; c++) {
        h = stk_fnv1a64(h, m->class_names[c], strlen(m->class_names[c]) + 1);
        h = stk_fnv1a64(h, &m->class_counts[c], sizeof m->class_counts[c]);
    }
    uint32_t sides[4] = {m->min_width, m->max_width, m->min_height, m->max_height};
    h = stk_fnv1a64(h, sides, sizeof sides);
    if (m->has_stats) { /* exact over every pixel: other images, other values */
        h = stk_fnv1a64(h, m->mean, sizeof m->mean);
        h = stk_fnv1a64(h, m->std, sizeof m->std);
    }
    /* the CRCs (header, name, payload) of records spread over the file */
    uint64_t n = m->count < SAMPLES ? m->count : SAMPLES;
    size_t cap = stk_dataset_max_record_bytes(ds);
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = STK_OK;
    for (uint64_t k = 0; k < n && st == STK_OK; k++) {
        uint64_t i = n < 2 ? 0 : k * (m->count - 1) / (n - 1);
        size_t len;
        stk_record r;
        if ((st = stk_dataset_pread(ds, i, buf, cap, &len)) != STK_OK) break;
        if ((st = stk_dataset_decode(ds, buf, len, true, &r)) != STK_OK ||
            (st = stk_dataset_check_entry(ds, i, &r)) != STK_OK) {
            st = stk_error_prefix(st, "%s: record %" PRIu64, stk_dataset_path(ds), i);
            break;
        }
        h = stk_fnv1a64(h, &r.crc, sizeof r.crc);
    }
    free(buf);
    *out = h;
    return st;
}
