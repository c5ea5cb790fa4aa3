/* Stoke's entropy decoder inside libjpeg-turbo (jpeg_entropy_hook.h). */
#include "decode/jpeg_entropy_hook.h"

#include "decode/jpeg_entropy.h"

#include <jpegint.h> /* struct jpeg_entropy_decoder: libjpeg-turbo's -dev package ships it */
#include <stdlib.h>
#include <string.h>

struct stk_jpeg_hook {
    struct jpeg_entropy_decoder pub; /* first: libjpeg-turbo calls through cinfo->entropy */
    stk_jpeg_entropy e;
    stk_jpeg_entropy_scratch scratch;
    stk_jpeg_segment_bytes *segs; /* the crop's segments, row by row */
    size_t segs_cap;
    int16_t *coef; /* their coefficients, MCU after MCU */
    size_t coef_cap;
    size_t next, count; /* the next MCU libjpeg-turbo asks for, and how many there are */
    int64_t mcus;
};

stk_jpeg_hook *stk_jpeg_hook_create(void) { return calloc(1, sizeof(stk_jpeg_hook)); }

void stk_jpeg_hook_destroy(stk_jpeg_hook *h)
{
    if (!h) return;
    stk_jpeg_entropy_scratch_free(&h->scratch);
    free(h->segs);
    free(h->coef);
    free(h);
}

int64_t stk_jpeg_hook_mcus(const stk_jpeg_hook *h) { return h->mcus; }

static void start_pass(j_decompress_ptr cinfo) { (void)cinfo; }

/* libjpeg-turbo's decode_mcu: the next MCU into MCU_data, or nowhere when
 * MCU_data is NULL (a skipped row). install checked that libjpeg-turbo
 * asks for no more MCUs than the crop has. */
static boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW *MCU_data)
{
    stk_jpeg_hook *h = (stk_jpeg_hook *)cinfo->entropy;
    if (h->next < h->count && MCU_data) {
        const int16_t *from = h->coef + h->next * (size_t)h->e.blocks * 64;
        for (int b = 0; b < h->e.blocks; b++) memcpy(MCU_data[b][0], from + b * 64, 64 * 2);
        h->mcus++;
    }
    h->next++;
    return TRUE;
}

static bool reserve(void **p, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    void *q = realloc(*p, need);
    if (!q) return false;
    *p = q;
    *cap = need;
    return true;
}

bool stk_jpeg_hook_install(stk_jpeg_hook *h, j_decompress_ptr d, const uint8_t *data,
                           const stk_jpeg_segments *s, int mx0, int mx1, int my0, int my1)
{
    if (stk_jpeg_entropy_init(data, s->data_at, &h->e) != STK_OK) return false;
    /* libjpeg-turbo must ask for the MCUs the segments hold, block by block
     * in the order jpeg_entropy.c writes them. */
    if (d->progressive_mode || d->arith_code || d->comps_in_scan != h->e.ncomp ||
        d->blocks_in_MCU != h->e.blocks || (int)d->MCUs_per_row != mx1 - mx0 ||
        (int)d->MCU_rows_in_scan != my1 - my0 || d->Se != 63)
        return false;
    for (int b = 0; b < h->e.blocks; b++)
        if (d->MCU_membership[b] != h->e.comp_of_block[b]) return false;
    size_t c0 = (size_t)(mx0 / s->interval), cols = (size_t)(mx1 - mx0) / (size_t)s->interval;
    size_t n = cols * (size_t)(my1 - my0); /* mx0, mx1 lie on the grid */
    if (!reserve((void **)&h->segs, &h->segs_cap, n * sizeof *h->segs)) return false;
    for (size_t i = 0; i < n; i++) {
        size_t k = ((size_t)my0 + i / cols) * (size_t)s->per_row + c0 + i % cols;
        size_t begin = k ? (size_t)s->end[k - 1] + 2 : s->data_at;
        h->segs[i] = (stk_jpeg_segment_bytes){data + begin, s->end[k] - begin};
    }
    h->count = n * (size_t)s->interval;
    if (!reserve((void **)&h->coef, &h->coef_cap, h->count * (size_t)h->e.blocks * 64 * 2))
        return false;
    /* A segment it refuses (what libjpeg-turbo decodes only with a warning):
     * libjpeg-turbo decodes the crop, and reports it its way. */
    if (stk_jpeg_entropy_decode_all(&h->e, h->segs, n, s->interval, h->coef, &h->scratch) != STK_OK)
        return false;
    h->next = 0;
    h->pub.start_pass = start_pass;
    h->pub.decode_mcu = decode_mcu;
    h->pub.insufficient_data = FALSE;
    d->entropy = &h->pub;
    return true;
}
