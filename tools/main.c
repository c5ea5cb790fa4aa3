/* stoke: pack, inspect, verify and benchmark datasets; train and evaluate models. */
#include "common/memory_budget.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <stdio.h>
#include <signal.h>
#include <string.h>

static const stk_command *const commands[] = {
    &stk_cmd_pack,   &stk_cmd_info,    &stk_cmd_verify,  &stk_cmd_index,  &stk_cmd_peek,
    &stk_cmd_bench,  &stk_cmd_train,   &stk_cmd_lr_find, &stk_cmd_tune,   &stk_cmd_eval,
    &stk_cmd_export, &stk_cmd_predict, &stk_cmd_plot,    &stk_cmd_devices};
enum { N_COMMANDS = sizeof commands / sizeof *commands };

static void print_overview(FILE *f)
{
    fprintf(f,
            "stoke %s: a training framework whose data pipeline keeps the accelerator fed\n\n"
            "usage: stoke COMMAND [ARGS]\n\ncommands:\n",
            STOKE_VERSION);
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "  %-8s %s\n", "help",
            "this list; `stoke help COMMAND` for one command, `stoke help transforms`\n"
            "           for the transform grammar (--transform)");
    fprintf(
        f,
        "\noptions:\n  --version      print the version\n  -h, --help     this text\n"
        "\nevery command also takes:\n"
        "  -q, --quiet    no progress bars or notes: results, warnings and errors only\n"
        "  -v, --verbose  debug detail on stderr\n"
        "\nenvironment:\n  STOKE_LOG=debug|info|warn|error   how much to log (default info)\n"
        "  STOKE_PROGRESS=tty|plain|off      progress bar style (default: tty when stderr is one)\n"
        "\nexit status: 0 ok, 1 bad input or runtime error, 2 bad usage, 130 interrupted\n"
        "(Ctrl-C: what was written so far is kept; --resume continues a run or a sweep)\n");
}

static const stk_command *find(const char *name)
{
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0) return commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    /* A file-size limit (ulimit -f) makes write() fail with EFBIG instead of
     * killing the process: the writer then removes its temporary and says
     * which file could not be written (as Python does). */
    signal(SIGXFSZ, SIG_IGN);
    /* `stoke train ... > run.log` (or | tee) shows each epoch's line as it
     * ends, as on a terminal, not all of them when the run is over. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        print_overview(stderr);
        return STK_EXIT_USAGE;
    }
    if (stk_memory_limit_env_check() != STK_OK) {
        fprintf(stderr, "stoke: %s\n", stk_last_error());
        return STK_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("stoke %s\n", STOKE_VERSION);
        return STK_EXIT_OK;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
        (strcmp(cmd, "help") == 0 && argc == 2)) {
        print_overview(stdout);
        return STK_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0 && strcmp(argv[2], "transforms") == 0) {
        fputs(stk_transform_help, stdout);
        return STK_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        const stk_command *c = find(argv[2]);
        if (!c) {
            fprintf(stderr, "stoke: no command '%s'; try 'stoke help'\n", argv[2]);
            return STK_EXIT_USAGE;
        }
        stk_cli_help(c->cli, stdout);
        return STK_EXIT_OK;
    }
    const stk_command *c = find(cmd);
    if (!c) {
        fprintf(stderr, "stoke: no command '%s'; try 'stoke help'\n", cmd);
        return STK_EXIT_USAGE;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            stk_cli_help(c->cli, stdout);
            return STK_EXIT_OK;
        }
    }
    return c->run(argc - 1, argv + 1);
}
