/* A table of settings: each entry names a field of a struct (offsetof,
 * type-checked at compile time), its kind, range or choices, help text,
 * default (as it would be typed) and what else it takes part in (the
 * stk_setting_use bits). The CLI's flags (tools/flags.h) and a run's
 * settings (run/run_settings.h) are such tables; this file stores, checks
 * and shows one value without printing, for any front end.
 *
 *     typedef struct eval_args { const char *data; int64_t batch; bool json; } eval_args;
 *     static const stk_flag eval_flags[] = {
 *         STK_FLAG_SECTION("options"),
 *         STK_FLAG_TEXT(eval_args, data, "data", "PATH", "the dataset"),
 *         STK_FLAG_INT(eval_args, batch, "batch", "B", 1, 65536, "default 128", .def = "128"),
 *         STK_FLAG_BOOL(eval_args, json, "json", "one JSON object on stdout"),
 *         STK_FLAG_END};
 *     eval_args a = {0};
 *     stk_flag_defaults(eval_flags, &a);                               // batch = 128
 *     stk_flag_set(stk_flag_find(eval_flags, "batch"), &a, "64");     // or INVALID_ARG
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_flag_kind {
    STK_FLAG_KIND_END = 0,
    STK_FLAG_KIND_SECTION, /* a heading in the help text */
    STK_FLAG_KIND_BOOL,    /* bool: true when present */
    STK_FLAG_KIND_INT,     /* int64_t in [min, max] */
    STK_FLAG_KIND_NUMBER,  /* double in [min, max] (NaN refused) */
    STK_FLAG_KIND_TEXT,    /* const char *: the argument itself */
    STK_FLAG_KIND_CHOICE,  /* int: the index of the value in `choices` */
    STK_FLAG_KIND_LIST,    /* const char *[max]: repeatable, count in an int field */
    STK_FLAG_KIND_DEVICE,  /* stk_device_spec: cpu, cuda, cuda:N (train/device.h) */
} stk_flag_kind;

typedef struct stk_flag {
    stk_flag_kind kind;
    const char *name;           /* without "--"; SECTION: the heading */
    const char *arg;            /* the value's name in the help ("N", "PATH"); NULL for BOOL */
    const char *help;           /* lines separated by '\n' */
    size_t offset;              /* of the field in the argument struct */
    double min, max;            /* NUMBER */
    int64_t lo, hi;             /* INT */
    const char *const *choices; /* CHOICE: NULL-terminated */
    size_t count_offset;        /* LIST: the int field counting the values */
    int max_count;              /* LIST */
    /* A setting's place in a run (train's table, read by the code that
     * needs it rather than kept in lists of names beside it): */
    const char *def; /* the default, as it would be typed (NULL: none, or set in code) */
    unsigned set;    /* stk_setting_use bits */
    /* Other ways to type it: names users know from elsewhere (timm's
     * --batch-size for --batch), accepted and listed in the help; a former
     * name, accepted with a warning naming this one; a short option (-b). */
    const char *alias[3];
    const char *old;
    char letter;
    /* BOOL: it may take a value too (timm's --resume PATH): --NAME=VALUE,
     * or --NAME VALUE where the command takes no positional argument and
     * VALUE does not start with '-'; stored in the TEXT field at
     * value_offset (STK_FLAG_OPTIONAL_VALUE). */
    bool optional_value;
    size_t value_offset;
    /* TEXT: the values a shell completes it with (--model's names), or NULL */
    const char *const *(*values)(void);
} stk_flag;

/* What a setting of a run takes part in beyond its parsing. */
typedef enum stk_setting_use {
    STK_SET_RANKS = 1u << 0, /* ranks must agree on it (the fingerprint before the first step) */
    STK_SET_TUNE = 1u << 1,  /* a tune space may vary it */
    STK_SET_NO_TRIAL =
        1u << 2, /* never passed to a tune trial (tune owns it, or it makes no sense per trial) */
    STK_SET_RESUME = 1u << 3,   /* in every checkpoint's metadata; --resume must match it */
    STK_SET_FRONT = 1u << 4,    /* the front end's (what it prints, a file of flags), not the run's:
                                   a library caller (Python) does not pass it */
    STK_SET_POSITION = 1u << 5, /* with RESUME: the trainer's position (train/position.h)
                                   records it under this name, so the run's metadata does not */
} stk_setting_use;

