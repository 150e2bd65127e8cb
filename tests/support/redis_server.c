/* SPDX-License-Identifier: MIT */
/* Real redis-servers for the tests and the benchmarks: started on free loopback ports, stopped
 * after, by pid. */
#include "redis_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
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

#define TEST_REDIS_ERROR g_quark_from_static_string("test-redis")

/* ---- free ports --------------------------------------------------------------------- */

/* TRUE when nothing is bound to 127.0.0.1:port (nor lingers there in TIME_WAIT). */
static gboolean port_is_free(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((guint16)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return FALSE;
    gboolean unbound = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return unbound;
}

/* The first port of the kernel's ephemeral range, where connecting sockets take their local
 * ports (32768 unless the machine says otherwise). */
static int ephemeral_low(void)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents("/proc/sys/net/ipv4/ip_local_port_range", &text, NULL, NULL))
        return 32768;
    gint64 low = g_ascii_strtoll(text, NULL, 10);
    return low > 1024 && low <= 65535 ? (int)low : 32768;
}

int test_redis_free_port(void)
{
    /* several suites, of several engineers, pick ports at once: each draws from its own
     * random sequence (a forked test's copy of a shared one would repeat its parent's) */
    g_autoptr(GRand) rand = g_rand_new();
    int low = 20000, high = ephemeral_low();
    for (int i = 0; i < 1000 && high - low >= 1000; i++) {
        int port = g_rand_int_range(rand, low, high);
        if (port_is_free(port))
            return port;
    }
    /* no room below the ephemeral range: the kernel picks one in it */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    need(fd >= 0, "socket: %s", g_strerror(errno));
    need(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s", g_strerror(errno));
    need(getsockname(fd, (struct sockaddr *)&a, &len) == 0, "getsockname: %s", g_strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

/* ---- the servers this process started, stopped at exit ----------------------------------- */

static GMutex live_lock;
static GPtrArray *live; /* test_redis *, started and not yet stopped */

static void forget(test_redis *redis)
{
    g_mutex_lock(&live_lock);
    if (live)
        g_ptr_array_remove_fast(live, redis);
    g_mutex_unlock(&live_lock);
}

void test_remove_dir(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
    const char *name;
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *file = g_build_filename(path, name, NULL);
        g_unlink(file);
    }
    g_rmdir(path);
}

/* At exit() (a test that failed half-way): the servers this process started and did not
 * stop. A forked test inherits its parent's list, and leaves the parent's servers alone. */
static void stop_left_behind(void)
{
    g_mutex_lock(&live_lock);
    for (guint i = 0; live && i < live->len; i++) {
        test_redis *redis = g_ptr_array_index(live, i);
        if (redis->owner != getpid())
            continue;
        if (redis->pid > 0) {
            kill(redis->pid, SIGKILL);
            waitpid(redis->pid, NULL, 0);
            redis->pid = 0;
        }
        if (redis->own_dir)
            test_remove_dir(redis->dir);
    }
    g_mutex_unlock(&live_lock);
}

static void remember(test_redis *redis)
{
    g_mutex_lock(&live_lock);
    if (!live) {
        live = g_ptr_array_new();
        atexit(stop_left_behind);
    }
    g_ptr_array_add(live, redis);
    g_mutex_unlock(&live_lock);
}

/* ---- starting --------------------------------------------------------------------------- */

static gboolean exited(GPid pid)
{
    int status;
    return waitpid(pid, &status, WNOHANG) == pid;
}

redisContext *test_redis_connect(const test_redis *redis, const char *password)
{
    struct timeval tv = {1, 0};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", redis->port, tv);
    if (!password)
        password = redis->password;
    if (ctx && !ctx->err && password) {
        redisReply *r = redisCommand(ctx, "AUTH %s", password);
        if (r)
            freeReplyObject(r);
    }
    return ctx;
}

/* text with {port}, {port1} ... and {dir} replaced (g_free it). */
static char *expand(const char *text, const test_redis *redis)
{
    GString *out = g_string_new(NULL);
    for (const char *p = text; *p;) {
        const char *end = *p == '{' ? strchr(p, '}') : NULL;
        g_autofree char *name = end ? g_strndup(p + 1, (gsize)(end - p - 1)) : NULL;
        int i = -1;
        if (name && strcmp(name, "port") == 0)
            i = 0;
        else if (name && g_str_has_prefix(name, "port") && strlen(name) == 5 && name[4] >= '1' &&
                 name[4] < '0' + TEST_REDIS_PORTS)
            i = name[4] - '0';
        if (i >= 0) {
            g_string_append_printf(out, "%d", redis->ports[i]);
        } else if (name && strcmp(name, "dir") == 0) {
            g_string_append(out, redis->dir);
        } else {
            g_string_append_c(out, *p++);
            continue;
        }
        p = end + 1;
    }
    return g_string_free(out, FALSE);
}

/* In the server's process before exec: it dies with the thread that started it, so a test
 * that fails half-way leaves no server behind (and if that one is gone already, at once). */
static void die_with_parent(gpointer parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != (pid_t)GPOINTER_TO_INT(parent))
        _exit(EXIT_FAILURE);
}

/* The inode of the socket listening on 127.0.0.1:port (/proc/net/tcp), or 0. */
static guint64 listening_inode(int port)
{
    /* in reads of a megabyte: the kernel walks the socket table again for each read */
    int fd = open("/proc/net/tcp", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    g_autoptr(GString) all = g_string_new(NULL);
    gsize chunk = 1 << 20;
    for (;;) {
        gsize had = all->len;
        g_string_set_size(all, had + chunk);
        gssize n = read(fd, all->str + had, chunk);
        g_string_set_size(all, had + (gsize)MAX(n, 0));
        if (n <= 0)
            break;
    }
    close(fd);
    const char *text = all->str;
    g_autofree char *local = g_strdup_printf("0100007F:%04X", port);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (guint i = 1; lines[i]; i++) {
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        char sl[16], addr[64], rem[64], st[8], queues[64], timer[64], retr[16], uid[16], tmo[16];
        guint64 inode;
        if (sscanf(lines[i], "%15s %63s %63s %7s %63s %63s %15s %15s %15s %" G_GUINT64_FORMAT, sl,
                   addr, rem, st, queues, timer, retr, uid, tmo, &inode) == 10 &&
            strcmp(addr, local) == 0 && strcmp(st, "0A") == 0) /* 0A: LISTEN */
            return inode;
    }
    return 0;
}

/* TRUE when pid holds the socket listening on 127.0.0.1:port. */
static gboolean listens_on(GPid pid, int port)
{
    guint64 inode = listening_inode(port);
    g_autofree char *fds = g_strdup_printf("/proc/%d/fd", (int)pid);
    g_autofree char *want = g_strdup_printf("socket:[%" G_GUINT64_FORMAT "]", inode);
    g_autoptr(GDir) dir = inode ? g_dir_open(fds, 0, NULL) : NULL;
    const char *name;
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *fd = g_build_filename(fds, name, NULL);
        g_autofree char *target = g_file_read_link(fd, NULL);
        if (g_strcmp0(target, want) == 0)
            return TRUE;
    }
    return FALSE;
}

/* The password the server was started with: redis->password, or the one its arguments
 * (--requirepass P) or config file (a line requirepass P) give; NULL when none. */
static char *password_given(const test_redis *redis)
{
    if (redis->password)
        return g_strdup(redis->password);
    for (gsize i = 0; redis->args && redis->args[i] && redis->args[i + 1]; i++)
        if (strcmp(redis->args[i], "--requirepass") == 0)
            return g_strdup(redis->args[i + 1]);
    const char *line = redis->config ? strstr(redis->config, "requirepass ") : NULL;
    if (!line || (line != redis->config && line[-1] != '\n'))
        return NULL;
    line += strlen("requirepass ");
    return g_strndup(line, strcspn(line, " \n"));
}

/* TRUE when the server answers on redis->port and is redis->pid: a server someone else
 * started meanwhile on the same port does not count. INFO says which process answers; a
 * server that refuses INFO (NOAUTH to a password it was not told of) is looked for among
 * the sockets listening (/proc/net/tcp: slow with many sockets in TIME_WAIT, so last). */
static gboolean answers_as_itself(const test_redis *redis)
{
    g_autofree char *password = password_given(redis);
    redisContext *ctx = test_redis_connect(redis, password);
    redisReply *r = ctx && !ctx->err ? redisCommand(ctx, "INFO server") : NULL;
    gboolean answers = r != NULL;
    const char *said = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "process_id:") : NULL;
    gboolean told = said != NULL;
    gint64 pid = said ? g_ascii_strtoll(said + strlen("process_id:"), NULL, 10) : 0;
    if (r)
        freeReplyObject(r);
    if (ctx)
        redisFree(ctx);
    if (!answers)
        return FALSE;
    return told ? pid == (gint64)redis->pid : listens_on(redis->pid, redis->port);
}

