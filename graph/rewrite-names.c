/* rewrite-names.c: unique names for a committed rewrite's added nodes
 * (sg_rw_name_added, sg_rewrite_commit).
 *
 * An added node keeps the name its pass gave, else takes name_1, name_2
 * ... : the first that no base node (removed or not) and no earlier added
 * node has. The names tested are the wanted names and those with `_` and
 * digits after them, so only the base names of that form are looked up:
 * one pass over the base names (in ranges on the rewrite's pool) keeps
 * those whose length and first and last bytes, or those of the part
 * before `_` and the trailing digits, are a wanted name's (a filter of
 * bits); the tests then look names up in that small set, with the same
 * answers as a table of every base name.
 * Mirrors torch.fx's Graph._target_to_str / _Namespace.create_name.
 * Requires: the rewrite laid out (new ids). Invalidates: nothing.
 */
#include "graph-private.h"

#include <string.h>

/* Bits of the filter of (length, first byte, last byte) keys. */
#define FILTER_BITS 16
/* Base names per range of the pass over them. */
#define NAMES_RANGE 65536

/* The filter bit of a name whose part tested is @s[0 .. @len). */
static inline uint32_t
filter_bit (const char *s, size_t len)
{
  uint32_t k = (uint32_t)len * 0x9E3779B1u;
  if (len)
    k ^= ((uint32_t)(uint8_t)s[0] << 8 | (uint8_t)s[len - 1]) * 0x85EBCA77u;
  return (k ^ (k >> 16)) & ((1u << FILTER_BITS) - 1);
}

typedef struct {
  const SgGraph *g;
  int32_t n;
  const uint64_t *filter; /* 1 << FILTER_BITS bits: the wanted names' */
  GArray **found;         /* per range: SgNodeId, the base nodes that pass */
} Scan;

static inline bool
filter_has (const uint64_t *filter, uint32_t bit)
{
  return filter[bit / 64] >> (bit % 64) & 1;
}

/* Range @r of the base names: those that may be a name tested, the
 * wanted one itself or it, `_` and digits. */
static void
scan_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  const Scan *s = data;
  int32_t a, b;
  sg_range_of (r, NAMES_RANGE, s->n, &a, &b);
  GArray *found = s->found[r] = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  for (SgNodeId v = a; v < b; v++) {
    const char *name = s->g->nodes[v].name;
    size_t len = strlen (name), j = len;
    while (j > 0 && name[j - 1] >= '0' && name[j - 1] <= '9')
      j--;
    if (filter_has (s->filter, filter_bit (name, len))
        || (j < len && j > 0 && name[j - 1] == '_'
            && filter_has (s->filter, filter_bit (name, j - 1))))
      g_array_append_val (found, v);
  }
}

/* The base names of @g that a name derived from @wanted may equal (a
 * set of @g's strings). */
static GHashTable *
base_names_like (const SgGraph *g, GHashTable *wanted, SgPool *pool)
{
  g_autofree uint64_t *filter = g_new0 (uint64_t, (1u << FILTER_BITS) / 64);
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init (&it, wanted);
  while (g_hash_table_iter_next (&it, &key, NULL)) {
    const uint32_t bit = filter_bit (key, strlen (key));
    filter[bit / 64] |= (uint64_t)1 << (bit % 64);
  }
  const int32_t nr = sg_ranges (g->n_nodes, NAMES_RANGE);
  g_autofree GArray **found = g_new0 (GArray *, (size_t)nr);
  Scan s = { g, g->n_nodes, filter, found };
  sg_pool_run (pool, nr, scan_task, &s);
  GHashTable *like = g_hash_table_new (g_str_hash, g_str_equal);
  for (int32_t r = 0; r < nr; r++) {
    for (guint i = 0; i < found[r]->len; i++)
      g_hash_table_add (like, (gpointer)g->nodes[g_array_index (found[r], SgNodeId, i)].name);
    g_array_unref (found[r]);
  }
  return like;
}

void
sg_rw_name_added (SgRewrite *rw, SgNode *nodes, const SgNodeId *new_id)
{
  SgGraph *g = rw->g;
  g_autoptr (GHashTable) wanted = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint j = 0; j < rw->nodes->len; j++)
    g_hash_table_add (wanted, (gpointer)g_array_index (rw->nodes, SgNode, j).name);
  g_autoptr (GHashTable) base = base_names_like (g, wanted, rw->pool);
  g_autoptr (GHashTable) added = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint j = 0; j < rw->nodes->len; j++) {
    SgNodeId nid = new_id[rw->n0 + (int32_t)j];
    const char *want = g_array_index (rw->nodes, SgNode, j).name, *name = want;
    g_autofree char *made = NULL; /* a name with a number: made only then */
    for (int i = 1; g_hash_table_contains (added, name) || g_hash_table_contains (base, name);
         i++) {
      g_free (made);
      name = made = g_strdup_printf ("%s_%d", want, i);
    }
    const char *interned = g_string_chunk_insert (g->strings, name);
    g_hash_table_add (added, (gpointer)interned);
    if (nid != SG_NO_NODE)
      nodes[nid].name = interned;
  }
}
