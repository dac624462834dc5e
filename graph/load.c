/* load.c: reads a graph file (graph-format.md, docs/graph-format.md) into the IR.
 *
 * Mirrors a streaming reader: the document is never held as one cJSON tree
 * (that costs ~2 KB per node). The file is mapped, checked to be UTF-8, and
 * the top-level object is scanned by hand; each top-level value is parsed
 * alone with cJSON, and `nodes` one element at a time, each handed to
 * sg_graph_append() and dropped. An element is read by the node reader
 * (load-json.c: the tree cJSON would give, in an arena reused from node to
 * node, for the strict JSON it reads), and by cJSON where the reader
 * declines, so every syntax and value error below comes from cJSON's
 * path. Keys may come in any order: when `nodes` precedes what it needs
 * (format, version, world_size, groups), it is skipped by a bracket
 * scanner and parsed after the rest.
 *
 * That is the sequential path. The loader first reads `nodes` with the
 * parallel reader (load-nodes.c) on the caller's pool, and checks the
 * encoding in pieces on it: what that reader builds is what this path
 * would, and where it declines (a text outside its strict JSON, or any
 * node this path would refuse) the document is read again here, so every
 * message below is this path's whatever the pool. The parallel reader
 * leaves g->by_name to the first lookup; this path fills it.
 *
 * Errors name a line:column for syntax, the field for the header and the
 * node and field for nodes. A reference to an undefined name is diagnosed
 * by reading the rest of the file: "forward reference" when the name is
 * defined later, "cycle" when following references from it leads back to
 * the referencing node, "dangling" otherwise (load-refs.c). The bracket
 * scanner is load-scan.c.
 *
 * Requires: nothing. Produces: a graph that passed sg_graph_validate().
 */
#include "load-private.h"

#include "graph-private.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAIL(code, ...)                                                        \
  do {                                                                         \
    g_set_error (error, SG_GRAPH_ERROR, code, __VA_ARGS__);                    \
    return false;                                                              \
  } while (0)

/* Mapped pages already parsed are dropped every this many bytes, so a large
 * file does not stay resident while the IR grows. */
#define DROP_CHUNK ((size_t)8 << 20)
#define MAX_WORLD (1 << 20)
/* Meshes have a handful of groups; lookups by name are linear in them. */
#define MAX_GROUPS 1024

typedef struct {
  const char *data, *end;
  bool mapped;
  size_t dropped; /* bytes from data already given back to the kernel */
  SgGraph *g;     /* created once the header is known */
  /* header, as seen so far */
  bool has_format, has_version, has_world, has_rank, has_groups, has_nodes;
  bool has_cluster, has_description;
  int64_t world_size, rank;
  cJSON *groups;
  const char *nodes_at; /* deferred `nodes` value */
  char *cluster_json_tmp, *description_tmp;
  SgPool *pool;   /* the parallel reader's threads */
  bool fast;      /* try the parallel reader first */
  size_t chunk;   /* its chunks' size (0: its own) */
  bool declined;  /* it declined: read again with fast off */
} Loader;

/* --- positions and syntax errors -------------------------------------------- */

/* A JSON text rule (textio.h) broken: the same message, this module's
 * domain. */
static void
json_error (GError **error, GError *e)
{
  g_set_error_literal (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_PARSE, e->message);
  g_error_free (e);
}

static void
syntax_error (const Loader *ld, const char *p, GError **error, const char *what)
{
  size_t line, col;
  if (p >= ld->end) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_PARSE,
                 "truncated file: unexpected end after %zu bytes (%s)",
                 (size_t)(ld->end - ld->data), what);
    return;
  }
  sg_json_line_col (ld->data, p, &line, &col);
  g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_PARSE, "line %zu, column %zu: %s", line, col,
               what);
}

/* Parses the value at *p with cJSON; *p moves past it. On failure the
 * scanner tells a truncated file and too deep nesting from bad syntax. */
