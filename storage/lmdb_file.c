#include "storage/lmdb_file.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* LMDB 0.9's on-disk layout (64-bit, little-endian; lmdb.h and mdb.c). */
#define PAGE_HEADER  16
#define P_BRANCH     0x01
#define P_LEAF       0x02
#define P_META       0x08
#define F_BIGDATA    0x01
#define F_SUBDATA    0x02
#define NODE_HEADER  8 /* lo u16, hi u16, flags u16, ksize u16 */
#define META_MAGIC   0xBEEFC0DEu
#define META_VERSION 1
#define META_BYTES   152 /* header + MDB_meta up to and including the txnid */
#define DB_RECORD    48
#define MAX_KEY      511 /* LMDB's default MDB_MAXKEYSIZE */
#define MAX_DEPTH    32  /* LMDB's CURSOR_STACK */
#define MAX_NAMED    8   /* named databases remembered from the main database */

/* Unaligned little-endian loads and the big-endian record keys, as single
 * loads (always inlined: the walk does a few per node). */
#define INLINE static inline __attribute__((always_inline))
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FROM_LE(bits, v) (v)
#define FROM_BE(bits, v) __builtin_bswap##bits(v)
#else
#define FROM_LE(bits, v) __builtin_bswap##bits(v)
#define FROM_BE(bits, v) (v)
#endif
INLINE uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return FROM_LE(16, v);
}
INLINE uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return FROM_LE(32, v);
}
INLINE uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return FROM_LE(64, v);
}
INLINE uint64_t get64be(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return FROM_BE(64, v);
}

