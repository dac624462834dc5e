/* attn_cudnn.cpp: scaled dot-product attention on cuDNN's fused SDPA
 * (FlashAttention-style kernels), forward and backward, through
 * cudnn-frontend's graph API.
 *
 * What: one cuDNN graph per distinct attention shape (op direction, dtype,
 * every operand's shape and strides, causal mask, scale), built once at
 * setup with the heuristics' first plan (sg_cu_dnn_sdpa_plan) and executed
 * per step on the instruction's stream (sg_cu_dnn_sdpa_run: no allocation,
 * no synchronisation, capturable into a CUDA graph). One cuDNN handle per
 * plan stream, bound to it once.
 * Mirrors PyTorch's _scaled_dot_product_cudnn_attention (ATen's
 * native/cudnn/MHA.cpp): Q/K/V/O as [B, H, S, D] views with any strides of
 * unit innermost stride, K/V with fewer heads for grouped-query attention,
 * the softmax statistics as the natural-log log-sum-exp [B, H, Sq, 1] in
 * fp32 (the same numbers as FlashAttention's logsumexp, so a forward of one
 * backend and a backward of another agree), a top-left causal mask.
 * libcudnn is not linked: it is opened at run time (libcudnn.so.9, through
 * the loader's search path) and the frontend's dynamic-loading shim calls
 * it, so a machine without cuDNN runs the math path (attn.c) instead.
 * Requires: a current CUDA device; sg_cu_dnn_load() true before
 * sg_cu_dnn_new. Invalidates: nothing.
 */
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda-private.h"

namespace fe = cudnn_frontend;

/* The frontend's dynamic-loading shim resolves every cuDNN call here. */
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
}

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV };

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
};

char *
dup (const std::string &s)
{
  return strdup (s.c_str ());
}

bool
io_dtype (int32_t dt, fe::DataType_t *out)
{
  switch (dt) {
  case SG_DTYPE_BF16: *out = fe::DataType_t::BFLOAT16; return true;
  case SG_DTYPE_F16: *out = fe::DataType_t::HALF; return true;
  default: return false; /* the fused kernels take 16-bit operands only */
  }
}

std::vector<int64_t>
dims4 (const SgCuTensor &t)
{
  return { t.shape[0], t.shape[1], t.shape[2], t.shape[3] };
}

std::vector<int64_t>
strides4 (const SgCuTensor &t)
{
  return { t.stride[0], t.stride[1], t.stride[2], t.stride[3] };
}

/* Why @t cannot be an operand of the fused kernels ("" when it can). */
std::string
operand_problem (const char *name, const SgCuTensor &t, int32_t dtype)
{
  if (t.ndim != 4)
    return std::string (name) + " is not [B, H, S, D]";
  if (t.dtype != dtype)
    return std::string (name) + " has another dtype than q";
  if (t.stride[3] != 1)
    return std::string (name) + "'s head dim is not contiguous";
  for (int k = 0; k < 3; k++)
    if (t.stride[k] % 8 != 0) /* 16-byte rows for the kernels' vector loads */
      return std::string (name) + "'s strides are not multiples of 8 elements";
  return "";
}

std::string
key_of (const SgCuSdpa *a)
{
  std::string k;
  char buf[96];
  auto add = [&] (const SgCuTensor &t) {
    snprintf (buf, sizeof buf, "|%d:%d", t.dtype, t.ndim);
    k += buf;
    for (int i = 0; i < t.ndim; i++) {
      snprintf (buf, sizeof buf, ",%lld/%lld", (long long)t.shape[i], (long long)t.stride[i]);
      k += buf;
    }
  };
  snprintf (buf, sizeof buf, "%d%d%d%.9g", a->backward, a->causal, a->deterministic, a->scale);
  k += buf;
  for (const SgCuTensor *t : { &a->q, &a->k, &a->v, &a->o, &a->lse, &a->dout, &a->dq, &a->dk,
                               &a->dv })
    add (*t);
  return k;
}

