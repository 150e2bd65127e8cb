/* SPDX-License-Identifier: MIT */
/* A PIE program for check_lint_program, linked with --gc-sections against an archive
 * (archive.c; unused.c stays out): `sluice lint --program` reads its decorated names
 * back. The suite asserts the lines of these macros: move them and update it. */
#include <sluice/sluice.h>

int export_report(int id); /* archive.c */

static int refuse(const char *user)
{
    return user == NULL;
}

RATE_LIMITED_FUNCTION(int, login_form, (const char *user), (user), "login", refuse, NULL)
{
    return user != NULL;
}

static int login_api(const char *user)
{
    RATE_LIMITED_KEY("login", user, return 0);
    return 1;
}

#define HEALTH_NAME                                                                                \
    "health"                                                                                       \
    "z"
static const char dynamic_name[] = "dynamic";

static int healthz(void)
{
    RATE_LIMITED(HEALTH_NAME, return 0);
    RATE_LIMITED(dynamic_name, return 0);
    return 1;
}

int main(void)
{
    return login_form("a") + login_api("a") + healthz() + export_report(1) == 4 ? 0 : 1;
}
