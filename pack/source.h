/* Sources that `stoke pack` reads: what to pack, in which order, with which
 * label. A source lists items; it does not decode them.
 *
 *     stk_source *src;
 *     if (stk_source_open_folder("photos/", &src) != STK_OK) ...;
 *     for (size_t i = 0; i < src->count; i++)
 *         printf("%s -> %s\n", src->items[i].name, src->class_names[src->items[i].label]);
 *     stk_source_destroy(src);
 *
 * Kinds:
 *   folder  DIR/<class>/ (any depth) *.jpg; classes = sorted subfolder names, label = position;
 *           files are listed in byte order of their relative paths. Image files
 *           that are not JPEG (.png, .gif, .webp, ...) are listed too, so pack
 *           reports them as bad input instead of skipping them silently.
 *   list    lines "path label" (paths relative to the list file; '#' comments)
 *   idx     MNIST / Fashion-MNIST IDX images + labels, gzipped or not
 *   cifar10 the CIFAR-10 binary batches (data_batch_1..5.bin / test_batch.bin)
 * File sources give JPEG items (read later, by path); idx and cifar10 give raw
 * u8 pixels: idx's stay in a file (the IDX file itself, or a gzipped one's
 * body decompressed into an unlinked temporary), read item by item, so that
 * packing a million images does not hold them all; cifar10's (at most
 * 60,000 images) are held in memory.
 *
 * Who owns what: the source owns its items, names and pixels until destroy.
 */
#pragma once

#include "common/status.h"
#include "storage/record.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_source_item {
    char *name; /* source name stored in the record (relative path, "file#index") */
    char *path; /* file to read (file sources), else NULL */
    int32_t label;
    const uint8_t *pixels; /* raw sources held in memory: height x width x channels u8 */
    uint64_t offset;       /* raw sources in a file: where the item's pixels are in pixels_fd */
} stk_source_item;

typedef struct stk_source {
    stk_encoding encoding;
    uint32_t width, height, channels; /* raw sources: the shape of every item */
    stk_source_item *items;
    size_t count;
    size_t items_cap;
    char **class_names;
    uint32_t num_classes;
    char *description; /* "imagefolder:DIR", "idx:IMAGES", ... for the meta */
    uint8_t *pixels;   /* raw sources held in memory: every item's pixels */
    int pixels_fd;     /* raw sources in a file (items' offsets), else -1 */
    char *pixels_path; /* its name for messages */
} stk_source;

/* Errors of every opener: STK_ERR_IO (cannot read SRC; path and errno text),
 * STK_ERR_FORMAT (not the expected layout or file format), STK_ERR_CORRUPT
 * (a truncated IDX/CIFAR file), STK_ERR_INVALID_ARG (bad list line or class
 * file), STK_ERR_NOMEM. */
stk_status stk_source_open_folder(const char *dir, stk_source **out);

/* A folder whose subfolders are splits (train/, val/ or valid/ or
 * validation/, test/) rather than classes: with split NULL, refused with a
 * hint (STK_ERR_INVALID_ARG: "DIR: its folders train/, val/ are splits, not
 * classes: pack one with --split train"); with split "train", "val" or
 * "test", that subfolder opened as stk_source_open_folder does. A folder of
 * class folders: as stk_source_open_folder, and a split is refused. */
stk_status stk_source_open_folder_split(const char *dir, const char *split, stk_source **out);
stk_status stk_source_open_list(const char *list_file, stk_source **out);

/* images: a directory holding "<split>-images-idx3-ubyte[.gz]" (split "train"
 * or "t10k"; "test" is accepted for t10k) and its labels file, or the images
 * file itself with `labels` naming the labels file. */
stk_status stk_source_open_idx(const char *images, const char *labels, const char *split,
                               stk_source **out);

/* dir: the folder with CIFAR-10's .bin batches, or one .bin file. split:
 * "train" (data_batch_1..5) or "test" (test_batch). Class names come from
 * batches.meta.txt when present, else CIFAR-10's published names. */
stk_status stk_source_open_cifar10(const char *dir, const char *split, stk_source **out);

/* Replace class names by the lines of `file` (one per line). Errors:
 * STK_ERR_INVALID_ARG when labels reach past the names it lists. */
stk_status stk_source_load_class_names(stk_source *src, const char *file);

/* Reorder items with a seeded Fisher-Yates shuffle (labels move with them). */
void stk_source_shuffle(stk_source *src, uint64_t seed);

void stk_source_destroy(stk_source *src);

/* A raw item's pixels into buf (height x width x channels bytes), from
 * memory or from the source's file. Errors: STK_ERR_IO (read error),
 * STK_ERR_CORRUPT (the file is shorter than when it was opened). */
stk_status stk_source_read_pixels(const stk_source *src, const stk_source_item *it, uint8_t *buf);

/* Internal helpers shared by the source files. add_item takes ownership of
 * name and path (malloc'd), also when it fails. */
stk_status stk_source_create(stk_source **out, const char *description);
stk_status stk_source_add_item(stk_source *src, char *name, char *path, int32_t label,
                               const uint8_t *pixels);
stk_status stk_source_set_numbered_classes(stk_source *src, uint32_t n);

#ifdef __cplusplus
}
#endif
