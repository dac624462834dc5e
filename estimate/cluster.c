/* cluster.c: cluster presets and cluster JSON (docs/cluster-format.md).
 *
 * A cluster is every number the cost model uses. Presets describe 8-GPU
 * NVSwitch nodes joined by InfiniBand (one NIC per GPU); a cluster file or
 * the graph's `cluster` object starts from a preset and overrides fields.
 * Precedence (SgConfig.cluster wins over the graph, which wins over
 * h200-sxm) is documented in docs/cluster-format.md.
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include "estimate-private.h"
#include "textio.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

G_DEFINE_AUTOPTR_CLEANUP_FUNC (cJSON, cJSON_Delete)

/* Contention defaults, measured on 2x H200 (tests/estimate/data/
 * interference_h200x2.json; derivation in docs/cost-model.md). */
#define DEFAULT_COMM_SLOWDOWN 1.05
#define DEFAULT_COMPUTE_SLOWDOWN 1.22
/* Collectives that reduce, beside our runtime's kernels: schedrun's
 * measurements (tests/estimate/data/overlap_h200x2.json, docs/cost-model.md). */
#define DEFAULT_REDUCE_SLOWDOWN 1.30

/* Hopper (H100/H200 SXM, NVLink 4 + NVSwitch 3, NDR InfiniBand): measured
 * on 2x H200 (tests/data/limits-h200x2.json, tests/estimate/measure/);
 * NVLink channels and per-channel bandwidth are NCCL 2.28's own tuning
 * values there (NCCL_DEBUG_SUBSYS=TUNING). docs/cost-model.md has the fits. */
#define HOPPER_COMMON                                                                           \
  .gpus_per_node = 8, .nodes = 1, .bf16_tflops = 989.0, .fp8_tflops = 1979.0,                   \
  .fp32_tflops = 67.0, .memory_efficiency = 0.87, .kernel_launch_us = 2.0,                      \
  .kernel_floor_us = 3.0, .gemm_launch_us = 2.0, .gemm_floor_us = 22.0,                         \
  .gemm_max_efficiency = 0.715, .gemm_half_gflops = 2.0, .gemm_efficiency_exponent = 0.7,       \
  .attention_flash_efficiency = 0.32, .attention_flash_backward_efficiency = 0.275,             \
  .attention_efficient_efficiency = 0.15, .attention_efficient_backward_efficiency = 0.12,      \
  .attention_cudnn_efficiency = 0.555, .attention_cudnn_backward_efficiency = 0.48,             \
  .attention_floor_us = 34.0, .sm_count = 132, .unknown_op_us = 10.0,                           \
  .nccl_arch = SG_NCCL_HOPPER, .nvlink_channels = 24, .nvlink_channel_GBps = 15.0,              \
  .net_nic_GBps = 50.0, .nics_per_node = 8, .ll128 = true, .nvls = false,                       \
  .nvls_busbw_GBps = 0.0, .nvls_latency_us = 25.0, .collective_overhead_us = 18.0,              \
  .coalesced_member_us = 0.0,                                                                   \
  .efficiency_all_gather = 0.695, .efficiency_reduce_scatter = 0.695,                           \
  .efficiency_all_reduce = 0.81, .efficiency_broadcast = 1.0, .efficiency_p2p = 0.9,            \
  .ce_GBps = 296.0, .ce_latency_us = 36.0, .gemm_sm_exponent = 0.58, .gemm_sm_overhead = 1.05, \
  .contention = { DEFAULT_COMM_SLOWDOWN, DEFAULT_COMPUTE_SLOWDOWN, DEFAULT_REDUCE_SLOWDOWN }, .comm_start_wait = 1.0, \
  .contention_comm_scale = 1.0, .contention_compute_scale = 1.0, .contention_wait_scale = 1.0,    \
  .contention_held_scale = 1.0

