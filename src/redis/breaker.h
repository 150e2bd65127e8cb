/* SPDX-License-Identifier: MIT */
/* The circuit breaker of a remote backend: stop calling a dead server for a while. */
#ifndef SLUICE_BREAKER_H
#define SLUICE_BREAKER_H

#include <glib.h>

typedef struct {
    GMutex lock;       /* changes of state; never taken by a refused call      */
    gint open;         /* atomic: 1 while calls are refused                    */
    gint failures;     /* atomic, changed under lock: consecutive failures     */
    gint64 open_until; /* atomic: monotonic µs when the next trial may go out  */
    gint64 backoff_us; /* under lock: the pause, doubling up to ..._MAX_US     */
    gint trial;        /* atomic: a trial call is out                          */
    const char *what;  /* for the log: "redis 127.0.0.1:6379"                  */
    const char *last;  /* atomic: the last failure, without `what`; interned   */
    GHashTable *seen;  /* under lock: the interned failures (a few distinct)   */
} sluice__breaker;

#define SLUICE__BREAKER_FAILURES 3                           /* failures that open it  */
#define SLUICE__BREAKER_FIRST_US (G_GINT64_CONSTANT(50000))  /* first pause         */
#define SLUICE__BREAKER_MAX_US   (G_GINT64_CONSTANT(500000)) /* longest pause       */

void sluice__breaker_init(sluice__breaker *b, const char *what);
void sluice__breaker_clear(sluice__breaker *b);
/* TRUE when a call may go out now: the breaker is closed, or its pause is over
 * and this caller makes the one trial call (*trial TRUE: pass it to
 * sluice__breaker_failure). Takes no lock. */
gboolean sluice__breaker_allow(sluice__breaker *b, gboolean *trial);
/* After a call: success closes the breaker; failures open it after
 * SLUICE__BREAKER_FAILURES in a row, and a failed trial doubles the pause (calls
 * that were out before it opened do not). Each change of state is logged once
 * (domain "sluice"), outside the lock. */
void sluice__breaker_success(sluice__breaker *b);
void sluice__breaker_failure(sluice__breaker *b, gboolean trial, const char *why);
/* Sets *error (SLUICE_ERROR_BACKEND) for a call the breaker did not let out:
 * "redis HOST:PORT: failing (LAST FAILURE); next try in N ms". Takes no lock. */
void sluice__breaker_refuse(sluice__breaker *b, GError **error);
/* TRUE while the breaker is open (calls refused; a trial may be out). Takes no lock. */
gboolean sluice__breaker_is_open(sluice__breaker *b);

#endif
