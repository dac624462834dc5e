/* plan-parallel.c: the validator on several threads (sg_plan_validate_with,
 * plan.h): the same verdict as sg_plan_validate, and on a broken rule the
 * same error, which sg_plan_validate then names.
 *
 * Mirrors: the validator of plan-validate.c, each rule as a predicate that
 * holds or not over the whole plan (the one pass stops at the first that
 * fails; any failing one fails both).
 * Requires: nothing (any plan, loaded or lowered).
 * Invalidates: nothing (the caller's @place sets the buffers' offsets).
 *
 * Stages, each a job of the pool (tasks own their chunk; shared counts are
 * atomic and their results do not depend on the order):
 *  1. the values' own rules; each instruction's own rules (the indices in
 *     range, kinds, streams, lifetimes around each use), and what the one
 *     pass keeps as state, counted per buffer, event and collective: the
 *     first instruction writing a buffer, the FREEs of a buffer (and
 *     where), the RECORDs of an event (and where), the waits of a
 *     collective; the input buffers;
 *  2. the race sweep (plan-races.c) on one thread, the caller's placement
 *     of the buffers on another (neither reads what the other writes: the
 *     races read no offset), and each instruction's rules against the
 *     counts: a read after a write, no use after the FREE, each event
 *     recorded once and before its waits, each collective waited once and
 *     its operands alive until then, each buffer freed once;
 *  3. the buffers' own rules (their offsets, now placed);
 *  4. the memory rule (plan-memory.c, in slabs of time).
 * The one pass's state at instruction i is what the instructions before
 * it did, which the counts tell: e.g. buffer b is written before i iff its
 * first writer comes before i. Where the one pass stops at a broken rule
 * its later checks no longer matter: the counts may then differ from its
 * state, but both verdicts are false.
 */
#include "plan-private.h"

#include <string.h>

/* Items per task of the chunked stages. */
#define CHUNK 4096

typedef struct {
  const SgPlan *p;
  int32_t n_val, n_ins;  /* chunks of values and of instructions */
  SgPlanTaskFunc place;  /* codegen's packer, or NULL */
  gpointer place_ctx;
  bool *ok;              /* per task */
  /* what stage 1 counts for stage 2 */
  gint *first_write;     /* per buffer: its first writer, G_MAXINT: none */
  gint *n_frees, *freed_at; /* per buffer: its FREEs, one's index */
  gint *n_records, *recorded_at; /* per event: its RECORDs, one's index */
  gint *n_waits;         /* per instruction: the waits naming it */
  gint *input;           /* per buffer: an input's */
} Par;

/* The value @v used by instruction @i: in range, its buffer too, @i in
 * the buffer's lifetime. @b: the buffer, -1 for none. */
static bool
use_ok (const SgPlan *p, int32_t i, int32_t v, bool allow_none, int32_t *b)
{
  *b = -1;
  if (v == -1 && allow_none)
    return true;
  if (v < 0 || v >= p->n_values)
    return false;
  *b = p->values[v].buffer;
  if (*b < -1 || *b >= p->n_buffers)
    return false;
  return *b < 0 || (i >= p->buffers[*b].first_ins && i <= p->buffers[*b].last_ins);
}

static void
first_write_at (gint *at, int32_t i)
{
  gint was = g_atomic_int_get (at);
  while (i < was && !g_atomic_int_compare_and_exchange (at, was, i))
    was = g_atomic_int_get (at);
}

