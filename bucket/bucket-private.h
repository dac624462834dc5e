/* bucket-private.h: helpers shared by the files of bucket/ (not public). */
#pragma once

#include "bucket.h"
#include "estimate.h" /* IWYU: bucket.c costs new nodes */

/* kwargs key of a bucket collective listing its members' names. */
#define SG_BUCKET_KWARG "schedgraph_bucket"

/* True when collective @c can join a bucket: all_gather, reduce_scatter or
 * all_reduce with one tensor input and exactly one user, its wait (stored
 * in *wait), and not a chunk of a decomposed collective matmul
 * (SG_CHUNK_KWARG). Users must be fresh (sg_graph_fill_users). */
bool sg_bucket_member_check (const SgGraph *g, SgNodeId c, SgNodeId *wait, GError **error);

/* --- the searches (bucket.c, layers.c) and their driver (run.c) --------- */

/* Steps within this many microseconds count as equal (the report's
 * precision): a merge that changes the predicted step by less is kept for
 * the collectives it saves. No result exceeds the unbucketed step by more
 * (the searches compare with it as well as with their current step). */
#define SG_BUCKET_TIE_US 1e-3

/* What collectives must share to merge: kind, group, dtype, reduce op. */
typedef struct {
  SgOpKind kind;
  int32_t group;
  SgDtype dtype;
  SgReduceOp reduce;
} SgBucketKey;

/* A collective that may join a bucket (sg_bucket_member_check), with its
 * wait, its key (kind, group, dtype, reduce op: only equal keys merge) and
 * the bytes it moves (sg_node_comm_bytes). */
typedef struct {
  SgNodeId c, w;
  int32_t key;
  uint64_t bytes;
} SgBucketCand;

typedef struct SgBucketTrials SgBucketTrials; /* rewrite.c, below */
typedef struct SgBucketMemoKey SgBucketMemoKey; /* lower.c, below */

/* What judging a trial needs of its own (verdict.c): one worker judges
 * one trial at a time, on the graph itself or over a fork of it
 * (sg_rewrite_fork). */
typedef struct {
  SgGraph *g;              /* the base of its trials: the search's graph or a fork */
  SgBucketTrials *trial;   /* every trial graph of @g is built with it */
  SgSimJudge *judge;       /* and judged by it (each run where it differs from the last) */
  uint64_t *node_alloc;    /* sg_node_alloc_bytes of the trial graph's nodes (scratch) */
  uint64_t *storage_alloc; /* its storages' bytes (scratch) */
  SgNodeId *added;         /* its new nodes (scratch) */
  SgElision el;            /* its zero-copy analysis (memory kept across trials) */
  size_t n_alloc;          /* entries of the three scratch arrays */
  SgPool *pool;            /* its trials' per-node passes (cfg->pool) */
} SgBucketWorker;

/* The workers that judge trials (verdict.c): one on the graph itself,
 * the others over forks of it, made when first taken, at most a budget's
 * worth. */
typedef struct SgBucketReplicas SgBucketReplicas;

/* What a search reads; run.c sets it up on the scheduled graph. The
 * searches of auto mode may run side by side (run.c), each on its own
 * copy of this struct: the fields marked "shared" are the same for all
 * (the memo behind its lock), the others each copy's own. */
typedef struct {
  SgGraph *g;            /* shared, read only while the searches run */
  const SgConfig *cfg;
  SgBucketStats *st;     /* simulations and refusals are counted here */
  SgAug *aug;            /* data and non-hiding implicit edges of @g (its
                          * queries write scratch: one per copy) */
  SgBucketReplicas *replicas; /* shared: the workers that judge */
  SgBucketWorker *home;  /* judges what this search asks (sg_bucket_evaluate) */
  int32_t owner;         /* the pool worker this search runs on */
  int32_t ahead;         /* at most this many sets judged at once ahead */
  uint64_t *base_alloc;  /* shared: sg_node_alloc_bytes of @g's nodes */
  bool base_costed;      /* every node of @g has its cost (est_src): a trial
                          * prices its new nodes alone */
  GHashTable *lower_memo; /* the rule's verdicts by members (lower.c) */
  GHashTable *eval_memo;  /* shared: verdicts by lowered specs (verdict.c) */
  GMutex *memo_lock;      /* shared: guards @eval_memo */
  SgBucketCand *cands;   /* shared: in id order */
  int32_t n_cands, n_keys;
  uint64_t cap;          /* bytes per flat bucket (a larger one is grouped) */
  /* how buckets are lowered: cfg->bucket_lowering, or FLAT for the
   * flat-only greedy of auto mode (run.c) */
  SgBucketLowering lowering;
  bool flat_only;        /* lowering FLAT: the cap bounds every bucket */
  uint64_t peak_limit;   /* predicted peak live bytes a result may reach */
  double base_step_us;   /* the unbucketed graph's predicted step */
} SgBucketSearch;

