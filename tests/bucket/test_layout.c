/* test_layout.c: the bucket layout arithmetic, exhaustively.
 *
 * A tiny reference runs k fake ranks over float arrays: the unbucketed
 * collectives member by member, and the bucketed path (bucket_pack with the
 * semantics of docs/ops.md -> one collective over the flat buffer ->
 * bucket_unpack with the library's offsets). Both must give every rank the
 * same values, for all_gather, reduce_scatter and all_reduce, group sizes
 * 2, 3, 4, 8 and mixed member sizes.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "bucket.h"

static const int32_t group_sizes[] = { 2, 3, 4, 8 };

/* Member shapes in elements (per rank input numel is this x k for
 * reduce_scatter, so every size works for every k). */
static const uint64_t mixes[][6] = {
  { 1, 0 },               /* one tiny member */
  { 5, 7, 0 },            /* two odd sizes */
  { 1024, 1, 33, 0 },     /* large, tiny, odd */
  { 3, 3, 3, 3, 3, 0 },   /* equal sizes */
  { 64, 9, 128, 2, 17, 0 },
};

static int32_t
mix_len (const uint64_t *m)
{
  int32_t n = 0;
  while (n < 6 && m[n])
    n++;
  return n;
}

/* Exact small integers: float sums over 8 ranks stay exact. */
static float
value (int32_t rank, int32_t member, uint64_t e)
{
  return (float)((uint64_t)rank * 131u + (uint64_t)member * 17u + e * 7u) - 500.0f;
}

/* bucket_pack per docs/ops.md, written from the text, not from layout.c. */
static float *
ref_pack (float **inputs, const uint64_t *numel, int32_t n, int32_t k, bool interleave,
          uint64_t *total)
{
  uint64_t t = 0;
  for (int32_t i = 0; i < n; i++)
    t += numel[i];
  float *flat = g_new0 (float, t + 1);
  uint64_t w = 0;
  if (!interleave) {
    for (int32_t i = 0; i < n; i++)
      for (uint64_t e = 0; e < numel[i]; e++)
        flat[w++] = inputs[i][e];
  } else {
    for (int32_t r = 0; r < k; r++)
      for (int32_t i = 0; i < n; i++) {
        uint64_t c = numel[i] / (uint64_t)k;
        for (uint64_t j = 0; j < c; j++)
          flat[w++] = inputs[i][(uint64_t)r * c + j];
      }
  }
  ck_assert_uint_eq (w, t);
  *total = t;
  return flat;
}

/* bucket_unpack per docs/ops.md. */
static float *
ref_unpack (const float *flat, uint64_t flat_numel, int32_t k, uint64_t offset, uint64_t numel)
{
  float *out = g_new0 (float, numel * (uint64_t)k + 1);
  for (int32_t r = 0; r < k; r++)
    for (uint64_t j = 0; j < numel; j++)
      out[(uint64_t)r * numel + j] = flat[(uint64_t)r * (flat_numel / (uint64_t)k) + offset + j];
  return out;
}

/* The collectives over k ranks: in[r] has n elements on rank r. */
static float **
ref_all_gather (float **in, uint64_t n, int32_t k)
{
  float **out = g_new0 (float *, (size_t)k);
  for (int32_t r = 0; r < k; r++) {
    out[r] = g_new0 (float, n * (uint64_t)k + 1);
    for (int32_t q = 0; q < k; q++)
      memcpy (out[r] + (uint64_t)q * n, in[q], n * sizeof (float));
  }
  return out;
}

static float **
ref_reduce_scatter (float **in, uint64_t n, int32_t k)
{
  uint64_t c = n / (uint64_t)k;
  float **out = g_new0 (float *, (size_t)k);
  for (int32_t r = 0; r < k; r++) {
    out[r] = g_new0 (float, c + 1);
    for (int32_t q = 0; q < k; q++)
      for (uint64_t j = 0; j < c; j++)
        out[r][j] += in[q][(uint64_t)r * c + j];
  }
  return out;
}

