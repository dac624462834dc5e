/* cuda-private.h: the CUDA backend's internal interfaces (runtime/cuda/ only).
 *
 * kernels.cu: strided pointwise maps and flat-range copies (bucket
 * pack/unpack, collective staging); reduce.cu: reductions; attn_kernels.cu:
 * the row kernels of a straightforward causal SDPA forward/backward; every
 * one accumulating in fp32, over plain descriptors (pointer, dtype, shape,
 * stride in elements) so the C side needs no C++.
 * gemm.c: cuBLAS GEMMs over row-major strided views (bf16/f16/f32 in,
 * CUBLAS_COMPUTE_32F). comm.c: one NCCL communicator per plan group, the
 * watchdog. Requires: a current CUDA device. Invalidates: nothing.
 */
#pragma once

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "ops.h"

#define SG_CU_MAX_DIMS 12

typedef struct {
  void *ptr;      /* element (0,...,0); already offset into the arena */
  int32_t dtype;  /* SgDtype */
  int32_t ndim;   /* 0 for a scalar */
  int64_t shape[SG_CU_MAX_DIMS];
  int64_t stride[SG_CU_MAX_DIMS]; /* elements */
} SgCuTensor;

typedef enum {
  SG_CU_COPY = 0,   /* out = a (dtype conversion, broadcast, layout change) */
  SG_CU_FILL,       /* out = s0 */
  SG_CU_ADD,        /* out = a + s0 * b */
  SG_CU_SUB,        /* out = a - s0 * b */
  SG_CU_MUL,        /* out = a * b */
  SG_CU_DIV,        /* out = a / b */
  SG_CU_ADD_S,      /* out = a + s0 */
  SG_CU_MUL_S,      /* out = a * s0 */
  SG_CU_DIV_S,      /* out = a / s0 */
  SG_CU_RSUB_S,     /* out = s0 - a */
  SG_CU_POW_S,      /* out = a ^ s0 */
  SG_CU_RSQRT,
  SG_CU_SQRT,
  SG_CU_EXP,
  SG_CU_NEG,
  SG_CU_RECIP,
  SG_CU_SILU,
  SG_CU_SILU_BWD,   /* a = grad, b = x */
  SG_CU_GELU,       /* s0 != 0: tanh approximation */
  SG_CU_GELU_BWD,   /* a = grad, b = x; s0 != 0: tanh approximation */
  SG_CU_RELU,
  SG_CU_SIGMOID,
  SG_CU_TANH,
  SG_CU_N_MAP_OPS
} SgCuMapOp;

typedef enum {
  SG_CU_RED_SUM = 0,
  SG_CU_RED_MEAN,
  SG_CU_RED_AMAX,
} SgCuRedOp;

/* Elementwise: out[idx] = op(a[idx], b[idx]) over out's shape; a and b are
 * broadcast to it numpy-style (aligned right, size-1 dims repeat). b (and a
 * for FILL) may be NULL. Math in fp32 (fp64 inputs are read as fp32). */
cudaError_t sg_cu_map (SgCuMapOp op, const SgCuTensor *out, const SgCuTensor *a,
                       const SgCuTensor *b, double s0, cudaStream_t stream);

/* Reduces @in over the dims flagged in @reduce_mask (bit d for dim d) into
 * @out, whose shape is in's with those dims either kept as 1 or removed.
 * Long reductions into few outputs run in two passes through @partials
 * (fp32, sg_cu_reduce_partials elements; with less, one pass). */
cudaError_t sg_cu_reduce (SgCuRedOp op, const SgCuTensor *out, const SgCuTensor *in,
                          uint32_t reduce_mask, float *partials, int64_t partial_cap,
                          cudaStream_t stream);
int64_t sg_cu_reduce_partials (const SgCuTensor *out, const SgCuTensor *in);

/* out_logical[out_start + j] = in_logical[in_start + j] for j < n, where
 * "logical" is the row-major flattening of each view. */
cudaError_t sg_cu_copy_range (const SgCuTensor *out, int64_t out_start, const SgCuTensor *in,
                              int64_t in_start, int64_t n, cudaStream_t stream);