static cJSON *
parse_value (Loader *ld, const char **p, GError **error)
{
  const char *e = NULL;
  cJSON *v = cJSON_ParseWithLengthOpts (*p, (size_t)(ld->end - *p), &e, false);
  if (v) {
    GError *je = NULL;
    if (!sg_json_check_scalars (v, ld->data, *p, e, &je)) {
      json_error (error, je);
      cJSON_Delete (v);
      return NULL;
    }
    *p = e;
    return v;
  }
  const char *at;
  switch (sg_load_scan_value (*p, ld->end, &at)) {
  case SCAN_EOF:
    syntax_error (ld, ld->end, error, "a value is not closed");
    break;
  case SCAN_DEPTH: {
    char msg[96];
    g_snprintf (msg, sizeof msg, "nesting deeper than %d levels", CJSON_NESTING_LIMIT);
    syntax_error (ld, at, error, msg);
    break;
  }
  default:
    syntax_error (ld, e && e > *p ? e : *p, error, "malformed JSON");
    break;
  }
  return NULL;
}

/* Gives parsed pages of a mapped file back (they are clean: re-reading
 * them, e.g. for a late error message, faults them in again). */
static void
drop_parsed (Loader *ld, const char *p)
{
  if (!ld->mapped)
    return;
  size_t done = (size_t)(p - ld->data);
  if (done - ld->dropped < DROP_CHUNK)
    return;
  size_t page = (size_t)sysconf (_SC_PAGESIZE);
  size_t from = ld->dropped & ~(page - 1), to = done & ~(page - 1);
  if (to > from)
    madvise ((void *)(ld->data + from), to - from, MADV_DONTNEED);
  ld->dropped = to;
}

/* --- header ----------------------------------------------------------------- */

static bool
header_int (const cJSON *v, const char *key, int64_t lo, int64_t hi, int64_t *out, GError **error)
{
  /* Range first: casting an out-of-range double to an integer is undefined. */
  if (!cJSON_IsNumber (v) || !(v->valuedouble >= (double)lo && v->valuedouble <= (double)hi)
      || v->valuedouble != (double)(int64_t)v->valuedouble)
    FAIL (SG_GRAPH_ERROR_FORMAT, "%s: expected an integer from %" G_GINT64_FORMAT
          " to %" G_GINT64_FORMAT, key, lo, hi);
  *out = (int64_t)v->valuedouble;
  return true;
}

static bool
read_ranks (const cJSON *list, const char *where, GArray *out, GError **error)
{
  if (!cJSON_IsArray (list))
    FAIL (SG_GRAPH_ERROR_GROUP, "%s: expected a list of ranks", where);
  const cJSON *r;
  int i = 0;
  cJSON_ArrayForEach (r, list)
  {
    int64_t v;
    if (!cJSON_IsNumber (r) || !(r->valuedouble >= 0 && r->valuedouble < MAX_WORLD)
        || r->valuedouble != (double)(int64_t)r->valuedouble)
      FAIL (SG_GRAPH_ERROR_GROUP, "%s[%d]: expected a rank (an integer >= 0)", where, i);
    v = (int64_t)r->valuedouble;
    int32_t v32 = (int32_t)v;
    g_array_append_val (out, v32);
    i++;
  }
  return true;
}

static bool
add_groups (Loader *ld, GError **error)
{
  if (!cJSON_IsObject (ld->groups))
    FAIL (SG_GRAPH_ERROR_GROUP, "groups: expected an object of group name -> {\"ranks\": [...]}");
  if (cJSON_GetArraySize (ld->groups) > MAX_GROUPS)
    FAIL (SG_GRAPH_ERROR_GROUP, "groups: %d groups (at most %d)", cJSON_GetArraySize (ld->groups),
          MAX_GROUPS);
  const cJSON *grp;
  cJSON_ArrayForEach (grp, ld->groups)
  {
    g_autofree char *where = g_strdup_printf ("groups.%s.ranks", grp->string);
    if (!cJSON_IsObject (grp))
      FAIL (SG_GRAPH_ERROR_GROUP, "groups.%s: expected an object with `ranks`", grp->string);
    g_autoptr (GArray) ranks = g_array_new (FALSE, FALSE, sizeof (int32_t));
    g_autoptr (GArray) part = g_array_new (FALSE, FALSE, sizeof (int32_t));
    if (!read_ranks (cJSON_GetObjectItemCaseSensitive (grp, "ranks"), where, ranks, error))
      return false;
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive (grp, "partition");
    int32_t rows = 0;
    if (pj && !cJSON_IsNull (pj)) {
      if (!cJSON_IsArray (pj))
        FAIL (SG_GRAPH_ERROR_GROUP, "groups.%s.partition: expected a list of rank lists",
              grp->string);
      const cJSON *row;
      cJSON_ArrayForEach (row, pj)
      {
        g_autofree char *w = g_strdup_printf ("groups.%s.partition[%d]", grp->string, rows);
        guint before = part->len;
        if (!read_ranks (row, w, part, error))
          return false;
        if (part->len - before != ranks->len)
          FAIL (SG_GRAPH_ERROR_GROUP, "%s: %u ranks, but the group has %u", w,
                part->len - before, ranks->len);
        rows++;
      }
    }
    if (sg_graph_add_group (ld->g, grp->string, (const int32_t *)(void *)ranks->data,
                            (int32_t)ranks->len, rows ? (const int32_t *)(void *)part->data : NULL,
                            rows, error) < 0)
      return false;
  }
  return true;
}

