/* backend.c: the CPU backend: runs a plan's instructions in issue order on
 * one thread, collectives as nonblocking MPI calls on per-group
 * communicators, kernels from the CPU kernel library, one arena per rank.
 *
 * Mirrors the plan's execution model (plan.h): a COLLECTIVE starts a
 * nonblocking MPI operation per member (a coalesced collective, one NCCL
 * group on GPUs, starts all of its members at once); the WAIT_EVENT of its
 * wait_tensor completes them all (MPI_Waitall), so compute issued in
 * between really overlaps in timing mode.
 * Reductions are deterministic and schedule-independent: contributions are
 * exchanged (all-to-all for reduce_scatter, all-gather for all_reduce) and
 * summed in group-rank order in double, rounded once, exactly as
 * tools/sgeval does; so input-order, scheduled and bucketed plans agree
 * bitwise. A collective_permute is a nonblocking MPI_Isend/MPI_Irecv pair
 * to and from the group ranks its pairs name (zeros where none sends to
 * this rank); rank_roll is the kernel that needs this rank's group rank.
 * Between kernels the backend polls in-flight requests (MPI_Testall) to
 * progress them and to time their completion.
 * Requires: a plan that passed sg_plan_validate and check_plan.
 * Invalidates: nothing outside its own arena.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "runtime.h"

/* One member of a collective instruction (a coalesced collective has
 * several, every other one). */
typedef struct {
  void *send_stage; /* packed input when not contiguous; owned */
  void *recv_stage; /* exchange buffer (reductions, strided outputs); owned */
} MemberState;

typedef struct {
  bool active;
  /* two per member (a collective_permute: its send and its receive; the
   * others one), MPI_REQUEST_NULL where unused */
  MPI_Request *req;
  int n_req;
  MemberState *m; /* n_in of the instruction */
  double start, end;
  double exposed;
} CollState;

typedef struct {
  uint8_t *arena;
  CollState *coll;  /* per instruction index (only COLLECTIVE slots used) */
  int32_t *coll_ix; /* instruction index -> position in SgRtStepTimes */
} CpuState;

#define MPI_TRY(call, what)                                                                    \
  do {                                                                                         \
    int rc_ = (call);                                                                          \
    if (rc_ != MPI_SUCCESS) {                                                                  \
      char msg_[MPI_MAX_ERROR_STRING];                                                         \
      int len_ = 0;                                                                            \
      MPI_Error_string (rc_, msg_, &len_);                                                     \
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MPI, "%s: %s failed at %s:%d: %s", what,    \
                   #call, __FILE__, __LINE__, msg_);                                           \
      return false;                                                                            \
    }                                                                                          \
  } while (0)

static void
value_tensor (const SgRtContext *ctx, int32_t id, SgTensor *t)
{
  const SgPlan *p = ctx->plan;
  const CpuState *st = ctx->priv;
  memset (t, 0, sizeof *t);
  if (id < 0 || id >= p->n_values)
    return;
  const SgPlanValue *v = &p->values[id];
  t->dtype = v->dtype;
  t->ndim = v->ndim;
  memcpy (t->shape, v->shape, sizeof (int64_t) * (size_t)v->ndim);
  memcpy (t->stride, v->stride, sizeof (int64_t) * (size_t)v->ndim);
  if (v->buffer >= 0 && st != NULL)
    t->data = st->arena + p->buffers[v->buffer].offset
              + sg_plan_value_offset (p, v, ctx->group_rank);
}

static bool
resolve_value (const cJSON *ref, SgTensor *out, void *ud, GError **error)
{
  const SgRtContext *ctx = ud;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (ref, "value");
  if (!cJSON_IsNumber (v) || v->valuedouble < 0 || v->valuedouble >= ctx->plan->n_values) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL,
                 "argument reference is not a value id of the plan");
    return false;
  }
  value_tensor (ctx, (int32_t)v->valuedouble, out);
  if (out->data == NULL) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL, "value '%s' has no storage",
                 ctx->plan->values[(int32_t)v->valuedouble].name);
    return false;
  }
  return true;
}

/* --- check_plan --------------------------------------------------------- */

static bool
check_value (const SgPlan *p, const SgPlanIns *ins, int32_t id, GError **error)
{
  if (id < 0)
    return true;
  const SgPlanValue *v = &p->values[id];
  if (!sg_cpu_dtype_supported (v->dtype)) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "node '%s': value '%s' has dtype %s, which the CPU backend does not run",
                 ins->name ? ins->name : "?", v->name, sg_dtype_name (v->dtype));
    return false;
  }
  return true;
}

