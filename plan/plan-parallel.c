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
 * Stages, each a job of the pool (tasks own their chunk; what they note
 * is kept atomically, and does not depend on the order):
 *  1. the values' own rules; each instruction's own rules (the indices in
 *     range, kinds, streams, lifetimes around each use:
 *     sg_plan_check_ins, SG_PLAN_RULES_OWN), noting what each does that
 *     later rules read (SgPlanFirsts: the first instruction writing a
 *     buffer, freeing it, recording an event, waiting on a collective);
 *  2. the race sweep (plan-races.c) on one thread, the caller's placement
 *     of the buffers on another (neither reads what the other writes: the
 *     races read no offset), and each instruction's rules against those
 *     firsts (SG_PLAN_RULES_STATE, and each collective waited on);
 *  3. the buffers' own rules (their offsets, now placed);
 *  4. the memory rule (plan-memory.c, in slabs of time).
 * The one pass's state at instruction i is what the instructions before
 * it did, and its rules ask only whether a first is before i: the whole
 * plan's firsts answer alike. Where the one pass stops at a broken rule
 * its later checks no longer matter: the firsts may then differ from its
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
  SgPlanFirsts f;        /* what stage 1 notes for stage 2 */
} Par;

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
      if (ok)
        sg_plan_firsts_note_value (&c->f, p, v);
    }
  } else {
    const int32_t k = t - c->n_val;
    ok = sg_plan_check_ins (p, k * CHUNK, MIN (p->n_ins, (k + 1) * CHUNK), &c->f,
                            SG_PLAN_RULES_OWN, NULL);
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
    ok = sg_plan_check_ins (c->p, k * CHUNK, MIN (c->p->n_ins, (k + 1) * CHUNK), &c->f,
                            SG_PLAN_RULES_STATE, NULL);
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
  if (!sg_plan_firsts_init (&c->f, p, NULL))
    return false;
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
    sg_plan_firsts_clear (&c.f);
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
