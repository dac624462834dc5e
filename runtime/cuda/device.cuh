/* device.cuh: device helpers shared by the backend's .cu files (kernels.cu,
 * reduce.cu, attn_kernels.cu): the view descriptor, dtype loads/stores
 * widening to fp32 (per element at run time, or 16 bytes at a time for a
 * compile-time type), logical-index -> offset, a block reduction, launch
 * sizing.
 * Internal to runtime/cuda. Requires: cuda-private.h. Invalidates: nothing.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <string.h>

#include "cuda-private.h"

namespace {

constexpr int kThreads = 256;

struct Desc {
  char *ptr;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[SG_CU_MAX_DIMS];
  int64_t stride[SG_CU_MAX_DIMS];
};

__device__ __forceinline__ float
ld (const char *p, int64_t i, int32_t dt)
{
  switch (dt) {
  case SG_DTYPE_F32: return reinterpret_cast<const float *> (p)[i];
  case SG_DTYPE_BF16: return __bfloat162float (reinterpret_cast<const __nv_bfloat16 *> (p)[i]);
  case SG_DTYPE_F16: return __half2float (reinterpret_cast<const __half *> (p)[i]);
  case SG_DTYPE_F64: return (float)reinterpret_cast<const double *> (p)[i];
  case SG_DTYPE_I64: return (float)reinterpret_cast<const long long *> (p)[i];
  case SG_DTYPE_I32: return (float)reinterpret_cast<const int *> (p)[i];
  case SG_DTYPE_I16: return (float)reinterpret_cast<const short *> (p)[i];
  case SG_DTYPE_I8: return (float)reinterpret_cast<const signed char *> (p)[i];
  case SG_DTYPE_U8:
  case SG_DTYPE_BOOL: return (float)reinterpret_cast<const unsigned char *> (p)[i];
  default: return 0.f;
  }
}

__device__ __forceinline__ void
st (char *p, int64_t i, int32_t dt, float v)
{
  switch (dt) {
  case SG_DTYPE_F32: reinterpret_cast<float *> (p)[i] = v; break;
  case SG_DTYPE_BF16: reinterpret_cast<__nv_bfloat16 *> (p)[i] = __float2bfloat16_rn (v); break;
  case SG_DTYPE_F16: reinterpret_cast<__half *> (p)[i] = __float2half_rn (v); break;
  case SG_DTYPE_F64: reinterpret_cast<double *> (p)[i] = (double)v; break;
  case SG_DTYPE_I64: reinterpret_cast<long long *> (p)[i] = (long long)v; break;
  case SG_DTYPE_I32: reinterpret_cast<int *> (p)[i] = (int)v; break;
  case SG_DTYPE_I16: reinterpret_cast<short *> (p)[i] = (short)v; break;
  case SG_DTYPE_I8: reinterpret_cast<signed char *> (p)[i] = (signed char)v; break;
  case SG_DTYPE_U8: reinterpret_cast<unsigned char *> (p)[i] = (unsigned char)v; break;
  case SG_DTYPE_BOOL: reinterpret_cast<unsigned char *> (p)[i] = v != 0.f; break;
  default: break;
  }
}

/* Element offset of logical (row-major) index @lin in @d. I = int when the
 * launch checked that every index and offset fits (fits32): 32-bit division
 * is several times cheaper than 64-bit on the GPU. */
template <typename I>
__device__ __forceinline__ int64_t
offset_of (const Desc &d, int64_t lin64)
{
  I lin = (I)lin64, off = 0;
  for (int k = d.ndim - 1; k >= 0; k--) {
    const I s = (I)d.shape[k];
    const I q = lin / s;
    off += (lin - q * s) * (I)d.stride[k];
    lin = q;
  }
  return (int64_t)off;
}

/* fp32 <-> the 16-bit and 32-bit float types, compile-time dispatch (the
 * vectorized paths of kernels.cu and reduce.cu). */
template <typename T> __device__ __forceinline__ float to_f (T v);
template <> __device__ __forceinline__ float to_f<float> (float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16> (__nv_bfloat16 v)
{
  return __bfloat162float (v);
}
template <> __device__ __forceinline__ float to_f<__half> (__half v) { return __half2float (v); }
template <typename T> __device__ __forceinline__ T from_f (float v);
template <> __device__ __forceinline__ float from_f<float> (float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16> (float v)
{
  return __float2bfloat16_rn (v);
}
template <> __device__ __forceinline__ __half from_f<__half> (float v) { return __float2half_rn (v); }

/* The V = 16 / sizeof(T) elements at @p (16-byte aligned), one load, as fp32. */
template <typename T, int V>
__device__ __forceinline__ void
load16 (const T *p, float (&v)[V])
{
  union {
    uint4 u;
    T e[V];
  } w;
  w.u = *reinterpret_cast<const uint4 *> (p);
#pragma unroll
  for (int j = 0; j < V; j++)
    v[j] = to_f<T> (w.e[j]);
}

__device__ float
block_reduce (float v, bool is_max)
{
  __shared__ float sh[32];
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync (0xffffffffu, v, o);
    v = is_max ? fmaxf (v, w) : v + w;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
    sh[warp] = v;
  __syncthreads ();
  const int nw = blockDim.x >> 5;
  v = threadIdx.x < nw ? sh[threadIdx.x] : (is_max ? -INFINITY : 0.f);
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) {
      const float w = __shfl_xor_sync (0xffffffffu, v, o);
      v = is_max ? fmaxf (v, w) : v + w;
    }
  return v;
}

/* Block (o, g) reduces slice g of G of output o's elements. G == 1: the
 * result goes to the output; else to partials[o * G + g] for finish_kernel. */
Desc
to_desc (const SgCuTensor *t)
{
  Desc d;
  d.ptr = static_cast<char *> (t->ptr);
  d.dtype = t->dtype;
  d.ndim = t->ndim;
  for (int k = 0; k < SG_CU_MAX_DIMS; k++) {
    d.shape[k] = k < t->ndim ? t->shape[k] : 1;
    d.stride[k] = k < t->ndim ? t->stride[k] : 0;
  }
  return d;
}

/* @t seen with @out's shape: aligned right, size-1 or missing dims get
 * stride 0. */
unsigned
grid_for (int64_t n)
{
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65535 * 8)
    blocks = 65535 * 8;
  return (unsigned)(blocks < 1 ? 1 : blocks);
}

/* Every logical index and element offset of @d fits in an int. */
bool
fits32 (const Desc &d)
{
  int64_t n = 1, span = 0;
  for (int k = 0; k < d.ndim; k++) {
    n *= d.shape[k];
    span += (d.shape[k] - 1) * (d.stride[k] < 0 ? -d.stride[k] : d.stride[k]);
  }
  return n < INT32_MAX && span < INT32_MAX;
}

} /* namespace */
