/* rewrite-redirect.c: a layout's redirects (sg_rw_redirect_users): every
 * user of a replaced node reads the replacement (rewrite-order.c lays the
 * result out after them).
 *
 * A user's new inputs are its inputs with each replaced one followed to
 * its last replacement, kept distinct; where two became one, its args are
 * re-indexed into g->args. The users are listed (rw->touched, their inputs
 * in rw->t_in) in the order of the replaced nodes' ids, each user at the
 * first replaced node it reads; then the added nodes that read a replaced
 * node being removed, in id order.
 * On the rewrite's pool from REDIRECT_PARALLEL base nodes (a trial of a
 * large graph redirects the users of every bucket's members, not only of
 * the buckets it changed), the replaced nodes go in ranges: each range
 * lists the users it redirects (a user belongs to the range of the
 * smallest replaced node it reads) with their new inputs; the lists are
 * then appended in range order, and the users whose inputs merge or are
 * many are redirected there, one after the other: the same lists, the
 * same args, whatever the ranges.
 * A range finds its replaced nodes among the set bits of x->redirected.
 * The ranges' lists are the rewrite's, kept for its next layouts.
 * Requires: @g's users fresh; x->redir and x->redirected, x->in_pos (-1
 * everywhere) and x->tix (-1 everywhere) set. Invalidates: nothing
 * (appends re-indexed args to g->args).
 */
#include "rewrite-order.h"

#include <string.h>

/* Base nodes from which the redirects go in ranges on the pool (unless the
 * rewrite's windows_min, which tests lower, is set); a range holds at
 * least a quarter of that many replaced nodes' ids. */
#define REDIRECT_PARALLEL 65536
/* A user with more inputs than this is redirected in the ordered pass
 * (its inputs are kept distinct with in_pos there). */
#define FEW_INPUTS 32

/* The replacement of @v after every redirect (chains followed). */
static SgNodeId
final_target (const Ctx *x, SgNodeId v)
{
  for (int32_t steps = 0; v < x->n0 && x->redir[v] != SG_NO_NODE && steps <= x->n0; steps++)
    v = x->redir[v];
  return v;
}

/* Copies args entry @src with input indices mapped by @map. */
static SgArg
reindex (SgGraph *g, const SgArg *src, const uint32_t *map)
{
  SgArg a = *src; /* @src may move: the pool grows below */
  if (a.type == SG_ARG_NODE) {
    a.input = map[a.input];
  } else if (a.type == SG_ARG_LIST || a.type == SG_ARG_DICT) {
    uint32_t len = a.type == SG_ARG_DICT ? 2 * a.n : a.n, from = a.first;
    a.first = g->args->len;
    g_array_set_size (g->args, a.first + len);
    for (uint32_t i = 0; i < len; i++) {
      SgArg item = g_array_index (g->args, SgArg, from + i);
      item = reindex (g, &item, map);
      g_array_index (g->args, SgArg, a.first + i) = item;
    }
  }
  return a;
}

/* One user @u of replaced nodes: its inputs redirected and kept distinct
 * (an added node's only where they are removed); its args re-indexed when
 * two inputs became one. */
