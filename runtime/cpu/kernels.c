/* kernels.c: dispatch of the CPU kernel library, pointwise ops with
 * broadcasting, creation ops, copies, views run as copies, bucket pack/unpack.
 *
 * Mirrors ATen's CPU kernels: pointwise math in float ("opmath") with the
 * result rounded once to the output dtype, numpy broadcasting, `alpha` on
 * add/sub. Bucket ops follow docs/ops.md (pack: concatenation or per-rank
 * interleave of flattened inputs; unpack: the inverse slice).
 * Requires: @outs allocated with the node's meta (shape, stride, dtype).
 * Invalidates: nothing.
 */
#include <math.h>
#include <string.h>

#include "kernels-private.h"

bool
sg_cpu_is_ref (const cJSON *item)
{
  return cJSON_IsObject (item) &&
         (cJSON_GetObjectItemCaseSensitive (item, "value") != NULL ||
          cJSON_GetObjectItemCaseSensitive (item, "node") != NULL);
}

bool
kargs_tensor (const KCtx *k, int i, SgTensor *t)
{
  const cJSON *a = cJSON_GetArrayItem (k->args, i);
  if (!sg_cpu_is_ref (a)) {
    g_set_error (k->error, SG_CPU_ERROR, SG_CPU_ERROR_ARGS,
                 "node '%s': args[%d] must be a tensor reference", k->node, i);
    return false;
  }
  if (!k->resolve (a, t, k->ud, k->error))
    return false;
  if (!sg_cpu_dtype_supported (t->dtype)) {
    g_set_error (k->error, SG_CPU_ERROR, SG_CPU_ERROR_UNSUPPORTED,
                 "node '%s': args[%d] has dtype %s, which the CPU backend does not run",
                 k->node, i, sg_dtype_name (t->dtype));
    return false;
  }
  return true;
}

const cJSON *
kargs_get (const KCtx *k, int i, const char *kw)
{
  const cJSON *a = i >= 0 ? cJSON_GetArrayItem (k->args, i) : NULL;
  if (a == NULL && kw != NULL && k->kwargs != NULL)
    a = cJSON_GetObjectItemCaseSensitive (k->kwargs, kw);
  return a;
}

double
kargs_number (const KCtx *k, int i, const char *kw, double dflt)
{
  const cJSON *a = kargs_get (k, i, kw);
  if (cJSON_IsNumber (a))
    return a->valuedouble;
  if (cJSON_IsBool (a))
    return cJSON_IsTrue (a) ? 1.0 : 0.0;
  return dflt;
}

bool
kargs_bool (const KCtx *k, int i, const char *kw, bool dflt)
{
  const cJSON *a = kargs_get (k, i, kw);
  if (cJSON_IsBool (a))
    return cJSON_IsTrue (a);
  if (cJSON_IsNumber (a))
    return a->valuedouble != 0.0;
  return dflt;
}

int
kargs_ints (const KCtx *k, int i, const char *kw, int64_t *out, int max)
{
  const cJSON *a = kargs_get (k, i, kw);
  if (cJSON_IsNumber (a)) {
    out[0] = (int64_t)a->valuedouble;
    return 1;
  }
  if (!cJSON_IsArray (a))
    return -1;
  int n = 0;
  const cJSON *e;
  cJSON_ArrayForEach (e, a) {
    if (!cJSON_IsNumber (e) || n == max)
      return -1;
    out[n++] = (int64_t)e->valuedouble;
  }
  return n;
}

bool
kfail (const KCtx *k, const char *what)
{
  g_set_error (k->error, SG_CPU_ERROR, SG_CPU_ERROR_ARGS, "node '%s': %s", k->node, what);
  return false;
}

/* --- broadcasting pointwise --------------------------------------------- */