/* Attention rows over dense fp32 scores [heads * sq, sk] (attn.c does the
 * GEMMs): causal mask (key j > query i is masked, torch's top-left
 * alignment), softmax in place, optional copy of P in @p_dtype at @p_out,
 * the natural-log log-sum-exp into @lse (a [heads, sq] view, may be NULL).
 * @recompute: P = exp(S - lse) from the forward's lse instead. */
cudaError_t sg_cu_softmax_rows (float *s, void *p_out, int32_t p_dtype, int64_t heads, int64_t sq,
                                int64_t sk, bool causal, const SgCuTensor *lse, bool recompute,
                                cudaStream_t stream);
/* delta[h * sq + i] = sum_d dout[h, i, d] * out[h, i, d] over [heads, sq, D] views. */
cudaError_t sg_cu_attn_delta (const SgCuTensor *dout, const SgCuTensor *out, float *delta,
                              cudaStream_t stream);
/* ds[r, j] = p[r, j] * (dp[r, j] - delta[r]), dense, stored in @ds_dtype. */
cudaError_t sg_cu_attn_ds (const float *p, const float *dp, const float *delta, void *ds,
                           int32_t ds_dtype, int64_t rows, int64_t sk, cudaStream_t stream);

/* Occupies @stream for @us microseconds (one thread): work queued behind it
 * is timed on the GPU alone, not at the host's launch rate. */
cudaError_t sg_cu_spin (double us, cudaStream_t stream);

/* @n elements of @dtype at @ptr: splitmix64(seed, index) mapped to [-1, 1)
 * for floating dtypes, to 0..7 for the others (profiling inputs: GEMM
 * speed and power depend on the data, so constant fills would flatter). */
cudaError_t sg_cu_fill_random (void *ptr, int32_t dtype, int64_t n, uint64_t seed,
                               cudaStream_t stream);

/* ---- attention on cuDNN's fused SDPA (attn_cudnn.cpp; built with -Dcudnn,
 * else attn.c's fallbacks say so and the math path runs) ---- */

typedef struct SgCuDnn SgCuDnn;

/* One attention call: [B, H, S, D] views (K/V may have fewer heads); @lse
 * the fp32 log-sum-exp [B, H, Sq(, 1)] (ndim 0: none, forward only). The
 * pointers are not part of a plan: the same plan runs any operands of the
 * same shapes and strides. */
typedef struct {
  bool backward, causal;
  bool deterministic; /* backward: cuDNN's deterministic algorithm */
  double scale;       /* <= 0: 1/sqrt(D) */
  SgCuTensor q, k, v, o, lse;
  SgCuTensor dout, dq, dk, dv; /* backward */
} SgCuSdpa;

/* What this build runs attention with: a line naming cuDNN's header and
 * cudnn-frontend versions, or NULL in a build without cuDNN. */
const char *sg_cu_dnn_built (void);
/* Opens libcudnn.so.9 (once): true with its cudnnGetVersion() in @version;
 * false with why in *@why (malloc'ed) when there is none, it is not 9.x, the
 * build has no cuDNN, or SG_CUDA_ATTENTION=math. */
bool sg_cu_dnn_load (int64_t *version, char **why);
/* One cuDNN handle per stream, bound to it; NULL with *@why. */
SgCuDnn *sg_cu_dnn_new (const cudaStream_t *streams, int32_t n_streams, char **why);
void sg_cu_dnn_free (SgCuDnn *d);
/* The execution plan of @a's shapes (built on first use, then shared):
 * its index and workspace bytes, or -1 with *@why when cuDNN cannot run it
 * (fp32, a head dim that is not contiguous, no engine). Host work: call at
 * setup, never inside a step or a capture. */
int32_t sg_cu_dnn_sdpa_plan (SgCuDnn *d, const SgCuSdpa *a, uint64_t *workspace, char **why);
/* Queues plan @plan on stream @stream's handle with @a's pointers. */
bool sg_cu_dnn_sdpa_run (SgCuDnn *d, int32_t plan, int32_t stream, const SgCuSdpa *a,
                         void *workspace, char **why);

/* Number of elements of a view. */
int64_t sg_cu_numel (const SgCuTensor *t);
/* True when the view is dense row-major (its logical order is memory order). */
bool sg_cu_is_contiguous (const SgCuTensor *t);

#ifdef __cplusplus
}
#endif

