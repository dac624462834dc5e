/* runtime.h: executes a plan (plan/plan.h) on every rank under mpirun.
 *
 * The public contract of runtime/: the per-rank context that schedrun builds
 * (plan, rank, MPI communicators per group, options), the backend vtable
 * (cpu in runtime/cpu, cuda in runtime/cuda), the timing record a backend
 * fills per step, the deterministic inputs every backend shares, and the
 * report writer.
 *
 * Mirrors nvFuser's host IR executor: the plan says streams, events,
 * collectives and kernels; a backend only maps them to its resources.
 *
 * Lifecycle, driven by schedrun (runtime/schedrun.c), identical on every
 * rank:
 *   sg_rt_context_init    -> plan agreed over MPI (hash, version, world size),
 *                            one MPI communicator per group instance
 *   backend->check_plan   -> every op runnable? (names the node) before work;
 *                            the verdict is agreed over MPI
 *   backend->setup        -> arena, streams, communicators of the backend
 *   per iteration: backend->load_inputs, backend->run_step
 *   backend->read_value   -> outputs for checksums and --dump-outputs
 *   backend->teardown; sg_rt_context_clear
 */
#pragma once

#include <glib.h>
#include <mpi.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "plan.h"

G_BEGIN_DECLS

/* Exit status of a run that outlived --timeout (the alarm and the CUDA
 * watchdog alike; docs/runtime.md). */
#define SG_RT_EXIT_TIMEOUT 3

#define SG_RT_ERROR (sg_rt_error_quark ())
GQuark sg_rt_error_quark (void);
typedef enum {
  SG_RT_ERROR_ARGS,        /* bad command line */
  SG_RT_ERROR_MISMATCH,    /* ranks disagree on the plan, or world size != plan's */
  SG_RT_ERROR_UNSUPPORTED, /* an op or dtype the backend cannot run (node named) */
  SG_RT_ERROR_BACKEND,     /* unknown backend, or one not built in */
  SG_RT_ERROR_MPI,         /* an MPI call failed (statement and MPI's message) */
  SG_RT_ERROR_KERNEL,      /* a kernel rejected its arguments (node named) */
  SG_RT_ERROR_INJECTED,    /* --fail-at-ins */
  SG_RT_ERROR_IO,          /* report / dump files */
} SgRtError;

typedef enum {
  SG_RT_MODE_EXACT,  /* outputs are the point: poison freed buffers, checksums */
  SG_RT_MODE_TIMING, /* time is the point: warm-up, K iterations, medians */
} SgRtMode;

typedef enum {
  SG_RT_LAUNCH_EAGER, /* the host issues every instruction of every step */
  SG_RT_LAUNCH_GRAPH, /* cuda: step 1 captured into a CUDA graph, then replayed */
} SgRtLaunch;

typedef struct {
  SgRtMode mode;
  SgRtLaunch launch;    /* how steps are issued (cpu: eager only) */
  int32_t iters;        /* measured iterations (>= 1) */
  int32_t warmup;       /* unmeasured iterations before them (timing mode) */
  uint64_t seed;        /* deterministic inputs (sg_rt_fill_input) */
  int32_t fail_at_ins;  /* test hook: rank fail_rank fails at this instruction; -1 = off */
  int32_t fail_rank;    /* which rank fails (default 1) */
  bool fail_hang;       /* test hook: that rank stops responding instead (--timeout ends it) */
  bool fail_kill;       /* test hook: that rank sends itself SIGKILL instead */
  double timeout_s;     /* backend watchdog; 0 = none */
  const char *backend;  /* "cpu" or "cuda" */
  int32_t dump_rank;    /* whose outputs --dump-outputs writes (default 0) */
  bool timeline;        /* backends fill SgRtStepTimes' spans (--trace) */
  /* outputs, NULL when not asked for: rank 0 writes the report and the
   * trace, rank dump_rank the dump */
  const char *report, *trace, *dump_dir;
} SgRtOptions;

/* Options with their defaults: exact, 1 iteration, no warm-up, seed 0,
 * no fault injection, no timeout, backend "cpu". */
void sg_rt_options_init (SgRtOptions *opt);

struct SgBackend;

/* Per-rank state shared by the driver and the backend. */
typedef struct SgRtContext {
  const SgPlan *plan;  /* (transfer none) */
  int32_t rank, world; /* in MPI_COMM_WORLD */
  MPI_Comm world_comm; /* a duplicate of MPI_COMM_WORLD, owned */
  /* Per plan group: the communicator of the group instance (partition row)
   * that contains this rank, ranks ordered as in the row; owned. */
  MPI_Comm *group_comms;
  int32_t *group_rank; /* this rank's index inside its instance, per group */
  SgRtOptions opt;
  const struct SgBackend *backend;
  void *priv; /* the backend's state, set by setup, freed by teardown */
  /* The backend's kernel paths in one line (cuda: which attention ran, the
   * report's "kernels"); set by setup, may stay NULL; owned (g_free). */
  char *info;
} SgRtContext;

