/* comm.c: NCCL communicators, collectives, fault handling for the CUDA backend.
 *
 * One communicator per plan group: rank 0 of the group's MPI communicator
 * (the partition row this rank is in, runtime.h) creates the unique id and
 * broadcasts it, then every member calls ncclCommInitRank, as
 * torch.distributed's ProcessGroupNCCL does over its store. Collectives run
 * on the instruction's stream; views that are not dense go through the
 * stream's scratch. A coalesced collective issues its members' calls inside
 * one ncclGroupStart / ncclGroupEnd (NCCL's "aggregated operations": one
 * launch), as torch's _coalescing_manager does. Faults: completion is polled (cudaEventQuery +
 * ncclCommGetAsyncError) so an NCCL error or a --timeout aborts every
 * communicator and returns an error instead of hanging; a watchdog thread
 * covers host calls that block (init, MPI), aborting the job with a message
 * (the one place that ends the process: a hung rank cannot unwind).
 * Requires: cudaSetDevice done. Invalidates: nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-private.h"

bool
sg_cu_nccl_type (SgDtype dtype, ncclDataType_t *out)
{
  switch (dtype) {
  case SG_DTYPE_F32: *out = ncclFloat32; return true;
  case SG_DTYPE_F64: *out = ncclFloat64; return true;
  case SG_DTYPE_BF16: *out = ncclBfloat16; return true;
  case SG_DTYPE_F16: *out = ncclFloat16; return true;
  case SG_DTYPE_I64: *out = ncclInt64; return true;
  case SG_DTYPE_I32: *out = ncclInt32; return true;
  case SG_DTYPE_I8: *out = ncclInt8; return true;
  case SG_DTYPE_U8: case SG_DTYPE_BOOL: *out = ncclUint8; return true;
  default: return false;
  }
}

static ncclRedOp_t
nccl_op (SgReduceOp r)
{
  switch (r) {
  case SG_REDUCE_AVG: return ncclAvg;
  case SG_REDUCE_MAX: return ncclMax;
  case SG_REDUCE_MIN: return ncclMin;
  case SG_REDUCE_PRODUCT: return ncclProd;
  default: return ncclSum;
  }
}

int
sg_cu_device_count (void)
{
  int n = 0; /* left untouched without a driver */
  if (cudaGetDeviceCount (&n) != cudaSuccess) {
    (void)cudaGetLastError ();
    return 0;
  }
  return n;
}

int
sg_cu_local_rank (MPI_Comm world)
{
  static const char *vars[] = { "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                                "LOCAL_RANK", NULL };
  for (int i = 0; vars[i]; i++) {
    const char *v = g_getenv (vars[i]);
    if (v && *v)
      return atoi (v);
  }
  MPI_Comm local;
  int r = 0;
  if (MPI_Comm_split_type (world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) ==
      MPI_SUCCESS) {
    MPI_Comm_rank (local, &r);
    MPI_Comm_free (&local);
  }
  return r;
}

bool
sg_cu_comms_init (SgCuState *st, SgRtContext *ctx, GError **error)
{
  const SgPlan *plan = ctx->plan;
  /* NCCL's "graph mixing" support (captured and un-captured NCCL calls of
   * a communicator outstanding at once) serializes a graph's first kernels
   * behind its collectives: measured on 2x H200 (tools/device/
   * probe_launch.sh), stream 0's first kernel started 332 us into the
   * scheduled w2_fsdp2 step with it, 68 us without; its input order's step
   * took 3102 us with it, 2861 us without. schedrun never has both outstanding: step 0 (eager) and
   * every replay start after a device synchronize. A user's setting wins;
   * NCCL reads it at its first call, below. */
  if (st->graph)
    g_setenv ("NCCL_GRAPH_MIXING_SUPPORT", "0", FALSE);
  st->n_comms = plan->n_groups;
  st->comms = g_new0 (ncclComm_t, MAX (1, plan->n_groups));
  for (int32_t g = 0; g < plan->n_groups; g++) {
    ncclUniqueId id;
    memset (&id, 0, sizeof id);
    if (ctx->group_rank[g] == 0)
      SG_NCCL_CHECK (ncclGetUniqueId (&id), error, fail);
    if (MPI_Bcast (&id, sizeof id, MPI_BYTE, 0, ctx->group_comms[g]) != MPI_SUCCESS) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MPI,
                   "MPI_Bcast of the NCCL unique id of group %s failed", plan->groups[g].name);
      goto fail;
    }
    SG_NCCL_CHECK (ncclCommInitRank (&st->comms[g], plan->groups[g].n_ranks, id,
                                     ctx->group_rank[g]),
                   error, fail);
  }
  return true;
