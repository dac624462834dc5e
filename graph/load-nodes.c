/* load-nodes.c: the graph loader's `nodes` list on worker threads
 * (load-private.h, sg_load_nodes_fast).
 *
 * The list is read in rounds of a few megabytes. A round is cut into
 * chunks at likely element starts (a '{' after "}," that opens with the
 * key "name"); the chunks are parsed at once, each into records: its
 * nodes with chunk-relative offsets into its own pools (arguments, dims,
 * tuple metas), the names it defines and the names it references, as
 * they stand in the text. A chunk parses elements until it reaches the
 * next chunk's start; if it lands past it, the guess was wrong (a '{'
 * inside a string) and the next chunk is parsed again from where this
 * one stopped, so the cut never changes what is read. The round is then
 * merged: ids and pool offsets in file order, names copied into the
 * graph's strings (one block per chunk), strings of targets and
 * arguments interned once per chunk, nodes and pools copied at their
 * offsets; the names go into a table built on the threads (names.c),
 * references are resolved through it, and each node is finished
 * (sg_node_finish: kind, group, getitem index, the checks of the node and
 * its inputs). Every step but the offsets and interning runs on the pool;
 * a task writes only its chunk's nodes and pool ranges.
 *
 * What it reads is the node reader's strict JSON (load-json.c, the same
 * string and number primitives) and what sg_graph_append_with() builds
 * from it, entry for entry: the same pool layout (a list's slots reserved
 * before its items' nested lists), ints and floats, enum-typed strings,
 * inputs in order of first reference, default strides, NAN for no
 * cost_us. Anything else, a text it does not read or any rule a node
 * breaks (duplicate names, forward references, a bad shape, an output
 * that is not last...), makes it decline; the loader then reads the file
 * again sequentially, so every message comes from the one sequential path
 * and the result never depends on the thread count.
 *
 * Requires: the graph's groups (collectives are checked against them).
 * Invalidates: g->by_name (not built: the first lookup builds it); leaves
 * its table of the names in g->name_table for the validator.
 */
#include "load-chunk.h"

/* A round's bytes: its records (about 1.2 times its text) are what the
 * reader holds beside the graph. With one thread a round is one chunk;
 * with several, 4 chunks per thread within these bounds. */
#define ROUND ((size_t)4 << 20)
#define SEQ_ROUND ((size_t)64 << 10)
#define MIN_CHUNK ((size_t)16 << 10)
#define MAX_CHUNK ((size_t)512 << 10)
#define CHUNKS_PER_THREAD 4
/* From this many nodes on (an estimate from the first round) the name
 * table is sized once: growing it, a part at a time, costs a cache miss
 * per name moved. */
#define RESERVE_NAMES 65536
/* References are looked for among the chunk's last nodes first. */
#define RECENT 8

typedef struct {
  SgGraph *g;
  SgPool *pool;
  size_t chunk; /* bytes per chunk; 0: by the thread count */
  const char *end;
  Chunk *chunks;
  int32_t n_chunks, cap_chunks;
  SgNameTable *names;
  GArray *interned; /* Const: every string interned so far, by @iset */
  KeySet iset;
  uint64_t *hash; /* the round's names' hashes, by id - round_base */
  size_t cap_hash;
  SgNodeId round_base;
  int32_t outputs;
  SgNodeId output;
  gint failed;
  SgLoadDrop drop; /* the text before @drop_to is no longer needed */
  gpointer drop_data;
  const char *drop_to;
} Fast;

/* Chunk @i, or (the task after the chunks) the text before f->drop_to
 * given back: that madvise runs beside the parsing. */
static void
parse_task (gpointer data, int32_t i, int32_t worker)
{
  Fast *f = data;
  (void)worker;
  if (i < f->n_chunks)
    sg_chunk_parse (&f->chunks[i], f->end);
  else if (f->drop && f->drop_to)
    f->drop (f->drop_data, f->drop_to);
}

/* --- cutting a round ------------------------------------------------------------ */

/* A likely element start in [@x, @lim): a '{' after "}" and "," (JSON
 * whitespace between) that opens with the key "name"; NULL when none. A
 * wrong guess costs time only (parse_round). */
static const char *
guess_start (const char *x, const char *lim, const char *lo, const char *end)
{
  for (const char *q = x; q < lim && (q = memchr (q, '{', (size_t)(lim - q))); q++) {
    const char *b = q;
    while (b > lo && sg_load_is_ws (b[-1]))
      b--;
    if (b <= lo || b[-1] != ',')
      continue;
    b--;
    while (b > lo && sg_load_is_ws (b[-1]))
      b--;
    if (b <= lo || b[-1] != '}')
      continue;
    const char *a = sg_load_skip_ws (q + 1, end);
    if (end - a >= 6 && memcmp (a, "\"name\"", 6) == 0)
      return q;
  }
  return NULL;
}

