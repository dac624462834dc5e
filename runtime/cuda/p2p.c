/* p2p.c: collective_permute on the GPUs, over NCCL or the copy engine.
 *
 * nccl: one grouped ncclSend/ncclRecv (ncclGroupStart/End) on the
 * instruction's stream, as all_to_all runs; a pair of one rank is a local
 * copy; a rank that receives nothing writes zeros.
 * ce (ranks of one node): every rank's one cudaMalloc (arena, scratch,
 * flags) is mapped into its peers with CUDA IPC (cudaIpcGetMemHandle,
 * exchanged over the group's MPI communicator at setup,
 * cudaIpcOpenMemHandle). A step pushes: on the instruction's stream each
 * rank
 *   1. tells its source "my output is free": writes 1 into the source's
 *      clear-to-send flag of this step;
 *   2. if it sends: waits for its own clear-to-send flag (its target's
 *      step 1), resets it, copies its input into the target's output (at
 *      the offset the plan gives it on the target: an output with a
 *      `roll` lies at a block that depends on the target's group rank)
 *      with cudaMemcpyAsync (the copy engine over NVLink: no SM), then
 *      writes 1 into the target's done flag;
 *   3. if it receives: waits for its own done flag (its source's copy is
 *      complete), resets it; else writes zeros.
 * Flags are written and waited with the driver's stream memory operations
 * (cuStreamWriteValue32 fences before the write, cuStreamWaitValue32), not
 * with interprocess events: a cudaStreamWaitEvent on an IPC event waits for
 * the record its host call saw, so a peer whose host has not yet issued
 * this step's record would be waited on for the previous step's, and a
 * captured graph would freeze that choice. Flags are waited with EQ 1 and
 * reset by their waiter in the same step; every step starts after a device
 * synchronize and an MPI barrier on every rank, so a flag is 0 at each
 * step's start, eagerly and in CUDA-graph replays alike (the memory
 * operations are captured as graph nodes). The bracket (a peer touches
 * this rank's output only between this rank's step 1 and step 3) is what
 * plan/plan-races.c relies on. Mirrors nvFuser's IPC p2p (semaphores in
 * IPC memory, cuStreamWaitValue32 / cuStreamWriteValue32 around a
 * cudaMemcpyAsync) and Transformer Engine's CE-based p2p.
 * Requires: backend setup (streams, the one allocation, NCCL comms).
 * Invalidates: nothing.
 */
#include <cuda.h>
#include <string.h>

#include "cuda-private.h"

