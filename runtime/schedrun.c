/* schedrun.c: `mpirun -np N schedrun plan.json [options]`: executes a plan
 * on every rank with a backend, checks agreement first, reports.
 *
 * Order of business, identical on every rank so no rank ever waits for one
 * that has given up: parse the options and agree on them over MPI (ranks
 * started with different options would wait for each other forever);
 * check that every output can be written; load the plan; agree over MPI on
 * (loaded, hash, version, world size); pick the backend; check_plan (every
 * op runnable, naming the node) and agree on the verdict; setup; warm-up
 * and measured iterations; checksums, dumps and the report. A failure
 * before the run ends every rank with exit 1 (2 for options) and a
 * message; a failure during a step ends the job with MPI_Abort and the
 * message (no hang); a failure while writing removes what was written.
 * Mirrors torchrun's "fail fast, fail everywhere" and NCCL's abort on
 * async errors.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime-private.h"
#include "runtime.h"


/* Written by the SIGALRM handler: built before the alarm is set, since only
 * async-signal-safe calls may run there. */
static char alarm_msg[96];
static const char alarm_tail[] = "; ending this rank (exit 3, the job ends with it)\n";

static void
on_alarm (int sig)
{
  (void)sig;
  char tail[64] = " outside a step", *p = tail + sizeof tail;
  int32_t at = (int32_t)sg_rt_at_ins;
  if (at >= 0) { /* digits by hand: snprintf is not async-signal-safe */
    *--p = '\0';
    do
      *--p = (char)('0' + at % 10);
    while ((at /= 10) > 0 && p > tail + 17);
    p -= 16;
    memcpy (p, " at instruction ", 16);
  } else {
    p = tail;
  }
  /* One write of the whole line: the ranks of a job share the terminal or
   * pipe, and a line in pieces came out mixed with another rank's (one
   * write of at most PIPE_BUF bytes to a pipe is not split). */
  char line[512];
  size_t n = 0;
  const char *parts[] = { alarm_msg, p, alarm_tail };
  for (size_t i = 0; i < G_N_ELEMENTS (parts); i++) {
    size_t k = MIN (strlen (parts[i]), sizeof line - n);
    memcpy (line + n, parts[i], k);
    n += k;
  }
  ssize_t w = write (STDERR_FILENO, line, n);
  (void)w;
  _exit (SG_RT_EXIT_TIMEOUT);
}

typedef struct {
  char *backend, *mode, *launch, *report, *dump, *trace;
  int iters, warmup, fail_at, fail_rank, dump_rank;
  gboolean fail_hang, fail_kill, help, version;
  char *help_text;
  gint64 seed;
  double timeout;
} Args;

static const char help_description[] =
  "Measuring a profile (CUDA builds; docs/gpu.md):\n"
  "  mpirun -np N schedrun --profile GRAPH.json -o PROFILE.json [--iters K] [--warmup W]\n"
  "         [--timeout SEC]\n"
  "  --profile GRAPH.json   measure the graph's GEMM/attention/op shapes and collectives\n"
  "  -o PROFILE.json        the profile file (an existing one is a cache)\n"
  "\n"
  "Every rank must be started with the same options and the same plan; both are\n"
  "agreed over MPI before any work, and a difference stops every rank.\n"
  "\n"
  "Exit status: 0 success; 1 a plan, agreement, backend, output or run failure (every\n"
  "rank says why; nothing partial is left); 2 usage error, or ranks started with\n"
  "different options; 3 --timeout expired.\n";