/* Store `value` (the text after --NAME) of flag f into the struct at
 * `args`, checked against the flag's range or choices; a switch is set
 * (the value is not read). A TEXT or LIST value is stored as the pointer
 * itself: it must outlive the struct. Prints nothing: errors are
 * INVALID_ARG ("--batch 0: expected an integer in 1..65536"). */
stk_status stk_flag_set(const stk_flag *f, void *args, const char *value);

/* The entry --name of the table (name without "--"; len bytes of it: its
 * name, an alias or its former name), or NULL. */
const stk_flag *stk_flag_find(const stk_flag *flags, const char *name, size_t len);

/* Parse argv[1..argc-1] into the struct at `args`: "--name VALUE",
 * "--name=VALUE", a switch "--name" and its negation "--no-name" (a switch
 * named no-X is also turned off by --X), a short option "-b VALUE",
 * "-bVALUE" or switches together ("-qv"); "--" ends the flags. TEXT and
 * LIST values point into argv. The positional arguments are moved to
 * argv[1..] in order, *n_pos of them (n_pos NULL: one is an error). Prints
 * nothing but a warning for a former name: INVALID_ARG names the flag
 * ("unknown option '--bach' (did you mean --batch?)", "--epochs needs a
 * value (E)"). */
stk_status stk_flag_parse(const stk_flag *flags, void *args, int argc, char **argv, int *n_pos);

/* The same over several tables, each with its own struct (the CLI's -q and
 * -v beside a command's flags): a flag is looked up in tables[0] first. */
stk_status stk_flag_parse_tables(const stk_flag *const *tables, void *const *args, int n_tables,
                                 int argc, char **argv, int *n_pos);

/* The name in flags nearest to word's len bytes (a did-you-mean), or NULL. */
const char *stk_flag_closest(const stk_flag *flags, const char *word, size_t len);

/* Parse argv[1..argc-1], flags only ("--name VALUE", "--name=VALUE", a
 * switch "--name"), into the struct at `args`; TEXT and LIST values point
 * into argv. Prints nothing: INVALID_ARG names the flag ("unknown option
 * '--batch-size' (did you mean --batch?)", "--epochs needs a value (E)"). */
stk_status stk_flag_parse_args(const stk_flag *flags, void *args, int argc, char **argv);

/* Store each entry's `def` into the struct at `args`. INVALID_ARG names a
 * default the table cannot parse (a bug in the table). */
stk_status stk_flag_defaults(const stk_flag *flags, void *args);

/* The value of flag f in the struct at `args` as it would be typed
 * (numbers exact and shortest, a choice's name, a list's values joined by
 * ','; a device's name); false when it is unset: a NULL text, an empty
 * list, a number below the flag's range (the "off" or "the model's" of a
 * default set in code). A switch is "no" or "yes". */
bool stk_flag_value_text(const stk_flag *f, const void *args, char *buf, size_t size);

/* ---- table entries ---------------------------------------------------------- */

