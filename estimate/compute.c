/* compute.c: the compute side of the cost model.
 *
 * Matmuls by flops with a size-dependent efficiency (a roofline whose
 * compute roof rises with the problem size) above a launch-bound floor;
 * attention by its wave-quantized work (tiles of 128 rows in waves of the
 * SM count); memory-bound kernels by bytes over HBM bandwidth. Calibrated
 * on H200 (docs/cost-model.md). The attention flops reported and used for
 * profile interpolation follow FlashAttention's accounting (forward
 * 4*B*H*Sq*Skv*D, halved when causal; backward 2.5x), as PyTorch's flop
 * counter does.
 *
 * Requires: node metadata (graph/ load). Invalidates: nothing.
 */
#include "estimate-private.h"

#include <math.h>
#include <string.h>

static double
peak_tflops (const SgCluster *c, SgDtype dtype)
{
  switch (dtype) {
  case SG_DTYPE_BF16:
  case SG_DTYPE_F16:
    return c->bf16_tflops;
  case SG_DTYPE_F8E4M3:
  case SG_DTYPE_F8E5M2:
    return c->fp8_tflops;
  default:
    return c->fp32_tflops;
  }
}

/* The size factor of a GEMM of @flops, in (0, 1): the fraction of
 * gemm_max_efficiency it reaches; 1/2 at gemm_half_gflops. */
static double
size_efficiency (const SgCluster *c, double flops)
{
  if (flops <= 0.0)
    return 1.0;
  double half = c->gemm_half_gflops * 1e9;
  return 1.0 / (1.0 + pow (half / flops, c->gemm_efficiency_exponent));
}

double
sg_compute_bytes_us (const SgCluster *c, double bytes)
{
  return MAX (c->kernel_floor_us,
              c->kernel_launch_us + bytes / (c->hbm_GBps * c->memory_efficiency * 1e3));
}

double
sg_compute_gemm_us (const SgCluster *c, SgDtype dtype, double flops, double bytes)
{
  double eff = c->gemm_max_efficiency * size_efficiency (c, flops);
  double t_flops = flops / (peak_tflops (c, dtype) * 1e12 * eff) * 1e6;
  double t_bytes = bytes / (c->hbm_GBps * c->memory_efficiency * 1e3);
  return MAX (c->gemm_floor_us, c->gemm_launch_us + MAX (t_flops, t_bytes));
}

double
sg_compute_sm_factor (const SgCluster *c, const SgNode *n)
{
  if (sg_op_class (n->kind) != SG_CLASS_MATMUL || n->sm_count <= 0)
    return 1.0;
  const double s = MIN (n->sm_count, c->sm_count);
  return c->gemm_sm_overhead * pow ((double)c->sm_count / s, c->gemm_sm_exponent);
}

static bool
is_backward (SgOpKind op)
{
  return sg_kernel_class (op) == SG_KERNEL_ATTENTION_BACKWARD;
}

/* The work an SDPA kernel does, wave-quantized: FlashAttention-style
 * kernels give one CTA a tile of ATTN_TILE queries (forward) or keys
 * (backward) and run the tiles in waves of sm_count. A wave lasts as long
 * as its longest tile, so a causal mask halves the time only once there
 * are several waves (measured: 1 x 8 x 2048 x 128 takes the same time
 * causal or not). */
#define ATTN_TILE 128.0

double
sg_compute_attention_work (const SgCluster *c, const SgShape *s)
{
  bool bwd = is_backward (s->op);
  double rows = (double)(bwd ? s->seq_kv : s->seq_q), cols = (double)(bwd ? s->seq_q : s->seq_kv);
  double tiles = (double)s->batch * (double)s->heads * ceil (rows / ATTN_TILE);
  double sms = (double)c->sm_count;
  double waves = ceil (tiles / sms);
  double tile = 4.0 * ATTN_TILE * cols * (double)s->head_dim * (bwd ? 2.5 : 1.0);
  double work = waves * sms * tile;
  if (s->causal)
    work = MAX (0.5 * work, sms * tile);
  return work;
}

double
sg_compute_shape_us (const SgCluster *c, const SgShape *s)
{
  if (sg_op_class (s->op) == SG_CLASS_MATMUL)
    return sg_compute_gemm_us (c, s->dtype, s->flops, s->bytes);
  bool bwd = is_backward (s->op);
  double eff;
  switch (s->op) {
  case SG_OP_SDPA_FLASH:
  case SG_OP_SDPA_FLASH_BWD:
    eff = bwd ? c->attention_flash_backward_efficiency : c->attention_flash_efficiency;
    break;
  case SG_OP_SDPA_EFFICIENT:
  case SG_OP_SDPA_EFFICIENT_BWD:
    eff = bwd ? c->attention_efficient_backward_efficiency : c->attention_efficient_efficiency;
    break;
  default:
    eff = bwd ? c->attention_cudnn_backward_efficiency : c->attention_cudnn_efficiency;
    break;
  }
  double peak = peak_tflops (c, s->dtype) * 1e12;
  double t_flops = sg_compute_attention_work (c, s) / (peak * eff) * 1e6;
  double t_bytes = s->bytes / (c->hbm_GBps * c->memory_efficiency * 1e3);
  return MAX (c->attention_floor_us, c->gemm_launch_us + MAX (t_flops, t_bytes));
}

static bool
node_causal (const SgGraph *g, SgNodeId id)
{
  bool causal = false;
  sg_arg_bool (sg_node_param (g, id, SG_PARAM_IS_CAUSAL), &causal);
  return causal;
}

