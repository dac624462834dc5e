/* load-json.c: the graph loader's node reader (load-private.h).
 *
 * Parses one node object into a cJSON-shaped tree whose items and strings
 * live in an arena reused from node to node: no malloc or free per item,
 * which was most of a node's load time (cJSON_Parse + cJSON_Delete). It
 * reads the strict JSON grammar only, and for what it accepts gives the
 * tree cJSON 1.7 gives: the same types, valuedouble and saturated valueint
 * (numbers through the same strtod), strings with the same escapes (\u
 * with surrogate pairs), duplicate keys kept in order, and the same end.
 * Whatever lies outside that subset is declined rather than diagnosed: a
 * syntax error, whitespace cJSON skips but JSON does not have, a number of
 * 63 characters or more (cJSON cuts it), one that is not a finite double,
 * a \u escape that is not four hex digits or is \u0000, a lone surrogate,
 * nesting deeper than FAST_DEPTH. The loader then parses the element with
 * cJSON as before, so every message and position of a rejected file comes
 * from one place (load.c). Mirrors the fast path / exact fallback split of
 * simdjson's number parser, for a whole value.
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include "load-private.h"

#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Deeper values are left to cJSON (whose limit is CJSON_NESTING_LIMIT). */
#define FAST_DEPTH 256
/* cJSON copies at most 63 characters of a number before strtod. */
#define NUMBER_MAX 63
#define BLOCK_MIN ((size_t)64 << 10)

struct SgLoadBlock {
  SgLoadBlock *next;
  size_t size;
  max_align_t data[];
};

SgLoadArena *
sg_load_arena_new (void)
{
  return g_new0 (SgLoadArena, 1);
}

void
sg_load_arena_free (SgLoadArena *a)
{
  if (!a)
    return;
  sg_load_arena_clear (a);
  g_free (a);
}

void
sg_load_arena_reset (SgLoadArena *a)
{
  a->cur = NULL;
  a->next = a->limit = NULL;
}

void
sg_load_arena_clear (SgLoadArena *a)
{
  for (SgLoadBlock *b = a->head, *next; b; b = next) {
    next = b->next;
    g_free (b);
  }
  *a = (SgLoadArena){ 0 };
}

/* Moves to the next block of the chain with room for @n bytes, appending
 * one when none has. */
void *
sg_load_arena_grow (SgLoadArena *a, size_t n)
{
  SgLoadBlock *b = a->cur ? a->cur->next : a->head;
  while (b && b->size < n)
    b = b->next;
  if (!b) {
    size_t size = MAX (BLOCK_MIN, n);
    b = g_malloc (sizeof (SgLoadBlock) + size);
    *b = (SgLoadBlock){ .size = size };
    SgLoadBlock **link = a->cur ? &a->cur->next : &a->head;
    while (*link)
      link = &(*link)->next;
    *link = b;
  }
  a->cur = b;
  a->next = (char *)b->data + n;
  a->limit = (char *)b->data + b->size;
  return b->data;
}

typedef struct {
  SgLoadArena *a;
  const char *end;
  char decimal_point; /* the locale's, as cJSON's parse_number uses; 0: not read yet */
} Reader;

static int
hex4 (const char *p)
{
  int h = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0)
      return -1;
    h = h << 4 | d;
  }
  return h;
}

/* A \u escape at @p (inside a string ending at @q) as UTF-8 at *@out;
 * returns the escape's length, 0 to decline. cJSON's
 * utf16_literal_to_utf8 where the hex digits are valid. */