static uint64_t
value_numel (const SgPlan *p, int32_t id)
{
  return id >= 0 ? sg_rt_value_numel (&p->values[id]) : 0;
}

/* What the CPU backend runs of member @m of collective @ins. */
static bool
check_member (const SgPlan *p, const SgPlanIns *ins, int32_t m, GError **error)
{
  const char *node = ins->name ? ins->name : "?";
  const SgPlanGroup *g = &p->groups[ins->group];
  const SgOpKind kind = sg_op_member_kind (ins->op);
  uint64_t in = value_numel (p, ins->in[m]), out = value_numel (p, ins->out[m]);
  uint64_t k = (uint64_t)g->n_ranks;
  bool sizes_ok;
  switch (kind) {
  case SG_OP_ALL_GATHER: case SG_OP_REDUCE_SCATTER: case SG_OP_ALL_REDUCE: case SG_OP_BROADCAST:
  case SG_OP_COLLECTIVE_PERMUTE:
    sizes_ok = sg_collective_sizes_ok (kind, in, out, k);
    break;
  case SG_OP_ALL_TO_ALL: sizes_ok = in == out && in % k == 0; break;
  default:
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "node '%s': collective %s is not supported by the CPU backend", node,
                 sg_op_name (ins->op));
    return false;
  }
  if (kind == SG_OP_ALL_TO_ALL)
    for (int a = 1; a <= 2 && sizes_ok; a++) { /* output / input split sizes */
      int64_t sp[256];
      int n = sg_plan_arg_ints (ins, a, sp, 256);
      for (int j = 1; j < n; j++)
        sizes_ok = sizes_ok && sp[j] == sp[0];
    }
  if (!sizes_ok) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "node '%s': %s from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT
                 " elements over %d ranks: the CPU backend runs equal splits only",
                 node, sg_op_name (ins->op), in, out, g->n_ranks);
    return false;
  }
  if ((kind == SG_OP_REDUCE_SCATTER || kind == SG_OP_ALL_REDUCE) &&
      ins->reduce == SG_REDUCE_NONE) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "node '%s': %s without a reduce op", node, sg_op_name (ins->op));
    return false;
  }
  if (MAX (in, out) * k * sg_dtype_size (p->values[ins->in[m]].dtype) > (uint64_t)G_MAXINT) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "node '%s': collective of more than 2 GiB per exchange", node);
    return false;
  }
  if (p->values[ins->in[m]].dtype != p->values[ins->out[m]].dtype) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "node '%s': collective input and output dtypes differ", node);
    return false;
  }
  return true;
}

static bool
cpu_check_plan (SgRtContext *ctx, GError **error)
{
  const SgPlan *p = ctx->plan;
  for (int32_t i = 0; i < p->n_values; i++)
    if (p->values[i].init == SG_INIT_INPUT && !sg_cpu_dtype_supported (p->values[i].dtype)) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                   "input '%s' has dtype %s, which the CPU backend does not run",
                   p->values[i].name, sg_dtype_name (p->values[i].dtype));
      return false;
    }
  for (int32_t i = 0; i < p->n_ins; i++) {
    const SgPlanIns *ins = &p->ins[i];
    const char *node = ins->name ? ins->name : "?";
    for (int32_t j = 0; j < ins->n_in; j++)
      if (!check_value (p, ins, ins->in[j], error))
        return false;
    for (int32_t j = 0; j < ins->n_out; j++)
      if (!check_value (p, ins, ins->out[j], error))
        return false;
    if (ins->kind == SG_INS_KERNEL && ins->op == SG_OP_RANK_ROLL &&
        sg_plan_arg_group (p, ins) < 0) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                   "node '%s': rank_roll names no group of the plan", node);
      return false;
    }
    if (ins->kind == SG_INS_KERNEL) {
      GError *e = NULL;
      if (!sg_cpu_kernel_check (ins->op, node, ins->args, ins->kwargs, &e)) {
        g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED, "%s (target %s)", e->message,
                     ins->target ? ins->target : "?");
        g_error_free (e);
        return false;
      }
    } else if (ins->kind == SG_INS_COLLECTIVE) {
      for (int32_t m = 0; m < ins->n_in; m++)
        if (!check_member (p, ins, m, error))
          return false;
    }
  }
  return true;
}

