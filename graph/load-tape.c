/* load-tape.c: a node's values in their general form, for the parallel
 * reader (load-node.c, load-chunk.h).
 *
 * Args, kwargs and metas that load-node.c does not read straight are read
 * onto a tape (one entry per value, in text order, containers before
 * their members), with the node reader's grammar (load-json.c), and then
 * turned into what sg_args_from_json() and parse_meta() build from the
 * same JSON: argument entries reserved list by list before their items'
 * nested lists, node references as input indices, strings at the tensor
 * option keywords as enums, shapes and strides (default strides where
 * none is given) in the dims. Where those functions fail, these return
 * false (the reader declines).
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include "load-chunk.h"

static uint32_t
tape_push (Chunk *c)
{
  RESERVE (c, tape, 1);
  return (uint32_t)c->n_tape++;
}

const char *
sg_tape_value (Chunk *c, const char *p, const char *end, int depth)
{
  if (p >= end)
    return NULL;
  uint32_t at = tape_push (c);
  Val *v = &c->tape[at];
  *v = (Val){ .next = at + 1 };
  switch (*p) {
  case '{':
  case '[': {
    if (depth >= TAPE_DEPTH)
      return NULL;
    bool obj = *p == '{';
    char close = obj ? '}' : ']';
    uint32_t n = 0;
    p = sg_load_skip_ws (p + 1, end);
    if (p < end && *p == close) {
      p++;
    } else {
      for (;;) {
        if (obj) {
          if (p >= end || *p != '"')
            return NULL;
          uint32_t k = tape_push (c);
          const char *s;
          uint32_t len;
          if (!(p = sg_chunk_string (c, p, end, &s, &len)))
            return NULL;
          c->tape[k] = (Val){ .type = V_STR, .n = len, .next = k + 1, .s = s };
          p = sg_load_skip_ws (p, end);
          if (p >= end || *p != ':')
            return NULL;
          p = sg_load_skip_ws (p + 1, end);
        }
        if (!(p = sg_tape_value (c, p, end, depth + 1)))
          return NULL;
        n++;
        p = sg_load_skip_ws (p, end);
        if (p >= end)
          return NULL;
        if (*p == close) {
          p++;
          break;
        }
        if (*p != ',')
          return NULL;
        p = sg_load_skip_ws (p + 1, end);
      }
    }
    v = &c->tape[at];
    v->type = obj ? V_OBJ : V_ARR;
    v->n = n;
    v->next = (uint32_t)c->n_tape;
    return p;
  }
  case '"': {
    const char *s;
    uint32_t len;
    if (!(p = sg_chunk_string (c, p, end, &s, &len)))
      return NULL;
    v = &c->tape[at];
    v->type = V_STR;
    v->n = len;
    v->s = s;
    return p;
  }
  case 't':
    v->type = V_TRUE;
    return sg_load_literal (p, end, "true", 4) ? p + 4 : NULL;
  case 'f':
    v->type = V_FALSE;
    return sg_load_literal (p, end, "false", 5) ? p + 5 : NULL;
  case 'n':
    v->type = V_NULL;
    return sg_load_literal (p, end, "null", 4) ? p + 4 : NULL;
  default: {
    double d;
    if (!(p = sg_chunk_number (c, p, end, &d)))
      return NULL;
    v = &c->tape[at];
    v->type = V_NUM;
    v->d = d;
    return p;
  }
  }
}

/* The value of object @obj's first member named @key (sg_json_member), or
 * -1. */
static int64_t
member (const Chunk *c, uint32_t obj, const char *key, uint32_t klen)
{
  uint32_t k = obj + 1;
  for (uint32_t i = 0; i < c->tape[obj].n; i++) {
    if (text_is (c->tape[k].s, c->tape[k].n, key, klen))
      return k + 1;
    k = c->tape[k + 1].next;
  }
  return -1;
}

/* --- arguments (sg_args_from_json) ------------------------------------------- */

