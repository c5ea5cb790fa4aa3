/* A whole training run from C as `stoke train` runs it (run/run.h): the
 * settings by name, the run folder with its lock and checkpoints, --resume,
 * and under mpirun the ranks' agreement and gradient averaging; the program
 * hears each epoch through a hook and stops the run on Ctrl-C.
 *
 *     train_run TRAIN.stoke MODEL [NAME=VALUE ...]     e.g. epochs=3 out=runs/a lr=0.02
 *
 * Build: part of the CMake build (build/train_run); link stoke_run. */
#include "run/run.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { (void)sig, interrupted = 1; }

static stk_status print_epoch(void *ctx, const stk_run_epoch *e, bool *stop)
{
    (void)ctx, (void)stop;
    printf("epoch %lld: train loss %.4f, lr %.5f%s\n", (long long)e->fit->epoch + 1,
           e->fit->train->loss, e->lr, e->fit->improved ? " (best)" : "");
    return STK_OK;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: train_run TRAIN.stoke MODEL [NAME=VALUE ...]\n");
        return 2;
    }
    stk_run_settings s;
    stk_status st = stk_run_settings_init(&s);
    if (st == STK_OK) st = stk_run_setting_set(&s, "data", argv[1]);
    if (st == STK_OK) st = stk_run_setting_set(&s, "model", argv[2]);
    for (int i = 3; i < argc && st == STK_OK; i++) { /* name=value: any setting of stoke train */
        char name[64];
        const char *eq = strchr(argv[i], '=');
        if (!eq || eq - argv[i] >= (int)sizeof name)
            st = stk_error(STK_ERR_INVALID_ARG, "'%s': expected NAME=VALUE", argv[i]);
        else
            snprintf(name, sizeof name, "%.*s", (int)(eq - argv[i]), argv[i]);
        if (st == STK_OK) st = stk_run_setting_set(&s, name, eq + 1);
    }
    if (st == STK_OK) st = stk_run_settings_check(&s);
    if (st != STK_OK) {
        fprintf(stderr, "train_run: %s\n", stk_last_error());
        stk_run_settings_free(&s);
        return 2;
    }
    signal(SIGINT, on_signal);
    stk_run r;
    stk_run_init(&r, &s, &(stk_run_hooks){.on_epoch = print_epoch, .cancel = &interrupted});
    stk_run_result res;
    st = stk_run_start(&r);
    if (st == STK_OK) st = stk_run_fit(&r, &res);
    if (st == STK_OK)
        printf("%lld epochs, best epoch %lld, stopped: %s; %.0f images/s; checkpoints in %s\n",
               (long long)res.epochs, (long long)res.fit.best_epoch,
               stk_fit_stop_name(res.fit.reason), res.images_per_sec, r.a.out);
    else
        fprintf(stderr, "train_run: %s\n", stk_last_error());
    if (st != STK_OK) stk_run_stop_ranks(&r); /* under mpirun: the other ranks end too */
    stk_run_close(&r);
    return st == STK_OK ? 0 : interrupted ? 130 : 1;
}