/* --- setup / inputs ----------------------------------------------------- */

static bool
cpu_setup (SgRtContext *ctx, GError **error)
{
  const SgPlan *p = ctx->plan;
  CpuState *st = g_new0 (CpuState, 1);
  void *mem = NULL;
  size_t bytes = (size_t)MAX (p->arena_bytes, 256);
  if (posix_memalign (&mem, 256, bytes) != 0) {
    g_free (st);
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                 "cannot allocate the arena of %" G_GUINT64_FORMAT " bytes", p->arena_bytes);
    return false;
  }
  st->arena = mem;
  /* Exact mode: every byte nobody wrote reads as NaN (0xFF..), so a plan
   * that reads a buffer before it is written shows up in the outputs. */
  memset (st->arena, ctx->opt.mode == SG_RT_MODE_EXACT ? 0xFF : 0, bytes);
  st->coll = g_new0 (CollState, MAX (p->n_ins, 1));
  st->coll_ix = g_new (int32_t, MAX (p->n_ins, 1));
  int32_t c = 0;
  for (int32_t i = 0; i < p->n_ins; i++) {
    st->coll_ix[i] = p->ins[i].kind == SG_INS_COLLECTIVE ? c++ : -1;
    if (st->coll_ix[i] < 0)
      continue;
    st->coll[i].m = g_new0 (MemberState, (size_t)p->ins[i].n_in);
    st->coll[i].n_req = 2 * p->ins[i].n_in;
    st->coll[i].req = g_new (MPI_Request, (size_t)st->coll[i].n_req);
  }
  ctx->priv = st;
  return true;
}

static bool
cpu_load_inputs (SgRtContext *ctx, GError **error)
{
  (void)error;
  const SgPlan *p = ctx->plan;
  for (int32_t i = 0; i < p->n_inputs; i++) {
    const SgPlanValue *v = &p->values[p->inputs[i]];
    SgTensor t;
    value_tensor (ctx, p->inputs[i], &t);
    if (t.data == NULL)
      continue;
    if (sg_tensor_is_contiguous (&t)) {
      sg_rt_fill_input (v, ctx->rank, ctx->opt.seed, t.data);
    } else {
      void *tmp = g_malloc (sg_rt_value_numel (v) * sg_dtype_size (v->dtype) + 1);
      sg_rt_fill_input (v, ctx->rank, ctx->opt.seed, tmp);
      sg_tensor_unpack (&t, tmp);
      g_free (tmp);
    }
  }
  return true;
}

/* --- collectives -------------------------------------------------------- */

static int32_t
broadcast_root (const SgRtContext *ctx, const SgPlanIns *ins)
{
  const SgPlanGroup *g = &ctx->plan->groups[ins->group];
  int64_t src = 0;
  if (!sg_plan_arg_int (ins, 1, &src))
    return 0;
  /* c10d's src is a global rank; find it in this rank's instance. */
  const int32_t *row = NULL;
  for (int32_t i = 0; i < g->n_instances && row == NULL; i++)
    for (int32_t j = 0; j < g->n_ranks; j++)
      if (g->partition[i * g->n_ranks + j] == ctx->rank)
        row = &g->partition[i * g->n_ranks];
  for (int32_t j = 0; row != NULL && j < g->n_ranks; j++)
    if (row[j] == src)
      return j;
  return src >= 0 && src < g->n_ranks ? (int32_t)src : 0;
}

/* Starts member @m of collective instruction @i: its nonblocking MPI
 * operation(s) in @req (two slots). */
