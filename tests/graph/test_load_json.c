/* test_load_json.c: the loader's node reader (graph/load-json.c) against
 * cJSON: for what it reads, the same tree (types, strings, numbers to the
 * bit, valueint, keys and their order) and the same end; what it declines
 * is left to cJSON. Hand-picked texts, then random ones. And the encoding
 * check (load-scan.c) against g_utf8_validate(), and the string scan at
 * every offset. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "load-private.h"

static void
assert_same_tree (const cJSON *a, const cJSON *b)
{
  for (; a || b; a = a->next, b = b->next) {
    ck_assert_ptr_nonnull (a);
    ck_assert_ptr_nonnull (b);
    ck_assert_int_eq (a->type, b->type);
    ck_assert ((a->string == NULL) == (b->string == NULL));
    if (a->string)
      ck_assert_str_eq (a->string, b->string);
    ck_assert ((a->valuestring == NULL) == (b->valuestring == NULL));
    if (a->valuestring)
      ck_assert_str_eq (a->valuestring, b->valuestring);
    ck_assert_int_eq (a->valueint, b->valueint);
    ck_assert (memcmp (&a->valuedouble, &b->valuedouble, sizeof (double)) == 0);
    ck_assert ((a->child == NULL) == (b->child == NULL));
    if (a->child) {
      /* cJSON keeps the last child in the first child's prev */
      const cJSON *la = a->child, *lb = b->child;
      while (la->next)
        la = la->next;
      while (lb->next)
        lb = lb->next;
      ck_assert_ptr_eq (a->child->prev, la);
      ck_assert_ptr_eq (b->child->prev, lb);
      assert_same_tree (a->child, b->child);
    }
  }
}

/* Reads @text both ways. Returns whether the reader took it; when it did,
 * cJSON took it too, with the same tree and end. */
static bool
compare (SgLoadArena *arena, const char *text, size_t len)
{
  const char *stop = NULL, *cstop = NULL;
  const cJSON *fast = sg_load_read_node (arena, text, text + len, &stop);
  cJSON *slow = cJSON_ParseWithLengthOpts (text, len, &cstop, false);
  if (fast) {
    ck_assert_msg (slow != NULL, "read but cJSON refuses: %.*s", (int)len, text);
    ck_assert_msg (stop == cstop, "ends differ: %.*s", (int)len, text);
    assert_same_tree (fast, slow);
  }
  cJSON_Delete (slow);
  return fast != NULL;
}

START_TEST (reader_gives_cjsons_tree_for_every_kind_of_value)
{
  static const char *const texts[] = {
    "{}",
    " {\"a\": 1}",
    "{\"name\": \"n\", \"op\": \"call_function\", \"args\": [], \"kwargs\": {}}",
    "{\"n\": [0, -0, 1, -1, 7, 1e3, 1E+3, 1e-3, -2.5, 0.1, 3.0, 123456789012345,"
    " 1234567890123456, 12345678901234567890, 9007199254740993, -9223372036854775808,"
    " 2147483647, 2147483648, -2147483648, -2147483649, 1e300, 4.9e-324, 1e-400]}",
    "{\"s\": [\"\", \"plain\", \"\\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t\", \"\\u0041\\u00e9\\u4e2d\","
    " \"\\uD83D\\uDE00\", \"\\ud83d\\ude00x\", \"caf\xc3\xa9\", \"tab\tin\"]}",
    "{\"a\": 1, \"a\": 2, \"\": 3, \"\\u0062\": 4}",
    "{\"t\": true, \"f\": false, \"z\": null, \"nest\": [[[]], {\"k\": [{}]}]}",
    "{\"x\": 1}  trailing text is not the reader's business",
    "{\"long\": \"" "0123456789012345678901234567890123456789012345678901234567890123456789" "\"}",
  };
  g_autoptr (SgLoadArena) arena = sg_load_arena_new ();
  for (size_t i = 0; i < G_N_ELEMENTS (texts); i++)
    ck_assert_msg (compare (arena, texts[i], strlen (texts[i])), "declined: %s", texts[i]);
}
END_TEST

START_TEST (reader_declines_what_json_or_the_loader_does_not_take)
{
  /* cJSON takes some of these (leading zeros, "1.", a vertical tab, a BOM,
   * \u0000, long or infinite numbers, bad hex): the loader's cJSON path
   * then gives its value or its error, as before */
  static const char *const texts[] = {
    "[1]", "{\"a\": 01}", "{\"a\": 1.}", "{\"a\": .5}", "{\"a\":\v1}", "\xEF\xBB\xBF{}",
    "{\"a\": \"\\u0000\"}", "{\"a\": 1e999}", "{\"a\": -1e999}", "{\"a\": \"\\u00zz\"}",
    "{\"a\": \"\\uDC00\"}", "{\"a\": \"\\uD800\"}", "{\"a\": \"\\uD800\\u0041\"}",
    "{\"a\": \"\\x\"}",
    "{\"a\": 10000000000000000000000000000000000000000000000000000000000000000}",
    "{\"a\": tru}", "{\"a\": nul}", "{\"a\": +1}", "{\"a\": -}", "{\"a\": 1e}", "{\"a\": [1,]}",
    "{\"a\": 1,}", "{\"a\" 1}", "{a: 1}", "{\"a\": 1", "{\"a\": \"x", "{\"a\": \"x\\",
  };
  g_autoptr (SgLoadArena) arena = sg_load_arena_new ();
  for (size_t i = 0; i < G_N_ELEMENTS (texts); i++)
    ck_assert_msg (!compare (arena, texts[i], strlen (texts[i])), "read: %s", texts[i]);
}
END_TEST

