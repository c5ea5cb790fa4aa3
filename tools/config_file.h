/* --config FILE of stoke train and stoke tune (config_file.c): the flags of
 * a run or a sweep kept in a file, JSON or TOML, read before those of the
 * command line (which come after them, so a flag given on both is the
 * command line's).
 *
 *     {"data": "train.stoke", "val": "test.stoke", "model": "mlp",
 *      "space": ["lr=loguniform(1e-3,0.3)", "momentum=uniform(0.8,0.99)"],
 *      "samples": 8, "scheduler": "asha", "nesterov": true}
 *
 *     data = "train.stoke"          # TOML: the same keys, top level
 *     space = ["lr=loguniform(1e-3,0.3)"]
 *     samples = 8
 *
 * A key is a flag of the command (tune: of stoke tune or stoke train) without its "--"; a string
 * or number is its value, true the flag alone (false leaves it out), a
 * list the flag once per value. Nested objects and [tables] are refused. */
#pragma once

#include "common/status.h"

#include <stdbool.h>

/* Whether `key` names a flag. */
typedef bool (*config_known)(const char *key);

/* The flags in FILE (*n of them, owned, NULL-terminated); -1 to go on, or
 * 2 (the message is stk_last_error(): the file, line and reason; an unknown
 * key "is not a flag of FLAGS_OF"). */
int stk_config_flags(const char *path, const char *flags_of, config_known known, char ***out,
                     int *n);

/* argv with every --config FILE's flags first (files in the order given,
 * the command line's flags after them), owned: *eff, *n_eff (free with
 * stk_config_free); or *eff NULL when there is none. -1 to go on, or the
 * exit code (a usage error of stoke CMD, printed). */
int stk_config_expand(const char *cmd, const char *flags_of, int argc, char **argv,
                      config_known known, char ***eff, int *n_eff);

/* Free n owned flags and their vector. */
void stk_config_free(char **v, int n);