/* Timing of one step, filled by run_step. Collectives are listed in `ins`
 * order; coll_ins[c] is the index of the c-th COLLECTIVE instruction. */
typedef struct {
  int32_t n_coll;
  int32_t *coll_ins;
  double *measured_us; /* collective start -> its data is complete */
  double *exposed_us;  /* time the compute stream waited for it at its WAIT_EVENT(s) */
  double step_us;      /* first instruction issued -> everything complete */
  double compute_us;   /* time spent in KERNEL instructions (busy compute stream) */
  bool graph_launch;   /* the step replayed a captured CUDA graph */
  /* The same step again without any measurement event but its start and
   * end (cuda, timing mode; 0 = not run): the report's step_us. */
  double bare_step_us;
  /* The step's timeline (schedrun --trace), per instruction, us from the
   * step's start, -1 where none; NULL unless asked for. KERNEL: that kernel
   * (cpu) or the run of kernels on stream 0 that it starts (cuda);
   * COLLECTIVE: start -> its data is complete; WAIT_EVENT of a collective:
   * the waiting stream reached it -> went on. */
  double *span_start, *span_end;
  /* This rank's view of the step for the report's by_rank (ranks.c), us
   * from the step's start: launch_us[c] when collective c started on its
   * stream (cpu: the MPI call; cuda: its stream reached it), end_us[c] its
   * data complete; the compute stream's busy spans, n_busy of them (cpu:
   * each kernel; cuda: each run of kernels on stream 0). */
  double *launch_us, *end_us;
  double *busy_start, *busy_end;
  int32_t n_busy;
} SgRtStepTimes;

/* Sizes @t for @plan's collectives (zeroed) and busy spans (none yet);
 * with @spans also the timeline (all -1). */
void sg_rt_step_times_init (SgRtStepTimes *t, const SgPlan *plan, bool spans);
void sg_rt_step_times_clear (SgRtStepTimes *t);

/* A backend. Every function that returns false sets @error; the driver
 * then ends the job on every rank (MPI_Abort after printing the message),
 * so a backend never has to unwind a half-finished collective. */
typedef struct SgBackend {
  const char *name;
  /* Rejects, before any work, an instruction the backend cannot run (op,
   * dtype, rank of tensors), naming the node. Reads only ctx->plan. */
  bool (*check_plan) (SgRtContext *ctx, GError **error);
  /* Arena, streams/events, communicators of the backend. */
  bool (*setup) (SgRtContext *ctx, GError **error);
  /* Fills every SG_INIT_INPUT value with sg_rt_fill_input. */
  bool (*load_inputs) (SgRtContext *ctx, GError **error);
  /* Runs `ins` once; fills @out (already sized by sg_rt_step_times_init). */
  bool (*run_step) (SgRtContext *ctx, SgRtStepTimes *out, GError **error);
  /* Copies value @value as contiguous row-major host bytes in its dtype
   * into @host (numel * dtype size bytes). */
  bool (*read_value) (SgRtContext *ctx, int32_t value, void *host, GError **error);
  void (*teardown) (SgRtContext *ctx);
} SgBackend;

/* (transfer none) The backend called @name ("cpu", "cuda"), or NULL with
 * @error (unknown, or "cuda" in a build without CUDA). */
const SgBackend *sg_rt_backend_lookup (const char *name, GError **error);

extern const SgBackend sg_rt_cpu_backend;
/* Options of `schedrun --profile` (runtime/cuda/profile.c). */
typedef struct {
  int32_t iters, warmup; /* per key: timed runs (median), untimed runs first */
  double timeout_s;      /* per key (and per contention pair), 0: none */
  bool contention;       /* also measure collectives beside each kernel class */
  double contention_budget_s; /* wall time the contention measurement may take */
  int32_t contention_iters;   /* samples per pair and order, at most */
} SgRtProfileOptions;
#ifdef SG_HAVE_CUDA
extern const SgBackend sg_rt_cuda_backend;
/* runtime/cuda/profile.c: `schedrun --profile GRAPH -o PROFILE` (docs/gpu.md).
 * Collective over MPI_COMM_WORLD; writes docs/profile-format.md on rank 0,
 * identical on every rank; an existing PROFILE is a cache. */
/* runtime/cuda/backend.c: the CUDA backend's kernel paths in one line
 * (schedrun --version): cuDNN attention as built and as loadable here, or
 * the math path and why; g_free it. */
char *sg_rt_cuda_describe (void);
bool sg_rt_cuda_profile_requested (int argc, char **argv);
bool sg_rt_cuda_profile_main (int *argc, char ***argv, GError **error);
bool sg_rt_cuda_profile (const char *graph_path, const char *out_path,
                         const SgRtProfileOptions *o, GError **error);
#endif

