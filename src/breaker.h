/* The circuit breaker of a remote backend: stop calling a dead server for a while. */
#ifndef SLUICE_BREAKER_H
#define SLUICE_BREAKER_H

#include <glib.h>

typedef struct {
    GMutex lock;
    gint open;         /* atomic: 1 while calls are refused                  */
    gint failures;     /* atomic: consecutive failures                       */
    gint64 open_until; /* monotonic µs: when the next trial call may go out  */
    gint64 backoff_us; /* the current pause, doubling up to SLUICE__BREAKER_MAX_US */
    gboolean trial;    /* a trial call is out                                */
    const char *what;  /* for the log: "redis 127.0.0.1:6379"                */
} sluice__breaker;

#define SLUICE__BREAKER_FAILURES 3                           /* failures that open it  */
#define SLUICE__BREAKER_FIRST_US (G_GINT64_CONSTANT(50000))  /* first pause         */
#define SLUICE__BREAKER_MAX_US   (G_GINT64_CONSTANT(500000)) /* longest pause       */

void sluice__breaker_init(sluice__breaker *b, const char *what);
void sluice__breaker_clear(sluice__breaker *b);
/* TRUE when a call may go out now: the breaker is closed, or its pause is over
 * and this caller makes the one trial call (*trial TRUE: pass it to
 * sluice__breaker_failure). */
gboolean sluice__breaker_allow(sluice__breaker *b, gboolean *trial);
/* After a call: success closes the breaker; failures open it after
 * SLUICE__BREAKER_FAILURES in a row, and a failed trial doubles the pause (calls
 * that were out before it opened do not). Each change of state is logged once
 * (domain "sluice"). */
void sluice__breaker_success(sluice__breaker *b);
void sluice__breaker_failure(sluice__breaker *b, gboolean trial, const char *why);
/* Milliseconds until the next trial call (0 when closed). */
gint64 sluice__breaker_retry_ms(sluice__breaker *b);

#endif
