/* kernels_attn.c: scaled dot-product attention, forward and backward, for
 * the flash, efficient and cuDNN aten variants (their tuple schemas).
 *
 * Mirrors PyTorch's math reference (_scaled_dot_product_attention_math):
 * S = scale * Q K^T (scale from the `scale` kwarg or 1/sqrt(d)), causal
 * mask keeping j <= i (top-left, as torch's is_causal), P = softmax(S),
 * O = P V, logsumexp in float32 natural log; backward recomputes P and
 * applies dS = P * (dP - rowsum(P * dP)), dP = dO V^T. fp32 throughout,
 * one rounding per output; GQA (fewer K/V heads) maps head h to
 * h / (Hq / Hkv). Dropout and attention bias are rejected up front.
 * Requires: 4-D [b, h, s, d] operands of any strides.
 * Invalidates: nothing.
 */
#include <math.h>
#include <string.h>

#include "kernels-private.h"

/* Argument positions per variant (the op table's, graph/ops.c). */
typedef struct {
  int q, k, v, bias, dropout, causal;  /* forward */
  int dout, out;                       /* backward only */
} SdpaArgs;

static SdpaArgs
sdpa_args (SgOpKind op)
{
  return (SdpaArgs){ sg_op_param_pos (op, SG_PARAM_QUERY), sg_op_param_pos (op, SG_PARAM_KEY),
                     sg_op_param_pos (op, SG_PARAM_VALUE),
                     sg_op_param_pos (op, SG_PARAM_ATTN_BIAS),
                     sg_op_param_pos (op, SG_PARAM_DROPOUT_P),
                     sg_op_param_pos (op, SG_PARAM_IS_CAUSAL),
                     sg_op_param_pos (op, SG_PARAM_GRAD_OUT), sg_op_param_pos (op, SG_PARAM_OUT) };
}

bool
k_sdpa_check (const KCtx *k, SgOpKind op)
{
  SdpaArgs p = sdpa_args (op);
  if (p.q < 0)
    return kfail (k, "not an attention op");
  const cJSON *bias
      = p.bias >= 0 ? kargs_get (k, p.bias, sg_param_name (SG_PARAM_ATTN_BIAS)) : NULL;
  if (bias != NULL && !cJSON_IsNull (bias)) {
    g_set_error (k->error, SG_CPU_ERROR, SG_CPU_ERROR_UNSUPPORTED,
                 "node '%s': attention with an attn_bias is not supported by the CPU backend",
                 k->node);
    return false;
  }
  if (kargs_number (k, p.dropout, sg_param_name (SG_PARAM_DROPOUT_P), 0.0) != 0.0) {
    g_set_error (k->error, SG_CPU_ERROR, SG_CPU_ERROR_UNSUPPORTED,
                 "node '%s': attention with dropout_p != 0 is not deterministic; "
                 "the CPU backend does not run it", k->node);
    return false;
  }
  for (int i = 0; i < 3; i++)
    if (!sg_cpu_is_ref (cJSON_GetArrayItem (k->args, (i == 0 ? p.q : i == 1 ? p.k : p.v))))
      return kfail (k, "attention query/key/value must be tensor references");
  return true;
}

typedef struct {
  int64_t b, hq, hk, sq, sk, d, dv;
  float scale;
  bool causal;
} Dims;

static bool
load_qkv (const KCtx *k, SdpaArgs p, SgTensor *q, SgTensor *kt, SgTensor *v, Dims *d)
{
  if (!kargs_tensor (k, p.q, q) || !kargs_tensor (k, p.k, kt) || !kargs_tensor (k, p.v, v))
    return false;
  if (q->ndim != 4 || kt->ndim != 4 || v->ndim != 4)
    return kfail (k, "attention operands must be 4-D [batch, heads, seq, dim]");
  d->b = q->shape[0], d->hq = q->shape[1], d->sq = q->shape[2], d->d = q->shape[3];
  d->hk = kt->shape[1], d->sk = kt->shape[2], d->dv = v->shape[3];
  if (kt->shape[0] != d->b || v->shape[0] != d->b || kt->shape[3] != d->d ||
      v->shape[1] != d->hk || v->shape[2] != d->sk || d->hk < 1 || d->hq % d->hk != 0)
    return kfail (k, "attention query/key/value shapes do not agree");
  const cJSON *s = kargs_get (k, -1, sg_param_name (SG_PARAM_SCALE));
  d->scale = cJSON_IsNumber (s) ? (float)s->valuedouble : 1.0f / sqrtf ((float)d->d);
  d->causal = kargs_bool (k, p.causal, sg_param_name (SG_PARAM_IS_CAUSAL), false);
  return true;
}

