/* SPDX-License-Identifier: MIT */
/* http_service: a libsoup 3 server whose handlers are rate limited by sluice, with the
 * limits in examples/http_service.ini (examples/README.md walks through it).
 *
 *   /hello             no rule: never limited
 *   /export            sliding_log per client address
 *   /login?user=NAME   gcra per user
 *   /upload?ms=N       concurrency: at most `limit` uploads in flight across every
 *                      instance that shares the Redis; the body takes N ms (0-10000)
 *   /search?user=NAME  gcra per user, then a call of the downstream (--downstream
 *                      URL); a downstream's 429 or 503 with Retry-After blocks the
 *                      user's key for that long (sluice_block_retry_after), on every
 *                      instance that shares the Redis, so none of them calls it again
 *                      for that user before then
 *
 * Allowed answers carry the RateLimit-* headers, denials (429) Retry-After too, all
 * from the call's own decision (sluice_last_decision); a limiter that fails while
 * the keyfile says on_error = deny answers 503. A decision on the
 * Redis backend is a blocking round trip, so the main loop never decides: it pauses
 * the message, a worker thread runs the decorated handler, and the main context
 * writes the answer. Only the main context touches a SoupServerMessage. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib-unix.h>
#include <libsoup/soup.h>
#include <sluice/sluice.h>

#define MAX_USER_BYTES           256   /* a longer ?user= is a bad request            */
#define MAX_UPLOAD_MS            10000 /* a longer ?ms= is a bad request               */
#define MAX_WORKERS              256   /* --workers                                    */
#define STATUS_TOO_MANY_REQUESTS 429   /* RFC 6585; libsoup 3.2 has no constant for it */

/* One request on its way: the main context fills the request fields and pauses the
 * message, a worker runs the handler, which fills the response fields; then the main
 * context writes them into the message and unpauses it. */
typedef struct job job;
typedef int (*handler_func)(job *j);
struct job {
    SoupServerMessage *msg; /* main context only */
    gulong on_disconnect;   /* sets `gone`: the client went away, nothing to answer */
    gboolean gone;
    handler_func handler;
    const char *path;
    char *client; /* the peer's address: /export's key */
    char *user;   /* /login's and /search's key */
    gint64 upload_ms;
    /* the response, written by the worker */
    guint status;
    GString *body;
    sluice_headers headers;
    gint64 started_us, ended_us; /* /upload: when its body ran (CLOCK_MONOTONIC) */
};

static GMainContext *main_context;
static GThreadPool *workers;
static SoupSession *downstream; /* /search calls it from the workers (libsoup >= 3.2) */
static char *downstream_url;    /* --downstream */

/* Set when the service stops: queued jobs answer 503 and uploads stop sleeping. */
static GMutex stop_lock;
static GCond stop_cond;
static gboolean stopping;

static gboolean is_stopping(void)
{
    g_mutex_lock(&stop_lock);
    gboolean s = stopping;
    g_mutex_unlock(&stop_lock);
    return s;
}

/* ---- answers that are not the body's ------------------------------------------- */

/* 503: the limiter failed and on_error said deny (or the service is stopping). */
static int unavailable(job *j, const char *name, const char *why)
{
    g_message("limiter failed: %s %s (%s): 503: %s", j->path, j->client, name, why);
    g_string_assign(j->body, "503 the rate limiter is unavailable, try again later\n");
    return SOUP_STATUS_SERVICE_UNAVAILABLE;
}

/* The RateLimit-* headers of this call's admission (none for a name with no rule). */
static void admitted(job *j)
{
    sluice_decision d;
    if (sluice_last_decision(&d) == SLUICE_ALLOWED)
        sluice_headers_from_decision(&d, &j->headers, NULL);
}

/* The fallback of the limit `name` for `key`: 429 with the headers of the denial,
 * or 503 when the limiter failed and on_error said deny. */
static int too_many(job *j, const char *name, const char *key)
{
    sluice_decision d;
    if (sluice_last_decision(&d) == SLUICE_FAILED)
        return unavailable(j, name, "on_error = deny");
    sluice_headers_from_decision(&d, &j->headers, NULL);
    const char *retry = "never";
    for (guint i = 0; i < j->headers.n; i++)
        if (strcmp(j->headers.header[i].name, "Retry-After") == 0)
            retry = j->headers.header[i].value;
    g_message("denied: %s %s (%s): 429, %s %" G_GINT64_FORMAT ", retry after %s s", j->path,
              key ? key : j->client, name, d.blocked ? "blocked, limit" : "limit", d.limit, retry);
    g_string_printf(j->body, "429 too many requests for %s, retry after %s s\n", j->path, retry);
    return STATUS_TOO_MANY_REQUESTS;
}

/* ---- the handlers: run on a worker ----------------------------------------------- */

