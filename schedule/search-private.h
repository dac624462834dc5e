/* search-private.h: the state of a search (search.c), shared by its
 * files: search.c (placing, pruning, the depth-first search, results),
 * search-setup.c (a window's nodes, masks and frames), search-memo.c
 * (dominance between partial orders, the memo, the lower bound of the
 * rest). The contract is in search.c.
 */
#pragma once

#include "schedule-private.h"

#define EPS 1e-9

/* One depth of the search. */
typedef struct {
  SgEngSnap snap;
  /* rq, npend and n_issued lie in that order in buf (owned), so that one
   * copy takes them all (frame_copy); sg_search_reset lays them out */
  void *buf;
  uint64_t *rq;   /* quick positions ready and not placed (bits by position, nw words) */
  int32_t *npend; /* inputs in the window not placed; -1 once placed */
  uint8_t *n_issued; /* per group: collectives issued in the window */
  int32_t n_placed;
  uint64_t key;   /* decision nodes placed (bits) */
  uint64_t ready; /* decision nodes ready and not placed (bits) */
  uint64_t cmask; /* compute nodes with a cost placed (bits) */
  double work;    /* their work */
  uint64_t seqh;  /* a hash of seq (search_seq_hash, summed) */
  uint8_t seq[SG_SEARCH_MAX_COLLS]; /* per window collective: its issue rank in its group */
} Frame;

/* What seq[@c] = @rank adds to a frame's seqh. */
static inline uint64_t
search_seq_hash (int32_t c, int32_t rank)
{
  uint64_t k = ((uint64_t)(uint32_t)c << 8 | (uint64_t)(uint8_t)rank) + 0x9e3779b97f4a7c15ULL;
  k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ULL;
  k = (k ^ (k >> 27)) * 0x94d049bb133111ebULL;
  return k ^ (k >> 31);
}

/* A kept state's group (search-memo.c): the place of its head in the
 * group's tracked collectives (those queued at the window's start, then
 * the window's in issue order), or how many it issued when its queue is
 * empty; the head's work left and whether it is held. */
typedef struct {
  double rem;
  uint8_t done, held;
} GroupState;

struct SgSearch {
  const SgGraph *g;
  SgSimEngine *e; /* at the window's start on entry, restored on exit */
  SgSearchGoal goal;
  int32_t m, ng;
  int32_t nw; /* words of a bitset of positions */
  int32_t cap_m, cap_frames; /* what the buffers below hold (reused by reset) */
  SgNodeId *node;  /* window position -> node */
  int32_t *local;  /* node -> window position, -1 (n entries, owned by the caller), or NULL: */
  SgNodeId *hnode; /* ... the search's own table (open addressing by node, hcap entries) */
  int32_t *hpos;
  uint32_t hcap;
  uint8_t *role;
  double *cost;
  int32_t *dec, *comp, *coll; /* position -> decision bit / compute bit / collective index, -1 */
  SgNodeId *coll_of;          /* position -> the collective a wait waits on, SG_NO_NODE */
  int32_t *eng_arg;           /* position -> what placing it looks up (sg_eng_place_arg): a
                               * collective's rates entry in the engine's memo, a wait's
                               * collective, a costly compute node's kernel slot, else 0 */
  uint32_t *ifirst, *ufirst;  /* in-window inputs and users, CSR by position */
  int32_t *ins, *users;
  uint32_t *fill; /* scratch of the users' CSR */
  uint32_t cap_ins; /* entries ins and users hold */
  int32_t n_dec, n_comp, n_coll;
  int32_t *decs;  /* positions with a decision bit, in order (n_dec) */
  uint64_t kind_decs[3]; /* decision bits of collectives, of compute, of stalls (waits) */
  SgNodeId coll_node[SG_SEARCH_MAX_COLLS]; /* tracked collectives: the window's, then
                                            * those running at its start */
  int32_t n_track;
  int32_t coll_group[SG_SEARCH_MAX_COLLS]; /* their groups */
  /* the place of each one queued at the start in its group's tracked
   * collectives (by tracked number), its row; per group, how many */
  uint8_t track_idx[SG_SEARCH_MAX_COLLS];
  int32_t track_row[SG_SEARCH_MAX_COLLS];
  uint8_t *n_pre;
  /* the engine's rows at the window's start; per row issued since (by row
   * - row0), its place in its group's tracked collectives (place sets it) */
  int32_t row0;
  uint8_t row_idx[SG_SEARCH_MAX_COLLS];
  uint64_t anc[SG_SEARCH_MAX_COLLS], desc[SG_SEARCH_MAX_COLLS]; /* compute bits */
  SgNodeId *beyond; /* per group: the first queued collective not tracked, or SG_NO_NODE */
  bool any_beyond;  /* one of them is not SG_NO_NODE */
  double ccost[64];
  double window_work; /* compute work of the window */
  SgBoundRates rates;
  SgBoundScratch bs;
  bool monotone;
  Frame *frames;
  int32_t *order, *best; /* positions */
  double best_value;
  double rest; /* SG_SEARCH_EARLY: compute work after the window */
  /* SG_SEARCH_EARLY: the SG_SEARCH_KEEP best window orders by score */
  int32_t n_kept;
  double kept_score[SG_SEARCH_KEEP];
  int32_t *kept[SG_SEARCH_KEEP];
  bool found;
  double *ef;    /* scratch of the critical-path bound (by position) */
  uint64_t *mkeys;
  int32_t *mhead; /* per slot: the key's last kept state, -1 (empty) */
  int32_t *mslot; /* the slots in use (mused of them; room for mcap / 2): a reset
                   * empties those alone */
  int32_t mcap, mused;
  /* the partial orders kept for dominance (keyed by the set placed and
   * seqh), by number: clock, next of the same key (-1), ng group states
   * each and the window collectives' issue ranks (seq) each */
  uint64_t *mseqh;
  double *mnow;
  int32_t *mnext;
  GroupState *mgrp;
  uint64_t *mseq; /* seq as n_seqw words each */
  int32_t n_seqw;  /* words of the window collectives' ranks (those past are 0) */
  int32_t n_states, cap_states;
  size_t cap_rows;
  int64_t expanded, budget;
  bool gave_up;
};

/* search-memo.c */
/* False when a partial order seen before dominates @f's; else remembers it. */
bool search_memo_admit (SgSearch *S, const Frame *f);
/* SG_SEARCH_STEP: a lower bound on the step of any completion of @f. */
double search_lower_bound (SgSearch *S, const Frame *f);
