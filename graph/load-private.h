/* load-private.h: what load.c, load-nodes.c, load-json.c, load-scan.c and
 * load-refs.c share. */
#pragma once

#include "graph.h"
#include "textio.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* First {"node": NAME} in @v, depth first (the order graph.c walks), whose
 * NAME is not a node of @g yet; its location is appended to @path. */
const char *sg_load_first_undefined (const SgGraph *g, const cJSON *v, GString *path);

/* Replaces *@error (the append failure of node @name, element @index of
 * `nodes`, whose reference to @missing at @field did not resolve) with a
 * message saying forward reference, cycle or dangling reference. @rest
 * points just after the node's element, @end at the end of the document. */
void sg_load_diagnose_ref (const char *name, int index, const char *field, const char *missing,
                           const char *rest, const char *end, GError **error);

/* The readers' arena (load-json.c): a chain of blocks kept from one use
 * to the next (a node's tree in the node reader, a chunk's strings in the
 * parallel one), allocations aligned to max_align_t. */
typedef struct SgLoadBlock SgLoadBlock;
typedef struct {
  SgLoadBlock *head, *cur; /* cur: the block being filled (NULL: none yet) */
  char *next, *limit;      /* its free space */
} SgLoadArena;
SgLoadArena *sg_load_arena_new (void);
void sg_load_arena_free (SgLoadArena *a);
/* Drops what @a holds, keeping its blocks / frees its blocks (@a stays
 * usable). */
void sg_load_arena_reset (SgLoadArena *a);
void sg_load_arena_clear (SgLoadArena *a);
/* sg_load_arena_alloc's way out: the next block with room for @n bytes. */
void *sg_load_arena_grow (SgLoadArena *a, size_t n);

/* @n bytes of @a (rounded up to a multiple of max_align_t's size), valid
 * until its next reset. */
static inline void *
sg_load_arena_alloc (SgLoadArena *a, size_t n)
{
  n = (n + sizeof (max_align_t) - 1) & ~(sizeof (max_align_t) - 1);
  if ((size_t)(a->limit - a->next) < n)
    return sg_load_arena_grow (a, n);
  void *p = a->next;
  a->next += n;
  return p;
}

/* (transfer none) The node object at @p (leading JSON whitespace allowed),
 * read into @a, which it empties first: the tree cJSON_Parse would give,
 * valid until the next call. *@stop: just past the object. NULL when the
 * text is outside the reader's strict subset (any syntax error included):
 * the caller parses it with cJSON. */
const cJSON *sg_load_read_node (SgLoadArena *a, const char *p, const char *end,
                                const char **stop);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SgLoadArena, sg_load_arena_free)

/* The node reader's text primitives (load-json.c), which the parallel
 * reader (load-nodes.c) shares. The first '"' or '\\' in [@p, @end), or
 * @end: sixteen bytes at a time where SSE2 is there (a match sets its bit
 * of the mask), then eight, then one. */
static inline const char *
sg_load_quote_or_backslash (const char *p, const char *end)
{
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8 ('"'), backslash = _mm_set1_epi8 ('\\');
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128 ((const __m128i *)(const void *)p);
    const int hits = _mm_movemask_epi8 (
        _mm_or_si128 (_mm_cmpeq_epi8 (v, quote), _mm_cmpeq_epi8 (v, backslash)));
    if (hits)
      return p + __builtin_ctz ((unsigned)hits);
    p += 16;
  }
#endif
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  while (end - p >= 8) {
    uint64_t w;
    memcpy (&w, p, sizeof w);
    uint64_t a = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t hits = ((a - ones) & ~a & highs) | ((b - ones) & ~b & highs);
    if (hits) /* the lowest flagged byte is a match (little-endian) */
      return p + (__builtin_ctzll (hits) >> 3);
    p += 8;
  }
#endif
  while (p < end && *p != '"' && *p != '\\')
    p++;
  return p;
}

/* The closing quote of the string whose opening quote is at @p (a
 * backslash skips the byte after it, as in cJSON), or NULL when the text
 * ends first; *@escapes: whether the string has a backslash. */