static stk_status damaged(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static stk_status damaged(const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return stk_error(STK_ERR_CORRUPT, "damaged (%s)", what);
}

static void read_db(const uint8_t *p, stk_lmdb_db *db)
{
    db->flags = get16(p + 4);
    db->depth = get16(p + 6);
    db->branch_pages = get64(p + 8);
    db->leaf_pages = get64(p + 16);
    db->overflow_pages = get64(p + 24);
    db->entries = get64(p + 32);
    db->root = get64(p + 40);
}

/* The named databases found in the main database at init. */
typedef struct named_db {
    char name[MAX_KEY + 1];
    stk_lmdb_db db;
} named_db;

typedef struct named_list {
    named_db item[MAX_NAMED];
    int n;
} named_list;

typedef struct walk {
    stk_lmdb_file *f;
    const stk_lmdb_db *db;
    const char *db_name;
    bool main_db; /* only the main database holds named-database nodes */
    stk_lmdb_entry_fn fn;
    void *ctx;
    uint64_t branch, leaf, overflow, entries;
    const uint8_t *prev_key; /* inside the map, which does not change */
    uint32_t prev_len;
} walk;

/* Mark pages [first, first + n) walked; each may be walked once. */
static stk_status claim_pages(walk *w, uint64_t first, uint64_t n, const char *what)
{
    stk_lmdb_file *f = w->f;
    if (first < 2 || first > f->last_page || n == 0 || n - 1 > f->last_page - first)
        return damaged("database \"%s\": %s at page %" PRIu64 " (%" PRIu64
                       " pages) lies outside pages 2..%" PRIu64,
                       w->db_name, what, first, n, f->last_page);
    /* A word of the bitmap at a time: an overflow run of a large record
     * spans many pages. */
    for (uint64_t at = first, end = first + n; at < end;) {
        uint64_t bit = at & 63, take = 64 - bit < end - at ? 64 - bit : end - at;
        uint64_t mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << bit;
        uint64_t *word = &f->visited[at >> 6];
        if (*word & mask)
            return damaged(
                "database \"%s\": page %" PRIu64 " is reached twice (%s)", w->db_name,
                (uint64_t)((at & ~(uint64_t)63) + (uint64_t)__builtin_ctzll(*word & mask)), what);
        *word |= mask;
        at += take;
    }
    return STK_OK;
}

INLINE int key_cmp(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen)
{
    if (alen == 8 && blen == 8) { /* Stoke's record keys: big-endian indices */
        uint64_t x = get64be(a), y = get64be(b);
        return (x > y) - (x < y);
    }
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

static stk_status leaf_node(walk *w, uint64_t pgno, unsigned i, const uint8_t *node, uint32_t room)
{
    stk_lmdb_file *f = w->f;
    uint16_t flags = get16(node + 4), ksize = get16(node + 6);
    uint64_t dsize = (uint64_t)get16(node) | (uint64_t)get16(node + 2) << 16;
    const uint8_t *key = node + NODE_HEADER;
    uint16_t allowed = w->main_db ? F_SUBDATA : F_BIGDATA;
    if (flags & ~allowed)
        return damaged("database \"%s\", page %" PRIu64 ", node %u: flags 0x%x", w->db_name, pgno,
                       i, flags);
    if (w->main_db && (!(flags & F_SUBDATA) || dsize != DB_RECORD))
        return stk_error(STK_ERR_FORMAT, "the main database holds \"%.*s\", not a named database",
                         ksize < 64 ? (int)ksize : 64, (const char *)key);
    if (ksize > MAX_KEY)
        return damaged("database \"%s\", page %" PRIu64 ", node %u: key of %u bytes", w->db_name,
                       pgno, i, ksize);
    uint64_t inline_data = flags & F_BIGDATA ? 8 : dsize;
    if ((uint64_t)NODE_HEADER + ksize + inline_data > room)
        return damaged("database \"%s\", page %" PRIu64 ", node %u runs past its page", w->db_name,
                       pgno, i);
    if (w->prev_key && key_cmp(w->prev_key, w->prev_len, key, ksize) >= 0)
        return damaged("database \"%s\", page %" PRIu64 ", node %u: keys out of order", w->db_name,
                       pgno, i);
    w->prev_key = key;
    w->prev_len = ksize;
    uint64_t value_offset;
    const uint8_t *data = key + ksize;
    if (flags & F_BIGDATA) {
        uint64_t first = get64(data);
        uint64_t pages = (PAGE_HEADER - 1 + dsize) / f->page_size + 1;
        stk_status st = claim_pages(w, first, pages, "an overflow run");
        if (st != STK_OK) return st;
        w->overflow += pages;
        value_offset = first * f->page_size + PAGE_HEADER;
    } else {
        value_offset = (uint64_t)(data - f->base);
    }
    w->entries++;
    return w->fn(w->ctx, key, ksize, value_offset, dsize);
}

static stk_status walk_page(walk *w, uint64_t pgno, unsigned level)
{
    stk_lmdb_file *f = w->f;
    stk_status st = claim_pages(w, pgno, 1, level ? "a child page" : "the root page");
    if (st != STK_OK) return st;
    const uint8_t *p = f->base + pgno * f->page_size;
    bool leaf = level + 1u == w->db->depth;
    uint16_t want = leaf ? P_LEAF : P_BRANCH;
    if (get64(p) != pgno)
        return damaged("database \"%s\", page %" PRIu64 ": header says page %" PRIu64, w->db_name,
                       pgno, get64(p));
    if (get16(p + 10) != want)
        return damaged("database \"%s\", page %" PRIu64 ": flags 0x%x where a %s page belongs",
                       w->db_name, pgno, get16(p + 10), leaf ? "leaf" : "branch");
    uint16_t lower = get16(p + 12), upper = get16(p + 14);
    if (lower < PAGE_HEADER + 2 || lower > upper || upper > f->page_size || lower % 2)
        return damaged("database \"%s\", page %" PRIu64 ": bounds %u..%u in a %u-byte page",
                       w->db_name, pgno, lower, upper, f->page_size);
    unsigned n = (lower - PAGE_HEADER) / 2u;
    /* The walk is bound by memory latency (a page's nodes lie at its far
     * end, one cache miss each): ask for every node of a leaf at once, and
     * for the next child's header while a branch's child is walked.
     * Prefetches never fault, and the offsets are range-checked below. */
    if (leaf)
        for (unsigned i = 0; i < n; i++)
            __builtin_prefetch(p + (get16(p + PAGE_HEADER + 2 * i) & (f->page_size - 1)));
    for (unsigned i = 0; i < n; i++) {
        uint16_t off = get16(p + PAGE_HEADER + 2 * i);
        if (off < upper || (uint32_t)off + NODE_HEADER > f->page_size)
            return damaged("database \"%s\", page %" PRIu64 ": node %u at offset %u lies outside "
                           "the node area %u..%u",
                           w->db_name, pgno, i, off, upper, f->page_size);
        const uint8_t *node = p + off;
        if (leaf) {
            st = leaf_node(w, pgno, i, node, f->page_size - off);
        } else {
            if (off + NODE_HEADER + (uint32_t)get16(node + 6) > f->page_size)
                return damaged("database \"%s\", page %" PRIu64 ", node %u runs past its page",
                               w->db_name, pgno, i);
            uint64_t child = (uint64_t)get16(node) | (uint64_t)get16(node + 2) << 16 |
                             (uint64_t)get16(node + 4) << 32;
            if (i + 1 < n) {
                const uint8_t *next = p + (get16(p + PAGE_HEADER + 2 * i + 2) & (f->page_size - 8));
                uint64_t pg = (uint64_t)get16(next) | (uint64_t)get16(next + 2) << 16;
                if (pg <= f->last_page) __builtin_prefetch(f->base + pg * f->page_size);
            }
            st = walk_page(w, child, level + 1);
        }
        if (st != STK_OK) return st;
    }
    if (leaf)
        w->leaf++;
    else
        w->branch++;
    return STK_OK;
}

static stk_status walk_db(stk_lmdb_file *f, const stk_lmdb_db *db, const char *name, bool main_db,
                          stk_lmdb_entry_fn fn, void *ctx)
{
    if (db->flags != 0)
        return damaged("database \"%s\": flags 0x%x (Stoke writes 0)", name, db->flags);
    if (db->root == UINT64_MAX) {
        if (db->depth || db->entries || db->branch_pages || db->leaf_pages || db->overflow_pages)
            return damaged("database \"%s\": empty, but its record counts pages", name);
        return STK_OK;
    }
    if (db->depth == 0 || db->depth > MAX_DEPTH)
        return damaged("database \"%s\": tree depth %u", name, db->depth);
    walk *w = calloc(1, sizeof *w);
    if (!w) return stk_error(STK_ERR_NOMEM, "out of memory");
    *w = (walk){.f = f, .db = db, .db_name = name, .main_db = main_db, .fn = fn, .ctx = ctx};
    stk_status st = walk_page(w, db->root, 0);
    if (st == STK_OK && (w->branch != db->branch_pages || w->leaf != db->leaf_pages ||
                w->overflow != db->overflow_pages || w->entries != db->entries))
        st = damaged("database \"%s\": its record counts %" PRIu64 "/%" PRIu64 "/%" PRIu64
                     " branch/leaf/overflow pages and %" PRIu64 " entries, the tree holds %" PRIu64
                     "/%" PRIu64 "/%" PRIu64 " and %" PRIu64,
                     name, db->branch_pages, db->leaf_pages, db->overflow_pages, db->entries,
                     w->branch, w->leaf, w->overflow, w->entries);
    free(w);
    return st;
}

/* Meta page `which` at byte offset `off`; *magic_ok tells a damaged meta from
 * a file that is not LMDB at all. */
static stk_status read_meta(const uint8_t *base, uint64_t size, uint64_t off, unsigned which,
                            uint32_t *psize, uint64_t *last, uint64_t *txnid, stk_lmdb_db *main,
                            bool *magic_ok)
{
    *magic_ok = false;
    if (off + META_BYTES > size)
        return damaged("meta page %u lies past the end of the file", which);
    const uint8_t *p = base + off;
    if (get32(p + 16) != META_MAGIC) return damaged("meta page %u: bad magic", which);
    *magic_ok = true;
    if (get32(p + 20) != META_VERSION)
        return stk_error(STK_ERR_FORMAT, "LMDB data version %u (this stoke reads version %d)",
                         get32(p + 20), META_VERSION);
    if (get64(p) != which || get16(p + 10) != P_META)
        return damaged("meta page %u: page number %" PRIu64 ", flags 0x%x", which, get64(p),
                       get16(p + 10));
    *psize = get32(p + 40); /* the free database's pad holds the page size */
    if (*psize < 256 || *psize > 32768 || (*psize & (*psize - 1)))
        return damaged("meta page %u: page size %u", which, *psize);
    *last = get64(p + 136);
    *txnid = get64(p + 144);
    read_db(p + 88, main);
    return STK_OK;
}

static stk_status collect_named(void *ctx, const uint8_t *key, uint32_t key_len,
                                uint64_t value_offset, uint64_t value_len)
{
    (void)value_len; /* DB_RECORD: leaf_node checked it */
    stk_lmdb_file *f = ctx;
    named_list *l = f->named;
    if (l->n == MAX_NAMED)
        return stk_error(STK_ERR_FORMAT, "more than %d named databases", MAX_NAMED);
    named_db *d = &l->item[l->n++];
    memcpy(d->name, key, key_len);
    d->name[key_len] = '\0';
    read_db(f->base + value_offset, &d->db);
    return STK_OK;
}

stk_status stk_lmdb_file_init(stk_lmdb_file *f, const uint8_t *base, uint64_t size)
{
    memset(f, 0, sizeof *f);
    f->base = base;
    f->size = size;
    uint32_t ps[2] = {0, 0};
    uint64_t last[2] = {0, 0}, txn[2] = {0, 0};
    stk_lmdb_db main[2];
    bool magic0, magic1;
    stk_status st0 = read_meta(base, size, 0, 0, &ps[0], &last[0], &txn[0], &main[0], &magic0);
    /* Meta page 1 follows page 0: at meta 0's page size, or at the usual 4 KiB
     * when meta 0 is unreadable (to tell a damaged file from a foreign one). */
    uint64_t off1 = st0 == STK_OK ? ps[0] : 4096;
    stk_status st1 = read_meta(base, size, off1, 1, &ps[1], &last[1], &txn[1], &main[1], &magic1);
    if (!magic0 && !magic1) return stk_error(STK_ERR_FORMAT, "not an LMDB file");
    if (st0) return st0;
    if (st1) return st1;
    if (ps[0] != ps[1]) return damaged("meta pages give page sizes %u and %u", ps[0], ps[1]);
    int m = txn[1] > txn[0]; /* the newer meta wins, as in LMDB */
    f->page_size = ps[m];
    f->last_page = last[m];
    f->txnid = txn[m];
    f->main = main[m];
    if (f->last_page < 1) return damaged("meta page %d: last page %" PRIu64, m, f->last_page);
    if (f->last_page >= size / f->page_size)
        return stk_error(STK_ERR_CORRUPT,
                         "file is truncated: %" PRIu64 " bytes, but its LMDB meta page says it "
                         "holds %" PRIu64 " pages of %u bytes (re-pack or copy it again)",
                         size, f->last_page + 1, f->page_size);
    f->visited = calloc(f->last_page / 64 + 1, sizeof *f->visited);
    f->named = calloc(1, sizeof(named_list));
    if (!f->visited || !f->named) {
        stk_lmdb_file_deinit(f);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    /* The main database maps names to named databases: read it once here. */
    stk_status st = walk_db(f, &f->main, "main", true, collect_named, f);
    if (st != STK_OK) stk_lmdb_file_deinit(f);
    return st;
}

void stk_lmdb_file_deinit(stk_lmdb_file *f)
{
    free(f->visited);
    free(f->named);
    f->visited = NULL;
    f->named = NULL;
}

static const named_db *find_named(const stk_lmdb_file *f, const char *name)
{
    const named_list *l = f->named;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->item[i].name, name) == 0) return &l->item[i];
    return NULL;
}

stk_status stk_lmdb_file_find_db(const stk_lmdb_file *f, const char *name, stk_lmdb_db *out)
{
    const named_db *d = find_named(f, name);
    if (!d) return STK_END;
    *out = d->db;
    return STK_OK;
}

stk_status stk_lmdb_file_walk(stk_lmdb_file *f, const char *name, stk_lmdb_entry_fn fn, void *ctx)
{
    const named_db *d = find_named(f, name);
    if (!d) return STK_END;
    return walk_db(f, &d->db, d->name, false, fn, ctx);
}
