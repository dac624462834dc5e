/* runtime-private.h: helpers shared by the files of runtime/ only.
 *
 * MPI_OR_ABORT is for the agreement collectives (plan agreement, verdicts,
 * report reductions): when one of them fails the ranks can no longer agree
 * on anything, so the only safe answer is to end the job with the
 * statement, its place and MPI's message. Calls that can fail on their own
 * (a backend's collectives) return a GError instead (backend.c MPI_TRY).
 */
#pragma once

#include <mpi.h>
#include <stdio.h>

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