/* The 2-D view [rows, cols] of rows [b, h] of a 4-D tensor. */
static SgTensor
view_bh (const SgTensor *t, int64_t b, int64_t h)
{
  SgTensor m = *t;
  m.ndim = 2;
  m.data = (char *)t->data +
           (b * t->stride[0] + h * t->stride[1]) * (int64_t)sg_dtype_size (t->dtype);
  m.shape[0] = t->shape[2], m.shape[1] = t->shape[3];
  m.stride[0] = t->stride[2], m.stride[1] = t->stride[3];
  return m;
}

/* Rows [b, h] of a 4-D tensor as a contiguous float matrix [rows, cols]. */
static void
load_bh (const SgTensor *t, int64_t b, int64_t h, float *dst)
{
  SgTensor m = view_bh (t, b, h);
  sg_tensor_to_float (&m, dst);
}

static void
store_bh (const SgTensor *t, int64_t b, int64_t h, const float *src)
{
  SgTensor m = view_bh (t, b, h);
  sg_tensor_from_float (&m, src);
}

/* P (sq x sk) = softmax(scale * Q K^T) with the mask; lse per row. */
static void
softmax_rows (const Dims *d, const float *q, const float *kk, float *p, float *lse)
{
  for (int64_t i = 0; i < d->sq; i++) {
    float *row = p + i * d->sk;
    float mx = -INFINITY;
    for (int64_t j = 0; j < d->sk; j++) {
      if (d->causal && j > i) {
        row[j] = -INFINITY;
        continue;
      }
      float s = 0.0f;
      for (int64_t c = 0; c < d->d; c++)
        s += q[i * d->d + c] * kk[j * d->d + c];
      row[j] = s * d->scale;
      mx = fmaxf (mx, row[j]);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < d->sk; j++) {
      row[j] = isinf (mx) ? 0.0f : expf (row[j] - mx);
      sum += row[j];
    }
    for (int64_t j = 0; j < d->sk; j++)
      row[j] = sum > 0.0f ? row[j] / sum : 0.0f;
    if (lse != NULL)
      lse[i] = sum > 0.0f ? mx + logf (sum) : -INFINITY;
  }
}

bool
k_sdpa_fwd (const KCtx *k, SgOpKind op, SgTensor *outs, int n_out)
{
  if (!k_sdpa_check (k, op))
    return false;
  SdpaArgs p = sdpa_args (op);
  SgTensor q, kt, v;
  Dims d;
  if (!load_qkv (k, p, &q, &kt, &v, &d))
    return false;
  SgTensor *o = &outs[0];
  if (o->data == NULL || o->ndim != 4 || o->shape[0] != d.b || o->shape[1] != d.hq ||
      o->shape[2] != d.sq || o->shape[3] != d.dv)
    return kfail (k, "attention output 0 does not match [batch, heads, seq_q, dim_v]");
  /* Other tensor slots (philox seed/offset, debug mask): zeros. */
  for (int i = 1; i < n_out; i++)
    if (outs[i].data != NULL)
      sg_tensor_fill (&outs[i], 0.0);
  SgTensor *lse_t = n_out > 1 && outs[1].data != NULL ? &outs[1] : NULL;
  if (lse_t != NULL && (lse_t->ndim < 3 || lse_t->shape[0] != d.b || lse_t->shape[1] != d.hq ||
                        lse_t->shape[2] < d.sq))
    return kfail (k, "attention logsumexp output does not match [batch, heads, seq_q(, 1)]");
  float *fq = g_new (float, d.sq * d.d), *fk = g_new (float, d.sk * d.d);
  float *fv = g_new (float, d.sk * d.dv), *fo = g_new (float, d.sq * d.dv);
  float *pm = g_new (float, d.sq * d.sk), *lse = g_new (float, d.sq);
  for (int64_t b = 0; b < d.b; b++)
    for (int64_t h = 0; h < d.hq; h++) {
      int64_t hk = h / (d.hq / d.hk);
      load_bh (&q, b, h, fq);
      load_bh (&kt, b, hk, fk);
      load_bh (&v, b, hk, fv);
      softmax_rows (&d, fq, fk, pm, lse);
      memset (fo, 0, (size_t)(d.sq * d.dv) * sizeof (float));
      for (int64_t i = 0; i < d.sq; i++)
        for (int64_t j = 0; j < d.sk; j++) {
          float pij = pm[i * d.sk + j];
          for (int64_t c = 0; c < d.dv; c++)
            fo[i * d.dv + c] += pij * fv[j * d.dv + c];
        }
      store_bh (o, b, h, fo);
      if (lse_t != NULL)
        for (int64_t i = 0; i < d.sq; i++)
          sg_tensor_store (lse_t->dtype, lse_t->data,
                           b * lse_t->stride[0] + h * lse_t->stride[1] + i * lse_t->stride[2],
                           lse[i]);
    }
  g_free (fq), g_free (fk), g_free (fv), g_free (fo), g_free (pm), g_free (lse);
  return true;
}

