/* SPDX-License-Identifier: MIT */
/** @file
 * Deciding without blocking: sluice_acquire in the GIO asynchronous style. */
#ifndef SLUICE_ASYNC_H
#define SLUICE_ASYNC_H

#include <gio/gio.h>
#include <sluice/acquire.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/** Starts one decision, as sluice_acquire (the rule's `wait` included), and calls
 * callback from the thread-default main context of the calling thread once it is
 * made; that context must be iterated. Nothing blocks: on Redis the script runs
 * on one connection per server and main context, whose name lookup, connect, TLS handshake
 * and commands are steps taken when its socket is ready, on memory
 * the decision completes from an idle, and a waiting call waits on a timeout
 * source (a concurrency waiter also wakes when permits are given back). The call
 * never completes before sluice_acquire_async returns. Cancelling `cancellable`
 * completes it at once with G_IO_ERROR_CANCELLED (concurrency permits that
 * arrive after that are given back). key is copied. */
SLUICE_API void sluice_acquire_async(const char *name, const char *key, gint64 permits,
                                     GCancellable *cancellable, GAsyncReadyCallback callback,
                                     gpointer user_data);

/** The end of sluice_acquire_async: SLUICE_ALLOWED, SLUICE_DENIED or SLUICE_FAILED
 * with *error (bad arguments, the backend failed: out->allowed is then the
 * on_error verdict, or G_IO_ERROR_CANCELLED: out->allowed FALSE), and *out as
 * sluice_acquire fills it (out may be NULL). Concurrency permits taken must be
 * given back with sluice_release. */
SLUICE_API int sluice_acquire_finish(GAsyncResult *result, sluice_decision *out, GError **error);

G_END_DECLS

#endif
