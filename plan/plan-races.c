/* plan-races.c: the plan is race-free when its streams run concurrently.
 *
 * Mirrors: vector-clock happens-before race detection (FastTrack, the CUDA
 * stream/event model: program order per stream, RECORD -> WAIT_EVENT edges
 * across streams).
 * Requires: sg_plan_validate's index rules (called from it, after them).
 * Invalidates: nothing.
 *
 * The host order makes a one-thread backend correct by construction; the
 * CUDA backend only gets the order the events give. Rules, per buffer:
 *  - a read happens after the buffer's write (inputs are written before the
 *    step);
 *  - every access happens before the buffer's FREE (on stream 0);
 *  - every buffer that dies before the end is freed, and the first access of
 *    any buffer happens after every FREE issued before it: memory is reused
 *    only through FREE, so this orders reuse after the old occupant's last
 *    access without searching which buffers share the bytes.
 * Clocks: each stream has a vector clock (n_streams entries); an instruction
 * ticks its stream's entry; RECORD copies the clock into the event; WAIT
 * joins the event into the stream's clock. O(n_ins x n_streams).
 *
 * Across ranks (collective_permute): every rank runs the same plan (its hash
 * is agreed), so a peer's accesses to this rank's memory are those of the
 * same instruction on the peer. The transports bracket them inside the
 * instruction's own execution here (docs/gpu.md "Point-to-point"): NCCL's
 * send/recv by construction; the copy engine by its protocol, where this
 * rank tells its source "my output is free" when its stream reaches the
 * instruction, the source copies into it and then signals "done", and the
 * instruction ends here only after that signal. So a peer's write of the
 * output is ordered like this rank's own write at that instruction (the
 * rules above cover it: the receive buffer is free, nothing reads it before
 * the instruction's completion is waited for), and a peer's read of the
 * input happens while this rank's instruction runs. What the bracket does
 * not cover is checked here: the input and the output of a step must not
 * share bytes on any rank (a peer would write the output while this rank
 * still sends from the input), and a copy-engine step moves plain bytes,
 * so both must be dense.
 *
 * Writes are tracked per value, not only per buffer: a buffer may hold
 * several values written by different instructions on different streams
 * (a relocation: a ring's chunks written by their producers and by the
 * permutes into one buffer). A read must be ordered after every write of
 * the buffer whose bytes overlap the value read, and a write after every
 * earlier overlapping write; with vector clocks, a write that saw an
 * earlier one carries it, so every overlapping write is checked.
 * Rank-dependent placements (values with a `roll`): two values overlap
 * when their bytes do at some position of the groups their blocks depend
 * on (both positions alike in one group), so the rules hold on every rank;
 * the other rules are per buffer and hold on every rank at once.
 */
#include "plan-private.h"

#include <inttypes.h>
#include <string.h>

typedef struct {
  int32_t stream, seq; /* seq 0: before the step */
} Stamp;

/* A write of value @value. */
typedef struct {
  int32_t value;
  Stamp at;
} Write;

/* An entry of a buffer's list (its later writes, or its accesses off
 * stream 0: then @w.value is unused): the lists of all buffers share one
 * array, each in the order of its entries (no allocation per buffer). */
typedef struct {
  Write w;
  int32_t next; /* the buffer's next entry, -1 */
} Entry;

typedef struct {
  int32_t head, tail; /* -1: empty */
} List;

typedef struct {
  const SgPlan *p;
  int32_t ns;
  int32_t *vc;     /* ns x ns: vc[s * ns + t] = what stream s has seen of t */
  int32_t *ev;     /* n_events x ns */
  Write *first;    /* per buffer: its first write (value -1: none yet) */
  List *more;      /* per buffer: its later writes */
  int32_t *pos;    /* n_groups: group positions while testing overlaps */
  bool *touched;   /* per buffer: accessed at least once */
  List *remote;    /* per buffer: the stamps of its accesses off stream 0 */
  GArray *entries; /* Entry: the lists' */
  int32_t free_seq; /* stream 0's seq of the latest FREE */
  GError **error;
} Races;