/* Stage 1 for instruction @i: its own rules, then its counts. */
static bool
ins_own (Par *c, int32_t i)
{
  const SgPlan *p = c->p;
  const SgPlanIns *in = &p->ins[i];
  if (in->stream < 0 || in->stream >= p->n_streams)
    return false;
  switch (in->kind) {
  case SG_INS_KERNEL:
  case SG_INS_COLLECTIVE: {
    const bool kernel = in->kind == SG_INS_KERNEL;
    if (kernel && (in->stream != 0 || (int)in->op < 0 || in->op >= SG_OP_N_KINDS
                   || sg_op_is_collective (in->op)
                   || (in->sm_count != 0
                       && (in->sm_count < 0 || sg_op_class (in->op) != SG_CLASS_MATMUL))))
      return false;
    if (!kernel && !sg_plan_check_collective (p, i, NULL))
      return false;
    int32_t b;
    for (int32_t k = 0; k < in->n_in; k++)
      if (!use_ok (p, i, in->in[k], false, &b))
        return false;
    for (int32_t k = 0; k < in->n_out; k++) {
      if (!use_ok (p, i, in->out[k], kernel, &b))
        return false;
      if (b >= 0)
        first_write_at (&c->first_write[b], i);
    }
    return true;
  }
  case SG_INS_RECORD:
    if (in->event < 0 || in->event >= p->n_events)
      return false;
    g_atomic_int_inc (&c->n_records[in->event]);
    g_atomic_int_set (&c->recorded_at[in->event], i);
    return true;
  case SG_INS_WAIT_EVENT:
    if (in->event < 0 || in->event >= p->n_events)
      return false;
    if (in->coll == -1)
      return true;
    if (in->coll < 0 || in->coll >= i || p->ins[in->coll].kind != SG_INS_COLLECTIVE)
      return false;
    g_atomic_int_inc (&c->n_waits[in->coll]);
    return true;
  case SG_INS_FREE:
    if (in->buffer < 0 || in->buffer >= p->n_buffers || in->stream != 0
        || i <= p->buffers[in->buffer].last_ins)
      return false;
    g_atomic_int_inc (&c->n_frees[in->buffer]);
    g_atomic_int_set (&c->freed_at[in->buffer], i);
    return true;
  default:
    return false;
  }
}

/* Whether buffer @b is freed before instruction @i. */
static inline bool
freed_before (const Par *c, int32_t b, int32_t i)
{
  return c->n_frees[b] > 0 && c->freed_at[b] < i;
}

/* Stage 2 for instruction @i: its rules against the counts. */
static bool
ins_counted (const Par *c, int32_t i)
{
  const SgPlan *p = c->p;
  const SgPlanIns *in = &p->ins[i];
  switch (in->kind) {
  case SG_INS_COLLECTIVE:
    if (c->n_waits[i] != 1) /* none, or twice */
      return false;
    G_GNUC_FALLTHROUGH;
  case SG_INS_KERNEL:
    for (int32_t k = 0; k < in->n_in + in->n_out; k++) {
      const int32_t v = k < in->n_in ? in->in[k] : in->out[k - in->n_in];
      const int32_t b = v >= 0 ? p->values[v].buffer : -1;
      if (b >= 0 && (freed_before (c, b, i)
                     || (k < in->n_in && !c->input[b] && c->first_write[b] >= i)))
        return false;
    }
    return true;
  case SG_INS_RECORD:
    return c->n_records[in->event] == 1;
  case SG_INS_WAIT_EVENT: {
    if (c->n_records[in->event] == 0 || c->recorded_at[in->event] > i)
      return false; /* (two RECORDs fail at the RECORD) */
    if (in->coll == -1)
      return true;
    const SgPlanIns *x = &p->ins[in->coll];
    const int32_t r = c->recorded_at[in->event];
    if (r < in->coll || p->ins[r].stream != x->stream)
      return false;
    for (int32_t k = 0; k < x->n_in + x->n_out; k++) {
      const int32_t b = p->values[k >= x->n_in ? x->out[k - x->n_in] : x->in[k]].buffer;
      if (b >= 0 && (p->buffers[b].last_ins < i || freed_before (c, b, i)))
        return false;
    }
    return true;
  }
  case SG_INS_FREE:
    return c->n_frees[in->buffer] == 1;
  default:
    return false;
  }
}

static void
stage_own (gpointer ctx, int32_t t, int32_t worker)
{
  (void)worker;
  Par *c = ctx;
  const SgPlan *p = c->p;
  bool ok = true;
  if (t < c->n_val) {
    for (int32_t v = t * CHUNK; ok && v < MIN (p->n_values, (t + 1) * CHUNK); v++) {
      ok = sg_plan_check_value (p, v, NULL);
      if (ok && p->values[v].init == SG_INIT_INPUT)
        g_atomic_int_set (&c->input[p->values[v].buffer], 1);
    }
  } else {
    const int32_t k = t - c->n_val;
    for (int32_t i = k * CHUNK; ok && i < MIN (p->n_ins, (k + 1) * CHUNK); i++)
      ok = ins_own (c, i);
  }
  c->ok[t] = ok;
}

/* Task 0: the race sweep; then the placement, if any; then chunks of
 * instructions against the counts. */