typedef CUresult (*WaitValueFn) (CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*WriteValueFn) (CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct SgCuP2p {
  int32_t *slot;        /* per instruction: its flag pair, or -1 (not a ce step) */
  uint64_t flags_off;   /* the flags' offset from the base of every rank's allocation */
  char **peer_base;     /* per world rank: its allocation mapped here; NULL: not mapped */
  int32_t world;
  WaitValueFn wait_value;
  WriteValueFn write_value;
};

static bool
is_ce (const SgPlanIns *ins)
{
  return ins->kind == SG_INS_COLLECTIVE && ins->op == SG_OP_COLLECTIVE_PERMUTE &&
         ins->transport == SG_TRANSPORT_CE;
}

uint64_t
sg_cu_p2p_flag_bytes (const SgPlan *plan)
{
  uint64_t n = 0;
  for (int32_t i = 0; i < plan->n_ins; i++)
    n += is_ce (&plan->ins[i]);
  return n * 2 * sizeof (uint32_t);
}

#define CU_DRV_CHECK(stmt, error, label)                                                       \
  do {                                                                                         \
    CUresult r_ = (stmt);                                                                      \
    if (r_ != CUDA_SUCCESS) {                                                                  \
      g_set_error ((error), SG_RT_ERROR, SG_RT_ERROR_BACKEND, "%s:%d: %s: CUresult %d",        \
                   __FILE__, __LINE__, #stmt, (int)r_);                                        \
      goto label;                                                                              \
    }                                                                                          \
  } while (0)

static bool
driver_fn (const char *name, void **fn, GError **error)
{
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  SG_CU_CHECK (cudaGetDriverEntryPointByVersion (name, fn, 12000, cudaEnableDefault, &q), error,
               fail);
  if (q == cudaDriverEntryPointSuccess && *fn)
    return true;
  g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND, "the CUDA driver has no %s", name);
fail:
  return false;
}

/* The world rank of group rank @q of world rank @rank's instance of group @g. */
static int32_t
world_rank_of (const SgPlan *plan, int32_t rank, int32_t g, int32_t q)
{
  const SgPlanGroup *gr = &plan->groups[g];
  for (int32_t row = 0; row < gr->n_instances; row++)
    for (int32_t j = 0; j < gr->n_ranks; j++)
      if (gr->partition[row * gr->n_ranks + j] == rank)
        return gr->partition[row * gr->n_ranks + q];
  return -1;
}

/* Maps the allocations of group @g's peers that a ce step of this rank
 * sends to or receives from; the group must lie on one node. */
static bool
map_group (SgCuState *st, SgRtContext *ctx, int32_t g, const char *step, GError **error)
{
  SgCuP2p *p = st->p2p;
  const SgPlan *plan = ctx->plan;
  MPI_Comm comm = ctx->group_comms[g];
  const int32_t k = plan->groups[g].n_ranks, me = ctx->group_rank[g];
  MPI_Comm local = MPI_COMM_NULL;
  int local_size = 0;
  if (MPI_Comm_split_type (comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) != MPI_SUCCESS ||
      MPI_Comm_size (local, &local_size) != MPI_SUCCESS) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MPI, "MPI_Comm_split_type of group %s failed",
                 plan->groups[g].name);
    return false;
  }
  MPI_Comm_free (&local);
  if (local_size != k) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED,
                 "node %s: transport ce copies between GPUs of one node, but group %s spans "
                 "several (%d of its %d ranks share this rank's node)",
                 step, plan->groups[g].name, local_size, k);
    return false;
  }
  /* handle + layout of every rank of the instance */
  struct {
    cudaIpcMemHandle_t h;
    uint64_t flags_off;
  } mine, *all = g_new0 (__typeof__ (mine), (size_t)k);
  memset (&mine, 0, sizeof mine);
  mine.flags_off = p->flags_off;
  SG_CU_CHECK (cudaIpcGetMemHandle (&mine.h, st->base), error, fail);
  if (MPI_Allgather (&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, comm) !=
      MPI_SUCCESS) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MPI, "MPI_Allgather of the IPC handles of "
                 "group %s failed", plan->groups[g].name);
    goto fail;
  }
  for (int32_t i = 0; i < plan->n_ins; i++) {
    const SgPlanIns *ins = &plan->ins[i];
    if (!is_ce (ins) || ins->group != g)
      continue;
    int32_t peers[2];
    sg_plan_permute_peers (ins, me, &peers[0], &peers[1]);
    for (int t = 0; t < 2; t++) {
      const int32_t q = peers[t], w = q >= 0 ? world_rank_of (plan, ctx->rank, g, q) : -1;
      if (q < 0 || q == me || w < 0 || p->peer_base[w])
        continue;
      if (all[q].flags_off != p->flags_off) {
        g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                     "node %s: rank %d's allocation is laid out differently (flags at %" G_GUINT64_FORMAT
                     ", here %" G_GUINT64_FORMAT "): run every rank with the same options",
                     ins->name, w, all[q].flags_off, p->flags_off);
        goto fail;
      }
      void *base = NULL;
      SG_CU_CHECK (cudaIpcOpenMemHandle (&base, all[q].h, cudaIpcMemLazyEnablePeerAccess), error,
                   fail);
      p->peer_base[w] = base;
    }
  }
  g_free (all);
  return true;
fail:
  g_free (all);
  g_prefix_error (error, "mapping the peers of group %s for the copy engine: ",
                  plan->groups[g].name);
  return false;
}

bool
sg_cu_p2p_setup (SgCuState *st, SgRtContext *ctx, uint64_t flags_off, GError **error)
{
  const SgPlan *plan = ctx->plan;
  SgCuP2p *p = g_new0 (SgCuP2p, 1);
  st->p2p = p;
  p->flags_off = flags_off;
  p->world = ctx->world;
  p->slot = g_new (int32_t, (size_t)MAX (1, plan->n_ins));
  int32_t n = 0;
  for (int32_t i = 0; i < plan->n_ins; i++)
    p->slot[i] = is_ce (&plan->ins[i]) ? n++ : -1;
  if (n == 0)
    return true;
  p->peer_base = g_new0 (char *, (size_t)ctx->world);
  if (!driver_fn ("cuStreamWaitValue32", (void **)&p->wait_value, error) ||
      !driver_fn ("cuStreamWriteValue32", (void **)&p->write_value, error))
    return false;
  SG_CU_CHECK (cudaMemset (st->base + flags_off, 0, sg_cu_p2p_flag_bytes (plan)), error, fail);
  SG_CU_CHECK (cudaDeviceSynchronize (), error, fail);
  for (int32_t g = 0; g < plan->n_groups; g++)
    for (int32_t i = 0; i < plan->n_ins; i++)
      if (is_ce (&plan->ins[i]) && plan->ins[i].group == g) {
        if (!map_group (st, ctx, g, plan->ins[i].name, error))
          return false;
        break;
      }
  return true;
fail:
  return false;
}

void
sg_cu_p2p_destroy (SgCuState *st)
{
  SgCuP2p *p = st->p2p;
  if (!p)
    return;
  for (int32_t w = 0; p->peer_base && w < p->world; w++)
    if (p->peer_base[w])
      cudaIpcCloseMemHandle (p->peer_base[w]);
  g_free (p->peer_base);
  g_free (p->slot);
  g_free (p);
  st->p2p = NULL;
}