static bool
member_start (SgRtContext *ctx, int32_t i, int32_t m, MPI_Request *req, GError **error)
{
  const SgPlan *p = ctx->plan;
  const SgPlanIns *ins = &p->ins[i];
  MemberState *cs = &((CpuState *)ctx->priv)->coll[i].m[m];
  MPI_Comm comm = ctx->group_comms[ins->group];
  int k = p->groups[ins->group].n_ranks;
  SgTensor in, out;
  value_tensor (ctx, ins->in[m], &in);
  value_tensor (ctx, ins->out[m], &out);
  size_t es = sg_dtype_size (in.dtype);
  uint64_t n_in = sg_tensor_numel (&in), n_out = sg_tensor_numel (&out);
  const void *send = in.data;
  if (!sg_tensor_is_contiguous (&in)) {
    cs->send_stage = g_malloc (n_in * es + 1);
    sg_tensor_pack (&in, cs->send_stage);
    send = cs->send_stage;
  }
  bool out_direct = sg_tensor_is_contiguous (&out);
  const char *what = ins->name ? ins->name : "collective";
  switch (sg_op_member_kind (ins->op)) {
  case SG_OP_COLLECTIVE_PERMUTE: {
    /* point to point: the pairs name group ranks, this instance's ranks in
     * the communicator's order; a pair of one rank and the zeros of a rank
     * that receives nothing are finished at the wait (coll_finish) */
    int32_t to, from;
    const int32_t me = ctx->group_rank[ins->group];
    sg_plan_permute_peers (ins, me, &to, &from);
    const int bytes = (int)(n_in * es), tag = i % 32768;
    cs->recv_stage = g_malloc (n_out * es + 1);
    if (to == me)
      memcpy (cs->recv_stage, send, n_in * es);
    else if (to >= 0)
      MPI_TRY (MPI_Isend (send, bytes, MPI_BYTE, to, tag, comm, &req[0]), what);
    if (from >= 0 && from != me)
      MPI_TRY (MPI_Irecv (cs->recv_stage, bytes, MPI_BYTE, from, tag, comm, &req[1]), what);
    else if (from < 0)
      memset (cs->recv_stage, 0, n_out * es); /* raw zeros: +0.0 in every dtype */
    break;
  }
  case SG_OP_ALL_GATHER: {
    void *recv = out.data;
    if (!out_direct)
      recv = cs->recv_stage = g_malloc (n_out * es + 1);
    MPI_TRY (MPI_Iallgather (send, (int)(n_in * es), MPI_BYTE, recv, (int)(n_in * es), MPI_BYTE,
                             comm, &req[0]), what);
    break;
  }
  case SG_OP_REDUCE_SCATTER:
    cs->recv_stage = g_malloc (n_in * es + 1);
    MPI_TRY (MPI_Ialltoall (send, (int)(n_out * es), MPI_BYTE, cs->recv_stage,
                            (int)(n_out * es), MPI_BYTE, comm, &req[0]), what);
    break;
  case SG_OP_ALL_REDUCE:
    cs->recv_stage = g_malloc (n_in * (uint64_t)k * es + 1);
    MPI_TRY (MPI_Iallgather (send, (int)(n_in * es), MPI_BYTE, cs->recv_stage, (int)(n_in * es),
                             MPI_BYTE, comm, &req[0]), what);
    break;
  case SG_OP_ALL_TO_ALL: {
    void *recv = out.data;
    if (!out_direct)
      recv = cs->recv_stage = g_malloc (n_out * es + 1);
    int chunk = (int)(n_in / (uint64_t)k * es);
    MPI_TRY (MPI_Ialltoall (send, chunk, MPI_BYTE, recv, chunk, MPI_BYTE, comm, &req[0]),
             what);
    break;
  }
  case SG_OP_BROADCAST:
    cs->recv_stage = g_malloc (n_in * es + 1);
    memcpy (cs->recv_stage, send, n_in * es);
    MPI_TRY (MPI_Ibcast (cs->recv_stage, (int)(n_in * es), MPI_BYTE, broadcast_root (ctx, ins),
                         comm, &req[0]), what);
    break;
  default:
    g_return_val_if_reached (false);
  }
  return true;
}

/* Starts collective instruction @i: every member's nonblocking operation
 * (a coalesced collective's members at once, as one NCCL group runs them;
 * the group's wait waits for all). */
static bool
coll_start (SgRtContext *ctx, int32_t i, GError **error)
{
  CollState *cs = &((CpuState *)ctx->priv)->coll[i];
  for (int r = 0; r < cs->n_req; r++)
    cs->req[r] = MPI_REQUEST_NULL;
  cs->start = MPI_Wtime ();
  cs->exposed = 0;
  cs->end = -1;
  for (int32_t m = 0; m < ctx->plan->ins[i].n_in; m++)
    if (!member_start (ctx, i, m, &cs->req[2 * m], error))
      return false;
  cs->active = true;
  return true;
}

/* After member @m's MPI requests completed: reduce in group-rank order,
 * unstage. */
