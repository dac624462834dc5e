/* common.h: helpers the graph/ unit tests share (common.c). */
#pragma once

#include <check.h>

#include "builder.h"
#include "graph.h"

/* Asserts @error is SG_GRAPH_ERROR/@code with @substring in its message;
 * frees it. */
void assert_error (GError *error, int code, const char *substring);
/* The validator refuses @g with @code and @substring / accepts it. */
void assert_invalid (const SgGraph *g, int code, const char *substring);
void assert_valid (const SgGraph *g);

/* Runs @s (transfer full); the exit status for main (). */
int run_suite (Suite *s);

/* x[4,8] f32, w[2,8] f32 -> ag = all_gather(w) over "0" (2 ranks) -> wait
 * -> t -> mm(x, t) [4,4] -> relu -> output; ids 0..7 in that order. */
SgGraph *small_graph (void);
