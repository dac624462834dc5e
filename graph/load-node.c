/* load-node.c: one element of `nodes` into a chunk's records, for the
 * parallel reader (load-nodes.c, load-chunk.h).
 *
 * A node object is read in one pass: its keys matched where they are
 * spelled plainly, its name, op and target taken as they stand in the
 * text, its args read straight into argument entries when they hold only
 * scalars, node references and lists of those, and its meta straight into
 * dims when it is a tensor's {shape, stride, dtype}; anything else (nested
 * dicts, tuples, kwargs, unknown keys) goes through the tape (load-tape.c),
 * which reads every value the node reader does. The records are what
 * sg_graph_append_with() builds, less what needs other nodes: the inputs'
 * ids (names here), name clashes, sg_node_finish. Whatever it cannot read
 * or a rule a node breaks makes it decline (NULL).
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include "load-chunk.h"


void
sg_chunk_grow (void **p, size_t *cap, size_t need, size_t elem)
{
  size_t c = MAX (*cap * 2, (size_t)64);
  while (c < need)
    c *= 2;
  *p = g_realloc_n (*p, c, elem);
  *cap = c;
}

void
sg_chunk_reset (Chunk *c)
{
  c->stop = c->start;
  c->closed = c->failed = false;
  c->outputs = 0;
  c->n_nodes = c->n_recs = c->n_blob = c->n_args = c->n_dims = c->n_tuples = 0;
  c->n_refs = c->n_consts = c->n_tape = c->n_top = c->n_inner = 0;
  sg_keyset_empty (&c->cset);
  c->rset_node = 0;
  sg_load_arena_reset (&c->arena);
  c->dt_s = NULL;
}

void
sg_chunk_clear (Chunk *c)
{
  g_free (c->nodes);
  g_free (c->recs);
  g_free (c->blob);
  g_free (c->args);
  g_free (c->dims);
  g_free (c->tuples);
  g_free (c->refs);
  g_free (c->consts);
  sg_keyset_clear (&c->cset);
  g_free (c->tape);
  g_free (c->top);
  g_free (c->inner);
  sg_keyset_clear (&c->rset);
  sg_load_arena_clear (&c->arena);
  memset (c, 0, sizeof *c);
}

/* --- strings, references ---------------------------------------------------- */

const char *
sg_chunk_string (Chunk *c, const char *p, const char *end, const char **s, uint32_t *len)
{
  bool escapes;
  const char *q = sg_load_string_close (p, end, &escapes);
  if (!q || q - p > (ptrdiff_t)(G_MAXUINT32 / 2))
    return NULL;
  if (!escapes) {
    *s = p + 1;
    *len = (uint32_t)(q - p - 1);
    return q + 1;
  }
  char *out = sg_load_arena_alloc (&c->arena, (size_t)(q - p));
  char *z = sg_load_unescape (p + 1, q, out);
  if (!z)
    return NULL;
  *s = out;
  *len = (uint32_t)(z - out);
  return q + 1;
}

uint32_t
sg_chunk_const (Chunk *c, const char *s, uint32_t len)
{
  uint64_t h = sg_name_hash (s, len);
  if ((c->n_consts + 1) * 2 > c->cset.cap)
    sg_keyset_fill (&c->cset, MAX (c->cset.cap * 2, (size_t)64), c->consts, sizeof (Const), 0,
                    c->n_consts);
  size_t at;
  int64_t found = sg_keyset_find (&c->cset, c->consts, sizeof (Const), s, len, h, &at);
  if (found >= 0)
    return (uint32_t)found;
  char *copy = sg_load_arena_alloc (&c->arena, (size_t)len + 1);
  memcpy (copy, s, len);
  copy[len] = '\0';
  RESERVE (c, consts, 1);
  c->consts[c->n_consts] = (Const){ .key = { copy, len, h } };
  sg_keyset_put (&c->cset, at, c->n_consts);
  return (uint32_t)c->n_consts++;
}

SgArg
sg_chunk_string_arg (Chunk *c, const char *s, uint32_t len, const char *key)
{
  uint32_t k = sg_chunk_const (c, s, len);
  SgArg a = { .type = SG_ARG_STR };
  a.s = c->consts[k].key.s;
  if (key)
    sg_arg_classify (&a, key);
  a.i = k;
  return a;
}