/* The simulator's verdict on one set of buckets. */
typedef struct {
  double exposed_us, step_us;
  uint64_t peak_bytes;
} SgBucketEval;

/* Sets @s up on @g (estimated, in a topological order) for the searches
 * of sg_bucket_run: the candidates, constraints, trial rewrite, judge and
 * memos; @st gives the cap and lowering, @base the unbucketed verdict.
 * sg_bucket_search_clear frees what it holds (not @g, @cfg, @st). */
void sg_bucket_search_init (SgBucketSearch *s, SgGraph *g, const SgConfig *cfg,
                            SgBucketStats *st, const SgBucketEval *base);
void sg_bucket_search_clear (SgBucketSearch *s);

/* Simulates @s->g with @specs applied (a trial graph, @s->g unchanged) and
 * counts the simulation; buckets whose lowering is AUTO lowered by the
 * local rule (lower.c). False when the rewrite refuses the specs (a cycle
 * through implicit edges): @out is left alone then. */
bool sg_bucket_evaluate (SgBucketSearch *s, const SgBucketSpec *specs, int32_t n_specs,
                         SgBucketEval *out);
/* run.c: the augmented graph of @g without its hiding edges (the
 * searches' constraints). Reads @g's inputs and swaps its edge list for a
 * moment: not while searches run. (transfer full) */
SgAug *sg_bucket_constraints (SgGraph *g);

/* A search's result: its buckets and their verdict. */
typedef struct {
  SgBucketSpec *specs;
  int32_t n;
  SgBucketEval ev;
  SgBucketSource source;
} SgBucketChoice;
/* Keeps @c in @best when it predicts a shorter step, or the same step
 * (within SG_BUCKET_TIE_US) with fewer collectives; frees the loser
 * (searches.c). */
void sg_bucket_keep_better (SgBucketChoice *best, SgBucketChoice c);
/* searches.c: the greedy refined into @greedy (with auto lowering and a
 * bucket the rule groups, also the flat-only greedy refined, the shorter
 * of the two in @greedy) and, with @refine_layer, the per-layer buckets in
 * @layer refined in place: side by side on the pool where workers are
 * free to judge for them, else one after the other; the same results and
 * counts either way. False with @error when a greedy fails (@greedy and
 * @layer hold what the caller frees). */
bool sg_bucket_searches (SgBucketSearch *s, const SgBucketEval *base, SgBucketChoice *greedy,
                         SgBucketChoice *layer, bool refine_layer, GError **error);

/* One set of buckets to judge ahead. */
typedef struct {
  const SgBucketSpec *specs;
  int32_t n_specs;
} SgBucketSet;
/* Judges the @n_sets sets ahead, in parallel on cfg->pool, into the
 * search's memo, where sg_bucket_evaluate finds them (verdict.c): for the
 * sets a search will ask about next, whatever the answers before them.
 * Changes no decision and counts nothing; does nothing without a pool of
 * several threads. */
void sg_bucket_prefetch (SgBucketSearch *s, const SgBucketSet *sets, int32_t n_sets);
/* How many sets sg_bucket_prefetch judges at once: the threads it may use
 * (1: it judges none ahead). */
int32_t sg_bucket_ahead_width (const SgBucketSearch *s);
/* (transfer full) The workers that judge trials of @g: the first on @g
 * itself, the others over forks of @g, at most @max in all; the layouts
 * and judges of every one use cfg->pool. */
SgBucketReplicas *sg_bucket_replicas_new (SgGraph *g, const SgConfig *cfg, int32_t max);
void sg_bucket_replicas_free (SgBucketReplicas *r);
/* A worker no one holds (the one on @g first, when free), made now if
 * need be; NULL when every one the budget allows is held. Hand it back
 * with sg_bucket_replica_give. */
SgBucketWorker *sg_bucket_replica_take (SgBucketReplicas *r);
void sg_bucket_replica_give (SgBucketReplicas *r, SgBucketWorker *w);
/* No path between @a and @b in @aug, neither between the collectives nor
 * between the waits: one bucket may hold both without closing a cycle. */
