/* test_kernels.c: the CPU kernel library and the deterministic inputs
 * against hand-computed values (suite 'runtime').
 *
 * Tensors are named in a small table; arguments reference them as
 * {"node": NAME}, as tools/sgeval does.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "runtime.h"

typedef struct {
  const char *name;
  SgTensor t;
} Named;

typedef struct {
  Named items[8];
  int n;
} Table;

static bool
resolve (const cJSON *ref, SgTensor *out, void *ud, GError **error)
{
  Table *tb = ud;
  const cJSON *n = cJSON_GetObjectItem (ref, "node");
  for (int i = 0; i < tb->n; i++)
    if (cJSON_IsString (n) && strcmp (tb->items[i].name, n->valuestring) == 0) {
      *out = tb->items[i].t;
      return true;
    }
  g_set_error (error, SG_CPU_ERROR, SG_CPU_ERROR_ARGS, "unknown test tensor");
  return false;
}

static SgTensor
f32 (float *data, int ndim, const int64_t *shape)
{
  SgTensor t = { .data = data, .dtype = SG_DTYPE_F32, .ndim = ndim };
  for (int i = 0; i < ndim; i++)
    t.shape[i] = shape[i];
  sg_tensor_set_contiguous (&t);
  return t;
}

static void
add (Table *tb, const char *name, SgTensor t)
{
  tb->items[tb->n].name = name;
  tb->items[tb->n].t = t;
  tb->n++;
}

/* Runs @op with @args_json / @kwargs_json; returns success, error in @err. */
static bool
run (SgOpKind op, Table *tb, const char *args_json, const char *kwargs_json, SgTensor *outs,
     int n_out, GError **err)
{
  cJSON *args = cJSON_Parse (args_json), *kwargs = cJSON_Parse (kwargs_json ? kwargs_json : "{}");
  ck_assert_ptr_nonnull (args);
  bool ok = sg_cpu_kernel (op, "n1", args, kwargs, resolve, tb, outs, n_out, err);
  cJSON_Delete (args);
  cJSON_Delete (kwargs);
  return ok;
}

#define ASSERT_NEAR(a, b, tol) ck_assert_msg (fabs ((double)(a) - (double)(b)) <= (tol), \
                                              "%s = %.9g, expected %.9g", #a, (double)(a), (double)(b))

START_TEST (bf16_rounds_to_nearest_even)
{
  /* 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0) */
  ck_assert_uint_eq (sg_float_to_bf16 (1.00390625f), 0x3f80);
  /* 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625: goes up */
  ck_assert_uint_eq (sg_float_to_bf16 (1.01171875f), 0x3f82);
  ck_assert_uint_eq (sg_float_to_bf16 (-2.0f), 0xc000);
  ck_assert (isnan (sg_bf16_to_float (sg_float_to_bf16 (NAN))));
  ASSERT_NEAR (sg_bf16_to_float (0x3f82), 1.015625, 0);
}
END_TEST

START_TEST (mm_reads_a_transposed_view)
{
  /* a = [[1,2,3],[4,5,6]]; b given as the transpose view of bt = [[1,0,1],[2,1,0]] */
  float a[6] = { 1, 2, 3, 4, 5, 6 }, bt[6] = { 1, 0, 1, 2, 1, 0 }, c[4];
  Table tb = { 0 };
  add (&tb, "a", f32 (a, 2, (int64_t[]){ 2, 3 }));
  SgTensor b = f32 (bt, 2, (int64_t[]){ 2, 3 });
  b.shape[0] = 3, b.shape[1] = 2, b.stride[0] = 1, b.stride[1] = 3;
  add (&tb, "b", b);
  SgTensor out = f32 (c, 2, (int64_t[]){ 2, 2 });
  GError *err = NULL;
  ck_assert (run (SG_OP_MM, &tb, "[{\"node\":\"a\"},{\"node\":\"b\"}]", NULL, &out, 1, &err));
  /* a @ bt^T = [[1+3, 2+2], [4+6, 8+5]] */
  ASSERT_NEAR (c[0], 4, 0);
  ASSERT_NEAR (c[1], 4, 0);
  ASSERT_NEAR (c[2], 10, 0);
  ASSERT_NEAR (c[3], 13, 0);
}
END_TEST