/* Spawns the server on redis->ports; TRUE once it answers as itself (within 5 s); FALSE when a
 * port was taken (or it did not answer); FALSE and *error when it cannot be run at all. */
static gboolean spawn(test_redis *redis, GError **error)
{
    g_autofree char *port = g_strdup_printf("%d", redis->port);
    g_autofree char *conf = NULL;
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(argv, g_strdup(redis->program));
    if (redis->config) { /* first, as redis-server wants it */
        conf = g_build_filename(redis->dir, "redis.conf", NULL);
        g_ptr_array_add(argv, g_strdup(conf));
    }
    const char *base[] = {"--port",     port,           "--bind",      "127.0.0.1", "--save",
                          "",           "--appendonly", "no",          "--dir",     redis->dir,
                          "--loglevel", "warning",      "--daemonize", "no"};
    for (gsize i = 0; i < G_N_ELEMENTS(base); i++)
        g_ptr_array_add(argv, g_strdup(base[i]));
    if (redis->password) {
        g_ptr_array_add(argv, g_strdup("--requirepass"));
        g_ptr_array_add(argv, g_strdup(redis->password));
    }
    for (gsize i = 0; redis->args && redis->args[i]; i++)
        g_ptr_array_add(argv, expand(redis->args[i], redis));
    g_ptr_array_add(argv, NULL);

    GPid parent = getpid();
    if (!g_spawn_async(redis->dir, (char **)argv->pdata, NULL,
                       G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                       die_with_parent, GINT_TO_POINTER(parent), &redis->pid, error)) {
        redis->pid = 0;
        g_prefix_error(error, "%s cannot be started (install %s): ", redis->program,
                       redis->program);
        return FALSE;
    }
    for (gint64 until = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
         g_get_monotonic_time() < until;) {
        if (exited(redis->pid)) { /* a port was taken meanwhile: try others */
            g_spawn_close_pid(redis->pid);
            redis->pid = 0;
            return FALSE;
        }
        if (answers_as_itself(redis))
            return TRUE;
        g_usleep(10000);
    }
    kill(redis->pid, SIGKILL); /* not up in 5 s, or another server holds the port */
    waitpid(redis->pid, NULL, 0);
    g_spawn_close_pid(redis->pid);
    redis->pid = 0;
    return FALSE;
}

