/* backend.c: the CUDA/NCCL backend (SgBackend "cuda"): one GPU per rank.
 *
 * Maps a plan to CUDA resources exactly as it says: one non-blocking stream
 * per plan stream, one event per plan event, one NCCL communicator per
 * group, one cudaMalloc per rank holding the plan's arena and, after it, a
 * scratch area per stream (cuBLAS workspace, strided GEMM operands, SDPA
 * backward rows, collective staging). The host issues `ins` in order;
 * cross-stream order is only the plan's RECORD / WAIT_EVENT, as in
 * nvFuser's host IR executor. --launch graph (the default) captures that
 * issue once into a CUDA graph and replays it, so the GPUs run the plan at
 * their own pace instead of the host's launch rate (PyTorch's CUDA graphs);
 * --launch eager issues every step from the host. A collective_permute
 * over the copy engine maps its peers' allocations at setup (p2p.c).
 * Measurement (CUDA events, both modes): per collective a start/end pair on
 * its stream; at each WAIT_EVENT of a collective on stream 0 a "reached"
 * event, exposed = end - reached clamped at 0 (time compute stood still);
 * step = start on stream 0 to the join of every stream; compute = the sum
 * of runs of kernels on stream 0 between waits.
 * Requires: sg_rt_context_init done. Invalidates: nothing.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda-private.h"

static SgCuState *
state (SgRtContext *ctx)
{
  return ctx->priv;
}

/* Seconds the step may wait: --timeout, and less when schedrun's whole-run
 * alarm (SIGALRM, --timeout from the start) would fire first, so that a
 * hung collective is reported and its communicators aborted by this rank
 * (polling, or the watchdog 0.5 s later for a host call that blocks)
 * before the alarm ends it. */
static double
step_budget (double timeout_s)
{
  if (timeout_s <= 0)
    return 0;
  const unsigned left = alarm (0);
  if (left == 0)
    return timeout_s;
  alarm (left);
  return MIN (timeout_s, MAX (0.5, (double)left - 1.5));
}

static bool
cuda_check_plan (SgRtContext *ctx, GError **error)
{
  const SgPlan *plan = ctx->plan;
  if (sg_cu_device_count () == 0) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                 "--backend cuda: no CUDA device is visible on rank %d", ctx->rank);
    return false;
  }
  uint64_t *need = g_new0 (uint64_t, MAX (1, plan->n_streams));
  bool ok = true;
  for (int32_t i = 0; i < plan->n_ins && ok; i++)
    ok = sg_cu_check_ins (plan, &plan->ins[i], ctx->opt.mode == SG_RT_MODE_EXACT, -1, need, error);
  g_free (need);
  return ok;
}

static void cuda_teardown (SgRtContext *ctx);

static bool
make_events (cudaEvent_t *ev, int32_t n, unsigned flags, GError **error)
{
  for (int32_t i = 0; i < n; i++)
    SG_CU_CHECK (cudaEventCreateWithFlags (&ev[i], flags), error, fail);
  return true;
fail:
  return false;
}