/* No rule in the keyfile: the guard lets every call through. */
static int hello(job *j)
{
    RATE_LIMITED("http.hello", return too_many(j, "http.hello", NULL));
    admitted(j);
    g_string_assign(j->body, "hello\n");
    return SOUP_STATUS_OK;
}

/* The guard form, per client address. */
static int export_report(job *j)
{
    RATE_LIMITED_KEY("http.export", j->client, return too_many(j, "http.export", j->client));
    admitted(j);
    g_string_printf(j->body, "export for %s: ready\n", j->client);
    return SOUP_STATUS_OK;
}

/* The guard form, per user. */
static int login(job *j)
{
    RATE_LIMITED_KEY("http.login", j->user, return too_many(j, "http.login", j->user));
    admitted(j);
    g_string_printf(j->body, "welcome, %s\n", j->user);
    return SOUP_STATUS_OK;
}

/* The definition form, with a degrade callback and an error callback. */
static int upload(job *j);
static int upload_busy(job *j);
static int upload_failed(const GError *error, const sluice_decision *verdict, job *j);

RATE_LIMITED_FUNCTION(int, upload, (job * j), (j), "http.upload", upload_busy, upload_failed)
{
    admitted(j);
    j->started_us = g_get_monotonic_time();
    gint64 until = j->started_us + j->upload_ms * 1000;
    g_mutex_lock(&stop_lock);
    while (!stopping && g_get_monotonic_time() < until)
        g_cond_wait_until(&stop_cond, &stop_lock, until);
    g_mutex_unlock(&stop_lock);
    j->ended_us = g_get_monotonic_time();
    g_string_printf(j->body, "uploaded in %" G_GINT64_FORMAT " ms\n", j->upload_ms);
    return SOUP_STATUS_OK;
}

static int upload_busy(job *j)
{
    return too_many(j, "http.upload", NULL);
}

/* The limiter failed: on_error = allow runs the body anyway, deny answers 503. */
static int upload_failed(const GError *error, const sluice_decision *verdict, job *j)
{
    if (verdict->allowed) {
        g_message("limiter failed: %s (http.upload): on_error allows: %s", j->path, error->message);
        return SLUICE_BODY(upload)(j);
    }
    return unavailable(j, "http.upload", error->message);
}

/* The guard form, per user, in front of a downstream service: when it answers 429 or
 * 503 with Retry-After, the user's key is blocked for that long, so that the next
 * searches of that user are denied here (on every instance, with Redis) instead of
 * reaching a downstream that asked us to wait. */
static int search(job *j)
{
    RATE_LIMITED_KEY("http.search", j->user, return too_many(j, "http.search", j->user));
    if (!downstream_url) {
        g_string_assign(j->body, "502 no downstream: start with --downstream URL\n");
        return SOUP_STATUS_BAD_GATEWAY;
    }
    g_autoptr(SoupMessage) msg = soup_message_new(SOUP_METHOD_GET, downstream_url);
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) body = soup_session_send_and_read(downstream, msg, NULL, &error);
    if (!body) {
        g_message("downstream failed: %s %s: %s", j->path, j->user, error->message);
        g_string_assign(j->body, "502 the downstream did not answer\n");
        return SOUP_STATUS_BAD_GATEWAY;
    }
    guint status = soup_message_get_status(msg);
    if (status == STATUS_TOO_MANY_REQUESTS || status == SOUP_STATUS_SERVICE_UNAVAILABLE) {
        const char *retry =
            soup_message_headers_get_one(soup_message_get_response_headers(msg), "Retry-After");
        if (retry && sluice_block_retry_after("http.search", j->user, retry, &error)) {
            g_message("downstream %u: %s %s (http.search): blocked for Retry-After: %s", status,
                      j->path, j->user, retry);
            sluice_decision d; /* a peek: the block's headers, Retry-After among them */
            sluice_acquire("http.search", j->user, 0, &d, NULL);
            sluice_headers_from_decision(&d, &j->headers, NULL);
        } else if (retry) {
            g_message("downstream %u: %s %s: not blocked: %s", status, j->path, j->user,
                      error->message);
        }
        g_string_printf(j->body, "%u the downstream is busy, retry later\n", status);
        return status;
    }
    admitted(j);
    g_string_printf(j->body, "results for %s: %.*s", j->user, (int)g_bytes_get_size(body),
                    (const char *)g_bytes_get_data(body, NULL));
    return status;
}

/* ---- the main context: requests in, answers out ---------------------------------- */

static void job_free(job *j)
{
    g_signal_handler_disconnect(j->msg, j->on_disconnect);
    g_object_unref(j->msg);
    g_free(j->client);
    g_free(j->user);
    g_string_free(j->body, TRUE);
    g_free(j);
}

static void set_text(SoupServerMessage *msg, guint status, const char *text)
{
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "text/plain", SOUP_MEMORY_COPY, text, strlen(text));
}