/* Cuts the round from @pos into chunks and parses them; the chunks whose
 * starts turn out to be element starts are kept (f->n_chunks). False when
 * a kept chunk fails. */
static bool
parse_round (Fast *f, const char *pos)
{
  int32_t threads = sg_pool_size (f->pool);
  int32_t want = threads > 1 ? CHUNKS_PER_THREAD * threads : f->chunk ? 3 : 1;
  size_t rest = (size_t)(f->end - pos);
  size_t size = f->chunk      ? f->chunk
                : threads > 1 ? CLAMP (MIN (rest, ROUND) / (size_t)want, MIN_CHUNK, MAX_CHUNK)
                              : SEQ_ROUND;
  if (want > f->cap_chunks) {
    f->chunks = g_renew (Chunk, f->chunks, (size_t)want);
    memset (f->chunks + f->cap_chunks, 0, (size_t)(want - f->cap_chunks) * sizeof (Chunk));
    f->cap_chunks = want;
  }
  const char *limit
      = (size_t)(f->end - pos) > size * (size_t)want ? pos + size * (size_t)want : f->end;
  int32_t n = 0;
  f->chunks[n++].start = pos;
  for (int32_t k = 1; k < want; k++) {
    const char *x = pos + size * (size_t)k;
    if (x >= limit)
      break;
    const char *s = guess_start (x, MIN (x + size, limit), pos, f->end);
    if (s && s > f->chunks[n - 1].start)
      f->chunks[n++].start = s;
  }
  for (int32_t i = 0; i < n; i++)
    f->chunks[i].limit = i + 1 < n ? f->chunks[i + 1].start : limit;
  f->n_chunks = n;
  sg_pool_run (f->pool, n + 1, parse_task, f);
  /* chunk 0 starts at an element; chunk i + 1 does when chunk i stopped
   * exactly there, else it is parsed again from where chunk i stopped */
  for (int32_t i = 0; i < n; i++) {
    Chunk *c = &f->chunks[i];
    if (i > 0 && f->chunks[i - 1].stop != c->start) {
      c->start = f->chunks[i - 1].stop;
      if (c->start < c->limit)
        sg_chunk_parse (c, f->end);
      else
        sg_chunk_reset (c);
    }
    if (c->failed)
      return false;
    if (c->closed || i == n - 1) {
      f->n_chunks = i + 1;
      return true;
    }
  }
  g_assert_not_reached ();
}

/* --- merging a round -------------------------------------------------------------- */

static void
copy_task (gpointer data, int32_t i, int32_t worker)
{
  Fast *f = data;
  (void)worker;
  const Chunk *c = &f->chunks[i];
  SgGraph *g = f->g;
  for (size_t j = 0; j < c->n_nodes; j++) {
    SgNode n = c->nodes[j];
    const Rec *r = &c->recs[j];
    const Const *t = &c->consts[r->target];
    n.name = c->names_base + r->name_off;
    n.target = t->global;
    n.kind = n.op == SG_NODE_CALL ? t->kind : sg_node_op_kind (n.op); /* sg_node_finish's */
    n.args_first += c->args_base;
    n.kwargs_first += c->args_base;
    n.in_first += c->inputs_base;
    if (r->has_tuple)
      n.tuple_first += c->tuples_base;
    if (n.meta.ndim >= 0)
      n.meta.first += c->dims_base;
    g->nodes[c->node_base + (SgNodeId)j] = n;
    f->hash[c->node_base - f->round_base + (SgNodeId)j] = r->hash;
  }
  SgArg *args = c->n_args ? &g_array_index (g->args, SgArg, c->args_base) : NULL;
  for (size_t j = 0; j < c->n_args; j++) {
    SgArg a = c->args[j];
    if (a.type == SG_ARG_LIST || a.type == SG_ARG_DICT)
      a.first += c->args_base;
    else if (a.type >= SG_ARG_STR && a.type <= SG_ARG_MEMORY_FORMAT)
      a.s = c->consts[a.i].global;
    args[j] = a;
  }
  if (c->n_dims)
    memcpy (&g_array_index (g->dims, int64_t, c->dims_base), c->dims, c->n_dims * sizeof (int64_t));
  SgMeta *tuples = c->n_tuples ? &g_array_index (g->tuple_metas, SgMeta, c->tuples_base) : NULL;
  for (size_t j = 0; j < c->n_tuples; j++) {
    SgMeta m = c->tuples[j];
    if (m.ndim >= 0)
      m.first += c->dims_base;
    tuples[j] = m;
  }
}

static inline void
fail (Fast *f)
{
  g_atomic_int_set (&f->failed, 1);
}

