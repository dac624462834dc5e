/* kernels.cu: the CUDA kernels of the backend's non-GEMM ops.
 *
 * What: strided elementwise maps with numpy broadcasting, reductions over a
 * set of dims, flat-range copies between any two views (bucket pack/unpack,
 * collective staging, cat), and a straightforward attention: one warp per
 * query row, online softmax (Milakov & Gimelshein 2018, as FlashAttention's
 * forward), backward recomputing the probabilities from the log-sum-exp as
 * FlashAttention-2's backward does (Dao 2023, alg. 2) but one row per warp.
 * Mirrors the CPU backend's reference kernels: same formulas, fp32
 * accumulation, one rounding to the output dtype.
 * Requires: pointers in device memory of the current device.
 * Invalidates: nothing (all work is queued on the caller's stream).
 */
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

/* Element offset of logical (row-major) index @lin in @d. */
__device__ __forceinline__ int64_t
offset_of (const Desc &d, int64_t lin)
{
  int64_t off = 0;
  for (int k = d.ndim - 1; k >= 0; k--) {
    const int64_t s = d.shape[k];
    const int64_t q = lin / s;
    off += (lin - q * s) * d.stride[k];
    lin = q;
  }
  return off;
}

__device__ __forceinline__ float
sigmoidf_ (float x)
{
  return 1.f / (1.f + expf (-x));
}

__device__ __forceinline__ float
apply (int op, float a, float b, float s0)
{
  switch (op) {
  case SG_CU_COPY: return a;
  case SG_CU_FILL: return s0;
  case SG_CU_ADD: return a + s0 * b;
  case SG_CU_SUB: return a - s0 * b;
  case SG_CU_MUL: return a * b;
  case SG_CU_DIV: return a / b;
  case SG_CU_ADD_S: return a + s0;
  case SG_CU_MUL_S: return a * s0;
  case SG_CU_DIV_S: return a / s0;
  case SG_CU_RSUB_S: return s0 - a;
  case SG_CU_POW_S: return s0 == 2.f ? a * a : (s0 == 1.f ? a : powf (a, s0));
  case SG_CU_RSQRT: return rsqrtf (a);
  case SG_CU_SQRT: return sqrtf (a);
  case SG_CU_EXP: return expf (a);
  case SG_CU_NEG: return -a;
  case SG_CU_RECIP: return 1.f / a;
  case SG_CU_SILU: return a * sigmoidf_ (a);
  case SG_CU_SILU_BWD: {
    const float sg = sigmoidf_ (b);
    return a * sg * (1.f + b * (1.f - sg));
  }
  case SG_CU_GELU:
    if (s0 != 0.f) {
      const float k = 0.7978845608028654f * (a + 0.044715f * a * a * a);
      return 0.5f * a * (1.f + tanhf (k));
    }
    return 0.5f * a * (1.f + erff (a * 0.7071067811865476f));
  case SG_CU_GELU_BWD:
    if (s0 != 0.f) {
      const float x = b, x3 = x * x * x;
      const float inner = 0.7978845608028654f * (x + 0.044715f * x3);
      const float t = tanhf (inner);
      const float dinner = 0.7978845608028654f * (1.f + 3.f * 0.044715f * x * x);
      return a * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * dinner);
    } else {
      const float x = b;
      const float cdf = 0.5f * (1.f + erff (x * 0.7071067811865476f));
      const float pdf = 0.3989422804014327f * expf (-0.5f * x * x);
      return a * (cdf + x * pdf);
    }
  case SG_CU_RELU: return a > 0.f ? a : 0.f;
  case SG_CU_SIGMOID: return sigmoidf_ (a);
  case SG_CU_TANH: return tanhf (a);
  default: return 0.f;
  }
}

struct MapArgs {
  Desc out, a, b; /* a, b broadcast to out's ndim (stride 0 where repeated) */
  int op;
  int has_a, has_b;
  int linear; /* every operand dense row-major with out's shape (or absent) */
  float s0;
  int64_t n;
};

