/* `stoke tune`'s trials as `stoke train` flags (tune_sweep.h): drawing
 * them, checking them with train's own parser, the reproducing command. */
#include "tune/sweep.h"

#include "common/text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool push_arg(stk_tune_trial *t, int *cap, const char *s)
{
    if (t->argc + 1 >= *cap) {
        int c = *cap ? 2 * *cap : 32;
        char **a = realloc(t->argv, (size_t)c * sizeof *a);
        if (!a) return false;
        t->argv = a;
        *cap = c;
    }
    if (!(t->argv[t->argc] = strdup(s))) return false;
    t->argv[++t->argc] = NULL;
    return true;
}

/* s quoted for a POSIX shell when it needs to be */
static char *shell_word(const char *s)
{
    if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                        "-_./:=,+%@") == strlen(s))
        return strdup(s);
    size_t n = 3;
    for (const char *p = s; *p; p++) n += *p == '\'' ? 4 : 1;
    char *q = malloc(n), *o = q;
    if (!q) return NULL;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            memcpy(o, "'\\''", 4), o += 4;
        else
            *o++ = *p;
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

/* "stoke train ..." with every flag but --out (a fresh run folder) */
static char *command_of(const stk_tune_trial *t)
{
    char *cmd = strdup("stoke train");
    for (int i = 1; cmd && i < t->argc; i++) {
        if (!strcmp(t->argv[i], "--out")) {
            i++;
            continue;
        }
        char *w = shell_word(t->argv[i]);
        char *next = w ? stk_text_printf("%s %s", cmd, w) : NULL;
        free(w);
        free(cmd);
        cmd = next;
    }
    return cmd;
}

static stk_status trial_flags(const stk_tune_config *c, stk_tune_trial *t)
{
    int cap = 0;
    char num[3][32];
    snprintf(num[0], sizeof num[0], "%" PRId64, c->epochs);
    snprintf(num[1], sizeof num[1], "%" PRId64, c->seed);
    if (!push_arg(t, &cap, "train")) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->train_argc; i++)
        if (!push_arg(t, &cap, c->train_argv[i])) return stk_error(STK_ERR_NOMEM, "out of memory");
    const char *fixed[] = {"--epochs", num[0], "--seed", num[1], "--out", t->out};
    for (int i = 0; i < 6; i++)
        if (!push_arg(t, &cap, fixed[i])) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int k = 0; k < t->params.n; k++) {
        const stk_flag *f = stk_run_setting_find(t->params.key[k]);
        char flag[80];
        snprintf(flag, sizeof flag, "--%s", t->params.key[k]);
        if (f && f->kind == STK_FLAG_KIND_BOOL) { /* true: the flag; false: nothing */
            if (!strcmp(t->params.value[k], "true") && !push_arg(t, &cap, flag))
                return stk_error(STK_ERR_NOMEM, "out of memory");
            continue;
        }
        if (!push_arg(t, &cap, flag) || !push_arg(t, &cap, t->params.value[k]))
            return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    if (!(t->command = command_of(t))) return stk_error(STK_ERR_NOMEM, "out of memory");
    return STK_OK;
}

stk_status stk_tune_prepare(const stk_tune_config *c, stk_tune_trial *trials, int64_t n)
{
    /* DIR/trials/NNNN/pbt.safetensors and its kin must fit the sweep's
     * path buffers (stk_tune_trial.out, 1100-byte paths): refused, not cut. */
    if (strlen(c->out) > TUNE_OUT_MAX)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--out is %zu bytes long: a sweep's folder name may be at most %d",
                         strlen(c->out), TUNE_OUT_MAX);
    for (int64_t i = 0; i < n; i++) {
        stk_tune_trial *t = &trials[i];
        t->id = i;
        t->best_value = NAN;
        stk_space_draw(&c->space, (uint64_t)c->seed, i, &t->params);
        snprintf(t->out, sizeof t->out, "%s/trials/%04" PRId64, c->out, i);
        STK_TRY(trial_flags(c, t));
        /* train's own checks on this trial's values, before anything runs */
        stk_run_settings a;
        if (stk_run_settings_from_args(&a, t->argc, t->argv) != STK_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", stk_last_error());
            char vals[512] = "";
            for (int k = 0; k < t->params.n; k++) {
                size_t used = strlen(vals);
                snprintf(vals + used, sizeof vals - used, "%s%s=%s", k ? " " : "", t->params.key[k],
                         t->params.value[k]);
            }
            return stk_error(STK_ERR_INVALID_ARG,
                             "trial %" PRId64 " (%s): stoke train refuses these values (%s); "
                             "narrow --space",
                             i, vals, why);
        }
        stk_run_settings_free(&a);
    }
    return STK_OK;
}

void stk_tune_trials_free(stk_tune_trial *trials, int64_t n)
{
    for (int64_t i = 0; trials && i < n; i++) {
        for (int k = 0; k < trials[i].argc; k++) free(trials[i].argv[k]);
        free(trials[i].argv);
        free(trials[i].command);
    }
    free(trials);
}
