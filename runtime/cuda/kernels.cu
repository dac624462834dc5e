/* kernels.cu: the CUDA kernels of the backend's non-GEMM ops.
 *
 * What: strided elementwise maps with numpy broadcasting (with a vectorized
 * row path and a vectorized dtype conversion), flat-range copies between any two views (bucket pack/unpack,
 * collective staging, cat); reductions are in reduce.cu, attention's row
 * kernels in attn_kernels.cu.
 * Mirrors the CPU backend's reference kernels: same formulas, fp32
 * accumulation, one rounding to the output dtype.
 * Requires: pointers in device memory of the current device.
 * Invalidates: nothing (all work is queued on the caller's stream).
 */
#include "device.cuh"

namespace {

/* The hardware exp2 and reciprocal (a few ulp, far below bf16's and fp32
 * outputs' tolerance): silu and its backward on [8192, 14336] were bound by
 * expf and the IEEE division (254 us against PyTorch's 189 us on H200). */
__device__ __forceinline__ float
sigmoidf_ (float x)
{
  return __frcp_rn (1.f + __expf (-x));
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

/* One element per thread per grid-stride step: measured on H200 (bench/
 * RESULTS.md), more resident threads hide memory latency better here than
 * unrolling each thread over several elements. */
template <typename I>
__global__ void
map_kernel (const MapArgs p)
{
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t oo, oa, ob;
    if (p.linear) {
      oo = oa = ob = i;
    } else {
      oo = offset_of<I> (p.out, i);
      oa = p.has_a ? offset_of<I> (p.a, i) : 0;
      ob = p.has_b ? offset_of<I> (p.b, i) : 0;
    }
    const float a = p.has_a ? ld (p.a.ptr, oa, p.a.dtype) : 0.f;
    const float b = p.has_b ? ld (p.b.ptr, ob, p.b.dtype) : 0.f;
    st (p.out.ptr, oo, p.out.dtype, apply (p.op, a, b, p.s0));
  }
}

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

/* Merges adjacent dims that every operand walks as one (stride[k] ==
 * stride[k+1] * shape[k+1], broadcast dims included) and drops size-1
 * dims: fewer divisions per element in offset_of. Same logical order. */
void
collapse (Desc *o, Desc *a, Desc *b)
{
  Desc *ds[3] = { o, a, b };
  int n = 0;
  for (int k = 0; k < o->ndim; k++) {
    if (o->shape[k] == 1 && o->ndim > 1)
      continue;
    bool merge = n > 0;
    for (int d = 0; d < 3 && merge; d++)
      merge = ds[d]->stride[n - 1] == ds[d]->stride[k] * o->shape[k];
    if (merge) {
      for (int d = 0; d < 3; d++) {
        ds[d]->shape[n - 1] *= o->shape[k];
        ds[d]->stride[n - 1] = ds[d]->stride[k];
      }
    } else {
      for (int d = 0; d < 3; d++) {
        ds[d]->shape[n] = o->shape[k];
        ds[d]->stride[n] = ds[d]->stride[k];
      }
      n++;
    }
  }
  if (n == 0) { /* every dim of size 1 */
    for (int d = 0; d < 3; d++) {
      ds[d]->shape[0] = 1;
      ds[d]->stride[0] = 0;
    }
    n = 1;
  }
  for (int d = 0; d < 3; d++) {
    for (int k = n; k < SG_CU_MAX_DIMS; k++) {
      ds[d]->shape[k] = 1;
      ds[d]->stride[k] = 0;
    }
    ds[d]->ndim = n;
  }
}

/* ---- fast path: same-dtype maps over rows, 16-byte vectors ----
 *
 * After collapse() most maps of a training step are at most 2-D over a dense
 * output [R, C]: plain elementwise ops (every operand dense), RMSNorm's
 * x * rstd[r] (an operand constant along a row) and y * w[c] (one varying
 * along C only). When every operand has the output's dtype (bf16, f16 or
 * f32), each runs as (row stride, column stride 0 or 1), C is a multiple of
 * the vector width V = 16 / sizeof(T) and every vector load is 16-byte
 * aligned, a thread maps V consecutive elements of a row with one 16-byte
 * load per dense operand and one store, and the op and dtype are template
 * parameters instead of per-element switches: the generic kernel's index
 * divisions and 2-byte accesses ran bf16 maps at 0.3-0.7 TB/s on H200
 * (bench/RESULTS.md). Same formula (apply), same fp32 math and rounding. */
struct RowOperand {
  const char *ptr;
  int64_t rs; /* elements between rows */
  int cs;     /* 1: varies along the row (vector loads); 0: one value per row */
};

template <typename T, int V>
__device__ __forceinline__ void
load_row (const RowOperand &x, int64_t r, int64_t c, float (&v)[V])
{
  const T *base = reinterpret_cast<const T *> (x.ptr) + r * x.rs;
  if (x.cs) {
    load16<T, V> (base + c, v);
  } else {
    const float s = to_f<T> (*base);
#pragma unroll
    for (int j = 0; j < V; j++)
      v[j] = s;
  }
}

template <int OP, typename T, bool HAS_A, bool HAS_B>
__global__ void
map_rows_kernel (T *out, const RowOperand a, const RowOperand b, float s0, int64_t rows,
                 int64_t cols)
{
  constexpr int V = 16 / sizeof (T);
  /* rows * cols < 2^31 (checked at launch): 32-bit index math */
  const unsigned per_row = (unsigned)(cols / V), n = (unsigned)rows * per_row;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const unsigned r = i / per_row, c = (i - r * per_row) * V;
    float va[V], vb[V];
    if (HAS_A)
      load_row<T, V> (a, r, c, va);
    if (HAS_B)
      load_row<T, V> (b, r, c, vb);
    union {
      uint4 u;
      T e[V];
    } w;
#pragma unroll
    for (int j = 0; j < V; j++)
      w.e[j] = from_f<T> (apply (OP, HAS_A ? va[j] : 0.f, HAS_B ? vb[j] : 0.f, s0));
    *reinterpret_cast<uint4 *> (out + r * cols + c) = w.u;
  }
}

