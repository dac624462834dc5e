/* load-chunk.h: what the parallel `nodes` reader's files share
 * (load-nodes.c: rounds and merging; load-node.c: one node into a chunk's
 * records; load-tape.c: values in their general form). Not a contract
 * outside them. */
#pragma once

#include "graph-private.h"
#include "load-private.h"

#include <string.h>

/* Nesting the tape reads (the node reader declines at 256). */
#define TAPE_DEPTH 200

enum { V_NULL, V_FALSE, V_TRUE, V_NUM, V_STR, V_ARR, V_OBJ };

/* One value of a node's args, kwargs or meta, in text order: containers
 * before their members, an object's member as its key (V_STR) then its
 * value. */
typedef struct {
  uint8_t type;
  uint32_t n;    /* ARR: items; OBJ: members; STR: bytes */
  uint32_t next; /* the entry after this value and its members */
  union {
    double d;
    const char *s; /* not NUL-terminated unless it had escapes */
  };
} Val;

typedef struct {
  uint32_t name_off, name_len; /* in the chunk's blob */
  uint64_t hash;
  uint32_t target; /* a const */
  bool has_tuple;  /* tuple_first was set (an empty tuple too) */
} Rec;

/* A string and its sg_name_hash: what a KeySet finds. */
typedef struct {
  const char *s;
  uint32_t len;
  uint64_t hash;
} Key;

/* A string of targets, keys and string arguments, once per chunk. */
typedef struct {
  Key key;            /* .s NUL-terminated, in the chunk's arena */
  const char *global; /* interned in g->strings (merge) */
  SgOpKind kind;      /* sg_op_from_target (global) */
} Const;

typedef Key Ref; /* a name as referenced */

/* The readers' one hash set (a chunk's constants, a node's long
 * reference list, the strings interned so far): indices of an array whose
 * elements start with a Key, @stride bytes apart, found by their Key.
 * Open addressing, index + 1 per slot (0: empty), kept at most half full
 * by its user. */
typedef struct {
  uint32_t *slots;
  size_t cap; /* a power of two (0: none yet) */
  size_t count;
} KeySet;

/* Empties @set into @cap slots and puts in entries @first to @first + @n
 * - 1 of @keys / empties it, keeping its slots / frees them. */
void sg_keyset_fill (KeySet *set, size_t cap, const void *keys, size_t stride, size_t first,
                     size_t n);
void sg_keyset_empty (KeySet *set);
void sg_keyset_clear (KeySet *set);

/* The index of @set's entry equal to the @len bytes at @s (hash @h), or
 * -1 with *@slot where it goes (sg_keyset_put). */
static inline int64_t
sg_keyset_find (const KeySet *set, const void *keys, size_t stride, const char *s, uint32_t len,
                uint64_t h, size_t *slot)
{
  size_t mask = set->cap - 1, at = h & mask;
  for (; set->slots[at]; at = (at + 1) & mask) {
    size_t i = set->slots[at] - 1;
    const Key *k = (const Key *)(const void *)((const char *)keys + i * stride);
    if (k->hash == h && k->len == len && memcmp (k->s, s, len) == 0)
      return (int64_t)i;
  }
  *slot = at;
  return -1;
}

static inline void
sg_keyset_put (KeySet *set, size_t slot, size_t index)
{
  set->slots[slot] = (uint32_t)index + 1;
  set->count++;
}

#define ARR(type, name)                                                                            \
  type *name;                                                                                      \
  size_t n_##name, cap_##name

typedef struct {
  const char *start, *limit; /* elements from @start while below @limit */
  const char *stop;          /* where the next element starts (or past ']') */
  bool closed, failed;
  int32_t outputs;
  ARR (SgNode, nodes); /* chunk-relative offsets; name, target unset */
  ARR (Rec, recs);
  ARR (char, blob);  /* the names, each NUL-terminated */
  ARR (SgArg, args); /* strings: .i is a const's index */
  ARR (int64_t, dims);
  ARR (SgMeta, tuples);
  ARR (Ref, refs); /* each node's distinct references: its inputs */
  ARR (Const, consts);
  KeySet cset;            /* the consts */
  ARR (Val, tape);
  ARR (SgArg, top);       /* args read directly: the list's items, */
  ARR (SgArg, inner);     /* and the items of lists among them */
  KeySet rset;            /* a long reference list's refs */
  uint32_t rset_node;     /* the node's first ref the set is for (+ 1) */
  SgLoadArena arena;
  char decimal_point;
  const char *dt_s; /* the last dtype spelling read, and its dtype */
  uint32_t dt_len;
  SgDtype dt;
  /* merge: where the chunk goes */
  SgNodeId node_base;
  uint32_t args_base, dims_base, tuples_base, inputs_base;
  const char *names_base;
} Chunk;