bool sg_bucket_cands_independent (SgAug *aug, const SgBucketCand *a, const SgBucketCand *b);
void sg_bucket_specs_free (SgBucketSpec *specs, int32_t n);

/* bucket.c: the greedy over @s->cands in id order from the unbucketed
 * graph (@base its simulation): every merge it keeps passed a simulation
 * with step_us not above the current one and the peak within the limit.
 * Returns the specs (transfer full, sg_bucket_specs_free) and their
 * evaluation in @out (@base when none). NULL with @error when the screen's
 * simulation fails. */
SgBucketSpec *sg_bucket_greedy (SgBucketSearch *s, const SgBucketEval *base, SgBucketEval *out,
                                int32_t *n_specs, GError **error);

/* layers.c: FSDP2's per-layer buckets from the graph's structure: the
 * parameter collectives (all_gathers of graph inputs, reduce_scatters and
 * all_reduces of gradients) grouped by the transformer layer they serve,
 * one bucket per layer and key (docs/bucketing.md "Per-layer mode").
 * *@n_layers gets the layers found (0: none, and no specs). (transfer
 * full) */
SgBucketSpec *sg_bucket_per_layer (SgBucketSearch *s, int32_t *n_specs, int32_t *n_layers);

/* refine.c: splits at the ends and merges of neighbours on @specs (whose
 * evaluation is *@ev), each kept only when the predicted step gets
 * shorter (a split) or not longer (a merge) and the peak stays within the
 * limit; a bounded number of simulations. Returns the refined specs
 * (transfer full) and updates *@ev. */
SgBucketSpec *sg_bucket_refine (SgBucketSearch *s, const SgBucketSpec *specs, int32_t n_specs,
                                SgBucketEval *ev, int32_t *n_out);

/* predict.c: a screen of merges from the unbucketed timeline (large
 * graphs). NULL with @error when the graph cannot be simulated. */
typedef struct SgBucketPredict SgBucketPredict;
SgBucketPredict *sg_bucket_predict_new (const SgGraph *g, GError **error);
void sg_bucket_predict_free (SgBucketPredict *p);
/* True unless the merged collective of @colls (with their @waits, @n
 * members, @bytes in all, lowered as @lowering says: its solo time) is
 * predicted to stall the compute stream longer than the members did.
 * @sizes: each member's sg_node_comm_bytes, or NULL (computed then). */
bool sg_bucket_predict_ok (const SgBucketPredict *p, const SgNodeId *colls,
                           const SgNodeId *waits, const uint64_t *sizes, int32_t n,
                           uint64_t bytes, SgBucketLowering lowering, uint64_t cap);

/* lower.c: the local rule: whether one bucket of the @n collectives
 * @colls is lowered grouped (its coalesced call costs less than the flat
 * call plus the copies the flat layout keeps, or it moves more than @cap
 * bytes: the cap bounds flat buffers), or as @forced says when not AUTO;
 * *@comm_us (may be NULL): the chosen lowering's collective time. */
bool sg_bucket_lower_rule (const SgGraph *g, SgBucketLowering forced, uint64_t cap,
                           const SgNodeId *colls, int32_t n, double *comm_us);
/* sg_bucket_lower_rule with the members' bytes (sg_node_comm_bytes of
 * each of @colls) given in @sizes: the same verdict and time. */
bool sg_bucket_lower_rule_sized (const SgGraph *g, SgBucketLowering forced, uint64_t cap,
                                 const SgNodeId *colls, const uint64_t *sizes, int32_t n,
                                 double *comm_us);
/* Decides the lowering of every AUTO spec by the rule (s->lowering, when
 * not AUTO, decides every spec); the rule's verdicts are kept in
 * s->lower_memo (sg_bucket_memo_new) when the search has one. */
void sg_bucket_lower_specs (const SgBucketSearch *s, SgBucketSpec *specs, int32_t n);
/* The search's memos (lower.c): hash tables keyed by lists of ids (a
 * bucket's members; a set of buckets spelled out, run.c), keys freed
 * with g_free, values with @value_free. */
struct SgBucketMemoKey {
  int32_t n;
  int32_t items[];
};
/* (transfer full) a key of @n items, to be filled */
SgBucketMemoKey *sg_bucket_memo_key (int32_t n);
GHashTable *sg_bucket_memo_new (GDestroyNotify value_free);
/* GROUPED for FLAT, FLAT for anything else. */
SgBucketLowering sg_bucket_lowering_other (SgBucketLowering l);
/* Flips the lowering of one bucket at a time (the rule's closest calls
 * first, a bounded number of simulations) and keeps a flip where the
 * predicted step gets shorter within the peak limit; updates *@ev. Nothing
 * when s->lowering is not AUTO. */