/* Strides of @in seen from @out's index space (numpy broadcasting). */
static bool
bcast_strides (const SgTensor *out, const SgTensor *in, int64_t *st)
{
  int lead = out->ndim - in->ndim;
  if (lead < 0)
    return false;
  for (int i = 0; i < out->ndim; i++) {
    int j = i - lead;
    if (j < 0) {
      st[i] = 0;
    } else if (in->shape[j] == out->shape[i]) {
      st[i] = in->shape[j] == 1 ? 0 : in->stride[j];
    } else if (in->shape[j] == 1) {
      st[i] = 0;
    } else {
      return false;
    }
  }
  return true;
}

typedef enum {
  PW_ADD, PW_SUB, PW_MUL, PW_DIV, PW_POW, PW_RSQRT, PW_SQRT, PW_EXP, PW_NEG, PW_RECIP,
  PW_SILU, PW_SILU_BWD, PW_GELU, PW_GELU_TANH, PW_GELU_BWD, PW_GELU_TANH_BWD, PW_RELU,
  PW_SIGMOID, PW_TANH,
} PwOp;

static inline float
pw_apply (PwOp op, float x, float y, float alpha)
{
  switch (op) {
  case PW_ADD: return x + alpha * y;
  case PW_SUB: return x - alpha * y;
  case PW_MUL: return x * y;
  case PW_DIV: return x / y;
  case PW_POW:
    if (y == 2.0f)
      return x * x;
    if (y == 1.0f)
      return x;
    if (y == 0.5f)
      return sqrtf (x);
    return powf (x, y);
  case PW_RSQRT: return 1.0f / sqrtf (x);
  case PW_SQRT: return sqrtf (x);
  case PW_EXP: return expf (x);
  case PW_NEG: return -x;
  case PW_RECIP: return 1.0f / x;
  case PW_SILU: return x / (1.0f + expf (-x));
  case PW_SILU_BWD: { /* x = grad, y = input */
    float s = 1.0f / (1.0f + expf (-y));
    return x * s * (1.0f + y * (1.0f - s));
  }
  case PW_GELU: return 0.5f * x * (1.0f + erff (x * (float)M_SQRT1_2));
  case PW_GELU_TANH: {
    float inner = (float)(M_2_SQRTPI * M_SQRT1_2) * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf (inner));
  }
  case PW_GELU_BWD: { /* x = grad, y = input */
    float cdf = 0.5f * (1.0f + erff (y * (float)M_SQRT1_2));
    float pdf = expf (-0.5f * y * y) * (float)(M_2_SQRTPI * M_SQRT1_2 * 0.5);
    return x * (cdf + y * pdf);
  }
  case PW_GELU_TANH_BWD: {
    const float b = (float)(M_2_SQRTPI * M_SQRT1_2), c = 0.044715f;
    float inner = b * (y + c * y * y * y);
    float t = tanhf (inner);
    float left = 0.5f * y, right = 1.0f + t;
    float dinner = b * (1.0f + 3.0f * c * y * y);
    return x * (0.5f * right + left * (1.0f - t * t) * dinner);
  }
  case PW_RELU: return x > 0.0f ? x : 0.0f;
  case PW_SIGMOID: return 1.0f / (1.0f + expf (-x));
  case PW_TANH: return tanhf (x);
  }
  return NAN;
}

/* out = op(a, b): @b NULL means the scalar @ys. */
static bool
pointwise (const KCtx *k, PwOp op, const SgTensor *a, const SgTensor *b, float ys, float alpha,
           const SgTensor *out)
{
  int64_t sa[SG_CPU_MAX_DIMS], sb[SG_CPU_MAX_DIMS];
  if (!bcast_strides (out, a, sa) || (b != NULL && !bcast_strides (out, b, sb)))
    return kfail (k, "operand shapes do not broadcast to the output's meta shape");
  uint64_t n = sg_tensor_numel (out);
  int64_t idx[SG_CPU_MAX_DIMS] = { 0 };
  int64_t oa = 0, ob = 0, oo = 0;
  int nd = out->ndim;
  for (uint64_t e = 0; e < n; e++) {
    float x = (float)sg_tensor_load (a->dtype, a->data, oa);
    float y = b != NULL ? (float)sg_tensor_load (b->dtype, b->data, ob) : ys;
    sg_tensor_store (out->dtype, out->data, oo, pw_apply (op, x, y, alpha));
    for (int i = nd - 1; i >= 0; i--) {
      if (++idx[i] < out->shape[i]) {
        oa += sa[i];
        oo += out->stride[i];
        if (b != NULL)
          ob += sb[i];
        break;
      }
      oa -= (out->shape[i] - 1) * sa[i];
      oo -= (out->shape[i] - 1) * out->stride[i];
      if (b != NULL)
        ob -= (out->shape[i] - 1) * sb[i];
      idx[i] = 0;
    }
  }
  return true;
}

