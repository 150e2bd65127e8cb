/* A real redis-server for the tests: started on a free loopback port, stopped after. */
#ifndef SLUICE_TEST_REDIS_SERVER_H
#define SLUICE_TEST_REDIS_SERVER_H

#include <glib.h>
#include <hiredis/hiredis.h>

typedef struct {
    GPid pid;
    int port;
    char *dir;           /* its working directory (removed when stopped) */
    GStrv extra;         /* extra arguments, e.g. --requirepass */
    const char *program; /* "redis-server", or "redis-sentinel" (a static string) */
    char *config;        /* its configuration file in dir, or NULL */
} test_redis;

/* Starts redis-server on 127.0.0.1 on a free port with `extra` arguments (NULL-ended,
 * may be NULL) and waits until it answers PING. Aborts the test (never skips) when
 * it cannot: a suite that needs Redis fails without it. */
test_redis *test_redis_start(const char *const *extra);
/* The same for program ("redis-sentinel": a static string), whose configuration
 * file, given contents, is written into its directory first (redis-sentinel
 * rewrites it as it learns). */
test_redis *test_redis_start_program(const char *program, const char *contents,
                                     const char *const *extra);
/* Stops it (SIGTERM, then SIGKILL after 5 s) and removes its directory. */
void test_redis_stop(test_redis *redis);
/* SIGSTOP / SIGCONT: a server that hangs, and comes back. */
void test_redis_pause(test_redis *redis);
void test_redis_resume(test_redis *redis);
/* SIGKILL, as a crash: gone at once, its connections reset. Only the process that
 * started it can (it reaps it); test_redis_restart brings it back. */
void test_redis_kill(test_redis *redis);
/* Kills it (unless killed already) and starts it again on the same port. Only the process that
 * started it can (it must reap it): start a server inside the test for this. */
void test_redis_restart(test_redis *redis);

/* A loopback port nobody listens on now (the kernel picks it), e.g. for a cluster bus. */
int test_redis_free_port(void);

/* redis://127.0.0.1:PORT/0 (g_free it). */
char *test_redis_url(const test_redis *redis);
/* A new connection to it (redisFree it), authenticated with password if not NULL. */
redisContext *test_redis_connect(const test_redis *redis, const char *password);
/* Runs one command (printf-style, as redisCommand) and returns the reply. */
redisReply *test_redis_command(const test_redis *redis, const char *format, ...);

#endif