static bool
cuda_setup (SgRtContext *ctx, GError **error)
{
  const SgPlan *plan = ctx->plan;
  SgCuState *st = g_new0 (SgCuState, 1);
  ctx->priv = st;
  const int ndev = sg_cu_device_count ();
  st->device = sg_cu_local_rank (ctx->world_comm) % MAX (1, ndev);
  SG_CU_CHECK (cudaSetDevice (st->device), error, fail);
  st->watchdog = sg_cu_watchdog_start (st, ctx->rank);
  sg_cu_watchdog_arm (st->watchdog, step_budget (ctx->opt.timeout_s), "backend setup");

  st->n_streams = plan->n_streams;
  st->streams = g_new0 (cudaStream_t, st->n_streams);
  for (int32_t s = 0; s < st->n_streams; s++)
    SG_CU_CHECK (cudaStreamCreateWithFlags (&st->streams[s], cudaStreamNonBlocking), error, fail);

  /* Attention on cuDNN where it runs (plans built here, once per shape),
   * and every instruction's scratch; then one allocation: arena, then
   * per-stream scratch. */
  st->scratch = g_new0 (char *, st->n_streams);
  st->scratch_bytes = g_new0 (uint64_t, st->n_streams);
  st->exact = ctx->opt.mode == SG_RT_MODE_EXACT;
  st->graph = ctx->opt.launch == SG_RT_LAUNCH_GRAPH;
  st->dnn = sg_cu_dnn_new (st->streams, st->n_streams, &st->attn_why);
  st->attn_plan = g_new (int32_t, MAX (1, plan->n_ins));
  for (int32_t i = 0; i < plan->n_ins; i++)
    if (!sg_cu_prepare_ins (st, plan, i, st->scratch_bytes, error))
      goto fail;
  ctx->info = sg_cu_attention_note (st);
  if (ctx->rank == 0)
    g_printerr ("schedrun: cuda backend: %s\n", ctx->info);
  uint64_t total = (plan->arena_bytes + 255) / 256 * 256;
  st->arena_bytes = plan->arena_bytes;
  for (int32_t s = 0; s < st->n_streams; s++)
    total += (st->scratch_bytes[s] + 255) / 256 * 256;
  const uint64_t flags_off = total; /* the copy-engine flags (p2p.c) come last */
  total += sg_cu_p2p_flag_bytes (plan);
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo (&free_b, &total_b) == cudaSuccess && MAX (total, 256) > free_b) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                 "out of device memory: the plan's arena (%" G_GUINT64_FORMAT
                 " bytes) and stream scratch need %" G_GUINT64_FORMAT " bytes, the GPU has %zu "
                 "of %zu bytes free",
                 plan->arena_bytes, total, free_b, total_b);
    goto fail;
  }
  SG_CU_CHECK (cudaMalloc ((void **)&st->base, MAX (total, 256)), error, fail);
  st->arena = st->base;
  {
    char *p = st->base + (plan->arena_bytes + 255) / 256 * 256;
    for (int32_t s = 0; s < st->n_streams; s++) {
      st->scratch[s] = p;
      p += (st->scratch_bytes[s] + 255) / 256 * 256;
    }
  }
  if (ctx->opt.mode == SG_RT_MODE_EXACT) /* deterministic contents of never-written bytes */
    SG_CU_CHECK (cudaMemset (st->base, 0, MAX (total, 256)), error, fail);

  st->n_events = plan->n_events;
  st->events = g_new0 (cudaEvent_t, MAX (1, plan->n_events));
  if (!make_events (st->events, plan->n_events, cudaEventDisableTiming, error))
    goto fail;
  SG_CUBLAS_CHECK (cublasCreate (&st->cublas), error, fail);
  SG_CUBLAS_CHECK (cublasLtCreate (&st->lt), error, fail);
  st->rank = ctx->rank;
  st->group_rank = g_memdup2 (ctx->group_rank, sizeof (int32_t) * (size_t)MAX (1, plan->n_groups));

  /* Measurement events. */
  st->coll_ordinal = g_new (int32_t, MAX (1, plan->n_ins));
  st->run_first = g_new (int32_t, MAX (1, plan->n_ins));
  st->wait_run = g_new (int32_t, MAX (1, plan->n_ins));
  int32_t n_coll = 0, n_runs = 0;
  bool in_run = false;
  for (int32_t i = 0; i < plan->n_ins; i++) {
    const SgPlanIns *ins = &plan->ins[i];
    st->coll_ordinal[i] = ins->kind == SG_INS_COLLECTIVE ? n_coll++ : -1;
    st->wait_run[i] = n_runs;
    if (ins->kind == SG_INS_KERNEL && ins->stream == 0 && !in_run) {
      in_run = true;
      st->run_first[n_runs++] = i;
    } else if (ins->kind == SG_INS_WAIT_EVENT && ins->stream == 0) {
      in_run = false;
    }
  }
  st->coll_start = g_new0 (cudaEvent_t, MAX (1, n_coll));
  st->coll_end = g_new0 (cudaEvent_t, MAX (1, n_coll));
  st->reached = g_new0 (cudaEvent_t, MAX (1, plan->n_ins));
  st->n_runs = n_runs;
  st->n_run_ev = 2 * n_runs;
  st->run_ev = g_new0 (cudaEvent_t, MAX (1, st->n_run_ev));
  st->join = g_new0 (cudaEvent_t, st->n_streams);
  if (!make_events (st->coll_start, n_coll, cudaEventDefault, error) ||
      !make_events (st->coll_end, n_coll, cudaEventDefault, error) ||
      !make_events (st->run_ev, st->n_run_ev, cudaEventDefault, error) ||
      !make_events (st->join, st->n_streams, cudaEventDisableTiming, error) ||
      !make_events (&st->step_start, 1, cudaEventDefault, error) ||
      !make_events (&st->step_end, 1, cudaEventDefault, error))
    goto fail;
  for (int32_t i = 0; i < plan->n_ins; i++) {
    const SgPlanIns *ins = &plan->ins[i];
    if (ins->kind == SG_INS_WAIT_EVENT && ins->coll >= 0 && ins->stream == 0)
      SG_CU_CHECK (cudaEventCreate (&st->reached[i]), error, fail);
  }

  /* Diagnostics: per-kernel times (changes what it measures a little: two
   * more event records per kernel on the host). */
  const char *kt = g_getenv ("SG_CUDA_KERNEL_TIMES");
  if (kt && *kt) {
    st->ktimes_path = g_strdup (kt);
    st->kev = g_new0 (cudaEvent_t, 2 * MAX (1, plan->n_ins));
    st->ksamples = g_new0 (double, (size_t)MAX (1, ctx->opt.iters) * MAX (1, plan->n_ins));
    for (int32_t i = 0; i < plan->n_ins; i++)
      if (plan->ins[i].kind == SG_INS_KERNEL) {
        SG_CU_CHECK (cudaEventCreate (&st->kev[2 * i]), error, fail);
        SG_CU_CHECK (cudaEventCreate (&st->kev[2 * i + 1]), error, fail);
      }
  }
  if (!sg_cu_comms_init (st, ctx, error) || !sg_cu_p2p_setup (st, ctx, flags_off, error))
    goto fail;
  SG_CU_CHECK (cudaDeviceSynchronize (), error, fail);
  sg_cu_watchdog_disarm (st->watchdog);
  return true;