static uint32_t
reserve_args (Chunk *c, uint32_t n)
{
  RESERVE (c, args, n);
  uint32_t first = (uint32_t)c->n_args;
  c->n_args += n;
  return first;
}

/* Tape value @v into argument slot @slot (json_value). */
static bool
emit_value (Chunk *c, uint32_t v, int depth, const char *key, uint32_t slot, uint32_t ref_first)
{
  if (depth > SG_MAX_ARG_DEPTH)
    return false;
  const Val *t = &c->tape[v];
  SgArg a = { .type = SG_ARG_NONE };
  switch (t->type) {
  case V_OBJ: {
    int64_t r = member (c, v, "node", 4);
    if (r >= 0) {
      if (t->n != 1 || c->tape[r].type != V_STR)
        return false;
      a.type = SG_ARG_NODE;
      a.input = sg_chunk_ref (c, ref_first, c->tape[r].s, c->tape[r].n);
      break;
    }
    a.type = SG_ARG_DICT;
    a.n = t->n;
    a.first = reserve_args (c, 2 * t->n);
    uint32_t k = v + 1;
    for (uint32_t i = 0; i < a.n; i++) {
      SgArg ka = sg_chunk_string_arg (c, c->tape[k].s, c->tape[k].n, NULL);
      c->args[a.first + 2 * i] = ka;
      if (!emit_value (c, k + 1, depth + 1, NULL, a.first + 2 * i + 1, ref_first))
        return false;
      k = c->tape[k + 1].next;
    }
    break;
  }
  case V_ARR: {
    a.type = SG_ARG_LIST;
    a.n = t->n;
    a.first = reserve_args (c, t->n);
    uint32_t k = v + 1;
    for (uint32_t i = 0; i < a.n; i++) {
      if (!emit_value (c, k, depth + 1, NULL, a.first + i, ref_first))
        return false;
      k = c->tape[k].next;
    }
    break;
  }
  case V_STR:
    a = sg_chunk_string_arg (c, t->s, t->n, key);
    break;
  case V_NUM:
    a = sg_arg_number (t->d);
    break;
  case V_TRUE:
  case V_FALSE:
    a.type = SG_ARG_BOOL;
    a.b = t->type == V_TRUE;
    break;
  default:
    break;
  }
  c->args[slot] = a;
  return true;
}

bool
sg_tape_args (Chunk *c, int64_t args, int64_t kwargs, uint32_t ref_first, SgNode *n)
{
  if (args == -2) { /* the items' slots, then each list's, as json_children reserves them */
    n->n_args = (uint32_t)c->n_top;
    n->args_first = reserve_args (c, n->n_args);
    for (uint32_t i = 0; i < n->n_args; i++) {
      SgArg a = c->top[i];
      if (a.type == SG_ARG_LIST) {
        uint32_t from = a.first;
        a.first = reserve_args (c, a.n);
        if (a.n)
          memcpy (&c->args[a.first], &c->inner[from], a.n * sizeof (SgArg));
      }
      c->args[n->args_first + i] = a;
    }
  } else {
    n->n_args = args >= 0 ? c->tape[args].n : 0;
    n->args_first = reserve_args (c, n->n_args);
    uint32_t k = (uint32_t)args + 1;
    for (uint32_t i = 0; i < n->n_args; i++) {
      if (!emit_value (c, k, 1, NULL, n->args_first + i, ref_first))
        return false;
      k = c->tape[k].next;
    }
  }
  n->n_kwargs = kwargs >= 0 ? c->tape[kwargs].n : 0;
  n->kwargs_first = reserve_args (c, 2 * n->n_kwargs);
  uint32_t k = (uint32_t)kwargs + 1;
  for (uint32_t i = 0; i < n->n_kwargs; i++) {
    SgArg ka = sg_chunk_string_arg (c, c->tape[k].s, c->tape[k].n, NULL);
    c->args[n->kwargs_first + 2 * i] = ka;
    if (!emit_value (c, k + 1, 1, c->consts[ka.i].key.s, n->kwargs_first + 2 * i + 1, ref_first))
      return false;
    k = c->tape[k + 1].next;
  }
  n->in_first = ref_first;
  n->n_in = (uint32_t)c->n_refs - ref_first;
  return true;
}

