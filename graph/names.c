/* names.c: a table of node names built on worker threads (graph-private.h).
 *
 * The loader resolves references by name and the validator checks that
 * names are distinct (through the loader's table, which the graph keeps in
 * g->name_table until its nodes change, or one of its own); neither needs
 * g->by_name (a GHashTable filled one name at a time: a million inserts,
 * each a cache miss or two, on one thread). This table is split into SG_NAME_PARTS parts by the top bits
 * of a name's hash; each part is an open-addressing array filled by one
 * task, so the parts fill in parallel and a part's names go in in id
 * order. An entry is the low 32 bits of the hash and the id; names are
 * read (the nodes', through a pointer and stride the caller gives) and
 * compared only where those bits agree. What it answers never depends on
 * the thread count. Mirrors the partitioned hash joins of parallel databases
 * (radix-partition, then one table per partition).
 *
 * Requires: nothing (the caller gives the names). Invalidates: nothing.
 */
#include "graph-private.h"

#include <math.h>
#include <string.h>

#define PART_BITS 6
G_STATIC_ASSERT (SG_NAME_PARTS == 1 << PART_BITS);
#define PART_MIN 64
/* Ranges are bucketed by part in blocks of this many names. */
#define BLOCK 8192

/* A slot: the low 32 bits of the name's hash and the id + 1 (0: empty). */
typedef struct {
  uint32_t tag;
  int32_t id1;
} Slot;

/* Node @id's name: @names (node 0's) and every @stride bytes on. */
static inline const char *
name_of (const char *names, size_t stride, SgNodeId id)
{
  return *(const char *const *)(const void *)(names + (size_t)id * stride);
}

typedef struct {
  Slot *slots;
  uint32_t cap, count;
} Part;

struct SgNameTable {
  Part parts[SG_NAME_PARTS];
};

static inline uint64_t
load8 (const char *s)
{
  uint64_t w;
  memcpy (&w, s, sizeof w);
  return w;
}

static inline uint64_t
load4 (const char *s)
{
  uint32_t w;
  memcpy (&w, s, sizeof w);
  return w;
}

uint64_t
sg_name_hash (const char *s, size_t len)
{
  const uint64_t k = 0x9E3779B97F4A7C15u;
  const char *e = s + len;
  uint64_t h = 0x243F6A8885A308D3u ^ (len * k);
  for (; e - s > 8; s += 8) {
    h = (h ^ load8 (s)) * k;
    h ^= h >> 29;
  }
  /* the last 1 to 8 bytes, read as whole words where they can be */
  uint64_t w = 0;
  if (len >= 8)
    w = load8 (e - 8);
  else if (len >= 4)
    w = load4 (s) << 32 | load4 (e - 4);
  else if (len > 0)
    w = (uint64_t)(unsigned char)s[0] << 16 | (uint64_t)(unsigned char)s[len / 2] << 8
        | (unsigned char)e[-1];
  h = (h ^ w) * k;
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93u;
  return h ^ (h >> 29);
}

static inline uint32_t
part_of (uint64_t hash)
{
  return (uint32_t)(hash >> (64 - PART_BITS));
}

SgNameTable *
sg_name_table_new (void)
{
  return g_new0 (SgNameTable, 1);
}

void
sg_name_table_free (SgNameTable *t)
{
  if (!t)
    return;
  for (int i = 0; i < SG_NAME_PARTS; i++)
    g_free (t->parts[i].slots);
  g_free (t);
}

/* Room for @count names, at most two thirds full. */
static void
part_reserve (Part *p, uint32_t count)
{
  uint32_t cap = p->cap ? p->cap : PART_MIN;
  while ((uint64_t)count * 3 > (uint64_t)cap * 2)
    cap *= 2;
  if (cap == p->cap)
    return;
  Slot *slots = g_new0 (Slot, cap);
  for (uint32_t i = 0; i < p->cap; i++) {
    if (!p->slots[i].id1)
      continue;
    uint32_t at = p->slots[i].tag & (cap - 1);
    while (slots[at].id1)
      at = (at + 1) & (cap - 1);
    slots[at] = p->slots[i];
  }
  g_free (p->slots);
  p->slots = slots;
  p->cap = cap;
}