fail:
  g_prefix_error (error, "cuda backend setup (rank %d, device %d): ", ctx->rank, st->device);
  return false;
}

static bool
cuda_load_inputs (SgRtContext *ctx, GError **error)
{
  SgCuState *st = state (ctx);
  const SgPlan *plan = ctx->plan;
  if (!st->input_host)
    st->input_host = g_new0 (void *, MAX (1, plan->n_inputs));
  for (int32_t i = 0; i < plan->n_inputs; i++) {
    const SgPlanValue *v = &plan->values[plan->inputs[i]];
    if (v->buffer < 0)
      continue;
    const uint64_t bytes = sg_rt_value_numel (v) * sg_dtype_size (v->dtype);
    if (!st->input_host[i]) { /* generated once; the step may overwrite the device copy */
      SG_CU_CHECK (cudaMallocHost (&st->input_host[i], MAX (bytes, 1)), error, fail);
      sg_rt_fill_input (v, ctx->rank, ctx->opt.seed, st->input_host[i]);
    }
    SgCuTensor t;
    sg_cu_value_tensor (st, plan, plan->inputs[i], &t);
    if (sg_cu_is_contiguous (&t)) {
      SG_CU_CHECK (cudaMemcpyAsync (t.ptr, st->input_host[i], bytes, cudaMemcpyHostToDevice,
                                    st->streams[0]),
                   error, fail);
    } else {
      void *tmp = NULL;
      SG_CU_CHECK (cudaMalloc (&tmp, MAX (bytes, 1)), error, fail);
      SgCuTensor d = t;
      d.ptr = tmp;
      int64_t s = 1;
      for (int k = t.ndim - 1; k >= 0; k--) {
        d.stride[k] = s;
        s *= t.shape[k];
      }
      cudaError_t e = cudaMemcpy (tmp, st->input_host[i], bytes, cudaMemcpyHostToDevice);
      if (e == cudaSuccess)
        e = sg_cu_copy_range (&t, 0, &d, 0, sg_cu_numel (&t), st->streams[0]);
      if (e == cudaSuccess)
        e = cudaStreamSynchronize (st->streams[0]);
      cudaFree (tmp);
      SG_CU_CHECK (e, error, fail);
    }
  }
  SG_CU_CHECK (cudaStreamSynchronize (st->streams[0]), error, fail);
  return true;
fail:
  g_prefix_error (error, "loading inputs on rank %d: ", ctx->rank);
  return false;
}