/* --- metas (parse_meta) ------------------------------------------------------- */

SgDtype
sg_chunk_dtype (Chunk *c, const char *s, uint32_t len)
{
  if (c->dt_s && c->dt_len == len && memcmp (c->dt_s, s, len) == 0)
    return c->dt;
  char buf[48];
  if (len >= sizeof buf || memchr (s, '\0', len))
    return SG_DTYPE_INVALID;
  memcpy (buf, s, len);
  buf[len] = '\0';
  c->dt_s = s;
  c->dt_len = len;
  return c->dt = sg_dtype_from_name (buf);
}

/* parse_meta on tape value @m (-1: absent). False where it fails. */
static bool
meta_of (Chunk *c, int64_t m, SgMeta *out)
{
  *out = (SgMeta){ .ndim = -1, .dtype = SG_DTYPE_INVALID };
  if (m < 0 || c->tape[m].type == V_NULL)
    return true;
  if (c->tape[m].type != V_OBJ)
    return false;
  int64_t shape = member (c, (uint32_t)m, "shape", 5),
          stride = member (c, (uint32_t)m, "stride", 6);
  int64_t dtype = member (c, (uint32_t)m, "dtype", 5);
  if (shape < 0 && dtype < 0)
    return true;
  if (shape < 0 || c->tape[shape].type != V_ARR)
    return false;
  uint32_t ndim = c->tape[shape].n;
  if (ndim > SG_MAX_DIMS || dtype < 0 || c->tape[dtype].type != V_STR)
    return false;
  SgDtype dt = sg_chunk_dtype (c, c->tape[dtype].s, c->tape[dtype].n);
  if (dt == SG_DTYPE_INVALID)
    return false;
  bool strided = stride >= 0 && c->tape[stride].type != V_NULL;
  if (strided && (c->tape[stride].type != V_ARR || c->tape[stride].n != ndim))
    return false;
  int64_t sh[SG_MAX_DIMS], st[SG_MAX_DIMS];
  uint32_t k = (uint32_t)shape + 1;
  for (uint32_t i = 0; i < ndim; i++, k = c->tape[k].next)
    if (!sg_tape_int (&c->tape[k], &sh[i]) || sh[i] < 0)
      return false;
  k = (uint32_t)stride + 1;
  for (uint32_t i = 0; strided && i < ndim; i++, k = c->tape[k].next)
    if (!sg_tape_int (&c->tape[k], &st[i]) || st[i] < 0)
      return false;
  return sg_chunk_meta (c, sh, (int)ndim, strided ? st : NULL, dt, out);
}


bool
sg_tape_meta (Chunk *c, int64_t m, SgNode *n, Rec *rec)
{
  int64_t tuple = m >= 0 && c->tape[m].type == V_OBJ ? member (c, (uint32_t)m, "tuple", 5) : -1;
  if (tuple < 0)
    return meta_of (c, m, &n->meta);
  if (c->tape[tuple].type != V_ARR)
    return false;
  n->meta.ndim = -1;
  n->tuple_first = (uint32_t)c->n_tuples;
  rec->has_tuple = true;
  uint32_t k = (uint32_t)tuple + 1;
  for (uint32_t i = 0; i < c->tape[tuple].n; i++, k = c->tape[k].next) {
    SgMeta e;
    if (!meta_of (c, k, &e))
      return false;
    RESERVE (c, tuples, 1);
    c->tuples[c->n_tuples++] = e;
  }
  n->n_tuple = c->tape[tuple].n;
  return true;
}