static int
unicode_escape (const char *p, const char *q, char **out)
{
  if (q - p < 6)
    return 0;
  int first = hex4 (p + 2), len = 6;
  if (first <= 0 || (first >= 0xDC00 && first <= 0xDFFF))
    return 0;
  uint32_t cp = (uint32_t)first;
  if (first >= 0xD800 && first <= 0xDBFF) {
    if (q - p < 12 || p[6] != '\\' || p[7] != 'u')
      return 0;
    int second = hex4 (p + 8);
    if (second < 0xDC00 || second > 0xDFFF)
      return 0;
    cp = 0x10000 + (((uint32_t)first & 0x3FF) << 10 | ((uint32_t)second & 0x3FF));
    len = 12;
  }
  unsigned char *o = (unsigned char *)*out;
  if (cp < 0x80) {
    *o++ = (unsigned char)cp;
  } else if (cp < 0x800) {
    *o++ = (unsigned char)(0xC0 | cp >> 6);
    *o++ = (unsigned char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *o++ = (unsigned char)(0xE0 | cp >> 12);
    *o++ = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    *o++ = (unsigned char)(0x80 | (cp & 0x3F));
  } else {
    *o++ = (unsigned char)(0xF0 | cp >> 18);
    *o++ = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    *o++ = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    *o++ = (unsigned char)(0x80 | (cp & 0x3F));
  }
  *out = (char *)o;
  return len;
}

char *
sg_load_unescape (const char *s, const char *q, char *o)
{
  for (const char *i = s; i < q;) {
    if (*i != '\\') {
      *o++ = *i++;
      continue;
    }
    int len = 2;
    switch (i[1]) {
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case '"':
    case '\\':
    case '/': *o++ = i[1]; break;
    case 'u':
      len = unicode_escape (i, q, &o);
      if (!len)
        return NULL;
      break;
    default: return NULL;
    }
    i += len;
  }
  *o = '\0';
  return o;
}

/* The string whose opening quote is at @p, unescaped into the arena at
 * *@out; returns the end (past the closing quote), NULL to decline. */
static const char *
read_string (Reader *r, const char *p, char **out_)
{
  const char *s = p + 1;
  bool escapes;
  const char *q = sg_load_string_close (p, r->end, &escapes);
  if (!q)
    return NULL;
  size_t n = (size_t)(q - s);
  char *out = sg_load_arena_alloc (r->a, n + 1);
  if (!escapes) {
    /* names and keys are short: whole words (the arena rounds @out up to
     * 16 bytes, and the text goes on past the quote), not a memcpy call */
    if (r->end - q >= 8)
      for (size_t i = 0; i < n; i += 8)
        memcpy (out + i, s + i, 8);
    else
      memcpy (out, s, n);
    out[n] = '\0';
    *out_ = out;
    return q + 1;
  }
  if (!sg_load_unescape (s, q, out))
    return NULL;
  *out_ = out;
  return q + 1;
}

const char *
sg_load_number (const char *p, const char *end, double *out, char *decimal_point)
{
  int64_t v;
  const char *q = sg_load_small_int (p, end, &v);
  if (q) {
    *out = (double)v;
    return q;
  }
  const char *s = p;
  bool neg = p < end && *p == '-';
  if (neg)
    p++;
  if (p < end && *p == '0')
    p++;
  else if (p < end && *p >= '1' && *p <= '9')
    while (p < end && sg_load_is_digit (*p))
      p++;
  else
    return NULL;
  if (p < end && *p == '.') {
    if (++p >= end || !sg_load_is_digit (*p))
      return NULL;
    while (p < end && sg_load_is_digit (*p))
      p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-'))
      p++;
    if (p >= end || !sg_load_is_digit (*p))
      return NULL;
    while (p < end && sg_load_is_digit (*p))
      p++;
  }
  size_t n = (size_t)(p - s);
  if (n >= NUMBER_MAX)
    return NULL;
  char buf[NUMBER_MAX + 1];
  if (!*decimal_point)
    *decimal_point = *localeconv ()->decimal_point;
  for (size_t i = 0; i < n; i++)
    buf[i] = s[i] == '.' ? *decimal_point : s[i];
  buf[n] = '\0';
  char *stop;
  double d = strtod (buf, &stop);
  if (stop != buf + n || !isfinite (d))
    return NULL;
  *out = d;
  return p;
}

/* A number in JSON's grammar at @p; NULL to decline. */
static const char *
read_number (Reader *r, const char *p, cJSON *item)
{
  double d;
  if (!(p = sg_load_number (p, r->end, &d, &r->decimal_point)))
    return NULL;
  item->type = cJSON_Number;
  item->valuedouble = d;
  item->valueint = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : (int)d;
  return p;
}

static const char *read_value (Reader *r, const char *p, cJSON *item, int depth);

/* The members of an array (@obj false) or object after its opening
 * bracket at @p. */
static const char *
read_container (Reader *r, const char *p, cJSON *item, bool obj, int depth)
{
  if (depth >= FAST_DEPTH)
    return NULL;
  item->type = obj ? cJSON_Object : cJSON_Array;
  char close = obj ? '}' : ']';
  p = sg_load_skip_ws (p + 1, r->end);
  if (p < r->end && *p == close)
    return p + 1;
  cJSON *last = NULL;
  for (;;) {
    cJSON *c = sg_load_arena_alloc (r->a, sizeof *c);
    memset (c, 0, sizeof *c);
    if (obj) {
      if (p >= r->end || *p != '"' || !(p = read_string (r, p, &c->string)))
        return NULL;
      p = sg_load_skip_ws (p, r->end);
      if (p >= r->end || *p != ':')
        return NULL;
      p = sg_load_skip_ws (p + 1, r->end);
    }
    if (!(p = read_value (r, p, c, depth + 1)))
      return NULL;
    if (last) {
      last->next = c;
      c->prev = last;
    } else {
      item->child = c;
    }
    last = c;
    item->child->prev = last;
    p = sg_load_skip_ws (p, r->end);
    if (p >= r->end)
      return NULL;
    if (*p == close)
      return p + 1;
    if (*p != ',')
      return NULL;
    p = sg_load_skip_ws (p + 1, r->end);
  }
}

static const char *
read_value (Reader *r, const char *p, cJSON *item, int depth)
{
  if (p >= r->end)
    return NULL;
  switch (*p) {
  case '{': return read_container (r, p, item, true, depth);
  case '[': return read_container (r, p, item, false, depth);
  case '"':
    item->type = cJSON_String;
    return read_string (r, p, &item->valuestring);
  case 't':
    if (!sg_load_literal (p, r->end, "true", 4))
      return NULL;
    item->type = cJSON_True;
    item->valueint = 1;
    return p + 4;
  case 'f':
    if (!sg_load_literal (p, r->end, "false", 5))
      return NULL;
    item->type = cJSON_False;
    return p + 5;
  case 'n':
    if (!sg_load_literal (p, r->end, "null", 4))
      return NULL;
    item->type = cJSON_NULL;
    return p + 4;
  default: return read_number (r, p, item);
  }
}

const cJSON *
sg_load_read_node (SgLoadArena *a, const char *p, const char *end, const char **stop)
{
  Reader r = { .a = a, .end = end };
  sg_load_arena_reset (a);
  p = sg_load_skip_ws (p, end);
  if (p >= end || *p != '{')
    return NULL;
  cJSON *root = sg_load_arena_alloc (r.a, sizeof *root);
  memset (root, 0, sizeof *root);
  if (!(p = read_container (&r, p, root, true, 0)))
    return NULL;
  *stop = p;
  return root;
}