static void on_disconnected(SoupServerMessage *msg, gpointer data)
{
    (void)msg;
    ((job *)data)->gone = TRUE;
}

/* On the main context: writes the worker's answer and lets libsoup send it, unless
 * the connection is gone (the client left, or the service is stopping). */
static gboolean respond(gpointer data)
{
    job *j = data;
    if (j->gone) {
        job_free(j);
        return G_SOURCE_REMOVE;
    }
    SoupMessageHeaders *h = soup_server_message_get_response_headers(j->msg);
    for (guint i = 0; i < j->headers.n; i++)
        soup_message_headers_replace(h, j->headers.header[i].name, j->headers.header[i].value);
    if (j->started_us > 0) {
        char value[24];
        g_snprintf(value, sizeof value, "%" G_GINT64_FORMAT, j->started_us);
        soup_message_headers_replace(h, "X-Upload-Start-Us", value);
        g_snprintf(value, sizeof value, "%" G_GINT64_FORMAT, j->ended_us);
        soup_message_headers_replace(h, "X-Upload-End-Us", value);
    }
    soup_server_message_set_status(
        j->msg, j->status, j->status == STATUS_TOO_MANY_REQUESTS ? "Too Many Requests" : NULL);
    soup_server_message_set_response(j->msg, "text/plain", SOUP_MEMORY_COPY, j->body->str,
                                     j->body->len);
    soup_server_message_unpause(j->msg);
    job_free(j);
    return G_SOURCE_REMOVE;
}

/* On a worker: runs the decorated handler, then hands the answer to the main context. */
static void run(gpointer data, gpointer user_data)
{
    (void)user_data;
    job *j = data;
    j->status = is_stopping() ? (guint)unavailable(j, "-", "stopping") : (guint)j->handler(j);
    g_main_context_invoke(main_context, respond, j);
}

typedef struct {
    const char *path;
    handler_func handler;
} route;

static route routes[] = {
    {"/hello", hello},   {"/export", export_report}, {"/login", login},
    {"/upload", upload}, {"/search", search},
};

/* Checks the request's arguments into j; FALSE (and a 400 on msg) when they are bad. */
static gboolean read_arguments(job *j, SoupServerMessage *msg, GHashTable *query)
{
    const char *user = query ? g_hash_table_lookup(query, "user") : NULL;
    const char *ms = query ? g_hash_table_lookup(query, "ms") : NULL;
    if (j->handler == login || j->handler == search) {
        if (!user || !*user || strlen(user) > MAX_USER_BYTES || !g_utf8_validate(user, -1, NULL)) {
            set_text(msg, SOUP_STATUS_BAD_REQUEST,
                     j->handler == login
                         ? "400 /login needs ?user=NAME (UTF-8, 1 to 256 bytes)\n"
                         : "400 /search needs ?user=NAME (UTF-8, 1 to 256 bytes)\n");
            return FALSE;
        }
        j->user = g_strdup(user);
    }
    if (j->handler == upload && ms &&
        !g_ascii_string_to_signed(ms, 10, 0, MAX_UPLOAD_MS, &j->upload_ms, NULL)) {
        set_text(msg, SOUP_STATUS_BAD_REQUEST, "400 /upload takes ?ms=0 to 10000\n");
        return FALSE;
    }
    return TRUE;
}

/* The SoupServer callback of every route: queues the request for a worker. */
static void on_request(SoupServer *server, SoupServerMessage *msg, const char *path,
                       GHashTable *query, gpointer user_data)
{
    (void)server;
    const route *r = user_data;
    const char *method = soup_server_message_get_method(msg);
    if (strcmp(path, r->path) != 0) {
        set_text(msg, SOUP_STATUS_NOT_FOUND, "404 not found\n");
        return;
    }
    if (method != SOUP_METHOD_GET && method != SOUP_METHOD_HEAD && method != SOUP_METHOD_POST) {
        set_text(msg, SOUP_STATUS_METHOD_NOT_ALLOWED, "405 GET, HEAD or POST\n");
        return;
    }
    job *j = g_new0(job, 1);
    j->handler = r->handler;
    j->path = r->path;
    j->body = g_string_new(NULL);
    if (!read_arguments(j, msg, query)) {
        g_free(j->user);
        g_string_free(j->body, TRUE);
        g_free(j);
        return;
    }
    const char *host = soup_server_message_get_remote_host(msg);
    j->client = g_strdup(host ? host : "unknown");
    j->msg = g_object_ref(msg);
    j->on_disconnect = g_signal_connect(msg, "disconnected", G_CALLBACK(on_disconnected), j);
    soup_server_message_pause(msg);
    g_thread_pool_push(workers, j, NULL);
}

static gboolean on_signal(gpointer loop)
{
    g_main_loop_quit(loop);
    return G_SOURCE_CONTINUE;
}