static bool G_GNUC_PRINTF (2, 3) race (Races *r, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (r->error, SG_PLAN_ERROR, SG_PLAN_ERROR_INVALID, "race: %s", msg);
  return false;
}

static bool
seen (const Races *r, int32_t stream, Stamp s)
{
  return s.seq == 0 || r->vc[stream * r->ns + s.stream] >= s.seq;
}

static const Entry *
entry (const Races *r, int32_t k)
{
  return &g_array_index (r->entries, Entry, k);
}

/* Appends @w to the list @l. */
static void
list_append (Races *r, List *l, Write w)
{
  const int32_t k = (int32_t)r->entries->len;
  g_array_append_val (r->entries, ((Entry){ w, -1 }));
  if (l->tail >= 0)
    g_array_index (r->entries, Entry, l->tail).next = k;
  else
    l->head = k;
  l->tail = k;
}

/* Whether the bytes of @a and @o overlap on some rank: every position of
 * their rank-dependent groups (both positions alike in one group). Sets
 * *@a0 and *@o0 to their offsets there (or the last tried). */
static bool
overlap_some_rank (Races *r, const SgPlanValue *a, const SgPlanValue *o, uint64_t *a0,
                   uint64_t *o0)
{
  const SgPlan *p = r->p;
  const uint64_t ea = sg_plan_value_extent (a), eo = sg_plan_value_extent (o);
  if (!a->roll_block && !o->roll_block) {
    *a0 = a->offset, *o0 = o->offset;
    return *a0 < *o0 + eo && *o0 < *a0 + ea;
  }
  const int32_t ga = a->roll_block ? a->roll_group : -1, go = o->roll_block ? o->roll_group : -1;
  const int32_t ka = ga >= 0 ? p->groups[ga].n_ranks : 1;
  const int32_t ko = go >= 0 && go != ga ? p->groups[go].n_ranks : 1;
  for (int32_t x = 0; x < ka; x++)
    for (int32_t y = 0; y < ko; y++) {
      if (ga >= 0)
        r->pos[ga] = x;
      if (go >= 0 && go != ga)
        r->pos[go] = y;
      *a0 = sg_plan_value_offset (p, a, r->pos);
      *o0 = sg_plan_value_offset (p, o, r->pos);
      if (*a0 < *o0 + eo && *o0 < *a0 + ea)
        return true;
    }
  return false;
}

/* Every earlier write of value @v's buffer whose bytes overlap @v's must
 * be ordered before @now (instruction @i): a read after its write, a write
 * after the one it overwrites. */
static bool
writes_seen (Races *r, int32_t i, int32_t v, bool write, Stamp now)
{
  const SgPlan *p = r->p;
  const int32_t b = p->values[v].buffer;
  if (r->first[b].value < 0)
    return true; /* nor later ones */
  const Write *w = &r->first[b];
  for (int32_t k = r->more[b].head;; k = entry (r, k)->next) {
    uint64_t x0, y0;
    if (!seen (r, now.stream, w->at) &&
        overlap_some_rank (r, &p->values[v], &p->values[w->value], &x0, &y0)) {
      const char *nm = p->ins[i].name ? p->ins[i].name : "";
      if (write)
        return race (r,
                     "ins[%d] \"%s\" on stream %d writes value \"%s\" over \"%s\" (buffers[%d]) "
                     "before that write (stream %d step %d) is ordered by an event",
                     i, nm, now.stream, p->values[v].name, p->values[w->value].name, b,
                     w->at.stream, w->at.seq);
      return race (r,
                   "ins[%d] \"%s\" on stream %d reads value \"%s\" before its write (stream %d "
                   "step %d) is ordered by an event",
                   i, nm, now.stream, p->values[v].name, w->at.stream, w->at.seq);
    }
    if (k < 0)
      return true;
    w = &entry (r, k)->w; /* the buffer's next write */
  }
}