__global__ void
map_kernel (const MapArgs p)
{
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t oo, oa, ob;
    if (p.linear) {
      oo = oa = ob = i;
    } else {
      oo = offset_of (p.out, i);
      oa = p.has_a ? offset_of (p.a, i) : 0;
      ob = p.has_b ? offset_of (p.b, i) : 0;
    }
    const float a = p.has_a ? ld (p.a.ptr, oa, p.a.dtype) : 0.f;
    const float b = p.has_b ? ld (p.b.ptr, ob, p.b.dtype) : 0.f;
    st (p.out.ptr, oo, p.out.dtype, apply (p.op, a, b, p.s0));
  }
}

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
Desc
broadcast_to (const SgCuTensor *t, const SgCuTensor *out)
{
  Desc d = to_desc (out);
  d.ptr = static_cast<char *> (t->ptr);
  d.dtype = t->dtype;
  const int shift = out->ndim - t->ndim;
  for (int k = 0; k < out->ndim; k++) {
    const int j = k - shift;
    d.stride[k] = (j < 0 || t->shape[j] == 1) ? 0 : t->stride[j];
  }
  return d;
}

bool
same_layout (const SgCuTensor *t, const SgCuTensor *out)
{
  if (t->ndim != out->ndim)
    return false;
  for (int k = 0; k < t->ndim; k++)
    if (t->shape[k] != out->shape[k] || (t->shape[k] != 1 && t->stride[k] != out->stride[k]))
      return false;
  return true;
}

unsigned
grid_for (int64_t n)
{
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65535 * 8)
    blocks = 65535 * 8;
  return (unsigned)(blocks < 1 ? 1 : blocks);
}

} /* namespace */

extern "C" int64_t
sg_cu_numel (const SgCuTensor *t)
{
  int64_t n = 1;
  for (int k = 0; k < t->ndim; k++)
    n *= t->shape[k];
  return n;
}

extern "C" bool
sg_cu_is_contiguous (const SgCuTensor *t)
{
  int64_t expect = 1;
  for (int k = t->ndim - 1; k >= 0; k--) {
    if (t->shape[k] != 1 && t->stride[k] != expect)
      return false;
    expect *= t->shape[k];
  }
  return true;
}

extern "C" cudaError_t
sg_cu_map (SgCuMapOp op, const SgCuTensor *out, const SgCuTensor *a, const SgCuTensor *b,
           double s0, cudaStream_t stream)
{
  if (out->ndim > SG_CU_MAX_DIMS || (a && a->ndim > out->ndim) || (b && b->ndim > out->ndim))
    return cudaErrorInvalidValue;
  MapArgs p;
  p.out = to_desc (out);
  p.has_a = a != nullptr;
  p.has_b = b != nullptr;
  p.a = a ? broadcast_to (a, out) : p.out;
  p.b = b ? broadcast_to (b, out) : p.out;
  p.op = op;
  p.s0 = (float)s0;
  p.n = sg_cu_numel (out);
  p.linear = sg_cu_is_contiguous (out) && (!a || same_layout (a, out)) &&
             (!b || same_layout (b, out));
  if (p.n == 0)
    return cudaSuccess;
  map_kernel<<<grid_for (p.n), kThreads, 0, stream>>> (p);
  return cudaGetLastError ();
}

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

__global__ void
reduce_kernel (const RedArgs p, char *out_ptr, int32_t out_dtype)
{
  const bool is_max = p.op == SG_CU_RED_AMAX;
  for (int64_t o = blockIdx.x; o < p.n_out; o += gridDim.x) {
    const int64_t base = offset_of (p.kept_in, o);
    float acc = is_max ? -INFINITY : 0.f;
    for (int64_t r = threadIdx.x; r < p.n_red; r += blockDim.x) {
      const float x = ld (p.in_ptr, base + offset_of (p.red, r), p.in_dtype);
      acc = is_max ? fmaxf (acc, x) : acc + x;
    }
    acc = block_reduce (acc, is_max);
    if (threadIdx.x == 0) {
      if (p.op == SG_CU_RED_MEAN)
        acc /= (float)p.n_red;
      st (out_ptr, offset_of (p.kept_out, o), out_dtype, acc);
    }
    __syncthreads ();
  }
}

} /* namespace */

