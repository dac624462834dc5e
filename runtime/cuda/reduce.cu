/* reduce.cu: the CUDA backend's reductions (sum, mean, amax over a set of
 * dims): one block per output element, long reductions into few outputs in
 * two passes. Every output is summed in one fixed order: results do not
 * depend on timing.
 * Mirrors the CPU backend's reference reductions: fp32 accumulation, one
 * rounding to the output dtype.
 * Requires: pointers in device memory of the current device.
 * Invalidates: nothing (all work is queued on the caller's stream).
 */
#include "device.cuh"

/* ---- reductions: one block per output element ---- */

namespace {

struct RedArgs {
  Desc kept_in;   /* kept dims of the input: shape, input strides */
  Desc kept_out;  /* the same dims with the output's strides */
  Desc red;       /* reduced dims of the input: shape, strides */
  char *in_ptr;
  int32_t in_dtype;
  int op;
  int64_t n_out, n_red;
};

template <typename I>
__global__ void
reduce_kernel (const RedArgs p, char *out_ptr, int32_t out_dtype, float *partials, int64_t G,
               int red_lin)
{
  const bool is_max = p.op == SG_CU_RED_AMAX;
  const int64_t per = (p.n_red + G - 1) / G;
  for (int64_t blk = blockIdx.x; blk < p.n_out * G; blk += gridDim.x) {
    const int64_t o = blk / G, g = blk % G;
    const int64_t base = offset_of<I> (p.kept_in, o);
    const int64_t r0 = g * per, r1 = r0 + per < p.n_red ? r0 + per : p.n_red;
    float acc = is_max ? -INFINITY : 0.f;
#pragma unroll 4
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
      const float x =
        ld (p.in_ptr, base + (red_lin ? r : offset_of<I> (p.red, r)), p.in_dtype);
      acc = is_max ? fmaxf (acc, x) : acc + x;
    }
    acc = block_reduce (acc, is_max);
    if (threadIdx.x == 0) {
      if (G > 1) {
        partials[blk] = acc;
      } else {
        if (p.op == SG_CU_RED_MEAN)
          acc /= (float)p.n_red;
        st (out_ptr, offset_of<I> (p.kept_out, o), out_dtype, acc);
      }
    }
    __syncthreads ();
  }
}

template <typename I>
__global__ void
finish_kernel (const RedArgs p, char *out_ptr, int32_t out_dtype, const float *partials,
               int64_t G)
{
  const bool is_max = p.op == SG_CU_RED_AMAX;
  for (int64_t o = blockIdx.x; o < p.n_out; o += gridDim.x) {
    float acc = is_max ? -INFINITY : 0.f;
    for (int64_t g = threadIdx.x; g < G; g += blockDim.x)
      acc = is_max ? fmaxf (acc, partials[o * G + g]) : acc + partials[o * G + g];
    acc = block_reduce (acc, is_max);
    if (threadIdx.x == 0) {
      if (p.op == SG_CU_RED_MEAN)
        acc /= (float)p.n_red;
      st (out_ptr, offset_of<I> (p.kept_out, o), out_dtype, acc);
    }
    __syncthreads ();
  }
}

/* Slices per output: long reductions into few outputs are spread over
 * several blocks (two passes, fixed order: deterministic). */
int64_t
reduce_split (int64_t n_out, int64_t n_red)
{
  if (n_red < 32768 || n_out >= 264)
    return 1;
  int64_t g = n_red / 8192;
  return g > 256 ? 256 : g;
}

} /* namespace */

extern "C" cudaError_t
sg_cu_reduce (SgCuRedOp op, const SgCuTensor *out, const SgCuTensor *in, uint32_t reduce_mask,
              float *partials, int64_t partial_cap, cudaStream_t stream)
{
  RedArgs p;
  memset (&p, 0, sizeof p);
  p.in_ptr = static_cast<char *> (in->ptr);
  p.in_dtype = in->dtype;
  p.op = op;
  const bool keepdim = out->ndim == in->ndim;
  int nk = 0, nr = 0, od = 0;
  for (int k = 0; k < in->ndim; k++) {
    if (reduce_mask & (1u << k)) {
      p.red.shape[nr] = in->shape[k];
      p.red.stride[nr] = in->stride[k];
      nr++;
      if (keepdim)
        od++;
    } else {
      if (od >= out->ndim || out->shape[od] != in->shape[k])
        return cudaErrorInvalidValue;
      p.kept_in.shape[nk] = in->shape[k];
      p.kept_in.stride[nk] = in->stride[k];
      p.kept_out.shape[nk] = in->shape[k];
      p.kept_out.stride[nk] = out->stride[od];
      nk++;
      od++;
    }
  }
  p.kept_in.ndim = p.kept_out.ndim = nk;
  p.red.ndim = nr;
  p.n_out = 1;
  for (int k = 0; k < nk; k++)
    p.n_out *= p.kept_in.shape[k];
  p.n_red = 1;
  for (int k = 0; k < nr; k++)
    p.n_red *= p.red.shape[k];
  if (p.n_out == 0)
    return cudaSuccess;
  /* reduced dims dense and innermost-contiguous: offset of r is r */
  int red_lin = 1;
  int64_t expect = 1;
  for (int k = nr - 1; k >= 0; k--) {
    if (p.red.shape[k] != 1 && p.red.stride[k] != expect)
      red_lin = 0;
    expect *= p.red.shape[k];
  }
  int64_t G = reduce_split (p.n_out, p.n_red);
  if (G > 1 && (!partials || p.n_out * G > partial_cap))
    G = 1;
  const int64_t blocks = p.n_out * G;
  const unsigned grid = (unsigned)(blocks > 65535 * 16 ? 65535 * 16 : blocks);
  Desc full = to_desc (in);
  const bool small = fits32 (full) && fits32 (to_desc (out));
  char *optr = static_cast<char *> (out->ptr);
  if (small)
    reduce_kernel<int><<<grid, kThreads, 0, stream>>> (p, optr, out->dtype, partials, G, red_lin);
  else
    reduce_kernel<int64_t><<<grid, kThreads, 0, stream>>> (p, optr, out->dtype, partials, G,
                                                           red_lin);
  if (G > 1) {
    const unsigned g2 = (unsigned)(p.n_out > 65535 * 16 ? 65535 * 16 : p.n_out);
    if (small)
      finish_kernel<int><<<g2, kThreads, 0, stream>>> (p, optr, out->dtype, partials, G);
    else
      finish_kernel<int64_t><<<g2, kThreads, 0, stream>>> (p, optr, out->dtype, partials, G);
  }
  return cudaGetLastError ();
}

extern "C" int64_t
sg_cu_reduce_partials (const SgCuTensor *out, const SgCuTensor *in)
{
  const int64_t n_out = sg_cu_numel (out), n_in = sg_cu_numel (in);
  const int64_t n_red = n_out > 0 ? n_in / n_out : 0;
  const int64_t G = reduce_split (n_out, n_red);
  return G > 1 ? n_out * G : 0;
}