static void
member_finish (SgRtContext *ctx, int32_t i, int32_t m)
{
  const SgPlan *p = ctx->plan;
  const SgPlanIns *ins = &p->ins[i];
  MemberState *cs = &((CpuState *)ctx->priv)->coll[i].m[m];
  int k = p->groups[ins->group].n_ranks;
  const SgOpKind kind = sg_op_member_kind (ins->op);
  SgTensor out;
  value_tensor (ctx, ins->out[m], &out);
  uint64_t n = sg_tensor_numel (&out);
  if (kind == SG_OP_REDUCE_SCATTER || kind == SG_OP_ALL_REDUCE) {
    double *acc = g_new (double, MAX (n, 1));
    for (uint64_t j = 0; j < n; j++) {
      double a = sg_tensor_load (out.dtype, cs->recv_stage, (int64_t)j);
      for (int r = 1; r < k; r++) {
        double b = sg_tensor_load (out.dtype, cs->recv_stage, (int64_t)((uint64_t)r * n + j));
        switch (ins->reduce) {
        case SG_REDUCE_MAX: a = b > a ? b : a; break;
        case SG_REDUCE_MIN: a = b < a ? b : a; break;
        case SG_REDUCE_PRODUCT: a *= b; break;
        default: a += b; break;
        }
      }
      acc[j] = ins->reduce == SG_REDUCE_AVG ? a / k : a;
    }
    for (uint64_t e = 0; e < n; e++)
      sg_tensor_store (out.dtype, out.data, sg_tensor_offset_of (&out, e), acc[e]);
    g_free (acc);
  } else if (cs->recv_stage != NULL) {
    sg_tensor_unpack (&out, cs->recv_stage);
  }
  g_clear_pointer (&cs->send_stage, g_free);
  g_clear_pointer (&cs->recv_stage, g_free);
}

static void
coll_finish (SgRtContext *ctx, int32_t i)
{
  CollState *cs = &((CpuState *)ctx->priv)->coll[i];
  for (int32_t m = 0; m < ctx->plan->ins[i].n_in; m++)
    member_finish (ctx, i, m);
  cs->active = false;
}

/* Progress every in-flight collective once; time those that completed. */
static bool
coll_poll (SgRtContext *ctx, GError **error)
{
  const SgPlan *p = ctx->plan;
  CpuState *st = ctx->priv;
  for (int32_t i = 0; i < p->n_ins; i++) {
    CollState *cs = &st->coll[i];
    if (!cs->active || cs->end >= 0)
      continue;
    int done = 0;
    MPI_TRY (MPI_Testall (cs->n_req, cs->req, &done, MPI_STATUSES_IGNORE), p->ins[i].name);
    if (done)
      cs->end = MPI_Wtime ();
  }
  return true;
}

static bool
coll_wait (SgRtContext *ctx, int32_t i, GError **error)
{
  CollState *cs = &((CpuState *)ctx->priv)->coll[i];
  if (!cs->active)
    return true; /* a second wait on the same collective */
  double reach = MPI_Wtime ();
  bool arrived = cs->end >= 0; /* seen complete by an earlier poll */
  if (!arrived)
    MPI_TRY (MPI_Waitall (cs->n_req, cs->req, MPI_STATUSES_IGNORE), ctx->plan->ins[i].name);
  coll_finish (ctx, i);
  double done = MPI_Wtime ();
  if (!arrived)
    cs->end = done;
  cs->exposed += done - reach;
  return true;
}

/* --- run ---------------------------------------------------------------- */

static bool
run_kernel (SgRtContext *ctx, const SgPlanIns *ins, GError **error)
{
  SgTensor outs[16];
  SgTensor *o = ins->n_out <= 16 ? outs : g_new (SgTensor, ins->n_out);
  for (int32_t j = 0; j < ins->n_out; j++)
    value_tensor (ctx, ins->out[j], &o[j]);
  GError *e = NULL;
  const int32_t g = ins->op == SG_OP_RANK_ROLL ? sg_plan_arg_group (ctx->plan, ins) : -1;
  bool ok = g >= 0 ? sg_cpu_rank_roll (ins->name, ins->args, resolve_value, ctx,
                                       ctx->group_rank[g], ctx->plan->groups[g].n_ranks, o, &e)
                   : sg_cpu_kernel (ins->op, ins->name, ins->args, ins->kwargs, resolve_value,
                                    ctx, o, ins->n_out, &e);
  if (o != outs)
    g_free (o);
  if (!ok) {
    g_set_error_literal (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL, e->message);
    g_error_free (e);
  }
  return ok;
}

