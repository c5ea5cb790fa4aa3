/* Checkpoint metadata and --resume (run_resume_impl.h). */
#include "run/run_resume_impl.h"

#include "common/fs.h"
#include "common/json.h"
#include "common/text.h"
#include "storage/safetensors.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Block order's "MIBxWINDOW" in use (the loader may have fitted them to
 * the memory). */
static void block_params_text(const stk_run *r, char *buf, size_t size)
{
    int mib, window;
    stk_loader_block_params(r->loader, &mib, &window);
    snprintf(buf, size, "%dx%d", mib, window);
}

/* The run's own metadata in every checkpoint, beside the trainer's position:
 * among it the class names of --data (what eval, export and predict name
 * the model's outputs with). */
stk_status run_checkpoint_metadata(stk_run *r, const stk_meta *m)
{
    snprintf(r->meta_text[0], sizeof r->meta_text[0], "%d", r->data_world);
    snprintf(r->meta_text[1], sizeof r->meta_text[1], "%" PRId64, r->a.batch);
    const char *keys[] = {"transform", "val_transform", "data", "ranks", "batch_per_rank"};
    const char *vals[] = {r->transform, r->val_transform, r->a.data, r->meta_text[0],
                          r->meta_text[1]};
    memcpy(r->meta_keys, keys, sizeof keys);
    memcpy(r->meta_values, vals, sizeof vals);
    r->n_meta = 5;
    /* the settings --resume must match (STK_SET_RESUME in train's table),
     * under their flags' names, but those the trainer's position records */
    int k = 0;
    for (const stk_flag *f = stk_run_flags; f->kind != STK_FLAG_KIND_END; f++)
        if (f->kind != STK_FLAG_KIND_SECTION && (f->set & STK_SET_RESUME) &&
            !(f->set & STK_SET_POSITION) &&
            k < (int)(sizeof r->meta_setting / sizeof r->meta_setting[0]) &&
            stk_flag_value_text(f, &r->a, r->meta_setting[k], sizeof r->meta_setting[k])) {
            r->meta_keys[r->n_meta] = f->name;
            r->meta_values[r->n_meta++] = r->meta_setting[k++];
        }
    /* what --data holds, so that --resume knows it reads the same records in
     * the same order (not the path: a copy elsewhere is the same data) */
    snprintf(r->meta_text[3], sizeof r->meta_text[3], "%016" PRIx64, r->data_fingerprint);
    r->meta_keys[r->n_meta] = "data_fingerprint";
    r->meta_values[r->n_meta++] = r->meta_text[3];
    if (r->a.order == STK_ORDER_BLOCK) { /* the blocks in use: the order follows them */
        block_params_text(r, r->meta_text[2], sizeof r->meta_text[2]);
        r->meta_keys[r->n_meta] = "block";
        r->meta_values[r->n_meta++] = r->meta_text[2];
    }
    if (m->num_classes && m->class_names) {
        if (!(r->class_names = stk_json_string_array(m->class_names, (int)m->num_classes)) ||
            !(r->class_list = calloc(m->num_classes + 1, sizeof *r->class_list)))
            return stk_error(STK_ERR_NOMEM, "out of memory");
        for (uint32_t c = 0; c < m->num_classes; c++)
            if (!(r->class_list[c] = strdup(m->class_names[c])))
                return stk_error(STK_ERR_NOMEM, "out of memory");
        r->meta_keys[r->n_meta] = "class_names";
        r->meta_values[r->n_meta++] = r->class_names;
    }
    return STK_OK;
}

/* A run saved by another number of ranks or another batch continues here
 * (train/position.h). (Checkpoints from before the "ranks" key: one rank,
 * this batch.) */