/* (row stride, column stride) of @d, collapsed to <= 2 dims, as a
 * RowOperand of [R, C] with @es-byte elements; false when it is neither
 * dense along the row nor constant along it, or a vector load would be
 * misaligned. */
bool
row_operand (const Desc &d, size_t es, RowOperand *x)
{
  const int64_t rs = d.ndim == 2 ? d.stride[0] : 0, cs = d.stride[d.ndim - 1];
  if (cs != 0 && cs != 1)
    return false;
  if (cs == 1 && ((uintptr_t)d.ptr % 16 != 0 || ((uint64_t)rs * es) % 16 != 0))
    return false;
  x->ptr = d.ptr;
  x->rs = rs;
  x->cs = (int)cs;
  return true;
}

template <typename T, bool HAS_A, bool HAS_B>
void
launch_rows (int op, T *out, const RowOperand &a, const RowOperand &b, float s0, int64_t rows,
             int64_t cols, cudaStream_t s)
{
  const unsigned grid = grid_for (rows * (cols / (16 / (int64_t)sizeof (T))));
#define SG_ROWS_CASE(OPC)                                                                       \
  case OPC:                                                                                     \
    map_rows_kernel<OPC, T, HAS_A, HAS_B><<<grid, kThreads, 0, s>>> (out, a, b, s0, rows, cols); \
    break;
  switch (op) {
    SG_ROWS_CASE (SG_CU_COPY) SG_ROWS_CASE (SG_CU_FILL) SG_ROWS_CASE (SG_CU_ADD)
    SG_ROWS_CASE (SG_CU_SUB) SG_ROWS_CASE (SG_CU_MUL) SG_ROWS_CASE (SG_CU_DIV)
    SG_ROWS_CASE (SG_CU_ADD_S) SG_ROWS_CASE (SG_CU_MUL_S) SG_ROWS_CASE (SG_CU_DIV_S)
    SG_ROWS_CASE (SG_CU_RSUB_S) SG_ROWS_CASE (SG_CU_POW_S) SG_ROWS_CASE (SG_CU_RSQRT)
    SG_ROWS_CASE (SG_CU_SQRT) SG_ROWS_CASE (SG_CU_EXP) SG_ROWS_CASE (SG_CU_NEG)
    SG_ROWS_CASE (SG_CU_RECIP) SG_ROWS_CASE (SG_CU_SILU) SG_ROWS_CASE (SG_CU_SILU_BWD)
    SG_ROWS_CASE (SG_CU_GELU) SG_ROWS_CASE (SG_CU_GELU_BWD) SG_ROWS_CASE (SG_CU_RELU)
    SG_ROWS_CASE (SG_CU_SIGMOID) SG_ROWS_CASE (SG_CU_TANH)
  default: break;
  }
#undef SG_ROWS_CASE
}

