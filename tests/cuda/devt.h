/* devt.h: host helpers of the CUDA kernel tests (devt.c). */
#pragma once

#include <check.h>

#include "cuda-private.h"

typedef struct {
  SgCuTensor t;
  size_t bytes;
  double *ref; /* logical values (as stored) in row-major order */
} DevT;

/* bf16 <-> float, round to nearest even. */
uint16_t f2bf (float f);
float bf2f (uint16_t h);
/* xorshift in [-1, 1), a fixed sequence. */
float frand (void);
/* A dense row-major tensor of random values in [-1, 1) (or [lo, lo+2)),
 * its values (as stored) in ->ref. */
DevT dev_rand (SgDtype dt, int nd, const int64_t *shape, float lo);
DevT dev_empty (SgDtype dt, int nd, const int64_t *shape);
/* Reads @d (dense) back as doubles (g_free them). */
double *dev_read (const DevT *d);
void dev_free (DevT *d);
/* ||got - want|| <= tol * ||want|| (2-norms). */
void assert_rel_l2 (const double *got, const double *want, int64_t n, double tol);
/* |got - want| <= atol + rtol * |want|, element by element. */
void assert_close (const double *got, const double *want, int64_t n, double rtol, double atol);
/* Frees @n device tensors / host arrays. */
void dev_free_n (DevT *const *ds, int n);
void free_n (double *const *ps, int n);
/* A test program's main: 77 (skip) without a GPU, else runs @s without
 * forking; 0 when every test passed. */
int devt_main (Suite *s);