/* Random texts from JSON's tokens and some near misses: whenever the reader
 * takes one, cJSON agrees on the tree and the end. */
START_TEST (reader_agrees_with_cjson_on_random_texts)
{
  static const char *const tokens[] = {
    "{", "}", "[", "]", ",", ":", " ", "\n", "\"a\"", "\"b\"", "\"\\u00e9\"", "\"\\uD83D\\uDE00\"",
    "\"\\n\"", "\"\\u0000\"", "\"\\\"\"", "0", "-0", "12", "1.5", "1e3", "-2E-2", "01", "1.",
    "99999999999999999999", "true", "false", "null", "\t", "\v", "x", "\"",
  };
  g_autoptr (SgLoadArena) arena = sg_load_arena_new ();
  GRand *rand = g_rand_new_with_seed (16);
  GString *s = g_string_new (NULL);
  int read = 0;
  for (int i = 0; i < 200000; i++) {
    g_string_assign (s, "{\"k\":");
    int n = g_rand_int_range (rand, 1, 24);
    for (int t = 0; t < n; t++)
      g_string_append (s, tokens[g_rand_int_range (rand, 0, G_N_ELEMENTS (tokens))]);
    if (g_rand_boolean (rand))
      g_string_append_c (s, '}');
    read += compare (arena, s->str, s->len);
  }
  /* the generator makes valid objects too: the comparison was exercised */
  ck_assert_int_gt (read, 100);
  g_string_free (s, TRUE);
  g_rand_free (rand);
}
END_TEST

/* The encoding check skips ASCII by blocks: it stops at the byte
 * g_utf8_validate() stops at, on random mixes of ASCII, NUL, valid and
 * broken multibyte characters. */
START_TEST (encoding_check_stops_where_g_utf8_validate_does)
{
  static const char *const pieces[] = { "a", "bcdefghij", " ", "\xc3\xa9", "\xe4\xb8\xad",
                                        "\xf0\x9f\x98\x80", "\xc3", "\xa9", "\xed\xa0\x80",
                                        "\xc0\xaf", "\xf4\x90\x80\x80", "\xff" };
  GRand *rand = g_rand_new_with_seed (7);
  GString *s = g_string_new (NULL);
  for (int i = 0; i < 50000; i++) {
    g_string_truncate (s, 0);
    int n = g_rand_int_range (rand, 1, 40);
    for (int t = 0; t < n; t++) {
      int k = g_rand_int_range (rand, 0, G_N_ELEMENTS (pieces) + 1);
      if (k == G_N_ELEMENTS (pieces))
        g_string_append_c (s, '\0');
      else if (k < 3 || g_rand_int_range (rand, 0, 8) == 0)
        g_string_append (s, pieces[k]);
    }
    const char *bad = NULL;
    bool want = g_utf8_validate (s->str, (gssize)s->len, &bad);
    GError *error = NULL;
    bool got = sg_json_check_encoding (s->str, s->len, &error);
    ck_assert_int_eq (got, want);
    if (!want) {
      g_autofree char *at = g_strdup_printf ("byte %zu ", (size_t)(bad - s->str));
      ck_assert_msg (g_str_has_prefix (error->message, at), "%s: %s", at, error->message);
      g_error_free (error);
    }
  }
  g_string_free (s, TRUE);
  g_rand_free (rand);
}
END_TEST

/* The readers' string scan (sixteen bytes, then eight, then one at a time)
 * stops at the first '"' or '\\' wherever it lies, in texts of every
 * length up to a few blocks, and at the end when there is none. */
START_TEST (string_scan_stops_at_the_first_quote_or_backslash)
{
  char text[80];
  for (size_t len = 0; len <= sizeof text; len++)
    for (size_t at = 0; at <= len; at++)
      for (int c = 0; c < 2; c++) {
        memset (text, 'x', sizeof text);
        if (at < len)
          text[at] = c ? '\\' : '"';
        if (at + 3 < len) /* a later one never wins */
          text[at + 3] = c ? '"' : '\\';
        for (size_t from = 0; from <= at; from += 5)
          ck_assert_ptr_eq (sg_load_quote_or_backslash (text + from, text + len), text + at);
      }
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("load-json");
  TCase *tc = tcase_create ("load-json");
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, reader_gives_cjsons_tree_for_every_kind_of_value);
  tcase_add_test (tc, reader_declines_what_json_or_the_loader_does_not_take);
  tcase_add_test (tc, reader_agrees_with_cjson_on_random_texts);
  tcase_add_test (tc, encoding_check_stops_where_g_utf8_validate_does);
  tcase_add_test (tc, string_scan_stops_at_the_first_quote_or_backslash);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return run_suite (suite ());
}
