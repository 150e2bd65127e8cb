/* SPDX-License-Identifier: MIT */
/* A shared library for check_lint_program: names spelt with escapes. */
#include <sluice/sluice.h>

int upload(int n);
int cafe(void);

int upload(int n)
{
    RATE_LIMITED("uplo\141d", return 0);
    return n;
}

int cafe(void)
{
    RATE_LIMITED("caf\u00e9", return 0);
    return 1;
}