static float **
ref_all_reduce (float **in, uint64_t n, int32_t k)
{
  float **out = g_new0 (float *, (size_t)k);
  for (int32_t r = 0; r < k; r++) {
    out[r] = g_new0 (float, n + 1);
    for (int32_t q = 0; q < k; q++)
      for (uint64_t j = 0; j < n; j++)
        out[r][j] += in[q][j];
  }
  return out;
}

static float **
ref_collective (SgOpKind kind, float **in, uint64_t n, int32_t k)
{
  switch (kind) {
  case SG_OP_ALL_GATHER: return ref_all_gather (in, n, k);
  case SG_OP_REDUCE_SCATTER: return ref_reduce_scatter (in, n, k);
  default: return ref_all_reduce (in, n, k);
  }
}

static uint64_t
ref_out_numel (SgOpKind kind, uint64_t n, int32_t k)
{
  return kind == SG_OP_ALL_GATHER ? n * (uint64_t)k
         : kind == SG_OP_REDUCE_SCATTER ? n / (uint64_t)k : n;
}

static void
free_ranks (float **v, int32_t k)
{
  for (int32_t r = 0; r < k; r++)
    g_free (v[r]);
  g_free (v);
}

/* Bucketed == unbucketed on every rank, for one kind, k and size mix. */
static void
check_equivalence (SgOpKind kind, int32_t k, const uint64_t *mix)
{
  int32_t n = mix_len (mix);
  uint64_t in_numel[6], offsets[6], out_numel[6];
  for (int32_t i = 0; i < n; i++)
    in_numel[i] = kind == SG_OP_REDUCE_SCATTER ? mix[i] * (uint64_t)k : mix[i];
  SgBucketLayout l;
  GError *error = NULL;
  ck_assert_msg (sg_bucket_layout (kind, k, in_numel, n, offsets, out_numel, &l, &error),
                 "%s", error ? error->message : "");

  /* inputs[r][i] */
  float ***inputs = g_new0 (float **, (size_t)k);
  for (int32_t r = 0; r < k; r++) {
    inputs[r] = g_new0 (float *, (size_t)n);
    for (int32_t i = 0; i < n; i++) {
      inputs[r][i] = g_new0 (float, in_numel[i] + 1);
      for (uint64_t e = 0; e < in_numel[i]; e++)
        inputs[r][i][e] = value (r, i, e);
    }
  }
  /* bucketed: pack on every rank, one collective, unpack */
  float **packed = g_new0 (float *, (size_t)k);
  uint64_t total = 0;
  for (int32_t r = 0; r < k; r++)
    packed[r] = ref_pack (inputs[r], in_numel, n, k, l.interleave, &total);
  ck_assert_uint_eq (total, l.pack_numel);
  float **flat_out = ref_collective (kind, packed, total, k);
  ck_assert_uint_eq (ref_out_numel (kind, total, k), l.out_numel);

  for (int32_t i = 0; i < n; i++) {
    float **member_in = g_new0 (float *, (size_t)k);
    for (int32_t r = 0; r < k; r++)
      member_in[r] = inputs[r][i];
    float **expect = ref_collective (kind, member_in, in_numel[i], k);
    uint64_t expect_n = ref_out_numel (kind, in_numel[i], k);
    ck_assert_uint_eq (out_numel[i] * (uint64_t)l.unpack_k, expect_n);
    for (int32_t r = 0; r < k; r++) {
      float *got = ref_unpack (flat_out[r], l.out_numel, l.unpack_k, offsets[i], out_numel[i]);
      for (uint64_t e = 0; e < expect_n; e++) {
        ck_assert_msg (got[e] == expect[r][e],
                       "%s k=%d member %d rank %d element %" G_GUINT64_FORMAT ": %g != %g",
                       sg_op_name (kind), k, i, r, e, (double)got[e], (double)expect[r][e]);
        /* the library's index function names the same element */
        uint64_t at = sg_bucket_unpack_index (&l, offsets, out_numel, i, e);
        ck_assert (flat_out[r][at] == expect[r][e]);
      }
      g_free (got);
    }
    free_ranks (expect, k);
    g_free (member_in);
  }
  for (int32_t r = 0; r < k; r++) {
    for (int32_t i = 0; i < n; i++)
      g_free (inputs[r][i]);
    g_free (inputs[r]);
  }
  g_free (inputs);
  free_ranks (packed, k);
  free_ranks (flat_out, k);
}

