/* stoke tune --config FILE (tune_config.c): the flags of a sweep kept in a
 * file, JSON or TOML, read before those of the command line (which come
 * after them, so a flag given on both is the command line's).
 *
 *     {"data": "train.stoke", "val": "test.stoke", "model": "mlp",
 *      "space": ["lr=loguniform(1e-3,0.3)", "momentum=uniform(0.8,0.99)"],
 *      "samples": 8, "scheduler": "asha", "nesterov": true}
 *
 *     data = "train.stoke"          # TOML: the same keys, top level
 *     space = ["lr=loguniform(1e-3,0.3)"]
 *     samples = 8
 *
 * A key is a flag of stoke tune or stoke train without its "--"; a string
 * or number is its value, true the flag alone (false leaves it out), a
 * list the flag once per value. Nested objects and [tables] are refused. */
#pragma once

#include "common/status.h"

#include <stdbool.h>

/* Whether `key` names a flag. */
typedef bool (*config_known)(const char *key);

/* The flags in FILE (*n of them, owned, NULL-terminated); -1 to go on, or
 * 2 (the message is stk_last_error(): the file, line and reason). */
int tune_config_flags(const char *path, config_known known, char ***out, int *n);
