/* kernels-private.h: shared by the files of the CPU kernel library only.
 *
 * The argument context of one kernel call and the entry points of the
 * op families that live in their own files (reductions and matmul in
 * kernels_linalg.c, attention in kernels_attn.c).
 */
#pragma once

#include "kernels.h"

typedef struct {
  const char *node;
  const cJSON *args, *kwargs;
  SgTensorResolver resolve;
  void *ud;
  GError **error;
} KCtx;

/* args[i] as a tensor (a reference), dtype checked; false with error. */
bool kargs_tensor (const KCtx *k, int i, SgTensor *t);
/* args[i], else kwargs[kw] (either may be absent: i < 0 / kw NULL). */
const cJSON *kargs_get (const KCtx *k, int i, const char *kw);
double kargs_number (const KCtx *k, int i, const char *kw, double dflt);
bool kargs_bool (const KCtx *k, int i, const char *kw, bool dflt);
/* An int or a list of ints; returns the count, -1 when absent/other. */
int kargs_ints (const KCtx *k, int i, const char *kw, int64_t *out, int max);
/* Sets an SG_CPU_ERROR_ARGS error naming the node; returns false. */
bool kfail (const KCtx *k, const char *what);

bool k_reduce (const KCtx *k, SgOpKind op, SgTensor *out);
bool k_matmul (const KCtx *k, SgOpKind op, SgTensor *out);
bool k_sdpa_check (const KCtx *k, SgOpKind op);
bool k_sdpa_fwd (const KCtx *k, SgOpKind op, SgTensor *outs, int n_out);
bool k_sdpa_bwd (const KCtx *k, SgOpKind op, SgTensor *outs, int n_out);