static void
check_all_mixes (SgOpKind kind)
{
  for (size_t g = 0; g < G_N_ELEMENTS (group_sizes); g++)
    for (size_t m = 0; m < G_N_ELEMENTS (mixes); m++)
      check_equivalence (kind, group_sizes[g], mixes[m]);
}

START_TEST (all_gather_bucket_matches_unbucketed_on_every_rank)
{
  check_all_mixes (SG_OP_ALL_GATHER);
}
END_TEST

START_TEST (reduce_scatter_bucket_matches_unbucketed_on_every_rank)
{
  check_all_mixes (SG_OP_REDUCE_SCATTER);
}
END_TEST

START_TEST (all_reduce_bucket_matches_unbucketed_on_every_rank)
{
  check_all_mixes (SG_OP_ALL_REDUCE);
}
END_TEST

START_TEST (all_gather_offsets_are_prefix_sums_of_shards)
{
  const uint64_t in[] = { 10, 1, 7, 256 };
  uint64_t off[4], out[4];
  SgBucketLayout l;
  for (size_t g = 0; g < G_N_ELEMENTS (group_sizes); g++) {
    int32_t k = group_sizes[g];
    ck_assert (sg_bucket_layout (SG_OP_ALL_GATHER, k, in, 4, off, out, &l, NULL));
    ck_assert_uint_eq (off[0], 0);
    ck_assert_uint_eq (off[1], 10);
    ck_assert_uint_eq (off[2], 11);
    ck_assert_uint_eq (off[3], 18);
    for (int i = 0; i < 4; i++)
      ck_assert_uint_eq (out[i], in[i]);
    ck_assert (!l.interleave);
    ck_assert_int_eq (l.unpack_k, k);
    ck_assert_uint_eq (l.pack_numel, 274);
    ck_assert_uint_eq (l.out_numel, 274u * (uint64_t)k);
    /* member 2's slice of rank r starts at r * 274 + 11: a stride of 274 */
    ck_assert_uint_eq (sg_bucket_unpack_index (&l, off, out, 2, 0), 11);
    ck_assert_uint_eq (sg_bucket_unpack_index (&l, off, out, 2, 7), 274 + 11);
    ck_assert_uint_eq (sg_bucket_unpack_index (&l, off, out, 2, 7u * (uint64_t)(k - 1) + 6),
                       274u * (uint64_t)(k - 1) + 17);
  }
}
END_TEST

START_TEST (reduce_scatter_offsets_are_prefix_sums_of_outputs)
{
  for (size_t g = 0; g < G_N_ELEMENTS (group_sizes); g++) {
    uint64_t k = (uint64_t)group_sizes[g];
    const uint64_t in[] = { 5 * k, 1 * k, 12 * k };
    uint64_t off[3], out[3];
    SgBucketLayout l;
    ck_assert (sg_bucket_layout (SG_OP_REDUCE_SCATTER, (int32_t)k, in, 3, off, out, &l, NULL));
    ck_assert_uint_eq (off[0], 0);
    ck_assert_uint_eq (off[1], 5);
    ck_assert_uint_eq (off[2], 6);
    ck_assert_uint_eq (out[0], 5);
    ck_assert_uint_eq (out[2], 12);
    ck_assert (l.interleave);
    ck_assert_int_eq (l.unpack_k, 1);
    ck_assert_uint_eq (l.pack_numel, 18 * k);
    ck_assert_uint_eq (l.out_numel, 18);
    /* chunk r of member 1 (one element) sits at r * 18 + 5 in the pack */
    for (uint64_t r = 0; r < k; r++)
      ck_assert_uint_eq (sg_bucket_pack_index (&l, off, in, 1, r), r * 18 + 5);
    /* element j of chunk r of member 2 */
    ck_assert_uint_eq (sg_bucket_pack_index (&l, off, in, 2, 12 * (k - 1) + 3),
                       (k - 1) * 18 + 6 + 3);
  }
}
END_TEST

