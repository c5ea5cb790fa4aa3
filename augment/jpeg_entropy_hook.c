/* Stoke's entropy decoder inside libjpeg-turbo (jpeg_entropy_hook.h). */
#include "augment/jpeg_entropy_hook.h"

#include "augment/jpeg_entropy.h"

#include <jpegint.h> /* struct jpeg_entropy_decoder: libjpeg-turbo's -dev package ships it */
#include <stdlib.h>
#include <string.h>

struct stk_jpeg_hook {
    struct jpeg_entropy_decoder pub; /* first: libjpeg-turbo calls through cinfo->entropy */
    stk_jpeg_entropy e;
    const uint8_t *data;
    const stk_jpeg_segments *s;
    size_t c0, cols, my0; /* the crop's first segment column, its columns, first row */
    size_t next, count;   /* the crop's next segment, and how many it has */
    int left;             /* MCUs of the current segment still to decode */
    stk_jpeg_stream st;
    int16_t discard[STK_JPEG_MAX_MCU_BLOCKS][64]; /* where skipped MCUs go */
    jmp_buf *on_fail;
    bool failed;
    int64_t mcus;
};

stk_jpeg_hook *stk_jpeg_hook_create(void) { return calloc(1, sizeof(stk_jpeg_hook)); }

void stk_jpeg_hook_destroy(stk_jpeg_hook *h) { free(h); }

bool stk_jpeg_hook_failed(const stk_jpeg_hook *h) { return h->failed; }

int64_t stk_jpeg_hook_mcus(const stk_jpeg_hook *h) { return h->mcus; }

static void start_pass(j_decompress_ptr cinfo) { (void)cinfo; }

/* Refuse the crop's segments: libjpeg-turbo decodes them again its way. */
static void fail(stk_jpeg_hook *h)
{
    h->failed = true;
    longjmp(*h->on_fail, 1);
}

static void next_segment(stk_jpeg_hook *h)
{
    if (h->next == h->count) fail(h); /* more MCUs asked for than the crop has */
    const stk_jpeg_segments *s = h->s;
    size_t k = (h->my0 + h->next / h->cols) * (size_t)s->per_row + h->c0 + h->next % h->cols;
    size_t begin = k ? (size_t)s->end[k - 1] + 2 : s->data_at;
    stk_jpeg_stream_start(&h->st, h->data + begin, s->end[k] - begin);
    h->left = s->interval;
    h->next++;
}

/* libjpeg-turbo's decode_mcu: the next MCU into MCU_data (zeroed by the
 * coefficient controller), or nowhere when MCU_data is NULL (a skipped row). */
static boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW *MCU_data)
{
    stk_jpeg_hook *h = (stk_jpeg_hook *)cinfo->entropy;
    if (!h->left) next_segment(h);
    int16_t *blocks[STK_JPEG_MAX_MCU_BLOCKS];
    for (int b = 0; b < h->e.blocks; b++) {
        if (MCU_data) {
            blocks[b] = MCU_data[b][0];
        } else {
            blocks[b] = h->discard[b];
            memset(blocks[b], 0, sizeof h->discard[b]);
        }
    }
    if (!stk_jpeg_stream_mcu(&h->e, &h->st, blocks)) fail(h);
    h->mcus++;
    if (!--h->left && !stk_jpeg_stream_done(&h->st)) fail(h);
    return TRUE;
}

bool stk_jpeg_hook_install(stk_jpeg_hook *h, j_decompress_ptr d, const uint8_t *data,
                           const stk_jpeg_segments *s, int mx0, int mx1, int my0, int my1,
                           jmp_buf *on_fail)
{
    h->failed = false;
    if (stk_jpeg_entropy_init(data, s->data_at, &h->e) != STK_OK) return false;
    /* libjpeg-turbo must ask for the MCUs the segments hold, block by block
     * in the order jpeg_entropy.c writes them. */
    if (d->progressive_mode || d->arith_code || d->comps_in_scan != h->e.ncomp ||
        d->blocks_in_MCU != h->e.blocks || (int)d->MCUs_per_row != mx1 - mx0 ||
        (int)d->MCU_rows_in_scan != my1 - my0 || d->Se != 63)
        return false;
    for (int b = 0; b < h->e.blocks; b++)
        if (d->MCU_membership[b] != h->e.comp_of_block[b]) return false;
    h->data = data;
    h->s = s;
    h->c0 = (size_t)(mx0 / s->interval);
    h->cols = (size_t)(mx1 - mx0) / (size_t)s->interval; /* mx0, mx1 lie on the grid */
    h->my0 = (size_t)my0;
    h->next = 0;
    h->count = h->cols * (size_t)(my1 - my0);
    h->left = 0;
    h->on_fail = on_fail;
    h->pub.start_pass = start_pass;
    h->pub.decode_mcu = decode_mcu;
    h->pub.insufficient_data = FALSE;
    d->entropy = &h->pub;
    return true;
}
