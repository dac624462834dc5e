/* plan-validate.c: the plan's structural rules (sg_plan_validate, plan.h).
 *
 * Mirrors: Mesa NIR's validator: one pass over everything, the first broken
 * rule reported with the instruction/value/buffer it concerns.
 * Requires: nothing. Invalidates: nothing.
 *
 * Rules: every index in range; groups partition the world; collectives run
 * on stream 1 + group with counts and dtypes that match their operands;
 * each event is recorded once and waited on only after its RECORD; a
 * wait_tensor's WAIT_EVENT follows its collective's completion RECORD;
 * every collective is waited on; no buffer is read before it is written or
 * used outside [first, last] or after its FREE; a collective's operands
 * stay live until its wait; inputs live from the start, outputs to the end;
 * buffers fit the arena, are 256-byte aligned, and two buffers whose
 * lifetimes overlap never overlap in memory (a sweep over instruction
 * indices with an ordered set of live address ranges); and the
 * stream-concurrency rules of plan-races.c.
 *
 * The memory rule is plan-memory.c's, the races plan-races.c's; the same
 * verdict on several threads is plan-parallel.c's, from the rules here:
 * an instruction's (sg_plan_check_ins) read what the ones before it did
 * as the first instruction to do it (SgPlanFirsts), which the one pass
 * notes as it goes and the threads note all at once.
 */
#include "plan-private.h"

#include <inttypes.h>
#include <string.h>

/* Larger worlds are rejected before anything is sized by world_size. */
#define SG_PLAN_MAX_WORLD (1 << 24)
/* Streams beyond compute + one per group (room for pipelined transforms). */
#define SG_PLAN_EXTRA_STREAMS 16

static bool G_GNUC_PRINTF (2, 3) bad (GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error_literal (error, SG_PLAN_ERROR, SG_PLAN_ERROR_INVALID, msg);
  return false;
}

/* UINT64_MAX when it overflows. */
static uint64_t
value_numel (const SgPlanValue *v)
{
  uint64_t n = 1;
  for (int32_t d = 0; d < v->ndim; d++)
    if (__builtin_mul_overflow (n, (uint64_t)v->shape[d], &n))
      return UINT64_MAX;
  return n;
}

uint64_t
sg_plan_value_extent (const SgPlanValue *v)
{
  for (int32_t d = 0; d < v->ndim; d++)
    if (v->shape[d] == 0)
      return 0;
  uint64_t last = 0, t;
  for (int32_t d = 0; d < v->ndim; d++)
    if (__builtin_mul_overflow ((uint64_t)(v->shape[d] - 1), (uint64_t)v->stride[d], &t) ||
        __builtin_add_overflow (last, t, &last))
      return UINT64_MAX;
  if (__builtin_add_overflow (last, 1, &last) ||
      __builtin_mul_overflow (last, (uint64_t)sg_dtype_size (v->dtype), &t))
    return UINT64_MAX;
  return t;
}

bool
sg_plan_check_groups (const SgPlan *p, GError **error)
{
  if (p->world_size < 1 || p->world_size > SG_PLAN_MAX_WORLD)
    return bad (error, "world_size %d: must be in [1, %d]", p->world_size, SG_PLAN_MAX_WORLD);
  if (p->n_streams < 1 + p->n_groups || p->n_streams > 1 + p->n_groups + SG_PLAN_EXTRA_STREAMS)
    return bad (error,
                "n_streams %d: need 1 compute stream + 1 per group (%d groups) + at most %d more",
                p->n_streams, p->n_groups, SG_PLAN_EXTRA_STREAMS);
  g_autofree int32_t *seen = g_new (int32_t, (size_t)p->world_size);
  for (int32_t gi = 0; gi < p->n_groups; gi++) {
    const SgPlanGroup *gr = &p->groups[gi];
    if (gr->n_ranks < 1 || gr->n_instances < 1 ||
        (int64_t)gr->n_ranks * gr->n_instances != p->world_size)
      return bad (error, "groups[%d] \"%s\": %d ranks x %d instances != world_size %d", gi,
                  gr->name, gr->n_ranks, gr->n_instances, p->world_size);
    memset (seen, 0, sizeof (int32_t) * (size_t)p->world_size);
    for (int32_t k = 0; k < p->world_size; k++) {
      int32_t r = gr->partition[k];
      if (r < 0 || r >= p->world_size || seen[r]++)
        return bad (error, "groups[%d] \"%s\".partition[%d]: rank %d %s", gi, gr->name, k, r,
                    (r < 0 || r >= p->world_size) ? "outside the world" : "listed twice");
      if (k % gr->n_ranks && gr->partition[k - 1] >= r)
        return bad (error, "groups[%d] \"%s\".partition: row %d is not ascending", gi, gr->name,
                    k / gr->n_ranks);
    }
  }
  return true;
}