void
sg_keyset_fill (KeySet *set, size_t cap, const void *keys, size_t stride, size_t first, size_t n)
{
  g_free (set->slots);
  set->slots = g_new0 (uint32_t, cap);
  set->cap = cap;
  set->count = n;
  for (size_t i = first; i < first + n; i++) {
    const Key *k = (const Key *)(const void *)((const char *)keys + i * stride);
    size_t at = k->hash & (cap - 1);
    while (set->slots[at])
      at = (at + 1) & (cap - 1);
    set->slots[at] = (uint32_t)i + 1;
  }
}

void
sg_keyset_empty (KeySet *set)
{
  if (set->cap)
    memset (set->slots, 0, set->cap * sizeof *set->slots);
  set->count = 0;
}

void
sg_keyset_clear (KeySet *set)
{
  g_free (set->slots);
  *set = (KeySet){ 0 };
}

uint32_t
sg_chunk_ref (Chunk *c, uint32_t first, const char *s, uint32_t len)
{
  uint64_t h = sg_name_hash (s, len);
  uint32_t n = (uint32_t)c->n_refs - first;
  if (n < SG_SCAN_IDS) { /* as sg_ids_position, by name */
    for (uint32_t i = 0; i < n; i++) {
      const Ref *r = &c->refs[first + i];
      if (r->hash == h && r->len == len && memcmp (r->s, s, len) == 0)
        return i;
    }
  } else {
    if (c->rset_node != first + 1 || (c->rset.count + 1) * 2 > c->rset.cap) {
      size_t cap = 64;
      while (cap < (size_t)(n + 1) * 4)
        cap *= 2;
      sg_keyset_fill (&c->rset, cap, c->refs, sizeof (Ref), first, n);
      c->rset_node = first + 1;
    }
    size_t at;
    int64_t found = sg_keyset_find (&c->rset, c->refs, sizeof (Ref), s, len, h, &at);
    if (found >= 0)
      return (uint32_t)found - first;
    sg_keyset_put (&c->rset, at, c->n_refs);
  }
  RESERVE (c, refs, 1);
  c->refs[c->n_refs++] = (Ref){ .s = s, .len = len, .hash = h };
  return n;
}

/* --- args and meta in their usual forms ------------------------------------- */

/* A scalar or a node reference {"node": NAME} at @p, as emit_value makes
 * it; NULL for anything else. */
static const char *
scalar_or_ref (Chunk *c, const char *p, const char *end, uint32_t ref_first, SgArg *a)
{
  const char *s;
  uint32_t len;
  double d;
  *a = (SgArg){ .type = SG_ARG_NONE };
  if (p >= end)
    return NULL;
  switch (*p) {
  case '{':
    p = sg_load_skip_ws (p + 1, end);
    if (end - p < 7 || memcmp (p, "\"node\"", 6) != 0)
      return NULL;
    p = sg_load_skip_ws (p + 6, end);
    if (p >= end || *p != ':')
      return NULL;
    p = sg_load_skip_ws (p + 1, end);
    if (p >= end || *p != '"' || !(p = sg_chunk_string (c, p, end, &s, &len)))
      return NULL;
    p = sg_load_skip_ws (p, end);
    if (p >= end || *p != '}')
      return NULL;
    a->type = SG_ARG_NODE;
    a->input = sg_chunk_ref (c, ref_first, s, len);
    return p + 1;
  case '"':
    if (!(p = sg_chunk_string (c, p, end, &s, &len)))
      return NULL;
    *a = sg_chunk_string_arg (c, s, len, NULL);
    return p;
  case 't':
  case 'f':
    a->type = SG_ARG_BOOL;
    a->b = *p == 't';
    return a->b ? (sg_load_literal (p, end, "true", 4) ? p + 4 : NULL)
                : (sg_load_literal (p, end, "false", 5) ? p + 5 : NULL);
  case 'n':
    return sg_load_literal (p, end, "null", 4) ? p + 4 : NULL;
  case '[':
    return NULL;
  default:
    if (!(p = sg_chunk_number (c, p, end, &d)))
      return NULL;
    *a = sg_arg_number (d);
    return p;
  }
}

/* The args list at @p when its items are scalars, references and lists of
 * those (most nodes'): the items into c->top, a list's items into
 * c->inner (its entry's .first indexes c->inner until sg_tape_args). NULL
 * for anything else: the caller reads it through the tape instead, after
 * dropping the references noted here. */
