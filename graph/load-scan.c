/* load-scan.c: finding the end of a JSON value without building it.
 *
 * The loader's bracket scanner: skips `nodes` when it precedes the header
 * and tells a truncated file or too deep nesting from other syntax errors
 * after cJSON refused a value. Mirrors the structural pass of streaming
 * JSON readers (simdjson's stage 1, in its simplest byte-at-a-time form).
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include <string.h>

#include "load-private.h"

const char *
sg_load_skip_ws (const char *p, const char *end)
{
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
    p++;
  return p;
}

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