START_TEST (pack_index_is_a_bijection_onto_the_buffer)
{
  const SgOpKind kinds[] = { SG_OP_ALL_GATHER, SG_OP_REDUCE_SCATTER, SG_OP_ALL_REDUCE };
  for (size_t kk = 0; kk < G_N_ELEMENTS (kinds); kk++)
    for (size_t g = 0; g < G_N_ELEMENTS (group_sizes); g++)
      for (size_t m = 0; m < G_N_ELEMENTS (mixes); m++) {
        int32_t k = group_sizes[g], n = mix_len (mixes[m]);
        uint64_t in[6], off[6], out[6];
        for (int32_t i = 0; i < n; i++)
          in[i] = mixes[m][i] * (uint64_t)k;
        SgBucketLayout l;
        ck_assert (sg_bucket_layout (kinds[kk], k, in, n, off, out, &l, NULL));
        g_autofree uint8_t *hit = g_new0 (uint8_t, l.pack_numel);
        for (int32_t i = 0; i < n; i++)
          for (uint64_t e = 0; e < in[i]; e++) {
            uint64_t at = sg_bucket_pack_index (&l, off, in, i, e);
            ck_assert_uint_lt (at, l.pack_numel);
            ck_assert_int_eq (hit[at], 0);
            hit[at] = 1;
          }
      }
}
END_TEST

START_TEST (reduce_scatter_input_not_divisible_by_group_is_refused)
{
  const uint64_t in[] = { 8, 7 };
  uint64_t off[2], out[2];
  SgBucketLayout l;
  GError *error = NULL;
  ck_assert (!sg_bucket_layout (SG_OP_REDUCE_SCATTER, 4, in, 2, off, out, &l, &error));
  ck_assert (g_error_matches (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_LAYOUT));
  ck_assert_ptr_nonnull (strstr (error->message, "member 1"));
  g_error_free (error);
}
END_TEST

START_TEST (all_to_all_cannot_be_bucketed)
{
  const uint64_t in[] = { 8, 8 };
  uint64_t off[2], out[2];
  SgBucketLayout l;
  GError *error = NULL;
  ck_assert (!sg_bucket_layout (SG_OP_ALL_TO_ALL, 2, in, 2, off, out, &l, &error));
  ck_assert (g_error_matches (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_LAYOUT));
  g_error_free (error);
}
END_TEST

static Suite *
layout_suite (void)
{
  Suite *s = suite_create ("bucket_layout");
  TCase *tc = tcase_create ("layout");
  tcase_add_test (tc, all_gather_bucket_matches_unbucketed_on_every_rank);
  tcase_add_test (tc, reduce_scatter_bucket_matches_unbucketed_on_every_rank);
  tcase_add_test (tc, all_reduce_bucket_matches_unbucketed_on_every_rank);
  tcase_add_test (tc, all_gather_offsets_are_prefix_sums_of_shards);
  tcase_add_test (tc, reduce_scatter_offsets_are_prefix_sums_of_outputs);
  tcase_add_test (tc, pack_index_is_a_bijection_onto_the_buffer);
  tcase_add_test (tc, reduce_scatter_input_not_divisible_by_group_is_refused);
  tcase_add_test (tc, all_to_all_cannot_be_bucketed);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (layout_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