static const char *
args_direct (Chunk *c, const char *p, const char *end, uint32_t ref_first)
{
  c->n_top = c->n_inner = 0;
  p = sg_load_skip_ws (p + 1, end);
  if (p < end && *p == ']')
    return p + 1;
  for (;;) {
    SgArg a;
    if (p < end && *p == '[') {
      a = (SgArg){ .type = SG_ARG_LIST };
      a.first = (uint32_t)c->n_inner;
      p = sg_load_skip_ws (p + 1, end);
      if (p < end && *p == ']')
        p++;
      else
        for (;;) {
          SgArg item;
          if (!(p = scalar_or_ref (c, p, end, ref_first, &item)))
            return NULL;
          RESERVE (c, inner, 1);
          c->inner[c->n_inner++] = item;
          p = sg_load_skip_ws (p, end);
          if (p < end && *p == ']') {
            p++;
            break;
          }
          if (p >= end || *p != ',')
            return NULL;
          p = sg_load_skip_ws (p + 1, end);
        }
      a.n = (uint32_t)c->n_inner - a.first;
    } else if (!(p = scalar_or_ref (c, p, end, ref_first, &a))) {
      return NULL;
    }
    RESERVE (c, top, 1);
    c->top[c->n_top++] = a;
    p = sg_load_skip_ws (p, end);
    if (p < end && *p == ']')
      return p + 1;
    if (p >= end || *p != ',')
      return NULL;
    p = sg_load_skip_ws (p + 1, end);
  }
}

/* A list of at most SG_MAX_DIMS integers >= 0 (sg_int62) at @q into @out
 * (*@n of them); NULL for anything else. */
static const char *
dims_list (Chunk *c, const char *q, const char *end, int64_t *out, int *n)
{
  if (q >= end || *q != '[')
    return NULL;
  q = sg_load_skip_ws (q + 1, end);
  int k = 0;
  if (q < end && *q == ']') {
    *n = 0;
    return q + 1;
  }
  for (;;) {
    if (k == SG_MAX_DIMS || q >= end || !(*q == '-' || sg_load_is_digit (*q)))
      return NULL;
    const char *s = sg_load_small_int (q, end, &out[k]); /* inside 2^62 */
    if (s) {
      q = s;
    } else {
      double d;
      if (!(q = sg_chunk_number (c, q, end, &d)) || !sg_int62 (d, &out[k]))
        return NULL;
    }
    if (out[k] < 0)
      return NULL;
    k++;
    q = sg_load_skip_ws (q, end);
    if (q >= end)
      return NULL;
    if (*q == ']') {
      *n = k;
      return q + 1;
    }
    if (*q != ',')
      return NULL;
    q = sg_load_skip_ws (q + 1, end);
  }
}

/* The meta object at @p when it is a tensor's in the usual form: "shape",
 * "stride" (or null, or absent) and "dtype" once each, in any order, no
 * other key, every rule of meta_of met; its dims appended, *@out set.
 * NULL for anything else: the meta is then read through the tape. */
static const char *
meta_direct (Chunk *c, const char *p, const char *end, SgMeta *out)
{
  int64_t sh[SG_MAX_DIMS], st[SG_MAX_DIMS];
  int n_sh = -1, n_st = -1; /* -1: absent; stride -2: null */
  const char *dt = NULL;
  uint32_t dt_len = 0;
  const char *q = sg_load_skip_ws (p + 1, end);
  for (;;) {
    if (end - q < 8 || *q != '"')
      return NULL;
    if (memcmp (q, "\"shape\"", 7) == 0 && n_sh == -1) {
      q = sg_load_skip_ws (q + 7, end);
      if (q >= end || *q != ':'
          || !(q = dims_list (c, sg_load_skip_ws (q + 1, end), end, sh, &n_sh)))
        return NULL;
    } else if (memcmp (q, "\"stride\"", 8) == 0 && n_st == -1) {
      q = sg_load_skip_ws (q + 8, end);
      if (q >= end || *q != ':')
        return NULL;
      q = sg_load_skip_ws (q + 1, end);
      if (sg_load_literal (q, end, "null", 4)) {
        n_st = -2;
        q += 4;
      } else if (!(q = dims_list (c, q, end, st, &n_st))) {
        return NULL;
      }
    } else if (memcmp (q, "\"dtype\"", 7) == 0 && !dt) {
      q = sg_load_skip_ws (q + 7, end);
      if (q >= end || *q != ':')
        return NULL;
      q = sg_load_skip_ws (q + 1, end);
      if (q >= end || *q != '"' || !(q = sg_chunk_string (c, q, end, &dt, &dt_len)))
        return NULL;
    } else {
      return NULL;
    }
    q = sg_load_skip_ws (q, end);
    if (q < end && *q == '}')
      break;
    if (q >= end || *q != ',')
      return NULL;
    q = sg_load_skip_ws (q + 1, end);
  }
  SgDtype dtype = dt ? sg_chunk_dtype (c, dt, dt_len) : SG_DTYPE_INVALID;
  if (n_sh < 0 || dtype == SG_DTYPE_INVALID || (n_st >= 0 && n_st != n_sh)
      || !sg_chunk_meta (c, sh, n_sh, n_st >= 0 ? st : NULL, dtype, out))
    return NULL;
  return q + 1;
}