static const SgCluster presets[] = {
  { .name = "h200-sxm", .gpu = "H200", .hbm_GBps = 4800.0, HOPPER_COMMON },
  { .name = "h100-sxm", .gpu = "H100", .hbm_GBps = 3350.0, HOPPER_COMMON },
  /* A100 SXM 80 GB, NVLink 3, HDR InfiniBand: datasheet peaks, NCCL's model
   * for the links (not measured here: efficiencies 1) */
  {
    .name = "a100-sxm", .gpu = "A100", .gpus_per_node = 8, .nodes = 1,
    .bf16_tflops = 312.0, .fp8_tflops = 312.0, .fp32_tflops = 19.5, .hbm_GBps = 2039.0,
    .memory_efficiency = 0.87, .kernel_launch_us = 2.0, .kernel_floor_us = 9.0,
    .gemm_launch_us = 2.0, .gemm_floor_us = 22.0, .gemm_max_efficiency = 0.85,
    .gemm_half_gflops = 0.63, .gemm_efficiency_exponent = 0.7,
    .attention_flash_efficiency = 0.6, .attention_flash_backward_efficiency = 0.5,
    .attention_efficient_efficiency = 0.4, .attention_efficient_backward_efficiency = 0.3,
    .attention_cudnn_efficiency = 0.55, .attention_cudnn_backward_efficiency = 0.45,
    .attention_floor_us = 34.0, .sm_count = 108,
    .unknown_op_us = 10.0,
    .nccl_arch = SG_NCCL_AMPERE, .nvlink_channels = 16, .nvlink_channel_GBps = 14.5,
    .net_nic_GBps = 25.0, .nics_per_node = 8, .ll128 = true, .nvls = false,
    .nvls_busbw_GBps = 0.0, .nvls_latency_us = 0.0, .collective_overhead_us = 18.0,
    .coalesced_member_us = 0.0,
    .efficiency_all_gather = 1.0, .efficiency_reduce_scatter = 1.0,
    .efficiency_all_reduce = 1.0, .efficiency_broadcast = 1.0, .efficiency_p2p = 1.0,
    .ce_GBps = 232.0, .ce_latency_us = 8.0, .gemm_sm_exponent = 0.58, .gemm_sm_overhead = 1.05,
    .contention = { DEFAULT_COMM_SLOWDOWN, DEFAULT_COMPUTE_SLOWDOWN, DEFAULT_REDUCE_SLOWDOWN }, .comm_start_wait = 1.0,
    .contention_comm_scale = 1.0, .contention_compute_scale = 1.0, .contention_wait_scale = 1.0,
    .contention_held_scale = 1.0,
  },
};

static const char *const preset_names[] = { "h200-sxm", "h100-sxm", "a100-sxm", NULL };
static const char *const gpu_names[] = { "H200", "H100", "A100", NULL };

const char *const *
sg_cluster_preset_names (void)
{
  return preset_names;
}

bool
sg_cluster_preset (const char *name, SgCluster *out)
{
  for (size_t i = 0; i < G_N_ELEMENTS (presets); i++)
    if (g_ascii_strcasecmp (presets[i].name, name) == 0) {
      *out = presets[i];
      return true;
    }
  return false;
}

/* "H100", "h100" and torch.cuda.get_device_name()'s "NVIDIA H100 80GB
 * HBM3" all name the H100. */
static bool
preset_for_gpu (const char *gpu, SgCluster *out)
{
  g_autofree char *up = g_ascii_strup (gpu, -1);
  for (size_t i = 0; gpu_names[i]; i++)
    if (strstr (up, gpu_names[i]))
      return sg_cluster_preset (preset_names[i], out);
  return false;
}

typedef enum { F_DOUBLE, F_INT, F_BOOL } FieldType;

typedef struct {
  const char *key;
  FieldType type;
  size_t offset;
  double min;     /* smallest allowed value */
  bool min_open;  /* value must be > min rather than >= */
  double max;     /* largest allowed value (inclusive) */
} Field;

#define D(k, f, lo, open, hi) { k, F_DOUBLE, offsetof (SgCluster, f), lo, open, hi }
#define I(k, f) { k, F_INT, offsetof (SgCluster, f), 1, false, 1e6 }
#define B(k, f) { k, F_BOOL, offsetof (SgCluster, f), 0, false, 1 }

