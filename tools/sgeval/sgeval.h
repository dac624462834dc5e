/* sgeval.h: the reference evaluator and the dump comparator (tools/sgeval).
 *
 * Private to the tool and its tests: sgeval_run evaluates a graph for every
 * rank in one process; sgeval_compare checks two --dump-outputs folders.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/* Evaluates @graph_path for all ranks with inputs from @seed; writes rank
 * @rank's outputs to @dump_dir (NULL: none) like schedrun --dump-outputs,
 * and every rank's FNV-1a checksums per output (index order) to @checksums_path
 * (NULL: none). False with @error naming the node. */
bool sgeval_run (const char *graph_path, uint64_t seed, int32_t rank, const char *dump_dir,
                 const char *checksums_path, GError **error);

typedef struct {
  int32_t outputs;    /* compared */
  int32_t identical;  /* bitwise equal */
  double max_rel;     /* largest |a-b| / max(|a|,|b|) over all elements */
  double max_abs;
  char *worst;        /* "index name [element]" of the largest violation, or NULL */
  bool within;        /* every element within atol + rtol * max(|a|,|b|) */
} SgevalCompare;

/* Compares two dump folders (outputs.json + N.bin): same outputs (names,
 * shapes, dtypes), then element values. NaNs must match NaNs. False with
 * @error only when the folders cannot be compared (missing, different
 * structure); the verdict is in @out. */
bool sgeval_compare (const char *dir_a, const char *dir_b, double rtol, double atol,
                     SgevalCompare *out, GError **error);
void sgeval_compare_clear (SgevalCompare *c);
