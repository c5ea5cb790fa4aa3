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

void stk_reference_markdown(FILE *f);
/* c NULL: stoke.1, the overview. */
void stk_reference_man(FILE *f, const stk_command *c);
void stk_reference_bash(FILE *f);
void stk_reference_zsh(FILE *f);
