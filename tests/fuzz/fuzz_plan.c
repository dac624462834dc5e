/* fuzz_plan.c: the plan loader, validator and race checker (plan/) on
 * arbitrary bytes: what every rank of schedrun reads before running.
 *
 * An input whose only fault is its hash goes on with the hash its content
 * has, so that the rules behind the hash are reached.
 * Properties: a rejection carries a message; the hash the loader computes
 * is the one it accepts on a second load; an accepted plan serialises
 * to a canonical text that loads again, with the same hash, and
 * serialises to the same bytes (the canonical form is a fixed point).
 */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "plan.h"

/* Almost every mutation breaks the content hash, and the loader stops
 * there: the input goes on with the hash the loader computed (its message
 * says it), so the field, validator and race rules behind the hash are
 * fuzzed too. NULL when @e is no hash mismatch. */
static char *
with_its_hash (const uint8_t *data, size_t size, const GError *e)
{
  char file[17], content[17];
  const char *at = e ? strstr (e->message, "the file says ") : NULL;
  if (!g_error_matches (e, SG_PLAN_ERROR, SG_PLAN_ERROR_HASH) || !at
      || sscanf (at, "the file says %16[0-9a-f], its content hashes to %16[0-9a-f]", file,
                 content) != 2)
    return NULL;
  g_autofree char *text = g_strndup ((const char *)data, size);
  g_autofree char *key = g_strdup_printf ("\"hash\":\"%s\"", file);
  char *k = strstr (text, key);
  if (!k || strlen (text) != size) /* a NUL byte: not JSON text anyway */
    return NULL;
  memcpy (k + 8, content, 16);
  return g_steal_pointer (&text);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  GError *e = NULL;
  SgPlan *p = sg_plan_load_data ((const char *)data, size, "fuzz.json", &e);
  g_autofree char *fixed = p ? NULL : with_its_hash (data, size, e);
  if (fixed) {
    g_clear_error (&e);
    p = sg_plan_load_data (fixed, size, "fuzz.json", &e);
    if (g_error_matches (e, SG_PLAN_ERROR, SG_PLAN_ERROR_HASH))
      fuzz_bug ("the hash the loader computed does not match on a second load: %s", e->message);
  }
  if (!p) {
    fuzz_rejected (e);
    return 0;
  }
  uint64_t hash = p->hash;
  size_t len;
  char *text = sg_plan_to_json (p, &len);
  if (p->hash != hash)
    fuzz_bug ("the canonical text of an accepted plan hashes to %016" G_GINT64_MODIFIER
              "x, the plan said %016" G_GINT64_MODIFIER "x", p->hash, hash);
  SgPlan *q = sg_plan_load_data (text, len, "canonical.json", &e);
  if (!q)
    fuzz_bug ("the canonical text of an accepted plan does not load: %s", e->message);
  size_t len2;
  char *text2 = sg_plan_to_json (q, &len2);
  if (len != len2 || memcmp (text, text2, len) != 0 || q->hash != hash)
    fuzz_bug ("the canonical text is not a fixed point");
  g_free (text);
  g_free (text2);
  sg_plan_free (q);
  sg_plan_free (p);
  return 0;
}
