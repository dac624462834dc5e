/* codegen-private.h: what codegen/'s files share (not a public contract). */
#pragma once

#include "codegen.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC (cJSON, cJSON_Delete)

#define SG_ARENA_ALIGN 256

static inline uint64_t
sg_align_up (uint64_t x)
{
  return (x + SG_ARENA_ALIGN - 1) / SG_ARENA_ALIGN * SG_ARENA_ALIGN;
}

/* The lowering's working state (lower.c fills it, codegen.c assembles). */
typedef struct {
  const SgGraph *g;
  const SgSimResult *pred;
  SgPlan *plan;         /* being built: it holds the values' dims */
  int32_t *nval;        /* node -> value id, -1: none */
  int32_t *tval;        /* tuple_first + i -> value id of tuple element i */
  GArray *values, *buffers, *ins; /* SgPlanValue, SgPlanBuffer, SgPlanIns */
  GArray *pinned;       /* bool per buffer */
  int32_t *coll_ins;    /* node -> index of its COLLECTIVE instruction (pre-free), -1 */
  int32_t *coll_done;   /* node -> event recorded after it */
  bool *coll_waited;
  int32_t *pred_row;    /* node -> row in pred->rows, -1 */
  SgElision el;         /* zero-copy buckets (graph/elide.c) */
  int32_t *group_buf;   /* elided pack -> the buffer its relocated inputs share, -1 */
  int32_t n_events;
  GError **error;
} SgLower;

/* Step 1 (lower.c): values and buffers of every node. */
bool sg_lower_values (SgLower *l);
/* Step 2 (lower.c): instructions in id order, without FREEs; collectives
 * never waited on are waited at the end. */
bool sg_lower_emit (SgLower *l);
/* Sets l->error naming node @id. Returns false. */
bool sg_lower_fail (SgLower *l, SgNodeId id, const char *fmt, ...) G_GNUC_PRINTF (3, 4);
/* (transfer full) The array's data; frees the GArray. */
int32_t *sg_lower_steal_ids (GArray *a, int32_t *n);

/* Assigns plan->buffers[*].offset and plan->arena_bytes from the buffers'
 * bytes and lifetimes (memplan.c). Buffers with @pinned[b] (placeholders:
 * live for the whole step) are laid out first, contiguously, in id order. */
void sg_codegen_pack_buffers (SgPlan *plan, const bool *pinned);