START_TEST (addmm_broadcasts_bias_with_beta_alpha)
{
  float bias[2] = { 10, 20 }, a[2] = { 1, 2 }, b[4] = { 1, 2, 3, 4 }, c[2];
  Table tb = { 0 };
  add (&tb, "bias", f32 (bias, 1, (int64_t[]){ 2 }));
  add (&tb, "a", f32 (a, 2, (int64_t[]){ 1, 2 }));
  add (&tb, "b", f32 (b, 2, (int64_t[]){ 2, 2 }));
  SgTensor out = f32 (c, 2, (int64_t[]){ 1, 2 });
  GError *err = NULL;
  ck_assert (run (SG_OP_ADDMM, &tb, "[{\"node\":\"bias\"},{\"node\":\"a\"},{\"node\":\"b\"}]",
                  "{\"beta\":0.5,\"alpha\":2}", &out, 1, &err));
  /* a @ b = [7, 10]; 0.5*bias + 2*(a@b) = [19, 30] */
  ASSERT_NEAR (c[0], 19, 0);
  ASSERT_NEAR (c[1], 30, 0);
}
END_TEST

START_TEST (bmm_multiplies_each_batch)
{
  float a[4] = { 1, 2, 3, 4 }, b[4] = { 5, 6, 7, 8 }, c[2];
  Table tb = { 0 };
  add (&tb, "a", f32 (a, 3, (int64_t[]){ 2, 1, 2 }));
  add (&tb, "b", f32 (b, 3, (int64_t[]){ 2, 2, 1 }));
  SgTensor out = f32 (c, 3, (int64_t[]){ 2, 1, 1 });
  GError *err = NULL;
  ck_assert (run (SG_OP_BMM, &tb, "[{\"node\":\"a\"},{\"node\":\"b\"}]", NULL, &out, 1, &err));
  ASSERT_NEAR (c[0], 1 * 5 + 2 * 6, 0);
  ASSERT_NEAR (c[1], 3 * 7 + 4 * 8, 0);
}
END_TEST

START_TEST (add_broadcasts_and_applies_alpha)
{
  float x[6] = { 1, 2, 3, 4, 5, 6 }, y[2] = { 10, 20 }, o[6];
  Table tb = { 0 };
  add (&tb, "x", f32 (x, 2, (int64_t[]){ 2, 3 }));
  add (&tb, "y", f32 (y, 2, (int64_t[]){ 2, 1 }));
  SgTensor out = f32 (o, 2, (int64_t[]){ 2, 3 });
  GError *err = NULL;
  ck_assert (run (SG_OP_ADD_TENSOR, &tb, "[{\"node\":\"x\"},{\"node\":\"y\"}]", "{\"alpha\":2}",
                  &out, 1, &err));
  float want[6] = { 21, 22, 23, 44, 45, 46 };
  for (int i = 0; i < 6; i++)
    ASSERT_NEAR (o[i], want[i], 0);
  ck_assert (run (SG_OP_SUB_TENSOR, &tb, "[{\"node\":\"x\"}, 0.5]", NULL, &out, 1, &err));
  ASSERT_NEAR (o[5], 5.5, 0);
  ck_assert (run (SG_OP_POW_TENSOR_SCALAR, &tb, "[{\"node\":\"x\"}, 2]", NULL, &out, 1, &err));
  ASSERT_NEAR (o[2], 9, 0);
  ck_assert (run (SG_OP_RSQRT, &tb, "[{\"node\":\"x\"}]", NULL, &out, 1, &err));
  ASSERT_NEAR (o[3], 0.5, 1e-7);
}
END_TEST

