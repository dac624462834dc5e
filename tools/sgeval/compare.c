/* compare.c: compares two output dump folders (schedrun --dump-outputs or
 * sgeval --dump-outputs): structure first (count, names, shapes, dtypes,
 * sizes), then every element, bitwise and within atol + rtol * max(|a|,|b|).
 * Mirrors torch.testing.assert_close's rule (symmetric here).
 * Requires: nothing. Invalidates: nothing.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "runtime.h"
#include "sgeval.h"

static cJSON *
read_index (const char *dir, GError **error)
{
  char *fn = g_build_filename (dir, "outputs.json", NULL);
  char *text = NULL;
  gsize len = 0;
  cJSON *j = NULL;
  if (g_file_get_contents (fn, &text, &len, error)) {
    j = cJSON_ParseWithLength (text, len);
    if (!cJSON_IsArray (j)) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "%s is not a JSON array of outputs", fn);
      cJSON_Delete (j);
      j = NULL;
    }
  }
  g_free (text);
  g_free (fn);
  return j;
}

static bool
same_json (const cJSON *a, const cJSON *b)
{
  return (a == NULL && b == NULL) || (a != NULL && b != NULL && cJSON_Compare (a, b, true));
}

bool
sgeval_compare (const char *dir_a, const char *dir_b, double rtol, double atol,
                SgevalCompare *out, GError **error)
{
  memset (out, 0, sizeof *out);
  out->within = true;
  cJSON *ia = read_index (dir_a, error), *ib = ia ? read_index (dir_b, error) : NULL;
  bool ok = ia != NULL && ib != NULL;
  if (ok && cJSON_GetArraySize (ia) != cJSON_GetArraySize (ib)) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH, "%s has %d outputs, %s has %d", dir_a,
                 cJSON_GetArraySize (ia), dir_b, cJSON_GetArraySize (ib));
    ok = false;
  }
  for (int i = 0; ok && i < cJSON_GetArraySize (ia); i++) {
    const cJSON *ea = cJSON_GetArrayItem (ia, i), *eb = cJSON_GetArrayItem (ib, i);
    const cJSON *na = cJSON_GetObjectItem (ea, "name"), *nb = cJSON_GetObjectItem (eb, "name");
    /* Names may differ (a plan names a wait's output after its collective's
     * value); the structure may not. */
    if (cJSON_IsString (na) != cJSON_IsString (nb) ||
        !same_json (cJSON_GetObjectItem (ea, "shape"),
                                           cJSON_GetObjectItem (eb, "shape")) ||
        !same_json (cJSON_GetObjectItem (ea, "dtype"), cJSON_GetObjectItem (eb, "dtype"))) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH,
                   "output %d differs in shape or dtype (or is a tensor in only one) between %s and %s", i, dir_a,
                   dir_b);
      ok = false;
      break;
    }
    if (!cJSON_IsString (na))
      continue; /* a non-tensor output */
    const cJSON *dt = cJSON_GetObjectItem (ea, "dtype");
    SgDtype dtype = cJSON_IsString (dt) ? sg_dtype_from_name (dt->valuestring) : SG_DTYPE_INVALID;
    if (!sg_cpu_dtype_supported (dtype)) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH, "output %d: unknown dtype", i);
      ok = false;
      break;
    }
    char name[32];
    g_snprintf (name, sizeof name, "%d.bin", i);
    char *fa = g_build_filename (dir_a, name, NULL), *fb = g_build_filename (dir_b, name, NULL);
    char *da = NULL, *db = NULL;
    gsize la = 0, lb = 0;
    ok = g_file_get_contents (fa, &da, &la, error) && g_file_get_contents (fb, &db, &lb, error);
    size_t es = sg_dtype_size (dtype);
    if (ok && (la != lb || la % es != 0)) {
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_MISMATCH, "%s and %s differ in size (%zu, %zu)",
                   fa, fb, (size_t)la, (size_t)lb);
      ok = false;
    }
    if (ok) {
      out->outputs++;
      if (memcmp (da, db, la) == 0) {
        out->identical++;
      } else {
        for (gsize e = 0; e < la / es; e++) {
          double a = sg_tensor_load (dtype, da, (int64_t)e), b = sg_tensor_load (dtype, db, (int64_t)e);
          if (isnan (a) || isnan (b)) {
            if (isnan (a) && isnan (b))
              continue;
            out->within = false;
            g_free (out->worst);
            out->worst = g_strdup_printf ("%d %s [%zu]: %g vs %g", i, na->valuestring, (size_t)e, a, b);
            continue;
          }
          double d = fabs (a - b), m = MAX (fabs (a), fabs (b));
          double rel = m > 0 ? d / m : 0;
          out->max_abs = MAX (out->max_abs, d);
          if (rel > out->max_rel)
            out->max_rel = rel;
          if (d > atol + rtol * m) {
            if (out->within || out->worst == NULL || rel >= out->max_rel) {
              g_free (out->worst);
              out->worst = g_strdup_printf ("%d %s [%zu]: %.9g vs %.9g", i, na->valuestring,
                                            (size_t)e, a, b);
            }
            out->within = false;
          }
        }
      }
    }
    g_free (da), g_free (db), g_free (fa), g_free (fb);
  }
  cJSON_Delete (ia);
  cJSON_Delete (ib);
  return ok;
}

void
sgeval_compare_clear (SgevalCompare *c)
{
  g_free (c->worst);
  memset (c, 0, sizeof *c);
}