static double
elapsed_us (cudaEvent_t a, cudaEvent_t b)
{
  float ms = 0.f;
  if (cudaEventElapsedTime (&ms, a, b) != cudaSuccess) {
    (void)cudaGetLastError ();
    return 0.0;
  }
  return (double)ms * 1000.0;
}

/* A measurement event: inside a capture it must become an event node of the
 * graph (cudaEventRecordExternal) for its time to be readable afterwards. */
static cudaError_t
mark (const SgCuState *st, cudaEvent_t ev, cudaStream_t s)
{
  if (st->bare && ev != st->step_start && ev != st->step_end)
    return cudaSuccess;
  return st->capturing ? cudaEventRecordWithFlags (ev, s, cudaEventRecordExternal)
                       : cudaEventRecord (ev, s);
}

/* Queues one step: `ins` in order, with the measurement events around it.
 * Eagerly, or into the graph being captured (the same calls either way). */
static bool
issue_step (SgRtContext *ctx, SgCuState *st, GError **error)
{
  const SgPlan *plan = ctx->plan;
  const bool exact = ctx->opt.mode == SG_RT_MODE_EXACT;
  int32_t i = 0, run = 0;
  bool in_run = false;

  SG_CU_CHECK (mark (st, st->step_start, st->streams[0]), error, fail);
  /* join[0] forks the other streams off stream 0 (and into a capture). */
  SG_CU_CHECK (cudaEventRecord (st->join[0], st->streams[0]), error, fail);
  for (int32_t s = 1; s < st->n_streams; s++)
    SG_CU_CHECK (cudaStreamWaitEvent (st->streams[s], st->join[0], 0), error, fail);

  for (i = 0; i < plan->n_ins; i++) {
    const SgPlanIns *ins = &plan->ins[i];
    cudaStream_t s = st->streams[ins->stream];
    if (!sg_rt_ins_hook (ctx, i, error))
      return false;
    switch (ins->kind) {
    case SG_INS_KERNEL:
      if (ins->stream == 0 && !in_run) {
        SG_CU_CHECK (mark (st, st->run_ev[2 * run], s), error, fail);
        in_run = true;
      }
      if (st->kev)
        SG_CU_CHECK (mark (st, st->kev[2 * i], s), error, fail);
      if (!sg_cu_run_kernel (st, plan, ins, error))
        goto fail;
      if (st->kev)
        SG_CU_CHECK (mark (st, st->kev[2 * i + 1], s), error, fail);
      break;
    case SG_INS_COLLECTIVE: {
      const int32_t c = st->coll_ordinal[i];
      SG_CU_CHECK (mark (st, st->coll_start[c], s), error, fail);
      if (!sg_cu_run_collective (st, plan, ins, error))
        goto fail;
      SG_CU_CHECK (mark (st, st->coll_end[c], s), error, fail);
      break;
    }
    case SG_INS_RECORD:
      SG_CU_CHECK (cudaEventRecord (st->events[ins->event], s), error, fail);
      break;
    case SG_INS_WAIT_EVENT:
      if (ins->stream == 0 && in_run) {
        SG_CU_CHECK (mark (st, st->run_ev[2 * run + 1], s), error, fail);
        in_run = false;
        run++;
      }
      if (st->reached[i])
        SG_CU_CHECK (mark (st, st->reached[i], s), error, fail);
      SG_CU_CHECK (cudaStreamWaitEvent (s, st->events[ins->event], 0), error, fail);
      break;
    case SG_INS_FREE:
      if (exact) { /* poison: a later read of freed memory shows as NaN */
        const SgPlanBuffer *b = &plan->buffers[ins->buffer];
        SG_CU_CHECK (cudaMemsetAsync (st->arena + b->offset, 0xff, b->bytes, s), error, fail);
      }
      break;
    }
  }
  if (in_run) {
    SG_CU_CHECK (mark (st, st->run_ev[2 * run + 1], st->streams[0]), error, fail);
    run++;
  }
  for (int32_t s = 1; s < st->n_streams; s++) {
    SG_CU_CHECK (cudaEventRecord (st->join[s], st->streams[s]), error, fail);
    SG_CU_CHECK (cudaStreamWaitEvent (st->streams[0], st->join[s], 0), error, fail);
  }
  SG_CU_CHECK (mark (st, st->step_end, st->streams[0]), error, fail);
  return true;
fail:
  if (i < plan->n_ins)
    g_prefix_error (error, "rank %d, instruction %d: ", ctx->rank, i);
  return false;
}

