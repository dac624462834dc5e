/* load-scan.c: the JSON text layer under every reader (textio.h).
 *
 * The graph loader's bracket scanner: finds the end of a JSON value without
 * building it, so `nodes` can be skipped when it precedes the header, and
 * tells a truncated text or too deep nesting from other syntax errors after
 * cJSON refused a value. Mirrors the structural pass of streaming JSON
 * readers (simdjson's stage 1, in its simplest byte-at-a-time form).
 *
 * On top of it, the rules cJSON does not enforce (textio.h): encoding
 * (byte-order mark, UTF-8, NUL bytes), numbers that are not finite doubles
 * and `\u0000` escapes, and sg_json_parse(), the whole-document reader of
 * plans, cluster files, profiles and orders. The checks of a parsed value
 * are cheap on the common path: a tree walk for non-finite numbers and a
 * memchr() for backslashes; the text is scanned token by token only to
 * place an error.
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "textio.h"

G_DEFINE_QUARK (sg-json-error-quark, sg_json_error)

/* Finds the end of the JSON value at @p without building it: strings with
 * escapes, brackets, scalars up to a delimiter. Lenient about scalar
 * spelling (cJSON checks that when the value is parsed); exact about
 * structure. *at: the end, or the offending position. */
ScanResult
sg_load_scan_value (const char *p, const char *end, const char **at)
{
  int depth = 0;
  p = sg_load_skip_ws (p, end);
  do {
    if (p >= end) {
      *at = end;
      return SCAN_EOF;
    }
    char c = *p;
    if (c == '"') {
      for (p++; p < end && *p != '"'; p++)
        if (*p == '\\')
          p++;
      if (p >= end) {
        *at = end;
        return SCAN_EOF;
      }
      p++;
    } else if (c == '[' || c == '{') {
      if (++depth > CJSON_NESTING_LIMIT) {
        *at = p;
        return SCAN_DEPTH;
      }
      p++;
    } else if (c == ']' || c == '}') {
      if (depth == 0) {
        *at = p;
        return SCAN_BAD;
      }
      depth--;
      p++;
    } else if (c == ',' || c == ':') {
      if (depth == 0) {
        *at = p;
        return SCAN_BAD;
      }
      p++;
    } else {
      const char *s = p;
      while (p < end && !strchr (",:]}[{\" \t\r\n", *p))
        p++;
      if (p == s) {
        *at = p;
        return SCAN_BAD;
      }
    }
    p = sg_load_skip_ws (p, end);
  } while (depth > 0);
  *at = p;
  return SCAN_OK;
}

/* --- positions and encoding ------------------------------------------------ */

void
sg_json_line_col (const char *doc, const char *at, size_t *line, size_t *col)
{
  *line = 1;
  const char *ls = doc;
  for (const char *q = doc; q < at; q++)
    if (*q == '\n') {
      (*line)++;
      ls = q + 1;
    }
  *col = (size_t)(at - ls) + 1;
}

static void G_GNUC_PRINTF (5, 6)
set_at (GError **error, int code, const char *doc, const char *at, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  size_t line, col;
  sg_json_line_col (doc, at, &line, &col);
  g_set_error (error, SG_JSON_ERROR, code, "line %zu, column %zu: %s", line, col, msg);
}

/* The first byte at or after @p that is not ASCII or is NUL: 32 bytes at
 * a time where SSE2 is there (a byte with its high bit set, or equal to
 * zero, sets its bit of the mask), then eight (a word with a high bit set
 * or a zero byte stops the run), then one. */
static const char *
skip_ascii (const char *p, const char *end)
{
#ifdef __SSE2__
  const __m128i zero = _mm_setzero_si128 ();
  while (end - p >= 32) {
    const __m128i a = _mm_loadu_si128 ((const __m128i *)(const void *)p);
    const __m128i b = _mm_loadu_si128 ((const __m128i *)(const void *)(p + 16));
    const __m128i stop = _mm_or_si128 (_mm_or_si128 (a, _mm_cmpeq_epi8 (a, zero)),
                                       _mm_or_si128 (b, _mm_cmpeq_epi8 (b, zero)));
    if (_mm_movemask_epi8 (stop))
      break;
    p += 32;
  }
#endif
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  while (end - p >= 8) {
    uint64_t w;
    memcpy (&w, p, sizeof w);
    if ((w & highs) || ((w - ones) & ~w & highs))
      break;
    p += 8;
  }
  while (p < end && (unsigned char)*p - 1u < 0x7Fu)
    p++;
  return p;
}

/* g_utf8_validate() over [@p, @end), the same answer and *@bad: ASCII
 * runs are skipped by blocks (skip_ascii), and each run of non-ASCII
 * bytes (which valid UTF-8 ends at a character boundary) is validated
 * alone. */
static bool
utf8_valid (const char *p, const char *end, const char **bad)
{
  for (;;) {
    p = skip_ascii (p, end);
    if (p == end)
      return true;
    if (*p == '\0') {
      *bad = p;
      return false;
    }
    const char *q = p + 1;
    while (q < end && (unsigned char)*q >= 0x80)
      q++;
    if (!g_utf8_validate (p, (gssize)(q - p), bad))
      return false;
    p = q;
  }
}

bool
sg_json_utf8_ok (const char *p, size_t len)
{
  const char *bad;
  return !len || utf8_valid (p, p + len, &bad);
}