static bool
run_binary (const KCtx *k, PwOp op, SgTensor *out)
{
  SgTensor a, b;
  if (!kargs_tensor (k, 0, &a))
    return false;
  float alpha = (float)kargs_number (k, 2, "alpha", 1.0);
  const cJSON *y = cJSON_GetArrayItem (k->args, 1);
  if (sg_cpu_is_ref (y)) {
    if (!kargs_tensor (k, 1, &b))
      return false;
    return pointwise (k, op, &a, &b, 0.0f, alpha, out);
  }
  if (!cJSON_IsNumber (y) && !cJSON_IsBool (y))
    return kfail (k, "args[1] must be a tensor reference or a number");
  return pointwise (k, op, &a, NULL, (float)kargs_number (k, 1, NULL, 0.0), alpha, out);
}

static bool
run_unary (const KCtx *k, PwOp op, SgTensor *out)
{
  SgTensor a;
  if (!kargs_tensor (k, 0, &a))
    return false;
  return pointwise (k, op, &a, NULL, 0.0f, 1.0f, out);
}

static bool
gelu_is_tanh (const KCtx *k, int i)
{
  const cJSON *a = kargs_get (k, i, "approximate");
  return cJSON_IsString (a) && strcmp (a->valuestring, "tanh") == 0;
}

/* --- views as copies ---------------------------------------------------- */

static int
norm_dim (int64_t d, int ndim)
{
  return (int)(d < 0 ? d + ndim : d);
}

/* Builds the view of @in that @op describes; the copy then writes it into
 * @out in row-major order (reshape-like views copy in row-major order). */
