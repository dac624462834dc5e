/* fuzz.h: what the libFuzzer harnesses of tests/fuzz share.
 *
 * Each harness is one reader of the project's files fed arbitrary bytes
 * (ASan + UBSan + libFuzzer, meson -Dfuzz=true with clang): it must accept
 * or reject cleanly. A crash, a sanitizer report, a GLib warning or
 * critical (a g_return_if_fail is a bug found), or a broken property the
 * harness checks (fuzz_bug) is a finding. tests/fuzz/README.md says how to
 * run them and what to do with a finding.
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

/* libFuzzer's LLVMFuzzerInitialize (fuzz.c, for every harness): GLib
 * warnings and criticals abort. */

/* A rejection: it must carry a message (else fuzz_bug). Frees @e. */
void fuzz_rejected (GError *e);

/* Estimates the sample graph @sample with @cfg (a cluster or profile under
 * test), then checks that every node got a finite cost >= 0 and that the
 * input order simulates to a finite step (@what names the input kind). */
void fuzz_estimate (const char *sample, const SgConfig *cfg, const char *what);

/* A path naming a file that holds exactly @data (a memfd reused across
 * calls, /proc/self/fd/N), for readers that take a path. */
const char *fuzz_file (const uint8_t *data, size_t size);

/* (transfer none) The sample graph tests/data/NAME, loaded and estimated
 * once per process (the default cluster). */
SgGraph *fuzz_sample_graph (const char *name);

/* A property the harness checks was broken: prints and aborts. */
G_NORETURN void fuzz_bug (const char *fmt, ...) G_GNUC_PRINTF (1, 2);