/* Captures issue_step into @exec. Host work only: the GPUs run nothing
 * until cudaGraphLaunch. */
static bool
capture_step (SgRtContext *ctx, SgCuState *st, cudaGraphExec_t *exec, GError **error)
{
  cudaGraph_t graph = NULL;
  SG_CU_CHECK (cudaStreamBeginCapture (st->streams[0], cudaStreamCaptureModeThreadLocal), error,
               fail);
  st->capturing = true;
  const bool ok = issue_step (ctx, st, error);
  const cudaError_t e = cudaStreamEndCapture (st->streams[0], &graph);
  st->capturing = false;
  if (!ok)
    goto fail;
  SG_CU_CHECK (e, error, fail);
  SG_CU_CHECK (cudaGraphInstantiate (exec, graph, 0), error, fail);
  SG_CU_CHECK (cudaGraphUpload (*exec, st->streams[0]), error, fail);
  SG_CU_CHECK (cudaStreamSynchronize (st->streams[0]), error, fail);
  cudaGraphDestroy (graph);
  return true;
fail:
  if (graph)
    cudaGraphDestroy (graph);
  (void)cudaGetLastError ();
  g_prefix_error (error, "capturing the step into a CUDA graph (--launch graph): ");
  return false;
}

/* The step's timeline (--trace), us from step_start: runs of kernels on
 * stream 0 (at their first kernel), collectives, and each reached wait up
 * to the start of the run after it (the time stream 0 stood still). */
static void
fill_spans (const SgCuState *st, const SgPlan *plan, SgRtStepTimes *out)
{
  for (int32_t r = 0; r < st->n_runs; r++) {
    out->span_start[st->run_first[r]] = elapsed_us (st->step_start, st->run_ev[2 * r]);
    out->span_end[st->run_first[r]] = elapsed_us (st->step_start, st->run_ev[2 * r + 1]);
  }
  for (int32_t k = 0; k < plan->n_ins; k++) {
    const int32_t c = st->coll_ordinal[k];
    if (c >= 0) {
      out->span_start[k] = elapsed_us (st->step_start, st->coll_start[c]);
      out->span_end[k] = elapsed_us (st->step_start, st->coll_end[c]);
    } else if (st->reached[k]) {
      const int32_t r = st->wait_run[k];
      out->span_start[k] = elapsed_us (st->step_start, st->reached[k]);
      out->span_end[k] = elapsed_us (st->step_start, r < st->n_runs ? st->run_ev[2 * r]
                                                                   : st->step_end);
    }
  }
}

/* Step 0 runs eagerly (NCCL connects its channels, cuBLAS and CUDA's lazy
 * module loading settle); step 1 is captured, then every step replays. */
static bool
replays (const SgCuState *st)
{
  return st->graph && st->n_steps >= 1;
}