fail:
  g_prefix_error (error, "NCCL setup: ");
  return false;
}

void
sg_cu_comms_destroy (SgCuState *st, bool abort)
{
  for (int32_t g = 0; g < st->n_comms; g++)
    if (st->comms[g]) {
      if (abort)
        ncclCommAbort (st->comms[g]);
      else {
        ncclCommFinalize (st->comms[g]);
        ncclCommDestroy (st->comms[g]);
      }
      st->comms[g] = NULL;
    }
  g_clear_pointer (&st->comms, g_free);
  st->n_comms = 0;
}

/* A dense view of @t: itself, or @scratch (advanced) holding / receiving it. */
static SgCuTensor
dense_of (const SgCuTensor *t, char **scratch)
{
  if (sg_cu_is_contiguous (t))
    return *t;
  SgCuTensor d = *t;
  d.ptr = *scratch;
  int64_t s = 1;
  for (int k = t->ndim - 1; k >= 0; k--) {
    d.stride[k] = s;
    s *= t->shape[k];
  }
  *scratch += ((uint64_t)s * sg_dtype_size ((SgDtype)t->dtype) + 255) / 256 * 256;
  return d;
}

/* Issues member @m of collective @ins on stream @s: its NCCL call over the
 * dense operands @din -> @dout (of @in's element type). */
static bool
member_issue (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, const SgCuTensor *in,
              const SgCuTensor *out, const SgCuTensor *din, const SgCuTensor *dout,
              cudaStream_t s, GError **error)
{
  ncclComm_t comm = st->comms[ins->group];
  const SgPlanGroup *grp = &plan->groups[ins->group];
  ncclDataType_t t;
  size_t count_in = (size_t)sg_cu_numel (in), count_out = (size_t)sg_cu_numel (out);
  if (!sg_cu_nccl_type ((SgDtype)in->dtype, &t)) {
    /* Moves without arithmetic do not care about the element type. */
    const size_t es = sg_dtype_size ((SgDtype)in->dtype);
    t = ncclUint8;
    count_in *= es;
    count_out *= es;
  }
  switch (sg_op_member_kind (ins->op)) {
  case SG_OP_ALL_GATHER:
    SG_NCCL_CHECK (ncclAllGather (din->ptr, dout->ptr, count_in, t, comm, s), error, fail);
    break;
  case SG_OP_REDUCE_SCATTER:
    SG_NCCL_CHECK (ncclReduceScatter (din->ptr, dout->ptr, count_out, t, nccl_op (ins->reduce),
                                      comm, s),
                   error, fail);
    break;
  case SG_OP_ALL_REDUCE:
    SG_NCCL_CHECK (ncclAllReduce (din->ptr, dout->ptr, count_in, t, nccl_op (ins->reduce), comm,
                                  s),
                   error, fail);
    break;
  case SG_OP_BROADCAST: {
    int64_t src = 0;
    sg_plan_arg_int (ins, 1, &src);
    int root = (int)src;
    /* c10d's src is a global rank: its index in this rank's partition row. */
    for (int32_t i = 0; i < grp->n_instances; i++)
      for (int32_t j = 0; j < grp->n_ranks; j++)
        if (grp->partition[i * grp->n_ranks + j] == src)
          root = j;
    SG_NCCL_CHECK (ncclBroadcast (din->ptr, dout->ptr, count_in, t, root, comm, s), error, fail);
    break;
  }
  case SG_OP_COLLECTIVE_PERMUTE:
    if (!sg_cu_run_permute (st, plan, ins, din, dout, t, count_in,
                            t == ncclUint8 ? 1 : sg_dtype_size ((SgDtype)in->dtype), error))
      goto fail;
    break;
  case SG_OP_ALL_TO_ALL: {
    /* Equal splits over dim 0 (the plan's all_to_all_single with split
     * sizes of None or all equal): one send and one receive per peer. */
    const int n = grp->n_ranks;
    const size_t es = t == ncclUint8 ? 1 : sg_dtype_size ((SgDtype)in->dtype);
    const size_t cin = count_in / (size_t)n, cout = count_out / (size_t)n;
    SG_NCCL_CHECK (ncclGroupStart (), error, fail);
    for (int p = 0; p < n; p++) {
      SG_NCCL_CHECK (ncclSend ((const char *)din->ptr + (size_t)p * cin * es, cin, t, p, comm, s),
                     error, fail);
      SG_NCCL_CHECK (ncclRecv ((char *)dout->ptr + (size_t)p * cout * es, cout, t, p, comm, s),
                     error, fail);
    }
    SG_NCCL_CHECK (ncclGroupEnd (), error, fail);
    break;
  }
  default:
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED, "not a collective NCCL runs");
    goto fail;
  }
  return true;
