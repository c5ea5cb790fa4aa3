/* TensorBoard's HParams dashboard for a hyperparameter search (stoke tune):
 * an experiment summary once, in the sweep's folder (the hyperparameters and
 * the metrics to show), and per trial, in its run folder, a session-start
 * summary with its values and a session-end summary with how it ended.
 *
 *     stk_tb_hparam hp[] = {{"lr", true}, {"optimizer", false}};
 *     STK_TRY(stk_tb_hparams_experiment(root, hp, 2, (const char *[]){"epoch/val_top1"}, 1));
 *     const char *values[] = {"0.01", "sgd"};
 *     STK_TRY(stk_tb_hparams_session_start(trial, hp, values, 2, "0003", start_secs));
 *     ...
 *     STK_TRY(stk_tb_hparams_session_end(trial, STK_TB_SESSION_SUCCESS, end_secs));
 *
 * The encoding (tensorboard/plugins/hparams: plugin_data.proto, api.proto):
 * HParamsPluginData{version=1, experiment=2, session_start_info=3,
 * session_end_info=4}; Experiment{hparam_infos=4{name=1, type=4},
 * metric_infos=5{name=1{group=1, tag=2}}}; SessionStartInfo{hparams=1 (map:
 * key=1, value=2 google.protobuf.Value{number_value=2, string_value=3}),
 * group_name=4, start_time_secs=5}; SessionEndInfo{status=1,
 * end_time_secs=2}; tags "_hparams_/experiment",
 * "_hparams_/session_start_info", "_hparams_/session_end_info"; plugin
 * "hparams". A numeric hyperparameter is written as a number, others as text.
 */
#pragma once

#include "runlog/tfevents.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_tb_hparam {
    const char *name;
    bool numeric;
} stk_tb_hparam;

typedef enum stk_tb_session_status {
    STK_TB_SESSION_UNKNOWN = 0,
    STK_TB_SESSION_SUCCESS = 1,
    STK_TB_SESSION_FAILURE = 2,
    STK_TB_SESSION_RUNNING = 3,
} stk_tb_session_status;

/* Errors (all three): those of the event writer. */
stk_status stk_tb_hparams_experiment(stk_tfevents *w, const stk_tb_hparam *hp, int n,
                                     const char *const *metric_tags, int n_metrics);
stk_status stk_tb_hparams_session_start(stk_tfevents *w, const stk_tb_hparam *hp,
                                        const char *const *values, int n, const char *group,
                                        double start_secs);
stk_status stk_tb_hparams_session_end(stk_tfevents *w, stk_tb_session_status status,
                                      double end_secs);

#ifdef __cplusplus
}
#endif