/* Collective over MPI_COMM_WORLD, before anything else (the plan is not
 * loaded yet): every rank says whether it parsed its command line
 * (@args_error NULL; else it says why) and with which options: backend,
 * mode, launch, iterations, warm-up, seed, timeout, which outputs it was
 * asked for, the dump rank and the test hooks. True on every rank iff all
 * parsed and agree; otherwise false on every rank with a message: this
 * rank's own parse error first, else the first rank that could not parse,
 * else the first rank and option that differ from rank 0 ("rank 1 was
 * started with --mode timing, rank 0 with --mode exact"). Ranks with different options
 * would otherwise wait for each other forever. */
bool sg_rt_agree_options (const SgRtOptions *opt, const GError *args_error, GError **error);

/* Backends call it before instruction @i of every step. It records @i for
 * the --timeout message (sg_rt_at_ins) and runs the test hooks
 * (--fail-at-ins): at @i, rank opt.fail_rank hangs (fail_hang), sends
 * itself SIGKILL (fail_kill) or returns false with an
 * SG_RT_ERROR_INJECTED error naming @i; true everywhere else. */
bool sg_rt_ins_hook (const SgRtContext *ctx, int32_t i, GError **error);

/* The instruction the step is at (sg_rt_ins_hook), -1 outside steps; read
 * by schedrun's SIGALRM handler. */
extern volatile sig_atomic_t sg_rt_at_ins;

/* Collective over MPI_COMM_WORLD, before anything else: every rank says
 * whether it loaded a plan (@plan NULL: it did not, @load_error says why)
 * and which (hash, format version, world size). True on every rank iff all
 * loaded the same plan and MPI's world size is the plan's; otherwise false
 * on every rank with a message naming the first disagreeing rank. */
bool sg_rt_agree_plan (const SgPlan *plan, const GError *load_error, GError **error);

/* Collective over MPI_COMM_WORLD: checks that every rank loaded the same
 * plan (hash, version) and that the world size is the plan's; creates the
 * group communicators (MPI_Comm_split, colour = partition row). On failure
 * every rank returns false with the same kind of message. */
bool sg_rt_context_init (SgRtContext *ctx, const SgPlan *plan, const SgRtOptions *opt,
                         GError **error);
void sg_rt_context_clear (SgRtContext *ctx);

/* True on every rank iff @ok on every rank (MPI_Allreduce LAND); used to
 * agree on verdicts such as check_plan before anyone proceeds. */
bool sg_rt_all_ok (SgRtContext *ctx, bool ok);

/* --- values ------------------------------------------------------------- */

/* Elements of a plan value (product of its shape; 1 for 0-d). */
uint64_t sg_rt_value_numel (const SgPlanValue *v);

/* Deterministic input for a value: element e of value NAME on @rank is
 * splitmix64(seed, rank, fnv1a64(NAME), e) mapped to [-1, 1) and rounded to
 * the dtype (bf16/f16 round-to-nearest-even); integer dtypes get small ints
 * in [0, 8), bool 0/1. Depends only on the name, never on the order or
 * backend. Writes numel * dtype size contiguous bytes into @host. */
void sg_rt_fill_input (const SgPlanValue *v, int32_t rank, uint64_t seed, void *host);
/* Same, from name/dtype/numel (for tools that read graphs, e.g. sgeval). */
void sg_rt_fill_named (const char *name, SgDtype dtype, uint64_t numel, int32_t rank,
                       uint64_t seed, void *host);

/* FNV-1a 64 of @len bytes (checksums of outputs). */
uint64_t sg_rt_fnv1a64 (const void *data, size_t len);

/* --- report and dumps (report.c) ---------------------------------------- */

/* Per collective and per step medians over the measured iterations, and
 * every rank's times in the median step (by_rank, ranks.c). Collective
 * over MPI_COMM_WORLD. (transfer full) cJSON_Delete the result. The keys
 * mirror schedgraph's report; "clock" says which clock measured
 * ("cpu-wall", "cuda-events"). */
cJSON *sg_rt_report_new (const SgRtContext *ctx, const SgRtStepTimes *iters, int32_t n_iters,
                         const char *clock, const cJSON *outputs);

/* Rank opt.dump_rank (default 0): each plan output as DIR/<index>.bin (raw little-endian values in
 * its dtype, contiguous) and DIR/outputs.json (index, name, shape, dtype).
 * Every rank must call it (values are read through the backend). Also fills
 * @checksums (transfer full, may be NULL) with [{index, name, fnv1a64, sum}]. */
/* Collective over MPI_COMM_WORLD: the Chrome trace (chrome://tracing,
 * ui.perfetto.dev) of the measured step whose time (slowest rank) is the
 * median, every rank's timeline in it (pid = rank); built on rank 0, NULL
 * on the others. @iters: filled with spans. */
cJSON *sg_rt_trace_new (const SgRtContext *ctx, const SgRtStepTimes *iters, int32_t n_iters);

bool sg_rt_collect_outputs (SgRtContext *ctx, const char *dump_dir, cJSON **checksums,
                            GError **error);

G_END_DECLS