template <typename T>
void
launch_rows_t (const MapArgs &p, const RowOperand &a, const RowOperand &b, int64_t rows,
               int64_t cols, cudaStream_t s)
{
  T *out = reinterpret_cast<T *> (p.out.ptr);
  if (p.has_a && p.has_b)
    launch_rows<T, true, true> (p.op, out, a, b, p.s0, rows, cols, s);
  else if (p.has_a)
    launch_rows<T, true, false> (p.op, out, a, b, p.s0, rows, cols, s);
  else
    launch_rows<T, false, false> (p.op, out, a, b, p.s0, rows, cols, s);
}

/* Runs @p (collapsed) on the row path when it qualifies; false otherwise
 * (nothing queued). */
bool
try_map_rows (const MapArgs &p, cudaStream_t s)
{
  const Desc &o = p.out;
  const int32_t dt = o.dtype;
  size_t es;
  switch (dt) {
  case SG_DTYPE_BF16: case SG_DTYPE_F16: es = 2; break;
  case SG_DTYPE_F32: es = 4; break;
  default: return false;
  }
  const int V = (int)(16 / es);
  if (o.ndim > 2 || (p.has_a && p.a.dtype != dt) || (p.has_b && p.b.dtype != dt) ||
      (p.has_b && !p.has_a))
    return false;
  const int64_t cols = o.shape[o.ndim - 1], rows = o.ndim == 2 ? o.shape[0] : 1;
  if (cols % V != 0 || o.stride[o.ndim - 1] != 1 || (o.ndim == 2 && o.stride[0] != cols) ||
      (uintptr_t)o.ptr % 16 != 0 || rows * cols >= INT32_MAX)
    return false;
  RowOperand a = { nullptr, 0, 0 }, b = { nullptr, 0, 0 };
  if ((p.has_a && !row_operand (p.a, es, &a)) || (p.has_b && !row_operand (p.b, es, &b)))
    return false;
  switch (dt) {
  case SG_DTYPE_BF16: launch_rows_t<__nv_bfloat16> (p, a, b, rows, cols, s); break;
  case SG_DTYPE_F16: launch_rows_t<__half> (p, a, b, rows, cols, s); break;
  default: launch_rows_t<float> (p, a, b, rows, cols, s); break;
  }
  return true;
}

/* ---- dtype conversion of dense tensors (_to_copy): 8 elements a thread,
 * 16-byte loads and stores, both dtypes fixed at compile time (the generic
 * kernel took 150 us for bf16 [8192, 4096] -> fp32 on H200) ---- */

template <typename TI, typename TO>
__global__ void
convert_kernel (const TI *in, TO *out, int64_t n8)
{
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n8;
       i += (int64_t)gridDim.x * blockDim.x) {
    union {
      uint4 u[sizeof (TI) / 2];
      TI e[8];
    } x;
    union {
      uint4 u[sizeof (TO) / 2];
      TO e[8];
    } y;
    const uint4 *src = reinterpret_cast<const uint4 *> (in + i * 8);
    uint4 *dst = reinterpret_cast<uint4 *> (out + i * 8);
#pragma unroll
    for (int k = 0; k < (int)(sizeof (TI) / 2); k++)
      x.u[k] = src[k];
#pragma unroll
    for (int j = 0; j < 8; j++)
      y.e[j] = from_f<TO> (to_f<TI> (x.e[j]));
#pragma unroll
    for (int k = 0; k < (int)(sizeof (TO) / 2); k++)
      dst[k] = y.u[k];
  }
}

template <typename TI>
bool
convert_to (const TI *in, char *out, int32_t out_dt, int64_t n8, cudaStream_t s)
{
  const unsigned grid = grid_for (n8);
  switch (out_dt) {
  case SG_DTYPE_BF16:
    convert_kernel<<<grid, kThreads, 0, s>>> (in, reinterpret_cast<__nv_bfloat16 *> (out), n8);
    return true;
  case SG_DTYPE_F16:
    convert_kernel<<<grid, kThreads, 0, s>>> (in, reinterpret_cast<__half *> (out), n8);
    return true;
  case SG_DTYPE_F32:
    convert_kernel<<<grid, kThreads, 0, s>>> (in, reinterpret_cast<float *> (out), n8);
    return true;
  default: return false;
  }
}