/* The statistics as cuDNN's [B, H, Sq, 1] view of a [B, H, Sq(, 1)] one. */
std::shared_ptr<fe::graph::Tensor_attributes>
stats_tensor (fe::graph::Graph &g, const SgCuTensor &l)
{
  return g.tensor (fe::graph::Tensor_attributes ()
                     .set_name ("stats")
                     .set_uid (kStats)
                     .set_data_type (fe::DataType_t::FLOAT)
                     .set_dim ({ l.shape[0], l.shape[1], l.shape[2], 1 })
                     .set_stride ({ l.stride[0], l.stride[1], l.stride[2], 1 }));
}

std::shared_ptr<fe::graph::Tensor_attributes>
io_tensor (fe::graph::Graph &g, const char *name, int64_t uid, const SgCuTensor &t)
{
  return g.tensor (fe::graph::Tensor_attributes ()
                     .set_name (name)
                     .set_uid (uid)
                     .set_dim (dims4 (t))
                     .set_stride (strides4 (t)));
}

void
mark_output (const std::shared_ptr<fe::graph::Tensor_attributes> &t, int64_t uid,
             const SgCuTensor &v)
{
  t->set_output (true).set_uid (uid).set_dim (dims4 (v)).set_stride (strides4 (v));
}

/* The graph of @a, validated (@sm: the target's compute capability x 10,
 * 0 for the current device's); "" or why it cannot be built. */
std::string
describe (const SgCuSdpa *a, fe::DataType_t dt, int32_t sm, std::shared_ptr<fe::graph::Graph> *out)
{
  auto g = std::make_shared<fe::graph::Graph> ();
  if (sm > 0)
    g->set_sm_version (sm);
  g->set_io_data_type (dt)
    .set_intermediate_data_type (fe::DataType_t::FLOAT)
    .set_compute_data_type (fe::DataType_t::FLOAT);
  const float scale =
    (float)(a->scale > 0 ? a->scale : 1.0 / std::sqrt ((double)a->q.shape[3]));
  auto Q = io_tensor (*g, "Q", kQ, a->q);
  auto K = io_tensor (*g, "K", kK, a->k);
  auto V = io_tensor (*g, "V", kV, a->v);
  if (!a->backward) {
    const bool stats = a->lse.ndim > 0;
    auto opt = fe::graph::SDPA_attributes ().set_name ("sdpa").set_generate_stats (stats)
                 .set_attn_scale (scale);
    if (a->causal)
      opt.set_diagonal_alignment (fe::DiagonalAlignment_t::TOP_LEFT)
        .set_diagonal_band_right_bound (0);
    auto outs = g->sdpa (Q, K, V, opt);
    mark_output (outs[0], kO, a->o);
    if (stats) {
      const SgCuTensor &l = a->lse;
      outs[1]->set_output (true).set_uid (kStats).set_data_type (fe::DataType_t::FLOAT)
        .set_dim ({ l.shape[0], l.shape[1], l.shape[2], 1 })
        .set_stride ({ l.stride[0], l.stride[1], l.stride[2], 1 });
    }
  } else {
    auto O = io_tensor (*g, "O", kO, a->o);
    auto dO = io_tensor (*g, "dO", kdO, a->dout);
    auto S = stats_tensor (*g, a->lse);
    auto opt = fe::graph::SDPA_backward_attributes ().set_name ("sdpa_backward")
                 .set_attn_scale (scale);
    if (a->causal)
      opt.set_diagonal_alignment (fe::DiagonalAlignment_t::TOP_LEFT)
        .set_diagonal_band_right_bound (0);
    if (a->deterministic)
      opt.set_deterministic_algorithm (true);
    auto outs = g->sdpa_backward (Q, K, V, O, dO, S, opt);
    mark_output (outs[0], kdQ, a->dq);
    mark_output (outs[1], kdK, a->dk);
    mark_output (outs[2], kdV, a->dv);
  }
  fe::error_t e = g->validate ();
  if (!e.is_good ())
    return e.get_message ().empty () ? std::string ("cuDNN rejects it") : e.get_message ();
  *out = g;
  return "";
}