static bool
run_view (const KCtx *k, SgOpKind op, SgTensor *out)
{
  SgTensor in, v;
  if (!kargs_tensor (k, 0, &in))
    return false;
  v = in;
  int64_t dims[SG_CPU_MAX_DIMS];
  switch (op) {
  case SG_OP_VIEW: case SG_OP_UNSAFE_VIEW: case SG_OP_RESHAPE: case SG_OP_DETACH:
  case SG_OP_ALIAS: case SG_OP_CLONE: case SG_OP_UNSQUEEZE: case SG_OP_SQUEEZE_DIM:
  case SG_OP_WAIT:
    break; /* same elements in row-major order */
  case SG_OP_T:
    if (in.ndim == 2) {
      v.shape[0] = in.shape[1], v.shape[1] = in.shape[0];
      v.stride[0] = in.stride[1], v.stride[1] = in.stride[0];
    }
    break;
  case SG_OP_TRANSPOSE: {
    int n = kargs_ints (k, 1, "dim0", dims, 1), m = kargs_ints (k, 2, "dim1", dims + 1, 1);
    if (n != 1 || m != 1)
      return kfail (k, "transpose needs two integer dims in args[1..2]");
    int d0 = norm_dim (dims[0], in.ndim), d1 = norm_dim (dims[1], in.ndim);
    if (d0 < 0 || d0 >= in.ndim || d1 < 0 || d1 >= in.ndim)
      return kfail (k, "transpose dims out of range");
    v.shape[d0] = in.shape[d1], v.shape[d1] = in.shape[d0];
    v.stride[d0] = in.stride[d1], v.stride[d1] = in.stride[d0];
    break;
  }
  case SG_OP_PERMUTE: {
    int n = kargs_ints (k, 1, "dims", dims, SG_CPU_MAX_DIMS);
    if (n != in.ndim)
      return kfail (k, "permute needs one dim per input dimension in args[1]");
    for (int i = 0; i < n; i++) {
      int d = norm_dim (dims[i], in.ndim);
      if (d < 0 || d >= in.ndim)
        return kfail (k, "permute dim out of range");
      v.shape[i] = in.shape[d], v.stride[i] = in.stride[d];
    }
    break;
  }
  case SG_OP_EXPAND: {
    int n = kargs_ints (k, 1, "size", dims, SG_CPU_MAX_DIMS);
    if (n < in.ndim)
      return kfail (k, "expand needs a size list in args[1] at least as long as the input rank");
    v.ndim = n;
    int lead = n - in.ndim;
    for (int i = 0; i < n; i++) {
      int j = i - lead;
      int64_t s = dims[i];
      if (j < 0) {
        v.shape[i] = s, v.stride[i] = 0;
      } else if (s == -1 || s == in.shape[j]) {
        v.shape[i] = in.shape[j], v.stride[i] = in.stride[j];
      } else if (in.shape[j] == 1) {
        v.shape[i] = s, v.stride[i] = 0;
      } else {
        return kfail (k, "expand size does not match a non-1 input dimension");
      }
    }
    break;
  }
  case SG_OP_SLICE: {
    int64_t d = 0, start = 0, end = INT64_MAX, step = 1;
    kargs_ints (k, 1, "dim", &d, 1);
    const cJSON *s = kargs_get (k, 2, "start"), *e = kargs_get (k, 3, "end");
    if (cJSON_IsNumber (s))
      start = (int64_t)s->valuedouble;
    if (cJSON_IsNumber (e))
      end = (int64_t)e->valuedouble;
    kargs_ints (k, 4, "step", &step, 1);
    int dd = norm_dim (d, in.ndim);
    if (dd < 0 || dd >= in.ndim || step < 1)
      return kfail (k, "slice dim or step out of range");
    int64_t len = in.shape[dd];
    if (start < 0)
      start += len;
    if (end < 0)
      end += len;
    start = CLAMP (start, 0, len);
    end = CLAMP (end, start, len);
    v.data = (char *)in.data + start * in.stride[dd] * (int64_t)sg_dtype_size (in.dtype);
    v.shape[dd] = (end - start + step - 1) / step;
    v.stride[dd] = in.stride[dd] * step;
    break;
  }
  case SG_OP_SELECT: {
    int64_t d = 0, index = 0;
    if (kargs_ints (k, 1, "dim", &d, 1) != 1 || kargs_ints (k, 2, "index", &index, 1) != 1)
      return kfail (k, "select needs dim and index in args[1..2]");
    int dd = norm_dim (d, in.ndim);
    if (dd < 0 || dd >= in.ndim)
      return kfail (k, "select dim out of range");
    if (index < 0)
      index += in.shape[dd];
    if (index < 0 || index >= in.shape[dd])
      return kfail (k, "select index out of range");
    v.data = (char *)in.data + index * in.stride[dd] * (int64_t)sg_dtype_size (in.dtype);
    for (int i = dd; i + 1 < in.ndim; i++)
      v.shape[i] = in.shape[i + 1], v.stride[i] = in.stride[i + 1];
    v.ndim = in.ndim - 1;
    break;
  }
  default:
    return kfail (k, "not a view op");
  }
  if (sg_tensor_numel (&v) != sg_tensor_numel (out))
    return kfail (k, "the view's element count differs from the output's meta");
  sg_tensor_copy_convert (out, &v);
  return true;
}

/* --- creation, copies, cat ---------------------------------------------- */