/* Runs the step once, with every measurement event or (st->bare) with only
 * its start and end: the GPUs start together, then wait for its end. */
static bool
launch_once (SgRtContext *ctx, SgCuState *st, GError **error)
{
  char what[160];
  const bool replay = replays (st);
  cudaGraphExec_t *exec = st->bare ? &st->exec_bare : &st->exec;
  const double budget = step_budget (ctx->opt.timeout_s);
  if (replay && !*exec) {
    sg_cu_watchdog_arm (st->watchdog, budget, "capturing the step");
    if (!capture_step (ctx, st, exec, error))
      return false;
    sg_cu_watchdog_disarm (st->watchdog);
  }
  /* Start together: a rank that starts late would show as exposed time on
   * its peers. */
  SG_CU_CHECK (cudaDeviceSynchronize (), error, fail);
  if (MPI_Barrier (ctx->world_comm) != MPI_SUCCESS) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MPI, "MPI_Barrier before the step failed");
    return false;
  }
  sg_cu_watchdog_arm (st->watchdog, budget, "the step");
  if (replay)
    SG_CU_CHECK (cudaGraphLaunch (*exec, st->streams[0]), error, fail);
  else if (!issue_step (ctx, st, error))
    return false;
  g_snprintf (what, sizeof what, "the step on rank %d", ctx->rank);
  if (!sg_cu_wait_event (st, st->step_end, budget, what, error))
    return false;
  sg_cu_watchdog_disarm (st->watchdog);
  return true;
fail:
  g_prefix_error (error, "rank %d: ", ctx->rank);
  return false;
}

static bool
run_step (SgRtContext *ctx, SgRtStepTimes *out, GError **error)
{
  SgCuState *st = state (ctx);
  const SgPlan *plan = ctx->plan;

  /* Timing mode: the step first without measurement events (their event
   * nodes cost the streams microseconds each), for step_us; then with
   * them, for the breakdown. */
  if (ctx->opt.mode == SG_RT_MODE_TIMING) {
    st->bare = true;
    const bool ok = launch_once (ctx, st, error);
    st->bare = false;
    if (!ok)
      return false;
    out->bare_step_us = elapsed_us (st->step_start, st->step_end);
  }
  if (!launch_once (ctx, st, error))
    return false;
  out->graph_launch = replays (st);

  const int32_t measured = st->n_steps++ - ctx->opt.warmup;
  if (st->kev && measured >= 0 && measured < ctx->opt.iters)
    for (int32_t k = 0; k < plan->n_ins; k++)
      if (plan->ins[k].kind == SG_INS_KERNEL)
        st->ksamples[(size_t)measured * plan->n_ins + k] =
          elapsed_us (st->kev[2 * k], st->kev[2 * k + 1]);
  out->step_us = elapsed_us (st->step_start, st->step_end);
  out->compute_us = 0;
  out->n_busy = 0;
  for (int32_t r = 0; r < st->n_runs; r++) {
    out->compute_us += elapsed_us (st->run_ev[2 * r], st->run_ev[2 * r + 1]);
    out->busy_start[out->n_busy] = elapsed_us (st->step_start, st->run_ev[2 * r]);
    out->busy_end[out->n_busy++] = elapsed_us (st->step_start, st->run_ev[2 * r + 1]);
  }
  for (int32_t c = 0; c < out->n_coll; c++) {
    out->measured_us[c] = elapsed_us (st->coll_start[c], st->coll_end[c]);
    out->launch_us[c] = elapsed_us (st->step_start, st->coll_start[c]);
    out->end_us[c] = elapsed_us (st->step_start, st->coll_end[c]);
    out->exposed_us[c] = 0;
  }
  for (int32_t k = 0; k < plan->n_ins; k++) {
    const SgPlanIns *ins = &plan->ins[k];
    if (!st->reached[k] || ins->coll < 0)
      continue;
    const int32_t c = st->coll_ordinal[ins->coll];
    if (c < 0 || c >= out->n_coll)
      continue;
    const double e = elapsed_us (st->reached[k], st->coll_end[c]);
    out->exposed_us[c] += e > 0 ? e : 0;
  }
  if (out->span_start)
    fill_spans (st, plan, out);
  return true;
}