static void
redirect_user (Ctx *x, SgNodeId u, uint32_t **map, uint32_t *map_len)
{
  SgGraph *g = x->g;
  GArray *t_in = x->rw->t_in;
  uint32_t n;
  const SgNodeId *in = new_inputs (x, u, &n); /* not touched yet: its own */
  Touched t = { u, t_in->len, 0, 0, 0, false };
  if (n > *map_len) {
    *map_len = MAX (n, 2 * *map_len);
    *map = g_renew (uint32_t, *map, *map_len);
  }
  g_array_set_size (t_in, t.first + n); /* room for every input; trimmed below */
  SgNodeId *dst = &g_array_index (t_in, SgNodeId, t.first);
  for (uint32_t j = 0; j < n; j++) {
    SgNodeId v = u < x->n0 || !x->keep[in[j]] ? final_target (x, in[j]) : in[j];
    int32_t at = x->in_pos[v]; /* where @v already is among the new inputs */
    if (at < 0) {
      at = (int32_t)t.n;
      x->in_pos[v] = at;
      dst[t.n++] = v;
    }
    (*map)[j] = (uint32_t)at;
  }
  g_array_set_size (t_in, t.first + t.n);
  for (uint32_t j = 0; j < t.n; j++) /* clean for the next user */
    x->in_pos[dst[j]] = -1;
  if (t.n < n) {
    const SgNode *un = sg_rewrite_node (x->rw, u);
    SgArg args = { .type = SG_ARG_LIST, .n = un->n_args, .first = un->args_first };
    SgArg kw = { .type = SG_ARG_DICT, .n = un->n_kwargs, .first = un->kwargs_first };
    t.args_first = reindex (g, &args, *map).first;
    t.kwargs_first = reindex (g, &kw, *map).first;
    t.reindexed = true;
  }
  x->tix[u] = (int32_t)x->rw->touched->len;
  g_array_append_val (x->rw->touched, t);
}

/* A user a range lists: its new inputs at @first of the range's inputs,
 * or (n DEFERRED) one to redirect in the ordered pass. */
#define DEFERRED UINT32_MAX
typedef struct {
  SgNodeId u;
  uint32_t first, n;
} Listed;

/* What a range lists: users and their inputs (grown by doubling; kept
 * by the rewrite for its next layouts, rw->redirect_lists). */
struct SgRwList {
  Listed *users;
  SgNodeId *in;
  uint32_t n_users, cap_users, n_in, cap_in;
};
typedef struct SgRwList List;

typedef struct {
  const Ctx *x;
  int32_t size; /* replaced nodes' ids per range */
  List *lists;  /* per range */
} Ranges;

static void
list_append (List *l, Listed it)
{
  if (l->n_users == l->cap_users) {
    l->cap_users = MAX (16, 2 * l->cap_users);
    l->users = g_renew (Listed, l->users, l->cap_users);
  }
  l->users[l->n_users++] = it;
}

/* Lists base user @u of replaced node @old in @l: when @old is the first
 * replaced node it reads (where it is redirected), its new inputs,
 * distinct, or deferred where they merge; a user of many inputs is
 * deferred at every replaced node it reads (the ordered pass redirects it
 * at the first: looking for an earlier one here would read all its inputs
 * at each). */
static void
list_user (const Ctx *x, List *l, SgNodeId u, SgNodeId old)
{
  uint32_t n;
  const SgNodeId *in = sg_node_inputs (x->g, u, &n);
  Listed it = { u, l->n_in, n };
  if (n > FEW_INPUTS) {
    it.n = DEFERRED;
    list_append (l, it);
    return;
  }
  if (l->n_in + n > l->cap_in) {
    l->cap_in = MAX (l->n_in + n, 2 * l->cap_in);
    l->in = g_renew (SgNodeId, l->in, l->cap_in);
  }
  SgNodeId *dst = l->in + l->n_in;
  for (uint32_t j = 0; j < n; j++) {
    if (in[j] < old && x->redir[in[j]] != SG_NO_NODE)
      return; /* redirected at that one */
    dst[j] = final_target (x, in[j]);
    for (uint32_t i = 0; i < j; i++)
      if (dst[i] == dst[j])
        it.n = DEFERRED; /* inputs merge: its args are re-indexed in order */
  }
  list_append (l, it);
  if (it.n != DEFERRED)
    l->n_in += n;
}

/* Range @r of the replaced nodes: the users it redirects. */
static void
range_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  Ranges *R = data;
  const Ctx *x = R->x;
  int32_t lo, hi;
  sg_range_of (r, R->size, x->n0, &lo, &hi);
  /* the replaced nodes in id order: the set bits of x->redirected */
  for (int32_t w = lo / 64; w < (hi + 63) / 64; w++) {
    uint64_t b = x->redirected[w];
    if (64 * w < lo)
      b &= ~(uint64_t)0 << (lo - 64 * w);
    if (64 * w + 64 > hi)
      b &= ((uint64_t)1 << (hi - 64 * w)) - 1;
    for (; b; b &= b - 1) {
      SgNodeId old = 64 * w + __builtin_ctzll (b);
      uint32_t nu;
      const SgNodeId *us = sg_node_users (x->g, old, &nu);
      for (uint32_t k = 0; k < nu; k++) /* a user reading @old twice is listed twice */
        if (k == 0 || us[k - 1] != us[k])
          list_user (x, &R->lists[r], us[k], old);
    }
  }
}

