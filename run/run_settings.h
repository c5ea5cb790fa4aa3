/* A training run's settings: one struct and one table of them
 * (run_settings.c). Each entry gives the setting's name (the CLI's flag,
 * Python's keyword with '_' for '-'), kind, range, default, help and
 * what else it takes part in (flag_table.h's stk_setting_use: the ranks'
 * agreement, tune's spaces, the checkpoint's resume checks). From the
 * table come stoke train's flags and --help, --config and --print-config,
 * Python's stoke.train(**settings), the ranks' fingerprint and the resume
 * checks (run.c), and the keys a tune space may set. Adding a setting is
 * an entry there, its field here, and the code that uses it.
 *
 *     stk_run_settings s;
 *     stk_run_settings_init(&s);                                        // the defaults
 *     stk_run_setting_set(&s, "data", "fm.stoke");                      // by name, as text
 *     stk_run_setting_set(&s, "model", "cnn");
 *     if (stk_run_settings_check(&s) != STK_OK) ...                     // across settings
 */
#pragma once

#include "common/status.h"
#include "common/trace.h"
#include "run/flag_table.h"
#include "train/device.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_run_settings {
    const char *data, *val, *model, *transform, *val_transform, *init, *out, *monitor, *norm;
    const char *trace, *trace_steps;
    bool trace_ops;
    stk_trace_options trace_opts;
    const char *freeze[32];
    int n_freeze;
    int64_t epochs, batch, workers, threads, step_epochs, seed, stop_after, dist_timeout;
    int64_t early_stop, start_from_epoch; /* early_stop -1: off */
    int64_t cache_mb, block_mib, block_window;
    int64_t micro_batches, pipeline; /* 0: off */
    int64_t image_size;              /* 0: the dataset's default transforms' size */
    const char *resume_from;         /* --resume RUNDIR or RUNDIR/last.safetensors */
    int pipeline_schedule;           /* stk_pipe_schedule */
    const char *split_after;
    double lr, min_lr, momentum, wd, warmup_epochs, smoothing, min_delta, mix_prob;
    double clip_grad_norm, clip_grad_value; /* 0: off */
    double ema;                             /* --ema-decay DECAY (0: off) */
    double drop_path;                       /* --drop-path RATE (-1: the model's default) */
    bool ema_warmup;
    bool nesterov, resume, overwrite, restore_best, json, amp, sync_bn, tensorboard, no_tensorboard,
        memory_report, per_class;
    int optimizer;      /* index in stk_run_optimizers (= stk_optim_kind) */
    int schedule;       /* index in stk_run_schedules */
    int mode;           /* stk_mode */
    int order;          /* stk_read_order */
    const char *config; /* --config FILE (the CLI reads it into `owned`) */
    bool print_config;  /* --print-config */
    stk_device_spec device;
    /* Owned by the settings (stk_run_settings_free): a default --out, and the
     * strings the text settings point into (a front end's copies). */
    char *out_buf;
    char **owned;
    int n_owned;
} stk_run_settings;

/* The table (STK_FLAG_END-terminated): sections, then the settings. */
extern const stk_flag stk_run_flags[];
/* The choices' names, in the order of their enums. */
extern const char *const stk_run_optimizers[];
extern const char *const stk_run_schedules[];
extern const char *const stk_run_pipeline_schedules[];

/* Every setting at its default: the table's, and those set in code (lr by
 * optimizer, the model's drop-path: resolved by the check; workers and
 * threads: the cores). Owns nothing yet. Fails only on a default of the
 * table's that does not parse (a bug). */
stk_status stk_run_settings_init(stk_run_settings *s);
/* The table's entry of setting `name` ('-' or '_' between words), or NULL. */
const stk_flag *stk_run_setting_find(const char *name);
/* Setting `name` ('-' or '_' between words) from its text, range-checked;
 * a switch is set by "yes"/"true"/"1" and cleared by "no"/"false"/"0"; a
 * list's value is added; text is copied (into `owned`). INVALID_ARG names
 * the setting and the reason (an unknown name gets a did-you-mean). */
stk_status stk_run_setting_set(stk_run_settings *s, const char *name, const char *value);
/* The settings that need each other: --data and --model given (a model
 * unknown gets a did-you-mean), the pairs that exclude each other, the
 * ones that need another, the defaults that depend on others (--lr by
 * optimizer, --monitor by --val), and a default --out (runs/MODEL-N, made
 * unless print_config). INVALID_ARG with the message a user reads. */
stk_status stk_run_settings_check(stk_run_settings *s);
/* Settings from stoke train's flags (argv[0] the command's name; no
 * --config): the defaults, the flags, the checks. TEXT settings point into
 * argv. On failure (INVALID_ARG, the message a user reads) nothing is left
 * to free. */
stk_status stk_run_settings_from_args(stk_run_settings *s, int argc, char **argv);
/* Free what the settings own. */
void stk_run_settings_free(stk_run_settings *s);

/* --model names an ONNX file (it ends in .onnx) rather than a built-in. */
bool stk_run_model_is_onnx(const char *model);
/* No --out: runs/MODEL-N, a fresh N (or the latest one with --resume). */
stk_status stk_run_default_out(stk_run_settings *s);

#ifdef __cplusplus
}
#endif
