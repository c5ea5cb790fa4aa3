/* The dataset's fields, for storage/ only (dataset.c, dataset_shards.c). */
#pragma once

#include "storage/dataset.h"

struct stk_dataset {
    char *path;
    int fd; /* for pread */
    uint64_t file_size;
    const uint8_t *map; /* the whole file, read-only */
    stk_meta meta;
    uint64_t *offsets; /* record index: file offset of each record's value */
    uint32_t *lengths;
    uint32_t *crcs;  /* from the persisted index: each record's CRC and label, */
    int32_t *labels; /* which reads compare with the record (NULL: walked) */
    uint32_t max_length;
    bool indexed; /* the index came from the file's own (record_index.h), not a walk */
    uint64_t open_pages, open_reads; /* what the open touched (stk_dataset_open_cost) */
    /* Shards (several files as one dataset): each file is a dataset of its
     * own (its map and fd; its record index moved into this one's), placed
     * at part_base[k] of one byte space: offsets[] are in that space. A
     * single file: nparts 0, and map/fd are its own. */
    stk_dataset **parts;
    uint64_t *part_base;
    int nparts;
};

/* Open one file (no shard list). */
stk_status stk_dataset_open_file(const char *path, bool walk, stk_dataset **out);

/* Which of ds's files holds byte `offset` of its byte space (0 for one file). */
int stk_dataset_part_at(const stk_dataset *ds, uint64_t offset);