/* 0, and a compile error unless field f of T has type `type`. */
#define STK_FLAG_TYPE_(T, f, type)                                                                 \
    (0 * sizeof(struct {                                                                           \
         _Static_assert(__builtin_types_compatible_p(__typeof__(((T *)0)->f), type),               \
                        "flag " #f ": the field's type does not suit the flag kind");              \
         int x_;                                                                                   \
     }))
#define STK_FLAG_AT_(T, f, type) (offsetof(T, f) + STK_FLAG_TYPE_(T, f, type))

#define STK_FLAG_END                                                                               \
    {                                                                                              \
        .kind = STK_FLAG_KIND_END                                                                  \
    }
#define STK_FLAG_SECTION(heading)                                                                  \
    {                                                                                              \
        .kind = STK_FLAG_KIND_SECTION, .name = (heading)                                           \
    }
#define STK_FLAG_BOOL(T, f, nm, hlp, ...)                                                          \
    {                                                                                              \
        .kind = STK_FLAG_KIND_BOOL, .name = (nm), .help = (hlp),                                   \
        .offset = STK_FLAG_AT_(T, f, bool), __VA_ARGS__                                            \
    }
#define STK_FLAG_INT(T, f, nm, a, lo_, hi_, hlp, ...)                                              \
    {                                                                                              \
        .kind = STK_FLAG_KIND_INT, .name = (nm), .arg = (a), .help = (hlp),                        \
        .offset = STK_FLAG_AT_(T, f, int64_t), .lo = (lo_), .hi = (hi_), __VA_ARGS__               \
    }
#define STK_FLAG_NUMBER(T, f, nm, a, lo, hi, hlp, ...)                                             \
    {                                                                                              \
        .kind = STK_FLAG_KIND_NUMBER, .name = (nm), .arg = (a), .help = (hlp),                     \
        .offset = STK_FLAG_AT_(T, f, double), .min = (lo), .max = (hi), __VA_ARGS__                \
    }
#define STK_FLAG_TEXT(T, f, nm, a, hlp, ...)                                                       \
    {                                                                                              \
        .kind = STK_FLAG_KIND_TEXT, .name = (nm), .arg = (a), .help = (hlp),                       \
        .offset = STK_FLAG_AT_(T, f, const char *), __VA_ARGS__                                    \
    }
#define STK_FLAG_CHOICE(T, f, nm, a, ch, hlp, ...)                                                 \
    {                                                                                              \
        .kind = STK_FLAG_KIND_CHOICE, .name = (nm), .arg = (a), .help = (hlp),                     \
        .offset = STK_FLAG_AT_(T, f, int), .choices = (ch), __VA_ARGS__                            \
    }
#define STK_FLAG_LIST(T, f, n, nm, a, hlp, ...)                                                    \
    {                                                                                              \
        .kind = STK_FLAG_KIND_LIST, .name = (nm), .arg = (a), .help = (hlp),                       \
        .offset = STK_FLAG_AT_(T, f[0], const char *), .count_offset = STK_FLAG_AT_(T, n, int),    \
        .max_count = (int)(sizeof(((T *)0)->f) / sizeof(((T *)0)->f[0])), __VA_ARGS__              \
    }
#define STK_FLAG_DEVICE(T, f, ...)                                                                 \
    {                                                                                              \
        .kind = STK_FLAG_KIND_DEVICE, .name = "device", .arg = "cpu|cuda[:N]",                     \
        .help = "default cpu; cuda: GPU 0, cuda:N another (stoke devices)",                        \
        .offset = STK_FLAG_AT_(T, f, stk_device_spec), __VA_ARGS__                                 \
    }

/* A switch's optional value, into field f (const char *) of T. */
#define STK_FLAG_OPTIONAL_VALUE(T, f)                                                              \
    .optional_value = true, .value_offset = STK_FLAG_AT_(T, f, const char *)

/* The flags several commands share, with one range and one text each. */
#define STK_FLAG_WORKERS(T, f, hlp, ...)                                                           \
    STK_FLAG_INT(T, f, "workers", "N", 1, 1024, hlp, .letter = 'j', __VA_ARGS__)
#define STK_FLAG_THREADS(T, f, ...)                                                                \
    STK_FLAG_INT(T, f, "threads", "N", 1, 1024, "compute threads, default: number of cores",       \
                 __VA_ARGS__)
#define STK_FLAG_SEED(T, f, hlp, ...)                                                              \
    STK_FLAG_INT(T, f, "seed", "S", 0, INT64_MAX, hlp, __VA_ARGS__)
#define STK_FLAG_JSON(T, f, hlp, ...) STK_FLAG_BOOL(T, f, "json", hlp, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
