/* What `stoke predict` classifies (predict.c): its INPUT arguments as a
 * list of images, in order. A file is one image (JPEG or PNG, told by its
 * bytes); a folder, recursively in name order, gives its files with an
 * image name (.jpg .jpeg .jpe .jfif .png; others are counted, not read); a
 * .stoke file gives each of its records ("FILE.stoke#INDEX"), and
 * "FILE.stoke#INDEX" (no file of that name) the one record. A path that
 * cannot be opened is one image that will fail, named with the reason. */
#pragma once

#include "storage/dataset.h"

#include <stdint.h>

typedef struct predict_item {
    char *path;      /* as shown: the file, or FILE.stoke#INDEX */
    int dataset;     /* index into predict_inputs.datasets, or -1: a file */
    uint64_t record; /* with a dataset */
    char *why;       /* set before reading: it cannot be read (malloc'd) */
} predict_item;

typedef struct predict_inputs {
    predict_item *items;
    uint64_t n, cap;
    stk_dataset **datasets;
    char **dataset_paths; /* each one's path: a dataset named twice is opened once */
    int n_datasets;
    uint64_t not_images; /* files in folders without an image name */
} predict_inputs;

/* Errors: NOMEM; a folder that cannot be listed is one failing item. */
stk_status predict_inputs_add(predict_inputs *in, const char *arg);
void predict_inputs_free(predict_inputs *in);