/* Picks redis->ports[0 ... more_ports], all different. */
static void pick_ports(test_redis *redis)
{
    for (int i = 0; i <= redis->more_ports; i++) {
        gboolean again;
        do {
            redis->ports[i] = test_redis_free_port();
            again = FALSE;
            for (int j = 0; j < i; j++)
                again |= redis->ports[j] == redis->ports[i];
        } while (again);
    }
    redis->port = redis->ports[0];
}

static void free_redis(test_redis *redis)
{
    g_free(redis->program);
    g_free(redis->dir);
    g_free(redis->password);
    g_strfreev(redis->args);
    g_free(redis->config);
    g_free(redis);
}

test_redis *test_redis_try_start(const test_redis_options *options, GError **error)
{
    static const test_redis_options plain = {0};
    if (!options)
        options = &plain;
    if (options->more_ports < 0 || options->more_ports >= TEST_REDIS_PORTS) {
        g_set_error(error, TEST_REDIS_ERROR, 1, "more_ports is %d: from 0 to %d",
                    options->more_ports, TEST_REDIS_PORTS - 1);
        return NULL;
    }
    test_redis *redis = g_new0(test_redis, 1);
    redis->owner = getpid();
    redis->program = g_strdup(options->program ? options->program : "redis-server");
    redis->password = g_strdup(options->password);
    redis->args = g_strdupv(test_strv(options->args));
    redis->config = g_strdup(options->config);
    redis->more_ports = options->more_ports;
    redis->own_dir = options->dir == NULL;
    if (options->dir && g_mkdir_with_parents(options->dir, 0700) != 0) {
        g_set_error(error, TEST_REDIS_ERROR, 1, "cannot make %s: %s", options->dir,
                    g_strerror(errno));
        free_redis(redis);
        return NULL;
    }
    redis->dir =
        options->dir ? g_strdup(options->dir) : g_dir_make_tmp("sluice-redis-XXXXXX", error);
    if (!redis->dir) {
        free_redis(redis);
        return NULL;
    }
    for (int attempt = 0; attempt < 5; attempt++) {
        pick_ports(redis);
        if (redis->config) {
            g_autofree char *text = expand(redis->config, redis);
            g_autofree char *conf = g_build_filename(redis->dir, "redis.conf", NULL);
            if (!g_file_set_contents(conf, text, -1, error))
                break;
        }
        if (spawn(redis, error)) {
            remember(redis);
            return redis;
        }
        if (error && *error)
            break;
    }
    if (error && !*error)
        g_set_error(error, TEST_REDIS_ERROR, 1,
                    "%s did not start on a free loopback port (5 attempts)", redis->program);
    if (redis->own_dir)
        test_remove_dir(redis->dir);
    free_redis(redis);
    return NULL;
}

