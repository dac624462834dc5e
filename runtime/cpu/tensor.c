/* tensor.c: dtype conversion and strided copies for the CPU kernel library.
 *
 * What: element load/store with rounding (bf16 and f16 round-to-nearest-
 * even, as torch's c10::BFloat16 and IEEE half), row-major walks over
 * strided tensors. Mirrors c10's BFloat16 conversion.
 * Requires: tensors whose strides stay inside their storage.
 * Invalidates: nothing.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

G_DEFINE_QUARK (sg-cpu-error-quark, sg_cpu_error)

uint64_t
sg_tensor_numel (const SgTensor *t)
{
  uint64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    n *= (uint64_t)t->shape[i];
  return n;
}

bool
sg_tensor_is_contiguous (const SgTensor *t)
{
  return sg_strides_dense (t->ndim, t->shape, t->stride);
}

uint64_t
sg_tensor_extent_bytes (const SgTensor *t)
{
  if (sg_tensor_numel (t) == 0)
    return 0;
  int64_t last = 0;
  for (int i = 0; i < t->ndim; i++)
    last += (t->shape[i] - 1) * t->stride[i];
  return (uint64_t)(last + 1) * sg_dtype_size (t->dtype);
}

void
sg_tensor_set_contiguous (SgTensor *t)
{
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    t->stride[i] = s;
    s *= t->shape[i];
  }
}

float
sg_bf16_to_float (uint16_t h)
{
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy (&f, &u, sizeof f);
  return f;
}

uint16_t
sg_float_to_bf16 (float f)
{
  uint32_t u;
  memcpy (&u, &f, sizeof u);
  if (isnan (f))
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

bool
sg_cpu_dtype_supported (SgDtype dtype)
{
  switch (dtype) {
  case SG_DTYPE_F32: case SG_DTYPE_F64: case SG_DTYPE_BF16: case SG_DTYPE_F16:
  case SG_DTYPE_I64: case SG_DTYPE_I32: case SG_DTYPE_I16: case SG_DTYPE_I8:
  case SG_DTYPE_U8: case SG_DTYPE_BOOL:
    return true;
  default:
    return false;
  }
}

double
sg_tensor_load (SgDtype dtype, const void *data, int64_t off)
{
  switch (dtype) {
  case SG_DTYPE_F32: return ((const float *)data)[off];
  case SG_DTYPE_F64: return ((const double *)data)[off];
  case SG_DTYPE_BF16: return sg_bf16_to_float (((const uint16_t *)data)[off]);
  case SG_DTYPE_F16: return (double)((const _Float16 *)data)[off];
  case SG_DTYPE_I64: return (double)((const int64_t *)data)[off];
  case SG_DTYPE_I32: return ((const int32_t *)data)[off];
  case SG_DTYPE_I16: return ((const int16_t *)data)[off];
  case SG_DTYPE_I8: return ((const int8_t *)data)[off];
  case SG_DTYPE_U8: return ((const uint8_t *)data)[off];
  case SG_DTYPE_BOOL: return ((const uint8_t *)data)[off] ? 1.0 : 0.0;
  default: g_return_val_if_reached (NAN);
  }
}

void
sg_tensor_store (SgDtype dtype, void *data, int64_t off, double v)
{
  switch (dtype) {
  case SG_DTYPE_F32: ((float *)data)[off] = (float)v; break;
  case SG_DTYPE_F64: ((double *)data)[off] = v; break;
  case SG_DTYPE_BF16: ((uint16_t *)data)[off] = sg_float_to_bf16 ((float)v); break;
  case SG_DTYPE_F16: ((_Float16 *)data)[off] = (_Float16)(float)v; break;
  case SG_DTYPE_I64: ((int64_t *)data)[off] = (int64_t)v; break;
  case SG_DTYPE_I32: ((int32_t *)data)[off] = (int32_t)v; break;
  case SG_DTYPE_I16: ((int16_t *)data)[off] = (int16_t)v; break;
  case SG_DTYPE_I8: ((int8_t *)data)[off] = (int8_t)v; break;
  case SG_DTYPE_U8: ((uint8_t *)data)[off] = (uint8_t)v; break;
  case SG_DTYPE_BOOL: ((uint8_t *)data)[off] = v != 0.0; break;
  default: g_return_if_reached ();
  }
}

int64_t
sg_tensor_offset_of (const SgTensor *t, uint64_t k)
{
  int64_t off = 0;
  for (int i = t->ndim - 1; i >= 0; i--) {
    uint64_t n = (uint64_t)t->shape[i];
    off += (int64_t)(k % n) * t->stride[i];
    k /= n;
  }
  return off;
}

/* Walks @t in row-major order calling nothing: the caller's loop body uses
 * the returned offsets. Kept as an odometer so the inner step is O(1). */
