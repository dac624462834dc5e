/* plan.h: the stream program that codegen/ writes and runtime/ executes.
 *
 * The contract between the two (docs/plan-format.md is its prose form).
 * It does not depend on the graph IR: runtime/ reads plans, not graphs.
 * Mirrors nvFuser's host IR: explicit streams, events, collectives, kernels.
 *
 * Execution model. `ins` is the host issue order. Each instruction runs on
 * one stream; the per-stream order is the subsequence of `ins` on that
 * stream. Stream 0 is the compute stream; stream 1 + g is the comm stream of
 * group g. Cross-stream order is only what RECORD / WAIT_EVENT say:
 *  - before a COLLECTIVE, codegen emits RECORD e on stream 0 and WAIT_EVENT e
 *    on the comm stream (the collective starts after all compute issued
 *    before it: that orders its input and any memory it reuses);
 *  - after it, RECORD e' on the comm stream; the graph's wait_tensor becomes
 *    WAIT_EVENT e' on stream 0 with `coll` naming the collective (the
 *    runtime measures exposed time there).
 * A backend that runs `ins` in order on one thread (CPU backend, reference)
 * is correct by construction; the CUDA backend issues the same list to real
 * streams.
 *
 * Memory. Every value lives in one buffer (or none); buffers have offsets in
 * one arena per rank, planned from lifetimes (first and last instruction
 * index, a collective's operands extended to its WAIT_EVENT), so the peak is
 * known before running. Aliases (views, getitem, wait outputs) are values
 * that share their root's buffer with their own offset/shape/stride.
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops.h"

G_BEGIN_DECLS

#define SG_PLAN_FORMAT "schedgraph.plan"
#define SG_PLAN_VERSION 1
#define SG_PLAN_MAX_DIMS 12
/* The largest integer a plan holds (2^53: JSON numbers are doubles; a
 * larger one would lose bits). */
#define SG_PLAN_MAX_INT 9007199254740992.0

#define SG_PLAN_ERROR (sg_plan_error_quark ())
GQuark sg_plan_error_quark (void);
typedef enum {
  SG_PLAN_ERROR_IO,
  SG_PLAN_ERROR_PARSE,   /* malformed or truncated JSON */
  SG_PLAN_ERROR_VERSION, /* another format or version */
  SG_PLAN_ERROR_HASH,    /* content does not match its hash */
  SG_PLAN_ERROR_INVALID, /* an index out of range, a broken rule */
} SgPlanError;

typedef struct {
  char *name;          /* the graph's group name */
  int32_t n_ranks;     /* ranks per instance */
  int32_t n_instances; /* n_ranks * n_instances == world_size */
  int32_t *partition;  /* n_instances rows of n_ranks ranks, ascending */
} SgPlanGroup;

typedef struct {
  uint64_t offset; /* in the arena, aligned to 256 bytes */
  uint64_t bytes;
  int32_t first_ins, last_ins; /* lifetime, inclusive, as instruction indices */
} SgPlanBuffer;

typedef enum {
  SG_INIT_NONE = 0, /* written by an instruction */
  SG_INIT_INPUT,    /* a placeholder / get_attr: filled from the seed before the step */
} SgValueInit;

typedef struct {
  char *name;      /* the graph node; tuple elements are "NAME.I"; in the
                    * plan's strings (sg_plan_str) */
  int32_t buffer;  /* -1: no storage (not a tensor) */
  SgValueInit init;
  uint64_t offset; /* bytes from the buffer's start */
  /* A rank-dependent placement (a rank_roll lowered to views): on the rank
   * at position r of group roll_group (k ranks) the value lies roll_block x
   * sg_rank_roll_block (0, k, roll_shift, roll_sign, r) bytes further
   * (sg_plan_value_offset). roll_block 0: none. */
  int32_t roll_group, roll_sign;
  int64_t roll_shift;
  uint64_t roll_block;
  SgDtype dtype;
  int32_t ndim; /* at most SG_PLAN_MAX_DIMS */
  /* ndim sizes and ndim strides (elements): (transfer none) in the plan's
   * storage (sg_plan_value_set_dims), or in whatever a hand-built plan
   * points them to */
  int64_t *shape, *stride;
} SgPlanValue;

typedef enum {
  SG_INS_KERNEL,     /* stream 0: op over in -> out */
  SG_INS_COLLECTIVE, /* comm stream: op in SG_CLASS_COLLECTIVE, in[0] -> out[0] */
  SG_INS_RECORD,     /* record `event` on `stream` */
  SG_INS_WAIT_EVENT, /* `stream` waits for `event`; coll >= 0 for a wait_tensor */
  SG_INS_FREE,       /* `buffer`'s lifetime ends (backends may poison it) */
} SgInsKind;

