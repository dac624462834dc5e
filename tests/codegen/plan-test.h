/* plan-test.h: what the codegen tests share (not a module): lowering a
 * graph to a validated plan, finding its values and kernels, a copy's
 * elision reason, and the validator's refusal of an edited plan. */
#pragma once

#include <check.h>
#include <string.h>

#include "codegen.h"

/* (transfer full) The plan of @g, which the validator accepts. */
static inline SgPlan *
pt_lower (const SgGraph *g)
{
  SgPlan *p = NULL;
  GError *e = NULL;
  ck_assert_msg (sg_codegen_plan (g, NULL, NULL, "t", "", &p, &e), "%s", e ? e->message : "");
  ck_assert_msg (sg_plan_validate (p, &e), "%s", e ? e->message : "");
  return p;
}

/* The value named @name (the test fails without one). */
static inline const SgPlanValue *
pt_value (const SgPlan *p, const char *name)
{
  for (int32_t v = 0; v < p->n_values; v++)
    if (strcmp (p->values[v].name, name) == 0)
      return &p->values[v];
  ck_abort_msg ("no value %s", name);
  return NULL;
}

static inline bool
pt_has_value (const SgPlan *p, const char *name)
{
  for (int32_t v = 0; v < p->n_values; v++)
    if (strcmp (p->values[v].name, name) == 0)
      return true;
  return false;
}

static inline bool
pt_has_kernel (const SgPlan *p, const char *name)
{
  for (int32_t i = 0; i < p->n_ins; i++)
    if (p->ins[i].kind == SG_INS_KERNEL && strcmp (p->ins[i].name, name) == 0)
      return true;
  return false;
}

/* The elision reason of copy @name (graph/elide.c). */
static inline SgCopyReason
pt_reason_of (const SgGraph *g, const char *name)
{
  SgElision el;
  sg_graph_elision (g, &el);
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert_int_ne (id, SG_NO_NODE);
  SgCopyReason r = (SgCopyReason)el.reason[id];
  sg_elision_clear (&el);
  return r;
}

/* A runner that runs the tasks last first, on this thread. */
static inline void
pt_run_backwards (gpointer pool, int32_t n_tasks, SgPlanTaskFunc fn, gpointer ctx)
{
  (void)pool;
  for (int32_t t = n_tasks - 1; t >= 0; t--)
    fn (ctx, t, t % 3);
}

/* The validator refuses @p with a message that contains @want, on one
 * thread and on "three" (sg_plan_validate_with: the same message). */
static inline void
pt_assert_rejected (const SgPlan *p, const char *want)
{
  GError *e = NULL, *e3 = NULL;
  ck_assert (!sg_plan_validate (p, &e));
  ck_assert_msg (strstr (e->message, want), "'%s' lacks '%s'", e->message, want);
  const SgPlanRunner three = { pt_run_backwards, NULL, 3 };
  ck_assert (!sg_plan_validate_with (p, &three, NULL, NULL, &e3));
  ck_assert_str_eq (e3->message, e->message);
  g_error_free (e);
  g_error_free (e3);
}