/* Creates the graph once everything nodes depend on is known. */
static bool
header_ready (Loader *ld, GError **error)
{
  if (ld->g)
    return true;
  if (!(ld->has_format && ld->has_version && ld->has_world && ld->has_groups))
    return true;
  ld->g = sg_graph_new ((int32_t)ld->world_size, 0);
  return add_groups (ld, error);
}

static bool
header_key (Loader *ld, const char *key, cJSON *v, GError **error)
{
  if (strcmp (key, "format") == 0) {
    ld->has_format = true;
    if (!cJSON_IsString (v) || strcmp (v->valuestring, SG_GRAPH_FORMAT) != 0)
      FAIL (SG_GRAPH_ERROR_FORMAT, "format: expected \"%s\", found %s%s%s", SG_GRAPH_FORMAT,
            cJSON_IsString (v) ? "\"" : "a non-string",
            cJSON_IsString (v) ? v->valuestring : "", cJSON_IsString (v) ? "\"" : "");
  } else if (strcmp (key, "version") == 0) {
    ld->has_version = true;
    if (!cJSON_IsNumber (v) || v->valuedouble != SG_GRAPH_VERSION)
      FAIL (SG_GRAPH_ERROR_FORMAT,
            "version: this schedgraph reads version %d; the file has %s%g", SG_GRAPH_VERSION,
            cJSON_IsNumber (v) ? "version " : "a non-number ",
            cJSON_IsNumber (v) ? v->valuedouble : 0.0);
  } else if (strcmp (key, "world_size") == 0) {
    ld->has_world = true;
    if (!header_int (v, "world_size", 1, MAX_WORLD, &ld->world_size, error))
      return false;
  } else if (strcmp (key, "rank") == 0) {
    ld->has_rank = true;
    if (!header_int (v, "rank", 0, MAX_WORLD - 1, &ld->rank, error))
      return false;
  } else if (strcmp (key, "groups") == 0) {
    ld->has_groups = true;
    ld->groups = v;
    return header_ready (ld, error); /* keeps v */
  } else if (strcmp (key, "cluster") == 0) {
    ld->has_cluster = true;
    if (!cJSON_IsObject (v))
      FAIL (SG_GRAPH_ERROR_FORMAT, "cluster: expected an object");
  } else if (strcmp (key, "description") == 0) {
    ld->has_description = true;
    if (!cJSON_IsString (v))
      FAIL (SG_GRAPH_ERROR_FORMAT, "description: expected a string");
  }
  return header_ready (ld, error);
}

/* --- nodes ------------------------------------------------------------------ */

static void
drop_callback (gpointer ld, const char *p)
{
  drop_parsed (ld, p);
}

