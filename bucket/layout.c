/* layout.c: offsets and strides of members inside a bucket's flat buffers.
 *
 * Mirrors the flat-buffer bucketing of PyTorch's bucketing passes
 * (torch/_inductor/fx_passes/bucketing.py: all_gather buckets copy out of a
 * rank-major result, reduce_scatter buckets interleave chunks per rank), in
 * our own terms: docs/ops.md defines bucket_pack / bucket_unpack, these
 * functions compute their arguments and are the one place that arithmetic
 * lives (the rewrite, the tests and the docs agree on it).
 * Requires: nothing (pure). Invalidates: nothing.
 */
#include "bucket.h"

G_DEFINE_QUARK (sg-bucket-error-quark, sg_bucket_error)

bool
sg_bucket_layout (SgOpKind kind, int32_t k, const uint64_t *in_numel, int32_t n,
                  uint64_t *offsets, uint64_t *out_numel, SgBucketLayout *layout, GError **error)
{
  g_return_val_if_fail (k >= 1 && n >= 1 && in_numel && offsets && out_numel && layout, false);
  SgBucketLayout l = { .kind = kind, .k = k };
  switch (kind) {
  case SG_OP_ALL_GATHER: l.interleave = false, l.unpack_k = k; break;
  case SG_OP_REDUCE_SCATTER: l.interleave = true, l.unpack_k = 1; break;
  case SG_OP_ALL_REDUCE: l.interleave = false, l.unpack_k = 1; break;
  default:
    g_set_error (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_LAYOUT,
                 "bucket: %s collectives cannot be bucketed (all_gather, reduce_scatter, "
                 "all_reduce only)", sg_op_name (kind));
    return false;
  }
  uint64_t off = 0, packed = 0;
  for (int32_t i = 0; i < n; i++) {
    uint64_t per;
    if (kind == SG_OP_REDUCE_SCATTER) {
      if (in_numel[i] % (uint64_t)k) {
        g_set_error (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_LAYOUT,
                     "bucket: member %d: reduce_scatter input of %" G_GUINT64_FORMAT
                     " elements is not divisible by the group size %d", i, in_numel[i], k);
        return false;
      }
      per = in_numel[i] / (uint64_t)k; /* output elements per rank */
    } else {
      per = in_numel[i];
    }
    offsets[i] = off;
    out_numel[i] = per;
    off += per;
    packed += in_numel[i];
  }
  l.pack_numel = packed;
  switch (kind) {
  case SG_OP_ALL_GATHER: l.out_numel = packed * (uint64_t)k; break;
  case SG_OP_REDUCE_SCATTER: l.out_numel = packed / (uint64_t)k; break;
  default: l.out_numel = packed; break;
  }
  *layout = l;
  return true;
}

uint64_t
sg_bucket_pack_index (const SgBucketLayout *l, const uint64_t *offsets, const uint64_t *in_numel,
                      int32_t i, uint64_t e)
{
  g_return_val_if_fail (e < in_numel[i], 0);
  if (!l->interleave)
    return offsets[i] + e;
  /* Chunk r of input i goes to rank r's segment of the packed buffer; the
   * segment holds chunk r of every member in member order. */
  uint64_t chunk = in_numel[i] / (uint64_t)l->k;
  uint64_t r = e / chunk, j = e % chunk;
  return r * (l->pack_numel / (uint64_t)l->k) + offsets[i] + j;
}

uint64_t
sg_bucket_unpack_index (const SgBucketLayout *l, const uint64_t *offsets,
                        const uint64_t *out_numel, int32_t i, uint64_t e)
{
  uint64_t numel = out_numel[i];
  g_return_val_if_fail (e < numel * (uint64_t)l->unpack_k, 0);
  uint64_t r = e / numel, j = e % numel;
  return r * (l->out_numel / (uint64_t)l->unpack_k) + offsets[i] + j;
}