/* The copy-engine step of instruction @i (the protocol above). */
static bool
run_ce (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, const SgCuTensor *in,
        const SgCuTensor *out, size_t bytes, int32_t to, int32_t from, GError **error)
{
  SgCuP2p *p = st->p2p;
  cudaStream_t s = st->streams[ins->stream];
  const CUstream cs = (CUstream)s;
  const int32_t i = (int32_t)(ins - plan->ins);
  g_return_val_if_fail (p && i >= 0 && i < plan->n_ins && p->slot[i] >= 0, false);
  const uint64_t flag = p->flags_off + (uint64_t)p->slot[i] * 2 * sizeof (uint32_t);
  const int32_t me = st->group_rank[ins->group];
  const uint64_t cts = flag, done = flag + sizeof (uint32_t);
#define AT(base, off) ((CUdeviceptr)(uintptr_t)((base) + (off)))
  const int32_t wf = from >= 0 && from != me ? world_rank_of (plan, st->rank, ins->group, from) : -1;
  const int32_t wt = to >= 0 && to != me ? world_rank_of (plan, st->rank, ins->group, to) : -1;
  char *src = wf >= 0 ? p->peer_base[wf] : NULL, *dst = wt >= 0 ? p->peer_base[wt] : NULL;
  if ((from >= 0 && from != me && !src) || (to >= 0 && to != me && !dst)) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND, "a peer's memory is not mapped");
    return false;
  }
  if (src)
    CU_DRV_CHECK (p->write_value (cs, AT (src, cts), 1, CU_STREAM_WRITE_VALUE_DEFAULT), error, fail);
  if (to == me)
    SG_CU_CHECK (cudaMemcpyAsync (out->ptr, in->ptr, bytes, cudaMemcpyDeviceToDevice, s), error,
                 fail);
  else if (dst) {
    CU_DRV_CHECK (p->wait_value (cs, AT (st->base, cts), 1, CU_STREAM_WAIT_VALUE_EQ), error, fail);
    CU_DRV_CHECK (p->write_value (cs, AT (st->base, cts), 0, CU_STREAM_WRITE_VALUE_DEFAULT), error,
                  fail);
    /* the target's output is where its own group positions place it (a
     * value with a roll lies elsewhere on every rank) */
    const SgPlanValue *ov = &plan->values[ins->out[0]];
    g_autofree int32_t *tpos = g_new (int32_t, (size_t)MAX (plan->n_groups, 1));
    sg_plan_group_ranks (plan, wt, tpos);
    char *peer_out = dst + ((char *)out->ptr - st->base)
                     - sg_plan_value_offset (plan, ov, st->group_rank)
                     + sg_plan_value_offset (plan, ov, tpos);
    SG_CU_CHECK (cudaMemcpyAsync (peer_out, in->ptr, bytes, cudaMemcpyDeviceToDevice, s), error,
                 fail);
    CU_DRV_CHECK (p->write_value (cs, AT (dst, done), 1, CU_STREAM_WRITE_VALUE_DEFAULT), error,
                  fail);
  }
  if (src) {
    CU_DRV_CHECK (p->wait_value (cs, AT (st->base, done), 1, CU_STREAM_WAIT_VALUE_EQ), error, fail);
    CU_DRV_CHECK (p->write_value (cs, AT (st->base, done), 0, CU_STREAM_WRITE_VALUE_DEFAULT),
                  error, fail);
  } else if (from < 0) {
    SG_CU_CHECK (cudaMemsetAsync (out->ptr, 0, bytes, s), error, fail);
  }
#undef AT
  return true;
fail:
  if (st->capturing)
    g_prefix_error (error, "transport ce under CUDA-graph capture (run with --launch eager if "
                           "this driver cannot capture stream memory operations): ");
  return false;
}

bool
sg_cu_run_permute (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, const SgCuTensor *in,
                   const SgCuTensor *out, ncclDataType_t t, size_t count, size_t es,
                   GError **error)
{
  int32_t to, from;
  const int32_t me = st->group_rank[ins->group];
  sg_plan_permute_peers (ins, me, &to, &from);
  cudaStream_t s = st->streams[ins->stream];
  const size_t bytes = count * es;
  if (ins->transport == SG_TRANSPORT_CE)
    return run_ce (st, plan, ins, in, out, bytes, to, from, error);
  ncclComm_t comm = st->comms[ins->group];
  SG_NCCL_CHECK (ncclGroupStart (), error, fail);
  if (to >= 0 && to != me)
    SG_NCCL_CHECK (ncclSend (in->ptr, count, t, to, comm, s), error, fail);
  if (from >= 0 && from != me)
    SG_NCCL_CHECK (ncclRecv (out->ptr, count, t, from, comm, s), error, fail);
  SG_NCCL_CHECK (ncclGroupEnd (), error, fail);
  if (to == me)
    SG_CU_CHECK (cudaMemcpyAsync (out->ptr, in->ptr, bytes, cudaMemcpyDeviceToDevice, s), error,
                 fail);
  if (from < 0)
    SG_CU_CHECK (cudaMemsetAsync (out->ptr, 0, bytes, s), error, fail);
  return true;
fail:
  return false;
}
