/* plan-hash.c: the plan's FNV-1a 64 hash, in one pass or by pieces hashed
 * at once (plan-private.h).
 *
 * Mirrors: FNV-1a (Fowler, Noll, Vo) as published; the pieces' combination
 * is this file's own (below), checked against the one pass in
 * tests/codegen/test_plan.c at every split.
 * Requires: nothing. Invalidates: nothing.
 *
 * FNV-1a is a chain, h <- (h ^ byte) * P mod 2^64 with P = 0x100000001b3:
 * each byte waits for the multiply before it (4 or so cycles a byte,
 * whatever the threads). Pieces can still be hashed at once because the
 * state's low byte is a machine of its own: the xor touches only the low
 * byte, and a product's low byte depends only on its factors' low bytes.
 * So a piece of n bytes maps a state h with low byte l to
 *   F(h) = (h - l) * P^n + F(l)
 * (each step adds to h the same difference as to l; multiplying by P
 * carries it along): knowing the low byte l at the piece's start, the
 * piece is hashed from l alone, and the pieces combine in order with one
 * multiply each. What stays a chain is l's: a permutation of 256 values
 * per piece. It is a T-function (bit k of the result depends on bits 0..k
 * of l only, and on bit k only through an xor: x ^ b and x * 0xb3 both
 * are), so it is found in two steps of 8 lanes each, all pieces at once:
 *   1. lanes l = 0..7 through the piece: the low nibble it gives any start
 *      (bit 3 of the start only flips bit 3 of the result);
 *   2. once the nibble at every piece's start is known (the pieces in
 *      order, one lookup each), lanes nibble + 16 h for h = 0..7: the byte
 *      it gives any start (bit 7 likewise only flips bit 7);
 *   3. once the low byte at every piece's start is known, FNV-1a of the
 *      piece from that byte; then the combination above.
 * A lane is a 16-bit element of a vector (GCC/clang vector extensions:
 * SSE2's pmullw on x86-64); its upper byte is never read. Four pieces
 * (or eight) go through each loop together, so their chains overlap in
 * the processor.
 * Every step is exact integer arithmetic: the result is the one pass's.
 * On one thread too, a long text hashed as eight such pieces
 * (sg_plan_fnv1a_long) takes about a quarter fewer cycles than the one
 * chain: eight chains of lanes, then four of the state, overlap where one
 * waits for each multiply.
 */
#include "plan-private.h"

#include <string.h>

#define FNV_PRIME UINT64_C (0x100000001b3)

uint64_t
sg_plan_fnv1a (const char *data, size_t len)
{
  return sg_plan_fnv1a_more (SG_PLAN_FNV_OFFSET, data, len);
}

uint64_t
sg_plan_fnv1a_more (uint64_t h, const char *data, size_t len)
{
  /* a word per load, its bytes in text order (the same hash, fewer
   * instructions: the writer hashes every byte of the plan) */
  size_t i = 0;
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
  for (; len - i >= 8; i += 8) {
    uint64_t w;
    memcpy (&w, data + i, sizeof w);
    for (int b = 0; b < 8; b++)
      h = (h ^ (w >> (8 * b) & 0xFF)) * FNV_PRIME;
  }
#endif
  for (; i < len; i++) {
    h ^= (unsigned char)data[i];
    h *= FNV_PRIME;
  }
  return h;
}

/* --- pieces ------------------------------------------------------------------ */

typedef uint16_t Lanes __attribute__ ((vector_size (16)));

/* Each byte as 8 lanes: one load instead of a broadcast per byte. */
#define L1(x) { x, x, x, x, x, x, x, x }
#define L4(x) L1 (x), L1 (x + 1), L1 (x + 2), L1 (x + 3)
#define L16(x) L4 (x), L4 (x + 4), L4 (x + 8), L4 (x + 12)
#define L64(x) L16 (x), L16 (x + 16), L16 (x + 32), L16 (x + 48)
static const Lanes byte_lanes[256] = { L64 (0), L64 (64), L64 (128), L64 (192) };
#undef L1
#undef L4
#undef L16
#undef L64

/* Bytes @from .. @to-1 of @k pieces (a constant where it is inlined:
 * their chains overlap in the processor) through their lanes @v. */
static inline __attribute__ ((always_inline)) void
lanes_together (Lanes *v, const unsigned char *const *a, size_t from, size_t to, int k)
{
  const Lanes mul = { 0xb3, 0xb3, 0xb3, 0xb3, 0xb3, 0xb3, 0xb3, 0xb3 };
  for (size_t i = from; i < to; i++)
    for (int j = 0; j < k; j++)
      v[j] = (v[j] ^ byte_lanes[a[j][i]]) * mul;
}

/* The low-byte machine of up to LANE_PIECES pieces at once: lane j of
 * piece k starts at @start[k] + @step * j; lanes[j] gets where it ends.
 * Eight (or four) chains together hide the multiply's latency. */
#define LANE_PIECES 8
static void
run_lanes (SgHashPiece *pc, int n, const unsigned *start, unsigned step)
{
  Lanes v[LANE_PIECES];
  const unsigned char *a[LANE_PIECES];
  size_t common = SIZE_MAX;
  for (int k = 0; k < n; k++) {
    for (unsigned j = 0; j < 8; j++)
      v[k][j] = (uint16_t)(start[k] + step * j);
    a[k] = (const unsigned char *)pc[k].data;
    common = MIN (common, pc[k].len);
  }
  size_t i = 0;
  if (n == 8) {
    lanes_together (v, a, 0, common, 8);
    i = common;
  } else if (n >= 4) {
    lanes_together (v, a, 0, common, 4);
    i = common;
  }
  for (int k = 0; k < n; k++) {
    /* the rest of each piece: from the common length, or all of those
     * beyond the first four */
    const size_t from = n == 8 || k < 4 ? i : 0;
    lanes_together (&v[k], &a[k], from, pc[k].len, 1);
    for (int j = 0; j < 8; j++)
      pc[k].lanes[j] = (uint8_t)v[k][j];
  }
}