/* The execution plan of @a: the heuristics' first; "" or why there is none. */
std::string
build (cudnnHandle_t h, const SgCuSdpa *a, fe::DataType_t dt, Plan *p)
{
  std::shared_ptr<fe::graph::Graph> g;
  std::string problem = describe (a, dt, 0, &g);
  if (!problem.empty ())
    return problem;
  fe::error_t e = g->build_operation_graph (h);
  if (e.is_good ())
    e = g->create_execution_plans ({ fe::HeurMode_t::A });
  if (e.is_good ())
    e = g->check_support (h);
  if (e.is_good ())
    e = g->build_plans (h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
  if (e.is_good ())
    e = g->get_workspace_size (p->workspace);
  if (!e.is_good ())
    return e.get_message ().empty () ? std::string ("cuDNN has no plan for it") : e.get_message ();
  p->graph = g;
  return "";
}

} /* namespace */

struct SgCuDnn {
  std::vector<cudnnHandle_t> handles; /* per plan stream */
  std::vector<Plan> plans;
  std::map<std::string, int32_t> index;
};

extern "C" const char *
sg_cu_dnn_built (void)
{
  static char text[128];
  if (!text[0])
    snprintf (text, sizeof text, "cuDNN fused SDPA (built against cuDNN %d.%d.%d headers, "
              "cudnn-frontend %d.%d.%d)", CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL,
              CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION,
              CUDNN_FRONTEND_PATCH_VERSION);
  return text;
}

extern "C" bool
sg_cu_dnn_load (int64_t *version, char **why)
{
  static int state = 0; /* 0 not tried, 1 loaded, -1 failed */
  static int64_t ver = 0;
  static std::string reason;
  const char *mode = getenv ("SG_CUDA_ATTENTION");
  if (mode && strcmp (mode, "math") == 0) {
    if (why)
      *why = strdup ("SG_CUDA_ATTENTION=math");
    return false;
  }
  if (state == 0) {
    void *h = dlopen ("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char *e = dlerror ();
      reason = std::string ("libcudnn.so.9 not found (") + (e ? e : "?") +
               "); set LD_LIBRARY_PATH to a cuDNN 9 lib directory";
      state = -1;
    } else {
      auto get = reinterpret_cast<size_t (*) (void)> (dlsym (h, "cudnnGetVersion"));
      ver = get ? (int64_t)get () : 0;
      if (ver < 90000 || ver >= 100000) {
        reason = "libcudnn.so.9 reports version " + std::to_string (ver) + ", not 9.x";
        state = -1;
      } else {
        fe::cudnn_dlhandle = h;
        state = 1;
      }
    }
  }
  if (version)
    *version = ver;
  if (state < 0 && why)
    *why = dup (reason);
  return state > 0;
}

extern "C" SgCuDnn *
sg_cu_dnn_new (const cudaStream_t *streams, int32_t n_streams, char **why)
{
  if (!sg_cu_dnn_load (nullptr, why))
    return nullptr;
  SgCuDnn *d = new SgCuDnn;
  try {
    for (int32_t s = 0; s < n_streams; s++) {
      cudnnHandle_t h = nullptr;
      cudnnStatus_t st = fe::detail::create_handle (&h);
      if (st == CUDNN_STATUS_SUCCESS) {
        d->handles.push_back (h);
        st = fe::detail::set_stream (h, streams[s]);
      }
      if (st != CUDNN_STATUS_SUCCESS) {
        if (why)
          *why = dup (std::string ("cudnnCreate/cudnnSetStream: ") +
                      fe::detail::get_error_string (st));
        sg_cu_dnn_free (d);
        return nullptr;
      }
    }
  } catch (const std::exception &e) {
    if (why)
      *why = dup (std::string ("cuDNN: ") + e.what ());
    sg_cu_dnn_free (d);
    return nullptr;
  }
  return d;
}

