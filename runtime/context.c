/* context.c: the per-rank context of a run: option and plan agreement over MPI, one
 * communicator per group instance, backend lookup, verdict agreement,
 * timing records.
 *
 * Agreement comes first: the run options (sg_rt_agree_options), then the
 * plan. Mirrors torch.distributed's new_subgroups_by_enumeration
 * (MPI_Comm_split with the partition row as colour) and NCCL's rule that
 * every rank must agree before a collective starts. Also the test hooks
 * and the position for --timeout, both recorded before each instruction
 * (sg_rt_ins_hook).
 * Requires: MPI initialised. Invalidates: nothing.
 */
#include <inttypes.h>
#include <signal.h>
#include <string.h>

#include "runtime-private.h"
#include "runtime.h"

G_DEFINE_QUARK (sg-rt-error-quark, sg_rt_error)

void
sg_rt_options_init (SgRtOptions *opt)
{
  memset (opt, 0, sizeof *opt);
  opt->mode = SG_RT_MODE_EXACT;
  opt->iters = 1;
  opt->warmup = 0;
  opt->seed = 0;
  opt->fail_at_ins = -1;
  opt->fail_rank = 1;
  opt->timeout_s = 0;
  opt->backend = "cpu";
  opt->dump_rank = 0;
}

const SgBackend *
sg_rt_backend_lookup (const char *name, GError **error)
{
  if (name == NULL || strcmp (name, "cpu") == 0)
    return &sg_rt_cpu_backend;
  if (strcmp (name, "cuda") == 0) {
#ifdef SG_HAVE_CUDA
    return &sg_rt_cuda_backend;
#else
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                 "backend 'cuda' is not built in (this build found no CUDA; use --backend cpu)");
    return NULL;
#endif
  }
  g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
               "unknown backend '%s' (known: cpu, cuda)", name);
  return NULL;
}

/* --- options every rank must share ------------------------------------------ */

typedef enum {
  AGREED_ARGS, AGREED_BACKEND, AGREED_MODE, AGREED_LAUNCH, AGREED_ITERS, AGREED_WARMUP,
  AGREED_SEED, AGREED_TIMEOUT, AGREED_REPORT, AGREED_TRACE, AGREED_DUMP, AGREED_DUMP_RANK,
  AGREED_FAIL_AT, AGREED_FAIL_RANK, AGREED_FAIL_HANG, AGREED_FAIL_KILL, N_AGREED
} Agreed;

/* The option's flag; kind 'b': given or not, 'i': an integer, 'u': unsigned,
 * 'd': a double's bits, 'e': an enumeration with the names below. */
static const struct {
  const char *flag;
  char kind;
} agreed[N_AGREED] = {
  [AGREED_ARGS] = { "", 'b' },          [AGREED_BACKEND] = { "--backend", 'e' },
  [AGREED_MODE] = { "--mode", 'e' },    [AGREED_LAUNCH] = { "--launch", 'e' },
  [AGREED_ITERS] = { "--iters", 'i' },  [AGREED_WARMUP] = { "--warmup", 'i' },
  [AGREED_SEED] = { "--seed", 'u' },    [AGREED_TIMEOUT] = { "--timeout", 'd' },
  [AGREED_REPORT] = { "--report", 'b' }, [AGREED_TRACE] = { "--trace", 'b' },
  [AGREED_DUMP] = { "--dump-outputs", 'b' }, [AGREED_DUMP_RANK] = { "--dump-rank", 'i' },
  [AGREED_FAIL_AT] = { "--fail-at-ins", 'i' }, [AGREED_FAIL_RANK] = { "--fail-rank", 'i' },
  [AGREED_FAIL_HANG] = { "--fail-hang", 'b' }, [AGREED_FAIL_KILL] = { "--fail-kill", 'b' },
};

static const char *
enum_name (Agreed a, int64_t v)
{
  static const char *const backends[] = { "cpu", "cuda", "another backend" };
  static const char *const modes[] = { "exact", "timing" };
  static const char *const launches[] = { "eager", "graph" };
  if (a == AGREED_BACKEND)
    return backends[CLAMP (v, 0, 2)];
  if (a == AGREED_MODE)
    return modes[v == SG_RT_MODE_TIMING];
  return launches[v == SG_RT_LAUNCH_GRAPH];
}

static char *
agreed_text (Agreed a, int64_t v)
{
  double d;
  switch (agreed[a].kind) {
  case 'e': return g_strdup_printf ("with %s %s", agreed[a].flag, enum_name (a, v));
  case 'i': return g_strdup_printf ("with %s %" PRId64, agreed[a].flag, v);
  case 'u': return g_strdup_printf ("with %s %" PRIu64, agreed[a].flag, (uint64_t)v);
  case 'd':
    memcpy (&d, &v, sizeof d);
    return d > 0 ? g_strdup_printf ("with %s %g", agreed[a].flag, d)
                 : g_strdup_printf ("without %s", agreed[a].flag);
  default: return g_strdup_printf ("%s %s", v ? "with" : "without", agreed[a].flag);
  }
}