static bool
touch (Races *r, int32_t i, int32_t v, bool write, Stamp now)
{
  const SgPlan *p = r->p;
  int32_t b = v >= 0 ? p->values[v].buffer : -1;
  if (b < 0)
    return true;
  const char *nm = p->ins[i].name ? p->ins[i].name : "";
  if (!r->touched[b] && now.seq > 0 && r->vc[now.stream * r->ns] < r->free_seq)
    return race (r,
                 "ins[%d] \"%s\" on stream %d first touches buffers[%d] without waiting for the "
                 "FREE at stream 0 step %d: it may overwrite memory still in use",
                 i, nm, now.stream, b, r->free_seq);
  r->touched[b] = true;
  if (!writes_seen (r, i, v, write, now))
    return false;
  if (write && r->first[b].value < 0) {
    r->first[b] = (Write){ v, now };
  } else if (write) {
    list_append (r, &r->more[b], (Write){ v, now });
  }
  if (now.stream != 0)
    list_append (r, &r->remote[b], (Write){ -1, now });
  return true;
}

/* The cross-rank rules of a collective_permute step (the contract above). */
static bool
p2p_step (Races *r, int32_t i)
{
  const SgPlan *p = r->p;
  const SgPlanIns *in = &p->ins[i];
  const char *nm = in->name ? in->name : "";
  const SgPlanValue *a = &p->values[in->in[0]], *o = &p->values[in->out[0]];
  uint64_t a0, o0;
  if (a->buffer >= 0 && a->buffer == o->buffer && overlap_some_rank (r, a, o, &a0, &o0))
    return race (r,
                 "ins[%d] \"%s\" (collective_permute over %s): its output \"%s\" (buffers[%d] "
                 "bytes [%" PRIu64 ", %" PRIu64 ")) overlaps its input \"%s\" (bytes [%" PRIu64
                 ", %" PRIu64 ")): a peer writes the output while this rank still sends the input",
                 i, nm, sg_transport_name (in->transport), o->name, o->buffer, o0,
                 o0 + sg_plan_value_extent (o), a->name, a0, a0 + sg_plan_value_extent (a));
  if (in->transport == SG_TRANSPORT_CE)
    for (int k = 0; k < 2; k++) {
      const SgPlanValue *v = k ? o : a;
      if (!sg_strides_dense (v->ndim, v->shape, v->stride))
        return race (r,
                     "ins[%d] \"%s\" (collective_permute over ce): %s \"%s\" (buffers[%d]) is "
                     "not dense: the copy engine moves the bytes of one contiguous range",
                     i, nm, k ? "output" : "input", v->name, v->buffer);
    }
  return true;
}

/* How many entries the lists can get at most (each access off stream 0,
 * each write of a buffer after its first): the shared array is made that
 * large once, not grown by doubling (its old copies were holes in the
 * heap at the run's peak). */
static guint
entries_at_most (const SgPlan *p)
{
  g_autofree bool *written = g_new0 (bool, (size_t)p->n_buffers + 1);
  guint n = 0;
  for (int32_t i = 0; i < p->n_ins; i++) {
    const SgPlanIns *in = &p->ins[i];
    if (in->kind != SG_INS_KERNEL && in->kind != SG_INS_COLLECTIVE)
      continue;
    if (in->stream != 0)
      n += (guint)in->n_in + (guint)in->n_out;
    for (int32_t k = 0; k < in->n_out; k++) {
      const int32_t v = in->out[k], b = v >= 0 ? p->values[v].buffer : -1;
      if (b >= 0 && written[b])
        n++;
      else if (b >= 0)
        written[b] = true;
    }
  }
  return n;
}

