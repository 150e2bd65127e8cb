/* SPDX-License-Identifier: MIT */
/* examples/http_service as its users see it: real processes on free loopback ports,
 * real HTTP (libsoup's client), one real redis-server shared by two instances. */
#include "fixture.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <libsoup/soup.h>

#ifndef SLUICE_HTTP_SERVICE
#error "SLUICE_HTTP_SERVICE: the path of the http_service program"
#endif
#ifndef SLUICE_SOURCE_DIR
#error "SLUICE_SOURCE_DIR: the source tree, for examples/http_service.ini"
#endif

#define START_LIMIT_MS 10000 /* a service prints its port within this  */
#define STOP_LIMIT_MS  5000  /* and stops within this after SIGTERM    */

/* ---- a service process ------------------------------------------------------------- */

typedef struct {
    GPid pid;
    int port;
    int out_fd;     /* its stdout: the "listening on" line */
    char *log_path; /* its stderr                          */
} service;

/* In the child before exec: it dies with the test that started it. */
static void die_with_parent(gpointer data)
{
    (void)data;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static char *read_log(const service *s)
{
    char *text = NULL;
    ck_assert(g_file_get_contents(s->log_path, &text, NULL, NULL));
    return text;
}

/* Waits up to limit_ms for the process to end; its wait status, or -1 if it did not. */
static int wait_exit(GPid pid, int limit_ms)
{
    int status;
    for (int waited = 0; waited <= limit_ms; waited += 10) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
        g_usleep(10000);
    }
    return -1;
}

/* The test's environment, plus what LeakSanitizer needs to tell libsoup's own leaks
 * (tests/lsan_libsoup.supp) from the service's: full stacks through GLib. */
static char **service_environment(void)
{
    char **env = g_get_environ();
    const char *asan = g_environ_getenv(env, "ASAN_OPTIONS");
    const char *lsan = g_environ_getenv(env, "LSAN_OPTIONS");
    g_autofree char *a =
        g_strdup_printf("%s%sfast_unwind_on_malloc=0", asan ? asan : "", asan ? ":" : "");
    g_autofree char *l = g_strdup_printf("%s%ssuppressions=%s/tests/lsan_libsoup.supp",
                                         lsan ? lsan : "", lsan ? ":" : "", SLUICE_SOURCE_DIR);
    env = g_environ_setenv(env, "ASAN_OPTIONS", a, TRUE);
    return g_environ_setenv(env, "LSAN_OPTIONS", l, TRUE);
}

/* Spawns the service with these arguments (NULL-ended); stdout is a pipe, stderr a file. */
static service *spawn(const char *const *args)
{
    service *s = g_new0(service, 1);
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, test_unconst(SLUICE_HTTP_SERVICE));
    for (gsize i = 0; args[i]; i++)
        g_ptr_array_add(argv, test_unconst(args[i]));
    g_ptr_array_add(argv, NULL);
    int log_fd = g_file_open_tmp("sluice-http-XXXXXX.log", &s->log_path, NULL);
    ck_assert_int_ge(log_fd, 0);
    GError *error = NULL;
    g_auto(GStrv) env = service_environment();
    gboolean ok = g_spawn_async_with_pipes_and_fds(
        NULL, (const char *const *)argv->pdata, (const char *const *)env, G_SPAWN_DO_NOT_REAP_CHILD,
        die_with_parent, NULL, -1, -1, log_fd, NULL, NULL, 0, &s->pid, NULL, &s->out_fd, NULL,
        &error);
    close(log_fd);
    g_ptr_array_free(argv, TRUE);
    ck_assert_msg(ok, "cannot start %s: %s", SLUICE_HTTP_SERVICE, ok ? "" : error->message);
    return s;
}

