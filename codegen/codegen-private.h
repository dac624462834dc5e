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

/* A KERNEL's or COLLECTIVE's operands (value ids), made before the
 * instruction (emit.c) and moved into it. */
typedef struct {
  int32_t *in, *out;
  int32_t n_in, n_out;
} SgOperands;

/* The lowering's working state (lower.c and emit.c fill it, codegen.c
 * assembles). */
typedef struct {
  const SgGraph *g;
  const SgSimResult *pred;
  SgPool *pool;         /* cfg->pool: emit.c's second pass; NULL: none */
  GMutex strings_lock;  /* the plan's strings, from the pool's tasks */
  SgPlan *plan;         /* being built: it holds the values' dims */
  int32_t *nval;        /* node -> value id, -1: none */
  int32_t *tval;        /* tuple_first + i -> value id of tuple element i */
  /* what the plan will hold (doubled when full) */
  SgPlanValue *values;
  int32_t n_values, cap_values;
  SgPlanBuffer *buffers;
  bool *pinned;         /* per buffer: a placeholder's (whole step) */
  int32_t n_buffers, cap_buffers;
  /* step 1 lays values and buffers out, then fills their names, dims and
   * sizes on the pool from the meta of a node, or of its tuple element
   * (-1: the node's own), per value and per buffer */
  int32_t *val_node, *val_elem; /* cap_values */
  int32_t *buf_node, *buf_elem; /* cap_buffers */
  /* step 2a lays the instructions out by pre-FREE index (n_pre of them),
   * step 3 places the FREEs, step 2b writes every instruction once at its
   * final index (n_ins of them) */
  SgPlanIns *ins;
  int32_t n_ins, n_pre;
  int32_t *main_ins;    /* node -> pre-FREE index of its KERNEL, COLLECTIVE or
                         * (a wait) WAIT_EVENT instruction, -1 */
  int32_t *wait_for;    /* wait node -> the collective its WAIT_EVENT waits, -1 */
  SgOperands *ops;      /* node -> its KERNEL's or COLLECTIVE's operands */
  GArray *end_waits;    /* SgNodeId: collectives no wait waits, waited at the end */
  int32_t *coll_done;   /* node -> event recorded after it */
  bool *coll_waited;
  int32_t *free_before; /* pre-FREE index -> FREEs before it (n_pre + 1) */
  int32_t *dying;       /* the buffers freed, in FREE order */
  GError *layout_error; /* step 2a's, reported when no node's fill fails */
  int32_t *pred_row;    /* node -> row in pred->rows, -1 */
  SgElision el;         /* zero-copy buckets (graph/elide.c) */
  int32_t *group_buf;   /* elided pack -> the buffer its relocated inputs share, -1 */
  int32_t n_events;
  GError **error;
} SgLower;

/* Step 1 (lower.c): values and buffers of every node. */
bool sg_lower_values (SgLower *l);
/* Step 2a (emit.c): the instructions' layout in id order (main_ins,
 * wait_for, events, end_waits, n_pre; collectives never waited on are
 * waited at the end) and the operands (ops); a node that cannot be laid
 * out is kept in layout_error. */
void sg_lower_lay_out (SgLower *l);
/* Step 2b (emit.c), after step 3 (free_before, dying, n_ins): every
 * instruction written once at its final index, the FREEs among them.
 * False with *l->error at the first failing node. */
bool sg_lower_emit (SgLower *l);
/* Sets @error (from any thread: a task's own) to the message on @fmt
 * naming node @id of @g. Returns false. */
bool sg_lower_fail (GError **error, const SgGraph *g, SgNodeId id, const char *fmt, ...)
  G_GNUC_PRINTF (4, 5);
/* (transfer full) The array's data; frees the GArray. */
int32_t *sg_lower_steal_ids (GArray *a, int32_t *n);

/* Assigns plan->buffers[*].offset and plan->arena_bytes from the buffers'
 * bytes and lifetimes (memplan.c). Buffers with @pinned[b] (placeholders:
 * live for the whole step) are laid out first, contiguously, in id order. */
void sg_codegen_pack_buffers (SgPlan *plan, const bool *pinned);
/* Its parts (memplan.c; tests): the @n buffer ids at @order (ascending,
 * bytes > 0) sorted largest first (aligned sizes; ties: earlier first
 * instruction, then id); the online best fit of @order's buffers above
 * @base into @off (indexed by buffer), returning the top. */
void sg_codegen_sort_by_size (const SgPlan *plan, int32_t *order, int32_t n);
uint64_t sg_codegen_pack_online (const SgPlan *plan, const int32_t *order, int32_t n,
                                 uint64_t base, uint64_t *off);
