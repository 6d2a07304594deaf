/*
 * npb_rand.c - the NPB linear congruential generator (RNR-94-007 sec. 2.2,
 * "randlc"/"vranlc"): x_{k+1} = a x_k mod 2^46 with a = 5^13, values
 * r_k = 2^-46 x_k.  Integer arithmetic (see npb.h) gives exactly NPB's sequence.
 */
#include "npb.h"

void npb_vranlc(long n, uint64_t *x, uint64_t a, double *y)
{
    uint64_t s = *x;
    for (long i = 0; i < n; i++) {
        s = npb_lcg_mul(a, s);
        y[i] = (double)s * NPB_R46;
    }
    *x = s;
}

uint64_t npb_pow46(uint64_t a, uint64_t n)
{
    uint64_t result = 1, base = a & NPB_MASK46;
    while (n) {
        if (n & 1)
            result = npb_lcg_mul(base, result);
        base = npb_lcg_mul(base, base);
        n >>= 1;
    }
    return result;
}