/* Returns once the spawned service printed its port (into s->port). */
static void service_started(service *s)
{
    char line[512];
    gsize len = 0;
    gint64 deadline = g_get_monotonic_time() + START_LIMIT_MS * 1000;
    while (!memchr(line, '\n', len) && len < sizeof line - 1) {
        struct pollfd p = {s->out_fd, POLLIN, 0};
        int left_ms = (int)((deadline - g_get_monotonic_time()) / 1000);
        ck_assert_msg(left_ms > 0 && poll(&p, 1, left_ms) == 1, "no port printed within %d ms",
                      START_LIMIT_MS);
        ssize_t n = read(s->out_fd, line + len, sizeof line - 1 - len);
        if (n <= 0) {
            g_autofree char *log = read_log(s);
            ck_abort_msg("the service exited before listening:\n%s", log);
        }
        len += (gsize)n;
    }
    line[len] = '\0';
    ck_assert_msg(sscanf(line, "http_service: listening on http://127.0.0.1:%d/", &s->port) == 1,
                  "unexpected first line: %s", line);
    ck_assert_int_gt(s->port, 0);
}

/* Starts the service on a free port with this keyfile; returns once it printed its port. */
static service *service_start(const char *config)
{
    const char *args[] = {"--port", "0", "--config", config, NULL};
    service *s = spawn(args);
    service_started(s);
    return s;
}

/* SIGTERM; asserts it stopped within STOP_LIMIT_MS with status 0, and frees s. Returns
 * its log (stderr). */
static char *service_stop(service *s)
{
    kill(s->pid, SIGTERM);
    int status = wait_exit(s->pid, STOP_LIMIT_MS);
    if (status == -1) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    char *log = read_log(s);
    ck_assert_msg(status != -1, "the service did not stop within %d ms", STOP_LIMIT_MS);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d; log:\n%s", status,
                  log);
    close(s->out_fd);
    g_unlink(s->log_path);
    g_free(s->log_path);
    g_free(s);
    return log;
}

static guint count(const char *text, const char *needle)
{
    guint n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* ---- HTTP ------------------------------------------------------------------------- */

typedef struct {
    guint status;
    const char *path; /* the URL asked for */
    char *limit, *remaining, *reset, *retry_after;
    gint64 start_us, end_us; /* /upload: when its body ran, else 0 */
} reply;

static SoupSession *session_new(void)
{
    g_autoptr(GProxyResolver) direct = g_simple_proxy_resolver_new(NULL, NULL);
    return soup_session_new_with_options("proxy-resolver", direct, "timeout", 30, "max-conns", 64,
                                         "max-conns-per-host", 64, NULL);
}

static char *header(SoupMessage *msg, const char *name)
{
    SoupMessageHeaders *h = soup_message_get_response_headers(msg);
    return g_strdup(soup_message_headers_get_one(h, name));
}

static gint64 header_int(SoupMessage *msg, const char *name)
{
    g_autofree char *v = header(msg, name);
    return v ? g_ascii_strtoll(v, NULL, 10) : 0;
}

static void read_reply(SoupMessage *msg, GBytes *body, GError *error, reply *r)
{
    ck_assert_msg(body != NULL, "%s: %s", r->path, error ? error->message : "?");
    r->status = soup_message_get_status(msg);
    r->limit = header(msg, "RateLimit-Limit");
    r->remaining = header(msg, "RateLimit-Remaining");
    r->reset = header(msg, "RateLimit-Reset");
    r->retry_after = header(msg, "Retry-After");
    r->start_us = header_int(msg, "X-Upload-Start-Us");
    r->end_us = header_int(msg, "X-Upload-End-Us");
}

static void reply_clear(reply *r)
{
    g_free(r->limit);
    g_free(r->remaining);
    g_free(r->reset);
    g_free(r->retry_after);
    memset(r, 0, sizeof *r);
}

static SoupMessage *request(const char *method, const service *s, const char *path)
{
    g_autofree char *url = g_strdup_printf("http://127.0.0.1:%d%s", s->port, path);
    SoupMessage *msg = soup_message_new(method, url);
    ck_assert_msg(msg != NULL, "bad URL %s", url);
    return msg;
}

/* One request, waiting for the answer. */
static reply call_method(SoupSession *session, const char *method, const service *s,
                         const char *path)
{
    reply r = {.path = path};
    g_autoptr(SoupMessage) msg = request(method, s, path);
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) body = soup_session_send_and_read(session, msg, NULL, &error);
    read_reply(msg, body, error, &r);
    return r;
}