static bool
matmul_shape (const SgGraph *g, SgNodeId id, SgShape *s)
{
  const SgNode *n = &g->nodes[id];
  bool batched = n->kind == SG_OP_BMM || n->kind == SG_OP_BADDBMM;
  SgParam pa, pb;
  if (!sg_op_matmul_params (n->kind, &pa, &pb))
    return false;
  const SgMeta *a = sg_node_param_meta (g, id, pa);
  int32_t nd = batched ? 3 : 2;
  if (!a || a->ndim != nd || n->meta.ndim != nd)
    return false;
  const int64_t *as = sg_meta_shape (g, a);
  const int64_t *os = sg_meta_shape (g, &n->meta);
  sg_compute_matmul_shape (s, n->kind, a->dtype, batched ? os[0] : 1, os[nd - 2], as[nd - 1],
                           os[nd - 1]);
  return true;
}

void
sg_compute_matmul_shape (SgShape *s, SgOpKind op, SgDtype dtype, int64_t batch, int64_t m,
                         int64_t k, int64_t n)
{
  memset (s, 0, sizeof *s);
  s->op = op;
  s->dtype = dtype;
  s->batch = batch;
  s->m = m;
  s->n = n;
  s->k = k;
  double b = (double)batch, mm = (double)m, nn = (double)n, kk = (double)k;
  s->flops = 2.0 * b * mm * nn * kk;
  s->bytes = b * (mm * kk + kk * nn + mm * nn) * (double)sg_dtype_size (dtype);
}

static bool
attention_shape (const SgGraph *g, SgNodeId id, SgShape *s)
{
  const SgNode *n = &g->nodes[id];
  bool bwd = is_backward (n->kind);
  const SgMeta *q, *k;
  if (bwd && n->n_tuple >= 2) {
    /* grad_query, grad_key have the query's and the key's shapes */
    q = sg_node_tuple_meta (g, id, 0);
    k = sg_node_tuple_meta (g, id, 1);
  } else {
    q = sg_node_param_meta (g, id, SG_PARAM_QUERY);
    k = sg_node_param_meta (g, id, SG_PARAM_KEY);
  }
  if (!q || q->ndim != 4)
    return false;
  if (!k || k->ndim != 4)
    k = q;
  const int64_t *qs = sg_meta_shape (g, q), *ks = sg_meta_shape (g, k);
  s->dtype = q->dtype;
  s->batch = qs[0];
  s->heads = qs[1];
  s->seq_q = qs[2];
  s->head_dim = qs[3];
  s->seq_kv = ks[2];
  s->causal = node_causal (g, id);
  double f = 4.0 * (double)s->batch * (double)s->heads * (double)s->seq_q * (double)s->seq_kv *
             (double)s->head_dim;
  if (s->causal)
    f *= 0.5;
  double bytes = ((double)sg_meta_numel (g, q) * 2.0 + (double)sg_meta_numel (g, k) * 2.0) *
                 (double)sg_dtype_size (s->dtype);
  s->flops = bwd ? 2.5 * f : f;
  s->bytes = bwd ? 2.5 * bytes : bytes;
  return true;
}

bool
sg_compute_shape (const SgGraph *g, SgNodeId id, SgShape *s)
{
  memset (s, 0, sizeof *s);
  s->op = g->nodes[id].kind;
  switch (sg_op_class (s->op)) {
  case SG_CLASS_MATMUL:
    return matmul_shape (g, id, s);
  case SG_CLASS_ATTENTION:
    return attention_shape (g, id, s);
  default:
    return false;
  }
}

void
sg_compute_storage_bytes_in (const SgGraph *g, SgNodeId a, SgNodeId b, uint64_t *sb)
{
  for (SgNodeId i = a; i < b; i++) {
    const SgNode *n = &g->nodes[i];
    if (sg_op_is_alias (n->kind) && n->n_in > 0) {
      uint32_t k;
      SgNodeId src = sg_node_inputs (g, i, &k)[0];
      /* inputs precede users: src's entry is final (any id when not; and
       * from a range before @a the chain is walked: the same root) */
      sb[i] = src >= a && src < i ? sb[src] : sg_node_alloc_bytes (g, sg_node_storage_root (g, i));
    } else {
      sb[i] = sg_node_alloc_bytes (g, i);
    }
  }
}

double
sg_compute_node_bytes (const SgGraph *g, SgNodeId id, const uint64_t *storage_bytes,
                       int32_t n_storage)
{
  const SgNode *n = &g->nodes[id];
  double bytes = (double)sg_node_alloc_bytes (g, id);
  SgOpClass k = sg_op_class (n->kind);
  if (k == SG_CLASS_CREATION)
    return bytes; /* writes only */
  if (n->kind == SG_OP_BUCKET_UNPACK)
    return 2.0 * bytes; /* reads its member's slices of the bucket, not all of it */
  uint32_t n_in;
  const SgNodeId *in = sg_node_inputs (g, id, &n_in);
  for (uint32_t i = 0; i < n_in; i++) {
    const SgNode *x = &g->nodes[in[i]];
    if (x->meta.ndim < 0)
      continue;
    uint64_t b = sg_meta_bytes (g, &x->meta);
    if (sg_op_is_alias (x->kind)) {
      /* a view reads at most its storage: an expanded bias is read once
       * (and stays in cache), not once per row */
      uint64_t root = storage_bytes && in[i] < n_storage
                        ? storage_bytes[in[i]]
                        : sg_node_alloc_bytes (g, sg_node_storage_root (g, in[i]));
      if (root > 0)
        b = MIN (b, root);
    }
    bytes += (double)b;
  }
  return bytes;
}