static const Field fields[] = {
  I ("gpus_per_node", gpus_per_node),
  I ("nodes", nodes),
  D ("bf16_tflops", bf16_tflops, 0, true, 1e6),
  D ("fp8_tflops", fp8_tflops, 0, true, 1e6),
  D ("fp32_tflops", fp32_tflops, 0, true, 1e6),
  D ("hbm_GBps", hbm_GBps, 0, true, 1e7),
  D ("memory_efficiency", memory_efficiency, 0, true, 1),
  D ("kernel_launch_us", kernel_launch_us, 0, false, 1e6),
  D ("kernel_floor_us", kernel_floor_us, 0, false, 1e6),
  D ("gemm_launch_us", gemm_launch_us, 0, false, 1e6),
  D ("gemm_floor_us", gemm_floor_us, 0, false, 1e6),
  D ("gemm_max_efficiency", gemm_max_efficiency, 0, true, 1),
  D ("gemm_half_gflops", gemm_half_gflops, 0, true, 1e9),
  D ("gemm_efficiency_exponent", gemm_efficiency_exponent, 0, true, 10),
  D ("attention_flash_efficiency", attention_flash_efficiency, 0, true, 1),
  D ("attention_flash_backward_efficiency", attention_flash_backward_efficiency, 0, true, 1),
  D ("attention_efficient_efficiency", attention_efficient_efficiency, 0, true, 1),
  D ("attention_efficient_backward_efficiency", attention_efficient_backward_efficiency, 0, true,
     1),
  D ("attention_cudnn_efficiency", attention_cudnn_efficiency, 0, true, 1),
  D ("attention_cudnn_backward_efficiency", attention_cudnn_backward_efficiency, 0, true, 1),
  D ("attention_floor_us", attention_floor_us, 0, false, 1e6),
  I ("sm_count", sm_count),
  D ("unknown_op_us", unknown_op_us, 0, false, 1e6),
  I ("nvlink_channels", nvlink_channels),
  D ("nvlink_channel_GBps", nvlink_channel_GBps, 0, true, 1e5),
  D ("net_nic_GBps", net_nic_GBps, 0, true, 1e5),
  I ("nics_per_node", nics_per_node),
  B ("ll128", ll128),
  B ("nvls", nvls),
  D ("nvls_busbw_GBps", nvls_busbw_GBps, 0, false, 1e5),
  D ("nvls_latency_us", nvls_latency_us, 0, false, 1e6),
  D ("collective_overhead_us", collective_overhead_us, 0, false, 1e6),
  D ("coalesced_member_us", coalesced_member_us, 0, false, 1e6),
  D ("efficiency_all_gather", efficiency_all_gather, 0, true, 2),
  D ("efficiency_reduce_scatter", efficiency_reduce_scatter, 0, true, 2),
  D ("efficiency_all_reduce", efficiency_all_reduce, 0, true, 2),
  D ("efficiency_broadcast", efficiency_broadcast, 0, true, 2),
  D ("efficiency_p2p", efficiency_p2p, 0, true, 2),
  D ("ce_GBps", ce_GBps, 0, true, 1e5),
  D ("ce_latency_us", ce_latency_us, 0, false, 1e6),
  D ("gemm_sm_exponent", gemm_sm_exponent, 0, false, 10),
  D ("gemm_sm_overhead", gemm_sm_overhead, 1, false, 10),
  D ("comm_slowdown", contention.comm_slowdown, 1, false, 100),
  D ("compute_slowdown", contention.compute_slowdown, 1, false, 100),
  D ("reduce_slowdown", contention.reduce_slowdown, 1, false, 100),
  D ("comm_start_wait", comm_start_wait, 0, false, 1),
  D ("contention_comm_scale", contention_comm_scale, 0, false, 10),
  D ("contention_compute_scale", contention_compute_scale, 0, false, 10),
  D ("contention_wait_scale", contention_wait_scale, 0, false, 10),
  D ("contention_held_scale", contention_held_scale, 0, false, 10),
};

static gboolean
fail (GError **error, const char *where, const char *key, const char *fmt, ...)
  G_GNUC_PRINTF (4, 5);