void
sg_name_table_reserve (SgNameTable *t, int64_t n)
{
  /* parts fill about evenly: their share and a few deviations more */
  double share = (double)n / SG_NAME_PARTS;
  uint32_t each = (uint32_t)MIN (share + 4 * sqrt (share), G_MAXINT32 / 4);
  for (int i = 0; i < SG_NAME_PARTS; i++)
    part_reserve (&t->parts[i], each);
}

/* Inserts node @id named @name; returns the id already holding the name,
 * or -1. */
static SgNodeId
part_insert (Part *p, const char *names, size_t stride, const char *name, SgNodeId id,
             uint64_t hash)
{
  part_reserve (p, p->count + 1);
  uint32_t tag = (uint32_t)hash, mask = p->cap - 1;
  for (uint32_t at = tag & mask;; at = (at + 1) & mask) {
    Slot *e = &p->slots[at];
    if (!e->id1) {
      *e = (Slot){ tag, id + 1 };
      p->count++;
      return -1;
    }
    if (e->tag == tag && strcmp (name_of (names, stride, e->id1 - 1), name) == 0)
      return e->id1 - 1;
  }
}

int64_t
sg_name_table_count (const SgNameTable *t)
{
  int64_t n = 0;
  for (int i = 0; i < SG_NAME_PARTS; i++)
    n += t->parts[i].count;
  return n;
}

SgNodeId
sg_name_table_find (const SgNameTable *t, const char *const *names, size_t stride, const char *s,
                    size_t len, uint64_t hash)
{
  const Part *p = &t->parts[part_of (hash)];
  if (!p->cap)
    return SG_NO_NODE;
  uint32_t tag = (uint32_t)hash, mask = p->cap - 1;
  for (uint32_t at = tag & mask;; at = (at + 1) & mask) {
    const Slot *e = &p->slots[at];
    if (!e->id1)
      return SG_NO_NODE;
    if (e->tag != tag)
      continue;
    const char *name = name_of ((const char *)names, stride, e->id1 - 1);
    if (strncmp (name, s, len) == 0 && name[len] == '\0')
      return e->id1 - 1;
  }
}

/* --- adding a range on worker threads ---------------------------------------- */

/* A name to add, in its part's order. */
typedef struct {
  uint64_t hash;
  const char *name;
} Item;

typedef struct {
  SgNameTable *t;
  const char *names; /* node 0's name pointer; node i's i @stride bytes on */
  size_t stride;
  SgNodeId from;
  int32_t n, n_blocks;
  const uint64_t *hash;
  uint32_t *count; /* [block][part], then each block's start in @items */
  Item *items;     /* by part, then by id */
  uint32_t *order; /* their offsets in the range */
  uint32_t part_start[SG_NAME_PARTS + 1];
  int32_t dups[SG_NAME_PARTS];
} AddJob;

static void
count_block (gpointer data, int32_t b, int32_t worker)
{
  AddJob *j = data;
  (void)worker;
  uint32_t *c = &j->count[(size_t)b * SG_NAME_PARTS];
  int32_t lo = b * BLOCK, hi = MIN (j->n, lo + BLOCK);
  for (int32_t i = lo; i < hi; i++)
    c[part_of (j->hash[i])]++;
}

static void
scatter_block (gpointer data, int32_t b, int32_t worker)
{
  AddJob *j = data;
  (void)worker;
  uint32_t *at = &j->count[(size_t)b * SG_NAME_PARTS];
  int32_t lo = b * BLOCK, hi = MIN (j->n, lo + BLOCK);
  for (int32_t i = lo; i < hi; i++) {
    uint32_t k = at[part_of (j->hash[i])]++;
    j->items[k] = (Item){ j->hash[i], name_of (j->names, j->stride, j->from + i) };
    j->order[k] = (uint32_t)i;
  }
}