typedef struct {
  SgInsKind kind;
  int32_t stream;
  char *name;   /* the graph node it comes from; NULL for RECORD/FREE */
  char *target; /* KERNEL: the graph's target string */
  /* (name and target: in the plan's strings, sg_plan_str) */
  SgOpKind op;  /* KERNEL / COLLECTIVE */
  int32_t n_in, n_out;
  /* KERNEL of a matmul: its GEMM's SM-count target; 0 = every SM */
  int32_t sm_count;
  int32_t *in;  /* n_in value ids */
  int32_t *out; /* n_out value ids (-1 for tuple elements that are not tensors) */
  /* KERNEL and COLLECTIVE: the node's args/kwargs with every {"node": NAME}
   * replaced by {"value": ID} (a collective's group name, split sizes,
   * broadcast source are there); (transfer full) owned by the instruction. */
  cJSON *args, *kwargs;
  /* COLLECTIVE */
  int32_t group;      /* index into groups */
  SgReduceOp reduce;  /* reduce_scatter / all_reduce */
  SgDtype dtype;      /* element type of in[0] and out[0] */
  SgTransport transport; /* collective_permute: how the data moves */
  int64_t count;      /* NCCL's count argument: all_gather: input elements,
                       * reduce_scatter: output elements, all_reduce /
                       * broadcast: elements, all_to_all: input elements */
  /* RECORD / WAIT_EVENT */
  int32_t event;
  int32_t coll;       /* WAIT_EVENT of a wait_tensor: index of its COLLECTIVE ins, else -1 */
  /* FREE */
  int32_t buffer;
  /* bucket/: a COLLECTIVE that merges several graph collectives lists them */
  int32_t n_members;
  char **members;
  /* COLLECTIVE collective_permute: n_pairs (source, target) pairs of group
   * ranks, pairs[2 i] and pairs[2 i + 1] */
  int32_t *pairs, n_pairs;
  /* predictions from schedule/'s simulator (microseconds), -1 when none */
  double est_us, pred_start_us, pred_end_us, pred_exposed_us;
} SgPlanIns;

typedef struct {
  double step_us, compute_us, comm_us, exposed_us, lower_bound_us;
  uint64_t peak_bytes;
  int32_t collectives, hidden, partial, exposed;
} SgPlanPrediction;

/* Storage of the values' sizes and strides (plan.c): blocks that never
 * move. */
typedef struct SgPlanDims SgPlanDims;

typedef struct SgPlan {
  int32_t world_size;
  SgPlanGroup *groups;
  int32_t n_groups;
  int32_t n_streams; /* 1 + n_groups */
  int32_t n_events;
  uint64_t arena_bytes;
  SgPlanBuffer *buffers;
  int32_t n_buffers;
  SgPlanValue *values;
  int32_t n_values;
  SgPlanDims *dims; /* where sg_plan_value_set_dims and sg_plan_alloc put them; freed
                     * with the plan */
  GStringChunk *strings; /* names and targets (sg_plan_str); freed with the plan */
  int32_t *inputs, n_inputs;   /* values with SG_INIT_INPUT, in graph order */
  int32_t *outputs, n_outputs; /* the graph output node's values, in order */
  SgPlanIns *ins;
  int32_t n_ins;
  SgPlanPrediction pred;
  char *graph;   /* the source graph's file name or description */
  char *options; /* the schedgraph options that made it, canonical text */
  uint64_t hash; /* FNV-1a 64 of the canonical JSON with "hash": 0 */
} SgPlan;

/* (transfer full) An empty plan. */
SgPlan *sg_plan_new (void);
void sg_plan_free (SgPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SgPlan, sg_plan_free)

/* (transfer none) A copy of @s (NULL: NULL) among @plan's strings, freed
 * with the plan all at once: the names and targets of its values and
 * instructions live there (a million names are a million allocations
 * less). @shared: one copy per distinct string (targets repeat; names are
 * distinct and not looked up). */
char *sg_plan_str (SgPlan *plan, const char *s, bool shared);

/* Gives @v @ndim dimensions (at most SG_PLAN_MAX_DIMS): its shape and
 * stride point to 2 @ndim integers that @plan owns (freed with it), copied
 * from @shape and @stride (NULL: zeros). */
void sg_plan_value_set_dims (SgPlan *plan, SgPlanValue *v, int32_t ndim, const int64_t *shape,
                             const int64_t *stride);

/* (transfer none) @bytes bytes (aligned for int64_t) that @plan owns,
 * freed with it: names and dimensions made apart, e.g. on several threads
 * (codegen/ fills its values' so), then pointed to by values. */
void *sg_plan_alloc (SgPlan *plan, size_t bytes);

/* Canonical JSON text: fixed field order, integers for bytes and ids, fixed
 * precision for microseconds; identical plans give identical bytes. Sets
 * plan->hash first. (transfer full) g_free() the result. */
char *sg_plan_to_json (SgPlan *plan, size_t *len);

/* What runs tasks at once for plan/, which does not link graph/ (codegen/
 * passes graph/'s worker pool through it). @run runs @fn (@ctx, task,
 * worker) for every task 0 .. @n_tasks-1 and returns when all have run;
 * each task writes only what its index owns, @worker (0 ..
 * @n_workers-1) only picks scratch. */