static gboolean
fail (GError **error, const char *where, const char *key, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, SG_ESTIMATE_ERROR, SG_ESTIMATE_ERROR_CLUSTER, "%s: %s%s%s", where,
               key ? key : "", key ? ": " : "", msg);
  return FALSE;
}

static char *
known_list (const char *const *names)
{
  return g_strjoinv (", ", (char **)names);
}

static bool
apply_field (SgCluster *c, const Field *f, const cJSON *v, const char *where, GError **error)
{
  char *p = (char *)c + f->offset;
  if (f->type == F_BOOL) {
    if (!cJSON_IsBool (v))
      return fail (error, where, f->key, "expected true or false");
    *(bool *)p = cJSON_IsTrue (v);
    return true;
  }
  if (!cJSON_IsNumber (v) || !isfinite (v->valuedouble))
    return fail (error, where, f->key, "expected a number");
  double x = v->valuedouble;
  if ((f->min_open ? x <= f->min : x < f->min) || x > f->max)
    return fail (error, where, f->key, "%g is out of range (%s %g, <= %g)", x,
                 f->min_open ? ">" : ">=", f->min, f->max);
  if (f->type == F_INT) {
    if (x != floor (x))
      return fail (error, where, f->key, "expected an integer, got %g", x);
    *(int32_t *)p = (int32_t)x;
  } else {
    *(double *)p = x;
  }
  return true;
}

static bool
parse_arch (const char *s, SgNcclArch *out)
{
  static const char *const names[] = { "volta", "ampere", "hopper" };
  for (int i = 0; i < SG_NCCL_N_ARCH; i++)
    if (g_ascii_strcasecmp (names[i], s) == 0) {
      *out = (SgNcclArch)i;
      return true;
    }
  return false;
}

bool
sg_cluster_apply_json (SgCluster *c, const cJSON *obj, bool strict, const char *where,
                       GError **error)
{
  if (!cJSON_IsObject (obj))
    return fail (error, where, NULL, "a cluster must be a JSON object");
  const cJSON *v;
  double intra_bw = NAN;
  cJSON_ArrayForEach (v, obj)
  {
    const char *key = v->string;
    bool known = false;
    for (size_t i = 0; i < G_N_ELEMENTS (fields); i++)
      if (strcmp (fields[i].key, key) == 0) {
        if (!apply_field (c, &fields[i], v, where, error))
          return false;
        known = true;
        break;
      }
    if (known)
      continue;
    if (strcmp (key, "base") == 0 || strcmp (key, "gpu") == 0 || strcmp (key, "name") == 0) {
      if (!cJSON_IsString (v))
        return fail (error, where, key, "expected a string");
      if (strcmp (key, "name") == 0)
        g_strlcpy (c->name, v->valuestring, sizeof c->name);
      else if (strcmp (key, "gpu") == 0)
        g_strlcpy (c->gpu, v->valuestring, sizeof c->gpu);
      /* "base" was applied by the caller before any field */
    } else if (strcmp (key, "nccl_arch") == 0) {
      if (!cJSON_IsString (v) || !parse_arch (v->valuestring, &c->nccl_arch))
        return fail (error, where, key, "expected \"volta\", \"ampere\" or \"hopper\"");
    } else if (strcmp (key, "intra_bw_GBps") == 0) {
      if (!cJSON_IsNumber (v) || !(v->valuedouble > 0) || !isfinite (v->valuedouble))
        return fail (error, where, key, "expected a positive number");
      intra_bw = v->valuedouble;
    } else if (strict) {
      return fail (error, where, key, "unknown cluster field (docs/cluster-format.md)");
    }
  }
  /* graph-format.md's intra_bw_GBps: the node's ring bus bandwidth */
  if (!isnan (intra_bw))
    c->nvlink_channel_GBps = intra_bw / c->nvlink_channels;
  if (c->nvls && !(c->nvls_busbw_GBps > 0))
    return fail (error, where, "nvls_busbw_GBps", "must be > 0 when nvls is true");
  return true;
}

