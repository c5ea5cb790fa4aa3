/* A whole `stoke pack`, as one library call: open the source (its kind
 * guessed from the path when not given), apply class names and shuffling,
 * wire libjpeg-turbo's preparation into storage's packer, and record what
 * shaped the content in the meta's packed_with. The CLI and the Python
 * package (`stoke.pack`) both call this, so they behave and fail alike.
 *
 *     stk_pack_request r = stk_pack_request_defaults();
 *     r.src = "photos/"; r.out = "photos.stoke"; r.max_side = 512;
 *     stk_pack_summary sum;
 *     stk_encoding enc;
 *     if (stk_pack_job_run(&r, &sum, &enc) != STK_OK)
 *         fprintf(stderr, "stoke: %s\n", stk_last_error());
 *
 * Lives in loader/ because it joins storage/ (the packer) and augment/ (the
 * JPEG preparer), which do not know each other.
 */
#pragma once

#include "pack/pack.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_pack_request {
    const char *src;     /* folder, list file, IDX folder/images file, CIFAR-10 folder/.bin */
    const char *labels;  /* IDX labels file when src is the images file; else NULL */
    const char *out;     /* the .stoke file to write */
    const char *from;    /* "imagefolder" | "list" | "idx" | "cifar10"; NULL: guess */
    const char *split;   /* "train" | "test" for idx/cifar10; NULL: train */
    const char *classes; /* class names file (list, idx, cifar10); NULL: numbers */
    int workers;         /* >= 1 */
    bool shuffle;
    uint64_t seed;
    bool skip_bad; /* skip bad inputs, list them in OUT.skipped.txt */
    bool validate; /* decode every JPEG (and compute mean/std) */
    uint64_t max_pixels;
    uint32_t max_side;    /* 0: never resize */
    int quality;          /* 1..100, for re-encoded images */
    int restart_mcus;     /* JPEG restart markers about every N MCUs (0: none) */
    uint64_t shard_bytes; /* > 0: shards of about this many bytes (pack/pack_output.h) */
    const char *store;    /* "jpeg" or "raw" (lossless: every file decoded to RGB u8
                             pixels); NULL: jpeg for folders and lists, raw for idx/cifar10 */
    const volatile sig_atomic_t *cancel;
    FILE *progress; /* NULL: no progress bar */
} stk_pack_request;

/* Restart markers every ~N MCUs unless asked otherwise (bench/README.md
 * has the measurement behind N). */
#define STK_PACK_DEFAULT_RESTART 4

/* Everything off or at the CLI's defaults; src/out NULL, workers 1. */
stk_pack_request stk_pack_request_defaults(void);

/* The source kind `stoke pack` assumes for src (npaths: 2, or 3 for
 * IMAGES LABELS OUT): "idx", "cifar10", "imagefolder" or "list". */
const char *stk_pack_guess_kind(const char *src, bool with_labels);

/* Run the pack. Errors: a value out of range, named in the request's words
 * ("quality 0: expected an integer in 1..100"; the CLI's flag parser
 * refuses its own flags first, with the "--"), a path combination
 * (STK_ERR_INVALID_ARG), the source's, the first bad item's, I/O,
 * STK_ERR_CANCELLED. *encoding (optional) says whether the records are JPEG
 * (the summary's actions count JPEG handling only then). On error nothing is
 * left at out. */
stk_status stk_pack_job_run(const stk_pack_request *req, stk_pack_summary *summary,
                            stk_encoding *encoding);

/* Names of stk_pack_summary.actions for JPEG sources. */
extern const char *const stk_pack_action_names[STK_PACK_ACTIONS];

#ifdef __cplusplus
}
#endif
