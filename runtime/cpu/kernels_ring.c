/* kernels_ring.c: schedgraph.rank_roll, the one kernel that depends on the
 * rank (docs/ops.md): x's dim 0 in k = group-size equal blocks; output
 * block b is input block sg_rank_roll_block (b, k, shift, sign, group rank).
 * Mirrors XLA's dynamic-slice/dynamic-update-slice at a partition-id
 * offset, as collective matmul uses them. A copy: the same bits on every
 * backend. Callers that know the rank (the CPU backend, tools/sgeval) call
 * it; sg_cpu_kernel refuses the op.
 * Requires: args as the graph/plan states them. Invalidates: nothing.
 */
#include <string.h>

#include "kernels-private.h"

bool
sg_cpu_rank_roll (const char *node, const cJSON *args, SgTensorResolver resolve, void *ud,
                  int32_t group_rank, int32_t group_size, SgTensor *out, GError **error)
{
  KCtx kc = { node ? node : "?", args, NULL, resolve, ud, error };
  const KCtx *k = &kc;
  SgTensor in;
  if (!kargs_tensor (k, 0, &in))
    return false;
  const cJSON *shift = kargs_get (k, 1, NULL), *sign = kargs_get (k, 2, NULL);
  if (!cJSON_IsNumber (shift) || !cJSON_IsNumber (sign) || group_size < 1 ||
      group_rank < 0 || group_rank >= group_size)
    return kfail (k, "rank_roll needs (input, shift, sign, group) and this rank's group rank");
  const uint64_t n = sg_tensor_numel (&in);
  if (in.ndim < 1 || in.shape[0] % group_size != 0 || sg_tensor_numel (out) != n ||
      out->dtype != in.dtype)
    return kfail (k, "rank_roll: dim 0 must split into the group's blocks, the output match");
  const size_t es = sg_dtype_size (in.dtype);
  const uint64_t blk = n / (uint64_t)group_size * es;
  char *src = g_malloc (n * es + 1), *dst = g_malloc (n * es + 1);
  sg_tensor_pack (&in, src);
  for (int64_t b = 0; b < group_size; b++) {
    const int64_t from = sg_rank_roll_block (b, group_size, (int64_t)shift->valuedouble,
                                             (int64_t)sign->valuedouble, group_rank);
    memcpy (dst + (uint64_t)b * blk, src + (uint64_t)from * blk, blk);
  }
  sg_tensor_unpack (out, dst);
  g_free (src);
  g_free (dst);
  return true;
}
