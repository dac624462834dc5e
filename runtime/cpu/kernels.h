/* kernels.h: the CPU kernel library (runtime/cpu), on plain strided tensors.
 *
 * Used by the CPU backend (plan values) and by tools/sgeval (graph nodes):
 * both resolve argument references ({"value": id} / {"node": name}) through
 * a callback, so the arithmetic is one code path. Numerics: loads widen to
 * float (double for reductions), outputs are rounded once to their dtype
 * (bf16/f16 round-to-nearest-even); loops run in a fixed order, so results
 * do not depend on the schedule that called them. Mirrors ATen's CPU
 * semantics for the ops of ops.h (broadcasting, alpha/beta, keepdim, SDPA
 * tuple schemas).
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops.h"

G_BEGIN_DECLS

#define SG_CPU_MAX_DIMS 12

#define SG_CPU_ERROR (sg_cpu_error_quark ())
GQuark sg_cpu_error_quark (void);
typedef enum {
  SG_CPU_ERROR_UNSUPPORTED, /* op, dtype or argument form the library does not run */
  SG_CPU_ERROR_ARGS,        /* arguments that contradict the op's schema or shapes */
} SgCpuError;

/* A strided view of memory; data points at element (0, ..., 0). Strides in
 * elements, may be 0 (expand) or permuted (transpose). ndim 0 is a scalar. */
typedef struct {
  void *data;
  SgDtype dtype;
  int ndim;
  int64_t shape[SG_CPU_MAX_DIMS];
  int64_t stride[SG_CPU_MAX_DIMS];
} SgTensor;

/* Maps one reference object to a tensor; false with @error when it names
 * nothing or no tensor. */
typedef bool (*SgTensorResolver) (const cJSON *ref, SgTensor *out, void *ud, GError **error);

/* True when @item is a reference object ({"value": ...} or {"node": ...}). */
bool sg_cpu_is_ref (const cJSON *item);

/* Runs op @op of node @node (for messages) with @args/@kwargs, writing
 * @outs (n_out tensors already allocated with their meta's shape, stride
 * and dtype; an element with data == NULL is a non-tensor tuple slot).
 * View ops run as copies into @outs (a consumer that wants aliasing does
 * not call them). Collectives and waits are not kernels: false. */
bool sg_cpu_kernel (SgOpKind op, const char *node, const cJSON *args, const cJSON *kwargs,
                    SgTensorResolver resolve, void *ud, SgTensor *outs, int n_out,
                    GError **error);

/* schedgraph.rank_roll (docs/ops.md) as group rank @group_rank of a group
 * of @group_size sees it: the one kernel that depends on the rank, so its
 * callers (the CPU backend, sgeval) pass it; sg_cpu_kernel refuses the op. */
bool sg_cpu_rank_roll (const char *node, const cJSON *args, SgTensorResolver resolve, void *ud,
                       int32_t group_rank, int32_t group_size, SgTensor *out, GError **error);

/* Whether sg_cpu_kernel runs @op at all, and for ops with argument forms
 * it rejects (attention with a bias or dropout), whether these @args do.
 * False with @error naming @node. Used before any work starts. */
bool sg_cpu_kernel_check (SgOpKind op, const char *node, const cJSON *args,
                          const cJSON *kwargs, GError **error);
/* Dtypes the library loads and stores. */
bool sg_cpu_dtype_supported (SgDtype dtype);

/* --- tensor helpers (tensor.c) ------------------------------------------ */

uint64_t sg_tensor_numel (const SgTensor *t);
bool sg_tensor_is_contiguous (const SgTensor *t);
/* Bytes from data to one past the farthest element (0 for numel 0). */
uint64_t sg_tensor_extent_bytes (const SgTensor *t);
void sg_tensor_set_contiguous (SgTensor *t);

float sg_bf16_to_float (uint16_t h);
uint16_t sg_float_to_bf16 (float f); /* round to nearest even; NaN stays NaN */

/* Element @off (in elements from data) widened to double / stored rounded. */
double sg_tensor_load (SgDtype dtype, const void *data, int64_t off);
void sg_tensor_store (SgDtype dtype, void *data, int64_t off, double v);

/* Logical row-major element k of @t -> its element offset. */
int64_t sg_tensor_offset_of (const SgTensor *t, uint64_t k);

/* Copies @t's elements in row-major order into contiguous @dst / from
 * contiguous @src into @t (raw bytes, same dtype). */
void sg_tensor_pack (const SgTensor *t, void *dst);
void sg_tensor_unpack (const SgTensor *t, const void *src);
/* Row-major element-wise copy with dtype conversion; equal numel. */
void sg_tensor_copy_convert (const SgTensor *dst, const SgTensor *src);
/* Loads @t in row-major order as floats (contiguous @dst, numel long). */
void sg_tensor_to_float (const SgTensor *t, float *dst);
/* Stores contiguous floats into @t in row-major order (rounded). */
void sg_tensor_from_float (const SgTensor *t, const float *src);
void sg_tensor_fill (const SgTensor *t, double v);

G_END_DECLS
