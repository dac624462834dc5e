/* profile-run.c: one node run alone for the profiler: a kernel as a
 * one-instruction plan through the backend's own dispatch (dispatch.c), with
 * that node's operand layouts and random operands, and one collective's
 * buffers and NCCL call. profile.c times them alone, profile-contention.c
 * side by side.
 * Requires: a current CUDA device. Invalidates: nothing.
 */
#include <string.h>

#include "cuda-private.h"
#include "graph.h"
#include "profile-private.h"

/* Storage extent (elements) of a strided meta. */
static uint64_t
extent_of (const SgGraph *g, const SgMeta *m)
{
  if (m->ndim < 0)
    return 0;
  const int64_t *sh = sg_meta_shape (g, m), *sd = sg_meta_stride (g, m);
  uint64_t e = 1;
  for (int k = 0; k < m->ndim; k++) {
    if (sh[k] == 0)
      return 0;
    e += (uint64_t)((sh[k] - 1) * (sd[k] < 0 ? -sd[k] : sd[k]));
  }
  return e;
}

/* @dims: 2 SG_PLAN_MAX_DIMS integers per value of @p, its sizes and strides */
static int32_t
add_value (SgPlan *p, int64_t *dims, const SgGraph *g, const char *name, const SgMeta *m,
           uint64_t *arena)
{
  const int32_t v = p->n_values++;
  SgPlanValue *pv = &p->values[v];
  memset (pv, 0, sizeof *pv);
  pv->name = (char *)name;
  pv->buffer = -1;
  pv->ndim = m->ndim < 0 ? 0 : m->ndim;
  pv->shape = dims + (size_t)v * 2 * SG_PLAN_MAX_DIMS;
  pv->stride = pv->shape + SG_PLAN_MAX_DIMS;
  pv->dtype = m->ndim < 0 ? SG_DTYPE_F32 : m->dtype;
  if (m->ndim < 0)
    return v;
  const int64_t *sh = sg_meta_shape (g, m), *sd = sg_meta_stride (g, m);
  for (int k = 0; k < m->ndim; k++) {
    pv->shape[k] = sh[k];
    pv->stride[k] = sd[k];
  }
  const int32_t b = p->n_buffers++;
  p->buffers[b].offset = *arena;
  p->buffers[b].bytes = MAX (extent_of (g, m), 1) * sg_dtype_size (m->dtype);
  *arena += (p->buffers[b].bytes + 255) / 256 * 256;
  pv->buffer = b;
  return v;
}

typedef struct {
  SgPlan *p;
  int64_t *dims;
  uint64_t *arena;
} RefCtx;

/* A node reference in the one-instruction plan: {"value": id}, adding a
 * value per distinct input. */
static cJSON *
value_ref (const SgGraph *g, SgNodeId src, gpointer user)
{
  RefCtx *c = user;
  int32_t v = -1;
  for (int32_t i = 0; i < c->p->n_values; i++)
    if (strcmp (c->p->values[i].name, g->nodes[src].name) == 0)
      v = i;
  if (v < 0)
    v = add_value (c->p, c->dims, g, g->nodes[src].name, &g->nodes[src].meta, c->arena);
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddNumberToObject (o, "value", v);
  return o;
}

bool
sg_cu_one_kernel_init (SgCuOneKernel *k, const SgGraph *g, SgNodeId id, cudaStream_t stream,
                       cublasHandle_t cublas, SgCuDnn *dnn, GError **error)
{
  const SgNode *n = &g->nodes[id];
  memset (k, 0, sizeof *k);
  k->stream = stream;
  k->p.values = k->values;
  k->p.buffers = k->buffers;
  k->p.n_streams = 1;
  uint64_t arena = 0;
  SgPlanIns *ins = &k->ins;
  ins->kind = SG_INS_KERNEL;
  ins->name = (char *)n->name;
  ins->op = n->kind;
  ins->target = (char *)n->target;
  uint32_t n_in;
  sg_node_inputs (g, id, &n_in);
  if (n_in + 16 > 64) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED, "node %s: too many inputs to profile",
                 n->name);
    return false;
  }
  RefCtx rc = { &k->p, &k->dims[0][0], &arena };
  ins->args = sg_node_args_json (g, id, false, value_ref, &rc);
  ins->kwargs = sg_node_args_json (g, id, true, value_ref, &rc);
  const uint32_t n_out = n->n_tuple ? MIN (n->n_tuple, 16u) : 1;
  for (uint32_t j = 0; j < n_out; j++) {
    const SgMeta *m = n->n_tuple ? sg_node_tuple_meta (g, id, j) : &n->meta;
    k->outs[j] = m->ndim >= 0 ? add_value (&k->p, &k->dims[0][0], g, n->name, m, &arena) : -1;
  }
  ins->out = k->outs;
  ins->n_out = (int32_t)n_out;
  k->p.ins = ins;
  k->p.n_ins = 1;
  /* attention on cuDNN where the backend would run it there */
  k->attn_plan = -1;
  k->st.dnn = dnn;
  k->st.attn_plan = &k->attn_plan;
  const bool prepared = sg_cu_prepare_ins (&k->st, &k->p, 0, &k->scratch, error);
  free (k->st.attn_why);
  k->st.attn_why = NULL;
  if (!prepared)
    return false;
  SG_CU_CHECK (cudaMalloc ((void **)&k->base, arena + k->scratch + 256), error, fail);
  /* random contents in [-1, 1): GEMM speed and power depend on the data */
  for (int32_t v = 0; v < k->p.n_values; v++) {
    const SgPlanValue *pv = &k->p.values[v];
    if (pv->buffer < 0)
      continue;
    const SgPlanBuffer *b = &k->p.buffers[pv->buffer];
    SG_CU_CHECK (sg_cu_fill_random (k->base + b->offset, pv->dtype,
                                    (int64_t)(b->bytes / sg_dtype_size (pv->dtype)),
                                    (uint64_t)v + 1, stream),
                 error, fail);
  }
  k->st.arena = k->base;
  k->st.streams = &k->stream;
  k->st.n_streams = 1;
  k->sp = k->base + arena;
  k->st.scratch = &k->sp;
  k->st.scratch_bytes = &k->scratch;
  k->st.cublas = cublas;
  return true;
