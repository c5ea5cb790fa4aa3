/* The training position and its checkpoint metadata (position.h). */
#include "train/position.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const keys_[STK_TRAIN_POSITION_KEYS] = {"epoch", "step", "seed", "best_val_top1",
                                                           "loader_position"};

stk_train_position stk_train_position_start(int64_t seed)
{
    return (stk_train_position){
        .seed = seed, .best_metric = -1, .loader = {.seed = (uint64_t)seed}};
}

void stk_train_position_to_meta(const stk_train_position *p, const char **keys, const char **values,
                                stk_train_position_text *text)
{
    char(*v)[96] = text->value;
    snprintf(v[0], sizeof v[0], "%" PRId64, p->epoch);
    snprintf(v[1], sizeof v[1], "%" PRId64, p->step);
    snprintf(v[2], sizeof v[2], "%" PRId64, p->seed);
    snprintf(v[3], sizeof v[3], "%.6f", p->best_metric);
    snprintf(v[4], sizeof v[4], "seed=%" PRIu64 ",epoch=%" PRIu64 ",cursor=%" PRIu64,
             p->loader.seed, p->loader.epoch, p->loader.cursor);
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

stk_status stk_train_position_from_meta(const stk_safetensors *f, stk_train_position *out)
{
    stk_train_position p = stk_train_position_start(0);
    stk_status st;
    if ((st = stk_safetensors_meta_int(f, "epoch", 0, INT32_MAX, &p.epoch)) != STK_OK ||
        (st = stk_safetensors_meta_int(f, "step", 0, INT64_MAX / 2, &p.step)) != STK_OK ||
        (st = stk_safetensors_meta_int(f, "seed", INT64_MIN, INT64_MAX, &p.seed)) != STK_OK)
        return st;
    const char *b = stk_safetensors_meta(f, "best_val_top1");
    if (b) {
        char *end;
        p.best_metric = strtod(b, &end);
        if (end == b || *end || !(p.best_metric >= -1 && p.best_metric <= 100))
            return damaged(f, "best_val_top1", b);
    }
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