bool
sg_plan_check_buffer (const SgPlan *p, int32_t b, GError **error)
{
  const int32_t end = p->n_ins > 0 ? p->n_ins - 1 : 0;
  const SgPlanBuffer *bf = &p->buffers[b];
  if (bf->offset % 256)
    return bad (error, "buffers[%d].offset %" PRIu64 ": not 256-byte aligned", b, bf->offset);
  if (bf->bytes > p->arena_bytes || bf->offset > p->arena_bytes - bf->bytes)
    return bad (error,
                "buffers[%d]: [%" PRIu64 ", +%" PRIu64 ") does not fit arena_bytes %" PRIu64, b,
                bf->offset, bf->bytes, p->arena_bytes);
  if (bf->first_ins < 0 || bf->first_ins > bf->last_ins || bf->last_ins > end)
    return bad (error, "buffers[%d]: lifetime [%d, %d] outside instructions [0, %d]", b,
                bf->first_ins, bf->last_ins, end);
  return true;
}

/* Value @v's own rules (every buffer passed check_buffer). */
bool
sg_plan_check_value (const SgPlan *p, int32_t v, GError **error)
{
  const int32_t end = p->n_ins > 0 ? p->n_ins - 1 : 0;
  const SgPlanValue *val = &p->values[v];
  if (val->buffer < -1 || val->buffer >= p->n_buffers)
    return bad (error, "values[%d] \"%s\".buffer %d: out of range (%d buffers)", v, val->name,
                val->buffer, p->n_buffers);
  if (val->dtype <= SG_DTYPE_INVALID || val->dtype >= SG_DTYPE_N)
    return bad (error, "values[%d] \"%s\".dtype: invalid", v, val->name);
  if (val->ndim < 0 || val->ndim > SG_PLAN_MAX_DIMS)
    return bad (error, "values[%d] \"%s\".shape: %d dimensions", v, val->name, val->ndim);
  for (int32_t d = 0; d < val->ndim; d++)
    if (val->shape[d] < 0 || val->stride[d] < 0)
      return bad (error, "values[%d] \"%s\": negative size or stride in dimension %d", v,
                  val->name, d);
  uint64_t last_block = 0; /* the furthest a rank-dependent block reaches */
  if (val->roll_block > 0) {
    if (val->roll_group < 0 || val->roll_group >= p->n_groups)
      return bad (error, "values[%d] \"%s\".roll.group %d: out of range (%d groups)", v,
                  val->name, val->roll_group, p->n_groups);
    const uint64_t k = (uint64_t)p->groups[val->roll_group].n_ranks;
    if (val->roll_block > (uint64_t)SG_PLAN_MAX_INT / k)
      return bad (error, "values[%d] \"%s\".roll.block: too large", v, val->name);
    last_block = (k - 1) * val->roll_block;
  }
  if (val->buffer >= 0) {
    const SgPlanBuffer *bf = &p->buffers[val->buffer];
    uint64_t ext = sg_plan_value_extent (val);
    if (ext > bf->bytes || val->offset > bf->bytes - ext
        || last_block > bf->bytes - ext - val->offset)
      return bad (error,
                  "values[%d] \"%s\": bytes [%" PRIu64 ", %" PRIu64
                  ") reach past buffers[%d] (%" PRIu64 " bytes)%s",
                  v, val->name, val->offset, val->offset + last_block + ext, val->buffer,
                  bf->bytes, last_block ? " at its last rank-dependent block" : "");
  } else if (val->roll_block > 0) {
    return bad (error, "values[%d] \"%s\".roll: a value without storage", v, val->name);
  }
  if (val->init == SG_INIT_INPUT
      && (val->buffer < 0 || p->buffers[val->buffer].first_ins != 0
          || p->buffers[val->buffer].last_ins != end))
    return bad (error, "values[%d] \"%s\": an input must own a buffer live for the whole step", v,
                val->name);
  return true;
}