static bool
cuda_run_step (SgRtContext *ctx, SgRtStepTimes *out, GError **error)
{
  SgCuState *st = state (ctx);
  if (run_step (ctx, out, error))
    return true;
  /* A call the watchdog's abort broke (CUDA or cuBLAS errors follow an
   * aborted communicator): the watchdog ends the job with its message. */
  if (sg_cu_watchdog_fired (st->watchdog)) {
    g_printerr ("schedrun: rank %d: after the watchdog's abort: %s\n", ctx->rank,
                (*error)->message);
    for (;;)
      g_usleep (G_USEC_PER_SEC);
  }
  return false;
}

static bool
cuda_read_value (SgRtContext *ctx, int32_t value, void *host, GError **error)
{
  SgCuState *st = state (ctx);
  const SgPlan *plan = ctx->plan;
  g_return_val_if_fail (value >= 0 && value < plan->n_values, false);
  SgCuTensor t;
  sg_cu_value_tensor (st, plan, value, &t);
  const uint64_t bytes = (uint64_t)sg_cu_numel (&t) * sg_dtype_size ((SgDtype)t.dtype);
  if (!t.ptr || bytes == 0)
    return true;
  void *tmp = NULL;
  SG_CU_CHECK (cudaDeviceSynchronize (), error, fail);
  if (sg_cu_is_contiguous (&t)) {
    SG_CU_CHECK (cudaMemcpy (host, t.ptr, bytes, cudaMemcpyDeviceToHost), error, fail);
    return true;
  }
  SG_CU_CHECK (cudaMalloc (&tmp, bytes), error, fail);
  SgCuTensor d = t;
  d.ptr = tmp;
  int64_t s = 1;
  for (int k = t.ndim - 1; k >= 0; k--) {
    d.stride[k] = s;
    s *= t.shape[k];
  }
  SG_CU_CHECK (sg_cu_copy_range (&d, 0, &t, 0, sg_cu_numel (&t), st->streams[0]), error, fail);
  SG_CU_CHECK (cudaStreamSynchronize (st->streams[0]), error, fail);
  SG_CU_CHECK (cudaMemcpy (host, tmp, bytes, cudaMemcpyDeviceToHost), error, fail);
  cudaFree (tmp);
  return true;
fail:
  if (tmp)
    cudaFree (tmp);
  g_prefix_error (error, "reading value %s on rank %d: ", plan->values[value].name, ctx->rank);
  return false;
}

static void
destroy_events (cudaEvent_t *ev, int32_t n)
{
  for (int32_t i = 0; ev && i < n; i++)
    if (ev[i])
      cudaEventDestroy (ev[i]);
  g_free (ev);
}

