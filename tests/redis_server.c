/* A real redis-server for the tests: started on a free loopback port, stopped after. */
#include "redis_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <glib/gstdio.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Ends the process (a forked test, or the suite itself) with a message: works in
 * and outside a check test, and a suite that needs Redis fails without it. */
#define need(cond, ...)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            g_printerr("redis_server: " __VA_ARGS__);                                              \
            g_printerr("\n");                                                                      \
            exit(EXIT_FAILURE);                                                                    \
        }                                                                                          \
    } while (0)

/* A port nobody listens on now (the kernel picks it). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    need(fd >= 0, "socket: %s", g_strerror(errno));
    need(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s", g_strerror(errno));
    need(getsockname(fd, (struct sockaddr *)&a, &len) == 0, "getsockname: %s", g_strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static gboolean exited(GPid pid)
{
    int status;
    return waitpid(pid, &status, WNOHANG) == pid;
}

redisContext *test_redis_connect(const test_redis *redis, const char *password)
{
    struct timeval tv = {1, 0};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", redis->port, tv);
    if (ctx && !ctx->err && password) {
        redisReply *r = redisCommand(ctx, "AUTH %s", password);
        if (r)
            freeReplyObject(r);
    }
    return ctx;
}

/* In the server's process before exec: it dies with the process that started it,
 * so a test that fails half-way leaves no server behind. */
static void die_with_parent(gpointer data)
{
    (void)data;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Spawns the server on redis->port; TRUE once it answers PING within 5 s. */
static gboolean spawn(test_redis *redis)
{
    g_autofree char *port = g_strdup_printf("%d", redis->port);
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)redis->program);
    if (redis->config) /* the file comes first, the options after it */
        g_ptr_array_add(argv, redis->config);
    const char *base[] = {"--port",     port,           "--bind",      "127.0.0.1", "--save",
                          "",           "--appendonly", "no",          "--dir",     redis->dir,
                          "--loglevel", "warning",      "--daemonize", "no"};
    for (gsize i = 0; i < G_N_ELEMENTS(base); i++)
        g_ptr_array_add(argv, (gpointer)base[i]);
    for (gsize i = 0; redis->extra && redis->extra[i]; i++)
        g_ptr_array_add(argv, redis->extra[i]);
    g_ptr_array_add(argv, NULL);

    GError *error = NULL;
    gboolean ok =
        g_spawn_async(redis->dir, (char **)argv->pdata, NULL,
                      G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                      die_with_parent, NULL, &redis->pid, &error);
    g_ptr_array_free(argv, TRUE);
    need(ok, "%s cannot be started (install %s): %s", redis->program, redis->program,
         error ? error->message : "?");
    for (int i = 0; i < 500; i++) {
        if (exited(redis->pid))
            return FALSE; /* the port was taken meanwhile: try another */
        redisContext *ctx = test_redis_connect(redis, NULL);
        if (ctx && !ctx->err) {
            redisReply *r = redisCommand(ctx, "PING");
            gboolean up = r != NULL; /* PONG, or NOAUTH when it wants a password */
            if (r)
                freeReplyObject(r);
            redisFree(ctx);
            if (up)
                return TRUE;
        } else if (ctx) {
            redisFree(ctx);
        }
        g_usleep(10000);
    }
    kill(redis->pid, SIGKILL);
    waitpid(redis->pid, NULL, 0);
    return FALSE;
}

test_redis *test_redis_start(const char *const *extra)
{
    return test_redis_start_program("redis-server", NULL, extra);
}

test_redis *test_redis_start_program(const char *program, const char *contents,
                                     const char *const *extra)
{
    test_redis *redis = g_new0(test_redis, 1);
    redis->dir = g_dir_make_tmp("sluice-redis-XXXXXX", NULL);
    redis->extra = g_strdupv((char **)extra);
    redis->program = program;
    need(redis->dir != NULL, "cannot make a temporary directory");
    if (contents) {
        redis->config = g_build_filename(redis->dir, "redis.conf", NULL);
        need(g_file_set_contents(redis->config, contents, -1, NULL), "cannot write %s",
             redis->config);
    }
    for (int attempt = 0; attempt < 5; attempt++) {
        redis->port = free_port();
        if (spawn(redis))
            return redis;
    }
    need(FALSE, "%s did not start on a free loopback port (5 attempts)", program);
    return NULL;
}

static void end(test_redis *redis)
{
    if (redis->pid == 0)
        return;                /* killed already, and reaped */
    kill(redis->pid, SIGCONT); /* in case it was paused */
    kill(redis->pid, SIGTERM);
    gboolean gone = FALSE; /* reaped: its pid is no longer ours to signal */
    for (int i = 0; i < 500 && !(gone = exited(redis->pid)); i++)
        g_usleep(10000);
    if (!gone) {
        kill(redis->pid, SIGKILL);
        waitpid(redis->pid, NULL, 0);
    }
    g_spawn_close_pid(redis->pid);
    redis->pid = 0;
}

void test_redis_stop(test_redis *redis)
{
    if (!redis)
        return;
    end(redis);
    g_autoptr(GDir) dir = g_dir_open(redis->dir, 0, NULL);
    const char *name;
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(redis->dir, name, NULL);
        g_unlink(path);
    }
    g_rmdir(redis->dir);
    g_free(redis->dir);
    g_free(redis->config);
    g_strfreev(redis->extra);
    g_free(redis);
}

void test_redis_pause(test_redis *redis)
{
    if (redis->pid > 0) /* never kill(0, ...): that is the whole process group */
        kill(redis->pid, SIGSTOP);
}

void test_redis_resume(test_redis *redis)
{
    if (redis->pid > 0)
        kill(redis->pid, SIGCONT);
}

void test_redis_kill(test_redis *redis)
{
    if (redis->pid == 0)
        return;
    kill(redis->pid, SIGKILL);
    waitpid(redis->pid, NULL, 0);
    g_spawn_close_pid(redis->pid);
    redis->pid = 0;
}

void test_redis_restart(test_redis *redis)
{
    end(redis);
    for (int i = 0; i < 100; i++) {
        if (spawn(redis))
            return;
        g_usleep(50000); /* the port may linger a moment */
    }
    need(FALSE, "%s did not restart on port %d", redis->program, redis->port);
}

char *test_redis_url(const test_redis *redis)
{
    return g_strdup_printf("redis://127.0.0.1:%d/0", redis->port);
}

redisReply *test_redis_command(const test_redis *redis, const char *format, ...)
{
    redisContext *ctx = test_redis_connect(redis, NULL);
    need(ctx && !ctx->err, "cannot connect to the test redis on port %d", redis->port);
    va_list ap;
    va_start(ap, format);
    redisReply *r = redisvCommand(ctx, format, ap);
    va_end(ap);
    redisFree(ctx);
    return r;
}

int test_redis_free_port(void)
{
    return free_port();
}