extern "C" cudaError_t
sg_cu_reduce (SgCuRedOp op, const SgCuTensor *out, const SgCuTensor *in, uint32_t reduce_mask,
              cudaStream_t stream)
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
  const unsigned grid = (unsigned)(p.n_out > 65535 * 16 ? 65535 * 16 : p.n_out);
  reduce_kernel<<<grid, kThreads, 0, stream>>> (p, static_cast<char *> (out->ptr), out->dtype);
  return cudaGetLastError ();
}

/* ---- flat-range copies ---- */

namespace {

__global__ void
copy_range_kernel (const Desc out, int64_t out_start, const Desc in, int64_t in_start, int64_t n,
                   int out_lin, int in_lin)
{
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
       j += (int64_t)gridDim.x * blockDim.x) {
    const int64_t oi = out_lin ? out_start + j : offset_of (out, out_start + j);
    const int64_t ii = in_lin ? in_start + j : offset_of (in, in_start + j);
    st (out.ptr, oi, out.dtype, ld (in.ptr, ii, in.dtype));
  }
}

} /* namespace */

extern "C" cudaError_t
sg_cu_copy_range (const SgCuTensor *out, int64_t out_start, const SgCuTensor *in, int64_t in_start,
                  int64_t n, cudaStream_t stream)
{
  if (n <= 0)
    return cudaSuccess;
  if (out_start + n > sg_cu_numel (out) || in_start + n > sg_cu_numel (in))
    return cudaErrorInvalidValue;
  const bool ol = sg_cu_is_contiguous (out), il = sg_cu_is_contiguous (in);
  if (ol && il && out->dtype == in->dtype) {
    const size_t es = sg_dtype_size ((SgDtype)in->dtype);
    char *dst = static_cast<char *> (out->ptr) + out_start * es;
    const char *src = static_cast<const char *> (in->ptr) + in_start * es;
    return cudaMemcpyAsync (dst, src, (size_t)n * es, cudaMemcpyDeviceToDevice, stream);
  }
  copy_range_kernel<<<grid_for (n), kThreads, 0, stream>>> (to_desc (out), out_start, to_desc (in),
                                                             in_start, n, ol, il);
  return cudaGetLastError ();
}

/* ---- attention ---- */