START_TEST (add_rejects_shapes_that_do_not_broadcast)
{
  float x[6] = { 0 }, y[2] = { 0 }, o[6];
  Table tb = { 0 };
  add (&tb, "x", f32 (x, 2, (int64_t[]){ 2, 3 }));
  add (&tb, "y", f32 (y, 1, (int64_t[]){ 2 }));
  SgTensor out = f32 (o, 2, (int64_t[]){ 2, 3 });
  GError *err = NULL;
  ck_assert (!run (SG_OP_ADD_TENSOR, &tb, "[{\"node\":\"x\"},{\"node\":\"y\"}]", NULL, &out, 1,
                   &err));
  ck_assert_ptr_nonnull (strstr (err->message, "'n1'"));
  g_error_free (err);
}
END_TEST

START_TEST (silu_and_its_backward_match_the_formulas)
{
  float x[3] = { -1.5f, 0.0f, 2.0f }, g[3] = { 1.0f, 2.0f, -0.5f }, o[3];
  Table tb = { 0 };
  add (&tb, "x", f32 (x, 1, (int64_t[]){ 3 }));
  add (&tb, "g", f32 (g, 1, (int64_t[]){ 3 }));
  SgTensor out = f32 (o, 1, (int64_t[]){ 3 });
  GError *err = NULL;
  ck_assert (run (SG_OP_SILU, &tb, "[{\"node\":\"x\"}]", NULL, &out, 1, &err));
  for (int i = 0; i < 3; i++)
    ASSERT_NEAR (o[i], x[i] / (1 + exp (-x[i])), 1e-6);
  ck_assert (run (SG_OP_SILU_BACKWARD, &tb, "[{\"node\":\"g\"},{\"node\":\"x\"}]", NULL, &out, 1,
                  &err));
  for (int i = 0; i < 3; i++) {
    double s = 1 / (1 + exp (-x[i]));
    ASSERT_NEAR (o[i], g[i] * s * (1 + x[i] * (1 - s)), 1e-6);
  }
}
END_TEST

START_TEST (mean_dim_keepdim_and_sum_over_dims)
{
  float x[6] = { 1, 2, 3, 4, 5, 6 }, o2[2], o3[3], o1[1];
  Table tb = { 0 };
  add (&tb, "x", f32 (x, 2, (int64_t[]){ 2, 3 }));
  SgTensor m = f32 (o2, 2, (int64_t[]){ 2, 1 });
  GError *err = NULL;
  ck_assert (run (SG_OP_MEAN_DIM, &tb, "[{\"node\":\"x\"}, [-1], true]", NULL, &m, 1, &err));
  ASSERT_NEAR (o2[0], 2, 0);
  ASSERT_NEAR (o2[1], 5, 0);
  SgTensor s = f32 (o3, 1, (int64_t[]){ 3 });
  ck_assert (run (SG_OP_SUM_DIM, &tb, "[{\"node\":\"x\"}, [0]]", NULL, &s, 1, &err));
  ASSERT_NEAR (o3[0], 5, 0);
  ASSERT_NEAR (o3[2], 9, 0);
  SgTensor all = f32 (o1, 0, NULL);
  ck_assert (run (SG_OP_SUM, &tb, "[{\"node\":\"x\"}]", NULL, &all, 1, &err));
  ASSERT_NEAR (o1[0], 21, 0);
  ck_assert (run (SG_OP_AMAX, &tb, "[{\"node\":\"x\"}, [0, 1]]", NULL, &all, 1, &err));
  ASSERT_NEAR (o1[0], 6, 0);
  /* a reduction whose result does not fit the output's meta is refused */
  ck_assert (!run (SG_OP_SUM_DIM, &tb, "[{\"node\":\"x\"}, [1]]", NULL, &s, 1, &err));
  g_clear_error (&err);
}
END_TEST