typedef struct {
  const SgTensor *t;
  int64_t idx[SG_CPU_MAX_DIMS];
  int64_t off;
} Odo;

static inline void
odo_init (Odo *o, const SgTensor *t)
{
  o->t = t;
  memset (o->idx, 0, sizeof o->idx);
  o->off = 0;
}

static inline void
odo_next (Odo *o)
{
  const SgTensor *t = o->t;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (++o->idx[i] < t->shape[i]) {
      o->off += t->stride[i];
      return;
    }
    o->off -= (t->shape[i] - 1) * t->stride[i];
    o->idx[i] = 0;
  }
}

void
sg_tensor_pack (const SgTensor *t, void *dst)
{
  size_t es = sg_dtype_size (t->dtype);
  uint64_t n = sg_tensor_numel (t);
  if (sg_tensor_is_contiguous (t)) {
    memcpy (dst, t->data, n * es);
    return;
  }
  Odo o;
  odo_init (&o, t);
  for (uint64_t k = 0; k < n; k++, odo_next (&o))
    memcpy ((char *)dst + k * es, (const char *)t->data + o.off * (int64_t)es, es);
}

void
sg_tensor_unpack (const SgTensor *t, const void *src)
{
  size_t es = sg_dtype_size (t->dtype);
  uint64_t n = sg_tensor_numel (t);
  if (sg_tensor_is_contiguous (t)) {
    memcpy (t->data, src, n * es);
    return;
  }
  Odo o;
  odo_init (&o, t);
  for (uint64_t k = 0; k < n; k++, odo_next (&o))
    memcpy ((char *)t->data + o.off * (int64_t)es, (const char *)src + k * es, es);
}

void
sg_tensor_copy_convert (const SgTensor *dst, const SgTensor *src)
{
  uint64_t n = sg_tensor_numel (dst);
  g_return_if_fail (n == sg_tensor_numel (src));
  Odo a, b;
  odo_init (&a, dst);
  odo_init (&b, src);
  if (dst->dtype == src->dtype) {
    size_t es = sg_dtype_size (dst->dtype);
    for (uint64_t k = 0; k < n; k++, odo_next (&a), odo_next (&b))
      memcpy ((char *)dst->data + a.off * (int64_t)es,
              (const char *)src->data + b.off * (int64_t)es, es);
    return;
  }
  for (uint64_t k = 0; k < n; k++, odo_next (&a), odo_next (&b))
    sg_tensor_store (dst->dtype, dst->data, a.off, sg_tensor_load (src->dtype, src->data, b.off));
}

void
sg_tensor_to_float (const SgTensor *t, float *dst)
{
  uint64_t n = sg_tensor_numel (t);
  Odo o;
  odo_init (&o, t);
  if (t->dtype == SG_DTYPE_BF16) {
    const uint16_t *p = t->data;
    for (uint64_t k = 0; k < n; k++, odo_next (&o))
      dst[k] = sg_bf16_to_float (p[o.off]);
    return;
  }
  for (uint64_t k = 0; k < n; k++, odo_next (&o))
    dst[k] = (float)sg_tensor_load (t->dtype, t->data, o.off);
}

void
sg_tensor_from_float (const SgTensor *t, const float *src)
{
  uint64_t n = sg_tensor_numel (t);
  Odo o;
  odo_init (&o, t);
  for (uint64_t k = 0; k < n; k++, odo_next (&o))
    sg_tensor_store (t->dtype, t->data, o.off, src[k]);
}

void
sg_tensor_fill (const SgTensor *t, double v)
{
  uint64_t n = sg_tensor_numel (t);
  Odo o;
  odo_init (&o, t);
  for (uint64_t k = 0; k < n; k++, odo_next (&o))
    sg_tensor_store (t->dtype, t->data, o.off, v);
}