extern "C" void
sg_cu_dnn_free (SgCuDnn *d)
{
  if (!d)
    return;
  d->plans.clear ();
  for (cudnnHandle_t h : d->handles)
    fe::detail::destroy_handle (h);
  delete d;
}

extern "C" int32_t
sg_cu_dnn_sdpa_plan (SgCuDnn *d, const SgCuSdpa *a, uint64_t *workspace, char **why)
{
  fe::DataType_t dt = fe::DataType_t::BFLOAT16;
  std::string problem;
  if (!io_dtype (a->q.dtype, &dt)) {
    problem = "fp32/fp64 operands (the fused kernels take bf16/f16)";
  } else {
    const struct {
      const char *name;
      const SgCuTensor *t;
    } ops[] = { { "q", &a->q }, { "k", &a->k }, { "v", &a->v }, { "out", &a->o },
                { "grad_out", &a->dout }, { "grad_q", &a->dq }, { "grad_k", &a->dk },
                { "grad_v", &a->dv } };
    for (int i = 0; i < (a->backward ? 8 : 4) && problem.empty (); i++)
      problem = operand_problem (ops[i].name, *ops[i].t, a->q.dtype);
    const SgCuTensor &l = a->lse;
    if (problem.empty () && (a->backward || l.ndim > 0) &&
        (l.ndim < 3 || l.ndim > 4 || l.dtype != SG_DTYPE_F32 || l.stride[2] != 1 ||
         l.shape[2] != a->q.shape[2] || (l.ndim == 4 && l.shape[3] != 1)))
      problem = "logsumexp is not an fp32 [B, H, Sq(, 1)] with unit stride along Sq";
    if (problem.empty () && a->backward && fe::detail::get_backend_version () < 90501 &&
        strides4 (a->o) != strides4 (a->dout))
      problem = "grad_out's strides differ from out's (cuDNN < 9.5.1 assumes them equal)";
  }
  if (!problem.empty ()) {
    if (why)
      *why = dup (problem);
    return -1;
  }
  const std::string key = key_of (a);
  auto it = d->index.find (key);
  if (it != d->index.end ()) {
    *workspace = (uint64_t)d->plans[it->second].workspace;
    return it->second;
  }
  Plan p;
  try {
    problem = build (d->handles[0], a, dt, &p);
  } catch (const std::exception &e) {
    problem = std::string ("cuDNN: ") + e.what ();
  }
  if (!problem.empty ()) {
    if (why)
      *why = dup (problem);
    return -1;
  }
  const int32_t id = (int32_t)d->plans.size ();
  d->plans.push_back (p);
  d->index.emplace (key, id);
  *workspace = (uint64_t)p.workspace;
  return id;
}

extern "C" bool
sg_cu_dnn_sdpa_run (SgCuDnn *d, int32_t plan, int32_t stream, const SgCuSdpa *a, void *workspace,
                    char **why)
{
  if (!d || plan < 0 || plan >= (int32_t)d->plans.size () || stream < 0 ||
      stream >= (int32_t)d->handles.size ()) {
    if (why)
      *why = strdup ("cuDNN attention: no such plan or stream");
    return false;
  }
  std::unordered_map<int64_t, void *> pack = { { kQ, a->q.ptr }, { kK, a->k.ptr },
                                               { kV, a->v.ptr }, { kO, a->o.ptr } };
  if (a->lse.ndim > 0)
    pack[kStats] = a->lse.ptr;
  if (a->backward) {
    pack[kdO] = a->dout.ptr;
    pack[kdQ] = a->dq.ptr;
    pack[kdK] = a->dk.ptr;
    pack[kdV] = a->dv.ptr;
  }
  std::string problem;
  try {
    fe::error_t e = d->plans[plan].graph->execute (d->handles[stream], pack, workspace);
    if (!e.is_good ())
      problem = e.get_message ();
  } catch (const std::exception &e) {
    problem = e.what ();
  }
  if (problem.empty ())
    return true;
  if (why)
    *why = dup ("cuDNN attention " + std::string (a->backward ? "backward" : "forward") + ": " +
                problem);
  return false;
}