static reply call(SoupSession *session, const service *s, const char *path)
{
    return call_method(session, "GET", s, path);
}

static guint status_of(SoupSession *session, const service *s, const char *path)
{
    reply r = call(session, s, path);
    guint status = r.status;
    reply_clear(&r);
    return status;
}

/* Many requests at once on one main loop; waits for every answer (bounded). */
typedef struct {
    reply *replies;
    guint pending;
    GMainLoop *loop;
} batch;

typedef struct {
    batch *b;
    reply *r;
} pending_call;

static void on_answer(GObject *source, GAsyncResult *result, gpointer data)
{
    pending_call *p = data;
    SoupMessage *msg = soup_session_get_async_result_message(SOUP_SESSION(source), result);
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) body =
        soup_session_send_and_read_finish(SOUP_SESSION(source), result, &error);
    read_reply(msg, body, error, p->r);
    if (--p->b->pending == 0)
        g_main_loop_quit(p->b->loop);
    g_free(p);
}

static gboolean batch_timeout(gpointer data)
{
    (void)data;
    ck_abort_msg("the answers did not all come within 30 s");
    return G_SOURCE_REMOVE;
}

/* Sends n requests for path, to services[i % n_services] in turn, all at once. */
static reply *call_all(SoupSession *session, service **services, guint n_services, const char *path,
                       guint n)
{
    batch b = {g_new0(reply, n), n, g_main_loop_new(NULL, FALSE)};
    for (guint i = 0; i < n; i++) {
        pending_call *p = g_new0(pending_call, 1);
        p->b = &b;
        p->r = &b.replies[i];
        p->r->path = path;
        g_autoptr(SoupMessage) msg = request("GET", services[i % n_services], path);
        soup_session_send_and_read_async(session, msg, G_PRIORITY_DEFAULT, NULL, on_answer, p);
    }
    guint timeout = g_timeout_add_seconds(30, batch_timeout, NULL);
    g_main_loop_run(b.loop);
    g_source_remove(timeout);
    g_main_loop_unref(b.loop);
    return b.replies;
}

/* ---- keyfiles ------------------------------------------------------------------------ */

#define EXPORT_LIMIT    10
#define EXPORT_WINDOW_S 6
#define UPLOAD_LIMIT    2

static char *shared_keyfile(const char *redis_url, const char *on_error)
{
    g_autofree char *text =
        g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\ntimeout = 1s\non_error = %s\n"
                        "[limit:http.export]\nalgorithm = sliding_log\nlimit = %d\nwindow = %ds\n"
                        "[limit:http.login]\nalgorithm = gcra\nlimit = 3\nwindow = 1m\n"
                        "[limit:http.upload]\nalgorithm = concurrency\nlimit = %d\nwindow = 30s\n",
                        redis_url, on_error, EXPORT_LIMIT, EXPORT_WINDOW_S, UPLOAD_LIMIT);
    return fixture_write_keyfile(text);
}

/* ---- two instances, one Redis --------------------------------------------------------- */

/* A redis-server and two instances of the service on one keyfile that points at it. */
typedef struct {
    test_redis *redis;
    char *config;
    service *both[2];
    SoupSession *session;
} pair;

static void pair_start(pair *p)
{
    p->redis = test_redis_start(NULL);
    g_autofree char *url = test_redis_url(p->redis);
    p->config = shared_keyfile(url, "deny");
    p->both[0] = service_start(p->config);
    p->both[1] = service_start(p->config);
    p->session = session_new();
}

/* Stops both instances (bounded, status 0) and the server; the instances' logs. */
static void pair_stop(pair *p, char **log_a, char **log_b)
{
    g_object_unref(p->session);
    *log_a = service_stop(p->both[0]);
    *log_b = service_stop(p->both[1]);
    test_redis_stop(p->redis);
    g_free(p->config);
}