static void
resolve_task (gpointer data, int32_t i, int32_t worker)
{
  Fast *f = data;
  (void)worker;
  const Chunk *c = &f->chunks[i];
  SgGraph *g = f->g;
  for (size_t j = 0; j < c->n_nodes; j++) {
    const SgNode *n = &c->nodes[j];
    SgNodeId self = c->node_base + (SgNodeId)j;
    SgNodeId *in
        = n->n_in ? &g_array_index (g->inputs, SgNodeId, c->inputs_base + n->in_first) : NULL;
    for (uint32_t k = 0; k < n->n_in; k++) {
      const Ref *r = &c->refs[n->in_first + k];
      SgNodeId id = SG_NO_NODE;
      for (size_t b = j; b-- > 0 && b + RECENT >= j;) {
        const Rec *o = &c->recs[b];
        if (o->hash == r->hash && o->name_len == r->len
            && memcmp (c->blob + o->name_off, r->s, r->len) == 0) {
          id = c->node_base + (SgNodeId)b;
          break;
        }
      }
      if (id == SG_NO_NODE)
        id = sg_name_table_find (f->names, &g->nodes[0].name, sizeof (SgNode), r->s, r->len,
                                 r->hash);
      if (id == SG_NO_NODE || id >= self) { /* undefined, later, or itself */
        fail (f);
        return;
      }
      in[k] = id;
    }
  }
}


/* sg_node_finish on each node: it writes the node's group, group size,
 * reduce op and getitem index, which no other node's checks read (they
 * read their inputs' kind, name, meta, tuple and inputs). */
static void
finish_task (gpointer data, int32_t i, int32_t worker)
{
  Fast *f = data;
  (void)worker;
  const Chunk *c = &f->chunks[i];
  SgGraph *g = f->g;
  for (size_t j = 0; j < c->n_nodes; j++) {
    SgNodeId id = c->node_base + (SgNodeId)j;
    SgNode n = g->nodes[id];
    const SgNodeId *in = n.n_in ? &g_array_index (g->inputs, SgNodeId, n.in_first) : NULL;
    GError *e = NULL;
    if (!sg_node_finish (g, &n, in, sg_graph_node_of, sg_graph_input_of, g, &e)) {
      g_error_free (e);
      fail (f);
      return;
    }
    g_assert (n.kind == g->nodes[id].kind);
    SgNode *out = &g->nodes[id];
    out->group = n.group;
    out->group_size = n.group_size;
    out->reduce = n.reduce;
    out->getitem_index = n.getitem_index;
  }
}

/* Sets @k's global string (interned in the graph's strings) and kind, from
 * the strings interned so far when it is one (the chunks of a load share
 * a few dozen). */
static void
intern (Fast *f, Const *k)
{
  if ((f->interned->len + 1) * 2 > f->iset.cap)
    sg_keyset_fill (&f->iset, MAX (f->iset.cap * 2, (size_t)256), f->interned->data,
                    sizeof (Const), 0, f->interned->len);
  size_t at;
  int64_t found = sg_keyset_find (&f->iset, f->interned->data, sizeof (Const), k->key.s,
                                  k->key.len, k->key.hash, &at);
  if (found >= 0) {
    const Const *e = &g_array_index (f->interned, Const, found);
    k->global = e->global;
    k->kind = e->kind;
    return;
  }
  k->global = g_string_chunk_insert_const (f->g->strings, k->key.s);
  k->kind = sg_op_from_target (k->global);
  Const e = { .key = { k->global, k->key.len, k->key.hash }, .global = k->global, .kind = k->kind };
  sg_keyset_put (&f->iset, at, f->interned->len);
  g_array_append_val (f->interned, e);
}

/* Room for the round's nodes and pool entries, names and interned strings
 * (the sequential part). False when the graph would be too large. */