bool
sg_rt_agree_options (const SgRtOptions *opt, const GError *args_error, GError **error)
{
  const bool args_ok = args_error == NULL;
  int rank = 0, world = 1;
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &world);
  int64_t mine[N_AGREED] = { 0 };
  mine[AGREED_ARGS] = args_ok;
  if (args_ok) {
    const char *b = opt->backend ? opt->backend : "cpu";
    mine[AGREED_BACKEND] = strcmp (b, "cpu") == 0 ? 0 : strcmp (b, "cuda") == 0 ? 1 : 2;
    mine[AGREED_MODE] = opt->mode;
    mine[AGREED_LAUNCH] = opt->launch;
    mine[AGREED_ITERS] = opt->iters;
    mine[AGREED_WARMUP] = opt->warmup;
    mine[AGREED_SEED] = (int64_t)opt->seed;
    memcpy (&mine[AGREED_TIMEOUT], &opt->timeout_s, sizeof (double));
    mine[AGREED_REPORT] = opt->report != NULL;
    mine[AGREED_TRACE] = opt->trace != NULL;
    mine[AGREED_DUMP] = opt->dump_dir != NULL;
    mine[AGREED_DUMP_RANK] = opt->dump_rank;
    mine[AGREED_FAIL_AT] = opt->fail_at_ins;
    mine[AGREED_FAIL_RANK] = opt->fail_rank;
    mine[AGREED_FAIL_HANG] = opt->fail_hang;
    mine[AGREED_FAIL_KILL] = opt->fail_kill;
  }
  int64_t *all = g_new (int64_t, (size_t)N_AGREED * (size_t)world);
  MPI_OR_ABORT (MPI_Allgather (mine, N_AGREED, MPI_INT64_T, all, N_AGREED, MPI_INT64_T,
                               MPI_COMM_WORLD));
  bool ok = args_ok;
  if (!args_ok) /* this rank's own reason */
    g_set_error_literal (error, SG_RT_ERROR, SG_RT_ERROR_ARGS, args_error->message);
  for (int r = 0; r < world && ok; r++) {
    const int64_t *e = all + (size_t)N_AGREED * (size_t)r;
    if (!e[AGREED_ARGS]) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS,
                   "rank %d could not parse its options; no rank runs", r);
      ok = false;
      break;
    }
    for (int a = AGREED_ARGS + 1; a < N_AGREED && ok; a++)
      if (e[a] != all[a]) {
        g_autofree char *theirs = agreed_text ((Agreed)a, e[a]);
        g_autofree char *first = agreed_text ((Agreed)a, all[a]);
        g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS,
                     "rank %d was started %s, rank 0 %s: every rank must be given the same "
                     "options; no rank runs", r, theirs, first);
        ok = false;
      }
  }
  g_free (all);
  return ok;
}

volatile sig_atomic_t sg_rt_at_ins = -1;

bool
sg_rt_ins_hook (const SgRtContext *ctx, int32_t i, GError **error)
{
  sg_rt_at_ins = i;
  const SgRtOptions *o = &ctx->opt;
  if (i != o->fail_at_ins || ctx->rank != o->fail_rank)
    return true;
  if (o->fail_kill)
    raise (SIGKILL); /* no message, no cleanup: as the OOM killer does it */
  if (o->fail_hang)
    for (;;)
      g_usleep (G_USEC_PER_SEC); /* a hung rank: only --timeout or a kill ends it */
  const SgPlanIns *ins = &ctx->plan->ins[i];
  g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_INJECTED,
               "injected failure at instruction %d (%s) (--fail-at-ins)", i,
               ins->name ? ins->name : "-");
  return false;
}

bool
sg_rt_agree_plan (const SgPlan *plan, const GError *load_error, GError **error)
{
  int rank = 0, world = 1;
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &world);
  /* loaded flag, hash, format version, plan world size */
  uint64_t mine[4] = { plan != NULL, plan ? plan->hash : 0, SG_PLAN_VERSION,
                       plan ? (uint64_t)plan->world_size : 0 };
  uint64_t *all = g_new (uint64_t, 4 * (size_t)world);
  MPI_OR_ABORT (MPI_Allgather (mine, 4, MPI_UINT64_T, all, 4, MPI_UINT64_T, MPI_COMM_WORLD));
  bool ok = true;
  if (plan == NULL) { /* this rank's own reason first */
    g_set_error_literal (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                         load_error ? load_error->message : "could not load the plan");
    ok = false;
  }
  for (int r = 0; r < world && ok; r++) {
    const uint64_t *e = all + 4 * r;
    if (!e[0]) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                   "rank %d could not load the plan; no rank runs", r);
      ok = false;
    } else if (e[2] != all[2]) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                   "rank %d reads plan format version %" PRIu64 ", rank 0 version %" PRIu64, r,
                   e[2], all[2]);
      ok = false;
    } else if (e[1] != all[1]) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                   "rank %d loaded plan hash %016" PRIx64 ", rank 0 loaded %016" PRIx64
                   ": every rank must run the same plan", r, e[1], all[1]);
      ok = false;
    } else if (e[3] != (uint64_t)world) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                   "the plan is for world size %" PRIu64 " but mpirun started %d ranks", e[3],
                   world);
      ok = false;
    }
  }
  g_free (all);
  return ok;
}

