/* SPDX-License-Identifier: MIT */
/* sluice's Redis 7 Function library on a server: whether it is there, of which
 * version, and loading it. */
#ifndef SLUICE_REDIS_LIBRARY_H
#define SLUICE_REDIS_LIBRARY_H

#include <glib.h>
#include <hiredis/hiredis.h>

/* How a node runs sluice's scripts (sluice__redis_node.library). */
typedef enum {
    SLUICE__LIBRARY_UNKNOWN,   /* not asked yet: EVALSHA meanwhile            */
    SLUICE__LIBRARY_FUNCTIONS, /* FCALL: this build's library is loaded there */
    SLUICE__LIBRARY_SCRIPTS    /* EVALSHA: no Functions (Redis 6.2), or a library
                                * sluice must not replace (a newer sluice's,
                                * another build of this version, not sluice's) */
} sluice__redis_library;

/* What a node is asked, and what follows each answer:
 *   ASK   FCALL_RO sluice_version 0 -> {version, hash}: this build's hash: FUNCTIONS;
 *         an older version: REPLACE; a newer one, or another build of this one:
 *         SCRIPTS. No such function: LOAD. FCALL_RO unknown (6.2), or refused (ACL):
 *         SCRIPTS.
 *   LOAD  FUNCTION LOAD (REPLACE) LIBRARY -> FUNCTIONS; "already exists" (another
 *         process loaded it meanwhile): ASK again, once; other refusals: SCRIPTS. */
typedef enum {
    SLUICE__LIBRARY_ASK,
    SLUICE__LIBRARY_LOAD,
    SLUICE__LIBRARY_REPLACE,
    SLUICE__LIBRARY_DONE /* the node's library is settled */
} sluice__redis_library_step;

/* The command of step (ASK, LOAD or REPLACE) into argv (4 entries); its argc. */
int sluice__redis_library_command(sluice__redis_library_step step, const char **argv);

/* The step after step's reply (asked: how many asks so far, 1 or 2); with DONE,
 * *library is what the node does from now on. */
sluice__redis_library_step sluice__redis_library_next(sluice__redis_library_step step,
                                                      const redisReply *reply, guint asked,
                                                      sluice__redis_library *library);

/* Runs the steps through send (one command, its reply or NULL when the server did
 * not answer) and returns what the node does from now on; UNKNOWN when it did not
 * answer. what names the server in the message said when it will not use Functions. */
typedef redisReply *(*sluice__redis_send_func)(gpointer data, int argc, const char **argv);
sluice__redis_library sluice__redis_library_settle(sluice__redis_send_func send, gpointer data,
                                                   const char *what);

#endif
