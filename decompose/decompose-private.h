/* decompose-private.h: what decompose/'s files share.
 *
 * find.c recognises the sites (SgSite), emit.c writes a site in one form
 * into a rewrite, judge.c prices the forms and confirms the choice with
 * whole-graph simulations, decompose.c is the pass and its statistics,
 * report.c the report and summary.
 */
#pragma once

#include "decompose.h"
#include "estimate.h"
#include "schedule.h"

/* A producer of rows summed into the collective: one node of the tree of
 * adds over mms that computes the reduced tensor (post order: operands
 * before the add that reads them). */
typedef struct {
  SgNodeId node;
  int32_t a, b; /* an add: the tree entries of its two operands; an mm: -1 */
} SgSiteTerm;

/* A recognised collective. */
typedef struct {
  SgNodeId coll, wait;
  SgSiteKind kind;
  SgSiteReason reason; /* SG_SITE_DECOMPOSED while it is a candidate */
  int32_t k;           /* the group's size */
  int64_t rows;        /* all_gather: the gathered rows (k x the input's); else the reduced
                        * tensor's rows */
  /* all_gather: the mms that read the gathered rows, each through the view
   * at the same index (SG_NO_NODE: directly); views whose only users are
   * those mms go with them */
  SgNodeId *mm, *view;
  int32_t n_mm;
  int32_t n_whole;     /* users that need the whole gathered tensor */
  /* reduce_scatter, all_reduce: the tree of the reduced tensor, root last */
  SgSiteTerm *terms;
  int32_t n_terms;
  int32_t n_leaves;
} SgSite;

/* Every all_gather, reduce_scatter and all_reduce of @g in id order
 * (transfer full, *@n of them; sg_sites_free), candidates with reason
 * SG_SITE_DECOMPOSED, the others with why not. Users must be fresh. */
SgSite *sg_sites_find (const SgGraph *g, int32_t *n);
/* sg_sites_find by ranges of nodes on @pool: the same sites. */
SgSite *sg_sites_find_pool (const SgGraph *g, SgPool *pool, int32_t *n);
void sg_sites_free (SgSite *sites, int32_t n);

/* The class of every candidate of @sites (-1 for the others), numbered in
 * graph order (transfer full; *@n_classes of them): sites of one class
 * have the same collective kind, group, shapes and dtypes and the same
 * mms, views or tree of adds, so each form rewrites them into the same
 * new nodes. */
int32_t *sg_sites_classes (const SgGraph *g, const SgSite *sites, int32_t n, int32_t *n_classes);

/* The most leaves a sum of mms may have. */
#define SG_SITE_MAX_LEAVES 16

/* Adds site @s in form @f to @rw: the new nodes, the uses redirected, the
 * site's nodes removed. Appends the new nodes that run, in the ring's own
 * order (what sg_span_run prices), to @span (SgNodeId, rewrite ids);
 * @anchors (SgNodeId, or NULL) gets at index id - n_nodes of every added
 * node the base node it is placed before. False with @error on a refusal
 * of the rewrite API (a bug). */
bool sg_site_emit (SgRewrite *rw, const SgSite *s, const SgSiteForm *f, GArray *span,
                   GArray *anchors, GError **error);

/* The first user of an all_gather site's wait that needs the whole
 * gathered tensor (not one of its mms or their views); the wait when none. */
SgNodeId sg_site_first_whole (const SgGraph *g, const SgSite *s);

/* The undecomposed site's compute in order: the mms (and adds) it would
 * replace (SgNodeId into @out). */
void sg_site_base_nodes (const SgSite *s, GArray *out);

/* The forms worth pricing for site @s on @g's cluster: ring steps over
 * NCCL and (within one node) the copy engine, all_reduce in 2, 4 or 8 row
 * chunks, each with the chunk GEMMs on every SM or on SG_DECOMPOSE_SM_FREE
 * fewer, and for an all_gather with whole users the whole tensor
 * reassembled or re-gathered. Fills @out (at most SG_SITE_MAX_FORMS),
 * returns how many. */
#define SG_SITE_MAX_FORMS 8
int32_t sg_site_forms (const SgGraph *g, const SgSite *s, SgSiteForm *out);

/* SMs a chunk GEMM leaves to the ring step beside it when it gets an
 * SM-count target (docs/decompose.md). */
#define SG_DECOMPOSE_SM_FREE 16

/* The choice for every candidate (judge.c): forms[i] of sites[i] and
 * whether it is decomposed; the statistics' step, exposure and peak
 * before and after. @rw (a rewrite of @g) is the judge's: when some site
 * is chosen it is left holding exactly the chosen rewrites, ready to
 * commit. */
typedef struct {
  SgSiteForm form;
  double gain_us;
  double exposed_us;
  /* auto: the most any form could be judged to save (NaN: not bounded) */
  double bound_us;
  bool chosen;
} SgSiteChoice;

bool sg_decompose_judge (SgGraph *g, const SgConfig *cfg, SgSite *sites, int32_t n,
                         SgSiteChoice *choice, SgDecomposeStats *st, SgRewrite *rw,
                         GError **error);

/* Describes the chosen sites in @rw (reset first); @anchors as
 * sg_site_emit's. */
bool sg_decompose_rewrite (SgRewrite *rw, const SgSite *sites, int32_t n,
                           const SgSiteChoice *choice, GArray *anchors, GError **error);
