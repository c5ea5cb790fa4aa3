/* One table per command (run/flag_table.h's entries) drives its flag
 * parsing, range checks, usage messages and --help text. Tables are static:
 * each entry names a field of the command's own argument struct (offsetof,
 * type-checked at compile time).
 *
 *     typedef struct eval_args { const char *data; int64_t batch; bool json; } eval_args;
 *     static const stk_flag eval_flags[] = {
 *         STK_FLAG_SECTION("options"),
 *         STK_FLAG_TEXT(eval_args, data, "data", "PATH", "the dataset"),
 *         STK_FLAG_INT(eval_args, batch, "batch", "B", 1, 65536, "default 128"),
 *         STK_FLAG_BOOL(eval_args, json, "json", "one JSON object on stdout"),
 *         STK_FLAG_END};
 *     static const stk_cli eval_cli = {.cmd = "eval", .usage = "stoke eval --data ...",
 *                                      .flags = eval_flags, .max_args = 0};
 *     eval_args a = {.batch = 128};             // defaults first
 *     int rc = stk_cli_parse(&eval_cli, &a, argc, argv, &args, &n);
 *     if (rc >= 0) return rc;                   // a usage error was printed
 *
 * Syntax: --name VALUE or --name=VALUE, a short option -b VALUE, --no-X
 * for a switch X, flags and arguments in any order, "--" ends the flags
 * (run/flag_table.h's stk_flag_parse). -h/--help is answered by main.c before a command runs.
 * Messages (exit 2): "stoke CMD: --flag VALUE: expected ..." and a hint.
 * Help text: usage, about, then each section's flags with their help lines
 * aligned in one column, then notes.
 */
#pragma once

#include "run/flag_table.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct stk_cli {
    const char *cmd;   /* "train" */
    const char *usage; /* after "usage: "; '\n' separates alternatives */
    const char *about; /* paragraphs after the usage line */
    const stk_flag *flags;
    const char *notes;      /* text after the flags */
    int min_args, max_args; /* positional arguments */
    const char *args_error; /* the message when their number is wrong */
    /* The first positional argument may be given as --NAME VALUE instead,
     * under any of these names ("data": as train and eval name the
     * dataset; "checkpoint"); NULL-terminated, or NULL: none. */
    const char *const *first_arg_names;
} stk_cli;

/* STOKE_PARSE_ONLY=1 in the environment: stk_cli_parse returns 0 (exit 0)
 * once the flags parsed, before the command does anything (the docs test,
 * tests/cli/test_docs.sh, checks every documented command this way). */

/* Parse argv[1..argc-1] into the struct at `args` (defaults already in it).
 * Positional arguments are left in argv order in *pos (pointing into argv,
 * *n_pos of them). Returns -1 to go on, or the exit code of a usage error
 * (already printed). */
int stk_cli_parse(const stk_cli *c, void *args, int argc, char **argv, char ***pos, int *n_pos);

/* A table put together from entries of another command's (`from`: the
 * same names, ranges, defaults and help, their fields in a struct of its
 * kind at `offset` in the command's own; lr-find's and eval's settings of
 * the run are stoke train's) and the command's own entries: into dst from
 * entry n on, at most cap - 1 of them (room for the END a caller adds);
 * returns the new n. A name `from` lacks is skipped (a bug its tests see:
 * the flag is unknown). */
int stk_cli_borrow(stk_flag *dst, int n, int cap, const stk_cli *from, const char *const *names,
                   size_t offset);
int stk_cli_append(stk_flag *dst, int n, int cap, const stk_flag *own);

/* The flags every command takes: -q/--quiet (warnings and errors only, no
 * progress bars) and -v/--verbose (debug detail), applied by
 * stk_cli_parse; listed at the end of each command's help. */
extern const stk_flag stk_cli_common_flags[];

/* The flag --name of c (name without "--"), or NULL. */
const stk_flag *stk_cli_find(const stk_cli *c, const char *name);

/* Store each flag's `def` into the struct at `args`. Returns -1, or the
 * exit code of a default the table cannot parse (a bug, printed). */
int stk_cli_defaults(const stk_cli *c, void *args);

/* The command's --help text. */
void stk_cli_help(const stk_cli *c, FILE *f);