START_TEST (views_copy_the_elements_they_describe)
{
  float x[6] = { 1, 2, 3, 4, 5, 6 }, o[6], one[1] = { 7 };
  Table tb = { 0 };
  add (&tb, "x", f32 (x, 2, (int64_t[]){ 2, 3 }));
  add (&tb, "one", f32 (one, 0, NULL));
  GError *err = NULL;
  SgTensor t = f32 (o, 2, (int64_t[]){ 3, 2 });
  ck_assert (run (SG_OP_T, &tb, "[{\"node\":\"x\"}]", NULL, &t, 1, &err));
  float want_t[6] = { 1, 4, 2, 5, 3, 6 };
  for (int i = 0; i < 6; i++)
    ASSERT_NEAR (o[i], want_t[i], 0);
  ck_assert (run (SG_OP_TRANSPOSE, &tb, "[{\"node\":\"x\"}, 0, -1]", NULL, &t, 1, &err));
  for (int i = 0; i < 6; i++)
    ASSERT_NEAR (o[i], want_t[i], 0);
  /* the output may itself be strided: meta stride [1, 3] of a t() */
  SgTensor ts = f32 (o, 2, (int64_t[]){ 3, 2 });
  ts.stride[0] = 1, ts.stride[1] = 3;
  ck_assert (run (SG_OP_T, &tb, "[{\"node\":\"x\"}]", NULL, &ts, 1, &err));
  for (int i = 0; i < 6; i++)
    ASSERT_NEAR (o[i], x[i], 0);
  SgTensor e = f32 (o, 2, (int64_t[]){ 2, 3 });
  ck_assert (run (SG_OP_EXPAND, &tb, "[{\"node\":\"one\"}, [2, 3]]", NULL, &e, 1, &err));
  for (int i = 0; i < 6; i++)
    ASSERT_NEAR (o[i], 7, 0);
  SgTensor sl = f32 (o, 2, (int64_t[]){ 2, 2 });
  ck_assert (run (SG_OP_SLICE, &tb, "[{\"node\":\"x\"}, 1, 1, 3]", NULL, &sl, 1, &err));
  float want_s[4] = { 2, 3, 5, 6 };
  for (int i = 0; i < 4; i++)
    ASSERT_NEAR (o[i], want_s[i], 0);
  SgTensor v = f32 (o, 1, (int64_t[]){ 6 });
  ck_assert (run (SG_OP_VIEW, &tb, "[{\"node\":\"x\"}, [6]]", NULL, &v, 1, &err));
  ASSERT_NEAR (o[4], 5, 0);
}
END_TEST

START_TEST (to_copy_rounds_to_bf16)
{
  float x[2] = { 1.00390625f, -3.3f };
  uint16_t o[2];
  Table tb = { 0 };
  add (&tb, "x", f32 (x, 1, (int64_t[]){ 2 }));
  SgTensor out = { .data = o, .dtype = SG_DTYPE_BF16, .ndim = 1, .shape = { 2 }, .stride = { 1 } };
  GError *err = NULL;
  ck_assert (run (SG_OP_TO_COPY, &tb, "[{\"node\":\"x\"}]", "{\"dtype\":\"bfloat16\"}", &out, 1,
                  &err));
  ck_assert_uint_eq (o[0], 0x3f80);
  ck_assert_uint_eq (o[1], sg_float_to_bf16 (-3.3f));
}
END_TEST

