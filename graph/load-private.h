/* load-private.h: what load.c, load-scan.c and load-refs.c share. */
#pragma once

#include "graph.h"

typedef enum { SCAN_OK, SCAN_EOF, SCAN_DEPTH, SCAN_BAD } ScanResult;

/* First byte at or after @p that is not JSON whitespace (or @end). */
const char *sg_load_skip_ws (const char *p, const char *end);

/* Finds the end of the JSON value at @p (leading whitespace allowed)
 * without building it: strings with escapes, brackets, scalars up to a
 * delimiter; lenient about scalar spelling, exact about structure.
 * *@at: the end (after trailing whitespace), or the offending position. */
ScanResult sg_load_scan_value (const char *p, const char *end, const char **at);

/* First {"node": NAME} in @v, depth first (the order graph.c walks), whose
 * NAME is not a node of @g yet; its location is appended to @path. */
const char *sg_load_first_undefined (const SgGraph *g, const cJSON *v, GString *path);

/* Replaces *@error (the append failure of node @name, element @index of
 * `nodes`, whose reference to @missing at @field did not resolve) with a
 * message saying forward reference, cycle or dangling reference. @rest
 * points just after the node's element, @end at the end of the document. */
void sg_load_diagnose_ref (const char *name, int index, const char *field, const char *missing,
                           const char *rest, const char *end, GError **error);