START_TEST(two_instances_share_the_export_limit_and_answer_429_with_headers)
{
    pair p;
    pair_start(&p);
    service *a = p.both[0], **both = p.both;
    SoupSession *session = p.session;

    enum { SENT = 25 };
    reply r[SENT];
    guint ok[2] = {0, 0}, denied[2] = {0, 0};
    gint64 t0 = g_get_monotonic_time();
    for (int i = 0; i < SENT; i++)
        r[i] = call(session, both[i % 2], "/export");
    gint64 elapsed_ms = (g_get_monotonic_time() - t0) / 1000;
    gint64 last_answer = g_get_monotonic_time();
    ck_assert_msg(elapsed_ms < EXPORT_WINDOW_S * 1000, "%d requests took %" G_GINT64_FORMAT " ms",
                  SENT, elapsed_ms);

    /* sequential requests within one window: the first `limit` pass, whichever
     * instance answers; every later one is denied by the shared log */
    for (int i = 0; i < SENT; i++) {
        if (i < EXPORT_LIMIT) {
            ck_assert_msg(r[i].status == 200, "request %d: %u", i, r[i].status);
            ck_assert_ptr_null(r[i].retry_after);
            /* one count for both instances */
            ck_assert_str_eq(r[i].limit, G_STRINGIFY(EXPORT_LIMIT));
            ck_assert_int_eq(g_ascii_strtoll(r[i].remaining, NULL, 10), EXPORT_LIMIT - 1 - i);
            ok[i % 2]++;
            continue;
        }
        ck_assert_msg(r[i].status == 429, "request %d: %u", i, r[i].status);
        denied[i % 2]++;
        ck_assert_str_eq(r[i].limit, G_STRINGIFY(EXPORT_LIMIT));
        ck_assert_str_eq(r[i].remaining, "0");
        ck_assert_ptr_nonnull(r[i].retry_after);
        gint64 retry = g_ascii_strtoll(r[i].retry_after, NULL, 10);
        gint64 reset = g_ascii_strtoll(r[i].reset, NULL, 10);
        /* the oldest admission leaves the window at most 6 s after it was made, and
         * at least 6 s after the first request minus everything sent since */
        ck_assert_int_le(retry, EXPORT_WINDOW_S);
        ck_assert_int_ge(retry * 1000, EXPORT_WINDOW_S * 1000 - elapsed_ms);
        ck_assert_int_ge(reset, retry);
        ck_assert_int_le(reset, EXPORT_WINDOW_S);
    }
    ck_assert_uint_eq(ok[0] + ok[1], EXPORT_LIMIT);
    ck_assert_uint_eq(ok[0], EXPORT_LIMIT / 2);
    ck_assert_uint_eq(denied[0] + denied[1], SENT - EXPORT_LIMIT);
    ck_assert_uint_gt(denied[1], 0);

    /* after Retry-After seconds the next request passes */
    gint64 retry = g_ascii_strtoll(r[SENT - 1].retry_after, NULL, 10);
    gint64 due = last_answer + retry * G_USEC_PER_SEC;
    g_usleep((gulong)MAX(0, due - g_get_monotonic_time()));
    ck_assert_uint_eq(status_of(session, a, "/export"), 200);
    for (int i = 0; i < SENT; i++)
        reply_clear(&r[i]);

    /* one log line per denial, on the instance that denied */
    g_autofree char *log_a = NULL, *log_b = NULL;
    pair_stop(&p, &log_a, &log_b);
    ck_assert_uint_eq(count(log_a, "denied: /export 127.0.0.1 (http.export): 429"), denied[0]);
    ck_assert_uint_eq(count(log_b, "denied: /export 127.0.0.1 (http.export): 429"), denied[1]);
}
END_TEST

typedef struct {
    gint64 t;
    int delta;
} edge;