bool
sg_json_check_encoding (const char *data, size_t len, GError **error)
{
  if (len >= 3 && memcmp (data, "\xEF\xBB\xBF", 3) == 0) {
    g_set_error_literal (error, SG_JSON_ERROR, SG_JSON_ERROR_ENCODING,
                         "byte 0: the text starts with a UTF-8 byte-order mark (BOM), which "
                         "JSON does not allow; save the file as UTF-8 without BOM");
    return false;
  }
  const char *bad;
  if (len && !utf8_valid (data, data + len, &bad)) {
    size_t line, col;
    sg_json_line_col (data, bad, &line, &col);
    g_set_error (error, SG_JSON_ERROR, SG_JSON_ERROR_ENCODING,
                 "byte %zu (line %zu, column %zu): %s", (size_t)(bad - data), line, col,
                 *bad ? "invalid UTF-8" : "NUL byte (not allowed in JSON text)");
    return false;
  }
  return true;
}

/* --- scalars cJSON accepts but we do not ------------------------------------ */

static bool
all_finite (const cJSON *v)
{
  for (; v; v = v->next) {
    if (cJSON_IsNumber (v) && !isfinite (v->valuedouble))
      return false;
    if (v->child && !all_finite (v->child))
      return false;
  }
  return true;
}

/* The first offending token in [p, end): a number whose value is not a
 * finite double, or (with @nul) a \u0000 escape inside a string. */
static const char *
find_bad_token (const char *p, const char *end, bool nul, size_t *tok_len)
{
  while (p < end) {
    if (*p == '"') {
      for (p++; p < end && *p != '"'; p++)
        if (*p == '\\') {
          if (nul && end - p >= 6 && memcmp (p, "\\u0000", 6) == 0) {
            *tok_len = 6;
            return p;
          }
          p++;
        }
      p++;
    } else if (*p == '-' || g_ascii_isdigit (*p)) {
      const char *s = p;
      while (p < end && (g_ascii_isdigit (*p) || strchr ("+-.eE", *p)))
        p++;
      g_autofree char *tok = g_strndup (s, (gsize)(p - s));
      if (!isfinite (g_ascii_strtod (tok, NULL))) {
        *tok_len = (size_t)(p - s);
        return s;
      }
    } else {
      p++;
    }
  }
  return NULL;
}

/* Whether "\\u0000" occurs in [p, end): memchr for the (rare) backslash
 * first, which is several times faster than memmem over the text. */
static bool
has_nul_escape (const char *p, const char *end)
{
  while ((p = memchr (p, '\\', (size_t)(end - p))) != NULL) {
    if (end - p >= 6 && memcmp (p, "\\u0000", 6) == 0)
      return true;
    p++;
  }
  return false;
}

bool
sg_json_check_scalars (const cJSON *v, const char *doc, const char *text, const char *text_end,
                       GError **error)
{
  bool finite = !v || (cJSON_IsNumber (v) ? isfinite (v->valuedouble) : all_finite (v->child));
  bool nul = has_nul_escape (text, text_end);
  if (finite && !nul)
    return true;
  size_t n = 0;
  const char *at = find_bad_token (text, text_end, nul, &n);
  if (!at && finite) /* "\\u0000": an escaped backslash, then "u0000" */
    return true;
  if (at && *at == '\\')
    set_at (error, SG_JSON_ERROR_VALUE, doc, at,
            "\\u0000 (NUL) in a string: not allowed (a name would be cut there)");
  else if (at)
    set_at (error, SG_JSON_ERROR_VALUE, doc, at,
            "number %.*s is out of range (not a finite double)", (int)MIN (n, 40), at);
  else
    set_at (error, SG_JSON_ERROR_VALUE, doc, text,
            "a number is out of range (not a finite double)");
  return false;
}

/* --- whole documents --------------------------------------------------------- */

cJSON *
sg_json_parse (const char *data, size_t len, GError **error)
{
  g_return_val_if_fail (data != NULL || len == 0, NULL);
  if (!sg_json_check_encoding (data, len, error))
    return NULL;
  const char *end = data + len;
  if (sg_load_skip_ws (data, end) == end) {
    g_set_error_literal (error, SG_JSON_ERROR, SG_JSON_ERROR_ENCODING,
                         len ? "no JSON value (only whitespace)" : "empty file");
    return NULL;
  }
  const char *stop = NULL;
  cJSON *v = cJSON_ParseWithLengthOpts (data, len, &stop, false);
  if (!v) {
    const char *at;
    switch (sg_load_scan_value (data, end, &at)) {
    case SCAN_EOF:
      g_set_error (error, SG_JSON_ERROR, SG_JSON_ERROR_TRUNCATED,
                   "truncated: the text ends at byte %zu before the JSON value is complete", len);
      break;
    case SCAN_DEPTH:
      set_at (error, SG_JSON_ERROR_SYNTAX, data, at, "nesting deeper than %d levels",
              CJSON_NESTING_LIMIT);
      break;
    default:
      set_at (error, SG_JSON_ERROR_SYNTAX, data,
              stop && stop >= data && stop <= end ? stop : data, "malformed JSON");
      break;
    }
    return NULL;
  }
  const char *rest = sg_load_skip_ws (stop, end);
  if (rest < end) {
    set_at (error, SG_JSON_ERROR_SYNTAX, data, rest,
            "trailing text after the JSON value (%zu bytes)", (size_t)(end - rest));
    cJSON_Delete (v);
    return NULL;
  }
  if (!sg_json_check_scalars (v, data, data, end, error)) {
    cJSON_Delete (v);
    return NULL;
  }
  return v;
}