namespace {

constexpr int kMaxD = 256;
constexpr int kPerLane = kMaxD / 32;

struct Attn {
  Desc q, k, v, o, lse, dout, dq, dk, dv;
  int64_t B, H, Hkv, Sq, Sk, D;
  int causal, has_lse;
  float scale;
  float *delta; /* [B, H, Sq] */
};

__device__ __forceinline__ int64_t
off4 (const Desc &d, int64_t b, int64_t h, int64_t s)
{
  return b * d.stride[0] + h * d.stride[1] + s * d.stride[2];
}

__device__ __forceinline__ float
warp_sum (float v)
{
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  return v;
}

/* Keys row i may see: top-left causal alignment, as torch's is_causal. */
__device__ __forceinline__ int64_t
key_end (const Attn &a, int64_t i)
{
  return a.causal ? (i + 1 < a.Sk ? i + 1 : a.Sk) : a.Sk;
}

__device__ __forceinline__ int64_t
lse_off (const Attn &a, int64_t b, int64_t h, int64_t i)
{
  return b * a.lse.stride[0] + h * a.lse.stride[1] + i * a.lse.stride[2];
}

__global__ void
sdpa_fwd_kernel (const Attn a)
{
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= a.B * a.H * a.Sq)
    return;
  const int64_t i = row % a.Sq, h = (row / a.Sq) % a.H, b = row / (a.Sq * a.H);
  const int64_t hk = h / (a.H / a.Hkv);
  float q[kPerLane], acc[kPerLane];
  const int64_t qo = off4 (a.q, b, h, i);
#pragma unroll
  for (int t = 0; t < kPerLane; t++) {
    const int64_t d = lane + 32 * t;
    q[t] = d < a.D ? ld (a.q.ptr, qo + d * a.q.stride[3], a.q.dtype) * a.scale : 0.f;
    acc[t] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int64_t end = key_end (a, i);
  for (int64_t j = 0; j < end; j++) {
    const int64_t ko = off4 (a.k, b, hk, j), vo = off4 (a.v, b, hk, j);
    float s = 0.f;
#pragma unroll
    for (int t = 0; t < kPerLane; t++) {
      const int64_t d = lane + 32 * t;
      if (d < a.D)
        s += q[t] * ld (a.k.ptr, ko + d * a.k.stride[3], a.k.dtype);
    }
    s = warp_sum (s);
    const float mn = fmaxf (m, s);
    const float c = expf (m - mn), p = expf (s - mn);
    l = l * c + p;
#pragma unroll
    for (int t = 0; t < kPerLane; t++) {
      const int64_t d = lane + 32 * t;
      if (d < a.D)
        acc[t] = acc[t] * c + p * ld (a.v.ptr, vo + d * a.v.stride[3], a.v.dtype);
    }
    m = mn;
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const int64_t oo = off4 (a.o, b, h, i);
#pragma unroll
  for (int t = 0; t < kPerLane; t++) {
    const int64_t d = lane + 32 * t;
    if (d < a.D)
      st (a.o.ptr, oo + d * a.o.stride[3], a.o.dtype, acc[t] * inv);
  }
  if (a.has_lse && lane == 0)
    st (a.lse.ptr, lse_off (a, b, h, i), a.lse.dtype, l > 0.f ? m + logf (l) : -INFINITY);
}

/* dQ for one query row per warp; also writes delta_i = dO_i . O_i. */
__global__ void
sdpa_bwd_dq_kernel (const Attn a)
{
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= a.B * a.H * a.Sq)
    return;
  const int64_t i = row % a.Sq, h = (row / a.Sq) % a.H, b = row / (a.Sq * a.H);
  const int64_t hk = h / (a.H / a.Hkv);
  float q[kPerLane], go[kPerLane], dq[kPerLane];
  const int64_t qo = off4 (a.q, b, h, i), go_o = off4 (a.dout, b, h, i), oo = off4 (a.o, b, h, i);
  float delta = 0.f;
#pragma unroll
  for (int t = 0; t < kPerLane; t++) {
    const int64_t d = lane + 32 * t;
    const bool in = d < a.D;
    q[t] = in ? ld (a.q.ptr, qo + d * a.q.stride[3], a.q.dtype) * a.scale : 0.f;
    go[t] = in ? ld (a.dout.ptr, go_o + d * a.dout.stride[3], a.dout.dtype) : 0.f;
    delta += in ? go[t] * ld (a.o.ptr, oo + d * a.o.stride[3], a.o.dtype) : 0.f;
    dq[t] = 0.f;
  }
  delta = warp_sum (delta);
  if (lane == 0)
    a.delta[row] = delta;
  const float lse = ld (a.lse.ptr, lse_off (a, b, h, i), a.lse.dtype);
  const int64_t end = key_end (a, i);
  for (int64_t j = 0; j < end; j++) {
    const int64_t ko = off4 (a.k, b, hk, j), vo = off4 (a.v, b, hk, j);
    float s = 0.f, dp = 0.f;
#pragma unroll
    for (int t = 0; t < kPerLane; t++) {
      const int64_t d = lane + 32 * t;
      if (d < a.D) {
        s += q[t] * ld (a.k.ptr, ko + d * a.k.stride[3], a.k.dtype);
        dp += go[t] * ld (a.v.ptr, vo + d * a.v.stride[3], a.v.dtype);
      }
    }
    s = warp_sum (s);
    dp = warp_sum (dp);
    const float ds = expf (s - lse) * (dp - delta);
#pragma unroll
    for (int t = 0; t < kPerLane; t++) {
      const int64_t d = lane + 32 * t;
      if (d < a.D)
        dq[t] += ds * ld (a.k.ptr, ko + d * a.k.stride[3], a.k.dtype);
    }
  }
  const int64_t dqo = off4 (a.dq, b, h, i);
#pragma unroll
  for (int t = 0; t < kPerLane; t++) {
    const int64_t d = lane + 32 * t;
    if (d < a.D)
      st (a.dq.ptr, dqo + d * a.dq.stride[3], a.dq.dtype, dq[t] * a.scale);
  }
}

/* dK, dV for one key row (of a K/V head) per warp, summing over the query
 * heads that share it. */
__global__ void
sdpa_bwd_dkv_kernel (const Attn a)
{
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= a.B * a.Hkv * a.Sk)
    return;
  const int64_t j = row % a.Sk, hk = (row / a.Sk) % a.Hkv, b = row / (a.Sk * a.Hkv);
  const int64_t rep = a.H / a.Hkv;
  float k[kPerLane], v[kPerLane], dk[kPerLane], dv[kPerLane];
  const int64_t ko = off4 (a.k, b, hk, j), vo = off4 (a.v, b, hk, j);
#pragma unroll
  for (int t = 0; t < kPerLane; t++) {
    const int64_t d = lane + 32 * t;
    const bool in = d < a.D;
    k[t] = in ? ld (a.k.ptr, ko + d * a.k.stride[3], a.k.dtype) : 0.f;
    v[t] = in ? ld (a.v.ptr, vo + d * a.v.stride[3], a.v.dtype) : 0.f;
    dk[t] = dv[t] = 0.f;
  }
  const int64_t start = a.causal ? j : 0;
  for (int64_t h = hk * rep; h < (hk + 1) * rep; h++)
    for (int64_t i = start; i < a.Sq; i++) {
      const int64_t qo = off4 (a.q, b, h, i), go_o = off4 (a.dout, b, h, i);
      float s = 0.f, dp = 0.f, qv[kPerLane], gv[kPerLane];
#pragma unroll
      for (int t = 0; t < kPerLane; t++) {
        const int64_t d = lane + 32 * t;
        const bool in = d < a.D;
        qv[t] = in ? ld (a.q.ptr, qo + d * a.q.stride[3], a.q.dtype) : 0.f;
        gv[t] = in ? ld (a.dout.ptr, go_o + d * a.dout.stride[3], a.dout.dtype) : 0.f;
        s += qv[t] * k[t];
        dp += gv[t] * v[t];
      }
      s = warp_sum (s) * a.scale;
      dp = warp_sum (dp);
      const int64_t r = (b * a.H + h) * a.Sq + i;
      const float p = expf (s - ld (a.lse.ptr, lse_off (a, b, h, i), a.lse.dtype));
      const float ds = p * (dp - a.delta[r]);
#pragma unroll
      for (int t = 0; t < kPerLane; t++) {
        dv[t] += p * gv[t];
        dk[t] += ds * qv[t];
      }
    }
  const int64_t dko = off4 (a.dk, b, hk, j), dvo = off4 (a.dv, b, hk, j);
#pragma unroll
  for (int t = 0; t < kPerLane; t++) {
    const int64_t d = lane + 32 * t;
    if (d < a.D) {
      st (a.dk.ptr, dko + d * a.dk.stride[3], a.dk.dtype, dk[t] * a.scale);
      st (a.dv.ptr, dvo + d * a.dv.stride[3], a.dv.dtype, dv[t]);
    }
  }
}