typedef void (*SgPlanTaskFunc) (gpointer ctx, int32_t task, int32_t worker);
typedef struct {
  void (*run) (gpointer pool, int32_t n_tasks, SgPlanTaskFunc fn, gpointer ctx);
  gpointer pool;
  int32_t n_workers; /* threads taking tasks, the caller's included; <= 1: none more */
} SgPlanRunner;

/* Writes the plan to @path atomically (temporary file, fsync, rename): on
 * failure nothing is left at @path and what was there stays. Sets
 * plan->hash. */
bool sg_plan_write_file (SgPlan *plan, const char *path, GError **error);

/* sg_plan_write_file with the text made and hashed by @runner's threads
 * (NULL: this thread alone): the same bytes whatever the threads. */
bool sg_plan_write_file_with (SgPlan *plan, const char *path, const SgPlanRunner *runner,
                              GError **error);

/* (transfer full) Reads and checks a plan: format, version, hash, every
 * index in range, streams/events/buffers consistent. NULL with @error. */
SgPlan *sg_plan_load (const char *path, GError **error);
SgPlan *sg_plan_load_data (const char *data, size_t len, const char *name, GError **error);

/* Checks the structural rules (indices, lifetimes, event pairing, memory
 * overlap) and that the streams are race-free when run concurrently
 * (docs/plan-format.md, "Rules"). False with @error naming the first
 * broken rule and its instruction/value/buffer. */
bool sg_plan_validate (const SgPlan *plan, GError **error);

/* sg_plan_validate with its checks on @runner's threads (NULL: this
 * thread alone): the same verdict and, on a broken rule, the same error
 * (found again by sg_plan_validate). @place (may be NULL) is called once,
 * as @place (@place_ctx, 0, worker), to set the buffers' offsets and
 * arena_bytes: on a pool, beside the rules that read neither (the plan's
 * other fields must be final). */
bool sg_plan_validate_with (const SgPlan *plan, const SgPlanRunner *runner, SgPlanTaskFunc place,
                            gpointer place_ctx, GError **error);

/* Reorders the @n buffer ids at @ids by their first instruction (or their
 * last, @by_last), stably: ties keep their order in @ids. O(n + the range
 * of the instruction indices); every index must be >= 0. */
void sg_plan_sort_buffers_by_time (const SgPlan *plan, int32_t *ids, int32_t n, bool by_last);
/* Reorders the @n ids at @ids by @key[id], ascending, stably: an LSD radix
 * sort, 11 bits a pass, as many passes as @top (no key is above it) needs. */
void sg_plan_sort_by_key (int32_t *ids, int32_t n, const uint64_t *key, uint64_t top);

/* Byte offset of value @v from its buffer's start on the rank whose
 * position in group g is @group_rank[g] (n_groups entries): its offset,
 * plus its rank-dependent block when it has one. Each backend places its
 * values with this, once per rank. */
uint64_t sg_plan_value_offset (const SgPlan *plan, const SgPlanValue *v, const int32_t *group_rank);

/* The position of world rank @rank in its instance of every group (the
 * @group_rank of sg_plan_value_offset): fills @out (n_groups entries; -1
 * where the rank is in no instance). */
void sg_plan_group_ranks (const SgPlan *plan, int32_t rank, int32_t *out);

/* "kernel", "collective", "record", "wait_event", "free" (the JSON "kind"). */
const char *sg_plan_ins_kind_name (SgInsKind k);
bool sg_plan_ins_kind_from_name (const char *s, SgInsKind *out);

/* Small accessors the backends share for kernel arguments: the @i-th element
 * of ins->args as an integer / double / value id / int list. False when
 * absent or of another type. */
bool sg_plan_arg_int (const SgPlanIns *ins, int i, int64_t *out);
bool sg_plan_arg_double (const SgPlanIns *ins, int i, double *out);
bool sg_plan_arg_value (const SgPlanIns *ins, int i, int32_t *out);
/* Reads a list of integers (e.g. dims); returns its length or -1. */
int sg_plan_arg_ints (const SgPlanIns *ins, int i, int64_t *out, int max);
/* Keyword argument lookup; (transfer none), NULL when absent. */
const cJSON *sg_plan_kwarg (const SgPlanIns *ins, const char *key);

/* The group a kernel names in its arguments (rank_roll: the op table's
 * group_name parameter), as an index into plan->groups; -1 when it names none or an
 * unknown one. */
int32_t sg_plan_arg_group (const SgPlan *plan, const SgPlanIns *ins);

/* A collective_permute seen from group rank @me: the group rank it sends
 * to and the one it receives from (-1: none; @me itself for a pair of one
 * rank). */
void sg_plan_permute_peers (const SgPlanIns *ins, int32_t me, int32_t *target, int32_t *source);

G_END_DECLS