bool
sg_rt_context_init (SgRtContext *ctx, const SgPlan *plan, const SgRtOptions *opt, GError **error)
{
  memset (ctx, 0, sizeof *ctx);
  ctx->plan = plan;
  ctx->opt = *opt;
  ctx->world_comm = MPI_COMM_NULL;
  if (!sg_rt_agree_plan (plan, NULL, error))
    return false;
  MPI_OR_ABORT (MPI_Comm_dup (MPI_COMM_WORLD, &ctx->world_comm));
  MPI_Comm_rank (ctx->world_comm, &ctx->rank);
  MPI_Comm_size (ctx->world_comm, &ctx->world);
  ctx->group_comms = g_new (MPI_Comm, MAX (plan->n_groups, 1));
  ctx->group_rank = g_new0 (int32_t, MAX (plan->n_groups, 1));
  for (int32_t g = 0; g < plan->n_groups; g++) {
    const SgPlanGroup *grp = &plan->groups[g];
    int color = -1, key = 0;
    for (int32_t i = 0; i < grp->n_instances && color < 0; i++)
      for (int32_t j = 0; j < grp->n_ranks; j++)
        if (grp->partition[i * grp->n_ranks + j] == ctx->rank) {
          color = i, key = j;
          break;
        }
    /* The loader checked that the partition covers every rank; a rank
     * outside it still joins the split (MPI_UNDEFINED) so nobody hangs. */
    MPI_OR_ABORT (MPI_Comm_split (ctx->world_comm, color < 0 ? MPI_UNDEFINED : color, key,
                                  &ctx->group_comms[g]));
    ctx->group_rank[g] = key;
    if (!sg_rt_all_ok (ctx, color >= 0)) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                   "group '%s': some rank is in no instance of its partition", grp->name);
      for (int32_t h = 0; h <= g; h++)
        if (ctx->group_comms[h] != MPI_COMM_NULL)
          MPI_Comm_free (&ctx->group_comms[h]);
      g_clear_pointer (&ctx->group_comms, g_free);
      return false;
    }
  }
  return true;
}

void
sg_rt_context_clear (SgRtContext *ctx)
{
  if (ctx->group_comms != NULL && ctx->plan != NULL)
    for (int32_t g = 0; g < ctx->plan->n_groups; g++)
      if (ctx->group_comms[g] != MPI_COMM_NULL)
        MPI_Comm_free (&ctx->group_comms[g]);
  g_clear_pointer (&ctx->group_comms, g_free);
  g_clear_pointer (&ctx->group_rank, g_free);
  g_clear_pointer (&ctx->info, g_free);
  if (ctx->world_comm != MPI_COMM_NULL)
    MPI_Comm_free (&ctx->world_comm);
}

bool
sg_rt_all_ok (SgRtContext *ctx, bool ok)
{
  int mine = ok ? 1 : 0, all = 0;
  MPI_OR_ABORT (MPI_Allreduce (&mine, &all, 1, MPI_INT, MPI_LAND,
                               ctx->world_comm != MPI_COMM_NULL ? ctx->world_comm
                                                                : MPI_COMM_WORLD));
  return all != 0;
}

void
sg_rt_step_times_init (SgRtStepTimes *t, const SgPlan *plan, bool spans)
{
  memset (t, 0, sizeof *t);
  if (spans) {
    t->span_start = g_new (double, MAX (plan->n_ins, 1));
    t->span_end = g_new (double, MAX (plan->n_ins, 1));
    for (int32_t i = 0; i < plan->n_ins; i++)
      t->span_start[i] = t->span_end[i] = -1;
  }
  for (int32_t i = 0; i < plan->n_ins; i++)
    t->n_coll += plan->ins[i].kind == SG_INS_COLLECTIVE;
  t->coll_ins = g_new0 (int32_t, MAX (t->n_coll, 1));
  t->measured_us = g_new0 (double, MAX (t->n_coll, 1));
  t->exposed_us = g_new0 (double, MAX (t->n_coll, 1));
  t->launch_us = g_new0 (double, MAX (t->n_coll, 1));
  t->end_us = g_new0 (double, MAX (t->n_coll, 1));
  t->busy_start = g_new0 (double, MAX (plan->n_ins, 1));
  t->busy_end = g_new0 (double, MAX (plan->n_ins, 1));
  int32_t c = 0;
  for (int32_t i = 0; i < plan->n_ins; i++)
    if (plan->ins[i].kind == SG_INS_COLLECTIVE)
      t->coll_ins[c++] = i;
}

void
sg_rt_step_times_clear (SgRtStepTimes *t)
{
  g_free (t->coll_ins);
  g_free (t->measured_us);
  g_free (t->exposed_us);
  g_free (t->launch_us);
  g_free (t->end_us);
  g_free (t->busy_start);
  g_free (t->busy_end);
  g_free (t->span_start);
  g_free (t->span_end);
  memset (t, 0, sizeof *t);
}
