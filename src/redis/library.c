/* SPDX-License-Identifier: MIT */
/* sluice's Redis 7 Function library on a server: asked for once per node, loaded
 * when missing or older, never replaced by an older or another build (its
 * functions carry the build's hash, so two builds never call each other's), and
 * kept by the server: in its RDB and AOF, and on its replicas, so that a restarted
 * server or a promoted replica decides with no load at all. */
#include "redis/library.h"

#include <string.h>

#include "lua_scripts.h"

int sluice__redis_library_command(sluice__redis_library_step step, const char **argv)
{
    if (step == SLUICE__LIBRARY_ASK) {
        argv[0] = "FCALL_RO";
        argv[1] = "sluice_version";
        argv[2] = "0";
        return 3;
    }
    argv[0] = "FUNCTION";
    argv[1] = "LOAD";
    if (step == SLUICE__LIBRARY_REPLACE) {
        argv[2] = "REPLACE";
        argv[3] = sluice__lua_library;
        return 4;
    }
    argv[2] = sluice__lua_library;
    return 3;
}

static sluice__redis_library_step done(sluice__redis_library *library, sluice__redis_library l)
{
    *library = l;
    return SLUICE__LIBRARY_DONE;
}

sluice__redis_library_step sluice__redis_library_next(sluice__redis_library_step step,
                                                      const redisReply *reply, guint asked,
                                                      sluice__redis_library *library)
{
    gboolean error = reply->type == REDIS_REPLY_ERROR;
    if (step != SLUICE__LIBRARY_ASK) {
        if (!error)
            return done(library, SLUICE__LIBRARY_FUNCTIONS);
        if (strstr(reply->str, "already exists") && asked < 2)
            return SLUICE__LIBRARY_ASK; /* loaded meanwhile by another process */
        return done(library, SLUICE__LIBRARY_SCRIPTS);
    }
    if (error)
        return strstr(reply->str, "Function not found") && asked < 2
                   ? SLUICE__LIBRARY_LOAD
                   : done(library, SLUICE__LIBRARY_SCRIPTS);
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[1]->type != REDIS_REPLY_STRING)
        return done(library, SLUICE__LIBRARY_SCRIPTS); /* not sluice's */
    if (strcmp(reply->element[1]->str, sluice__lua_library_hash) == 0)
        return done(library, SLUICE__LIBRARY_FUNCTIONS);
    if (reply->element[0]->integer < sluice__lua_library_version)
        return SLUICE__LIBRARY_REPLACE;
    return done(library, SLUICE__LIBRARY_SCRIPTS); /* newer, or another build */
}

sluice__redis_library sluice__redis_library_settle(sluice__redis_send_func send, gpointer data,
                                                   const char *what)
{
    sluice__redis_library library = SLUICE__LIBRARY_UNKNOWN;
    sluice__redis_library_step step = SLUICE__LIBRARY_ASK;
    guint asked = 0;
    while (step != SLUICE__LIBRARY_DONE) {
        const char *argv[4];
        int argc = sluice__redis_library_command(step, argv);
        asked += step == SLUICE__LIBRARY_ASK;
        redisReply *reply = send(data, argc, argv);
        if (!reply)
            return SLUICE__LIBRARY_UNKNOWN;
        step = sluice__redis_library_next(step, reply, asked, &library);
        if (library == SLUICE__LIBRARY_SCRIPTS)
            g_debug("%s: sluice's scripts run by EVALSHA, not as Functions: %s", what,
                    reply->type == REDIS_REPLY_ERROR ? reply->str
                                                     : "the server has another sluice library");
        freeReplyObject(reply);
    }
    return library;
}