static bool
run_cat (const KCtx *k, SgTensor *out)
{
  const cJSON *list = cJSON_GetArrayItem (k->args, 0);
  int64_t d = 0;
  kargs_ints (k, 1, "dim", &d, 1);
  if (!cJSON_IsArray (list))
    return kfail (k, "cat needs a list of tensors in args[0]");
  int dd = norm_dim (d, out->ndim);
  if (dd < 0 || dd >= out->ndim)
    return kfail (k, "cat dim out of range");
  int64_t at = 0;
  const cJSON *e;
  cJSON_ArrayForEach (e, list) {
    SgTensor t;
    if (!sg_cpu_is_ref (e) || !k->resolve (e, &t, k->ud, k->error))
      return e == NULL || sg_cpu_is_ref (e) ? false : kfail (k, "cat list holds a non-tensor");
    if (t.ndim == 1 && t.shape[0] == 0)
      continue; /* legacy empty tensors are skipped by aten.cat */
    SgTensor dst = *out;
    dst.shape[dd] = t.shape[dd];
    dst.data = (char *)out->data + at * out->stride[dd] * (int64_t)sg_dtype_size (out->dtype);
    if (t.ndim != out->ndim || at + t.shape[dd] > out->shape[dd])
      return kfail (k, "cat input shapes do not fit the output's meta");
    sg_tensor_copy_convert (&dst, &t);
    at += t.shape[dd];
  }
  if (at != out->shape[dd])
    return kfail (k, "cat inputs do not fill the output's meta shape");
  return true;
}

static bool
run_bucket_pack (const KCtx *k, SgTensor *out)
{
  const cJSON *list = cJSON_GetArrayItem (k->args, 0);
  int64_t nk = 1;
  kargs_ints (k, 1, "k", &nk, 1);
  bool inter = kargs_bool (k, 2, "interleave", false);
  if (!cJSON_IsArray (list) || nk < 1)
    return kfail (k, "bucket_pack needs [[refs...], k, interleave]");
  int n = cJSON_GetArraySize (list);
  SgTensor *ts = g_new0 (SgTensor, n > 0 ? n : 1);
  uint64_t total = 0;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    const cJSON *e = cJSON_GetArrayItem (list, i);
    if (!sg_cpu_is_ref (e))
      ok = kfail (k, "bucket_pack list holds a non-tensor");
    else if (!k->resolve (e, &ts[i], k->ud, k->error))
      ok = false;
    else if (ts[i].dtype != out->dtype)
      ok = kfail (k, "bucket_pack inputs must have the output's dtype");
    else if (inter && sg_tensor_numel (&ts[i]) % (uint64_t)nk != 0)
      ok = kfail (k, "bucket_pack interleave: an input's numel is not divisible by k");
    else
      total += sg_tensor_numel (&ts[i]);
  }
  if (ok && total != sg_tensor_numel (out))
    ok = kfail (k, "bucket_pack inputs do not add up to the output's numel");
  if (ok) {
    size_t es = sg_dtype_size (out->dtype);
    char *flat = g_malloc (total * es + 1), *p = flat;
    for (int i = 0; i < n; i++) {
      uint64_t m = sg_tensor_numel (&ts[i]);
      if (!inter) {
        sg_tensor_pack (&ts[i], p);
        p += m * es;
      }
    }
    if (inter) {
      uint64_t off = 0;
      for (int i = 0; i < n; i++) {
        uint64_t m = sg_tensor_numel (&ts[i]), c = m / (uint64_t)nk;
        char *tmp = g_malloc (m * es + 1);
        sg_tensor_pack (&ts[i], tmp);
        /* chunk r of input i lands after chunk r of inputs < i */
        for (int64_t r = 0; r < nk; r++)
          memcpy (flat + ((uint64_t)r * (total / (uint64_t)nk) + off) * es,
                  tmp + (uint64_t)r * c * es, c * es);
        off += c;
        g_free (tmp);
      }
    }
    sg_tensor_unpack (out, flat);
    g_free (flat);
  }
  g_free (ts);
  return ok;
}

