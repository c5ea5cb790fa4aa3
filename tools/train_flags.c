/* stoke train's command line (train_flags.c): the run's settings' table
 * (run/run_settings.h) with the command's usage, about and notes, read
 * from the flags and --config FILE. */
#include "tools/train_flags.h"

#include "tools/cli.h"
#include "tools/config_file.h"

#include <string.h>

const stk_cli train_settings_cli = {
    .cmd = "train",
    .usage = "stoke train --data TRAIN.stoke --model MODEL [OPTIONS]",
    .about = "Train a model: the loader reads, decodes and augments batches, the\n"
             "host-to-device stage hands them to the engine, each step runs forward,\n"
             "cross-entropy, backward and the optimizer (train/trainer.h). After each\n"
             "epoch the model is evaluated on --val (eval mode, no augmentation) and\n"
             "checkpointed (train/fit.h: the whole run is one library call).\n",
    .flags = stk_run_flags,
    .notes = "Each epoch prints one line (loss, accuracy, validation, images/s, stall %:\n"
             "the share of the epoch the step waited for data; memory). metrics.csv columns:\n"
             "epoch, step, lr, train_loss, train_acc, val_loss, val_top1, val_top5,\n"
             "images_per_sec, stall_pct, seconds, mem_allocated_mb, mem_reserved_mb,\n"
             "mem_peak_mb (the training device's caching allocator: bytes in tensors, held\n"
             "by the cache, the epoch's peak), peak_rss_mb (the process). steps.csv: step,\n"
             "epoch, loss, lr (rank 0's loss under a launcher). `stoke plot RUNDIR` draws\n"
             "them. A NaN or infinite loss, or a parameter that is no longer\n"
             "finite after a step, stops the run at that step; the last\n"
             "good checkpoint stays. Ctrl-C stops after the current step, keeping the last\n"
             "completed epoch's checkpoint. The last line (and --json) gives the stopped and\n"
             "best epochs (counted as metrics.csv's), the best --monitor value and why the run\n"
             "stopped (finished, early_stop, stop_after).\n"
             "\n"
             "Data-parallel: under a launcher (mpirun -np N stoke train ..., srun) every\n"
             "rank trains on its shard of each epoch and the gradients are averaged\n"
             "(MPI) before each step; --batch is per rank, the global batch is N times it;\n"
             "rank 0 prints, evaluates and writes RUNDIR; images/s are the job's. Every\n"
             "rank must be given the same flags and data: before the first step the ranks\n"
             "compare the model, its trainable parameters, every flag that changes what\n"
             "is computed or when ranks synchronise, and a fingerprint of --data's\n"
             "content; each rank names the first difference and the job ends. With\n"
             "--device cuda each rank takes its local GPU and gradients are averaged by\n"
             "NCCL on the GPUs (when the build found it). A rank that fails stops the job.\n"
             "--resume works on another number of ranks: the next epoch starts from its\n"
             "beginning (exact for the same global batch, up to rounding).\n",
    .max_args = 0};

/* A key --config may set: a flag of stoke train's but --config itself. */
static bool config_key(const char *key)
{
    return strcmp(key, "config") && stk_cli_find(&train_settings_cli, key);
}

static int parse_flags(int argc, char **argv, stk_run_settings *a)
{
    if (stk_run_settings_init(a) != STK_OK) return stk_cli_usage("train", "%s", stk_last_error());
    char **pos;
    int n_pos;
    int rc =
        stk_config_expand("train", "stoke train", argc, argv, config_key, &a->owned, &a->n_owned);
    if (rc >= 0) return rc;
    if (a->owned) argc = a->n_owned, argv = a->owned;
    rc = stk_cli_parse(&train_settings_cli, a, argc, argv, &pos, &n_pos);
    if (rc >= 0) return rc;
    if (stk_run_settings_check(a) != STK_OK) return stk_cli_usage("train", "%s", stk_last_error());
    return -1;
}

int train_parse_flags(int argc, char **argv, stk_run_settings *a)
{
    int rc = parse_flags(argc, argv, a);
    if (rc >= 0) stk_run_settings_free(a); /* nothing of the run is left to free */
    return rc;
}

const stk_cli *const train_cli = &train_settings_cli;
