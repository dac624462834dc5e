/* reduce.cu: the CUDA backend's reductions (sum, mean, amax over a set of
 * dims). Dense inputs of bf16/f16/f32 take one of two fast paths, with
 * 16-byte vector loads and the op and dtype fixed at compile time:
 *  - rows (the reduced dims innermost, as mean(-1)): a warp reduces a row
 *    when there are many, a block reduces one row, or a slice of it when few
 *    outputs have long rows;
 *  - columns (the reduced dims outermost, as sum(0) of a weight gradient):
 *    each thread owns 16 bytes of adjacent outputs and walks rows, the warps
 *    of a block take interleaved rows and add up in shared memory, row
 *    slices of the tall inputs go to more blocks (the one-block-per-output
 *    kernel read a column per block, 16x the bytes through L2: 202 us for
 *    sum(0) of bf16 [8192, 4096], now 24 us).
 * Anything else (strided views) runs one block per output element. Long
 * reductions into few outputs run in two passes through fp32 partials.
 * Every output is summed in one fixed order (a thread's elements in turn, a
 * fixed tree over threads and warps, slices in order): results do not
 * depend on timing, run to run.
 * Mirrors the CPU backend's reference reductions: fp32 accumulation, one
 * rounding to the output dtype.
 * Requires: pointers in device memory of the current device.
 * Invalidates: nothing (all work is queued on the caller's stream).
 */
#include "device.cuh"

/* ---- reductions: one block per output element (any strides) ---- */

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

/* Slices per output of the row path and the generic kernel: long rows into
 * few outputs are spread over several blocks (two passes, fixed order:
 * deterministic), about 8 blocks per SM in all, slices of >= 16k elements. */
int64_t
split_rows (int64_t n_out, int64_t n_red)
{
  if (n_red < 32768 || n_out >= 264)
    return 1;
  int64_t g = n_red / 16384, want = (1056 + n_out - 1) / n_out;
  g = g < want ? g : want;
  return g > 1024 ? 1024 : g < 1 ? 1 : g;
}

/* Row slices of the column path for @rows x @cols: about 4 blocks per SM
 * over the column tiles (256 columns at most per tile), >= 64 rows each
 * (measured on H200: 8 blocks per SM and >= 32 rows took sum(0) of bf16
 * [8192, 4096] from 24.3 to 27.8 us, [4096, 2048] from 11.0 to 15.5 us). */
int64_t
split_cols (int64_t rows, int64_t cols)
{
  const int64_t tiles = (cols + 255) / 256;
  int64_t g = (528 + tiles - 1) / tiles, most = rows / 64;
  g = g < most ? g : most;
  return g > 1024 ? 1024 : g < 1 ? 1 : g;
}

/* ---- fast paths over dense bf16/f16/f32 inputs ---- */

template <bool IS_MAX>
__device__ __forceinline__ float
combine (float a, float b)
{
  return IS_MAX ? fmaxf (a, b) : a + b;
}

/* @acc combined with row[r], row[r + 1], ... for r < end, V = 16 /
 * sizeof(T) elements per 16-byte load, loads @step elements apart. */
template <typename T, bool IS_MAX>
__device__ __forceinline__ float
acc_span (const T *row, int64_t r, int64_t end, int64_t step, float acc)
{
  constexpr int V = 16 / sizeof (T);
#pragma unroll 4
  for (; r < end; r += step) {
    float v[V];
    load16<T, V> (row + r, v);
#pragma unroll
    for (int j = 0; j < V; j++)
      acc = combine<IS_MAX> (acc, v[j]);
  }
  return acc;
}

/* The final value of output @o (mean divides), or its slice's partial. */
__device__ __forceinline__ void
emit (float acc, int op, int64_t n_red, bool partial, float *partials, int64_t pidx, char *out,
      int32_t out_dt, int64_t o)
{
  if (partial) {
    partials[pidx] = acc;
    return;
  }
  if (op == SG_CU_RED_MEAN)
    acc /= (float)n_red;
  st (out, o, out_dt, acc);
}

/* Rows: block (o, g) reduces slice g of G of row o of a dense [n_out, n_red]
 * input; n_red a multiple of the vector width V, the input 16-byte aligned. */
template <typename T, bool IS_MAX>
__global__ void
rows_kernel (const T *in, int64_t n_out, int64_t n_red, int64_t G, int op, float *partials,
             char *out, int32_t out_dt)
{
  constexpr int V = 16 / sizeof (T);
  const int64_t per = ((n_red + G - 1) / G + V - 1) / V * V;
  for (int64_t blk = blockIdx.x; blk < n_out * G; blk += gridDim.x) {
    const int64_t o = blk / G, g = blk % G;
    const int64_t r0 = g * per, r1 = r0 + per < n_red ? r0 + per : n_red;
    float acc = acc_span<T, IS_MAX> (in + o * n_red, r0 + (int64_t)threadIdx.x * V, r1,
                                     (int64_t)blockDim.x * V, IS_MAX ? -INFINITY : 0.f);
    acc = block_reduce (acc, IS_MAX);
    if (threadIdx.x == 0)
      emit (acc, op, n_red, G > 1, partials, blk, out, out_dt, o);
    __syncthreads ();
  }
}

