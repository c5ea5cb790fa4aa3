/* The reference the flag tables make, so that it cannot drift from them
 * (reference.c): docs/cli.md (`stoke help --markdown`), a man page per
 * command (`stoke help --man [COMMAND]`: stoke.1, stoke-train.1, ...) and
 * bash and zsh completion (`stoke completion bash|zsh`): the commands, their
 * flags and aliases, and the values of enumerated flags (choices, --model's
 * names). CMake writes the man pages and completions into the build and
 * `cmake --install` installs them; ctest's cli_reference fails when the
 * committed docs/cli.md differs from what the tables make. */
#pragma once

#include "tools/cli.h"

#include <stdio.h>

/* Each over the commands cmds[0..n_cmds) (tools/commands.c's list). */
/* `stoke help`: the commands, the common options, environment, exit status. */
void stk_reference_overview(FILE *f, const stk_command *const *cmds, int n_cmds);
void stk_reference_markdown(FILE *f, const stk_command *const *cmds, int n_cmds);
/* c NULL: stoke.1, the overview. */
void stk_reference_man(FILE *f, const stk_command *c, const stk_command *const *cmds, int n_cmds);
void stk_reference_bash(FILE *f, const stk_command *const *cmds, int n_cmds);
void stk_reference_zsh(FILE *f, const stk_command *const *cmds, int n_cmds);