/* The preset a cluster object starts from: its "base", else its "gpu". */
static bool
base_of (const cJSON *obj, SgCluster *c, bool *found, const char *where, GError **error)
{
  *found = false;
  const cJSON *b = cJSON_GetObjectItemCaseSensitive (obj, "base");
  const cJSON *gpu = cJSON_GetObjectItemCaseSensitive (obj, "gpu");
  if (b) {
    g_autofree char *known = known_list (preset_names);
    if (!cJSON_IsString (b) || !sg_cluster_preset (b->valuestring, c))
      return fail (error, where, "base", "unknown preset %s%s%s (known: %s)",
                   cJSON_IsString (b) ? "\"" : "", cJSON_IsString (b) ? b->valuestring : "?",
                   cJSON_IsString (b) ? "\"" : "", known);
    *found = true;
  } else if (gpu) {
    g_autofree char *known = known_list (gpu_names);
    if (!cJSON_IsString (gpu) || !preset_for_gpu (gpu->valuestring, c))
      return fail (error, where, "gpu", "unknown GPU %s (known: %s; or pass --cluster)",
                   cJSON_IsString (gpu) ? gpu->valuestring : "?", known);
    *found = true;
  }
  return true;
}

static bool
apply_topology (SgCluster *c, const cJSON *obj, const char *where, GError **error)
{
  static const char *const keys[] = { "gpus_per_node", "nodes" };
  for (size_t i = 0; i < G_N_ELEMENTS (keys); i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive (obj, keys[i]);
    if (v && !apply_field (c, &fields[i], v, where, error))
      return false;
  }
  return true;
}

static cJSON *
load_json_file (const char *path, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *io = NULL;
  if (!g_file_get_contents (path, &text, &len, &io)) {
    fail (error, path, NULL, "cannot read cluster file: %s", io->message);
    g_error_free (io);
    return NULL;
  }
  GError *je = NULL;
  cJSON *obj = sg_json_parse (text, len, &je);
  if (!obj) {
    fail (error, path, NULL, "%s", je->message);
    g_error_free (je);
  }
  return obj;
}

bool
sg_cluster_resolve (const SgGraph *g, const char *cfg_cluster, SgCluster *out, GError **error)
{
  g_autoptr (cJSON) graph_obj = NULL;
  if (g && g->cluster_json) {
    graph_obj = cJSON_Parse (g->cluster_json);
    if (!graph_obj)
      return fail (error, "graph cluster", NULL, "malformed JSON");
  }
  sg_cluster_preset ("h200-sxm", out);

  if (!cfg_cluster) {
    bool found;
    if (graph_obj) {
      if (!base_of (graph_obj, out, &found, "graph cluster", error) ||
          !sg_cluster_apply_json (out, graph_obj, false, "graph cluster", error))
        return false;
    }
  } else if (sg_cluster_preset (cfg_cluster, out)) {
    /* A preset is hardware; the graph still knows the job's layout. */
    if (graph_obj && !apply_topology (out, graph_obj, "graph cluster", error))
      return false;
  } else if (g_str_has_suffix (cfg_cluster, ".json") || strchr (cfg_cluster, '/') ||
             g_file_test (cfg_cluster, G_FILE_TEST_EXISTS)) {
    g_autoptr (cJSON) file_obj = load_json_file (cfg_cluster, error);
    if (!file_obj)
      return false;
    bool found;
    if (!base_of (file_obj, out, &found, cfg_cluster, error))
      return false;
    if (!found && graph_obj && !base_of (graph_obj, out, &found, "graph cluster", error))
      return false;
    g_strlcpy (out->name, cfg_cluster, sizeof out->name);
    if ((graph_obj && !apply_topology (out, graph_obj, "graph cluster", error)) ||
        !sg_cluster_apply_json (out, file_obj, true, cfg_cluster, error))
      return false;
  } else {
    g_autofree char *known = known_list (preset_names);
    return fail (error, "--cluster", NULL,
                 "unknown preset \"%s\" and no such file (known presets: %s)", cfg_cluster,
                 known);
  }
  return true;
}

