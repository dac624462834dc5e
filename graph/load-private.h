/* load-private.h: what load.c, load-scan.c and load-refs.c share. */
#pragma once

#include "graph.h"
#include "textio.h"

/* First {"node": NAME} in @v, depth first (the order graph.c walks), whose
 * NAME is not a node of @g yet; its location is appended to @path. */
const char *sg_load_first_undefined (const SgGraph *g, const cJSON *v, GString *path);

/* Replaces *@error (the append failure of node @name, element @index of
 * `nodes`, whose reference to @missing at @field did not resolve) with a
 * message saying forward reference, cycle or dangling reference. @rest
 * points just after the node's element, @end at the end of the document. */
void sg_load_diagnose_ref (const char *name, int index, const char *field, const char *missing,
                           const char *rest, const char *end, GError **error);

/* The node reader (load-json.c): an arena of cJSON-shaped trees, reused
 * from node to node. */
typedef struct SgLoadArena SgLoadArena;
SgLoadArena *sg_load_arena_new (void);
void sg_load_arena_free (SgLoadArena *a);

/* (transfer none) The node object at @p (leading JSON whitespace allowed),
 * read into @a, which it empties first: the tree cJSON_Parse would give,
 * valid until the next call. *@stop: just past the object. NULL when the
 * text is outside the reader's strict subset (any syntax error included):
 * the caller parses it with cJSON. */
const cJSON *sg_load_read_node (SgLoadArena *a, const char *p, const char *end,
                                const char **stop);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SgLoadArena, sg_load_arena_free)