START_TEST (bucket_pack_interleaves_and_unpack_inverts_it)
{
  /* a = [a0 a1 | a2 a3], b = [b0 | b1] per rank chunk, k = 2 */
  float a[4] = { 1, 2, 3, 4 }, b[2] = { 10, 20 }, flat[6], ua[4], ub[2];
  Table tb = { 0 };
  add (&tb, "a", f32 (a, 2, (int64_t[]){ 2, 2 }));
  add (&tb, "b", f32 (b, 1, (int64_t[]){ 2 }));
  SgTensor f = f32 (flat, 1, (int64_t[]){ 6 });
  GError *err = NULL;
  ck_assert (run (SG_OP_BUCKET_PACK, &tb, "[[{\"node\":\"a\"},{\"node\":\"b\"}], 2, true]", NULL,
                  &f, 1, &err));
  float want[6] = { 1, 2, 10, 3, 4, 20 };
  for (int i = 0; i < 6; i++)
    ASSERT_NEAR (flat[i], want[i], 0);
  add (&tb, "flat", f);
  SgTensor oa = f32 (ua, 2, (int64_t[]){ 2, 2 }), ob = f32 (ub, 1, (int64_t[]){ 2 });
  ck_assert (run (SG_OP_BUCKET_UNPACK, &tb, "[{\"node\":\"flat\"}, 2, 0, 2]", NULL, &oa, 1, &err));
  ck_assert (run (SG_OP_BUCKET_UNPACK, &tb, "[{\"node\":\"flat\"}, 2, 2, 1]", NULL, &ob, 1, &err));
  for (int i = 0; i < 4; i++)
    ASSERT_NEAR (ua[i], a[i], 0);
  ASSERT_NEAR (ub[0], 10, 0);
  ASSERT_NEAR (ub[1], 20, 0);
  ck_assert (run (SG_OP_BUCKET_PACK, &tb, "[[{\"node\":\"a\"},{\"node\":\"b\"}], 2, false]", NULL,
                  &f, 1, &err));
  float cat[6] = { 1, 2, 3, 4, 10, 20 };
  for (int i = 0; i < 6; i++)
    ASSERT_NEAR (flat[i], cat[i], 0);
}
END_TEST

/* Attention over [1, 1, 2, 1] tensors: every number can be done by hand. */
static void
sdpa_tables (Table *tb, float *q, float *k, float *v)
{
  add (tb, "q", f32 (q, 4, (int64_t[]){ 1, 1, 2, 1 }));
  add (tb, "k", f32 (k, 4, (int64_t[]){ 1, 1, 2, 1 }));
  add (tb, "v", f32 (v, 4, (int64_t[]){ 1, 1, 2, 1 }));
}

START_TEST (sdpa_causal_forward_matches_hand_softmax)
{
  float q[2] = { 1, 2 }, k[2] = { 0.5f, -1 }, v[2] = { 3, 5 }, o[2], lse[2];
  Table tb = { 0 };
  sdpa_tables (&tb, q, k, v);
  SgTensor outs[2] = { f32 (o, 4, (int64_t[]){ 1, 1, 2, 1 }), f32 (lse, 3, (int64_t[]){ 1, 1, 2 }) };
  GError *err = NULL;
  ck_assert (run (SG_OP_SDPA_FLASH, &tb,
                  "[{\"node\":\"q\"},{\"node\":\"k\"},{\"node\":\"v\"}, 0.0, true]", NULL, outs, 2,
                  &err));
  /* row 0 sees key 0 only; row 1: scores 2*0.5 = 1 and 2*-1 = -2 (scale 1/sqrt(1)) */
  ASSERT_NEAR (o[0], 3, 1e-6);
  double p0 = exp (1.0) / (exp (1.0) + exp (-2.0));
  ASSERT_NEAR (o[1], p0 * 3 + (1 - p0) * 5, 1e-5);
  ASSERT_NEAR (lse[0], 0.5, 1e-6);
  ASSERT_NEAR (lse[1], log (exp (1.0) + exp (-2.0)), 1e-5);
  /* without the mask and with scale 0.5, row 0 sees both keys */
  ck_assert (run (SG_OP_SDPA_FLASH, &tb,
                  "[{\"node\":\"q\"},{\"node\":\"k\"},{\"node\":\"v\"}, 0.0, false]",
                  "{\"scale\":0.5}", outs, 2, &err));
  double r0 = exp (0.25) / (exp (0.25) + exp (-0.5));
  ASSERT_NEAR (o[0], r0 * 3 + (1 - r0) * 5, 1e-5);
}
END_TEST