/* Appends @l's users, in order, to the layout's touched nodes. */
static void
append_list (Ctx *x, const List *l, uint32_t **map, uint32_t *map_len)
{
  GArray *touched = x->rw->touched, *t_in = x->rw->t_in;
  for (uint32_t i = 0; i < l->n_users;) {
    const Listed *it = &l->users[i];
    if (it->n == DEFERRED) {
      if (x->tix[it->u] < 0) /* at the first replaced node it reads */
        redirect_user (x, it->u, map, map_len);
      i++;
      continue;
    }
    /* the run of users up to the next deferred one, appended at once */
    uint32_t e = i, n_in = 0;
    for (; e < l->n_users && l->users[e].n != DEFERRED; e++)
      n_in += l->users[e].n;
    guint t0 = touched->len, in0 = t_in->len;
    g_array_set_size (touched, t0 + (e - i));
    g_array_set_size (t_in, in0 + n_in);
    Touched *t = &g_array_index (touched, Touched, t0);
    SgNodeId *in = &g_array_index (t_in, SgNodeId, in0);
    for (; i < e; i++, t++) {
      it = &l->users[i];
      *t = (Touched){ it->u, in0, it->n, 0, 0, false };
      memcpy (in, l->in + it->first, sizeof (SgNodeId) * it->n);
      in += it->n;
      in0 += it->n;
      x->tix[it->u] = (int32_t)(t0++);
    }
  }
}

void
sg_rw_redirect_lists_free (SgRewrite *rw)
{
  for (int32_t r = 0; r < rw->n_redirect_lists; r++) {
    g_free (rw->redirect_lists[r].users);
    g_free (rw->redirect_lists[r].in);
  }
  g_clear_pointer (&rw->redirect_lists, g_free);
  rw->n_redirect_lists = 0;
}

void
sg_rw_redirect_users (Ctx *x)
{
  SgRewrite *rw = x->rw;
  g_autofree uint32_t *map = NULL;
  uint32_t map_len = 0;
  int32_t min = rw->windows_min ? rw->windows_min : REDIRECT_PARALLEL;
  SgPool *pool = x->n0 >= min ? rw->pool : NULL;
  Ranges R = { x, sg_pool_range_size (pool, x->n0, MAX (min / 4, 1)), NULL };
  int32_t nr = sg_ranges (x->n0, R.size);
  if (nr > rw->n_redirect_lists) {
    rw->redirect_lists = g_renew (List, rw->redirect_lists, (size_t)nr);
    memset (rw->redirect_lists + rw->n_redirect_lists, 0,
            sizeof (List) * (size_t)(nr - rw->n_redirect_lists));
    rw->n_redirect_lists = nr;
  }
  R.lists = rw->redirect_lists;
  for (int32_t r = 0; r < nr; r++)
    R.lists[r].n_users = R.lists[r].n_in = 0;
  sg_pool_run (pool, nr, range_task, &R);
  for (int32_t r = 0; r < nr; r++)
    append_list (x, &R.lists[r], &map, &map_len);
  /* Added nodes that read a replaced node being removed (nothing may read
   * it) read its replacement: e.g. a bucket's pack of another bucket's
   * member waits. */
  for (SgNodeId v = x->n0; v < x->n1; v++) {
    uint32_t n;
    const SgNodeId *in = new_inputs (x, v, &n);
    for (uint32_t j = 0; j < n; j++)
      if (in[j] < x->n0 && x->redir[in[j]] != SG_NO_NODE && !x->keep[in[j]]) {
        redirect_user (x, v, &map, &map_len);
        break;
      }
  }
}