static void
stage_counted (gpointer ctx, int32_t t, int32_t worker)
{
  Par *c = ctx;
  bool ok = true;
  if (t == 0)
    ok = sg_plan_check_races (c->p, NULL);
  else if (c->place && t == 1)
    c->place (c->place_ctx, 0, worker);
  else {
    const int32_t k = t - 1 - (c->place != NULL);
    for (int32_t i = k * CHUNK; ok && i < MIN (c->p->n_ins, (k + 1) * CHUNK); i++)
      ok = ins_counted (c, i);
  }
  c->ok[t] = ok;
}

static void
stage_buffers (gpointer ctx, int32_t t, int32_t worker)
{
  (void)worker;
  Par *c = ctx;
  bool ok = true;
  for (int32_t b = t * CHUNK; ok && b < MIN (c->p->n_buffers, (t + 1) * CHUNK); b++)
    ok = sg_plan_check_buffer (c->p, b, NULL);
  c->ok[t] = ok;
}

static bool
all_ok (const bool *ok, int32_t n)
{
  for (int32_t t = 0; t < n; t++)
    if (!ok[t])
      return false;
  return true;
}

static bool
stages (Par *c, const SgPlanRunner *runner)
{
  const SgPlan *p = c->p;
  if (p->n_events < 0 || p->n_events > p->n_ins)
    return false; /* (bounds the counts' arrays, as the one pass does) */
  c->first_write = g_new (gint, (size_t)p->n_buffers + 1);
  for (int32_t b = 0; b < p->n_buffers; b++)
    c->first_write[b] = G_MAXINT;
  c->n_frees = g_new0 (gint, (size_t)p->n_buffers + 1);
  c->freed_at = g_new0 (gint, (size_t)p->n_buffers + 1);
  c->input = g_new0 (gint, (size_t)p->n_buffers + 1);
  c->n_records = g_new0 (gint, (size_t)p->n_events + 1);
  c->recorded_at = g_new0 (gint, (size_t)p->n_events + 1);
  c->n_waits = g_new0 (gint, (size_t)p->n_ins + 1);
  runner->run (runner->pool, c->n_val + c->n_ins, stage_own, c);
  if (!all_ok (c->ok, c->n_val + c->n_ins) || !sg_plan_check_io_lists (p, NULL))
    return false;
  const int32_t n2 = 1 + (c->place != NULL) + c->n_ins;
  runner->run (runner->pool, n2, stage_counted, c);
  c->place = NULL;
  if (!all_ok (c->ok, n2))
    return false;
  const int32_t n3 = (p->n_buffers + CHUNK - 1) / CHUNK;
  runner->run (runner->pool, n3, stage_buffers, c);
  return all_ok (c->ok, n3) && sg_plan_check_memory_with (p, runner);
}

/* The stages; false without a pool of several threads. @place, if not
 * NULL, runs once (here, or in stage 2). */
static bool
validate_stages (const SgPlan *p, const SgPlanRunner *runner, SgPlanTaskFunc place,
                 gpointer place_ctx)
{
  Par c = { .p = p, .place = place, .place_ctx = place_ctx };
  bool ok = false;
  if (runner && runner->n_workers > 1 && sg_plan_check_groups (p, NULL)) {
    c.n_val = (p->n_values + CHUNK - 1) / CHUNK;
    c.n_ins = (p->n_ins + CHUNK - 1) / CHUNK;
    const int32_t most = MAX (c.n_val + c.n_ins + 2, (p->n_buffers + CHUNK - 1) / CHUNK);
    c.ok = g_new0 (bool, (size_t)most + 1);
    ok = stages (&c, runner);
    g_free (c.ok);
    g_free (c.first_write);
    g_free (c.n_frees);
    g_free (c.freed_at);
    g_free (c.input);
    g_free (c.n_records);
    g_free (c.recorded_at);
    g_free (c.n_waits);
  }
  if (c.place)
    c.place (c.place_ctx, 0, 0);
  return ok;
}

bool
sg_plan_validate_stages (const SgPlan *p, const SgPlanRunner *runner)
{
  g_return_val_if_fail (p != NULL, false);
  return validate_stages (p, runner, NULL, NULL);
}

bool
sg_plan_validate_with (const SgPlan *p, const SgPlanRunner *runner, SgPlanTaskFunc place,
                       gpointer place_ctx, GError **error)
{
  g_return_val_if_fail (p != NULL, false);
  /* a broken rule: the first, named as the one pass names it */
  return validate_stages (p, runner, place, place_ctx) || sg_plan_validate (p, error);
}