void sg_chunk_grow (void **p, size_t *cap, size_t need, size_t elem);
/* Room for @more entries of chunk array @name. */
#define RESERVE(c, name, more)                                                                     \
  do {                                                                                             \
    if ((c)->n_##name + (more) > (c)->cap_##name)                                                  \
      sg_chunk_grow ((void **)&(c)->name, &(c)->cap_##name, (c)->n_##name + (more),                \
                     sizeof *(c)->name);                                                           \
  } while (0)

/* --- text ------------------------------------------------------------------- */

/* The number at @p (sg_load_number), its small-integer path inlined. */
static inline const char *
sg_chunk_number (Chunk *c, const char *p, const char *end, double *out)
{
  int64_t v;
  const char *q = sg_load_small_int (p, end, &v);
  if (q) {
    *out = (double)v;
    return q;
  }
  return sg_load_number (p, end, out, &c->decimal_point);
}

static inline bool
text_is (const char *s, uint32_t len, const char *word, uint32_t n)
{
  return len == n && memcmp (s, word, n) == 0;
}

/* json_int: a number within +-2^62 with an integral value. */
static inline bool
sg_tape_int (const Val *v, int64_t *out)
{
  return v->type == V_NUM && sg_int62 (v->d, out);
}

/* --- load-node.c ------------------------------------------------------------- */

/* Empties @c for a new start (keeping its memory) / frees its memory. */
void sg_chunk_reset (Chunk *c);
void sg_chunk_clear (Chunk *c);
/* The string whose opening quote is at @p: its text at *@s (in the
 * arena, NUL-terminated, when it had escapes), *@len bytes. Returns the
 * end, NULL to decline. */
const char *sg_chunk_string (Chunk *c, const char *p, const char *end, const char **s,
                             uint32_t *len);
/* The chunk's const for the @len bytes at @s. */
uint32_t sg_chunk_const (Chunk *c, const char *s, uint32_t len);
/* A string argument at keyword @key (NULL: none), as str_arg and
 * sg_arg_classify make it; .i holds the const until the merge. */
SgArg sg_chunk_string_arg (Chunk *c, const char *s, uint32_t len, const char *key);
/* The input index of the reference to the @len bytes at @s in the node
 * whose references start at @first: its earlier one, or a new one. */
uint32_t sg_chunk_ref (Chunk *c, uint32_t first, const char *s, uint32_t len);
/* Parses elements from c->start while below c->limit (the text ends at
 * @end): c->stop, c->closed, c->failed and the records. */
void sg_chunk_parse (Chunk *c, const char *end);

/* --- load-tape.c --------------------------------------------------------------- */

/* One value at @p onto the tape. Returns its end, NULL to decline. */
const char *sg_tape_value (Chunk *c, const char *p, const char *end, int depth);
/* The node's args (tape array @args, -1 absent, -2 read into c->top and
 * c->inner) and kwargs (tape object or -1) into the chunk's pool, its
 * references from @ref_first on: sg_args_from_json. False where it fails. */
bool sg_tape_args (Chunk *c, int64_t args, int64_t kwargs, uint32_t ref_first, SgNode *n);
/* The node's meta (tape value @m or -1): a tuple's elements, or its own
 * (parse_meta). False where it fails. */
bool sg_tape_meta (Chunk *c, int64_t m, SgNode *n, Rec *rec);
/* A tensor meta whose @ndim extents at @sh (integers >= 0), strides at
 * @st (NULL: a contiguous tensor's) and dtype @dt are read, into the
 * chunk's dims and *@out: parse_meta's rules past reading its fields.
 * False where one fails. @sh and @st are arrays of SG_MAX_DIMS. */
static inline bool
sg_chunk_meta (Chunk *c, const int64_t *sh, int ndim, int64_t *st, SgDtype dt, SgMeta *out)
{
  if (ndim < 0 || ndim > SG_MAX_DIMS) /* read already; the bound keeps the copies short */
    return false;
  uint64_t numel = 1;
  for (int i = 0; i < ndim; i++)
    if (!sg_numel_times (&numel, sh[i]))
      return false;
  if (!sg_numel_bytes_ok (numel, dt))
    return false;
  int64_t own[SG_MAX_DIMS];
  if (!st)
    sg_shape_strides (sh, ndim, st = own);
  /* whole arrays, a fixed size (a few moves, no call): past 2 * @ndim the
   * dims hold nothing yet */
  RESERVE (c, dims, (size_t)ndim + SG_MAX_DIMS);
  memcpy (&c->dims[c->n_dims], sh, SG_MAX_DIMS * sizeof *sh);
  memcpy (&c->dims[c->n_dims + (size_t)ndim], st, SG_MAX_DIMS * sizeof *st);
  *out = (SgMeta){ .ndim = ndim, .dtype = dt, .first = (uint32_t)c->n_dims };
  c->n_dims += 2 * (size_t)ndim;
  return true;
}
/* The dtype the @len bytes at @s name, or SG_DTYPE_INVALID. */
SgDtype sg_chunk_dtype (Chunk *c, const char *s, uint32_t len);
