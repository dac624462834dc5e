/* decompose.h: collective matmuls split into ring steps (issue 13).
 *
 * The pass finds the collectives whose data a matmul produces or consumes
 * along the rows (all_gather -> wait -> mm, mm -> reduce_scatter, mm ->
 * all_reduce; sums of mms and views included) and rewrites each one it
 * judges worth it into chunk matmuls and point-to-point ring steps
 * (schedgraph.collective_permute, docs/ops.md "Ring decompositions"), or,
 * for all_reduce, into row chunks each all-reduced on its own, so that
 * moving chunk i + 1 overlaps multiplying chunk i. The simulator judges:
 * every site is priced in each form (ring steps, transport, SM-count
 * target of the chunk GEMMs) against its exposure in the scheduled
 * undecomposed graph, and the chosen set is confirmed by scheduling and
 * simulating the whole rewritten graph. docs/decompose.md has the forms,
 * the rules and the report.
 */
#pragma once

#include <cjson/cJSON.h>

#include "graph.h"

G_BEGIN_DECLS

#define SG_DECOMPOSE_ERROR (sg_decompose_error_quark ())
GQuark sg_decompose_error_quark (void);
typedef enum {
  SG_DECOMPOSE_ERROR_COST,    /* the estimate pass has not run */
  SG_DECOMPOSE_ERROR_REWRITE, /* a site's rewrite failed (a schedgraph bug) */
} SgDecomposeError;

/* The three patterns. */
typedef enum {
  SG_SITE_ALL_GATHER_MM = 0, /* all_gather -> wait -> mm (gathered dim = M) */
  SG_SITE_MM_REDUCE_SCATTER, /* mm (or a sum of mms) -> reduce_scatter (scatter dim = M) */
  SG_SITE_MM_ALL_REDUCE,     /* mm (or a sum of mms) -> all_reduce */
} SgSiteKind;

/* "all_gather_mm", "mm_reduce_scatter", "mm_all_reduce". */
const char *sg_site_kind_name (SgSiteKind k);

/* Why a collective is not a site, or why a site was left alone. */
typedef enum {
  SG_SITE_DECOMPOSED = 0,
  /* not a site */
  SG_SITE_NO_WAIT,        /* not exactly one user, its wait_tensor */
  SG_SITE_SMALL_GROUP,    /* a group of one rank */
  SG_SITE_NO_ROWS,        /* all_gather: no mm reads the gathered dim as its rows */
  SG_SITE_REDUCE_OP,      /* a reduction other than sum */
  SG_SITE_PRODUCER,       /* the reduced tensor is not an mm or a sum of mms */
  SG_SITE_SHARED,         /* an mm or add of the reduced tensor has other users */
  SG_SITE_INDIVISIBLE,    /* the rows do not split into the chunks */
  SG_SITE_META,           /* shapes or dtypes disagree along the site */
  /* a site, left */
  SG_SITE_OFF,            /* --no-decompose, --exact */
  SG_SITE_NO_GAIN,        /* no form is predicted to save time here */
  SG_SITE_GRAPH_LONGER,   /* the whole-graph simulation did not confirm it */
  SG_SITE_PEAK,           /* it did, past the peak-memory allowance (--max-peak-increase) */
  SG_SITE_N_REASONS
} SgSiteReason;

/* (transfer none) "decomposed", or the reason's name ("no_gain", ...). */
const char *sg_site_reason_name (SgSiteReason r);
/* (transfer none) A sentence for the reason. */
const char *sg_site_reason_text (SgSiteReason r);

/* A form of a site: @chunks ring steps (the group size) or row chunks
 * (all_reduce), the permutes' transport, the SM-count target of the
 * chunk GEMMs that run beside a ring step or a chunk's collective (0: all
 * SMs), and where the users of a whole gathered tensor get it. */
typedef struct {
  int32_t chunks;
  SgTransport transport;
  int32_t sm_count;
  /* all_gather with users of the whole gathered tensor: they keep the
   * all_gather (a second gather of the same shard, which the scheduler
   * can hide elsewhere) instead of cat + rank_roll of the ring's chunks */
  bool regather;
  /* reduce_scatter: each rank's partial sent straight to its rank (k - 1
   * permutes, shifts 1 .. k - 1, summed where they arrive) instead of
   * summed around the ring */
  bool direct;
} SgSiteForm;

/* One collective the pass looked at. */
typedef struct {
  char *name;      /* the collective (in the statistics' names) */
  char *group;     /* its group's name (the same) */
  SgSiteKind kind;
  SgSiteReason reason;
  int32_t n_mm;    /* all_gather: mms that read its rows; others: mms summed */
  int32_t n_whole; /* all_gather: users given the whole gathered tensor */
  SgSiteForm form; /* the best form found (chunks 0 when none was priced) */
  double exposed_us; /* the collective's exposure in the scheduled undecomposed graph */
  double gain_us;    /* the best form's predicted saving on the site (may be < 0) */
  /* mode auto: the most any form could be judged to save (compute replaced +
   * the collective's longest run - the fewest chunk GEMMs); a site whose
   * bound is <= 1 us is not priced (no_gain, no form). NaN when not bounded */
  double bound_us;
} SgSiteInfo;

/* Statistics of one run (the report's `decompose` section). */
typedef struct {
  SgDecomposeMode mode;
  int32_t n_sites; /* collectives looked at: every all_gather, reduce_scatter, all_reduce */
  SgSiteInfo *sites; /* in graph order */
  int32_t candidates;  /* sites that match a pattern */
  int32_t decomposed;
  int32_t confirm_rounds; /* whole-graph schedules of rewritten graphs */
  bool judged;            /* the simulator ran (there were candidates, mode not off, and
                           * in auto some site's bound allowed a saving) */
  bool scheduled;         /* the before is the schedule pass's order (else the input
                           * order: auto, where no site saves time even there) */
  /* the whole graph, scheduled, without and with the chosen rewrites */
  double step_before_us, step_after_us, exposed_before_us, exposed_after_us;
  uint64_t peak_before_bytes, peak_after_bytes;
  int32_t nodes_before, nodes_after;
  char *names; /* (owned) the sites' names and groups, one block */
} SgDecomposeStats;

/* The pass (SgPassFunc): cfg->decompose decides (auto, off, all). Needs
 * the estimate pass (costs and the cost model). Costs the nodes it adds.
 * Its statistics stay attached to @g (sg_decompose_stats). Invalidates
 * node ids and users. With cfg->exact it decomposes nothing (the exact
 * scheduler's limits). */
bool sg_decompose_pass (SgGraph *g, const SgConfig *cfg, GError **error);

/* (transfer none) The statistics of the last run on @g, or NULL. */
const SgDecomposeStats *sg_decompose_stats (const SgGraph *g);

/* (transfer full) The report's `decompose` object (docs/report-format.md):
 * {"enabled": false} when the pass did not run. */
cJSON *sg_decompose_report (const SgGraph *g);

/* Appends the summary lines (sites, choices, predicted saving) to @out;
 * nothing when the pass did not run or found no site. */
void sg_decompose_summary (const SgGraph *g, GString *out);

G_END_DECLS
