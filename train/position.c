/* The training position and its checkpoint metadata (position.h). */
#include "train/position.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const keys_[STK_TRAIN_POSITION_KEYS] = {
    "epoch",   "step",       "seed",       "loader_position",
    "monitor", "best_value", "best_epoch", "early_stop_wait"};

stk_train_position stk_train_position_start(int64_t seed)
{
    return (stk_train_position){
        .seed = seed, .best_value = NAN, .loader = {.seed = (uint64_t)seed}};
}

void stk_train_position_to_meta(const stk_train_position *p, const char **keys, const char **values,
                                stk_train_position_text *text)
{
    char(*v)[96] = text->value;
    snprintf(v[0], sizeof v[0], "%" PRId64, p->epoch);
    snprintf(v[1], sizeof v[1], "%" PRId64, p->step);
    snprintf(v[2], sizeof v[2], "%" PRId64, p->seed);
    snprintf(v[3], sizeof v[3], "seed=%" PRIu64 ",epoch=%" PRIu64 ",cursor=%" PRIu64,
             p->loader.seed, p->loader.epoch, p->loader.cursor);
    snprintf(v[4], sizeof v[4], "%s", p->monitor);
    if (isfinite(p->best_value))
        snprintf(v[5], sizeof v[5], "%.17g", p->best_value); /* exact: resumed comparisons */
    else
        snprintf(v[5], sizeof v[5], "none");
    snprintf(v[6], sizeof v[6], "%" PRId64, p->best_epoch);
    snprintf(v[7], sizeof v[7], "%" PRId64, p->wait);
    for (int i = 0; i < STK_TRAIN_POSITION_KEYS; i++) {
        keys[i] = keys_[i];
        values[i] = v[i];
    }
}

static stk_status damaged(const stk_safetensors *f, const char *key, const char *v)
{
    return stk_error(STK_ERR_CORRUPT, "%s: damaged checkpoint metadata: \"%s\" is \"%.40s\"",
                     f->path, key, v);
}

/* "seed=S,epoch=E,cursor=C", each a decimal u64, nothing else. */
static stk_status parse_loader(const stk_safetensors *f, const char *v, stk_loader_position *out)
{
    unsigned long long s, e, c;
    int used = -1;
    if (sscanf(v, "seed=%llu,epoch=%llu,cursor=%llu%n", &s, &e, &c, &used) != 3 || used < 0 ||
        v[used] || v[0] == '-')
        return damaged(f, "loader_position", v);
    *out = (stk_loader_position){.seed = s, .epoch = e, .cursor = c};
    return STK_OK;
}

/* The best epoch and the patience counter ("monitor" .. "early_stop_wait"),
 * or the older "best_val_top1". */
static stk_status best_state(const stk_safetensors *f, stk_train_position *p)
{
    const char *mon = stk_safetensors_meta(f, "monitor"),
               *b = stk_safetensors_meta(f, "best_value");
    const char *key = b ? "best_value" : "best_val_top1";
    if (!b) b = stk_safetensors_meta(f, "best_val_top1");
    if (mon && strlen(mon) >= sizeof p->monitor) return damaged(f, "monitor", mon);
    snprintf(p->monitor, sizeof p->monitor, "%s", mon ? mon : b ? "val_top1" : "");
    if (b && strcmp(b, "none")) {
        char *end;
        p->best_value = strtod(b, &end);
        if (end == b || *end || !isfinite(p->best_value) ||
            (!mon && !(p->best_value >= -1 && p->best_value <= 100))) /* a top-1 in percent */
            return damaged(f, key, b);
        if (!mon && p->best_value < 0) p->best_value = NAN; /* -1: none yet */
    }
    stk_status st;
    if (stk_safetensors_meta(f, "best_epoch") &&
        (st = stk_safetensors_meta_int(f, "best_epoch", 0, p->epoch, &p->best_epoch)) != STK_OK)
        return st;
    if (stk_safetensors_meta(f, "early_stop_wait") &&
        (st = stk_safetensors_meta_int(f, "early_stop_wait", 0, p->epoch, &p->wait)) != STK_OK)
        return st;
    return STK_OK;
}

stk_status stk_train_position_rescale(stk_train_position *p, const char *path, int64_t saved_world,
                                      int64_t saved_batch, int64_t world, int64_t batch,
                                      int64_t per_epoch, bool *rescaled)
{
    *rescaled = saved_world != world || saved_batch != batch;
    if (*rescaled) {
        p->step = p->epoch * per_epoch;
        return STK_OK;
    }
    if (p->step != p->epoch * per_epoch)
        return stk_error(STK_ERR_CORRUPT,
                         "%s: damaged checkpoint metadata: \"step\" is %" PRId64 ", but %" PRId64
                         " epochs of %" PRId64 " steps make %" PRId64
                         " (or the checkpoint is of another --data)",
                         path, p->step, p->epoch, per_epoch, p->epoch * per_epoch);
    return STK_OK;
}

stk_status stk_train_position_from_meta(const stk_safetensors *f, stk_train_position *out)
{
    stk_train_position p = stk_train_position_start(0);
    stk_status st;
    if ((st = stk_safetensors_meta_int(f, "epoch", 0, INT32_MAX, &p.epoch)) != STK_OK ||
        (st = stk_safetensors_meta_int(f, "step", 0, INT64_MAX / 2, &p.step)) != STK_OK ||
        (st = stk_safetensors_meta_int(f, "seed", INT64_MIN, INT64_MAX, &p.seed)) != STK_OK)
        return st;
    if ((st = best_state(f, &p)) != STK_OK) return st;
    const char *lp = stk_safetensors_meta(f, "loader_position");
    p.loader = (stk_loader_position){.seed = (uint64_t)p.seed, .epoch = (uint64_t)p.epoch};
    if (lp && (st = parse_loader(f, lp, &p.loader)) != STK_OK) return st;
    *out = p;
    return STK_OK;
}

stk_status stk_train_position_read(const char *path, stk_train_position *out)
{
    stk_safetensors *f;
    stk_status st = stk_safetensors_read(path, &f);
    if (st != STK_OK) return st;
    st = stk_train_position_from_meta(f, out);
    stk_safetensors_free(f);
    return st;
}
