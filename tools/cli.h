/* Shared plumbing of the `stoke` commands: the command table, error and usage
 * reporting with the exit codes (0 ok, 1 bad input or runtime error, 2 bad
 * usage) and the SIGINT flag. Flags: tools/flags.h. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* 130: stopped by Ctrl-C (128 + SIGINT, as shells report it), after saving
 * what a run saves. */
enum { STK_EXIT_OK = 0, STK_EXIT_ERROR = 1, STK_EXIT_USAGE = 2, STK_EXIT_INTERRUPTED = 130 };

typedef struct stk_command {
    const char *name;
    const char *summary;       /* one line for `stoke help` */
    const struct stk_cli *cli; /* flags and help text (tools/flags.h) */
    int (*run)(int argc, char **argv);
} stk_command;

extern const stk_command stk_cmd_pack, stk_cmd_info, stk_cmd_verify, stk_cmd_peek, stk_cmd_bench,
    stk_cmd_train, stk_cmd_tune, stk_cmd_eval, stk_cmd_export, stk_cmd_predict, stk_cmd_index,
    stk_cmd_devices, stk_cmd_plot, stk_cmd_lr_find, stk_cmd_completion;

/* Every command, in the overview's order (commands.c), and the one named. */
extern const stk_command *const stk_commands[];
extern const int stk_n_commands;
const stk_command *stk_cli_command(const char *name);

/* The transform grammar, `stoke help transforms` (transform_help.c). */
extern const char stk_transform_help[];

/* Print "stoke CMD: <message>" and a hint to stderr; return STK_EXIT_USAGE. */
int stk_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print "stoke: <stk_last_error()>" to stderr; return STK_EXIT_ERROR, or
 * STK_EXIT_INTERRUPTED after a Ctrl-C. */
int stk_cli_fail(void);

/* Set by SIGINT/SIGTERM once stk_cli_catch_interrupt() ran. */
extern volatile sig_atomic_t stk_cli_interrupted;
void stk_cli_catch_interrupt(void);

/* "12.3 MB" style sizes. */
const char *stk_cli_bytes(uint64_t bytes, char *buf, size_t size);
