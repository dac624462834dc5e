/* attn_kernels.cu: the row kernels of attention (attn.c runs its GEMMs on
 * cuBLAS) and the profiler's spin kernel.
 *
 * Masked softmax with the natural-log log-sum-exp, the backward's
 * probabilities recomputed from it, delta = rowsum(dO * O) and
 * dS = P * (dP - delta), as FlashAttention-2's backward (Dao 2023, alg. 2);
 * fp32 throughout, one rounding to the output dtype. Mirrors the CPU
 * backend's attention reference. Requires: device pointers of the current
 * device. Invalidates: nothing.
 */
#include "device.cuh"

/* ---- attention row kernels (the GEMMs are cuBLAS: attn.c) ---- */

namespace {

struct RowArgs {
  float *s;        /* [heads * Sq, Sk] dense fp32: scores, then P in place */
  char *p_out;     /* same shape in p_dtype (GEMM operand), may be null */
  int32_t p_dtype;
  char *lse;       /* [heads, Sq] view: lse + h * lse_h + i * lse_i */
  int32_t lse_dtype;
  int64_t lse_h, lse_i;
  int64_t heads, sq, sk;
  int causal;
  int recompute;   /* P = exp(S - lse) instead of a softmax */
};

__global__ void
softmax_rows_kernel (const RowArgs a)
{
  const int64_t row = blockIdx.x;
  const int64_t i = row % a.sq, h = row / a.sq;
  float *s = a.s + row * a.sk;
  const int64_t end = a.causal ? (i + 1 < a.sk ? i + 1 : a.sk) : a.sk;
  float m, l;
  if (a.recompute) {
    m = ld (a.lse, h * a.lse_h + i * a.lse_i, a.lse_dtype);
    l = 1.f;
  } else {
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < end; j += blockDim.x)
      mx = fmaxf (mx, s[j]);
    m = block_reduce (mx, true);
    __shared__ float bm;
    if (threadIdx.x == 0)
      bm = m;
    __syncthreads ();
    m = bm;
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < end; j += blockDim.x)
      sum += expf (s[j] - m);
    __syncthreads ();
    l = block_reduce (sum, false);
    __shared__ float bl;
    if (threadIdx.x == 0)
      bl = l;
    __syncthreads ();
    l = bl;
    if (a.lse && threadIdx.x == 0)
      st (a.lse, h * a.lse_h + i * a.lse_i, a.lse_dtype, l > 0.f ? m + logf (l) : -INFINITY);
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  for (int64_t j = threadIdx.x; j < a.sk; j += blockDim.x) {
    const float p = j < end ? expf (s[j] - m) * inv : 0.f;
    s[j] = p;
    if (a.p_out)
      st (a.p_out, row * a.sk + j, a.p_dtype, p);
  }
}

__global__ void
attn_delta_kernel (const Desc dout, const Desc out, float *delta, int64_t rows, int64_t sq)
{
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  const int64_t h = row / sq, i = row % sq;
  const int64_t go = h * dout.stride[0] + i * dout.stride[1];
  const int64_t oo = h * out.stride[0] + i * out.stride[1];
  float acc = 0.f;
  for (int64_t d = lane; d < dout.shape[2]; d += 32)
    acc += ld (dout.ptr, go + d * dout.stride[2], dout.dtype) *
           ld (out.ptr, oo + d * out.stride[2], out.dtype);
  for (int o = 16; o > 0; o >>= 1)
    acc += __shfl_xor_sync (0xffffffffu, acc, o);
  if (lane == 0)
    delta[row] = acc;
}

__global__ void
attn_ds_kernel (const float *p, const float *dp, const float *delta, char *ds, int32_t ds_dtype,
                int64_t n, int64_t sk)
{
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x)
    st (ds, e, ds_dtype, p[e] * (dp[e] - delta[e / sk]));
}

} /* namespace */

extern "C" cudaError_t
sg_cu_softmax_rows (float *s, void *p_out, int32_t p_dtype, int64_t heads, int64_t sq, int64_t sk,
                    bool causal, const SgCuTensor *lse, bool recompute, cudaStream_t stream)
{
  if (heads * sq == 0 || (recompute && !lse) || (lse && lse->ndim != 2))
    return heads * sq == 0 ? cudaSuccess : cudaErrorInvalidValue;
  RowArgs a;
  memset (&a, 0, sizeof a);
  a.s = s;
  a.p_out = static_cast<char *> (p_out);
  a.p_dtype = p_dtype;
  if (lse) {
    a.lse = static_cast<char *> (lse->ptr);
    a.lse_dtype = lse->dtype;
    a.lse_h = lse->stride[0];
    a.lse_i = lse->stride[1];
  }
  a.heads = heads;
  a.sq = sq;
  a.sk = sk;
  a.causal = causal;
  a.recompute = recompute;
  const int64_t rows = heads * sq;
  if (rows > 0x7fffffff)
    return cudaErrorInvalidValue;
  softmax_rows_kernel<<<(unsigned)rows, kThreads, 0, stream>>> (a);
  return cudaGetLastError ();
}

extern "C" cudaError_t
sg_cu_attn_delta (const SgCuTensor *dout, const SgCuTensor *out, float *delta, cudaStream_t stream)
{
  if (dout->ndim != 3 || out->ndim != 3)
    return cudaErrorInvalidValue;
  const int64_t rows = dout->shape[0] * dout->shape[1];
  if (rows == 0)
    return cudaSuccess;
  attn_delta_kernel<<<(unsigned)((rows + 3) / 4), 128, 0, stream>>> (to_desc (dout), to_desc (out),
                                                                     delta, rows, dout->shape[1]);
  return cudaGetLastError ();
}

extern "C" cudaError_t
sg_cu_attn_ds (const float *p, const float *dp, const float *delta, void *ds, int32_t ds_dtype,
               int64_t rows, int64_t sk, cudaStream_t stream)
{
  const int64_t n = rows * sk;
  if (n == 0)
    return cudaSuccess;
  attn_ds_kernel<<<grid_for (n), kThreads, 0, stream>>> (p, dp, delta, static_cast<char *> (ds),
                                                          ds_dtype, n, sk);
  return cudaGetLastError ();
}

/* ---- a timed wait on the GPU (profiling: lets the host queue work ahead) ---- */

namespace {

__global__ void
spin_kernel (unsigned long long ns)
{
  unsigned long long t0, t;
  asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep (1000);
    asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

} /* namespace */

extern "C" cudaError_t
sg_cu_spin (double us, cudaStream_t stream)
{
  spin_kernel<<<1, 1, 0, stream>>> ((unsigned long long)(us * 1000.0));
  return cudaGetLastError ();
}