static stk_status continue_on_this_world(stk_run *r)
{
    stk_safetensors *f;
    STK_TRY(stk_safetensors_read(r->path_last, &f));
    int64_t ranks = 1, batch = r->a.batch;
    stk_status st = STK_OK;
    if (stk_safetensors_meta(f, "ranks"))
        st = stk_safetensors_meta_int(f, "ranks", 1, 1 << 20, &ranks);
    if (st == STK_OK && stk_safetensors_meta(f, "batch_per_rank"))
        st = stk_safetensors_meta_int(f, "batch_per_rank", 1, 1 << 20, &batch);
    stk_safetensors_free(f);
    STK_TRY(st);
    stk_train_position *pos = stk_trainer_position(r->trainer);
    bool rescaled;
    STK_TRY(stk_train_position_rescale(pos, r->path_last, ranks, batch, r->data_world, r->a.batch,
                                       (int64_t)stk_loader_batches(r->loader), &rescaled));
    if (!rescaled || r->rank || !r->hooks.notice) return STK_OK;
    char line[320];
    snprintf(line, sizeof line,
             "resume: the run was saved by %" PRId64 " rank%s x batch %" PRId64 "; epoch %" PRId64
             " starts from its beginning on %d x %" PRId64 " (scheduler at step %" PRId64 ")",
             ranks, ranks == 1 ? "" : "s", batch, pos->epoch + 1, r->data_world, r->a.batch,
             pos->step);
    r->hooks.notice(r->hooks.ctx, line);
    if (ranks * batch != r->data_world * r->a.batch) {
        snprintf(line, sizeof line,
                 "resume: the global batch changes from %" PRId64 " to %" PRId64
                 ": the run goes on with other steps than the saved one would have taken",
                 ranks * batch, r->data_world * r->a.batch);
        r->hooks.notice(r->hooks.ctx, line);
    }
    return STK_OK;
}

/* A run goes on with the settings it was saved with (STK_SET_RESUME in
 * train's table: the seed, the read order; a checkpoint from before a key
 * is not checked on it: from before "order" it was random), on the same
 * records (from before the data's fingerprint: not checked). */
static stk_status same_settings(const stk_run *r)
{
    stk_safetensors *f;
    STK_TRY(stk_safetensors_read(r->path_last, &f));
    char shown[64], now[512];
    stk_status st = STK_OK;
    for (const stk_flag *fl = stk_run_flags; fl->kind != STK_FLAG_KIND_END && st == STK_OK; fl++) {
        if (fl->kind == STK_FLAG_KIND_SECTION || !(fl->set & STK_SET_RESUME)) continue;
        const char *saved = stk_safetensors_meta(f, fl->name);
        if (!stk_flag_value_text(fl, &r->a, now, sizeof now)) now[0] = '\0';
        if (saved && strcmp(saved, now))
            st = stk_error(STK_ERR_INVALID_ARG, "--resume: %s was trained with --%s %s, not %s",
                           r->path_last, fl->name, stk_printable(saved, shown, sizeof shown), now);
    }
    const char *fp = stk_safetensors_meta(f, "data_fingerprint"),
               *data = stk_safetensors_meta(f, "data");
    char shown_data[256];
    if (st == STK_OK && fp && strcmp(fp, r->meta_text[3]))
        st = stk_error(STK_ERR_INVALID_ARG,
                       "--resume: %s was trained on other records than --data %s holds (it was "
                       "--data %s): other files, shards in another order, or a file changed "
                       "since; give the run's data",
                       r->path_last, r->a.data,
                       data ? stk_printable(data, shown_data, sizeof shown_data) : "?");
    const char *blocks = stk_safetensors_meta(f, "block");
    block_params_text(r, now, sizeof now);
    int mib, window;
    if (st == STK_OK && r->a.order == STK_ORDER_BLOCK && blocks && strcmp(blocks, now)) {
        if (sscanf(blocks, "%dx%d", &mib, &window) == 2)
            st = stk_error(STK_ERR_INVALID_ARG,
                           "--resume: %s was trained in blocks of %d MiB, %d in a window; this "
                           "run reads blocks of %s (MiB x window): pass --block-mib %d "
                           "--block-window %d (and the memory they need)",
                           r->path_last, mib, window, now, mib, window);
        else
            st = stk_error(STK_ERR_INVALID_ARG, "--resume: %s: block \"%s\" is not MIBxWINDOW",
                           r->path_last, stk_printable(blocks, shown, sizeof shown));
    }
    stk_safetensors_free(f);
    return st;
}

stk_status run_resume_from(stk_run *r)
{
    stk_train_position p;
    stk_status st = stk_train_position_read(r->path_last, &p);
    if (st == STK_ERR_IO)
        return stk_error_prefix(st, "--resume: no checkpoint to continue from in %s", r->a.out);
    if (st != STK_OK) return st;
    STK_TRY(same_settings(r));
    STK_TRY(stk_trainer_resume(r->trainer, r->path_last));
    return continue_on_this_world(r);
}