static int by_time(gconstpointer a, gconstpointer b)
{
    const edge *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->delta - y->delta; /* an end before a start at the same microsecond */
}

START_TEST(uploads_in_flight_never_exceed_the_limit_across_instances)
{
    pair p;
    pair_start(&p);

    enum { SENT = 12 };
    reply *r = call_all(p.session, p.both, 2, "/upload?ms=1000", SENT);
    GArray *edges = g_array_new(FALSE, FALSE, sizeof(edge));
    guint ok = 0, denied = 0;
    for (int i = 0; i < SENT; i++) {
        if (r[i].status == 200) {
            ok++;
            ck_assert_int_gt(r[i].start_us, 0);
            ck_assert_int_ge(r[i].end_us, r[i].start_us + 1000 * 1000);
            ck_assert_str_eq(r[i].limit, G_STRINGIFY(UPLOAD_LIMIT));
            g_array_append_val(edges, ((edge){r[i].start_us, +1}));
            g_array_append_val(edges, ((edge){r[i].end_us, -1}));
        } else {
            ck_assert_msg(r[i].status == 429, "upload %d: %u", i, r[i].status);
            denied++;
            ck_assert_str_eq(r[i].limit, G_STRINGIFY(UPLOAD_LIMIT));
            ck_assert_ptr_nonnull(r[i].retry_after);
        }
        reply_clear(&r[i]);
    }
    g_free(r);
    /* the bodies' own times (one clock for both processes): never more than the
     * limit at once; the limit itself is reached (the test did overlap them) */
    g_array_sort(edges, by_time);
    int now = 0, most = 0;
    for (guint i = 0; i < edges->len; i++) {
        now += g_array_index(edges, edge, i).delta;
        most = MAX(most, now);
    }
    g_array_free(edges, TRUE);
    ck_assert_int_eq(most, UPLOAD_LIMIT);
    ck_assert_uint_ge(ok, UPLOAD_LIMIT);
    ck_assert_uint_gt(denied, 0);
    ck_assert_uint_eq(ok + denied, SENT);

    /* the leases were given back: two more pass at once */
    reply *again = call_all(p.session, p.both, 2, "/upload?ms=0", UPLOAD_LIMIT);
    for (int i = 0; i < UPLOAD_LIMIT; i++) {
        ck_assert_uint_eq(again[i].status, 200);
        reply_clear(&again[i]);
    }
    g_free(again);
    g_autofree char *log_a = NULL, *log_b = NULL;
    pair_stop(&p, &log_a, &log_b);
    ck_assert_uint_eq(count(log_a, "(http.upload): 429") + count(log_b, "(http.upload): 429"),
                      denied);
}
END_TEST

/* ---- the shipped keyfile, on the memory backend ---------------------------------------- */

