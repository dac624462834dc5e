/* plan-private.h: helpers shared by plan/'s files (not a public contract). */
#pragma once

#include <math.h>

#include "plan.h"

/* Frees what @ins owns and zeroes it. */
void sg_plan_ins_clear (SgPlanIns *ins);
/* FNV-1a 64 of @len bytes; _more goes on from the hash @h of earlier bytes. */
uint64_t sg_plan_fnv1a (const char *data, size_t len);
uint64_t sg_plan_fnv1a_more (uint64_t h, const char *data, size_t len);
/* The op kind whose stable short name (sg_op_name) is @s. */
bool sg_plan_op_from_name (const char *s, SgOpKind *out);
/* The race rules of sg_plan_validate (plan-races.c); requires the others. */
bool sg_plan_check_races (const SgPlan *plan, GError **error);
/* Bytes from a value's offset to one past its last element; UINT64_MAX
 * when that overflows (a hostile shape or stride). */
uint64_t sg_plan_value_extent (const SgPlanValue *v);