static bool
parse_args (int *argc, char ***argv, Args *a, SgRtOptions *opt, char **plan_path, GError **error)
{
  a->iters = -1;
  a->warmup = -1;
  a->fail_at = -1;
  a->fail_rank = 1;
  GOptionEntry entries[] = {
    { "backend", 0, 0, G_OPTION_ARG_STRING, &a->backend, "cpu (default) or cuda", "NAME" },
    { "mode", 0, 0, G_OPTION_ARG_STRING, &a->mode, "exact (default) or timing", "MODE" },
    { "launch", 0, 0, G_OPTION_ARG_STRING, &a->launch,
      "graph (cuda default: step 1 captured into a CUDA graph, then replayed) or eager "
      "(the host issues every step; the only one for cpu)",
      "HOW" },
    { "iters", 0, 0, G_OPTION_ARG_INT, &a->iters,
      "measured iterations (default 1 exact, 10 timing)", "K" },
    { "warmup", 0, 0, G_OPTION_ARG_INT, &a->warmup,
      "unmeasured iterations first (default 0 exact, 2 timing)", "W" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &a->seed, "seed of the deterministic inputs", "S" },
    { "report", 0, 0, G_OPTION_ARG_FILENAME, &a->report, "write the report JSON (rank 0)",
      "FILE" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &a->trace,
      "write the measured timeline of the median step, every rank, as a Chrome trace (rank 0)",
      "FILE" },
    { "dump-outputs", 0, 0, G_OPTION_ARG_FILENAME, &a->dump,
      "write each output as DIR/<index>.bin and DIR/outputs.json", "DIR" },
    { "dump-rank", 0, 0, G_OPTION_ARG_INT, &a->dump_rank,
      "the rank whose outputs --dump-outputs writes (default 0)", "R" },
    { "timeout", 0, 0, G_OPTION_ARG_DOUBLE, &a->timeout,
      "end the job when a rank runs longer than this many seconds", "SEC" },
    { "version", 0, 0, G_OPTION_ARG_NONE, &a->version,
      "print the version and the kernel paths of the backends (cuDNN attention or math)", NULL },
    { "fail-at-ins", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &a->fail_at,
      "test hook: --fail-rank fails at this instruction", "N" },
    { "fail-hang", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &a->fail_hang,
      "test hook: the failing rank hangs instead of failing", NULL },
    { "fail-rank", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &a->fail_rank,
      "test hook: the rank that fails (default 1)", "R" },
    { "fail-kill", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &a->fail_kill,
      "test hook: the failing rank sends itself SIGKILL instead of failing", NULL },
    { "help", 'h', 0, G_OPTION_ARG_NONE, &a->help, "this text", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *oc = g_option_context_new ("PLAN.json - run a schedgraph plan under mpirun");
  g_option_context_set_help_enabled (oc, FALSE); /* answered after MPI_Finalize, below */
  g_option_context_set_description (oc, help_description);
  g_option_context_add_main_entries (oc, entries, NULL);
  bool ok = g_option_context_parse (oc, argc, argv, error);
  if (ok && a->help)
    a->help_text = g_option_context_get_help (oc, TRUE, NULL);
  g_option_context_free (oc);
  if (!ok || a->help || a->version)
    return ok;
  int world = 1;
  MPI_Comm_size (MPI_COMM_WORLD, &world);
  if (a->dump_rank < 0 || a->dump_rank >= world) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS, "--dump-rank %d is not a rank of %d",
                 a->dump_rank, world);
    return false;
  }
  if (*argc != 2) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS,
                 "expected exactly one plan file (got %d arguments); see --help", *argc - 1);
    return false;
  }
  *plan_path = (*argv)[1];
  opt->backend = a->backend ? a->backend : "cpu";
  if (a->mode == NULL || strcmp (a->mode, "exact") == 0) {
    opt->mode = SG_RT_MODE_EXACT;
  } else if (strcmp (a->mode, "timing") == 0) {
    opt->mode = SG_RT_MODE_TIMING;
  } else {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS, "--mode must be exact or timing, not '%s'",
                 a->mode);
    return false;
  }
  const bool cuda = strcmp (opt->backend, "cuda") == 0;
  if (a->launch == NULL) {
    opt->launch = cuda ? SG_RT_LAUNCH_GRAPH : SG_RT_LAUNCH_EAGER;
  } else if (strcmp (a->launch, "eager") == 0) {
    opt->launch = SG_RT_LAUNCH_EAGER;
  } else if (strcmp (a->launch, "graph") == 0 && cuda) {
    opt->launch = SG_RT_LAUNCH_GRAPH;
  } else {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS,
                 strcmp (a->launch, "graph") == 0
                   ? "--launch graph needs --backend cuda (the %s backend issues eagerly)"
                   : "--launch must be graph or eager, not '%s'",
                 strcmp (a->launch, "graph") == 0 ? opt->backend : a->launch);
    return false;
  }
  bool timing = opt->mode == SG_RT_MODE_TIMING;
  opt->iters = a->iters >= 0 ? a->iters : timing ? 10 : 1;
  opt->warmup = a->warmup >= 0 ? a->warmup : timing ? 2 : 0;
  if (opt->iters < 1 || opt->iters > 100000 || opt->warmup > 100000) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS, "--iters must be in 1..100000");
    return false;
  }
  if (a->seed < 0) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS, "--seed must be >= 0");
    return false;
  }
  if (a->timeout < 0) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_ARGS, "--timeout must be >= 0");
    return false;
  }
  opt->seed = (uint64_t)a->seed;
  opt->fail_at_ins = a->fail_at;
  opt->fail_rank = a->fail_rank;
  opt->fail_hang = a->fail_hang;
  opt->fail_kill = a->fail_kill;
  opt->timeout_s = a->timeout;
  opt->dump_rank = a->dump_rank;
  opt->timeline = a->trace != NULL;
  opt->report = a->report;
  opt->trace = a->trace;
  opt->dump_dir = a->dump;
  g_autofree char *clash = sg_rt_outputs_clash (opt, *plan_path);
  if (clash) {
    g_set_error_literal (error, SG_RT_ERROR, SG_RT_ERROR_ARGS, clash);
    return false;
  }
  return true;
}