START_TEST(the_shipped_keyfile_limits_each_handler_on_memory)
{
    service *s = service_start(SLUICE_SOURCE_DIR "/examples/http_service.ini");
    g_autoptr(SoupSession) session = session_new();

    /* /hello has no rule: never limited, no headers */
    for (int i = 0; i < 20; i++) {
        reply r = call(session, s, "/hello");
        ck_assert_uint_eq(r.status, 200);
        ck_assert_ptr_null(r.limit);
        reply_clear(&r);
    }
    /* /login: gcra, 3 at once per user, then one per 20 s */
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(status_of(session, s, "/login?user=alice"), 200);
    reply r = call(session, s, "/login?user=alice");
    ck_assert_uint_eq(r.status, 429);
    ck_assert_str_eq(r.limit, "3");
    ck_assert_str_eq(r.remaining, "0");
    ck_assert_int_ge(g_ascii_strtoll(r.retry_after, NULL, 10), 19);
    ck_assert_int_le(g_ascii_strtoll(r.retry_after, NULL, 10), 20);
    ck_assert_int_ge(g_ascii_strtoll(r.reset, NULL, 10), 59);
    ck_assert_int_le(g_ascii_strtoll(r.reset, NULL, 10), 60);
    reply_clear(&r);
    ck_assert_uint_eq(status_of(session, s, "/login?user=bob"), 200);
    ck_assert_uint_eq(status_of(session, s, "/login?user=%C3%A9lodie"), 200);
    /* /export: 5 per 30 s per client */
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(status_of(session, s, "/export"), 200);
    r = call(session, s, "/export");
    ck_assert_uint_eq(r.status, 429);
    ck_assert_str_eq(r.limit, "5");
    ck_assert_int_le(g_ascii_strtoll(r.retry_after, NULL, 10), 30);
    reply_clear(&r);
    /* bad requests never reach the limiter */
    g_autofree char *long_user = g_strnfill(257, 'u');
    g_autofree char *long_login = g_strdup_printf("/login?user=%s", long_user);
    const char *bad[] = {"/login",       "/login?user=",     "/login?user=%FF", long_login,
                         "/upload?ms=x", "/upload?ms=10001", "/upload?ms=-1"};
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++)
        ck_assert_msg(status_of(session, s, bad[i]) == 400, "%s", bad[i]);
    ck_assert_uint_eq(status_of(session, s, "/upload?ms=0"), 200);
    ck_assert_uint_eq(status_of(session, s, "/nothing"), 404);
    ck_assert_uint_eq(status_of(session, s, "/export/more"), 404);
    r = call_method(session, "PUT", s, "/hello");
    ck_assert_uint_eq(r.status, 405);
    reply_clear(&r);

    g_autofree char *log = service_stop(s);
    ck_assert_uint_eq(count(log, "denied: "), 2);
    ck_assert_ptr_nonnull(strstr(log, "denied: /login alice (http.login): 429, limit 3"));
    ck_assert_ptr_nonnull(strstr(log, "\"http.hello\", which has no rule"));
}
END_TEST

/* ---- a downstream that asks to wait ---------------------------------------------------- */

/* A downstream service on its own thread: a plain socket that answers each request
 * on a connection of its own (Connection: close), the first with 429 and
 * Retry-After: 30, the others with 200; it counts the requests it got. (Not a
 * SoupServer: one stopped here still held an accepted socket and the listener's
 * address at exit, which LeakSanitizer reported against this test.) */
typedef struct {
    GThread *thread;
    GSocket *listener;
    GCancellable *stop;
    int port;
    gint requests; /* atomic */
} downstream;

/* Reads one request's head from `c` (up to its blank line) and answers it. */
static void downstream_answer(downstream *d, GSocket *c)
{
    char head[4096];
    gsize got = 0;
    while (got < sizeof head - 1) {
        gssize n = g_socket_receive(c, head + got, sizeof head - 1 - got, d->stop, NULL);
        if (n <= 0)
            return;
        got += (gsize)n;
        head[got] = '\0';
        if (strstr(head, "\r\n\r\n"))
            break;
    }
    int n = g_atomic_int_add(&d->requests, 1);
    const char *text = n == 0 ? "busy\n" : "three results\n";
    g_autofree char *answer =
        g_strdup_printf("HTTP/1.1 %s\r\n%sContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                        "Connection: close\r\n\r\n%s",
                        n == 0 ? "429 Too Many Requests" : "200 OK",
                        n == 0 ? "Retry-After: 30\r\n" : "", strlen(text), text);
    for (gsize sent = 0, len = strlen(answer); sent < len;) {
        gssize w = g_socket_send(c, answer + sent, len - sent, d->stop, NULL);
        if (w <= 0)
            return;
        sent += (gsize)w;
    }
}

static gpointer downstream_run(gpointer data)
{
    downstream *d = data;
    for (;;) {
        g_autoptr(GSocket) c = g_socket_accept(d->listener, d->stop, NULL);
        if (!c)
            return NULL; /* stopped */
        downstream_answer(d, c);
        g_socket_close(c, NULL);
    }
}