/* What check_buffers_values checks beyond each buffer and value. */
bool
sg_plan_check_io_lists (const SgPlan *p, GError **error)
{
  const int32_t end = p->n_ins > 0 ? p->n_ins - 1 : 0;
  int32_t n_init = 0;
  for (int32_t v = 0; v < p->n_values; v++)
    n_init += p->values[v].init == SG_INIT_INPUT;
  if (n_init != p->n_inputs)
    return bad (error, "inputs: %d listed, %d values have init \"input\"", p->n_inputs, n_init);
  for (int32_t i = 0; i < p->n_inputs; i++)
    if (p->inputs[i] < 0 || p->inputs[i] >= p->n_values ||
        p->values[p->inputs[i]].init != SG_INIT_INPUT)
      return bad (error, "inputs[%d] = %d: not a value with init \"input\"", i, p->inputs[i]);
  for (int32_t i = 0; i < p->n_outputs; i++) {
    int32_t v = p->outputs[i];
    if (v < -1 || v >= p->n_values)
      return bad (error, "outputs[%d] = %d: out of range (%d values)", i, v, p->n_values);
    if (v >= 0 && p->values[v].buffer >= 0 && p->buffers[p->values[v].buffer].last_ins != end)
      return bad (error, "outputs[%d] \"%s\": its buffer %d dies at instruction %d, not at the end",
                  i, p->values[v].name, p->values[v].buffer,
                  p->buffers[p->values[v].buffer].last_ins);
  }
  return true;
}

static bool
check_buffers_values (const SgPlan *p, GError **error)
{
  for (int32_t b = 0; b < p->n_buffers; b++)
    if (!sg_plan_check_buffer (p, b, error))
      return false;
  for (int32_t v = 0; v < p->n_values; v++)
    if (!sg_plan_check_value (p, v, error))
      return false;
  return sg_plan_check_io_lists (p, error);
}

/* *@at = MIN (*@at, @i), whatever other threads do at once. */
static inline void
first_at (gint *at, gint i)
{
  gint was = g_atomic_int_get (at);
  while (i < was && !g_atomic_int_compare_and_exchange (at, was, i))
    was = g_atomic_int_get (at);
}

/* Value @v used by instruction @i (as "in" or "out"; noted as a write
 * with the own rules). Inlined, as the next ones, into sg_plan_check_ins's
 * loop per @rules. */
G_ALWAYS_INLINE static inline bool
use_value (const SgPlan *p, int32_t i, int32_t v, bool is_out, bool allow_none, SgPlanFirsts *f,
           SgPlanRules rules, GError **error)
{
  const SgPlanIns *in = &p->ins[i];
  if (v == -1 && allow_none)
    return true;
  if ((rules & SG_PLAN_RULES_OWN) && (v < 0 || v >= p->n_values))
    return bad (error, "ins[%d] %s \"%s\": %s value %d out of range (%d values)", i,
                sg_plan_ins_kind_name (in->kind), in->name ? in->name : "", is_out ? "out" : "in",
                v, p->n_values);
  int32_t b = p->values[v].buffer;
  if (b < -1 || b >= p->n_buffers)
    return false; /* on several threads, beside the values' rules that name it */
  if (b < 0)
    return true;
  const SgPlanBuffer *bf = &p->buffers[b];
  if ((rules & SG_PLAN_RULES_STATE) && f->first_free[b] < i)
    return bad (error, "ins[%d] \"%s\": uses value \"%s\" after its buffer %d was freed", i,
                in->name ? in->name : "", p->values[v].name, b);
  if ((rules & SG_PLAN_RULES_OWN) && (i < bf->first_ins || i > bf->last_ins))
    return bad (error,
                "ins[%d] \"%s\": uses value \"%s\" outside its buffer %d's lifetime [%d, %d]", i,
                in->name ? in->name : "", p->values[v].name, b, bf->first_ins, bf->last_ins);
  if ((rules & SG_PLAN_RULES_STATE) && !is_out && f->first_write[b] >= i)
    return bad (error, "ins[%d] \"%s\": reads value \"%s\" before anything writes buffer %d",
                i, in->name ? in->name : "", p->values[v].name, b);
  if ((rules & SG_PLAN_RULES_OWN) && is_out)
    first_at (&f->first_write[b], i);
  return true;
}

