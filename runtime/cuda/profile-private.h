/* profile-private.h: what profile.c and profile-keys.c share (runtime/cuda
 * only): the key of one profile entry and the functions over keys.
 */
#pragma once

#include "graph.h"

typedef enum { FAM_GEMM, FAM_ATTN, FAM_COLL, FAM_OPS } Fam;

typedef struct {
  Fam fam;
  char *key;      /* canonical text of the exact key (sort and cache match) */
  char *json;     /* the entry without "us", e.g. {"op": "mm", ...  */
  SgNodeId node;  /* a node with this key (measured), or -1 (from the cache) */
  double us;      /* < 0 until measured or read from the cache */
  double flops;   /* gemm: 2 * batch * m * n * k, for the "tflops" note */
} Key;

extern const char *const sg_cu_prof_fam_key[4]; /* "gemm", "attention", ... */

void sg_cu_prof_key_free (gpointer p);
gint sg_cu_prof_key_cmp (gconstpointer a, gconstpointer b);
const SgMeta *sg_cu_prof_in_meta (const SgGraph *g, SgNodeId id, uint32_t i);
/* The key of node @id, false for nodes a profile does not time. */
bool sg_cu_prof_node_key (const SgGraph *g, SgNodeId id, int32_t n_nodes_of_group, Key *k);
/* Reads an existing profile: fills us of keys it has, appends the others
 * (to @keys and @by_key); ignores (whole, with a message on rank 0) a file
 * of another device or world size. */
void sg_cu_prof_read_cache (const char *text, size_t len, const char *device, int32_t world,
                            GPtrArray *keys, GHashTable *by_key, int32_t rank, int *n_cached);
/* (transfer full) The profile JSON of the measured keys. */
char *sg_cu_prof_profile_text (GPtrArray *keys, const char *device, int32_t world);
