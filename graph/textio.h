/* textio.h: reading and writing the project's files: the JSON text rules
 * shared by every reader (graphs, plans, cluster files, profiles, orders)
 * and the same-file test of the tools' outputs.
 *
 * cJSON parses what the JSON grammar allows, and a little more it should
 * not keep: a number that overflows a double parses to infinity (and is
 * printed back as `null`), and a `\u0000` escape cuts a string at the NUL,
 * so two different names can become one. These functions refuse both, and
 * say what is wrong and where (line and column) for the cases cJSON only
 * reports as a failure: a UTF-8 byte-order mark, text that ends early,
 * nesting deeper than cJSON's limit. Implemented in load-scan.c, which also
 * holds the graph loader's bracket scanner, and files.c (library
 * sg_textio).
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdbool.h>
#include <stddef.h>

G_BEGIN_DECLS

#define SG_JSON_ERROR (sg_json_error_quark ())
GQuark sg_json_error_quark (void);
typedef enum {
  SG_JSON_ERROR_ENCODING,  /* byte-order mark, invalid UTF-8, NUL byte, empty text */
  SG_JSON_ERROR_TRUNCATED, /* the text ends inside a value */
  SG_JSON_ERROR_SYNTAX,    /* malformed JSON, nesting too deep, trailing text */
  SG_JSON_ERROR_VALUE,     /* a number that is not a finite double, \u0000 in a string */
} SgJsonError;

/* Line and column (both from 1) of @at inside @doc. */
void sg_json_line_col (const char *doc, const char *at, size_t *line, size_t *col);

/* The bytes of a whole document: no UTF-8 byte-order mark, valid UTF-8, no
 * NUL byte. The message gives the byte, line and column. */
bool sg_json_check_encoding (const char *data, size_t len, GError **error);

/* Whether the @len bytes at @p are valid UTF-8 without a NUL byte: the
 * test above on a piece of a document (no byte-order mark test), which
 * holds for a document when it holds for pieces cut at character starts. */
bool sg_json_utf8_ok (const char *p, size_t len);

/* What cJSON accepted in @v, parsed from the text [@text, @text_end) of the
 * document that starts at @doc: every number a finite double, no `\u0000`
 * escape in a string or key. The message gives line and column in @doc. */
bool sg_json_check_scalars (const cJSON *v, const char *doc, const char *text,
                            const char *text_end, GError **error);

/* (transfer full) Parses a whole document of @len bytes: one JSON value,
 * whitespace around it, every rule above. NULL with @error (SG_JSON_ERROR)
 * on anything else; the message says what and where, without a file name. */
cJSON *sg_json_parse (const char *data, size_t len, GError **error);

/* --- files ------------------------------------------------------------------ */

/* True when @a and @b name the same file: the same device and inode (any
 * spelling, symbolic or hard links), or, for a path that does not exist
 * yet, the same directory and last component. */
bool sg_same_file (const char *a, const char *b);

/* --- the bracket scanner (graph loader) ------------------------------------ */

typedef enum { SCAN_OK, SCAN_EOF, SCAN_DEPTH, SCAN_BAD } ScanResult;

static inline bool
sg_load_is_ws (char c)
{
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* First byte at or after @p that is not JSON whitespace (or @end): every
 * reader of the graph loader's. */
static inline const char *
sg_load_skip_ws (const char *p, const char *end)
{
  if (p < end && (unsigned char)*p > ' ') /* most tokens follow the last at once */
    return p;
  while (p < end && sg_load_is_ws (*p))
    p++;
  return p;
}

/* Finds the end of the JSON value at @p (leading whitespace allowed)
 * without building it: strings with escapes, brackets, scalars up to a
 * delimiter; lenient about scalar spelling, exact about structure.
 * *@at: the end (after trailing whitespace), or the offending position. */
ScanResult sg_load_scan_value (const char *p, const char *end, const char **at);

G_END_DECLS