/* The members of a coalesced collective run at once (one NCCL group):
 * no member's output may share bytes with another member's operands. */
static bool
members_apart (const SgPlan *p, const SgPlanIns *in, int32_t i, GError **error)
{
  for (int32_t m = 0; m < in->n_out; m++) {
    const SgPlanValue *o = &p->values[in->out[m]];
    const uint64_t o0 = o->offset, o1 = o0 + sg_plan_value_extent (o);
    for (int32_t q = 0; q < 2 * in->n_in; q++) {
      const int32_t v = q < in->n_in ? in->in[q] : in->out[q - in->n_in];
      const SgPlanValue *x = &p->values[v];
      if (q == m || q == in->n_in + m || o->buffer < 0 || x->buffer != o->buffer)
        continue;
      const uint64_t x0 = x->offset, x1 = x0 + sg_plan_value_extent (x);
      if (x0 < o1 && o0 < x1)
        return bad (error, "ins[%d] \"%s\": member %d's output \"%s\" overlaps \"%s\" of member "
                    "%d (buffers[%d]): the members of a coalesced collective run at once",
                    i, in->name ? in->name : "", m, o->name, x->name, q % in->n_in, o->buffer);
    }
  }
  return true;
}

bool
sg_plan_check_collective (const SgPlan *p, int32_t i, GError **error)
{
  const SgPlanIns *in = &p->ins[i];
  const char *nm = in->name ? in->name : "";
  if (!sg_op_is_collective (in->op))
    return bad (error, "ins[%d] \"%s\": op %s is not a collective", i, nm, sg_op_name (in->op));
  if (in->group < 0 || in->group >= p->n_groups)
    return bad (error, "ins[%d] \"%s\".group %d: out of range (%d groups)", i, nm, in->group,
                p->n_groups);
  if (in->stream != 1 + in->group)
    return bad (error, "ins[%d] \"%s\": a collective of group %d must run on stream %d, not %d", i,
                nm, in->group, 1 + in->group, in->stream);
  /* one input and one output value per member: a coalesced collective
   * (one NCCL group) has one or more, any other exactly one */
  const bool coalesced = sg_op_is_coalesced (in->op);
  if (in->n_in != in->n_out || in->n_in < 1 || (!coalesced && in->n_in != 1))
    return bad (error, "ins[%d] \"%s\": a collective takes one input and one output value%s", i,
                nm, coalesced ? " per member" : "");
  if ((int)in->reduce < SG_REDUCE_NONE || in->reduce > SG_REDUCE_PRODUCT ||
      ((sg_op_member_kind (in->op) == SG_OP_REDUCE_SCATTER ||
        sg_op_member_kind (in->op) == SG_OP_ALL_REDUCE) &&
       in->reduce == SG_REDUCE_NONE))
    return bad (error, "ins[%d] \"%s\".reduce: missing or invalid", i, nm);
  uint64_t n = (uint64_t)p->groups[in->group].n_ranks, sum = 0;
  for (int32_t m = 0; m < in->n_in; m++) {
    if (in->in[m] < 0 || in->in[m] >= p->n_values || in->out[m] < 0 ||
        in->out[m] >= p->n_values)
      return bad (error, "ins[%d] \"%s\": member %d's values are out of range (%d values)", i, nm,
                  m, p->n_values);
    const SgPlanValue *a = &p->values[in->in[m]], *o = &p->values[in->out[m]];
    if (a->dtype != in->dtype || o->dtype != in->dtype)
      return bad (error, "ins[%d] \"%s\".dtype %s: operands are %s -> %s", i, nm,
                  sg_dtype_name (in->dtype), sg_dtype_name (a->dtype), sg_dtype_name (o->dtype));
    uint64_t ni = value_numel (a), no = value_numel (o), c = sg_collective_count (in->op, ni, no);
    bool ok = ni != UINT64_MAX && no != UINT64_MAX && sg_collective_sizes_ok (in->op, ni, no, n)
              && !__builtin_add_overflow (sum, c, &sum);
    /* a single collective's count is its operands' (an all_to_all's input:
     * uneven splits may change its output) */
    if (!ok || (!coalesced && sum != (uint64_t)in->count))
      return bad (error,
                  "ins[%d] \"%s\".count %" PRId64 ": does not match %s of %" PRIu64 " -> %" PRIu64
                  " elements over %" PRIu64 " ranks%s",
                  i, nm, in->count, sg_op_name (in->op), ni, no, n,
                  coalesced ? " (a member)" : "");
  }
  if (sum != (uint64_t)in->count)
    return bad (error,
                "ins[%d] \"%s\".count %" PRId64 ": the members' counts sum to %" PRIu64, i, nm,
                in->count, sum);
  if (coalesced && !members_apart (p, in, i, error))
    return false;
  if (in->op != SG_OP_COLLECTIVE_PERMUTE)
    return in->n_pairs == 0 || bad (error, "ins[%d] \"%s\": pairs on a %s", i, nm,
                                    sg_op_name (in->op));
  if ((unsigned)in->transport >= SG_TRANSPORT_N || in->n_pairs < 0 ||
      in->n_pairs > p->groups[in->group].n_ranks)
    return bad (error, "ins[%d] \"%s\": transport or pair count out of range", i, nm);
  const int32_t k = p->groups[in->group].n_ranks;
  g_autofree int32_t *tgt = g_new (int32_t, (size_t)k), *src = g_new (int32_t, (size_t)k);
  int32_t at = 0;
  const SgPairsError pe = sg_pairs_check (in->pairs, in->n_pairs, k, tgt, src, &at);
  if (pe != SG_PAIRS_OK)
    return bad (error, "ins[%d] \"%s\".pairs[%d]: [%d, %d] %s (group %d has %d ranks)", i, nm, at,
                in->pairs[2 * at], in->pairs[2 * at + 1],
                pe == SG_PAIRS_RANGE         ? "is not a pair of the group's ranks"
                : pe == SG_PAIRS_SENDS_TWICE ? "sends twice from one rank"
                                             : "receives twice on one rank",
                in->group, k);
  return true;
}