#ifndef __cplusplus
/* ---- C side of the backend (backend.c, dispatch.c, gemm.c, comm.c) ---- */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <glib.h>
#include <nccl.h>

#include "runtime.h"

/* Check macros: on failure set @error with the statement's text, file:line
 * and the library's error string, then jump to @label. */
#define SG_CU_CHECK(stmt, error, label)                                                        \
  do {                                                                                         \
    cudaError_t e_ = (stmt);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      g_set_error ((error), SG_RT_ERROR, SG_RT_ERROR_KERNEL, "%s:%d: %s: %s (%s)", __FILE__,   \
                   __LINE__, #stmt, cudaGetErrorString (e_), cudaGetErrorName (e_));           \
      goto label;                                                                              \
    }                                                                                          \
  } while (0)
#define SG_NCCL_CHECK(stmt, error, label)                                                      \
  do {                                                                                         \
    ncclResult_t r_ = (stmt);                                                                  \
    if (r_ != ncclSuccess) {                                                                   \
      g_set_error ((error), SG_RT_ERROR, SG_RT_ERROR_BACKEND, "%s:%d: %s: %s (%s)", __FILE__,  \
                   __LINE__, #stmt, ncclGetErrorString (r_), ncclGetLastError (NULL));         \
      goto label;                                                                              \
    }                                                                                          \
  } while (0)
#define SG_CUBLAS_CHECK(stmt, error, label)                                                    \
  do {                                                                                         \
    cublasStatus_t s_ = (stmt);                                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      g_set_error ((error), SG_RT_ERROR, SG_RT_ERROR_KERNEL, "%s:%d: %s: %s (%s)", __FILE__,   \
                   __LINE__, #stmt, cublasGetStatusString (s_), cublasGetStatusName (s_));     \
      goto label;                                                                              \
    }                                                                                          \
  } while (0)

typedef struct SgCuWatchdog SgCuWatchdog;
typedef struct SgCuP2p SgCuP2p;

/* cuBLAS workspace per stream that runs GEMMs or attention: the first bytes
 * of that stream's scratch (sized by sg_cu_check_ins). cuBLAS's own pool may
 * allocate, which a CUDA-graph capture forbids; 32 MiB is what cuBLAS
 * reserves by default on Hopper, so kernels are chosen as in the profile. */
#define SG_CU_BLAS_WORKSPACE ((uint64_t)32 << 20)

typedef struct {
  int device;
  char *base;               /* the one cudaMalloc: arena, then per-stream scratch */
  char *arena;
  uint64_t arena_bytes;
  char **scratch;           /* per stream */
  uint64_t *scratch_bytes;  /* per stream */
  cudaStream_t *streams;
  int32_t n_streams;
  cudaEvent_t *events;      /* the plan's events */
  int32_t n_events;
  cublasHandle_t cublas;    /* bound per call to a stream and its workspace */
  bool exact;               /* exact mode: attention math in fp32 */
  /* attention (sg_cu_prepare_ins): cuDNN's fused SDPA where it runs the
   * instruction, else the math path */
  SgCuDnn *dnn;             /* handles per stream and plans; NULL: math path only */
  int32_t *attn_plan;       /* per instruction: its cuDNN plan, -1: math path */
  int32_t n_attn, n_attn_dnn; /* attention instructions; of them on cuDNN */
  char *attn_why;           /* why the first one that is not on cuDNN is not */
  /* --launch graph: step 1 is captured into a CUDA graph (step 0 runs
   * eagerly: NCCL connects, cuBLAS and lazy module loading settle), later
   * steps replay it with one cudaGraphLaunch */
  bool graph;
  bool capturing;           /* inside cudaStreamBeginCapture/EndCapture */
  bool bare;                /* issuing without measurement events but the step's ends */
  cudaGraphExec_t exec, exec_bare; /* the step with every measurement event; bare */
  int32_t n_runs;           /* runs of kernels on stream 0 the plan makes */
  ncclComm_t *comms;        /* per plan group */
  int32_t n_comms;
  /* measurement */
  int32_t *coll_ordinal;    /* per instruction: its index among COLLECTIVEs, or -1 */
  cudaEvent_t *coll_start, *coll_end;
  cudaEvent_t *reached;     /* per instruction: WAIT_EVENT of a collective on stream 0 */
  cudaEvent_t *run_ev;      /* boundaries of runs of kernels on stream 0 */
  int32_t n_run_ev;
  int32_t *run_first;       /* per run: its first KERNEL instruction */
  int32_t *wait_run;        /* per instruction: at a reached WAIT_EVENT, the run after it */
  cudaEvent_t step_start, step_end;
  cudaEvent_t *join;        /* per stream */
  void **input_host;        /* per plan input: pinned host bytes, filled once */
  /* SG_CUDA_KERNEL_TIMES=FILE: events around every KERNEL (diagnostics) */
  char *ktimes_path;
  cudaEvent_t *kev;         /* 2 per instruction */
  double *ksamples;         /* [measured iteration][instruction] */
  int32_t n_steps;          /* run_step calls so far */
  SgCuWatchdog *watchdog;
  /* collective_permute and rank_roll: this rank's world rank and its group
   * rank per plan group (NULL outside a run: the profile's state) */
  int32_t rank;
  int32_t *group_rank;
  SgCuP2p *p2p;             /* p2p.c: copy-engine state, NULL without ce steps */
  cublasLtHandle_t lt;      /* GEMMs with an SM-count target */
} SgCuState;

/* A plan value as a kernel descriptor in @st's arena. */
void sg_cu_value_tensor (const SgCuState *st, const SgPlan *plan, int32_t value, SgCuTensor *out);

/* Rejects what dispatch cannot run (op, dtype, argument forms), naming the
 * node; adds to @scratch_need (bytes per stream) what the instruction needs:
 * for attention, @attn_ws bytes (cuDNN's workspace) or, when it is < 0,
 * the math path's scratch. */
bool sg_cu_check_ins (const SgPlan *plan, const SgPlanIns *ins, bool exact, int64_t attn_ws,
                      uint64_t *scratch_need, GError **error);
/* Setup of instruction @i (the backend's and the profiler's): an attention
 * instruction gets its cuDNN plan when @st->dnn can run it (st->attn_plan[i],
 * counted in st->n_attn*), then sg_cu_check_ins sizes its scratch. Host work
 * only (plans are built here, never while a step is issued or captured).
 * SG_CUDA_ATTENTION=cudnn makes an attention instruction that cuDNN cannot
 * run an error instead of a fallback. */
bool sg_cu_prepare_ins (SgCuState *st, const SgPlan *plan, int32_t i, uint64_t *scratch_need,
                        GError **error);
/* One line: which path attention took (for the report's "kernels" and the
 * setup message); owned by the caller. */
char *sg_cu_attention_note (const SgCuState *st);
/* Queues one KERNEL instruction on its stream. */
bool sg_cu_run_kernel (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins, GError **error);
/* Queues one COLLECTIVE instruction on its stream (staging through the
 * stream's scratch when a view is not dense). */
bool sg_cu_run_collective (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins,
                           GError **error);

/* Row-major C = alpha * A @ B + beta * C over 2-D or 3-D (batched) strided
 * views; operands that are neither row- nor column-major are copied to
 * @scratch (@scratch_bytes) first. bf16/f16/f32 in, fp32 accumulation. */
bool sg_cu_gemm (cublasHandle_t h, cudaStream_t stream, const SgCuTensor *a, const SgCuTensor *b,
                 const SgCuTensor *c, float alpha, float beta, char *scratch,
                 uint64_t scratch_bytes, GError **error);
/* Scratch bytes sg_cu_gemm needs for these views (0 when none). */
uint64_t sg_cu_gemm_scratch_bytes (const SgCuTensor *a, const SgCuTensor *b);

/* Scaled dot-product attention on [B, H, S, D] views (K/V may have fewer
 * heads: grouped-query), PyTorch's "math" backend on cuBLAS: S = scale Q K^T
 * (fp32), masked softmax, O = P V with P (and the backward's dS) in the
 * operands' dtype, as FlashAttention rounds them; @fp32_math (exact mode):
 * bf16/f16 operands are widened first and every product runs in fp32, the
 * CPU reference's numerics. @lse fp32 [B, H, Sq(, 1)] may be NULL in the
 * forward; the backward recomputes P from it. @h: bound to @s by the caller.
 * @scratch: sg_cu_sdpa_scratch_bytes. */
bool sg_cu_sdpa_fwd (cublasHandle_t h, cudaStream_t s, const SgCuTensor *q, const SgCuTensor *k,
                     const SgCuTensor *v, const SgCuTensor *out, const SgCuTensor *lse, bool causal,
                     double scale, bool fp32_math, char *scratch, uint64_t scratch_bytes,
                     GError **error);
bool sg_cu_sdpa_bwd (cublasHandle_t h, cudaStream_t s, const SgCuTensor *dout,
                     const SgCuTensor *q, const SgCuTensor *k, const SgCuTensor *v,
                     const SgCuTensor *out, const SgCuTensor *lse, const SgCuTensor *dq,
                     const SgCuTensor *dk, const SgCuTensor *dv, bool causal, double scale,
                     bool fp32_math, char *scratch, uint64_t scratch_bytes, GError **error);
/* Scratch the forward (@backward false) or backward needs; 0 for views
 * that are not [B, H, S, D]. */
uint64_t sg_cu_sdpa_scratch_bytes (const SgCuTensor *q, const SgCuTensor *k, bool backward,
                                   bool fp32_math);

/* sg_cu_gemm on @sm_count SMs: cuBLASLt with CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET
 * (the plan's sm_count of a matmul), its workspace @ws of @ws_bytes. */
bool sg_cu_gemm_sms (cublasLtHandle_t lt, void *ws, uint64_t ws_bytes, int32_t sm_count,
                     cudaStream_t stream, const SgCuTensor *a, const SgCuTensor *b,
                     const SgCuTensor *c, float alpha, float beta, char *scratch,
                     uint64_t scratch_bytes, GError **error);

/* p2p.c: collective_permute. Bytes of the copy-engine flags the plan needs
 * (laid out after the scratch, in the one allocation every peer maps). */
uint64_t sg_cu_p2p_flag_bytes (const SgPlan *plan);
/* Maps the peers of every copy-engine step (CUDA IPC handles exchanged over
 * the groups' MPI communicators), zeroes the flags at @flags_off. Collective
 * over each group with a ce step. */
bool sg_cu_p2p_setup (SgCuState *st, SgRtContext *ctx, uint64_t flags_off, GError **error);
void sg_cu_p2p_destroy (SgCuState *st);
/* Queues one collective_permute step over dense @in / @out (@count elements
 * of NCCL type @t, @es bytes each) on its stream, over its transport. */
bool sg_cu_run_permute (SgCuState *st, const SgPlan *plan, const SgPlanIns *ins,
                        const SgCuTensor *in, const SgCuTensor *out, ncclDataType_t t,
                        size_t count, size_t es, GError **error);

/* NCCL type for @dtype; false when NCCL has none. */
bool sg_cu_nccl_type (SgDtype dtype, ncclDataType_t *out);
/* One communicator per plan group (unique id broadcast over the group's MPI
 * communicator). */
bool sg_cu_comms_init (SgCuState *st, SgRtContext *ctx, GError **error);
void sg_cu_comms_destroy (SgCuState *st, bool abort);
/* Polls @ev until done: false (with every communicator aborted) on an NCCL
 * async error or after @timeout_s (0 = none). */
bool sg_cu_wait_event (SgCuState *st, cudaEvent_t ev, double timeout_s, const char *what,
                       GError **error);

/* Watchdog: a thread that, while armed, aborts every communicator and the
 * job (MPI_Abort) with a message when the deadline passes. */
SgCuWatchdog *sg_cu_watchdog_start (SgCuState *st, int32_t rank);
void sg_cu_watchdog_arm (SgCuWatchdog *wd, double timeout_s, const char *what);
void sg_cu_watchdog_disarm (SgCuWatchdog *wd);
/* True once the deadline passed: the watchdog is ending the job (MPI_Abort
 * from two threads at once crashes Open MPI, so the caller must not). */
bool sg_cu_watchdog_fired (SgCuWatchdog *wd);
void sg_cu_watchdog_stop (SgCuWatchdog *wd);

/* Local rank from the launcher's environment (OMPI, MPICH, Slurm, torchrun),
 * else from MPI_Comm_split_type(SHARED); agreed device count (0 without a
 * driver). */
int sg_cu_local_rank (MPI_Comm world);
int sg_cu_device_count (void);
#endif
