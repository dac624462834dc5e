/* sim-test.h: lookups shared by the simulator's tests (test_sim.c,
 * test_pairs.c). */
#pragma once

#include <check.h>

#include "schedule.h"

static inline SgNodeId
id_of (const SgGraph *g, const char *name)
{
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert_msg (id != SG_NO_NODE, "no node %s", name);
  return id;
}

/* The simulated row of collective @name. */
static inline const SgCollRow *
row_of (const SgSimResult *r, const SgGraph *g, const char *name)
{
  SgNodeId id = id_of (g, name);
  for (int32_t i = 0; i < r->n_rows; i++)
    if (r->rows[i].node == id)
      return &r->rows[i];
  ck_abort_msg ("no row for %s", name);
  return NULL;
}