bool
sg_plan_firsts_init (SgPlanFirsts *f, const SgPlan *p, GError **error)
{
  *f = (SgPlanFirsts){ 0 };
  /* each event is recorded by one instruction: this also bounds what a
   * hostile n_events could make us allocate */
  if (p->n_events < 0 || p->n_events > p->n_ins)
    return bad (error, "n_events %d: more events than instructions (%d)", p->n_events, p->n_ins);
  f->first_write = g_new (gint, (size_t)p->n_buffers + 1);
  f->first_free = g_new (gint, (size_t)p->n_buffers + 1);
  f->first_record = g_new (gint, (size_t)p->n_events + 1);
  f->first_wait = g_new (gint, (size_t)p->n_ins + 1);
  for (int32_t b = 0; b < p->n_buffers; b++)
    f->first_write[b] = f->first_free[b] = G_MAXINT;
  for (int32_t e = 0; e < p->n_events; e++)
    f->first_record[e] = G_MAXINT;
  for (int32_t i = 0; i < p->n_ins; i++)
    f->first_wait[i] = G_MAXINT;
  return true;
}

void
sg_plan_firsts_clear (SgPlanFirsts *f)
{
  g_clear_pointer (&f->first_write, g_free);
  g_clear_pointer (&f->first_free, g_free);
  g_clear_pointer (&f->first_record, g_free);
  g_clear_pointer (&f->first_wait, g_free);
}