static downstream *downstream_start(void)
{
    downstream *d = g_new0(downstream, 1);
    g_autoptr(GError) error = NULL;
    d->listener =
        g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
    ck_assert_msg(d->listener, "%s", error ? error->message : "");
    g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any_port = g_inet_socket_address_new(loopback, 0);
    ck_assert_msg(g_socket_bind(d->listener, any_port, TRUE, &error) &&
                      g_socket_listen(d->listener, &error),
                  "%s", error ? error->message : "");
    g_autoptr(GSocketAddress) bound = g_socket_get_local_address(d->listener, &error);
    ck_assert_msg(bound, "%s", error ? error->message : "");
    d->port = g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(bound));
    d->stop = g_cancellable_new();
    d->thread = g_thread_new("downstream", downstream_run, d);
    return d;
}

static void downstream_stop(downstream *d)
{
    g_cancellable_cancel(d->stop);
    g_thread_join(d->thread);
    g_object_unref(d->listener);
    g_object_unref(d->stop);
    g_free(d);
}

/* /search calls the downstream; its 429 with Retry-After blocks the user's key, so
 * that the user's next searches are denied by sluice without reaching it. */
START_TEST(a_downstreams_429_blocks_the_callers_key)
{
    downstream *down = downstream_start();
    g_autofree char *url = g_strdup_printf("http://127.0.0.1:%d/search", down->port);
    const char *args[] = {
        "--port",       "0", "--config", SLUICE_SOURCE_DIR "/examples/http_service.ini",
        "--downstream", url, NULL};
    service *s = spawn(args);
    service_started(s);
    g_autoptr(SoupSession) session = session_new();

    reply r = call(session, s, "/search?user=alice"); /* the downstream says: wait 30 s */
    ck_assert_uint_eq(r.status, 429);
    ck_assert_str_eq(r.retry_after, "30");
    reply_clear(&r);
    ck_assert_int_eq(g_atomic_int_get(&down->requests), 1);
    for (int i = 0; i < 3; i++) { /* alice waits, the downstream is not called */
        r = call(session, s, "/search?user=alice");
        ck_assert_uint_eq(r.status, 429);
        ck_assert_int_ge(g_ascii_strtoll(r.retry_after, NULL, 10), 29);
        ck_assert_int_le(g_ascii_strtoll(r.retry_after, NULL, 10), 30);
        ck_assert_str_eq(r.remaining, "0");
        reply_clear(&r);
    }
    ck_assert_int_eq(g_atomic_int_get(&down->requests), 1);
    r = call(session, s, "/search?user=bob"); /* bob is not blocked */
    ck_assert_uint_eq(r.status, 200);
    ck_assert_str_eq(r.limit, "10");
    reply_clear(&r);
    ck_assert_int_eq(g_atomic_int_get(&down->requests), 2);
    ck_assert_uint_eq(status_of(session, s, "/search"), 400);

    g_autofree char *log = service_stop(s);
    downstream_stop(down);
    ck_assert_ptr_nonnull(
        strstr(log, "downstream 429: /search alice (http.search): blocked for Retry-After: 30"));
    ck_assert_uint_eq(count(log, "denied: /search alice (http.search): 429, blocked, limit 10"), 3);
}
END_TEST

/* ---- the limiter failing ------------------------------------------------------------- */

START_TEST(a_failing_limiter_answers_503_when_the_keyfile_says_deny)
{
    g_autofree char *url = g_strdup_printf("redis://127.0.0.1:%d/0", test_redis_free_port());
    g_autofree char *deny = shared_keyfile(url, "deny");
    g_autofree char *allow = shared_keyfile(url, "allow");
    service *s = service_start(deny);
    g_autoptr(SoupSession) session = session_new();
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(status_of(session, s, "/upload"), 503); /* the error callback */
        ck_assert_uint_eq(status_of(session, s, "/export"), 503); /* the guards' fallback */
        ck_assert_uint_eq(status_of(session, s, "/login?user=alice"), 503);
        ck_assert_uint_eq(status_of(session, s, "/hello"), 200); /* no rule, no limiter */
    }
    g_autofree char *log = service_stop(s);
    ck_assert_uint_eq(count(log, "limiter failed: /upload 127.0.0.1 (http.upload): 503"), 3);
    ck_assert_uint_eq(count(log, "): 503: "), 9);

    s = service_start(allow);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(status_of(session, s, "/upload"), 200); /* the callback runs the body */
        ck_assert_uint_eq(status_of(session, s, "/export"), 200);
    }
    g_autofree char *log_allow = service_stop(s);
    ck_assert_uint_eq(count(log_allow, "on_error allows"), 3);
}
END_TEST