/* The backward is checked against central differences of the forward. */
START_TEST (sdpa_backward_matches_finite_differences)
{
  float q[2] = { 0.3f, -0.7f }, k[2] = { 0.9f, 0.2f }, v[2] = { 1.5f, -2.0f };
  float dout[2] = { 0.6f, -1.1f }, o[2], lse[2], dq[2], dk[2], dv[2];
  Table tb = { 0 };
  sdpa_tables (&tb, q, k, v);
  add (&tb, "do", f32 (dout, 4, (int64_t[]){ 1, 1, 2, 1 }));
  add (&tb, "o", f32 (o, 4, (int64_t[]){ 1, 1, 2, 1 }));
  GError *err = NULL;
  const char *fwd = "[{\"node\":\"q\"},{\"node\":\"k\"},{\"node\":\"v\"}, null, true, 0.0, true]";
  SgTensor outs[2] = { f32 (o, 4, (int64_t[]){ 1, 1, 2, 1 }), f32 (lse, 3, (int64_t[]){ 1, 1, 2 }) };
  ck_assert (run (SG_OP_SDPA_EFFICIENT, &tb, fwd, NULL, outs, 2, &err));
  SgTensor g[3] = { f32 (dq, 4, (int64_t[]){ 1, 1, 2, 1 }), f32 (dk, 4, (int64_t[]){ 1, 1, 2, 1 }),
                    f32 (dv, 4, (int64_t[]){ 1, 1, 2, 1 }) };
  ck_assert (run (SG_OP_SDPA_CUDNN_BWD, &tb,
                  "[{\"node\":\"do\"},{\"node\":\"q\"},{\"node\":\"k\"},{\"node\":\"v\"},"
                  "{\"node\":\"o\"}, null, null, null, null, null, null, 2, 2, 0.0, true]",
                  NULL, g, 3, &err));
  float *params[3] = { q, k, v }, *grads[3] = { dq, dk, dv };
  for (int p = 0; p < 3; p++)
    for (int i = 0; i < 2; i++) {
      double h = 1e-3, f[2];
      float keep = params[p][i];
      for (int s = 0; s < 2; s++) {
        params[p][i] = keep + (s ? -(float)h : (float)h);
        ck_assert (run (SG_OP_SDPA_EFFICIENT, &tb, fwd, NULL, outs, 2, &err));
        f[s] = (double)o[0] * dout[0] + (double)o[1] * dout[1];
      }
      params[p][i] = keep;
      ASSERT_NEAR (grads[p][i], (f[0] - f[1]) / (2 * h), 2e-3);
    }
}
END_TEST

START_TEST (check_rejects_dropout_bias_and_unknown_ops_naming_the_node)
{
  GError *err = NULL;
  cJSON *a = cJSON_Parse ("[{\"node\":\"q\"},{\"node\":\"k\"},{\"node\":\"v\"}, 0.1, true]");
  ck_assert (!sg_cpu_kernel_check (SG_OP_SDPA_FLASH, "attn_3", a, NULL, &err));
  ck_assert_ptr_nonnull (strstr (err->message, "attn_3"));
  ck_assert_ptr_nonnull (strstr (err->message, "dropout"));
  g_clear_error (&err);
  cJSON_Delete (a);
  a = cJSON_Parse ("[{\"node\":\"q\"},{\"node\":\"k\"},{\"node\":\"v\"},{\"node\":\"m\"}, true]");
  ck_assert (!sg_cpu_kernel_check (SG_OP_SDPA_EFFICIENT, "attn_4", a, NULL, &err));
  ck_assert_ptr_nonnull (strstr (err->message, "attn_bias"));
  g_clear_error (&err);
  ck_assert (!sg_cpu_kernel_check (SG_OP_UNKNOWN, "mystery", a, NULL, &err));
  ck_assert_ptr_nonnull (strstr (err->message, "mystery"));
  g_clear_error (&err);
  ck_assert (!sg_cpu_kernel_check (SG_OP_ALL_GATHER, "ag", a, NULL, &err));
  g_clear_error (&err);
  ck_assert (sg_cpu_kernel_check (SG_OP_MM, "mm", a, NULL, &err));
  cJSON_Delete (a);
}
END_TEST