void
sg_plan_firsts_note_value (SgPlanFirsts *f, const SgPlan *p, int32_t v)
{
  if (p->values[v].init == SG_INIT_INPUT)
    first_at (&f->first_write[p->values[v].buffer], -1);
}

/* Instruction @i, if a collective, is waited on (@f: the whole plan's). */
static inline bool
waited (const SgPlan *p, int32_t i, const SgPlanFirsts *f, GError **error)
{
  if (p->ins[i].kind == SG_INS_COLLECTIVE && f->first_wait[i] == G_MAXINT)
    return bad (error, "ins[%d] collective \"%s\": no WAIT_EVENT waits for it", i,
                p->ins[i].name ? p->ins[i].name : "");
  return true;
}

/* Instruction @i's @rules; with its own, what it does is noted in @f;
 * with the others alone (@f: the whole plan's), a collective is waited on
 * too. */
G_ALWAYS_INLINE static inline bool
ins_rules (const SgPlan *p, int32_t i, SgPlanFirsts *f, SgPlanRules rules, GError **error)
{
  const bool own = rules & SG_PLAN_RULES_OWN, state = rules & SG_PLAN_RULES_STATE;
  const SgPlanIns *in = &p->ins[i];
  const char *nm = in->name ? in->name : "";
  if (own && (in->stream < 0 || in->stream >= p->n_streams))
    return bad (error, "ins[%d].stream %d: out of range (%d streams)", i, in->stream,
                p->n_streams);
  switch (in->kind) {
  case SG_INS_KERNEL:
    if (own && in->stream != 0)
      return bad (error, "ins[%d] kernel \"%s\": kernels run on stream 0, not %d", i, nm,
                  in->stream);
    if (own && ((int)in->op < 0 || in->op >= SG_OP_N_KINDS || sg_op_is_collective (in->op)))
      return bad (error, "ins[%d] kernel \"%s\": op is not a kernel", i, nm);
    if (own && in->sm_count != 0
        && (in->sm_count < 0 || sg_op_class (in->op) != SG_CLASS_MATMUL))
      return bad (error, "ins[%d] kernel \"%s\".sm_count %d: only a matmul takes an SM-count "
                  "target", i, nm, in->sm_count);
    for (int32_t k = 0; k < in->n_in; k++)
      if (!use_value (p, i, in->in[k], false, false, f, rules, error))
        return false;
    for (int32_t k = 0; k < in->n_out; k++)
      if (!use_value (p, i, in->out[k], true, true, f, rules, error))
        return false;
    return true;
  case SG_INS_COLLECTIVE:
    if (own && !sg_plan_check_collective (p, i, error))
      return false;
    if (!own && !waited (p, i, f, error))
      return false;
    for (int32_t k = 0; k < in->n_in; k++)
      if (!use_value (p, i, in->in[k], false, false, f, rules, error))
        return false;
    for (int32_t k = 0; k < in->n_out; k++)
      if (!use_value (p, i, in->out[k], true, false, f, rules, error))
        return false;
    return true;
  case SG_INS_RECORD:
    if (own && (in->event < 0 || in->event >= p->n_events))
      return bad (error, "ins[%d].event %d: out of range (%d events)", i, in->event,
                  p->n_events);
    if (state && f->first_record[in->event] < i)
      return bad (error, "ins[%d]: event %d recorded twice (first at ins[%d])", i, in->event,
                  f->first_record[in->event]);
    if (own)
      first_at (&f->first_record[in->event], i);
    return true;
  case SG_INS_WAIT_EVENT: {
    if (own && (in->event < 0 || in->event >= p->n_events))
      return bad (error, "ins[%d].event %d: out of range (%d events)", i, in->event,
                  p->n_events);
    const int32_t r = state ? f->first_record[in->event] : -1;
    if (state && r >= i)
      return bad (error, "ins[%d] \"%s\": waits on event %d before any RECORD of it", i, nm,
                  in->event);
    if (in->coll == -1)
      return true;
    if (own && (in->coll < 0 || in->coll >= i || p->ins[in->coll].kind != SG_INS_COLLECTIVE))
      return bad (error, "ins[%d] \"%s\".coll %d: not an earlier collective", i, nm, in->coll);
    if (own)
      first_at (&f->first_wait[in->coll], i); /* (the rules below ask for one before i) */
    if (!state)
      return true;
    const SgPlanIns *c = &p->ins[in->coll];
    if (r < in->coll || p->ins[r].stream != c->stream)
      return bad (error,
                  "ins[%d] \"%s\": event %d is not recorded on collective \"%s\"'s stream %d "
                  "after it",
                  i, nm, in->event, c->name ? c->name : "", c->stream);
    if (f->first_wait[in->coll] < i)
      return bad (error, "ins[%d] \"%s\": collective ins[%d] is waited on twice", i, nm,
                  in->coll);
    for (int32_t k = 0; k < c->n_in + c->n_out; k++) {
      int32_t b = p->values[k >= c->n_in ? c->out[k - c->n_in] : c->in[k]].buffer;
      if (b >= 0 && (p->buffers[b].last_ins < i || f->first_free[b] < i))
        return bad (error,
                    "buffers[%d] (%s of collective \"%s\") dies at ins[%d], before its wait "
                    "ins[%d]",
                    b, k >= c->n_in ? "output" : "input", c->name ? c->name : "",
                    p->buffers[b].last_ins, i);
    }
    return true;
  }
  case SG_INS_FREE:
    if (own && (in->buffer < 0 || in->buffer >= p->n_buffers))
      return bad (error, "ins[%d].buffer %d: out of range (%d buffers)", i, in->buffer,
                  p->n_buffers);
    if (own && in->stream != 0)
      return bad (error, "ins[%d]: FREE runs on stream 0, not %d", i, in->stream);
    if (state && f->first_free[in->buffer] < i)
      return bad (error, "ins[%d]: buffer %d freed twice", i, in->buffer);
    if (own && i <= p->buffers[in->buffer].last_ins)
      return bad (error, "ins[%d]: frees buffer %d, live until ins[%d]", i, in->buffer,
                  p->buffers[in->buffer].last_ins);
    if (own)
      first_at (&f->first_free[in->buffer], i);
    return true;
  default:
    return own ? bad (error, "ins[%d]: unknown instruction kind %d", i, (int)in->kind) : false;
  }
}

