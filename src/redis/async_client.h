/* The redis backend without blocking: one hiredis asynchronous connection per main context. */
#ifndef SLUICE_BACKEND_REDIS_ASYNC_H
#define SLUICE_BACKEND_REDIS_ASYNC_H

#include "redis/internal.h"

sluice__redis_async *sluice__redis_async_new(void);
/* Fails what is still in flight and closes every connection. No main context may
 * be dispatching one of them meanwhile. */
void sluice__redis_async_free(sluice__redis_async *async);

/* The backend's decide_async: the rule's script on context's connection. */
void sluice__redis_decide_async(sluice__backend *backend, sluice__limiter *limiter,
                                const sluice__rule *rule, const char *key, gint64 permits,
                                gint64 reserve_us, GMainContext *context, sluice__decided_func done,
                                gpointer data);

#endif
