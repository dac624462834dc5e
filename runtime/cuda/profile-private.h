/* profile-private.h: what profile.c, profile-keys.c and
 * profile-contention.c share (runtime/cuda only): the key of one profile
 * entry and the functions over keys, one kernel run as a one-instruction
 * plan, one collective's buffers, the contention measurement.
 */
#pragma once

#include "cuda-private.h"
#include "estimate.h"
#include "graph.h"

typedef enum { FAM_GEMM, FAM_ATTN, FAM_COLL, FAM_OPS } Fam;

typedef struct {
  Fam fam;
  char *key;      /* canonical text of the exact key (sort and cache match) */
  char *json;     /* the entry without "us", e.g. {"op": "mm", ...  */
  SgNodeId node;  /* a node with this key (measured), or -1 (from the cache) */
  double us;      /* < 0 until measured or read from the cache */
  double flops;   /* gemm: 2 * batch * m * n * k, for the "tflops" note */
  int32_t count;  /* nodes of the graph with this key (0: from the cache only) */
  /* kernels (not collectives): each rank's median, in rank order, of which
   * us is the median; NULL when not known (a cache entry without them) */
  double *us_by_rank;
  int32_t n_by_rank;
} Key;

extern const char *const sg_cu_prof_fam_key[4]; /* "gemm", "attention", ... */

void sg_cu_prof_key_free (gpointer p);
gint sg_cu_prof_key_cmp (gconstpointer a, gconstpointer b);
const SgMeta *sg_cu_prof_in_meta (const SgGraph *g, SgNodeId id, uint32_t i);
/* The key of node @id, false for nodes a profile does not time. */
bool sg_cu_prof_node_key (const SgGraph *g, SgNodeId id, int32_t n_nodes_of_group, Key *k);
/* Reads an existing profile: fills us of keys it has, appends the others
 * (to @keys and @by_key), sets *@contention (transfer full) to its
 * contention entries as sg_cu_prof_profile_text writes them (NULL: none);
 * ignores (whole, with a message on rank 0) a file of another device or
 * world size. */
void sg_cu_prof_read_cache (const char *text, size_t len, const char *device, int32_t world,
                            GPtrArray *keys, GHashTable *by_key, int32_t rank, int *n_cached,
                            char **contention);
/* (transfer full) The profile JSON of the measured keys; version 2 with
 * @contention (entries, one per line, or NULL: version 1, no section). */
char *sg_cu_prof_profile_text (GPtrArray *keys, const char *device, int32_t world,
                               const char *contention);

/* Median of @n values (sorts @v). */
double sg_cu_prof_median (double *v, int n);

/* One node's kernel as a one-instruction plan through the backend's own
 * setup and dispatch (sg_cu_prepare_ins, dispatch.c: attention on cuDNN
 * where @dnn, bound to @stream, runs it), with that node's operand layouts
 * and random operands, on @stream. Keep it in place after init (it points
 * into itself). */
typedef struct {
  SgPlan p;
  SgPlanValue values[64];
  int64_t dims[64][2 * SG_PLAN_MAX_DIMS]; /* the values' shapes and strides */
  SgPlanBuffer buffers[64];
  SgPlanIns ins;
  int32_t outs[16];
  int32_t attn_plan;
  SgCuState st;
  cudaStream_t stream;
  char *base, *sp;
  uint64_t scratch;
} SgCuOneKernel;
bool sg_cu_one_kernel_init (SgCuOneKernel *k, const SgGraph *g, SgNodeId id, cudaStream_t stream,
                            cublasHandle_t cublas, SgCuDnn *dnn, GError **error);
/* Queues one run of the kernel on its stream. */
bool sg_cu_one_kernel_run (SgCuOneKernel *k, GError **error);
/* Frees the buffers (synchronize the stream first if it may still run). */
void sg_cu_one_kernel_clear (SgCuOneKernel *k);

/* Buffers for one run of collective node @id (its bytes as schedgraph
 * counts them, its dtype or bytes when NCCL has none). */
typedef struct {
  const SgNode *node;
  char *buf, *send, *recv;
  uint64_t bytes;
  size_t total, shard, es;
  ncclDataType_t dt;
  int32_t gs;
} SgCuCollBuf;
bool sg_cu_coll_buf_init (SgCuCollBuf *c, const SgGraph *g, SgNodeId id, GError **error);
/* Queues the collective once on @stream over @comm. */
bool sg_cu_coll_buf_issue (const SgCuCollBuf *c, ncclComm_t comm, cudaStream_t stream,
                           GError **error);
void sg_cu_coll_buf_clear (SgCuCollBuf *c);

/* The in-place contention measurement (profile-contention.c). */
typedef struct {
  const SgGraph *g;
  GPtrArray *keys;         /* Key *, measured and agreed (us > 0) */
  ncclComm_t *comms;       /* per graph group */
  MPI_Comm *mpi;           /* per graph group: this rank's instance */
  cudaStream_t stream;     /* the compute stream, the one @cublas and @dnn are bound to */
  cublasHandle_t cublas;
  SgCuDnn *dnn;            /* cuDNN attention as schedrun runs it; NULL: the math path */
  SgCuWatchdog *watchdog;
  int32_t iters;           /* samples per order, at most */
  double budget_s;         /* wall time for the whole measurement (rank 0's clock) */
  double timeout_s;        /* per pair (the watchdog), 0: none */
} SgCuContentionJob;
/* A pair's numbers: rep_solo_us, comm_solo_us, then for comm_first and
 * kernel_first: lag_us, comm_us, reps_us[SG_CU_CONTENTION_MAX_REPS]. */
#define SG_CU_CONTENTION_MAX_REPS 24
#define SG_CU_CONTENTION_VEC (2 + 2 * (2 + SG_CU_CONTENTION_MAX_REPS))
/* Appends the pair's two entries (comm_first, kernel_first) to @out, one
 * per line as the profile text has them: collective @ck's fields, then
 * transport, kernel (@klass), kernel_key, order, runs_per_rep and the
 * times of @vec (SG_CU_CONTENTION_VEC) rounded to 0.001 us. */
void sg_cu_prof_contention_entries (GString *out, const Key *ck, SgKernelClass klass,
                                    const char *kernel_key, int32_t runs, int32_t n_reps,
                                    const double *vec);
/* Measures every collective key of the graph beside one kernel of each
 * class the graph has (docs/gpu.md "Contention"); sets *@entries (transfer
 * full) to the profile's contention entries, identical on every rank.
 * Collective on every rank; false with @error on a failure on this rank. */
bool sg_cu_prof_contention (const SgCuContentionJob *job, char **entries, GError **error);
