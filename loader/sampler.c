#include "loader/sampler.h"

#include "common/rng.h"

#include <stdlib.h>
#include <string.h>

stk_status stk_sampler_init(stk_sampler *s, const stk_sampler_options *o)
{
    memset(s, 0, sizeof *s);
    if (o->batch_size < 1) return stk_error(STK_ERR_INVALID_ARG, "batch size %d", o->batch_size);
    int world = o->world > 0 ? o->world : 1;
    if (o->rank < 0 || o->rank >= world)
        return stk_error(STK_ERR_INVALID_ARG, "rank %d is not in 0..%d", o->rank, world - 1);
    s->o = *o;
    s->o.world = world;
    s->perm = malloc((o->count ? o->count : 1) * sizeof *s->perm);
    if (!s->perm)
        return stk_error(STK_ERR_NOMEM, "out of memory for %llu indices",
                         (unsigned long long)o->count);
    if (o->block_records > 0) {
        uint64_t nb = (o->count + o->block_records - 1) / o->block_records;
        if (!(s->blocks = malloc((nb ? nb : 1) * sizeof *s->blocks))) {
            free(s->perm);
            s->perm = NULL;
            return stk_error(STK_ERR_NOMEM, "out of memory for %llu blocks",
                             (unsigned long long)nb);
        }
    }
    uint64_t n = o->count, w = (uint64_t)world;
    s->per_rank = o->drop_uneven ? n / w : (n + w - 1) / w;
    if (n == 0) s->per_rank = 0;
    uint64_t b = (uint64_t)o->batch_size;
    s->batches = o->drop_last ? s->per_rank / b : (s->per_rank + b - 1) / b;
    s->samples = o->drop_last ? s->batches * b : s->per_rank;
    stk_sampler_epoch(s, 0);
    return STK_OK;
}

void stk_sampler_deinit(stk_sampler *s)
{
    free(s->perm);
    free(s->blocks);
    memset(s, 0, sizeof *s);
}

/* Fisher-Yates over v[0..n). */
static void shuffle(stk_rng *r, uint64_t *v, uint64_t n)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = stk_rng_below64(r, i);
        uint64_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* Block order into perm: the blocks permuted, then window after window of
 * them laid out and shuffled. */
static void block_order(stk_sampler *s, stk_rng *r)
{
    uint64_t n = s->o.count, b = s->o.block_records;
    uint64_t nb = (n + b - 1) / b, w = s->o.window > 0 ? (uint64_t)s->o.window : 8;
    uint64_t *blocks = s->blocks;
    for (uint64_t i = 0; i < nb; i++) blocks[i] = i;
    shuffle(r, blocks, nb);
    uint64_t at = 0;
    for (uint64_t w0 = 0; w0 < nb; w0 += w) {
        uint64_t start = at;
        for (uint64_t k = w0; k < w0 + w && k < nb; k++)
            for (uint64_t i = blocks[k] * b; i < n && i < (blocks[k] + 1) * b; i++)
                s->perm[at++] = i;
        shuffle(r, s->perm + start, at - start);
    }
}

void stk_sampler_epoch(stk_sampler *s, uint64_t epoch)
{
    s->epoch = epoch;
    uint64_t n = s->o.count;
    for (uint64_t i = 0; i < n; i++) s->perm[i] = i;
    if (!s->o.shuffle) return;
    stk_rng r;
    stk_rng_init(&r, s->o.seed, epoch * 2, 0); /* even streams: sampling (odd: augmentation) */
    if (s->o.block_records > 0)
        block_order(s, &r);
    else
        shuffle(&r, s->perm, n);
}

uint64_t stk_sampler_position(const stk_sampler *s, uint64_t k)
{
    /* rank r takes r, r + world, ...; padding wraps to the start */
    return (k * (uint64_t)s->o.world + (uint64_t)s->o.rank) % s->o.count;
}

uint64_t stk_sampler_index(const stk_sampler *s, uint64_t k)
{
    return s->perm[stk_sampler_position(s, k)];
}

int stk_sampler_batch_len(const stk_sampler *s, uint64_t b)
{
    uint64_t start = b * (uint64_t)s->o.batch_size;
    if (start >= s->samples) return 0;
    uint64_t left = s->samples - start;
    return left < (uint64_t)s->o.batch_size ? (int)left : s->o.batch_size;
}