fail:
  return false;
}

bool
sg_cu_run_collective (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, GError **error)
{
  cudaStream_t s = st->streams[ins->stream];
  const SgPlanGroup *grp = &plan->groups[ins->group];
  const int32_t n = ins->n_in;
  /* a coalesced collective's members are one NCCL group (ncclGroupStart /
   * ncclGroupEnd: one launch; they end together, so the one event recorded
   * after this instruction is the group's end); under CUDA graph capture
   * the group is captured as its kernels */
  const bool group = sg_op_is_coalesced (ins->op);
  bool in_group = false;
  g_autofree SgCuTensor *in = g_new (SgCuTensor, (size_t)n), *out = g_new (SgCuTensor, (size_t)n);
  g_autofree SgCuTensor *din = g_new (SgCuTensor, (size_t)n);
  g_autofree SgCuTensor *dout = g_new (SgCuTensor, (size_t)n);
  char *scratch = st->scratch[ins->stream];
  for (int32_t m = 0; m < n; m++) {
    sg_cu_value_tensor (st, plan, ins->in[m], &in[m]);
    sg_cu_value_tensor (st, plan, ins->out[m], &out[m]);
    din[m] = dense_of (&in[m], &scratch);
    dout[m] = dense_of (&out[m], &scratch);
    if (din[m].ptr != in[m].ptr)
      SG_CU_CHECK (sg_cu_copy_range (&din[m], 0, &in[m], 0, sg_cu_numel (&in[m]), s), error, fail);
  }
  if (group)
    SG_NCCL_CHECK (ncclGroupStart (), error, fail);
  in_group = group;
  for (int32_t m = 0; m < n; m++)
    if (!member_issue (st, plan, ins, &in[m], &out[m], &din[m], &dout[m], s, error))
      goto fail;
  in_group = false;
  if (group)
    SG_NCCL_CHECK (ncclGroupEnd (), error, fail);
  for (int32_t m = 0; m < n; m++)
    if (dout[m].ptr != out[m].ptr)
      SG_CU_CHECK (sg_cu_copy_range (&out[m], 0, &dout[m], 0, sg_cu_numel (&out[m]), s), error,
                   fail);
  return true;
fail:
  if (in_group)
    (void)ncclGroupEnd (); /* close the group; the error above is what failed */
  g_prefix_error (error, "node %s (%s over group %s): ", ins->name, sg_op_name (ins->op),
                  grp->name);
  return false;
}

bool
sg_cu_wait_event (SgCuState *st, cudaEvent_t ev, double timeout_s, const char *what,
                  GError **error)
{
  const gint64 t0 = g_get_monotonic_time ();
  gulong sleep_us = 20;
  for (;;) {
    cudaError_t e = cudaEventQuery (ev);
    if (e == cudaSuccess)
      return true;
    if (e != cudaErrorNotReady) {
      SG_CU_CHECK (e, error, fail);
    }
    for (int32_t g = 0; g < st->n_comms; g++) {
      ncclResult_t async = ncclSuccess;
      if (st->comms[g] && ncclCommGetAsyncError (st->comms[g], &async) == ncclSuccess &&
          async != ncclSuccess && async != ncclInProgress) {
        g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                     "NCCL error on communicator %d while waiting for %s: %s (%s); all "
                     "communicators aborted",
                     g, what, ncclGetErrorString (async), ncclGetLastError (st->comms[g]));
        sg_cu_comms_destroy (st, true);
        return false;
      }
    }
    if (timeout_s > 0 && (double)(g_get_monotonic_time () - t0) > timeout_s * 1e6) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                   "timeout: %s did not complete within %.1f s (--timeout); all NCCL "
                   "communicators aborted",
                   what, timeout_s);
      sg_cu_comms_destroy (st, true);
      return false;
    }
    g_usleep (sleep_us);
    if (sleep_us < 1000)
      sleep_us *= 2;
  }
