/* test_graphgen_cli.c: the graphgen executable: byte-identical output for
 * identical arguments (in-process and through the CLI, in any option order),
 * exit status 2 and no file for every kind of bad argument, exit 1 and no
 * file when the output cannot be written, --help naming every option.
 */
#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "graphgen.h"

#ifndef GRAPHGEN_EXE
#error "GRAPHGEN_EXE must name the graphgen executable"
#endif

static char *
generate (const GgConfig *cfg, size_t *len)
{
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream (&buf, &n);
  ck_assert_ptr_nonnull (f);
  GError *error = NULL;
  if (!gg_write (cfg, f, NULL, &error))
    ck_abort_msg ("gg_write: %s", error->message);
  fclose (f);
  *len = n;
  return buf;
}

static int
run_graphgen (const char *const *args, char **out, char **err)
{
  GPtrArray *argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (gpointer)GRAPHGEN_EXE);
  for (const char *const *a = args; *a; a++)
    g_ptr_array_add (argv, (gpointer)*a);
  g_ptr_array_add (argv, NULL);
  int status = -1;
  GError *error = NULL;
  bool ok = g_spawn_sync (NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, out, err,
                          &status, &error);
  if (!ok)
    ck_abort_msg ("spawn %s: %s", GRAPHGEN_EXE, error->message);
  g_ptr_array_free (argv, true);
  ck_assert (WIFEXITED (status));
  return WEXITSTATUS (status);
}

START_TEST (identical_arguments_give_identical_bytes)
{
  GgConfig c;
  gg_config_init (&c);
  c.layers = 3, c.hidden = 128, c.ffn = 352, c.heads = 4, c.seq = 64, c.dp = 2, c.tp = 2;
  size_t n1, n2;
  char *a = generate (&c, &n1), *b = generate (&c, &n2);
  ck_assert_uint_eq (n1, n2);
  ck_assert (memcmp (a, b, n1) == 0);

  char *dir = g_dir_make_tmp ("graphgen-XXXXXX", NULL);
  char *f1 = g_build_filename (dir, "a.json", NULL), *f2 = g_build_filename (dir, "b.json", NULL);
  const char *args1[] = { "--layers", "3", "--hidden", "128", "--ffn", "352", "--heads", "4",
                          "--seq", "64", "--dp", "2", "--tp", "2", "-o", f1, NULL };
  const char *args2[] = { "--seq", "64", "--tp", "2", "--dp", "2", "--layers", "3", "--hidden",
                          "128", "--heads", "4", "--ffn", "352", "--output", f2, NULL };
  ck_assert_int_eq (run_graphgen (args1, NULL, NULL), 0);
  ck_assert_int_eq (run_graphgen (args2, NULL, NULL), 0);
  char *t1, *t2;
  gsize l1, l2;
  ck_assert (g_file_get_contents (f1, &t1, &l1, NULL));
  ck_assert (g_file_get_contents (f2, &t2, &l2, NULL));
  ck_assert_uint_eq (l1, n1);
  ck_assert_uint_eq (l2, n1);
  ck_assert (memcmp (t1, a, n1) == 0 && memcmp (t2, a, n1) == 0);
  g_unlink (f1);
  g_unlink (f2);
  g_rmdir (dir);
  g_free (t1), g_free (t2), g_free (f1), g_free (f2), g_free (dir);
  free (a);
  free (b);
}
END_TEST

START_TEST (bad_arguments_exit_2_and_write_nothing)
{
  char *dir = g_dir_make_tmp ("graphgen-XXXXXX", NULL);
  char *f = g_build_filename (dir, "out.json", NULL);
  const char *bad[][12] = {
    { "--hidden", "300", "--heads", "7" },           /* H not divisible by heads */
    { "--tp", "3" },                                 /* heads 4 not divisible by tp */
    { "--tp", "2", "--heads", "2", "--ffn", "687" }, /* F not divisible by tp */
    { "--tp", "2", "--seq", "255" },                 /* S not divisible by tp under sp */
    { "--dp", "3" },                                 /* shards not divisible by dp */
    { "--dp", "2", "--tp", "2", "--world", "6" },    /* world not a multiple of the mesh */
    { "--rank", "2" },                               /* rank outside world 2 */
    { "--layers", "0" },
    { "--layers", "two" },
    { "--seq", "12x" },
    { "--dtype", "int8" },
    { "--tp-mode", "ring" },
    { "--cluster-gpu", "V100" },
    { "--bogus" },
    { "--layers" },
    { "stray" },
    { "--layers", "4", "--target-nodes", "1000" },
    { "--target-nodes", "-5" },
    { "--target-nodes", "0" },
    { "--tp", "2", "--tp-mode", "allreduce", "--sp-norm-allreduce" },
    { "--sp-norm-allreduce" },                       /* tp 1 */
  };
  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++) {
    const char *args[16];
    size_t k = 0;
    for (; bad[i][k]; k++)
      args[k] = bad[i][k];
    args[k++] = "-o";
    args[k++] = f;
    args[k] = NULL;
    char *err = NULL;
    int rc = run_graphgen (args, NULL, &err);
    ck_assert_msg (rc == 2, "case %zu (%s ...): exit %d", i, bad[i][0], rc);
    ck_assert_msg (g_str_has_prefix (err, "graphgen: "), "case %zu: stderr '%s'", i, err);
    ck_assert (!g_file_test (f, G_FILE_TEST_EXISTS));
    g_free (err);
  }
  /* a valid run next to it still works, and leaves no temporary behind */
  const char *good[] = { "--layers", "1", "-o", f, NULL };
  ck_assert_int_eq (run_graphgen (good, NULL, NULL), 0);
  ck_assert (g_file_test (f, G_FILE_TEST_IS_REGULAR));
  GDir *d = g_dir_open (dir, 0, NULL);
  int entries = 0;
  while (g_dir_read_name (d))
    entries++;
  g_dir_close (d);
  ck_assert_int_eq (entries, 1);
  g_unlink (f);
  g_rmdir (dir);
  g_free (f);
  g_free (dir);
}
END_TEST

START_TEST (unwritable_output_fails_without_a_partial_file)
{
  const char *args[] = { "-o", "/nonexistent-dir-for-graphgen/x.json", NULL };
  char *err = NULL;
  ck_assert_int_eq (run_graphgen (args, NULL, &err), 1);
  ck_assert (strstr (err, "graphgen: ") != NULL);
  g_free (err);
}
END_TEST

START_TEST (help_describes_every_option)
{
  const char *args[] = { "--help", NULL };
  char *out = NULL;
  ck_assert_int_eq (run_graphgen (args, &out, NULL), 0);
  const char *opts[] = { "--layers", "--hidden", "--ffn", "--heads", "--seq", "--dtype",
                         "--target-nodes", "--dp", "--tp", "--tp-mode", "--sp-norm-allreduce",
                         "--world", "--rank", "--cluster-gpu", "--output" };
  for (size_t i = 0; i < G_N_ELEMENTS (opts); i++)
    ck_assert_msg (strstr (out, opts[i]) != NULL, "%s missing from --help", opts[i]);
  g_free (out);
}
END_TEST

static Suite *
graphgen_cli_suite (void)
{
  Suite *s = suite_create ("graphgen-cli");
  TCase *tc = tcase_create ("cli");
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, identical_arguments_give_identical_bytes);
  tcase_add_test (tc, bad_arguments_exit_2_and_write_nothing);
  tcase_add_test (tc, unwritable_output_fails_without_a_partial_file);
  tcase_add_test (tc, help_describes_every_option);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (graphgen_cli_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