/* ---- starting and stopping -------------------------------------------------------------- */

START_TEST(bad_options_and_keyfiles_end_it_at_once_with_a_message)
{
    g_autofree char *bad = fixture_write_keyfile("[limit:http.export]\nlimit = 5\nwindow = 10\n");
    struct {
        const char *args[5];
        int status;
        const char *message;
    } cases[] = {
        {{"--config", bad, "--port", "0", NULL}, 1, "window = 10: missing unit"},
        {{"--config", "/nonexistent/x.ini", "--port", "0", NULL}, 1, "/nonexistent/x.ini"},
        {{"--port", "70000", NULL}, 2, "--port 70000: expected 0"},
        {{"--workers", "0", NULL}, 2, "--workers 0: expected 1 to 256"},
        {{"--port", "0", "extra", NULL}, 2, "unexpected argument extra"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        service *s = spawn(cases[i].args);
        int status = wait_exit(s->pid, START_LIMIT_MS);
        ck_assert_msg(status != -1, "case %zu did not exit", i);
        g_autofree char *log = read_log(s);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == cases[i].status,
                      "case %zu: status %d, log %s", i, status, log);
        ck_assert_msg(strstr(log, cases[i].message), "case %zu: log %s", i, log);
        close(s->out_fd);
        g_unlink(s->log_path);
        g_free(s->log_path);
        g_free(s);
    }
}
END_TEST

START_TEST(sigterm_stops_it_in_bounded_time_even_during_an_upload)
{
    service *s = service_start(SLUICE_SOURCE_DIR "/examples/http_service.ini");
    /* a raw request that keeps a worker busy for 10 s */
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_socket_client_set_enable_proxy(client, FALSE); /* loopback: no proxy lookup thread */
    g_autoptr(GSocketConnection) c =
        g_socket_client_connect_to_host(client, "127.0.0.1", (guint16)s->port, NULL, NULL);
    ck_assert_ptr_nonnull(c);
    const char req[] = "GET /upload?ms=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    GOutputStream *out = g_io_stream_get_output_stream(G_IO_STREAM(c));
    ck_assert(g_output_stream_write_all(out, req, sizeof req - 1, NULL, NULL, NULL));
    g_usleep(300 * 1000); /* the worker has started the body */
    gint64 t0 = g_get_monotonic_time();
    g_autofree char *log = service_stop(s);
    ck_assert_int_lt(g_get_monotonic_time() - t0, STOP_LIMIT_MS * 1000);
    ck_assert_ptr_nonnull(strstr(log, "stopping"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_service");
    TCase *shared = tcase_create("shared");
    tcase_add_test(shared, two_instances_share_the_export_limit_and_answer_429_with_headers);
    tcase_add_test(shared, uploads_in_flight_never_exceed_the_limit_across_instances);
    suite_add_tcase(s, shared);
    TCase *alone = tcase_create("alone");
    tcase_add_test(alone, the_shipped_keyfile_limits_each_handler_on_memory);
    tcase_add_test(alone, a_downstreams_429_blocks_the_callers_key);
    tcase_add_test(alone, a_failing_limiter_answers_503_when_the_keyfile_says_deny);
    tcase_add_test(alone, bad_options_and_keyfiles_end_it_at_once_with_a_message);
    tcase_add_test(alone, sigterm_stops_it_in_bounded_time_even_during_an_upload);
    suite_add_tcase(s, alone);
    return fixture_run(s);
}