void
sg_hash_pieces_nibble (SgHashPiece *pc, int n)
{
  const unsigned zero[LANE_PIECES] = { 0 };
  for (int k = 0; k < n; k += LANE_PIECES)
    run_lanes (pc + k, MIN (LANE_PIECES, n - k), zero, 1);
}

void
sg_hash_resolve_nibble (uint64_t h, SgHashPiece *pc, int n)
{
  unsigned l = (unsigned)(h & 0xF);
  for (int k = 0; k < n; k++) {
    pc[k].low = (uint8_t)l;
    l = (pc[k].lanes[l & 7] ^ (l & 8)) & 0xF;
  }
}

void
sg_hash_pieces_byte (SgHashPiece *pc, int n)
{
  for (int k = 0; k < n; k += LANE_PIECES) {
    unsigned start[LANE_PIECES];
    for (int j = 0; j < MIN (LANE_PIECES, n - k); j++)
      start[j] = pc[k + j].low & 0xF;
    run_lanes (pc + k, MIN (LANE_PIECES, n - k), start, 16);
  }
}

void
sg_hash_resolve_byte (uint64_t h, SgHashPiece *pc, int n)
{
  unsigned l = (unsigned)(h & 0xFF);
  for (int k = 0; k < n; k++) {
    g_assert ((l & 0xF) == pc[k].low);
    pc[k].low = (uint8_t)l;
    unsigned hi = l >> 4;
    l = hi < 8 ? pc[k].lanes[hi] : pc[k].lanes[hi - 8] ^ 0x80u;
  }
}

/* FNV-1a of 4 pieces at once, each from its low byte, to the shortest's
 * length (a multiple of 8): returns it. */
static size_t
run_four (SgHashPiece *pc, uint64_t *h)
{
  size_t common = MIN (MIN (pc[0].len, pc[1].len), MIN (pc[2].len, pc[3].len));
  common -= common % 8;
  uint64_t h0 = pc[0].low, h1 = pc[1].low, h2 = pc[2].low, h3 = pc[3].low;
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
  for (size_t i = 0; i < common; i += 8) {
    uint64_t w0, w1, w2, w3;
    memcpy (&w0, pc[0].data + i, 8);
    memcpy (&w1, pc[1].data + i, 8);
    memcpy (&w2, pc[2].data + i, 8);
    memcpy (&w3, pc[3].data + i, 8);
    for (int b = 0; b < 8; b++) {
      h0 = (h0 ^ (w0 & 0xFF)) * FNV_PRIME, w0 >>= 8;
      h1 = (h1 ^ (w1 & 0xFF)) * FNV_PRIME, w1 >>= 8;
      h2 = (h2 ^ (w2 & 0xFF)) * FNV_PRIME, w2 >>= 8;
      h3 = (h3 ^ (w3 & 0xFF)) * FNV_PRIME, w3 >>= 8;
    }
  }
#else
  common = 0;
#endif
  h[0] = h0, h[1] = h1, h[2] = h2, h[3] = h3;
  return common;
}

void
sg_hash_pieces_run (SgHashPiece *pc, int n)
{
  int k = 0;
  for (; n - k >= 4; k += 4) {
    uint64_t h[4];
    size_t done = run_four (pc + k, h);
    for (int j = 0; j < 4; j++)
      pc[k + j].hash = sg_plan_fnv1a_more (h[j], pc[k + j].data + done, pc[k + j].len - done);
  }
  for (; k < n; k++)
    pc[k].hash = sg_plan_fnv1a_more (pc[k].low, pc[k].data, pc[k].len);
}

uint64_t
sg_hash_combine (uint64_t h, const SgHashPiece *pc, int n)
{
  for (int k = 0; k < n; k++) {
    g_assert ((h & 0xFF) == pc[k].low);
    uint64_t pn = 1, b = FNV_PRIME; /* P^len */
    for (size_t e = pc[k].len; e; e >>= 1, b *= b)
      if (e & 1)
        pn *= b;
    h = (h - pc[k].low) * pn + pc[k].hash;
  }
  return h;
}

uint64_t
sg_hash_pieces (uint64_t h, SgHashPiece *pc, int n)
{
  sg_hash_pieces_nibble (pc, n);
  sg_hash_resolve_nibble (h, pc, n);
  sg_hash_pieces_byte (pc, n);
  sg_hash_resolve_byte (h, pc, n);
  sg_hash_pieces_run (pc, n);
  return sg_hash_combine (h, pc, n);
}

uint64_t
sg_plan_fnv1a_long (uint64_t h, const char *data, size_t len)
{
  /* below this, the pieces' fixed work (resolving, combining) costs more
   * than their overlap saves */
  if (len < SG_PLAN_FNV_LONG)
    return sg_plan_fnv1a_more (h, data, len);
  SgHashPiece pc[LANE_PIECES];
  for (int k = 0; k < LANE_PIECES; k++) {
    size_t x = len * (size_t)k / LANE_PIECES, y = len * (size_t)(k + 1) / LANE_PIECES;
    pc[k] = (SgHashPiece){ .data = data + x, .len = y - x };
  }
  return sg_hash_pieces (h, pc, LANE_PIECES);
}