/* Rows, many of them (>= 264, no slices): warp w of the grid reduces rows
 * w, w + warps, ...: each row in 32 lanes' interleaved vectors, then a
 * fixed butterfly (a block per row spent more on its barrier than on 8 KiB
 * of data: 23 us for mean(-1) of bf16 [8192, 4096], 14 us of HBM time). */
template <typename T, bool IS_MAX>
__global__ void
rows_warp_kernel (const T *in, int64_t n_out, int64_t n_red, int op, char *out, int32_t out_dt)
{
  constexpr int V = 16 / sizeof (T);
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t o = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5); o < n_out;
       o += warps) {
    float acc = acc_span<T, IS_MAX> (in + o * n_red, (int64_t)lane * V, n_red, 32 * V,
                                     IS_MAX ? -INFINITY : 0.f);
    for (int k = 16; k > 0; k >>= 1)
      acc = combine<IS_MAX> (acc, __shfl_xor_sync (0xffffffffu, acc, k));
    if (lane == 0)
      emit (acc, op, n_red, false, nullptr, 0, out, out_dt, o);
  }
}

constexpr int kColWarps = 8;

/* Columns: block (tile, g) reduces rows of slice g of G of a dense
 * [rows, cols] input into the 32 * V columns of its tile; cols a multiple of
 * V, the input 16-byte aligned. Warp w takes rows w, w + 8, ... of the
 * slice; shared memory adds the 8 warps' sums in order. */
template <typename T, bool IS_MAX>
__global__ void
cols_kernel (const T *in, int64_t rows, int64_t cols, int64_t G, int op, float *partials,
             char *out, int32_t out_dt)
{
  constexpr int V = 16 / sizeof (T);
  __shared__ float sh[kColWarps][32 * V];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t tiles = (cols + 32 * V - 1) / (32 * V);
  const int64_t per = (rows + G - 1) / G;
  for (int64_t blk = blockIdx.x; blk < tiles * G; blk += gridDim.x) {
    const int64_t tile = blk % tiles, g = blk / tiles;
    const int64_t c = tile * 32 * V + (int64_t)lane * V;
    const int64_t r0 = g * per, r1 = r0 + per < rows ? r0 + per : rows;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; j++)
      acc[j] = IS_MAX ? -INFINITY : 0.f;
    if (c < cols)
      for (int64_t r = r0 + warp; r < r1; r += kColWarps) {
        float v[V];
        load16<T, V> (in + r * cols + c, v);
#pragma unroll
        for (int j = 0; j < V; j++)
          acc[j] = combine<IS_MAX> (acc[j], v[j]);
      }
#pragma unroll
    for (int j = 0; j < V; j++)
      sh[warp][lane * V + j] = acc[j];
    __syncthreads ();
    for (int k = threadIdx.x; k < 32 * V; k += blockDim.x) {
      const int64_t col = tile * 32 * V + k;
      float a = sh[0][k];
      for (int w = 1; w < kColWarps; w++)
        a = combine<IS_MAX> (a, sh[w][k]);
      if (col < cols)
        emit (a, op, rows, G > 1, partials, g * cols + col, out, out_dt, col);
    }
    __syncthreads ();
  }
}

/* Columns, second pass: output c = the G slices' partials in order. */
template <bool IS_MAX>
__global__ void
cols_finish_kernel (const float *partials, int64_t rows, int64_t cols, int64_t G, int op,
                    char *out, int32_t out_dt)
{
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cols;
       c += (int64_t)gridDim.x * blockDim.x) {
    float a = partials[c];
    for (int64_t g = 1; g < G; g++)
      a = combine<IS_MAX> (a, partials[g * cols + c]);
    emit (a, op, rows, false, nullptr, 0, out, out_dt, c);
  }
}

/* Rows, second pass: one block per output adds its G partials in a fixed tree. */
template <bool IS_MAX>
__global__ void
rows_finish_kernel (const float *partials, int64_t n_out, int64_t n_red, int64_t G, int op,
                    char *out, int32_t out_dt)
{
  for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    float acc = IS_MAX ? -INFINITY : 0.f;
    for (int64_t g = threadIdx.x; g < G; g += blockDim.x)
      acc = combine<IS_MAX> (acc, partials[o * G + g]);
    acc = block_reduce (acc, IS_MAX);
    if (threadIdx.x == 0)
      emit (acc, op, n_red, false, nullptr, 0, out, out_dt, o);
    __syncthreads ();
  }
}

unsigned
blocks_for (int64_t n)
{
  return (unsigned)(n > 65535 * 16 ? 65535 * 16 : n < 1 ? 1 : n);
}