/* Writes @doc to @path (atomically: g_file_set_contents). */
static bool
write_json (const char *path, const cJSON *doc, bool pretty, GError **error)
{
  char *text = pretty ? cJSON_Print (doc) : cJSON_PrintUnformatted (doc);
  GError *e = NULL;
  const bool ok = g_file_set_contents (path, text, (gssize)strlen (text), &e);
  if (!ok) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "cannot write %s: %s", path, e->message);
    g_error_free (e);
  }
  cJSON_free (text);
  return ok;
}

/* Ends every rank the same way: message, MPI_Finalize, exit code. */
static int
finish (int rank, GError *error, int code)
{
  if (error != NULL) {
    fprintf (stderr, "schedrun: rank %d: %s\n", rank, error->message);
    g_error_free (error);
  }
  MPI_Finalize ();
  return code;
}

static void
args_clear (Args *a)
{
  g_free (a->backend);
  g_free (a->mode);
  g_free (a->launch);
  g_free (a->report);
  g_free (a->dump);
  g_free (a->trace);
  g_free (a->help_text);
}

/* --profile without CUDA: the same answer as --backend cuda there. */
static bool
profile_unavailable (int argc, char **argv)
{
#ifdef SG_HAVE_CUDA
  (void)argc, (void)argv;
  return false;
#else
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--profile") == 0 || g_str_has_prefix (argv[i], "--profile="))
      return true;
  return false;
#endif
}

/* --version: this build and its backends. */
static void
print_version (void)
{
  printf ("schedrun %s\nbackend cpu: reference kernels in C\n", SG_VERSION);
#ifdef SG_HAVE_CUDA
  char *cuda = sg_rt_cuda_describe ();
  printf ("backend cuda: %s\n", cuda);
  g_free (cuda);
#else
  printf ("backend cuda: not built (no CUDA toolkit at configure time)\n");
#endif
}

/* Options parsed and agreed on every rank, outputs writable, the alarm
 * armed: -1 to go on, else the exit status (after MPI_Finalize). */
