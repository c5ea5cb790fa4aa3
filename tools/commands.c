/* The commands of `stoke` and the overview that lists them (cli.h). */
#include "tools/cli.h"

#include <stdio.h>
#include <string.h>

const stk_command *const stk_commands[] = {
    &stk_cmd_pack,   &stk_cmd_info,    &stk_cmd_verify,  &stk_cmd_index,   &stk_cmd_peek,
    &stk_cmd_bench,  &stk_cmd_train,   &stk_cmd_lr_find, &stk_cmd_tune,    &stk_cmd_eval,
    &stk_cmd_export, &stk_cmd_predict, &stk_cmd_plot,    &stk_cmd_devices, &stk_cmd_completion};
const int stk_n_commands = sizeof stk_commands / sizeof *stk_commands;

void stk_cli_overview(FILE *f)
{
    fprintf(f,
            "stoke %s: a training framework whose data pipeline keeps the accelerator fed\n\n"
            "usage: stoke COMMAND [ARGS]\n\ncommands:\n",
            STOKE_VERSION);
    for (int i = 0; i < stk_n_commands; i++)
        fprintf(f, "  %-8s %s\n", stk_commands[i]->name, stk_commands[i]->summary);
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

const stk_command *stk_cli_command(const char *name)
{
    for (int i = 0; i < stk_n_commands; i++)
        if (strcmp(stk_commands[i]->name, name) == 0) return stk_commands[i];
    return NULL;
}