fail:
  return false;
}

bool
sg_cu_one_kernel_run (SgCuOneKernel *k, GError **error)
{
  return sg_cu_run_kernel (&k->st, &k->p, &k->ins, error);
}

void
sg_cu_one_kernel_clear (SgCuOneKernel *k)
{
  if (k->base)
    cudaFree (k->base);
  cJSON_Delete (k->ins.args);
  cJSON_Delete (k->ins.kwargs);
  memset (k, 0, sizeof *k);
}

bool
sg_cu_coll_buf_init (SgCuCollBuf *c, const SgGraph *g, SgNodeId id, GError **error)
{
  memset (c, 0, sizeof *c);
  c->node = &g->nodes[id];
  const SgMeta *in = sg_cu_prof_in_meta (g, id, 0);
  c->bytes = sg_node_comm_bytes (g, id);
  c->gs = c->node->group_size;
  c->es = sg_dtype_size (in->dtype);
  if (!sg_cu_nccl_type (in->dtype, &c->dt)) {
    c->dt = ncclUint8;
    c->es = 1;
  }
  SG_CU_CHECK (cudaMalloc ((void **)&c->buf, 2 * c->bytes + 512), error, fail);
  SG_CU_CHECK (cudaMemset (c->buf, 0, 2 * c->bytes + 512), error, fail);
  c->send = c->buf;
  c->recv = c->buf + (c->bytes + 255) / 256 * 256;
  c->total = c->bytes / c->es;
  c->shard = c->total / (size_t)c->gs;
  return true;
fail:
  return false;
}

void
sg_cu_coll_buf_clear (SgCuCollBuf *c)
{
  if (c->buf)
    cudaFree (c->buf);
  memset (c, 0, sizeof *c);
}

bool
sg_cu_coll_buf_issue (const SgCuCollBuf *c, ncclComm_t comm, cudaStream_t stream, GError **error)
{
  char *send = c->send, *recv = c->recv;
  const size_t total = c->total, shard = c->shard, es = c->es;
  const ncclDataType_t dt = c->dt;
  switch (c->node->kind) {
  case SG_OP_ALL_GATHER:
    SG_NCCL_CHECK (ncclAllGather (send, recv, shard, dt, comm, stream), error, out);
    return true;
  case SG_OP_REDUCE_SCATTER:
    SG_NCCL_CHECK (ncclReduceScatter (send, recv, shard, dt, ncclSum, comm, stream), error, out);
    return true;
  case SG_OP_ALL_REDUCE:
    SG_NCCL_CHECK (ncclAllReduce (send, recv, total, dt, ncclSum, comm, stream), error, out);
    return true;
  case SG_OP_BROADCAST:
    SG_NCCL_CHECK (ncclBroadcast (send, recv, total, dt, 0, comm, stream), error, out);
    return true;
  case SG_OP_ALL_TO_ALL:
    SG_NCCL_CHECK (ncclGroupStart (), error, out);
    for (int p = 0; p < c->gs; p++) {
      SG_NCCL_CHECK (ncclSend (send + (size_t)p * shard * es, shard, dt, p, comm, stream), error,
                     out);
      SG_NCCL_CHECK (ncclRecv (recv + (size_t)p * shard * es, shard, dt, p, comm, stream), error,
                     out);
    }
    SG_NCCL_CHECK (ncclGroupEnd (), error, out);
    return true;
  default:
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_UNSUPPORTED, "node %s: not a collective",
                 c->node->name);
    return false;
  }
out:
  return false;
}