/* --- nodes ------------------------------------------------------------------- */

enum { K_NAME, K_OP, K_TARGET, K_ARGS, K_KWARGS, K_META, K_COST, K_SMS, K_OTHER };

static int
key_of (const char *s, uint32_t len)
{
  static const struct {
    const char *key;
    uint32_t len;
  } keys[] = { { "name", 4 },   { "op", 2 },   { "target", 6 },  { "args", 4 },
               { "kwargs", 6 }, { "meta", 4 }, { "cost_us", 7 }, { "sm_count", 8 } };
  for (int k = 0; k < K_OTHER; k++)
    if (text_is (s, len, keys[k].key, keys[k].len))
      return k;
  return K_OTHER;
}

/* A member key spelled plainly at @p (its opening quote): its K_*, *@after
 * past the closing quote; -1 for any other (read as a string). */
static inline int
plain_key (const char *p, const char *end, const char **after)
{
#define KEY(text, k)                                                                               \
  (memcmp (p + 1, text "\"", sizeof text) == 0 ? (*after = p + 1 + sizeof text, k) : -1)
  if (end - p < 10)
    return -1;
  switch (p[1]) {
  case 'n':
    return KEY ("name", K_NAME);
  case 'o':
    return KEY ("op", K_OP);
  case 't':
    return KEY ("target", K_TARGET);
  case 'a':
    return KEY ("args", K_ARGS);
  case 'k':
    return KEY ("kwargs", K_KWARGS);
  case 'm':
    return KEY ("meta", K_META);
  case 'c':
    return KEY ("cost_us", K_COST);
  case 's':
    return KEY ("sm_count", K_SMS);
  default:
    return -1;
  }
#undef KEY
}

/* What a node's members gave. */
typedef struct {
  const char *name;
  uint32_t name_len;
  int op;
  int64_t target, args, kwargs, meta; /* target: a const; the rest tape entries; -1: absent */
  bool has_cost, has_sms;
  double cost, sms;
  bool meta_read; /* by meta_direct, into @meta_out */
  SgMeta meta_out;
  uint32_t ref_first; /* the node's first reference */
} Members;

/* The value of member @key at @p into @m. */
static const char *
read_member (Chunk *c, int key, const char *p, const char *end, Members *m)
{
  const char *s;
  uint32_t len;
  switch (key) {
  case K_NAME:
    if (p >= end || *p != '"')
      return NULL;
    return sg_chunk_string (c, p, end, &m->name, &m->name_len);
  case K_OP:
  case K_TARGET:
    if (p >= end || *p != '"' || !(p = sg_chunk_string (c, p, end, &s, &len)))
      return NULL;
    if (key == K_OP)
      return (m->op = sg_node_op_from_text (s, len)) >= 0 ? p : NULL;
    m->target = sg_chunk_const (c, s, len);
    return p;
  case K_COST:
  case K_SMS:
    if (p >= end || !(*p == '-' || sg_load_is_digit (*p)))
      return NULL;
    *(key == K_COST ? &m->has_cost : &m->has_sms) = true;
    return sg_chunk_number (c, p, end, key == K_COST ? &m->cost : &m->sms);
  case K_ARGS:
    if (p >= end || *p != '[')
      return NULL;
    if ((s = args_direct (c, p, end, m->ref_first))) {
      m->args = -2;
      return s;
    }
    c->n_refs = m->ref_first; /* noted by args_direct */
    c->rset_node = 0;
    m->args = (int64_t)c->n_tape;
    return sg_tape_value (c, p, end, 1);
  case K_KWARGS:
    if (p >= end || *p != '{')
      return NULL;
    s = sg_load_skip_ws (p + 1, end);
    if (s < end && *s == '}') /* {}: as if absent */
      return s + 1;
    m->kwargs = (int64_t)c->n_tape;
    return sg_tape_value (c, p, end, 1);
  case K_META:
    if (p < end && *p == '{' && (s = meta_direct (c, p, end, &m->meta_out))) {
      m->meta_read = true;
      return s;
    }
    m->meta = (int64_t)c->n_tape;
    return sg_tape_value (c, p, end, 1);
  default: {
    size_t mark = c->n_tape; /* read (it must be valid JSON), then dropped */
    p = sg_tape_value (c, p, end, 1);
    c->n_tape = mark;
    return p;
  }
  }
}