G_ALWAYS_INLINE static inline bool
check_range (const SgPlan *p, int32_t from, int32_t to, SgPlanFirsts *f, SgPlanRules rules,
             GError **error)
{
  for (int32_t i = from; i < to; i++)
    if (!ins_rules (p, i, f, rules, error))
      return false;
  return true;
}

bool
sg_plan_check_ins (const SgPlan *p, int32_t from, int32_t to, SgPlanFirsts *f, SgPlanRules rules,
                   GError **error)
{
  /* a loop of its own per @rules, with them folded */
  switch (rules) {
  case SG_PLAN_RULES_OWN:
    return check_range (p, from, to, f, SG_PLAN_RULES_OWN, error);
  case SG_PLAN_RULES_STATE:
    return check_range (p, from, to, f, SG_PLAN_RULES_STATE, error);
  default:
    return check_range (p, from, to, f, SG_PLAN_RULES_ALL, error);
  }
}

/* The instructions in order, each against what the ones before did. */
static bool
check_ins (const SgPlan *p, GError **error)
{
  SgPlanFirsts f;
  if (!sg_plan_firsts_init (&f, p, error))
    return false;
  for (int32_t v = 0; v < p->n_values; v++)
    sg_plan_firsts_note_value (&f, p, v);
  bool ok = sg_plan_check_ins (p, 0, p->n_ins, &f, SG_PLAN_RULES_ALL, error);
  for (int32_t i = 0; ok && i < p->n_ins; i++)
    ok = waited (p, i, &f, error);
  sg_plan_firsts_clear (&f);
  return ok;
}

bool
sg_plan_validate (const SgPlan *p, GError **error)
{
  g_return_val_if_fail (p != NULL, false);
  return sg_plan_check_groups (p, error) && check_buffers_values (p, error) && check_ins (p, error) &&
         sg_plan_check_memory (p, error) && sg_plan_check_races (p, error);
}
