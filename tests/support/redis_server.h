/* SPDX-License-Identifier: MIT */
/* Real redis-servers for the tests and the benchmarks: started on free loopback ports, stopped
 * after, by pid. */
#ifndef SLUICE_TEST_REDIS_SERVER_H
#define SLUICE_TEST_REDIS_SERVER_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "unconst.h"

#define TEST_REDIS_PORTS 4 /* ports[0] (the client port) and up to 3 more */

/* How to start one server; a zeroed struct starts a plain one. Every string may hold
 * "{port}", "{port1}" ... "{port3}" and "{dir}": they become the ports the starter picked
 * and the working directory (a port taken meanwhile makes it pick them all again). */
typedef struct {
    const char *program;     /* NULL: "redis-server"; or "redis-sentinel" (with a config) */
    const char *const *args; /* more redis-server arguments, NULL-ended: {"--maxmemory", "1mb",
                                NULL}, {"--cluster-enabled", "yes", "--cluster-port", "{port1}",
                                NULL}, {"--tls-port", "{port1}", ...} */
    const char *config;      /* lines of a config file written to the working directory and named
                                first on the command line, e.g. "sentinel monitor m 127.0.0.1
                                6379 1\n" for redis-sentinel (which rewrites it) */
    const char *password;    /* --requirepass; the starter's own connections and
                                test_redis_connect(redis, NULL) use it */
    int more_ports;          /* how many more free loopback ports to pick: ports[1 ...] */
    const char *dir;         /* the working directory, made if missing and kept when stopped;
                                NULL: a new temporary one, removed when stopped */
} test_redis_options;

typedef struct {
    GPid pid; /* 0 once stopped or killed */
    int port; /* where it answers plain RESP on 127.0.0.1: ports[0] */
    int ports[TEST_REDIS_PORTS];
    char *program;
    char *dir; /* its working directory */
    char *password;
    GStrv args;   /* its arguments after the starter's own, as given (before the {...}) */
    char *config; /* as given */
    int more_ports;
    gboolean own_dir; /* made by the starter: removed when stopped */
    GPid owner;       /* the process that started it: the only one that stops it */
} test_redis;

/* Starts redis-server (or options->program) on 127.0.0.1, on a free port (and
 * options->more_ports more), in --save "" --appendonly no mode, and waits until it answers as
 * itself (its pid listens on the port: not a server someone else started meanwhile on the same
 * port). NULL and *error when
 * it cannot (the benchmarks say so and exit). The server dies with the thread that
 * started it (PR_SET_PDEATHSIG) and is stopped at exit(): start it from a thread that outlives
 * it (the main thread, or a test's), and nothing is left behind. */
test_redis *test_redis_try_start(const test_redis_options *options, GError **error);
/* The same, for tests: ends the process when it cannot (a suite that needs Redis fails without
 * it, never skips). */
test_redis *test_redis_start_with(const test_redis_options *options);
/* test_redis_start_with with only extra arguments (NULL-ended, may be NULL). */
test_redis *test_redis_start(const char *const *extra);
/* test_redis_start_with with a program ("redis-sentinel"), the contents of its config file
 * (or NULL) and extra arguments. */
test_redis *test_redis_start_program(const char *program, const char *contents,
                                     const char *const *extra);
/* A server with --requirepass password and an ACL user `user` (on, >user_password, every key
 * and command): the AUTH and ACL tests' server. */
test_redis *test_redis_start_secured(const char *password, const char *user,
                                     const char *user_password);
/* Stops it (SIGTERM, then SIGKILL after 5 s), removes its directory if the starter made it, and
 * frees it. NULL is fine. */
void test_redis_stop(test_redis *redis);
/* SIGSTOP / SIGCONT: a server that hangs, and comes back. */
void test_redis_pause(test_redis *redis);
void test_redis_resume(test_redis *redis);
/* SIGKILL, as a crash: gone at once, its connections reset. Only the process that
 * started it can (it reaps it); test_redis_restart brings it back. */
void test_redis_kill(test_redis *redis);
/* Kills it (unless killed already) and starts it again on the same ports with the same
 * options. Only the process that started it can (it must reap it): start a server inside the
 * test for this. */
void test_redis_restart(test_redis *redis);

/* A loopback port nobody listens on now, for a server, a cluster bus or a port that must
 * refuse connections: drawn at random below the kernel's ephemeral range (so that the
 * connections the suites open do not take it as their local port) and checked with bind(). */
int test_redis_free_port(void);

/* Removes a directory and the files in it (a server's, or a test's temporary one). */
void test_remove_dir(const char *path);

/* redis://127.0.0.1:PORT/0 (g_free it). */
char *test_redis_url(const test_redis *redis);
/* A new connection to it (redisFree it; NULL or ctx->err when it cannot), authenticated with
 * password, or with the server's own password when NULL. */
redisContext *test_redis_connect(const test_redis *redis, const char *password);
/* Runs one command (printf-style, as redisCommand) on a new connection, authenticated as
 * test_redis_connect(redis, NULL) is, and returns the reply. */
redisReply *test_redis_command(const test_redis *redis, const char *format, ...);
/* test_redis_command with the arguments in a va_list. */
redisReply *test_redis_vcommand(const test_redis *redis, const char *format, va_list ap);
/* How many times the server has run `command` (lower case, e.g. "del") since it started or
 * since the last CONFIG RESETSTAT, from INFO commandstats; -1 when it does not answer. */
gint64 test_redis_command_calls(const test_redis *redis, const char *command);
/* The script calls (FCALL, EVALSHA and EVAL) the server has run since it started or since
 * the last CONFIG RESETSTAT, from INFO commandstats; -1 when it does not answer. */
gint64 test_redis_script_calls(const test_redis *redis);

#endif