static bool
parse_nodes (Loader *ld, const char **pp, GError **error)
{
  SgGraph *g = ld->g;
  const char *p = *pp;
  if (p >= ld->end || *p != '[') { /* the file may end after "nodes": */
    syntax_error (ld, p, error, "nodes: expected a list of node objects");
    return false;
  }
  if (ld->fast) {
    if (sg_load_nodes_fast (g, p, ld->end, ld->pool, ld->chunk, drop_callback, ld, pp))
      return true;
    ld->declined = true; /* no error: the document is read again */
    return false;
  }
  p = sg_load_skip_ws (p + 1, ld->end);
  if (p < ld->end && *p == ']') {
    *pp = p + 1;
    return true;
  }
  g_autoptr (SgLoadArena) arena = sg_load_arena_new ();
  g_autoptr (GArray) refs = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  g_autofree SgAppendScratch *scratch = g_new0 (SgAppendScratch, 1);
  scratch->refs = refs;
  for (int index = 0;; index++) {
    /* the arena reader first; cJSON (and its diagnostics) for the rest */
    cJSON *parsed = NULL;
    const char *stop;
    const cJSON *obj = sg_load_read_node (arena, p, ld->end, &stop);
    if (obj)
      p = stop;
    else if (!(obj = parsed = parse_value (ld, &p, error)))
      return false;
    const cJSON *jop = cJSON_GetObjectItemCaseSensitive (obj, "op");
    if (g->output != SG_NO_NODE && !(cJSON_IsString (jop) && strcmp (jop->valuestring, "output") == 0)) {
      const cJSON *jn = cJSON_GetObjectItemCaseSensitive (obj, "name");
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_INVALID,
                   "node '%s' (#%d): comes after the output node '%s'; output must be last",
                   cJSON_IsString (jn) ? jn->valuestring : "?", index, g->nodes[g->output].name);
      cJSON_Delete (parsed);
      return false;
    }
    if (sg_graph_append_with (g, obj, scratch, error) == SG_NO_NODE) {
      const cJSON *jn = cJSON_GetObjectItemCaseSensitive (obj, "name");
      if (g_error_matches (*error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF) && cJSON_IsString (jn)
          && sg_graph_lookup (g, jn->valuestring) == SG_NO_NODE) {
        const char *fields[] = { "args", "kwargs" };
        for (size_t f = 0; f < G_N_ELEMENTS (fields); f++) {
          g_autoptr (GString) path = g_string_new (fields[f]);
          const char *missing
              = sg_load_first_undefined (g, cJSON_GetObjectItemCaseSensitive (obj, fields[f]), path);
          if (missing) {
            sg_load_diagnose_ref (jn->valuestring, index, path->str, missing, p, ld->end,
                                  error);
            break;
          }
        }
      }
      cJSON_Delete (parsed);
      return false;
    }
    cJSON_Delete (parsed);
    drop_parsed (ld, p);
    p = sg_load_skip_ws (p, ld->end);
    if (p >= ld->end) {
      syntax_error (ld, p, error, "the nodes list is not closed");
      return false;
    }
    if (*p == ']') {
      *pp = p + 1;
      return true;
    }
    if (*p != ',') {
      syntax_error (ld, p, error, "nodes: expected ',' or ']' after a node");
      return false;
    }
    p++;
  }
}

/* --- document --------------------------------------------------------------- */