static bool
place_round (Fast *f)
{
  SgGraph *g = f->g;
  uint64_t nodes = (uint64_t)g->n_nodes, args = g->args->len, dims = g->dims->len;
  uint64_t tuples = g->tuple_metas->len, inputs = g->inputs->len;
  for (int32_t i = 0; i < f->n_chunks; i++) {
    Chunk *c = &f->chunks[i];
    c->node_base = (SgNodeId)nodes;
    c->args_base = (uint32_t)args;
    c->dims_base = (uint32_t)dims;
    c->tuples_base = (uint32_t)tuples;
    c->inputs_base = (uint32_t)inputs;
    nodes += c->n_nodes;
    args += c->n_args;
    dims += c->n_dims;
    tuples += c->n_tuples;
    inputs += c->n_refs;
    if (nodes >= (uint64_t)G_MAXINT32 - 1
        || MAX (MAX (args, dims), MAX (tuples, inputs)) >= G_MAXUINT32)
      return false;
  }
  while (g->nodes_cap < (int32_t)nodes) /* as sg_graph_append_with grows it */
    g->nodes_cap = g->nodes_cap ? g->nodes_cap * 2 : 256;
  g->nodes = g_renew (SgNode, g->nodes, (size_t)g->nodes_cap);
  g_array_set_size (g->args, (guint)args);
  g_array_set_size (g->dims, (guint)dims);
  g_array_set_size (g->tuple_metas, (guint)tuples);
  g_array_set_size (g->inputs, (guint)inputs);
  f->round_base = g->n_nodes;
  size_t round = (size_t)(nodes - (uint64_t)g->n_nodes);
  if (round > f->cap_hash) {
    g_free (f->hash);
    f->hash = g_new (uint64_t, round);
    f->cap_hash = round;
  }
  for (int32_t i = 0; i < f->n_chunks; i++) {
    Chunk *c = &f->chunks[i];
    if (c->n_blob)
      c->names_base = g_string_chunk_insert_len (g->strings, c->blob, (gssize)c->n_blob - 1);
    for (size_t k = 0; k < c->n_consts; k++)
      intern (f, &c->consts[k]);
    if (c->outputs) {
      f->outputs += c->outputs;
      for (size_t j = 0; j < c->n_nodes; j++)
        if (c->nodes[j].op == SG_NODE_OUTPUT)
          f->output = c->node_base + (SgNodeId)j;
    }
  }
  g->n_nodes = (int32_t)nodes;
  return true;
}

static bool
merge_round (Fast *f)
{
  if (!place_round (f))
    return false;
  sg_pool_run (f->pool, f->n_chunks, copy_task, f);
  SgGraph *g = f->g;
  if (sg_name_table_add (f->names, &g->nodes[0].name, sizeof (SgNode), f->hash, f->round_base,
                         g->n_nodes - f->round_base, f->pool))
    return false; /* a name defined twice */
  sg_pool_run (f->pool, f->n_chunks, resolve_task, f);
  if (g_atomic_int_get (&f->failed))
    return false;
  sg_pool_run (f->pool, f->n_chunks, finish_task, f);
  return !g_atomic_int_get (&f->failed);
}

bool
sg_load_nodes_fast (SgGraph *g, const char *p, const char *end, SgPool *pool, size_t chunk,
                    SgLoadDrop drop, gpointer drop_data, const char **stop)
{
  g_return_val_if_fail (g->n_nodes == 0, false);
  if (p >= end || *p != '[')
    return false;
  p = sg_load_skip_ws (p + 1, end);
  if (p < end && *p == ']') {
    *stop = p + 1;
    return true;
  }
  sg_graph_names_drop (g);
  Fast f = { .g = g,
             .pool = pool,
             .chunk = chunk,
             .end = end,
             .names = sg_name_table_new (),
             .interned = g_array_new (FALSE, FALSE, sizeof (Const)),
             .output = SG_NO_NODE,
             .drop = drop,
             .drop_data = drop_data };
  bool ok = true, closed = false;
  while (ok && !closed) {
    const char *from = p;
    ok = p < end && parse_round (&f, p);
    if (ok && g->n_nodes == 0) { /* the table sized once for as many nodes as this text's */
      size_t nodes = 0, bytes = (size_t)(f.chunks[f.n_chunks - 1].stop - from);
      for (int32_t i = 0; i < f.n_chunks; i++)
        nodes += f.chunks[i].n_nodes;
      double all = (double)nodes / (double)MAX (bytes, 1) * (double)(end - from);
      if (all >= RESERVE_NAMES)
        sg_name_table_reserve (f.names, (int64_t)all);
    }
    ok = ok && merge_round (&f);
    if (ok) {
      const Chunk *last = &f.chunks[f.n_chunks - 1];
      closed = last->closed;
      p = last->stop;
      f.drop_to = p;
    }
  }
  /* one output node at most, and it is the last (parse_nodes' rule) */
  ok = ok && (f.outputs == 0 || (f.outputs == 1 && f.output == g->n_nodes - 1));
  if (ok) {
    g->output = f.outputs ? f.output : SG_NO_NODE;
    sg_graph_changed (g);
    g->name_table = g_steal_pointer (&f.names); /* the validator's, and distinct */
    *stop = p;
  }
  for (int32_t i = 0; i < f.cap_chunks; i++)
    sg_chunk_clear (&f.chunks[i]);
  g_free (f.chunks);
  g_free (f.hash);
  g_array_unref (f.interned);
  sg_keyset_clear (&f.iset);
  g_clear_pointer (&f.names, sg_name_table_free);
  return ok;
}