/* A COPY between dense views of the same layout (p.linear) whose dtypes are
 * bf16/f16/f32, n a multiple of 8, both 16-byte aligned: queued, true. */
bool
try_convert (const MapArgs &p, cudaStream_t s)
{
  if (p.op != SG_CU_COPY || !p.linear || p.n % 8 != 0 || (uintptr_t)p.a.ptr % 16 != 0 ||
      (uintptr_t)p.out.ptr % 16 != 0)
    return false;
  const int64_t n8 = p.n / 8;
  switch (p.a.dtype) {
  case SG_DTYPE_BF16:
    return convert_to (reinterpret_cast<const __nv_bfloat16 *> (p.a.ptr), p.out.ptr, p.out.dtype,
                       n8, s);
  case SG_DTYPE_F16:
    return convert_to (reinterpret_cast<const __half *> (p.a.ptr), p.out.ptr, p.out.dtype, n8, s);
  case SG_DTYPE_F32:
    return convert_to (reinterpret_cast<const float *> (p.a.ptr), p.out.ptr, p.out.dtype, n8, s);
  default: return false;
  }
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
  if (p.has_a && p.a.dtype != p.out.dtype && try_convert (p, stream))
    return cudaGetLastError ();
  {
    MapArgs q = p; /* the row path wants every dense run merged */
    collapse (&q.out, &q.a, &q.b);
    if (try_map_rows (q, stream))
      return cudaGetLastError ();
    if (!p.linear)
      p = q;
  }
  if (fits32 (p.out) && fits32 (p.a) && fits32 (p.b))
    map_kernel<int><<<grid_for (p.n), kThreads, 0, stream>>> (p);
  else
    map_kernel<int64_t><<<grid_for (p.n), kThreads, 0, stream>>> (p);
  return cudaGetLastError ();
}

/* ---- flat-range copies ---- */

namespace {

template <typename I>
__global__ void
copy_range_kernel (const Desc out, int64_t out_start, const Desc in, int64_t in_start, int64_t n,
                   int out_lin, int in_lin)
{
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
       j += (int64_t)gridDim.x * blockDim.x) {
    const int64_t oi = out_lin ? out_start + j : offset_of<I> (out, out_start + j);
    const int64_t ii = in_lin ? in_start + j : offset_of<I> (in, in_start + j);
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
  Desc od = to_desc (out), id = to_desc (in), tmp_a = od, tmp_b = od;
  collapse (&od, &tmp_a, &tmp_b);
  tmp_a = id;
  tmp_b = id;
  collapse (&id, &tmp_a, &tmp_b);
  if (fits32 (od) && fits32 (id))
    copy_range_kernel<int><<<grid_for (n), kThreads, 0, stream>>> (od, out_start, id, in_start, n,
                                                                    ol, il);
  else
    copy_range_kernel<int64_t><<<grid_for (n), kThreads, 0, stream>>> (od, out_start, id, in_start,
                                                                        n, ol, il);
  return cudaGetLastError ();
}


/* ---- deterministic random contents (profiling inputs) ---- */

namespace {

__global__ void
fill_random_kernel (char *p, int32_t dtype, int64_t n, unsigned long long seed)
{
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    unsigned long long z = seed + 0x9e3779b97f4a7c15ull * (unsigned long long)(i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = (float)(z >> 40) * (1.f / 16777216.f); /* [0, 1) */
    const bool is_float = dtype == SG_DTYPE_F32 || dtype == SG_DTYPE_F64 ||
                          dtype == SG_DTYPE_BF16 || dtype == SG_DTYPE_F16;
    st (p, i, dtype, is_float ? 2.f * u - 1.f : floorf (u * 8.f));
  }
}

} /* namespace */

extern "C" cudaError_t
sg_cu_fill_random (void *ptr, int32_t dtype, int64_t n, uint64_t seed, cudaStream_t stream)
{
  if (n <= 0)
    return cudaSuccess;
  fill_random_kernel<<<grid_for (n), kThreads, 0, stream>>> (static_cast<char *> (ptr), dtype, n,
                                                             seed);
  return cudaGetLastError ();
}