static bool
parse_document (Loader *ld, GError **error)
{
  const char *p = sg_load_skip_ws (ld->data, ld->end);
  if (p >= ld->end)
    FAIL (SG_GRAPH_ERROR_IO, "empty file");
  if (*p != '{') {
    syntax_error (ld, p, error, "expected a JSON object ({ ... }) at the top level");
    return false;
  }
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  p = sg_load_skip_ws (p + 1, ld->end);
  if (p < ld->end && *p == '}')
    p++;
  else
    for (;;) {
      p = sg_load_skip_ws (p, ld->end);
      if (p >= ld->end || *p != '"') {
        syntax_error (ld, p, error, "expected a key (a string)");
        return false;
      }
      cJSON *jkey = parse_value (ld, &p, error);
      if (!jkey)
        return false;
      g_autofree char *key = g_strdup (jkey->valuestring);
      cJSON_Delete (jkey);
      if (!g_hash_table_add (seen, g_strdup (key)))
        FAIL (SG_GRAPH_ERROR_FORMAT, "%s: top-level key given twice", key);
      p = sg_load_skip_ws (p, ld->end);
      if (p >= ld->end || *p != ':') {
        syntax_error (ld, p, error, "expected ':' after a key");
        return false;
      }
      p = sg_load_skip_ws (p + 1, ld->end);
      if (strcmp (key, "nodes") == 0) {
        ld->has_nodes = true;
        if (ld->g) {
          if (!parse_nodes (ld, &p, error))
            return false;
        } else {
          /* Parsed (and checked strictly) once the header is complete. */
          ld->nodes_at = p;
          ScanResult r = sg_load_scan_value (p, ld->end, &p);
          if (r == SCAN_EOF) {
            syntax_error (ld, ld->end, error, "the nodes list is not closed");
            return false;
          }
          if (r != SCAN_OK) {
            syntax_error (ld, p, error,
                          r == SCAN_DEPTH ? "nesting deeper than the JSON parser's limit"
                                          : "malformed JSON");
            return false;
          }
        }
      } else {
        cJSON *v = parse_value (ld, &p, error);
        if (!v)
          return false;
        bool keep = strcmp (key, "groups") == 0;
        if (strcmp (key, "cluster") == 0 && cJSON_IsObject (v))
          ld->cluster_json_tmp = cJSON_PrintUnformatted (v);
        bool ok = header_key (ld, key, v, error);
        if (strcmp (key, "description") == 0 && cJSON_IsString (v))
          ld->description_tmp = g_strdup (v->valuestring);
        if (!keep)
          cJSON_Delete (v);
        if (!ok)
          return false;
      }
      p = sg_load_skip_ws (p, ld->end);
      if (p < ld->end && *p == '}') {
        p++;
        break;
      }
      if (p >= ld->end || *p != ',') {
        syntax_error (ld, p, error, "expected ',' or '}' after a top-level value");
        return false;
      }
      p++;
    }
  p = sg_load_skip_ws (p, ld->end);
  if (p < ld->end) {
    syntax_error (ld, p, error, "unexpected text after the top-level object");
    return false;
  }
  const char *missing = !ld->has_format    ? "format"
                        : !ld->has_version ? "version"
                        : !ld->has_world   ? "world_size"
                        : !ld->has_groups  ? "groups"
                        : !ld->has_nodes   ? "nodes"
                                           : NULL;
  if (missing)
    FAIL (SG_GRAPH_ERROR_FORMAT, "%s: required top-level key is missing", missing);
  if (ld->rank >= ld->world_size)
    FAIL (SG_GRAPH_ERROR_FORMAT, "rank: %" G_GINT64_FORMAT " is outside world_size %" G_GINT64_FORMAT,
          ld->rank, ld->world_size);
  if (ld->nodes_at) {
    const char *q = ld->nodes_at;
    if (!parse_nodes (ld, &q, error))
      return false;
  }
  SgGraph *g = ld->g;
  g->rank = (int32_t)ld->rank;
  if (g->n_nodes == 0)
    FAIL (SG_GRAPH_ERROR_FORMAT, "nodes: the list is empty (an output node is required)");
  if (g->output == SG_NO_NODE)
    FAIL (SG_GRAPH_ERROR_INVALID, "nodes: no node has op 'output' (exactly one is required, last)");
  return true;
}

/* Pieces of at least this many bytes are checked on separate threads. */
#define ENCODING_PIECE ((size_t)256 << 10)

typedef struct {
  const char *data;
  size_t len;
  int32_t n;
  gint bad;
} EncodingJob;

/* Piece @i's start: past any UTF-8 continuation byte (at most 3), so that
 * each piece starts at a character. */
static size_t
piece_start (const EncodingJob *j, int32_t i)
{
  size_t at = j->len / (size_t)j->n * (size_t)i;
  for (int k = 0; i > 0 && k < 3 && at < j->len; k++, at++)
    if (((unsigned char)j->data[at] & 0xC0) != 0x80)
      break;
  return i == j->n ? j->len : at;
}

static void
encoding_task (gpointer data, int32_t i, int32_t worker)
{
  EncodingJob *j = data;
  (void)worker;
  size_t from = piece_start (j, i), to = piece_start (j, i + 1);
  if (!sg_json_utf8_ok (j->data + from, to - from))
    g_atomic_int_set (&j->bad, 1);
}

