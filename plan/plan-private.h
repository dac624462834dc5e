/* plan-private.h: helpers shared by plan/'s files (not a public contract). */
#pragma once

#include <math.h>

#include "plan.h"

/* Frees what @ins owns and zeroes it. */
void sg_plan_ins_clear (SgPlanIns *ins);
/* FNV-1a 64 of @len bytes; _more goes on from the hash @h of earlier bytes
 * (plan-hash.c). */
#define SG_PLAN_FNV_OFFSET UINT64_C (0xcbf29ce484222325)
uint64_t sg_plan_fnv1a (const char *data, size_t len);
uint64_t sg_plan_fnv1a_more (uint64_t h, const char *data, size_t len);
/* sg_plan_fnv1a_more on this thread, a text of SG_PLAN_FNV_LONG bytes or
 * more as pieces hashed at once (below): the same value, sooner. */
#define SG_PLAN_FNV_LONG 4096
uint64_t sg_plan_fnv1a_long (uint64_t h, const char *data, size_t len);

/* A piece of a text hashed apart from the others (plan-hash.c): pieces
 * 0 .. n-1 in text order give sg_plan_fnv1a_more (h, their bytes). The
 * _pieces_ steps may run on several pieces at once (each writes only its
 * pieces); the _resolve_ steps and the combination go through all of them
 * in order: nibble, resolve_nibble, byte, resolve_byte, run, combine. */
typedef struct {
  const char *data;
  size_t len;
  uint8_t lanes[8]; /* where the low byte of 8 starting states ends */
  uint8_t low;      /* the low nibble, then byte, of the state at the start */
  uint64_t hash;    /* FNV-1a of the piece from the state @low */
} SgHashPiece;
void sg_hash_pieces_nibble (SgHashPiece *pc, int n);
void sg_hash_resolve_nibble (uint64_t h, SgHashPiece *pc, int n);
void sg_hash_pieces_byte (SgHashPiece *pc, int n);
void sg_hash_resolve_byte (uint64_t h, SgHashPiece *pc, int n);
void sg_hash_pieces_run (SgHashPiece *pc, int n);
uint64_t sg_hash_combine (uint64_t h, const SgHashPiece *pc, int n);
/* All the steps above on this thread (tests). */
uint64_t sg_hash_pieces (uint64_t h, SgHashPiece *pc, int n);
/* The canonical text in pieces (plan-text.c): the head, up to the list of
 * buffers (@at: where the hash digits and the graph line lie in it), then
 * items 0 .. sg_plan_text_items()-1, any range of which
 * sg_plan_text_range appends; the head and all items in order are
 * sg_plan_to_json's text with the hash digits all '0'. */
typedef struct {
  size_t hash_at, graph_from, graph_to;
} SgPlanHead;
void sg_plan_text_head (GString *s, const SgPlan *p, SgPlanHead *at);
size_t sg_plan_text_items (const SgPlan *p);
void sg_plan_text_range (GString *s, const SgPlan *p, size_t from, size_t to);
/* FNV-1a of the head @head but its graph line: where the items' hash
 * starts. */
uint64_t sg_plan_text_hash (const GString *head, const SgPlanHead *at);
/* Sets p->hash to @hash and @hex to its 16 digits. */
void sg_plan_text_set_hash (SgPlan *p, uint64_t hash, char hex[17]);
/* The op kind whose stable short name (sg_op_name) is @s. */
bool sg_plan_op_from_name (const char *s, SgOpKind *out);
/* The rules of sg_plan_validate (plan-validate.c), for its form on
 * several threads (plan-parallel.c): the groups'; buffer @b's own;
 * value @v's own (every buffer's index in range); the input and output
 * lists; collective instruction @i's own (its operands, counts, pairs). */
bool sg_plan_check_groups (const SgPlan *plan, GError **error);
bool sg_plan_check_buffer (const SgPlan *plan, int32_t b, GError **error);
bool sg_plan_check_value (const SgPlan *plan, int32_t v, GError **error);
bool sg_plan_check_io_lists (const SgPlan *plan, GError **error);
bool sg_plan_check_collective (const SgPlan *plan, int32_t i, GError **error);
/* An instruction's rules (plan-validate.c) read what the ones before it
 * did as the first instruction, per buffer, that writes it (-1: an
 * input's) and that frees it, per event the first that records it, per
 * instruction (a collective) the first that waits on it; G_MAXINT: none.
 * A rule of instruction i asks only whether such a first is before i, so
 * the one pass's state when it reaches i and the whole plan's (noted by
 * several threads at once: plan-parallel.c) answer alike wherever the
 * instructions before i keep the rules. */
typedef struct {
  gint *first_write, *first_free; /* per buffer */
  gint *first_record;             /* per event */
  gint *first_wait;               /* per instruction */
} SgPlanFirsts;
/* Sizes @f for @plan, all G_MAXINT; false (and nothing to clear) when
 * plan->n_events is out of range, the first rule of the instructions. */
bool sg_plan_firsts_init (SgPlanFirsts *f, const SgPlan *plan, GError **error);
void sg_plan_firsts_clear (SgPlanFirsts *f);
/* Notes in @f that value @v, if an input, has its buffer written before
 * the step, from any thread; once @v keeps its own rules. */
void sg_plan_firsts_note_value (SgPlanFirsts *f, const SgPlan *plan, int32_t v);
/* Which of an instruction's rules to check: its own (every index in range,
 * kinds, streams, lifetimes around each use) or those against what the
 * instructions before it did (@f: a read after a write, no use after the
 * FREE, each event recorded once and before its waits, each collective
 * waited once and its operands alive until then, each buffer freed once);
 * the latter alone only where the former hold for every instruction. */
typedef enum {
  SG_PLAN_RULES_OWN = 1,
  SG_PLAN_RULES_STATE = 2,
  SG_PLAN_RULES_ALL = SG_PLAN_RULES_OWN | SG_PLAN_RULES_STATE,
} SgPlanRules;
/* Instructions @from .. @to-1 in order, each against @rules in the one
 * pass's order; false at the first that breaks one, with @error. With
 * SG_PLAN_RULES_OWN, what each does is noted in @f (from any thread) as
 * its rules pass; with SG_PLAN_RULES_STATE alone (@f: the whole plan's),
 * each collective must also be waited on. Every value and buffer keeps
 * its own rules, or is being checked beside (then false without @error
 * where an index read through it is out of range). */
bool sg_plan_check_ins (const SgPlan *plan, int32_t from, int32_t to, SgPlanFirsts *f,
                        SgPlanRules rules, GError **error);
/* sg_plan_validate_with's verdict before it asks sg_plan_validate for the
 * error (plan-parallel.c; tests): true iff sg_plan_validate is, on a
 * runner of several threads (false on one). */
bool sg_plan_validate_stages (const SgPlan *plan, const SgPlanRunner *runner);
/* The memory rule (plan-memory.c): buffers whose lifetimes overlap share
 * no byte; requires the buffers' own rules. */
bool sg_plan_check_memory (const SgPlan *plan, GError **error);
/* Its verdict on @runner's threads (no error: sg_plan_check_memory names
 * it); requires the same. */
bool sg_plan_check_memory_with (const SgPlan *plan, const SgPlanRunner *runner);
/* The race rules of sg_plan_validate (plan-races.c); requires the others. */
bool sg_plan_check_races (const SgPlan *plan, GError **error);
/* Bytes from a value's offset to one past its last element; UINT64_MAX
 * when that overflows (a hostile shape or stride). */
uint64_t sg_plan_value_extent (const SgPlanValue *v);
