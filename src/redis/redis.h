/* SPDX-License-Identifier: MIT */
/* The redis backend: the algorithms of lua/ run in Redis, shared by every process. */
#ifndef SLUICE_REDIS_H
#define SLUICE_REDIS_H

#include "backend.h"
#include "config.h"

/* A backend for config's redis URL, key_prefix and timeout. It connects at once
 * from the calling thread: a refused password or ACL user fails (SLUICE_ERROR_AUTH)
 * and so does a URL that cannot be parsed; a server that does not answer does not
 * (the breaker and on_error take over until it does, and that is logged). */
sluice__backend *sluice__backend_redis_new(const sluice__config *config, GError **error);

#endif