test_redis *test_redis_start_with(const test_redis_options *options)
{
    g_autoptr(GError) error = NULL;
    test_redis *redis = test_redis_try_start(options, &error);
    need(redis, "%s", error->message);
    return redis;
}

test_redis *test_redis_start(const char *const *extra)
{
    test_redis_options options = {.args = extra};
    return test_redis_start_with(&options);
}

test_redis *test_redis_start_program(const char *program, const char *contents,
                                     const char *const *extra)
{
    test_redis_options options = {.program = program, .config = contents, .args = extra};
    return test_redis_start_with(&options);
}

test_redis *test_redis_start_secured(const char *password, const char *user,
                                     const char *user_password)
{
    test_redis_options options = {.password = password};
    test_redis *redis = test_redis_start_with(&options);
    redisReply *r =
        test_redis_command(redis, "ACL SETUSER %s on >%s ~* +@all", user, user_password);
    need(r && r->type == REDIS_REPLY_STATUS, "ACL SETUSER %s: %s", user,
         r && r->type == REDIS_REPLY_ERROR ? r->str : "no status reply");
    freeReplyObject(r);
    return redis;
}

/* ---- stopping, and faults ---------------------------------------------------------------- */

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
    forget(redis);
    end(redis);
    if (redis->own_dir)
        test_remove_dir(redis->dir);
    free_redis(redis);
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
        g_autoptr(GError) error = NULL;
        if (spawn(redis, &error))
            return;
        need(!error, "%s", error->message);
        g_usleep(50000); /* the port may linger a moment */
    }
    need(FALSE, "%s did not restart on port %d", redis->program, redis->port);
}

/* ---- talking to it ---------------------------------------------------------------------- */

char *test_redis_url(const test_redis *redis)
{
    return g_strdup_printf("redis://127.0.0.1:%d/0", redis->port);
}

redisReply *test_redis_vcommand(const test_redis *redis, const char *format, va_list ap)
{
    redisContext *ctx = test_redis_connect(redis, NULL);
    need(ctx && !ctx->err, "cannot connect to the test redis on port %d", redis->port);
    redisReply *r = redisvCommand(ctx, format, ap);
    redisFree(ctx);
    return r;
}

redisReply *test_redis_command(const test_redis *redis, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    redisReply *r = test_redis_vcommand(redis, format, ap);
    va_end(ap);
    return r;
}

gint64 test_redis_command_calls(const test_redis *redis, const char *command)
{
    redisReply *r = test_redis_command(redis, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r)
            freeReplyObject(r);
        return -1;
    }
    g_autofree char *field = g_strdup_printf("\ncmdstat_%s:calls=", command);
    const char *at = strstr(r->str, field);
    gint64 calls = at ? g_ascii_strtoll(at + strlen(field), NULL, 10) : 0;
    freeReplyObject(r);
    return calls;
}

gint64 test_redis_script_calls(const test_redis *redis)
{
    gint64 evalsha = test_redis_command_calls(redis, "evalsha");
    gint64 eval = evalsha < 0 ? -1 : test_redis_command_calls(redis, "eval");
    gint64 fcall = eval < 0 ? -1 : test_redis_command_calls(redis, "fcall");
    return evalsha < 0 || eval < 0 || fcall < 0 ? -1 : evalsha + eval + fcall;
}