bool
attn_setup (Attn *a, const SgCuTensor *q, const SgCuTensor *k, const SgCuTensor *v, bool causal,
            double scale)
{
  if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
    return false;
  a->B = q->shape[0];
  a->H = q->shape[1];
  a->Sq = q->shape[2];
  a->D = q->shape[3];
  a->Hkv = k->shape[1];
  a->Sk = k->shape[2];
  if (a->D > kMaxD || a->Hkv <= 0 || a->H % a->Hkv != 0 || k->shape[0] != a->B ||
      v->shape[2] != a->Sk || k->shape[3] != a->D || v->shape[3] != a->D || v->shape[1] != a->Hkv)
    return false;
  a->q = to_desc (q);
  a->k = to_desc (k);
  a->v = to_desc (v);
  a->causal = causal;
  a->scale = (float)(scale > 0 ? scale : 1.0 / sqrt ((double)a->D));
  return true;
}

/* lse views: [B, H, Sq] or [B, H, Sq, 1]: the first three strides matter. */
bool
lse_ok (const SgCuTensor *lse, const Attn *a)
{
  return lse->ndim >= 3 && lse->shape[0] == a->B && lse->shape[1] == a->H &&
         lse->shape[2] >= a->Sq;
}

constexpr int kWarpsPerBlock = 4;

} /* namespace */