static int
cmp_double (const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Rank 0: one line per KERNEL instruction, the median over the measured
 * iterations (tab-separated: index, node, op, target, us). */
static void
write_kernel_times (SgRtContext *ctx, SgCuState *st)
{
  const SgPlan *plan = ctx->plan;
  const int32_t n = MIN (st->n_steps - ctx->opt.warmup, ctx->opt.iters);
  if (ctx->rank != 0 || n <= 0)
    return;
  GString *out = g_string_new ("index\tnode\top\ttarget\tmedian_us\n");
  double *v = g_new (double, n);
  for (int32_t i = 0; i < plan->n_ins; i++) {
    const SgPlanIns *ins = &plan->ins[i];
    if (ins->kind != SG_INS_KERNEL)
      continue;
    for (int32_t k = 0; k < n; k++)
      v[k] = st->ksamples[(size_t)k * plan->n_ins + i];
    qsort (v, (size_t)n, sizeof *v, cmp_double);
    g_string_append_printf (out, "%d\t%s\t%s\t%s\t%.3f\n", i, ins->name ? ins->name : "",
                            sg_op_name (ins->op), ins->target ? ins->target : "",
                            n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
  }
  if (!g_file_set_contents (st->ktimes_path, out->str, -1, NULL))
    g_printerr ("schedrun: cannot write %s\n", st->ktimes_path);
  g_free (v);
  g_string_free (out, TRUE);
}

static void
cuda_teardown (SgRtContext *ctx)
{
  SgCuState *st = state (ctx);
  if (!st)
    return;
  const SgPlan *plan = ctx->plan;
  if (st->kev)
    write_kernel_times (ctx, st);
  destroy_events (st->kev, 2 * plan->n_ins);
  g_free (st->ksamples);
  g_free (st->ktimes_path);
  int32_t n_coll = 0;
  for (int32_t i = 0; st->coll_ordinal && i < plan->n_ins; i++)
    n_coll += st->coll_ordinal[i] >= 0;
  cudaDeviceSynchronize ();
  if (st->exec)
    cudaGraphExecDestroy (st->exec);
  if (st->exec_bare)
    cudaGraphExecDestroy (st->exec_bare);
  sg_cu_comms_destroy (st, false);
  sg_cu_p2p_destroy (st);
  g_free (st->group_rank);
  if (st->cublas)
    cublasDestroy (st->cublas);
  if (st->lt)
    cublasLtDestroy (st->lt);
  sg_cu_dnn_free (st->dnn);
  g_free (st->attn_plan);
  free (st->attn_why);
  destroy_events (st->events, st->n_events);
  destroy_events (st->coll_start, n_coll);
  destroy_events (st->coll_end, n_coll);
  destroy_events (st->reached, plan->n_ins);
  destroy_events (st->run_ev, st->n_run_ev);
  destroy_events (st->join, st->n_streams);
  if (st->step_start)
    cudaEventDestroy (st->step_start);
  if (st->step_end)
    cudaEventDestroy (st->step_end);
  for (int32_t s = 0; st->streams && s < st->n_streams; s++)
    if (st->streams[s])
      cudaStreamDestroy (st->streams[s]);
  g_free (st->streams);
  for (int32_t i = 0; st->input_host && i < plan->n_inputs; i++)
    if (st->input_host[i])
      cudaFreeHost (st->input_host[i]);
  g_free (st->input_host);
  if (st->base)
    cudaFree (st->base);
  g_free (st->scratch);
  g_free (st->scratch_bytes);
  g_free (st->coll_ordinal);
  g_free (st->run_first);
  g_free (st->wait_run);
  sg_cu_watchdog_stop (st->watchdog);
  g_free (st);
  ctx->priv = NULL;
}

char *
sg_rt_cuda_describe (void)
{
  int64_t ver = 0;
  char *why = NULL;
  char *out;
  if (sg_cu_dnn_load (&ver, &why))
    out = g_strdup_printf ("CUDA %d.%d, cuBLAS GEMMs, attention on %s; libcudnn.so.9 here: "
                           "%d.%d.%d", CUDART_VERSION / 1000, CUDART_VERSION / 10 % 100,
                           sg_cu_dnn_built (), (int)(ver / 10000), (int)(ver / 100 % 100),
                           (int)(ver % 100));
  else if (sg_cu_dnn_built ())
    out = g_strdup_printf ("CUDA %d.%d, cuBLAS GEMMs, attention on %s where libcudnn.so.9 "
                           "loads, here the math path on cuBLAS (%s)", CUDART_VERSION / 1000,
                           CUDART_VERSION / 10 % 100, sg_cu_dnn_built (), why ? why : "?");
  else
    out = g_strdup_printf ("CUDA %d.%d, cuBLAS GEMMs, attention: math path on cuBLAS (%s)",
                           CUDART_VERSION / 1000, CUDART_VERSION / 10 % 100, why ? why : "?");
  free (why);
  return out;
}

const SgBackend sg_rt_cuda_backend = {
  .name = "cuda",
  .check_plan = cuda_check_plan,
  .setup = cuda_setup,
  .load_inputs = cuda_load_inputs,
  .run_step = cuda_run_step,
  .read_value = cuda_read_value,
  .teardown = cuda_teardown,
};