bool
k_sdpa_bwd (const KCtx *k, SgOpKind op, SgTensor *outs, int n_out)
{
  if (!k_sdpa_check (k, op))
    return false;
  SdpaArgs p = sdpa_args (op);
  SgTensor q, kt, v, dout;
  Dims d;
  if (!load_qkv (k, p, &q, &kt, &v, &d) || !kargs_tensor (k, p.dout, &dout))
    return false;
  if (dout.ndim != 4 || dout.shape[2] != d.sq || dout.shape[3] != d.dv)
    return kfail (k, "attention grad_out does not match [batch, heads, seq_q, dim_v]");
  if (n_out < 3 || outs[0].data == NULL || outs[1].data == NULL || outs[2].data == NULL)
    return kfail (k, "attention backward needs tensor outputs (dq, dk, dv)");
  const SgTensor *want[3] = { &q, &kt, &v };
  for (int i = 0; i < 3; i++)
    if (outs[i].ndim != 4 || memcmp (outs[i].shape, want[i]->shape, 4 * sizeof (int64_t)) != 0)
      return kfail (k, "attention backward outputs must match query, key and value shapes");
  for (int i = 3; i < n_out; i++)
    if (outs[i].data != NULL)
      sg_tensor_fill (&outs[i], 0.0);
  int64_t g = d.hq / d.hk;
  float *fq = g_new (float, d.sq * d.d), *fk = g_new (float, d.sk * d.d);
  float *fv = g_new (float, d.sk * d.dv), *fdo = g_new (float, d.sq * d.dv);
  float *pm = g_new (float, d.sq * d.sk), *dp = g_new (float, d.sq * d.sk);
  float *dq = g_new (float, d.sq * d.d), *dk = g_new (float, d.sk * d.d);
  float *dv = g_new (float, d.sk * d.dv);
  for (int64_t b = 0; b < d.b; b++)
    for (int64_t hk = 0; hk < d.hk; hk++) {
      /* dK, dV of a shared K/V head sum over its query heads in head order */
      memset (dk, 0, (size_t)(d.sk * d.d) * sizeof (float));
      memset (dv, 0, (size_t)(d.sk * d.dv) * sizeof (float));
      load_bh (&kt, b, hk, fk);
      load_bh (&v, b, hk, fv);
      for (int64_t h = hk * g; h < (hk + 1) * g; h++) {
        load_bh (&q, b, h, fq);
        load_bh (&dout, b, h, fdo);
        softmax_rows (&d, fq, fk, pm, NULL);
        memset (dq, 0, (size_t)(d.sq * d.d) * sizeof (float));
        for (int64_t i = 0; i < d.sq; i++) {
          float rs = 0.0f;
          for (int64_t j = 0; j < d.sk; j++) {
            float s = 0.0f;
            for (int64_t c = 0; c < d.dv; c++)
              s += fdo[i * d.dv + c] * fv[j * d.dv + c];
            dp[i * d.sk + j] = s;
            rs += pm[i * d.sk + j] * s;
          }
          for (int64_t j = 0; j < d.sk; j++) {
            float pij = pm[i * d.sk + j];
            float ds = pij * (dp[i * d.sk + j] - rs) * d.scale;
            for (int64_t c = 0; c < d.dv; c++)
              dv[j * d.dv + c] += pij * fdo[i * d.dv + c];
            if (ds == 0.0f)
              continue;
            for (int64_t c = 0; c < d.d; c++) {
              dq[i * d.d + c] += ds * fk[j * d.d + c];
              dk[j * d.d + c] += ds * fq[i * d.d + c];
            }
          }
        }
        store_bh (&outs[0], b, h, dq);
      }
      store_bh (&outs[1], b, hk, dk);
      store_bh (&outs[2], b, hk, dv);
    }
  g_free (fq), g_free (fk), g_free (fv), g_free (fdo), g_free (pm), g_free (dp);
  g_free (dq), g_free (dk), g_free (dv);
  return true;
}
