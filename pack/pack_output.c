#include "pack/pack_output.h"

#include "common/fs.h"
#include "common/text.h"
#include "storage/writer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SHARDS 99999 /* the names' five digits */

/* The file being written and what its meta will say. */
typedef struct shard {
    stk_writer *w;
    stk_meta meta;
    uint64_t bytes; /* records' encoded bytes so far */
    uint64_t sum[3], pixels;
    long double sumsq[3]; /* u64 would overflow beyond ~1e12 pixels */
    bool stats;
} shard;

struct stk_pack_output {
    const stk_source *src;
    char *out_path;
    char *name; /* out_path without ".stoke": shards are NAME-00000-of-000NN.stoke */
    char *packed_with;
    uint64_t shard_bytes;
    shard cur;
    bool open;   /* cur holds a writer */
    char **done; /* the finished shards' temporaries (shards only) */
    int ndone;
    uint64_t count, bytes_out;
    bool published;
};

stk_status stk_pack_output_open(const char *out_path, uint64_t shard_bytes, const stk_source *src,
                                const char *packed_with, stk_pack_output **out)
{
    *out = NULL;
    stk_pack_output *o = calloc(1, sizeof *o);
    if (!o) return stk_error(STK_ERR_NOMEM, "out of memory");
    o->src = src;
    o->shard_bytes = shard_bytes;
    size_t n = strlen(out_path);
    o->out_path = strdup(out_path);
    o->packed_with = strdup(packed_with);
    o->name = n > 6 && !strcmp(out_path + n - 6, ".stoke")
                  ? stk_text_printf("%.*s", (int)n - 6, out_path)
                  : strdup(out_path);
    if (!o->out_path || !o->name || !o->packed_with) {
        stk_pack_output_close(o);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    *out = o;
    return STK_OK;
}

/* A shard's temporary target: hidden, next to the result. */
static char *shard_temp(const stk_pack_output *o, int k)
{
    const char *slash = strrchr(o->name, '/');
    int dir = slash ? (int)(slash - o->name) + 1 : 0;
    return stk_text_printf("%.*s.%s.shard%d.%ld", dir, o->name, o->name + dir, k, (long)getpid());
}

static stk_status start_shard(stk_pack_output *o)
{
    shard *s = &o->cur;
    memset(s, 0, sizeof *s);
    s->stats = true;
    char *target = o->shard_bytes ? shard_temp(o, o->ndone) : strdup(o->out_path);
    if (!target) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = stk_writer_open(target, &s->w);
    free(target);
    if (st == STK_OK) st = stk_meta_set_classes(&s->meta, o->src->class_names, o->src->num_classes);
    o->open = st == STK_OK;
    return st;
}

static void note_size(stk_meta *m, uint32_t w, uint32_t h, bool first)
{
    if (first || w < m->min_width) m->min_width = w;
    if (first || w > m->max_width) m->max_width = w;
    if (first || h < m->min_height) m->min_height = h;
    if (first || h > m->max_height) m->max_height = h;
}

/* Write the current shard's meta and publish it (at its temporary target
 * when sharding). */
static stk_status finish_shard(stk_pack_output *o)
{
    shard *s = &o->cur;
    stk_meta *m = &s->meta;
    m->encoding = o->src->encoding;
    m->channels = o->src->encoding == STK_ENCODING_JPEG ? 3 : (int)o->src->channels;
    m->has_stats = s->stats && s->pixels > 0;
    for (int c = 0; m->has_stats && c < 3; c++) { /* mean and std in [0, 1] from exact sums */
        long double mean = (long double)s->sum[c] / s->pixels;
        long double var = s->sumsq[c] / s->pixels - mean * mean;
        m->mean[c] = (double)(mean / 255.0L);
        m->std[c] = (double)(sqrtl(var > 0 ? var : 0) / 255.0L);
    }
    m->source = strdup(o->src->description);
    m->packed_with = strdup(o->packed_with);
    if (!m->source || !m->packed_with) return stk_error(STK_ERR_NOMEM, "out of memory");
    uint64_t bytes = 0;
    STK_TRY(stk_writer_finish(s->w, m, &bytes));
    o->bytes_out += bytes;
    stk_writer_close(s->w);
    stk_meta_deinit(m);
    s->w = NULL;
    o->open = false;
    if (!o->shard_bytes) return STK_OK;
    char **grown = realloc(o->done, (size_t)(o->ndone + 1) * sizeof *grown);
    if (!grown) return stk_error(STK_ERR_NOMEM, "out of memory");
    o->done = grown;
    if (!(o->done[o->ndone] = shard_temp(o, o->ndone)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    o->ndone++;
    return STK_OK;
}

stk_status stk_pack_output_put(stk_pack_output *o, stk_record *r, bool has_stats,
                               const uint64_t sum[3], const uint64_t sumsq[3], uint64_t pixels)
{
    if (!o->open) {
        if (o->ndone == MAX_SHARDS)
            return stk_error(STK_ERR_LIMIT, "more than %d shards: a larger --shard-size",
                             MAX_SHARDS);
        STK_TRY(start_shard(o));
    }
    shard *s = &o->cur;
    STK_TRY(stk_writer_put(s->w, r));
    o->count++;
    s->bytes += stk_record_size(r);
    note_size(&s->meta, r->width, r->height, stk_writer_count(s->w) == 1);
    s->meta.class_counts[r->label]++;
    if (has_stats) {
        for (int c = 0; c < 3; c++) {
            s->sum[c] += sum[c];
            s->sumsq[c] += (long double)sumsq[c];
        }
        s->pixels += pixels;
    } else {
        s->stats = false;
    }
    /* a full shard is finished now: its temporary and memory go */
    if (o->shard_bytes && s->bytes >= o->shard_bytes) return finish_shard(o);
    return STK_OK;
}

uint64_t stk_pack_output_count(const stk_pack_output *o) { return o->count; }
int stk_pack_output_shards(const stk_pack_output *o) { return o->shard_bytes ? o->ndone : 0; }

/* The shards' final names, then the list that opens them as one dataset. */
static stk_status publish_shards(stk_pack_output *o)
{
    char *list_path = stk_text_printf("%s.shards", o->name);
    char *list_tmp = list_path ? stk_text_printf("%s.tmp", list_path) : NULL;
    FILE *f = list_tmp ? fopen(list_tmp, "w") : NULL;
    stk_status st =
        f ? STK_OK
          : stk_error(STK_ERR_IO, "%s: cannot create: %s", list_path ? list_path : "list",
                      list_tmp ? strerror(errno) : "out of memory");
    const char *slash = strrchr(o->name, '/');
    if (f)
        fprintf(f, "# %d shards of one Stoke dataset: `stoke train --data %s`\n", o->ndone,
                list_path);
    for (int k = 0; k < o->ndone && st == STK_OK; k++) {
        char *final = stk_text_printf("%s-%05d-of-%05d.stoke", o->name, k, o->ndone);
        if (!final)
            st = stk_error(STK_ERR_NOMEM, "out of memory");
        else if (rename(o->done[k], final) != 0)
            st = stk_error(STK_ERR_IO, "%s: cannot rename into place: %s", final, strerror(errno));
        else
            fprintf(f, "%s\n", slash ? final + (slash - o->name) + 1 : final);
        if (st == STK_OK)
            free(o->done[k]), o->done[k] = final; /* published: kept on close */
        else
            free(final);
    }
    if (f && (fclose(f) != 0 || (st == STK_OK && rename(list_tmp, list_path) != 0)) && st == STK_OK)
        st = stk_error(STK_ERR_IO, "%s: cannot write: %s", list_path, strerror(errno));
    if (list_tmp) unlink(list_tmp);
    free(list_tmp);
    free(list_path);
    return st;
}

stk_status stk_pack_output_finish(stk_pack_output *o, uint64_t *bytes_out)
{
    if (o->open) STK_TRY(finish_shard(o));
    if (o->shard_bytes) STK_TRY(publish_shards(o));
    o->published = true;
    *bytes_out = o->bytes_out;
    return STK_OK;
}

void stk_pack_output_close(stk_pack_output *o)
{
    if (!o) return;
    stk_writer_close(o->cur.w);
    stk_meta_deinit(&o->cur.meta);
    for (int k = 0; k < o->ndone; k++) {
        if (!o->published) unlink(o->done[k]);
        free(o->done[k]);
    }
    free(o->done);
    free(o->out_path);
    free(o->name);
    free(o->packed_with);
    free(o);
}
