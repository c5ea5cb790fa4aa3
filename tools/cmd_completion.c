/* stoke completion: the shell completion the flag tables make (reference.h). */
#include "tools/flags.h"
#include "tools/reference.h"

#include <stdio.h>
#include <string.h>

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
        stk_reference_bash(stdout);
    else if (!strcmp(pos[0], "zsh"))
        stk_reference_zsh(stdout);
    else
        return stk_cli_usage("completion", "%s: expected bash or zsh", pos[0]);
    return STK_EXIT_OK;
}

const stk_command stk_cmd_completion = {"completion", "print bash or zsh completion for stoke",
                                        &cli, completion_main};