static inline const char *
sg_load_string_close (const char *p, const char *end, bool *escapes)
{
  const char *q = p + 1;
  *escapes = false;
  for (;;) {
    const char *hit = sg_load_quote_or_backslash (q, end);
    if (hit >= end)
      return NULL;
    if (*hit == '"')
      return hit;
    *escapes = true;
    q = hit + 2;
    if (q >= end)
      return NULL;
  }
}
static inline bool
sg_load_is_digit (char c)
{
  return (unsigned char)(c - '0') < 10;
}

/* Whether the @n bytes at @p (the text ends at @end) are @word. */
static inline bool
sg_load_literal (const char *p, const char *end, const char *word, size_t n)
{
  return (size_t)(end - p) >= n && memcmp (p, word, n) == 0;
}

/* The number at @p when it is a small integer: an optional '-' and 1 to
 * 15 digits without a leading zero ("0" alone, unsigned), nothing after
 * them that continues a number. *@v: its value (exact as a double, the
 * one strtod gives); returns its end, NULL for any other text
 * (sg_load_number reads the other numbers). The readers' fast path. */
static inline const char *
sg_load_small_int (const char *p, const char *end, int64_t *v)
{
  const char *q = p + (p < end && *p == '-'), *s = q;
  if (q >= end || !sg_load_is_digit (*q) || (*q == '0' && q > p))
    return NULL;
  int64_t x = 0;
  if (*q == '0')
    q++;
  else
    while (q < end && sg_load_is_digit (*q) && q - s < 15)
      x = x * 10 + (*q++ - '0');
  if (q < end && (sg_load_is_digit (*q) || *q == '.' || *q == 'e' || *q == 'E'))
    return NULL;
  *v = *p == '-' ? -x : x;
  return q;
}

/* The string between @s and its closing quote @q, escapes resolved, into
 * @out (room for q - s + 1 bytes), NUL-terminated: returns the NUL's
 * position, NULL to decline (an escape cJSON would read otherwise, or a
 * \u0000). */
char *sg_load_unescape (const char *s, const char *q, char *out);
/* The number at @p in JSON's grammar, as cJSON reads it, into *@out: its
 * end, or NULL to decline (outside the grammar, 63 characters or more, not
 * a finite double). *@decimal_point caches the locale's (0: not read). */
const char *sg_load_number (const char *p, const char *end, double *out, char *decimal_point);

/* load-nodes.c: the `nodes` list read on worker threads. Called as *@drop
 * (@drop_data, @p) when the text before @p is no longer needed. */
typedef void (*SgLoadDrop) (gpointer drop_data, const char *p);
/* Reads the list whose '[' is at @p into @g (which has groups and no
 * nodes) on @pool's threads (NULL: this one), in chunks of about @chunk
 * bytes (0: its own sizes); *@stop: just past its ']'.
 * False when it declines: text outside the strict JSON it reads, or any
 * node the sequential loader would refuse. @g is then to be dropped and
 * the document read again by the sequential loader, whose messages stand.
 * On success @g holds what the sequential loader builds, with g->by_name
 * left to be built by the first lookup. */
bool sg_load_nodes_fast (SgGraph *g, const char *p, const char *end, SgPool *pool,
                         size_t chunk, SgLoadDrop drop, gpointer drop_data, const char **stop);

/* How load.c reads `nodes`: sequentially, with the parallel reader first
 * (the sequential one where it declines: what the loader does), or (for
 * tests) with the parallel reader alone, NULL without an error where it
 * declines, with its usual chunks or with chunks of @SG_LOAD_SMALL bytes
 * (many chunks, rounds and wrong cuts on a small text). */
typedef enum { SG_LOAD_SEQUENTIAL, SG_LOAD_FAST, SG_LOAD_FAST_ONLY, SG_LOAD_FAST_SMALL } SgLoadMode;
#define SG_LOAD_SMALL 300
/* load.c: a graph from the @len bytes at @data (not validated), `nodes`
 * read as @mode says on @pool's threads. */
SgGraph *sg_load_buffer (const char *data, size_t len, const char *name, SgPool *pool,
                         SgLoadMode mode, GError **error);
