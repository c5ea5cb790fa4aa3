/* The HParams plugin's summaries (tb_hparams.h). */
#include "runlog/tb_hparams.h"

#include "common/pb_wire.h"

#include <stdlib.h>

enum {
    DATA_EXPERIMENT = 2,
    DATA_SESSION_START = 3,
    DATA_SESSION_END = 4,
    EXPERIMENT_HPARAM_INFOS = 4,
    EXPERIMENT_METRIC_INFOS = 5,
    HPARAM_NAME = 1,
    HPARAM_TYPE = 4,
    TYPE_STRING = 1,
    TYPE_FLOAT64 = 3,
    METRIC_NAME = 1,
    METRIC_NAME_TAG = 2,
    START_HPARAMS = 1,
    START_GROUP_NAME = 4,
    START_TIME = 5,
    MAP_KEY = 1,
    MAP_VALUE = 2,
    VALUE_NUMBER = 2,
    VALUE_STRING = 3,
    END_STATUS = 1,
    END_TIME = 2,
};

/* The message built in b, written under tag. */
static stk_status emit(stk_tfevents *w, stk_pb *b, const char *tag)
{
    stk_status st = stk_pb_failed(b) ? stk_error(STK_ERR_NOMEM, "out of memory")
                                     : stk_tfevents_plugin(w, tag, 0, "hparams", b->data, b->len);
    stk_pb_deinit(b);
    return st;
}

stk_status stk_tb_hparams_experiment(stk_tfevents *w, const stk_tb_hparam *hp, int n,
                                     const char *const *metric_tags, int n_metrics)
{
    stk_pb b;
    stk_pb_init(&b);
    size_t ex = stk_pb_begin(&b, DATA_EXPERIMENT);
    for (int i = 0; i < n; i++) {
        size_t info = stk_pb_begin(&b, EXPERIMENT_HPARAM_INFOS);
        stk_pb_string(&b, HPARAM_NAME, hp[i].name);
        stk_pb_int(&b, HPARAM_TYPE, hp[i].numeric ? TYPE_FLOAT64 : TYPE_STRING);
        stk_pb_end(&b, info);
    }
    for (int i = 0; i < n_metrics; i++) {
        size_t info = stk_pb_begin(&b, EXPERIMENT_METRIC_INFOS);
        size_t name = stk_pb_begin(&b, METRIC_NAME);
        stk_pb_string(&b, METRIC_NAME_TAG, metric_tags[i]);
        stk_pb_end(&b, name);
        stk_pb_end(&b, info);
    }
    stk_pb_end(&b, ex);
    return emit(w, &b, "_hparams_/experiment");
}

stk_status stk_tb_hparams_session_start(stk_tfevents *w, const stk_tb_hparam *hp,
                                        const char *const *values, int n, const char *group,
                                        double start_secs)
{
    stk_pb b;
    stk_pb_init(&b);
    size_t start = stk_pb_begin(&b, DATA_SESSION_START);
    for (int i = 0; i < n; i++) {
        size_t entry = stk_pb_begin(&b, START_HPARAMS);
        stk_pb_string(&b, MAP_KEY, hp[i].name);
        size_t v = stk_pb_begin(&b, MAP_VALUE);
        if (hp[i].numeric)
            stk_pb_double(&b, VALUE_NUMBER, strtod(values[i], NULL));
        else
            stk_pb_string(&b, VALUE_STRING, values[i]);
        stk_pb_end(&b, v);
        stk_pb_end(&b, entry);
    }
    if (group) stk_pb_string(&b, START_GROUP_NAME, group);
    stk_pb_double(&b, START_TIME, start_secs);
    stk_pb_end(&b, start);
    return emit(w, &b, "_hparams_/session_start_info");
}

stk_status stk_tb_hparams_session_end(stk_tfevents *w, stk_tb_session_status status,
                                      double end_secs)
{
    stk_pb b;
    stk_pb_init(&b);
    size_t end = stk_pb_begin(&b, DATA_SESSION_END);
    stk_pb_int(&b, END_STATUS, status);
    stk_pb_double(&b, END_TIME, end_secs);
    stk_pb_end(&b, end);
    return emit(w, &b, "_hparams_/session_end_info");
}