START_TEST (inputs_depend_on_name_rank_and_seed_only)
{
  SgPlanValue v = { .name = (char *)"arg0_1", .dtype = SG_DTYPE_BF16, .ndim = 2,
                    .shape = (int64_t[]){ 4, 8 }, .stride = (int64_t[]){ 8, 1 } };
  uint16_t a[32], b[32], c[32], d[32];
  sg_rt_fill_input (&v, 0, 7, a);
  sg_rt_fill_named ("arg0_1", SG_DTYPE_BF16, 32, 0, 7, b);
  ck_assert_mem_eq (a, b, sizeof a);
  sg_rt_fill_named ("arg0_1", SG_DTYPE_BF16, 32, 1, 7, c);
  sg_rt_fill_named ("arg0_1", SG_DTYPE_BF16, 32, 0, 8, d);
  ck_assert (memcmp (a, c, sizeof a) != 0);
  ck_assert (memcmp (a, d, sizeof a) != 0);
  float f[1000];
  sg_rt_fill_named ("w", SG_DTYPE_F32, 1000, 3, 1, f);
  double mean = 0;
  for (int i = 0; i < 1000; i++) {
    ck_assert (f[i] >= -1.0f && f[i] < 1.0f);
    mean += f[i] / 1000;
  }
  ck_assert (fabs (mean) < 0.1);
  for (int i = 0; i < 32; i++)
    ck_assert (sg_bf16_to_float (a[i]) >= -1.0f && sg_bf16_to_float (a[i]) <= 1.0f);
  int64_t ints[64];
  sg_rt_fill_named ("idx", SG_DTYPE_I64, 64, 0, 1, ints);
  for (int i = 0; i < 64; i++)
    ck_assert (ints[i] >= 0 && ints[i] < 8);
}
END_TEST

/* Each output element is one dot product summed k ascending, so an
 * M-chunked (all_gather -> mm decomposed) or N-chunked mm gives the same
 * bits as one mm; 7 rows exercise both the four-row and the single-row
 * paths of the loop. A K-chunked mm is not claimed (partial sums). */
START_TEST (mm_rows_and_columns_do_not_depend_on_chunking)
{
  float a[7 * 13], b[13 * 5], full[7 * 5], part[7 * 5];
  for (int i = 0; i < 7 * 13; i++)
    a[i] = (float)sin (0.37 * i + 0.1);
  for (int i = 0; i < 13 * 5; i++)
    b[i] = (float)cos (0.91 * i);
  Table tb = { 0 };
  add (&tb, "a", f32 (a, 2, (int64_t[]){ 7, 13 }));
  add (&tb, "b", f32 (b, 2, (int64_t[]){ 13, 5 }));
  SgTensor out = f32 (full, 2, (int64_t[]){ 7, 5 });
  ck_assert (run (SG_OP_MM, &tb, "[{\"node\":\"a\"},{\"node\":\"b\"}]", NULL, &out, 1, NULL));
  const int cuts[][2] = { { 0, 3 }, { 3, 7 }, { 0, 1 }, { 1, 6 }, { 6, 7 } };
  for (size_t c = 0; c < G_N_ELEMENTS (cuts); c++) { /* rows [r0, r1) of a */
    const int r0 = cuts[c][0], r1 = cuts[c][1];
    tb.items[0].t = f32 (a + r0 * 13, 2, (int64_t[]){ r1 - r0, 13 });
    SgTensor o = f32 (part, 2, (int64_t[]){ r1 - r0, 5 });
    ck_assert (run (SG_OP_MM, &tb, "[{\"node\":\"a\"},{\"node\":\"b\"}]", NULL, &o, 1, NULL));
    ck_assert (memcmp (part, full + r0 * 5, sizeof (float) * (size_t)(r1 - r0) * 5) == 0);
  }
  tb.items[0].t = f32 (a, 2, (int64_t[]){ 7, 13 });
  for (int c0 = 0; c0 < 5; c0 += 2) { /* columns [c0, c0 + 2) of b as a strided view */
    const int w = MIN (2, 5 - c0);
    SgTensor bv = f32 (b + c0, 2, (int64_t[]){ 13, w });
    bv.stride[0] = 5;
    tb.items[1].t = bv;
    SgTensor o = f32 (part, 2, (int64_t[]){ 7, w });
    ck_assert (run (SG_OP_MM, &tb, "[{\"node\":\"a\"},{\"node\":\"b\"}]", NULL, &o, 1, NULL));
    for (int r = 0; r < 7; r++)
      ck_assert (memcmp (part + r * w, full + r * 5 + c0, sizeof (float) * (size_t)w) == 0);
  }
}
END_TEST