void sg_bucket_relower (SgBucketSearch *s, SgBucketSpec *specs, int32_t n, SgBucketEval *ev);

/* report.c: fills st->infos (and n_infos) from the bucket collectives of
 * @g, in id order, reading their schedgraph_bucket kwargs, with what
 * codegen does with their copies. */
void sg_bucket_collect_infos (SgGraph *g, SgBucketStats *st);

/* rewrite.c: what a bucket's new nodes hold, from its members alone. */
typedef struct {
  int32_t n;            /* members */
  SgOpKind kind;
  int32_t group, k;     /* group index and size */
  SgReduceOp reduce;
  SgDtype dtype;
  SgBucketLayout l;
  uint64_t *in_numel, *offsets, *out_numel; /* n each (sg_bucket_layout) */
  SgNodeId *inputs;     /* each member's input, n */
} SgBucketPlan;

/* Fills @p for @spec (members with their @waits): the layout and the
 * checks the rewrite makes before it appends anything. False with @error
 * (and @p cleared) when the members cannot share a bucket. */
bool sg_bucket_plan_make (const SgGraph *g, const SgBucketSpec *spec, const SgNodeId *waits,
                          SgBucketPlan *p, GError **error);
void sg_bucket_plan_clear (SgBucketPlan *p);

/* sg_bucket_apply's checks of @specs on @g (users refreshed): at least two
 * members each, ids in range, no member twice (@taken, n_nodes entries,
 * zeroed by the caller, marks them), each member bucketable. Fills @waits
 * (one per member, in spec order) and per spec the earliest member id
 * (@start_pos) and the first consumer of any member's wait (@use_pos);
 * specs before @from passed these checks on @g already (a trial's
 * buckets kept from the last one): their members are only marked. So did
 * specs b >= @from with @known[b] >= 0 (a trial's buckets replayed from
 * the last one; @known NULL: none): their members are checked for range
 * and overlap only, their waits and positions not filled. */
bool sg_bucket_specs_check (SgGraph *g, const SgBucketSpec *specs, int32_t n_specs, int32_t from,
                            const int32_t *known, bool *taken, SgNodeId *waits,
                            int64_t *start_pos, int64_t *use_pos, GError **error);

/* rewrite.c: the pass's trial graphs, all of one rewrite of the graph
 * (the same code as sg_bucket_apply's commit). A trial describes again
 * only the buckets from the first one that differs from the last trial's
 * on (sg_rewrite_mark / sg_rewrite_rollback), and of those it copies the
 * ones the last trial had too (sg_rewrite_replay); what it describes is
 * what a fresh rewrite would. */
/* (transfer full) Trials of @g, which must not change while they live;
 * @verify: each trial's order is checked against a full layout
 * (sg_rewrite_set_verify; the validator's); their layouts may use @pool
 * (sg_rewrite_set_pool). */
SgBucketTrials *sg_bucket_trials_new (SgGraph *g, bool verify, SgPool *pool);
void sg_bucket_trials_free (SgBucketTrials *t);
/* How many buckets the last trial took from the one before it as they
 * were (sg_rewrite_replay: a bucket with the same spec, whatever its
 * place in the list) instead of building them again. */
int32_t sg_bucket_trials_replayed (const SgBucketTrials *t);

/* Applies @specs to the trials' graph with the trials' rewrite: the
 * graph sg_bucket_apply makes, laid out in the memory of the last trial
 * graph and reusing its order where it holds (sg_rewrite_commit). No
 * trial may follow; free @t after. False with @error as sg_bucket_apply
 * (the graph unchanged). */
bool sg_bucket_trials_commit (SgBucketTrials *t, const SgBucketSpec *specs, int32_t n_specs,
                              GError **error);

/* The graph sg_bucket_apply would make from the trials' graph and @specs,
 * as a trial graph of the rewrite API (sg_rewrite_trial: nothing of the
 * graph copied or changed). New nodes have est_src SG_COST_NONE. Free it
 * with sg_graph_free() before the next trial. NULL with @error where
 * sg_bucket_apply fails (an ill-formed bucket, a cycle). */
SgGraph *sg_bucket_trial (SgBucketTrials *t, const SgBucketSpec *specs, int32_t n_specs,
                          GError **error);