fail:
  return false;
}

/* ---- watchdog ---- */

struct SgCuWatchdog {
  GThread *thread;
  GMutex lock;
  GCond cond;
  SgCuState *st;
  int32_t rank;
  bool stop;
  gint64 deadline; /* monotonic us; 0 = disarmed */
  char what[128];
  double timeout_s;
  gint fired; /* atomic: the deadline passed and the job is being aborted */
};

static gpointer
watchdog_main (gpointer data)
{
  SgCuWatchdog *wd = data;
  g_mutex_lock (&wd->lock);
  while (!wd->stop) {
    if (wd->deadline == 0) {
      g_cond_wait (&wd->cond, &wd->lock);
      continue;
    }
    if (g_cond_wait_until (&wd->cond, &wd->lock, wd->deadline))
      continue; /* re-armed, disarmed or stopped */
    if (wd->deadline != 0 && g_get_monotonic_time () >= wd->deadline) {
      g_atomic_int_set (&wd->fired, 1);
      fprintf (stderr,
               "schedrun: rank %d: watchdog: %s did not finish within %.1f s (--timeout); "
               "aborting every NCCL communicator and the job\n",
               wd->rank, wd->what, wd->timeout_s);
      fflush (stderr);
      for (int32_t g = 0; g < wd->st->n_comms; g++)
        if (wd->st->comms && wd->st->comms[g])
          ncclCommAbort (wd->st->comms[g]);
      MPI_Abort (MPI_COMM_WORLD, SG_RT_EXIT_TIMEOUT);
      _Exit (SG_RT_EXIT_TIMEOUT);
    }
  }
  g_mutex_unlock (&wd->lock);
  return NULL;
}

SgCuWatchdog *
sg_cu_watchdog_start (SgCuState *st, int32_t rank)
{
  SgCuWatchdog *wd = g_new0 (SgCuWatchdog, 1);
  g_mutex_init (&wd->lock);
  g_cond_init (&wd->cond);
  wd->st = st;
  wd->rank = rank;
  wd->thread = g_thread_new ("sg-cuda-watchdog", watchdog_main, wd);
  return wd;
}

void
sg_cu_watchdog_arm (SgCuWatchdog *wd, double timeout_s, const char *what)
{
  if (!wd || timeout_s <= 0)
    return;
  g_mutex_lock (&wd->lock);
  /* The host-side deadline trails the in-step polling one by 0.5 s, so
   * that a hung step is reported by sg_cu_wait_event with its error first. */
  wd->timeout_s = timeout_s;
  wd->deadline = g_get_monotonic_time () + (gint64)(timeout_s * 1e6) + 500000;
  g_strlcpy (wd->what, what, sizeof wd->what);
  g_cond_signal (&wd->cond);
  g_mutex_unlock (&wd->lock);
}

bool
sg_cu_watchdog_fired (SgCuWatchdog *wd)
{
  return wd && g_atomic_int_get (&wd->fired);
}

void
sg_cu_watchdog_disarm (SgCuWatchdog *wd)
{
  if (!wd)
    return;
  g_mutex_lock (&wd->lock);
  wd->deadline = 0;
  g_cond_signal (&wd->cond);
  g_mutex_unlock (&wd->lock);
}

void
sg_cu_watchdog_stop (SgCuWatchdog *wd)
{
  if (!wd)
    return;
  g_mutex_lock (&wd->lock);
  wd->stop = true;
  g_cond_signal (&wd->cond);
  g_mutex_unlock (&wd->lock);
  g_thread_join (wd->thread);
  g_mutex_clear (&wd->lock);
  g_cond_clear (&wd->cond);
  g_free (wd);
}