static bool
run_bucket_unpack (const KCtx *k, SgTensor *out)
{
  SgTensor flat;
  int64_t nk = 1, off = 0, numel = 0;
  if (!kargs_tensor (k, 0, &flat))
    return false;
  if (kargs_ints (k, 1, "k", &nk, 1) != 1 || kargs_ints (k, 2, "offset", &off, 1) != 1 ||
      kargs_ints (k, 3, "numel", &numel, 1) != 1 || nk < 1 || off < 0 || numel < 0)
    return kfail (k, "bucket_unpack needs [ref, k, offset, numel]");
  uint64_t fn = sg_tensor_numel (&flat), per = fn / (uint64_t)nk;
  if (flat.dtype != out->dtype || fn % (uint64_t)nk != 0 || (uint64_t)(off + numel) > per ||
      (uint64_t)(nk * numel) != sg_tensor_numel (out))
    return kfail (k, "bucket_unpack slice does not fit the flat input or the output's meta");
  size_t es = sg_dtype_size (out->dtype);
  char *src = g_malloc (fn * es + 1), *dst = g_malloc ((uint64_t)(nk * numel) * es + 1);
  sg_tensor_pack (&flat, src);
  for (int64_t r = 0; r < nk; r++)
    memcpy (dst + (uint64_t)(r * numel) * es, src + ((uint64_t)r * per + (uint64_t)off) * es,
            (uint64_t)numel * es);
  sg_tensor_unpack (out, dst);
  g_free (src);
  g_free (dst);
  return true;
}

/* --- dispatch ----------------------------------------------------------- */

