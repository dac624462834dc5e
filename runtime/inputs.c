/* inputs.c: deterministic inputs shared by every backend and by sgeval.
 *
 * Element e of input NAME on rank r = splitmix64 over (seed, r, FNV-1a 64 of
 * NAME, e), mapped to [-1, 1) for float dtypes (then rounded to the dtype,
 * bf16/f16 round-to-nearest-even) and to [0, 8) for integers. Depends on the
 * name only, so every order and every backend of one graph gets the same
 * values. Mirrors splitmix64 (Steele, Lea, Flood 2014).
 * Requires: nothing. Invalidates: nothing.
 */
#include <string.h>

#include "kernels.h"
#include "runtime.h"

uint64_t
sg_rt_fnv1a64 (const void *data, size_t len)
{
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static inline uint64_t
mix64 (uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t
sg_rt_value_numel (const SgPlanValue *v)
{
  uint64_t n = 1;
  for (int32_t i = 0; i < v->ndim; i++)
    n *= (uint64_t)v->shape[i];
  return n;
}

void
sg_rt_fill_named (const char *name, SgDtype dtype, uint64_t numel, int32_t rank, uint64_t seed,
                  void *host)
{
  uint64_t key = mix64 (seed ^ 0x9e3779b97f4a7c15ull);
  key = mix64 (key ^ ((uint64_t)(uint32_t)rank * 0x9e3779b97f4a7c15ull));
  key = mix64 (key ^ sg_rt_fnv1a64 (name, strlen (name)));
  bool is_float = sg_dtype_is_float (dtype);
  for (uint64_t e = 0; e < numel; e++) {
    uint64_t z = mix64 (key + (e + 1) * 0x9e3779b97f4a7c15ull);
    double v;
    if (is_float)
      v = (double)(z >> 11) * 0x1.0p-52 - 1.0; /* 53 random bits -> [-1, 1) */
    else if (dtype == SG_DTYPE_BOOL)
      v = (double)(z >> 63);
    else
      v = (double)(z >> 61);
    sg_tensor_store (dtype, host, (int64_t)e, v);
  }
}

void
sg_rt_fill_input (const SgPlanValue *v, int32_t rank, uint64_t seed, void *host)
{
  sg_rt_fill_named (v->name, v->dtype, sg_rt_value_numel (v), rank, seed, host);
}