/* sg_json_check_encoding() on @pool's threads; the message, when there is
 * one, from the sequential check. */
static bool
check_encoding (const char *data, size_t len, SgPool *pool, GError **error)
{
  int32_t threads = sg_pool_size (pool);
  EncodingJob j = { data, len, 0, 0 };
  j.n = (int32_t)MIN ((size_t)4 * (size_t)threads, len / ENCODING_PIECE);
  if (threads > 1 && j.n > 1 && !(len >= 3 && memcmp (data, "\xEF\xBB\xBF", 3) == 0)) {
    sg_pool_run (pool, j.n, encoding_task, &j);
    if (!g_atomic_int_get (&j.bad))
      return true;
  }
  GError *je = NULL;
  if (!sg_json_check_encoding (data, len, &je)) {
    json_error (error, je);
    return false;
  }
  return true;
}

static void
loader_clear (Loader *ld)
{
  cJSON_Delete (ld->groups);
  cJSON_free (ld->cluster_json_tmp);
  g_free (ld->description_tmp);
  sg_graph_free (ld->g);
}

static SgGraph *
load_buffer (const char *data, size_t len, bool mapped, const char *name, bool validate,
             SgPool *pool, SgLoadMode mode, GError **error)
{
  g_return_val_if_fail (data || len == 0, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);
  if (!check_encoding (data, len, pool, error))
    return NULL;
  Loader ld = { .data = data, .end = data + len, .mapped = mapped, .pool = pool,
                .fast = mode != SG_LOAD_SEQUENTIAL,
                .chunk = mode == SG_LOAD_FAST_SMALL ? SG_LOAD_SMALL : 0 };
  bool ok = parse_document (&ld, error);
  if (!ok && ld.declined && mode == SG_LOAD_FAST) { /* the sequential reader's graph or message */
    loader_clear (&ld);
    ld = (Loader){ .data = data, .end = data + len, .mapped = mapped };
    ok = parse_document (&ld, error);
  }
  SgGraph *g = ok ? g_steal_pointer (&ld.g) : NULL;
  if (ok) {
    g_free (g->source);
    g->source = g_strdup (name);
    g->cluster_json = g_steal_pointer (&ld.cluster_json_tmp);
    g->description = g_steal_pointer (&ld.description_tmp);
    if (validate && !sg_graph_validate_with (g, pool, error))
      g_clear_pointer (&g, sg_graph_free);
  }
  loader_clear (&ld);
  return g;
}

SgGraph *
sg_load_buffer (const char *data, size_t len, const char *name, SgPool *pool, SgLoadMode mode,
                GError **error)
{
  return load_buffer (data, len, false, name, false, pool, mode, error);
}

SgGraph *
sg_graph_load_data (const char *data, size_t len, const char *name, GError **error)
{
  return load_buffer (data, len, false, name, true, NULL, SG_LOAD_FAST, error);
}

SgGraph *
sg_graph_load_with (const char *path, bool validate, SgPool *pool, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  /* O_NONBLOCK: a FIFO must be refused, not waited on. */
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_IO, "cannot open: %s", g_strerror (e));
    return NULL;
  }
  struct stat st;
  const char *why = NULL;
  if (fstat (fd, &st) != 0)
    why = g_strerror (errno);
  else if (S_ISDIR (st.st_mode))
    why = "is a directory, not a graph file";
  else if (!S_ISREG (st.st_mode))
    why = "not a regular file";
  if (why) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_IO, "%s", why);
    close (fd);
    return NULL;
  }
  size_t len = (size_t)st.st_size;
  void *data = NULL;
  if (len) {
    data = mmap (NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      int e = errno;
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_IO, "cannot read: %s", g_strerror (e));
      close (fd);
      return NULL;
    }
    madvise (data, len, MADV_SEQUENTIAL);
  }
  close (fd);
  SgGraph *g = load_buffer (data, len, true, path, validate, pool, SG_LOAD_FAST, error);
  if (len)
    munmap (data, len);
  return g;
}

SgGraph *
sg_graph_load (const char *path, GError **error)
{
  return sg_graph_load_with (path, true, NULL, error);
}