/* The node whose '{' is at @p into the chunk's records: what
 * sg_graph_append_with() builds, except what needs other nodes (inputs'
 * ids, name clashes, sg_node_finish). Returns its end, NULL to decline. */
static const char *
read_node (Chunk *c, const char *p, const char *end)
{
  c->n_tape = 0;
  Members m = {
    .op = -1, .target = -1, .args = -1, .kwargs = -1, .meta = -1, .ref_first = (uint32_t)c->n_refs
  };
  unsigned seen = 0;
  p = sg_load_skip_ws (p + 1, end);
  for (;;) {
    if (p >= end || *p != '"')
      return NULL;
    int key = plain_key (p, end, &p);
    if (key < 0) {
      const char *k;
      uint32_t klen;
      if (!(p = sg_chunk_string (c, p, end, &k, &klen)))
        return NULL;
      key = key_of (k, klen);
    }
    p = sg_load_skip_ws (p, end);
    if (p >= end || *p != ':')
      return NULL;
    p = sg_load_skip_ws (p + 1, end);
    if (key != K_OTHER && (seen & (1u << key))) /* a second one: the first counts */
      return NULL;
    seen |= 1u << key;
    if (!(p = read_member (c, key, p, end, &m)))
      return NULL;
    p = sg_load_skip_ws (p, end);
    if (p >= end)
      return NULL;
    if (*p == '}')
      break;
    if (*p != ',')
      return NULL;
    p = sg_load_skip_ws (p + 1, end);
  }
  if (!m.name || !m.name_len || m.op < 0 || m.target < 0)
    return NULL;
  SgNode n = { .op = (SgNodeOp)m.op, .cost_us = NAN };
  Rec rec = { .target = (uint32_t)m.target };
  if (!sg_tape_args (c, m.args, m.kwargs, m.ref_first, &n))
    return NULL;
  if (m.meta_read)
    n.meta = m.meta_out;
  else if (!sg_tape_meta (c, m.meta, &n, &rec))
    return NULL;
  if (m.has_cost) {
    if (!(m.cost >= 0 && m.cost < SG_MAX_COST_US))
      return NULL;
    n.cost_us = m.cost;
  }
  if (m.has_sms) {
    int64_t v;
    if (!sg_int62 (m.sms, &v) || v < 0 || v > SG_MAX_SM_COUNT)
      return NULL;
    n.sm_count = (int32_t)v;
  }
  RESERVE (c, blob, (size_t)m.name_len + 1);
  rec.name_off = (uint32_t)c->n_blob;
  rec.name_len = m.name_len;
  rec.hash = sg_name_hash (m.name, m.name_len);
  memcpy (c->blob + c->n_blob, m.name, m.name_len);
  c->blob[c->n_blob + m.name_len] = '\0';
  c->n_blob += (size_t)m.name_len + 1;
  if (c->n_blob > G_MAXUINT32)
    return NULL;
  c->outputs += m.op == SG_NODE_OUTPUT;
  RESERVE (c, nodes, 1);
  RESERVE (c, recs, 1);
  c->nodes[c->n_nodes++] = n;
  c->recs[c->n_recs++] = rec;
  return p + 1;
}

void
sg_chunk_parse (Chunk *c, const char *end)
{
  sg_chunk_reset (c);
  const char *p = c->start;
  while (p < c->limit) {
    if (*p != '{' || !(p = read_node (c, p, end))) {
      c->failed = true;
      return;
    }
    p = sg_load_skip_ws (p, end);
    if (p < end && *p == ']') {
      c->closed = true;
      c->stop = p + 1;
      return;
    }
    if (p >= end || *p != ',') {
      c->failed = true;
      return;
    }
    p = sg_load_skip_ws (p + 1, end);
  }
  c->stop = p;
}