extern "C" cudaError_t
sg_cu_sdpa_fwd (const SgCuTensor *q, const SgCuTensor *k, const SgCuTensor *v,
                const SgCuTensor *out, const SgCuTensor *lse, bool causal, double scale,
                cudaStream_t stream)
{
  Attn a;
  memset (&a, 0, sizeof a);
  if (!attn_setup (&a, q, k, v, causal, scale) || out->ndim != 4)
    return cudaErrorInvalidValue;
  a.o = to_desc (out);
  if (lse) {
    if (!lse_ok (lse, &a))
      return cudaErrorInvalidValue;
    a.lse = to_desc (lse);
    a.has_lse = 1;
  }
  const int64_t rows = a.B * a.H * a.Sq;
  if (rows == 0)
    return cudaSuccess;
  const unsigned grid = (unsigned)((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  sdpa_fwd_kernel<<<grid, 32 * kWarpsPerBlock, 0, stream>>> (a);
  return cudaGetLastError ();
}

extern "C" uint64_t
sg_cu_sdpa_bwd_scratch_bytes (const SgCuTensor *q)
{
  if (q->ndim != 4)
    return 0;
  return (uint64_t)(q->shape[0] * q->shape[1] * q->shape[2]) * sizeof (float);
}

extern "C" cudaError_t
sg_cu_sdpa_bwd (const SgCuTensor *dout, const SgCuTensor *q, const SgCuTensor *k,
                const SgCuTensor *v, const SgCuTensor *out, const SgCuTensor *lse,
                const SgCuTensor *dq, const SgCuTensor *dk, const SgCuTensor *dv, bool causal,
                double scale, float *scratch, cudaStream_t stream)
{
  Attn a;
  memset (&a, 0, sizeof a);
  if (!attn_setup (&a, q, k, v, causal, scale) || !lse || !lse_ok (lse, &a) || !scratch)
    return cudaErrorInvalidValue;
  a.dout = to_desc (dout);
  a.o = to_desc (out);
  a.lse = to_desc (lse);
  a.has_lse = 1;
  a.dq = to_desc (dq);
  a.dk = to_desc (dk);
  a.dv = to_desc (dv);
  a.delta = scratch;
  const int64_t rows = a.B * a.H * a.Sq, krows = a.B * a.Hkv * a.Sk;
  if (rows == 0)
    return cudaSuccess;
  sdpa_bwd_dq_kernel<<<(unsigned)((rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                       32 * kWarpsPerBlock, 0, stream>>> (a);
  cudaError_t e = cudaGetLastError ();
  if (e != cudaSuccess || krows == 0)
    return e;
  sdpa_bwd_dkv_kernel<<<(unsigned)((krows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                        32 * kWarpsPerBlock, 0, stream>>> (a);
  return cudaGetLastError ();
}
