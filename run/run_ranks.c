/* The ranks' agreement and data-parallel hooks (run_ranks_impl.h). */
#include "run/run_ranks_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A setting's value as the ranks compare it: the table's text (train's
 * flags, STK_SET_RANKS), but for what is compared resolved: the transforms
 * in use (a default is the data's), whether there is a --val (rank 0 alone
 * reads it), --data's content (a copy elsewhere is the same data) and the
 * device's kind (each rank takes its local GPU). */
static const char *rank_value(const stk_run *r, const stk_flag *f, const char **label, char *buf,
                              size_t size)
{
    if (!strcmp(f->name, "data")) {
        *label = "--data (content fingerprint)";
        snprintf(buf, size, "%016" PRIx64, r->data_fingerprint);
        return buf;
    }
    if (!strcmp(f->name, "transform")) return r->transform;
    if (!strcmp(f->name, "val-transform")) return r->val_transform;
    if (!strcmp(f->name, "val")) return r->a.val ? "given" : "none";
    if (!strcmp(f->name, "device")) return stk_device_name(r->a.device.kind);
    return stk_flag_value_text(f, &r->a, buf, size) ? buf : "(none)";
}

/* Data-parallel: every rank must compute the same thing, so before the
 * first step the ranks compare every setting that changes what is computed
 * or when they synchronise (STK_SET_RANKS in train's table), the image
 * size and the steps of an epoch (ddp.h names the first difference on
 * every rank). */
stk_status run_attach_ranks(stk_run *r, int64_t per_epoch)
{
    enum { MAX_ITEMS = 64 };
    const stk_run_settings *a = &r->a;
    stk_ddp_check_item items[MAX_ITEMS];
    char(*text)[512] = calloc(MAX_ITEMS, sizeof *text);
    char(*labels)[72] = calloc(MAX_ITEMS, sizeof *labels);
    if (!text || !labels) {
        free(text);
        free(labels);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    int n = 0;
    for (const stk_flag *f = stk_run_flags; f->kind != STK_FLAG_KIND_END && n < MAX_ITEMS - 2;
         f++) {
        if (f->kind == STK_FLAG_KIND_SECTION || !(f->set & STK_SET_RANKS)) continue;
        snprintf(labels[n], sizeof labels[n], "--%s", f->name);
        const char *label = labels[n];
        items[n].value = rank_value(r, f, &label, text[n], sizeof text[n]);
        items[n++].name = label;
    }
    snprintf(text[n], sizeof text[n], "%d", r->size);
    items[n] = (stk_ddp_check_item){"image size", text[n]};
    n++;
    snprintf(text[n], sizeof text[n], "%" PRId64, per_epoch);
    items[n] = (stk_ddp_check_item){"steps per epoch", text[n]};
    n++;
    stk_status st = stk_ddp_attach(r->trainer, r->model, r->comm, n, items, &r->ddp);
    free(text);
    free(labels);
    /* a difference is found by every rank alike: each says so and leaves */
    r->ranks_agree_on_error = st == STK_ERR_INVALID_ARG;
    STK_TRY(st);
    stk_ddp_set_timeout(r->ddp, (double)a->dist_timeout);
    if (a->sync_bn) stk_ddp_sync_batch_norm(r->ddp);
    if (r->pipe_ranks) {
        stk_ddp_set_ranks_per_replica(r->ddp, (int)a->pipeline);
        STK_TRY(stk_pipe_ranks_average_buffers(r->pipe_ranks, r->trainer, r->model, r->ddp));
    }
    return STK_OK;
}