/* ---- main ---------------------------------------------------------------------- */

static int port = 8080;
static int worker_count = 16;
static char *config_path;

static const GOptionEntry options[] = {
    {"port", 'p', 0, G_OPTION_ARG_INT, &port, "Port on 127.0.0.1 (0: any free one)", "PORT"},
    {"config", 'c', 0, G_OPTION_ARG_FILENAME, &config_path,
     "The keyfile (default examples/http_service.ini)", "FILE"},
    {"workers", 'w', 0, G_OPTION_ARG_INT, &worker_count, "Threads that run handlers (16)", "N"},
    {"downstream", 'd', 0, G_OPTION_ARG_STRING, &downstream_url,
     "The service /search calls (an http:// URL)", "URL"},
    {NULL, 0, 0, 0, NULL, NULL, NULL},
};

static gboolean parse_options(int *argc, char ***argv, GError **error)
{
    g_autoptr(GOptionContext) context = g_option_context_new("- a rate-limited HTTP service");
    g_option_context_add_main_entries(context, options, NULL);
    if (!g_option_context_parse(context, argc, argv, error))
        return FALSE;
    if (*argc > 1) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "unexpected argument %s",
                    (*argv)[1]);
        return FALSE;
    }
    if (port < 0 || port > 65535) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--port %d: expected 0 (any free port) to 65535", port);
        return FALSE;
    }
    if (worker_count < 1 || worker_count > MAX_WORKERS) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--workers %d: expected 1 to %d", worker_count, MAX_WORKERS);
        return FALSE;
    }
    if (!config_path)
        config_path = g_strdup("examples/http_service.ini");
    if (downstream_url && !g_uri_is_valid(downstream_url, G_URI_FLAGS_NONE, NULL)) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--downstream %s: expected a URL, e.g. http://127.0.0.1:9000/search",
                    downstream_url);
        return FALSE;
    }
    return TRUE;
}

/* Listens on 127.0.0.1:port and returns the port it got, or 0 with *error. */
static int listen_loopback(SoupServer *server, GError **error)
{
    if (!soup_server_listen_local(server, (guint)port, SOUP_SERVER_LISTEN_IPV4_ONLY, error))
        return 0;
    GSList *uris = soup_server_get_uris(server);
    int got = uris ? g_uri_get_port(uris->data) : 0;
    g_slist_free_full(uris, (GDestroyNotify)g_uri_unref);
    return got;
}

int main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    int status = EXIT_FAILURE;
    SoupServer *server = NULL;
    GMainLoop *loop = NULL;

    if (!parse_options(&argc, &argv, &error)) {
        g_printerr("http_service: %s\n", error->message);
        return 2;
    }
    if (!sluice_init(config_path, &error))
        goto err;
    main_context = g_main_context_default();
    g_autoptr(GProxyResolver) direct = g_simple_proxy_resolver_new(NULL, NULL);
    downstream = soup_session_new_with_options("proxy-resolver", direct, "timeout", 5, NULL);
    workers = g_thread_pool_new(run, NULL, worker_count, TRUE, &error);
    if (!workers)
        goto err;
    server = soup_server_new("server-header", "sluice-http-service ", NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(routes); i++)
        soup_server_add_handler(server, routes[i].path, on_request, &routes[i], NULL);
    int got = listen_loopback(server, &error);
    if (!got)
        goto err;
    loop = g_main_loop_new(main_context, FALSE);
    guint sigint = g_unix_signal_add(SIGINT, on_signal, loop);
    guint sigterm = g_unix_signal_add(SIGTERM, on_signal, loop);
    printf("http_service: listening on http://127.0.0.1:%d/ with %s\n", got, config_path);
    fflush(stdout);

    g_main_loop_run(loop);

    g_source_remove(sigint);
    g_source_remove(sigterm);
    g_message("stopping");
    status = EXIT_SUCCESS;
err:
    if (error)
        g_printerr("http_service: %s\n", error->message);
    if (server)
        soup_server_disconnect(server);
    if (workers) {
        g_mutex_lock(&stop_lock);
        stopping = TRUE; /* queued jobs answer 503 at once, uploads stop waiting */
        g_cond_broadcast(&stop_cond);
        g_mutex_unlock(&stop_lock);
        g_thread_pool_free(workers, FALSE, TRUE);
    }
    while (g_main_context_iteration(main_context, FALSE))
        ; /* the answers of the last jobs: their messages are freed */
    g_clear_object(&server);
    g_clear_object(&downstream);
    while (g_main_context_iteration(main_context, FALSE))
        ; /* libsoup closes the server's connections from idles */
    g_clear_pointer(&loop, g_main_loop_unref);
    sluice_shutdown();
    g_free(config_path);
    g_free(downstream_url);
    return status;
}