template <typename T, bool IS_MAX>
void
launch_dense (bool cols_path, const T *in, int64_t n_out, int64_t n_red, int op, float *partials,
              int64_t partial_cap, char *out, int32_t out_dt, cudaStream_t s)
{
  constexpr int V = 16 / sizeof (T);
  if (cols_path) { /* [n_red rows, n_out cols] */
    int64_t G = split_cols (n_red, n_out);
    if (G > 1 && (!partials || G * n_out > partial_cap))
      G = 1;
    const int64_t tiles = (n_out + 32 * V - 1) / (32 * V);
    cols_kernel<T, IS_MAX><<<blocks_for (tiles * G), 32 * kColWarps, 0, s>>> (
      in, n_red, n_out, G, op, partials, out, out_dt);
    if (G > 1)
      cols_finish_kernel<IS_MAX><<<blocks_for ((n_out + 255) / 256), 256, 0, s>>> (
        partials, n_red, n_out, G, op, out, out_dt);
    return;
  }
  int64_t G = split_rows (n_out, n_red);
  if (G > 1 && (!partials || G * n_out > partial_cap))
    G = 1;
  if (G == 1 && n_out >= 264) {
    rows_warp_kernel<T, IS_MAX><<<blocks_for ((n_out + 7) / 8), 256, 0, s>>> (in, n_out, n_red,
                                                                              op, out, out_dt);
    return;
  }
  rows_kernel<T, IS_MAX><<<blocks_for (n_out * G), kThreads, 0, s>>> (in, n_out, n_red, G, op,
                                                                       partials, out, out_dt);
  if (G > 1)
    rows_finish_kernel<IS_MAX><<<blocks_for (n_out), kThreads, 0, s>>> (partials, n_out, n_red,
                                                                         G, op, out, out_dt);
}

template <typename T>
void
launch_dense_t (int op, bool cols_path, const void *in, int64_t n_out, int64_t n_red,
                float *partials, int64_t partial_cap, char *out, int32_t out_dt, cudaStream_t s)
{
  const T *p = static_cast<const T *> (in);
  if (op == SG_CU_RED_AMAX)
    launch_dense<T, true> (cols_path, p, n_out, n_red, op, partials, partial_cap, out, out_dt, s);
  else
    launch_dense<T, false> (cols_path, p, n_out, n_red, op, partials, partial_cap, out, out_dt, s);
}

/* The input is dense, its reduced dims are either all inner (rows) or all
 * outer (columns) of the kept ones, the output is dense, and the vector
 * loads fit (alignment, widths): run a fast path and return true. */
bool
try_dense (int op, const SgCuTensor *out, const SgCuTensor *in, uint32_t mask, int64_t n_out,
           int64_t n_red, float *partials, int64_t partial_cap, cudaStream_t s)
{
  size_t es;
  switch (in->dtype) {
  case SG_DTYPE_BF16: case SG_DTYPE_F16: es = 2; break;
  case SG_DTYPE_F32: es = 4; break;
  default: return false;
  }
  if (!sg_cu_is_contiguous (in) || !sg_cu_is_contiguous (out) || (uintptr_t)in->ptr % 16 != 0)
    return false;
  /* which dims are reduced, ignoring size-1 dims: a run at the end (rows)
   * or at the start (columns) */
  int first_red = -1, last_red = -1, first_kept = -1, last_kept = -1;
  for (int k = 0; k < in->ndim; k++) {
    if (in->shape[k] == 1)
      continue;
    if (mask & (1u << k)) {
      first_red = first_red < 0 ? k : first_red;
      last_red = k;
    } else {
      first_kept = first_kept < 0 ? k : first_kept;
      last_kept = k;
    }
  }
  const int64_t V = 16 / (int64_t)es;
  bool cols_path;
  if (first_red < 0 || first_kept < 0 || last_kept < first_red)
    cols_path = false; /* rows (or everything reduced) */
  else if (last_red < first_kept)
    cols_path = true;
  else
    return false;
  if ((cols_path ? n_out : n_red) % V != 0)
    return false;
  char *optr = static_cast<char *> (out->ptr);
  switch (in->dtype) {
  case SG_DTYPE_BF16:
    launch_dense_t<__nv_bfloat16> (op, cols_path, in->ptr, n_out, n_red, partials, partial_cap,
                                   optr, out->dtype, s);
    break;
  case SG_DTYPE_F16:
    launch_dense_t<__half> (op, cols_path, in->ptr, n_out, n_red, partials, partial_cap, optr,
                            out->dtype, s);
    break;
  default:
    launch_dense_t<float> (op, cols_path, in->ptr, n_out, n_red, partials, partial_cap, optr,
                           out->dtype, s);
  }
  return true;
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
  if (try_dense (op, out, in, reduce_mask, p.n_out, p.n_red, partials, partial_cap, stream))
    return cudaGetLastError ();
  int64_t G = split_rows (p.n_out, p.n_red);
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
  /* whichever path runs: rows (and the generic kernel) or columns */
  const int64_t gr = split_rows (n_out, n_red), gc = split_cols (n_red, n_out);
  const int64_t G = gr > gc ? gr : gc;
  return G > 1 ? n_out * G : 0;
}
