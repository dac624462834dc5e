/* fuzz_plan.c: the plan loader, validator and race checker (plan/) on
 * arbitrary bytes: what every rank of schedrun reads before running.
 *
 * Properties: a rejection carries a message; an accepted plan serialises
 * to a canonical text that loads again, with the same hash, and
 * serialises to the same bytes (the canonical form is a fixed point).
 */
#include <string.h>

#include "fuzz.h"
#include "plan.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  GError *e = NULL;
  SgPlan *p = sg_plan_load_data ((const char *)data, size, "fuzz.json", &e);
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