bool
sg_cpu_kernel (SgOpKind op, const char *node, const cJSON *args, const cJSON *kwargs,
               SgTensorResolver resolve, void *ud, SgTensor *outs, int n_out, GError **error)
{
  g_return_val_if_fail (resolve != NULL && outs != NULL && n_out >= 1, false);
  KCtx kc = { node ? node : "?", args, kwargs, resolve, ud, error };
  const KCtx *k = &kc;
  for (int i = 0; i < n_out; i++)
    if (outs[i].data != NULL && !sg_cpu_dtype_supported (outs[i].dtype)) {
      g_set_error (error, SG_CPU_ERROR, SG_CPU_ERROR_UNSUPPORTED,
                   "node '%s': output %d has dtype %s, which the CPU backend does not run",
                   k->node, i, sg_dtype_name (outs[i].dtype));
      return false;
    }
  if (outs[0].data == NULL && sg_op_class (op) != SG_CLASS_ATTENTION)
    return kfail (k, "output 0 is not a tensor");
  SgTensor *o = &outs[0];
  switch (op) {
  case SG_OP_ADD_TENSOR: case SG_OP_ADD_SCALAR: return run_binary (k, PW_ADD, o);
  case SG_OP_SUB_TENSOR: case SG_OP_SUB_SCALAR: return run_binary (k, PW_SUB, o);
  case SG_OP_MUL_TENSOR: case SG_OP_MUL_SCALAR: return run_binary (k, PW_MUL, o);
  case SG_OP_DIV_TENSOR: case SG_OP_DIV_SCALAR:
    if (cJSON_IsString (kargs_get (k, -1, "rounding_mode")))
      return kfail (k, "div with a rounding_mode is not supported");
    return run_binary (k, PW_DIV, o);
  case SG_OP_POW_TENSOR_SCALAR: return run_binary (k, PW_POW, o);
  case SG_OP_RSQRT: return run_unary (k, PW_RSQRT, o);
  case SG_OP_SQRT: return run_unary (k, PW_SQRT, o);
  case SG_OP_EXP: return run_unary (k, PW_EXP, o);
  case SG_OP_NEG: return run_unary (k, PW_NEG, o);
  case SG_OP_RECIPROCAL: return run_unary (k, PW_RECIP, o);
  case SG_OP_SILU: return run_unary (k, PW_SILU, o);
  case SG_OP_SILU_BACKWARD: return run_binary (k, PW_SILU_BWD, o);
  case SG_OP_GELU: return run_unary (k, gelu_is_tanh (k, 1) ? PW_GELU_TANH : PW_GELU, o);
  case SG_OP_GELU_BACKWARD:
    return run_binary (k, gelu_is_tanh (k, 2) ? PW_GELU_TANH_BWD : PW_GELU_BWD, o);
  case SG_OP_RELU: return run_unary (k, PW_RELU, o);
  case SG_OP_SIGMOID: return run_unary (k, PW_SIGMOID, o);
  case SG_OP_TANH: return run_unary (k, PW_TANH, o);
  case SG_OP_SUM_DIM: case SG_OP_SUM: case SG_OP_MEAN_DIM: case SG_OP_MEAN: case SG_OP_AMAX:
    return k_reduce (k, op, o);
  case SG_OP_MM: case SG_OP_ADDMM: case SG_OP_BMM: case SG_OP_BADDBMM:
    return k_matmul (k, op, o);
  case SG_OP_SDPA_FLASH: case SG_OP_SDPA_EFFICIENT: case SG_OP_SDPA_CUDNN:
    return k_sdpa_fwd (k, op, outs, n_out);
  case SG_OP_SDPA_FLASH_BWD: case SG_OP_SDPA_EFFICIENT_BWD: case SG_OP_SDPA_CUDNN_BWD:
    return k_sdpa_bwd (k, op, outs, n_out);
  case SG_OP_VIEW: case SG_OP_UNSAFE_VIEW: case SG_OP_RESHAPE: case SG_OP_T:
  case SG_OP_TRANSPOSE: case SG_OP_PERMUTE: case SG_OP_EXPAND: case SG_OP_UNSQUEEZE:
  case SG_OP_SQUEEZE_DIM: case SG_OP_DETACH: case SG_OP_ALIAS: case SG_OP_SLICE:
  case SG_OP_SELECT: case SG_OP_CLONE:
    return run_view (k, op, o);
  case SG_OP_TO_COPY: {
    SgTensor in;
    if (!kargs_tensor (k, 0, &in))
      return false;
    if (sg_tensor_numel (&in) != sg_tensor_numel (o))
      return kfail (k, "_to_copy output numel differs from its input");
    sg_tensor_copy_convert (o, &in);
    return true;
  }
  case SG_OP_CAT: return run_cat (k, o);
  case SG_OP_ONES_LIKE: sg_tensor_fill (o, 1.0); return true;
  case SG_OP_ZEROS_LIKE: case SG_OP_EMPTY: sg_tensor_fill (o, 0.0); return true;
  case SG_OP_FULL: {
    const cJSON *v = kargs_get (k, 1, "fill_value");
    if (!cJSON_IsNumber (v) && !cJSON_IsBool (v))
      return kfail (k, "full needs a number fill_value in args[1]");
    sg_tensor_fill (o, kargs_number (k, 1, "fill_value", 0.0));
    return true;
  }
  case SG_OP_BUCKET_PACK: return run_bucket_pack (k, o);
  case SG_OP_BUCKET_UNPACK: return run_bucket_unpack (k, o);
  case SG_OP_RANK_ROLL:
    return kfail (k, "rank_roll depends on the rank: its caller runs sg_cpu_rank_roll");
  default:
    g_set_error (error, SG_CPU_ERROR, SG_CPU_ERROR_UNSUPPORTED,
                 "node '%s': op %s has no CPU kernel", k->node, sg_op_name (op));
    return false;
  }
}

bool
sg_cpu_kernel_check (SgOpKind op, const char *node, const cJSON *args, const cJSON *kwargs,
                     GError **error)
{
  KCtx kc = { node ? node : "?", args, kwargs, NULL, NULL, error };
  switch (sg_op_class (op)) {
  case SG_CLASS_POINTWISE: case SG_CLASS_REDUCTION: case SG_CLASS_MATMUL:
  case SG_CLASS_VIEW: case SG_CLASS_COPY: case SG_CLASS_CREATION: case SG_CLASS_BUCKET:
    if (op == SG_OP_DIV_TENSOR || op == SG_OP_DIV_SCALAR) {
      const cJSON *rm = kargs_get (&kc, -1, "rounding_mode");
      if (cJSON_IsString (rm))
        return kfail (&kc, "div with a rounding_mode is not supported");
    }
    return true;
  case SG_CLASS_ATTENTION:
    return k_sdpa_check (&kc, op);
  default:
    g_set_error (error, SG_CPU_ERROR, SG_CPU_ERROR_UNSUPPORTED,
                 "node '%s': op %s has no CPU kernel", kc.node, sg_op_name (op));
    return false;
  }
}