static bool
cpu_run_step (SgRtContext *ctx, SgRtStepTimes *out, GError **error)
{
  const SgPlan *p = ctx->plan;
  CpuState *st = ctx->priv;
  double t0 = MPI_Wtime (), compute = 0;
  for (int32_t i = 0; i < p->n_ins; i++) {
    const SgPlanIns *ins = &p->ins[i];
    if (!sg_rt_ins_hook (ctx, i, error))
      return false;
    switch (ins->kind) {
    case SG_INS_KERNEL: {
      double a = MPI_Wtime ();
      if (!run_kernel (ctx, ins, error))
        return false;
      const double b = MPI_Wtime ();
      compute += b - a;
      out->busy_start[out->n_busy] = (a - t0) * 1e6;
      out->busy_end[out->n_busy++] = (b - t0) * 1e6;
      if (out->span_start) {
        out->span_start[i] = (a - t0) * 1e6;
        out->span_end[i] = (b - t0) * 1e6;
      }
      if (!coll_poll (ctx, error))
        return false;
      break;
    }
    case SG_INS_COLLECTIVE:
      if (!coll_start (ctx, i, error))
        return false;
      break;
    case SG_INS_WAIT_EVENT: {
      const double a = MPI_Wtime ();
      if (ins->coll >= 0 && !coll_wait (ctx, ins->coll, error))
        return false;
      if (out->span_start && ins->coll >= 0) {
        out->span_start[i] = (a - t0) * 1e6;
        out->span_end[i] = (MPI_Wtime () - t0) * 1e6;
      }
      break;
    }
    case SG_INS_FREE:
      if (ctx->opt.mode == SG_RT_MODE_EXACT && ins->buffer >= 0)
        memset (st->arena + p->buffers[ins->buffer].offset, 0xFF,
                (size_t)p->buffers[ins->buffer].bytes);
      break;
    case SG_INS_RECORD:
      break;
    }
  }
  /* A collective nobody waited on still completes within the step. */
  for (int32_t i = 0; i < p->n_ins; i++)
    if (st->coll[i].active && !coll_wait (ctx, i, error))
      return false;
  double t1 = MPI_Wtime ();
  out->step_us = (t1 - t0) * 1e6;
  out->compute_us = compute * 1e6;
  for (int32_t i = 0; i < p->n_ins; i++) {
    int32_t c = st->coll_ix[i];
    if (c < 0)
      continue;
    out->measured_us[c] = (st->coll[i].end - st->coll[i].start) * 1e6;
    out->exposed_us[c] = st->coll[i].exposed * 1e6;
    out->launch_us[c] = (st->coll[i].start - t0) * 1e6;
    out->end_us[c] = (st->coll[i].end - t0) * 1e6;
    if (out->span_start) {
      out->span_start[i] = (st->coll[i].start - t0) * 1e6;
      out->span_end[i] = (st->coll[i].end - t0) * 1e6;
    }
  }
  return true;
}

static bool
cpu_read_value (SgRtContext *ctx, int32_t value, void *host, GError **error)
{
  SgTensor t;
  value_tensor (ctx, value, &t);
  if (t.data == NULL) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_KERNEL, "value %d has no storage", value);
    return false;
  }
  sg_tensor_pack (&t, host);
  return true;
}

static void
cpu_teardown (SgRtContext *ctx)
{
  CpuState *st = ctx->priv;
  if (st == NULL)
    return;
  for (int32_t i = 0; i < ctx->plan->n_ins; i++) {
    for (int32_t m = 0; st->coll[i].m && m < ctx->plan->ins[i].n_in; m++) {
      g_free (st->coll[i].m[m].send_stage);
      g_free (st->coll[i].m[m].recv_stage);
    }
    g_free (st->coll[i].m);
    g_free (st->coll[i].req);
  }
  free (st->arena);
  g_free (st->coll);
  g_free (st->coll_ix);
  g_free (st);
  ctx->priv = NULL;
}

const SgBackend sg_rt_cpu_backend = {
  .name = "cpu",
  .check_plan = cpu_check_plan,
  .setup = cpu_setup,
  .load_inputs = cpu_load_inputs,
  .run_step = cpu_run_step,
  .read_value = cpu_read_value,
  .teardown = cpu_teardown,
};