static int
start (int *argc, char ***argv, int rank, Args *a, SgRtOptions *opt, char **plan_path)
{
  GError *error = NULL, *args_error = NULL;
  if (!parse_args (argc, argv, a, opt, plan_path, &args_error))
    ; /* agreed below: every rank learns that one could not parse */
  else if (a->help || a->version) {
    if (rank == 0 && a->help)
      fputs (a->help_text, stdout);
    else if (rank == 0)
      print_version ();
    return finish (rank, NULL, 0);
  }
  if (!sg_rt_agree_options (opt, args_error, &error)) {
    g_clear_error (&args_error);
    return finish (rank, error, 2);
  }
  if (opt->timeout_s > 0) {
    g_snprintf (alarm_msg, sizeof alarm_msg,
                "schedrun: rank %d: --timeout %g s expired before the run finished,", rank,
                opt->timeout_s);
    signal (SIGALRM, on_alarm);
    alarm ((unsigned)(opt->timeout_s + 0.999));
  }
  /* Before the plan is even read: an output nobody can write is found
   * now, not after the run. */
  bool ok = sg_rt_outputs_writable (opt, rank, &error);
  int all = 0, mine = ok;
  MPI_OR_ABORT (MPI_Allreduce (&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
  if (!all) {
    if (ok)
      g_set_error (&error, SG_RT_ERROR, SG_RT_ERROR_IO,
                   "another rank cannot write its outputs; no rank runs");
    return finish (rank, error, 1);
  }
  return -1;
}

/* The one line of results on rank 0's stdout: measured beside predicted. */
static void
print_summary (const SgBackend *be, const SgRtContext *ctx, const char *clock,
               const cJSON *report)
{
  const cJSON *m = cJSON_GetObjectItem (report, "measured");
  const cJSON *p = cJSON_GetObjectItem (report, "predicted");
#define NUM(o, k) cJSON_GetObjectItem ((o), (k))->valuedouble
  int32_t iters = ctx->opt.iters;
  printf ("schedrun: %s backend, %d ranks, %d iteration%s: step %.1f us, exposed %.1f us "
          "over %d collectives (%s)\n",
          be->name, ctx->world, iters, iters == 1 ? "" : "s", NUM (m, "step_us"),
          NUM (m, "exposed_us"), (int)NUM (m, "collectives"), clock);
  printf ("  measured:  %d hidden, %d partial, %d exposed\n", (int)NUM (m, "hidden"),
          (int)NUM (m, "partial"), (int)NUM (m, "exposed"));
  if (cJSON_IsNumber (cJSON_GetObjectItem (p, "step_us")))
    printf ("  predicted: %d hidden, %d partial, %d exposed; step %.1f us, exposed %.1f us "
            "(the plan's model%s)\n",
            (int)NUM (p, "hidden"), (int)NUM (p, "partial"), (int)NUM (p, "exposed"),
            NUM (p, "step_us"), NUM (p, "exposed_us"),
            strcmp (clock, "cpu-wall") == 0 ? " of its GPUs: not comparable with CPU time"
                                            : "");
  else
    printf ("  predicted: none (the plan has no prediction)\n");
#undef NUM
}

/* Checksums, dump, report and trace; on a failure on any rank, every rank
 * removes what it wrote. Returns the exit status. */
static int
write_results (SgRtContext *ctx, const SgBackend *be, const SgRtStepTimes *times,
               GError **error)
{
  const SgRtOptions *opt = &ctx->opt;
  SgRtWritten w = { 0 };
  w.dump = opt->dump_dir && ctx->rank == opt->dump_rank;
  w.dump_dir_existed = opt->dump_dir && g_file_test (opt->dump_dir, G_FILE_TEST_IS_DIR);
  cJSON *sums = NULL;
  bool ok = sg_rt_collect_outputs (ctx, opt->dump_dir, &sums, error);
  if (ok) {
    const char *clock = strcmp (be->name, "cpu") == 0 ? "cpu-wall" : "cuda-events";
    cJSON *report = sg_rt_report_new (ctx, times, opt->iters, clock, sums);
    if (ctx->rank == 0) {
      print_summary (be, ctx, clock, report);
      w.report = opt->report != NULL;
      if (w.report && !write_json (opt->report, report, true, error))
        ok = false;
    }
    cJSON_Delete (report);
    cJSON *trace = opt->trace ? sg_rt_trace_new (ctx, times, opt->iters) : NULL;
    w.trace = trace != NULL;
    if (trace != NULL && ok && !write_json (opt->trace, trace, false, error))
      ok = false;
    cJSON_Delete (trace);
    if (!sg_rt_all_ok (ctx, ok) && ok) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO,
                   "another rank could not write its outputs; this rank's are removed");
      ok = false;
    }
  }
  cJSON_Delete (sums);
  if (!ok)
    sg_rt_outputs_remove (opt, ctx->plan, &w);
  return ok ? 0 : 1;
}

