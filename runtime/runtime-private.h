/* runtime-private.h: helpers shared by the files of runtime/ only.
 *
 * MPI_OR_ABORT is for the agreement collectives (plan agreement, verdicts,
 * report reductions): when one of them fails the ranks can no longer agree
 * on anything, so the only safe answer is to end the job with the
 * statement, its place and MPI's message. Calls that can fail on their own
 * (a backend's collectives) return a GError instead (backend.c MPI_TRY).
 * Also schedrun's output checks (outputs.c).
 */
#pragma once

#include <mpi.h>
#include <stdio.h>

#include "runtime.h"

#define MPI_OR_ABORT(call)                                                                     \
  do {                                                                                         \
    int rc_ = (call);                                                                          \
    if (rc_ != MPI_SUCCESS) {                                                                  \
      char msg_[MPI_MAX_ERROR_STRING];                                                         \
      int len_ = 0;                                                                            \
      MPI_Error_string (rc_, msg_, &len_);                                                     \
      fprintf (stderr, "schedrun: %s failed at %s:%d: %s; aborting the job\n", #call,         \
               __FILE__, __LINE__, msg_);                                                      \
      fflush (stderr);                                                                         \
      MPI_Abort (MPI_COMM_WORLD, 1);                                                           \
    }                                                                                          \
  } while (0)

/* --- outputs.c: schedrun's output files ------------------------------------ */

/* (transfer full) A usage error when --report, --trace or a file of
 * --dump-outputs would overwrite the plan or another output (the same
 * file by device and inode), else NULL. */
char *sg_rt_outputs_clash (const SgRtOptions *opt, const char *plan_path);

/* Probes, on the rank that writes each (rank 0: report, trace; dump_rank:
 * the dump), that its directory takes a new file; false with the output
 * and the reason named. */
bool sg_rt_outputs_writable (const SgRtOptions *opt, int rank, GError **error);

/* What this rank wrote (or began to write) in this run. */
typedef struct {
  bool report, trace, dump;
  bool dump_dir_existed; /* the dump directory was there before the run */
} SgRtWritten;

/* Removes what @w says this rank wrote: the report, the trace, the dump's
 * files (the plan's outputs) and the dump directory when it created it. */
void sg_rt_outputs_remove (const SgRtOptions *opt, const SgPlan *plan, const SgRtWritten *w);

/* --- ranks.c: every rank's times in the median step ------------------------ */

/* Collective over MPI_COMM_WORLD: the index of the measured iteration
 * whose step time on the slowest rank is the (lower) median, and that time
 * in *@step_us. The report's by_rank and the trace show this step. */
int32_t sg_rt_median_iteration (const SgRtContext *ctx, const SgRtStepTimes *iters, int32_t n,
                                double *step_us);

/* Collective over MPI_COMM_WORLD: adds "by_rank" to @root (iteration,
 * step_us, compute_us) and to each ROW of @rows (launch_us, end_us,
 * exposed_us, compute_before_us), one entry per rank, from the median
 * step (docs/runtime.md "Report"). @rows are the report's collectives in
 * the order of @iters' collectives. */
void sg_rt_report_add_ranks (const SgRtContext *ctx, const SgRtStepTimes *iters, int32_t n_iters,
                             cJSON *root, cJSON *rows);