static void
fill_part (gpointer data, int32_t part, int32_t worker)
{
  AddJob *j = data;
  (void)worker;
  Part *p = &j->t->parts[part];
  part_reserve (p, p->count + (j->part_start[part + 1] - j->part_start[part]));
  for (uint32_t k = j->part_start[part]; k < j->part_start[part + 1]; k++)
    if (part_insert (p, j->names, j->stride, j->items[k].name, j->from + (SgNodeId)j->order[k],
                     j->items[k].hash)
        >= 0)
      j->dups[part]++;
}

int64_t
sg_name_table_add (SgNameTable *t, const char *const *names, size_t stride, const uint64_t *hash,
                   SgNodeId from, int32_t n, SgPool *pool)
{
  if (n <= 0)
    return 0;
  AddJob j = {
    .t = t, .names = (const char *)names, .stride = stride, .from = from, .n = n, .hash = hash
  };
  j.n_blocks = (n + BLOCK - 1) / BLOCK;
  j.count = g_new0 (uint32_t, (size_t)j.n_blocks * SG_NAME_PARTS);
  j.items = g_new (Item, (size_t)n);
  j.order = g_new (uint32_t, (size_t)n);
  sg_pool_run (pool, j.n_blocks, count_block, &j);
  /* each (part, block) its start: parts in order, blocks in order within */
  uint32_t at = 0;
  for (int p = 0; p < SG_NAME_PARTS; p++) {
    j.part_start[p] = at;
    for (int32_t b = 0; b < j.n_blocks; b++) {
      uint32_t c = j.count[(size_t)b * SG_NAME_PARTS + (size_t)p];
      j.count[(size_t)b * SG_NAME_PARTS + (size_t)p] = at;
      at += c;
    }
  }
  j.part_start[SG_NAME_PARTS] = at;
  sg_pool_run (pool, j.n_blocks, scatter_block, &j);
  sg_pool_run (pool, SG_NAME_PARTS, fill_part, &j);
  int64_t dups = 0;
  for (int p = 0; p < SG_NAME_PARTS; p++)
    dups += j.dups[p];
  g_free (j.count);
  g_free (j.items);
  g_free (j.order);
  return dups;
}

/* --- a graph's names ------------------------------------------------------------ */

/* Nodes per task of sg_name_table_of's hashes. */
#define HASH_BLOCK 8192

typedef struct {
  const SgGraph *g;
  uint64_t *hash;
  gint unnamed;
} HashJob;

static void
hash_task (gpointer data, int32_t b, int32_t worker)
{
  (void)worker;
  HashJob *h = data;
  SgNodeId lo, hi;
  sg_range_of (b, HASH_BLOCK, h->g->n_nodes, &lo, &hi);
  for (SgNodeId id = lo; id < hi; id++) {
    const char *name = h->g->nodes[id].name;
    if (!name) {
      g_atomic_int_set (&h->unnamed, 1);
      return;
    }
    h->hash[id] = sg_name_hash (name, strlen (name));
  }
}

SgNameTable *
sg_name_table_of (const SgGraph *g, SgPool *pool, int64_t *dups)
{
  HashJob h = { g, g_new (uint64_t, (size_t)MAX (g->n_nodes, 1)), 0 };
  sg_pool_run (pool, sg_ranges (g->n_nodes, HASH_BLOCK), hash_task, &h);
  SgNameTable *t = NULL;
  if (!g_atomic_int_get (&h.unnamed)) {
    t = sg_name_table_new ();
    *dups = sg_name_table_add (t, &g->nodes[0].name, sizeof (SgNode), h.hash, 0, g->n_nodes,
                               pool);
  }
  g_free (h.hash);
  return t;
}