int
main (int argc, char **argv)
{
  MPI_Init (&argc, &argv);
  int rank = 0;
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler (MPI_COMM_WORLD, MPI_ERRORS_RETURN);

#ifdef SG_HAVE_CUDA
  if (sg_rt_cuda_profile_requested (argc, argv)) { /* runtime/cuda/profile.c */
    GError *perr = NULL;
    bool pok = sg_rt_cuda_profile_main (&argc, &argv, &perr);
    return finish (rank, perr, pok ? 0 : 1);
  }
#endif
  GError *error = NULL;
  if (profile_unavailable (argc, argv)) {
    g_set_error (&error, SG_RT_ERROR, SG_RT_ERROR_BACKEND,
                 "--profile measures on GPUs: this build has no CUDA backend");
    return finish (rank, error, 1);
  }
  Args a = { 0 };
  SgRtOptions opt;
  sg_rt_options_init (&opt);
  char *plan_path = NULL;
  int code = start (&argc, &argv, rank, &a, &opt, &plan_path);
  if (code >= 0) {
    args_clear (&a);
    return code;
  }

  GError *load_error = NULL;
  SgPlan *plan = sg_plan_load (plan_path, &load_error);
  if (!sg_rt_agree_plan (plan, load_error, &error)) {
    g_clear_error (&load_error);
    sg_plan_free (plan);
    args_clear (&a);
    return finish (rank, error, 1);
  }
  const SgBackend *be = sg_rt_backend_lookup (opt.backend, &error);
  if (be == NULL) {
    sg_plan_free (plan);
    args_clear (&a);
    return finish (rank, rank == 0 ? error : (g_clear_error (&error), NULL), 1);
  }
  SgRtContext ctx;
  if (!sg_rt_context_init (&ctx, plan, &opt, &error)) {
    sg_plan_free (plan);
    args_clear (&a);
    return finish (rank, error, 1);
  }
  ctx.backend = be;

  bool ok = be->check_plan (&ctx, &error);
  if (!sg_rt_all_ok (&ctx, ok)) {
    sg_rt_context_clear (&ctx);
    sg_plan_free (plan);
    args_clear (&a);
    /* The plan is the same everywhere: rank 0 speaks for all. */
    if (rank != 0)
      g_clear_error (&error);
    return finish (rank, error, 1);
  }
  ok = be->setup (&ctx, &error);
  if (!sg_rt_all_ok (&ctx, ok)) {
    if (ok)
      g_set_error (&error, SG_RT_ERROR, SG_RT_ERROR_BACKEND, "another rank failed its setup");
    be->teardown (&ctx);
    sg_rt_context_clear (&ctx);
    sg_plan_free (plan);
    args_clear (&a);
    return finish (rank, error, 1);
  }

  int32_t total = opt.warmup + opt.iters;
  SgRtStepTimes *times = g_new0 (SgRtStepTimes, (size_t)opt.iters);
  for (int32_t it = 0; it < total; it++) {
    SgRtStepTimes scratch;
    SgRtStepTimes *t = it >= opt.warmup ? &times[it - opt.warmup] : &scratch;
    sg_rt_step_times_init (t, plan, opt.timeline && t != &scratch);
    ok = be->load_inputs (&ctx, &error);
    if (ok) {
      MPI_OR_ABORT (MPI_Barrier (ctx.world_comm));
      ok = be->run_step (&ctx, t, &error);
      sg_rt_at_ins = -1;
    }
    if (t == &scratch)
      sg_rt_step_times_clear (&scratch);
    if (!ok) {
      /* Peers may be blocked inside a collective with us: abort the job. */
      fprintf (stderr, "schedrun: rank %d: %s; aborting the job\n", rank, error->message);
      fflush (stderr);
      MPI_Abort (MPI_COMM_WORLD, 1);
      return 1;
    }
  }

  code = write_results (&ctx, be, times, &error);
  for (int32_t it = 0; it < opt.iters; it++)
    sg_rt_step_times_clear (&times[it]);
  g_free (times);
  be->teardown (&ctx);
  sg_rt_context_clear (&ctx);
  sg_plan_free (plan);
  args_clear (&a);
  return finish (rank, error, code);
}