START_TEST (rank_roll_rotates_blocks_by_group_rank)
{
  float x[8], y[8];
  for (int i = 0; i < 8; i++)
    x[i] = (float)i;
  Table tb = { 0 };
  add (&tb, "x", f32 (x, 2, (int64_t[]){ 4, 2 }));
  SgTensor out = f32 (y, 2, (int64_t[]){ 4, 2 });
  cJSON *args = cJSON_Parse ("[{\"node\":\"x\"},0,-1,\"tp\"]");
  /* group rank 1 of 4, sign -1: out block b = x block (b - 1) mod 4 */
  ck_assert (sg_cpu_rank_roll ("rr", args, resolve, &tb, 1, 4, &out, NULL));
  const float want[8] = { 6, 7, 0, 1, 2, 3, 4, 5 };
  ck_assert (memcmp (y, want, sizeof want) == 0);
  GError *e = NULL;
  ck_assert (!sg_cpu_rank_roll ("rr", args, resolve, &tb, 1, 3, &out, &e)); /* 4 rows, 3 blocks */
  ck_assert (strstr (e->message, "node 'rr'"));
  g_clear_error (&e);
  SgTensor o2 = out;
  ck_assert (!sg_cpu_kernel (SG_OP_RANK_ROLL, "rr", args, NULL, resolve, &tb, &o2, 1, &e));
  ck_assert (strstr (e->message, "rank_roll depends on the rank"));
  g_clear_error (&e);
  cJSON_Delete (args);
}
END_TEST

static Suite *
kernels_suite (void)
{
  Suite *s = suite_create ("runtime-kernels");
  TCase *tc = tcase_create ("kernels");
  tcase_add_test (tc, bf16_rounds_to_nearest_even);
  tcase_add_test (tc, mm_reads_a_transposed_view);
  tcase_add_test (tc, addmm_broadcasts_bias_with_beta_alpha);
  tcase_add_test (tc, bmm_multiplies_each_batch);
  tcase_add_test (tc, add_broadcasts_and_applies_alpha);
  tcase_add_test (tc, add_rejects_shapes_that_do_not_broadcast);
  tcase_add_test (tc, silu_and_its_backward_match_the_formulas);
  tcase_add_test (tc, mean_dim_keepdim_and_sum_over_dims);
  tcase_add_test (tc, views_copy_the_elements_they_describe);
  tcase_add_test (tc, to_copy_rounds_to_bf16);
  tcase_add_test (tc, bucket_pack_interleaves_and_unpack_inverts_it);
  tcase_add_test (tc, mm_rows_and_columns_do_not_depend_on_chunking);
  tcase_add_test (tc, rank_roll_rotates_blocks_by_group_rank);
  tcase_add_test (tc, sdpa_causal_forward_matches_hand_softmax);
  tcase_add_test (tc, sdpa_backward_matches_finite_differences);
  tcase_add_test (tc, check_rejects_dropout_bias_and_unknown_ops_naming_the_node);
  tcase_add_test (tc, inputs_depend_on_name_rank_and_seed_only);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (kernels_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? 0 : 1;
}
