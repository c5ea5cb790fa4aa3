/* stoke: pack, inspect, verify and benchmark datasets; train and evaluate models. */
#include "common/memory_budget.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/reference.h"

#include <stdio.h>
#include <signal.h>
#include <string.h>

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
        stk_reference_overview(stderr, stk_commands, stk_n_commands);
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
        stk_reference_overview(stdout, stk_commands, stk_n_commands);
        return STK_EXIT_OK;
    }
    /* the reference (tools/reference.h): docs/cli.md and the man pages */
    if (strcmp(cmd, "help") == 0 && strcmp(argv[2], "--markdown") == 0) {
        stk_reference_markdown(stdout, stk_commands, stk_n_commands);
        return STK_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0 && strcmp(argv[2], "--commands") == 0) {
        for (int i = 0; i < stk_n_commands; i++) printf("%s\n", stk_commands[i]->name);
        return STK_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0 && strcmp(argv[2], "--man") == 0) {
        const stk_command *c = argc > 3 ? stk_cli_command(argv[3]) : NULL;
        if (argc > 3 && !c) {
            fprintf(stderr, "stoke: no command '%s'; try 'stoke help'\n", argv[3]);
            return STK_EXIT_USAGE;
        }
        stk_reference_man(stdout, c, stk_commands, stk_n_commands);
        return STK_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0 && strcmp(argv[2], "transforms") == 0) {
        fputs(stk_transform_help, stdout);
        return STK_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        const stk_command *c = stk_cli_command(argv[2]);
        if (!c) {
            fprintf(stderr, "stoke: no command '%s'; try 'stoke help'\n", argv[2]);
            return STK_EXIT_USAGE;
        }
        stk_cli_help(c->cli, stdout);
        return STK_EXIT_OK;
    }
    const stk_command *c = stk_cli_command(cmd);
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