static bool
run (Races *r)
{
  const SgPlan *p = r->p;
  int32_t ns = r->ns;
  for (int32_t v = 0; v < p->n_values; v++)
    if (p->values[v].init == SG_INIT_INPUT && p->values[v].buffer >= 0)
      r->touched[p->values[v].buffer] = true; /* written before the step */
  for (int32_t i = 0; i < p->n_ins; i++) {
    const SgPlanIns *in = &p->ins[i];
    int32_t s = in->stream;
    int32_t *c = &r->vc[s * ns];
    Stamp now = { s, ++c[s] };
    switch (in->kind) {
    case SG_INS_RECORD:
      memcpy (&r->ev[in->event * ns], c, sizeof (int32_t) * (size_t)ns);
      break;
    case SG_INS_WAIT_EVENT:
      for (int32_t t = 0; t < ns; t++)
        c[t] = MAX (c[t], r->ev[in->event * ns + t]);
      break;
    case SG_INS_KERNEL:
    case SG_INS_COLLECTIVE:
      if (in->kind == SG_INS_COLLECTIVE && in->op == SG_OP_COLLECTIVE_PERMUTE && !p2p_step (r, i))
        return false;
      for (int32_t k = 0; k < in->n_in; k++)
        if (!touch (r, i, in->in[k], false, now))
          return false;
      for (int32_t k = 0; k < in->n_out; k++)
        if (!touch (r, i, in->out[k], true, now))
          return false;
      break;
    case SG_INS_FREE: {
      for (int32_t k = r->remote[in->buffer].head; k >= 0; k = entry (r, k)->next) {
        Stamp x = entry (r, k)->w.at;
        if (!seen (r, s, x))
          return race (r,
                       "ins[%d] frees buffers[%d] while stream %d (step %d) may still use it: "
                       "no event orders that access before the FREE",
                       i, in->buffer, x.stream, x.seq);
      }
      r->free_seq = now.seq;
      break;
    }
    }
  }
  return true;
}

bool
sg_plan_check_races (const SgPlan *p, GError **error)
{
  g_return_val_if_fail (p != NULL, false);
  int32_t end = p->n_ins - 1;
  g_autofree bool *freed = g_new0 (bool, (size_t)p->n_buffers + 1);
  for (int32_t i = 0; i < p->n_ins; i++)
    if (p->ins[i].kind == SG_INS_FREE)
      freed[p->ins[i].buffer] = true;
  for (int32_t b = 0; b < p->n_buffers; b++)
    if (!freed[b] && p->buffers[b].last_ins < end && p->buffers[b].bytes > 0) {
      g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_INVALID,
                   "buffers[%d] dies at ins[%d] but is never freed: its memory could be reused "
                   "without an ordering FREE",
                   b, p->buffers[b].last_ins);
      return false;
    }
  Races r = { 0 };
  r.p = p;
  r.ns = p->n_streams;
  r.error = error;
  r.vc = g_new0 (int32_t, (size_t)r.ns * (size_t)r.ns);
  r.ev = g_new0 (int32_t, (size_t)MAX (p->n_events, 1) * (size_t)r.ns);
  r.first = g_new (Write, (size_t)p->n_buffers + 1);
  for (int32_t b = 0; b <= p->n_buffers; b++)
    r.first[b].value = -1;
  r.more = g_new (List, (size_t)p->n_buffers + 1);
  r.remote = g_new (List, (size_t)p->n_buffers + 1);
  for (int32_t b = 0; b <= p->n_buffers; b++)
    r.more[b] = r.remote[b] = (List){ -1, -1 };
  r.entries = g_array_sized_new (FALSE, FALSE, sizeof (Entry), entries_at_most (p));
  r.pos = g_new0 (int32_t, (size_t)MAX (p->n_groups, 1));
  r.touched = g_new0 (bool, (size_t)p->n_buffers + 1);
  bool ok = run (&r);
  g_array_free (r.entries, TRUE);
  g_free (r.remote);
  g_free (r.touched);
  g_free (r.more);
  g_free (r.first);
  g_free (r.pos);
  g_free (r.ev);
  g_free (r.vc);
  return ok;
}
