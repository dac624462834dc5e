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
