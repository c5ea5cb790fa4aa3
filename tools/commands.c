/* The commands of `stoke` (cli.h), and `stoke completion`, the one command
 * that needs the list (the shell completion of every command: reference.h). */
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/reference.h"

#include <stdio.h>
#include <string.h>

const stk_command *const stk_commands[] = {
    &stk_cmd_pack,   &stk_cmd_info,    &stk_cmd_verify,  &stk_cmd_index,   &stk_cmd_peek,
    &stk_cmd_bench,  &stk_cmd_train,   &stk_cmd_lr_find, &stk_cmd_tune,    &stk_cmd_eval,
    &stk_cmd_export, &stk_cmd_predict, &stk_cmd_plot,    &stk_cmd_devices, &stk_cmd_completion};
const int stk_n_commands = sizeof stk_commands / sizeof *stk_commands;

const stk_command *stk_cli_command(const char *name)
{
    for (int i = 0; i < stk_n_commands; i++)
        if (strcmp(stk_commands[i]->name, name) == 0) return stk_commands[i];
    return NULL;
}

/* ---- stoke completion ------------------------------------------------------------- */

typedef struct completion_args {
    int unused;
} completion_args;

static const stk_flag flags[] = {STK_FLAG_END};

static const stk_cli cli = {
    .cmd = "completion",
    .usage = "stoke completion bash|zsh",
    .about = "Print the shell's completion script for stoke: the commands, their flags\n"
             "and aliases, the values of enumerated flags (--model, --optimizer, --order,\n"
             "...) and file names where a flag takes a path. `cmake --install` puts both\n"
             "where the shells look (share/bash-completion/completions/stoke,\n"
             "share/zsh/site-functions/_stoke); without it:\n"
             "  source <(stoke completion bash)      # in ~/.bashrc\n"
             "  stoke completion zsh > ~/.zfunc/_stoke  # with fpath+=~/.zfunc before compinit\n",
    .flags = flags,
    .min_args = 1,
    .max_args = 1,
    .args_error = "expected bash or zsh"};

static int completion_main(int argc, char **argv)
{
    completion_args a = {0};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    if (!strcmp(pos[0], "bash"))
        stk_reference_bash(stdout, stk_commands, stk_n_commands);
    else if (!strcmp(pos[0], "zsh"))
        stk_reference_zsh(stdout, stk_commands, stk_n_commands);
    else
        return stk_cli_usage("completion", "%s: expected bash or zsh", pos[0]);
    return STK_EXIT_OK;
}

const stk_command stk_cmd_completion = {"completion", "print bash or zsh completion for stoke",
                                        &cli, completion_main};
