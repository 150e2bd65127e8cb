/* SPDX-License-Identifier: MIT */
/* bench_redis's redis-benchmark rows: the tool run against the same server, with the same
 * command, its --csv figures read back. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_redis.h"
#include "timing.h"

#define PILOT        10000 /* requests (times -P) of the run that sizes a tool run */
#define TOOL_LIMIT_S 15    /* a redis-benchmark run that lasts longer is killed */

volatile sig_atomic_t tool_pid;

/* In the tool's process before exec: it dies with this program, even when it is killed. */
static void die_with_parent(gpointer data)
{
    (void)data;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

char *tool_version(const char *program)
{
    const char *argv[] = {program, "--version", NULL};
    char *out = NULL;
    int status;
    if (!g_spawn_sync(NULL, test_strv(argv), NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                      NULL, NULL, &out, NULL, &status, NULL) ||
        !g_spawn_check_wait_status(status, NULL)) {
        g_free(out);
        return NULL;
    }
    g_strchomp(out);
    return out;
}

/* The fields of one line of CSV ("a","b",...); NULL-terminated, g_strfreev it. */
static char **csv_fields(const char *line)
{
    GPtrArray *fields = g_ptr_array_new();
    GString *field = g_string_new(NULL);
    gboolean quoted = FALSE;
    for (const char *p = line; *p && *p != '\n' && *p != '\r'; p++) {
        if (quoted && *p == '"' && p[1] == '"') {
            g_string_append_c(field, '"');
            p++;
        } else if (*p == '"') {
            quoted = !quoted;
        } else if (*p == ',' && !quoted) {
            g_ptr_array_add(fields, g_string_free(field, FALSE));
            field = g_string_new(NULL);
        } else {
            g_string_append_c(field, *p);
        }
    }
    g_ptr_array_add(fields, g_string_free(field, FALSE));
    g_ptr_array_add(fields, NULL);
    return (char **)g_ptr_array_free(fields, FALSE);
}

/* The value of column `name` in redis-benchmark's --csv output; FALSE when absent. */
static gboolean csv_value(char **header, char **row, const char *name, double *value)
{
    for (guint i = 0; header[i]; i++) {
        if (strcmp(header[i], name) != 0)
            continue;
        if (i >= g_strv_length(row))
            return FALSE;
        char *end;
        *value = g_ascii_strtod(row[i], &end);
        return end != row[i];
    }
    return FALSE;
}

/* Reads fd to its end into out, for at most until `deadline_ns`; FALSE when time ran out. */
static gboolean read_all(int fd, GString *out, gint64 deadline_ns)
{
    char buf[4096];
    for (;;) {
        gint64 left_ms = (deadline_ns - bench_now_ns()) / 1000000;
        if (left_ms <= 0)
            return FALSE;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, (int)MIN(left_ms, 1000));
        if (ready < 0 && errno != EINTR)
            return FALSE;
        if (ready <= 0)
            continue;
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return TRUE;
        g_string_append_len(out, buf, got);
    }
}

/* Runs redis-benchmark once against s: `requests` times `command` with `clients`
 * connections and `pipeline` requests per write, --csv. FALSE and *error when it
 * cannot be started, fails, lasts over TOOL_LIMIT_S or prints no figures. */
static gboolean run_tool(const test_redis *s, char **command, guint clients, guint pipeline,
                         guint64 requests, figures *f, GError **error)
{
    g_autofree char *port = g_strdup_printf("%d", s->port);
    g_autofree char *c = g_strdup_printf("%u", clients);
    g_autofree char *pl = g_strdup_printf("%u", pipeline);
    g_autofree char *n = g_strdup_printf("%" G_GUINT64_FORMAT, requests);
    GPtrArray *argv = g_ptr_array_new();
    const char *options[] = {
        "redis-benchmark", "-h", "127.0.0.1", "-p", port, "-c", c, "-P", pl, "-n", n, "--csv"};
    for (gsize i = 0; i < G_N_ELEMENTS(options); i++)
        g_ptr_array_add(argv, test_unconst(options[i]));
    for (gsize i = 0; command[i]; i++)
        g_ptr_array_add(argv, command[i]);
    g_ptr_array_add(argv, NULL);

    GPid pid;
    int out_fd;
    gint64 cpu0 = bench_rusage_ns(RUSAGE_CHILDREN), server0 = bench_process_cpu_ns(s->pid),
           start = bench_now_ns();
    gboolean ok = g_spawn_async_with_pipes(NULL, (char **)argv->pdata, NULL,
                                           G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD,
                                           die_with_parent, NULL, &pid, NULL, &out_fd, NULL, error);
    g_ptr_array_free(argv, TRUE);
    if (!ok)
        return FALSE;
    tool_pid = pid;

    g_autoptr(GString) out = g_string_new(NULL);
    gboolean in_time = read_all(out_fd, out, start + TOOL_LIMIT_S * G_GINT64_CONSTANT(1000000000));
    close(out_fd);
    if (!in_time)
        kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    tool_pid = 0;
    g_spawn_close_pid(pid);
    gint64 end = bench_now_ns(), server1 = bench_process_cpu_ns(s->pid);
    gint64 cpu = bench_rusage_ns(RUSAGE_CHILDREN) - cpu0;
    if (!in_time) {
        g_set_error(error, BENCH_ERROR, 1,
                    "redis-benchmark -c %u -P %u -n %" G_GUINT64_FORMAT " lasted over %d s",
                    clients, pipeline, requests, TOOL_LIMIT_S);
        return FALSE;
    }
    g_autoptr(GError) why = NULL;
    if (!g_spawn_check_wait_status(status, &why)) {
        g_set_error(error, BENCH_ERROR, 1, "redis-benchmark %s: %s", why->message, out->str);
        return FALSE;
    }

    /* "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",... then one row */
    g_auto(GStrv) lines = g_strsplit(out->str, "\n", -1);
    for (guint i = 0; lines[i] && lines[i + 1]; i++) {
        if (!g_str_has_prefix(lines[i], "\"test\""))
            continue;
        g_auto(GStrv) header = csv_fields(lines[i]);
        g_auto(GStrv) row = csv_fields(lines[i + 1]);
        double rps, p50_ms, p99_ms;
        if (!csv_value(header, row, "rps", &rps) ||
            !csv_value(header, row, "p50_latency_ms", &p50_ms) ||
            !csv_value(header, row, "p99_latency_ms", &p99_ms) || rps <= 0)
            break;
        double elapsed = (double)(end - start);
        *f = (figures){
            .per_sec = rps,
            .p50_us = p50_ms * 1e3,
            .p99_us = p99_ms * 1e3,
            .server_cpu = server0 >= 0 && server1 >= 0 ? (double)(server1 - server0) / elapsed : -1,
            .client_cpu = (double)cpu / elapsed,
            .client_us = (double)cpu / 1e3 / (double)requests,
        };
        return TRUE;
    }
    g_set_error(error, BENCH_ERROR, 1,
                "redis-benchmark printed no CSV figures (rps, p50_latency_ms): %s", out->str);
    return FALSE;
}

/* A short run sizes the measured one, which lasts about RUN_NS. */
gboolean measure_tool(const test_redis *s, char **command, guint clients, guint pipeline,
                      figures *f, GError **error)
{
    figures pilot;
    if (!run_tool(s, command, clients, pipeline, (guint64)PILOT * pipeline, &pilot, error))
        return FALSE;
    double n = pilot.per_sec * (double)RUN_NS / 1e9;
    guint64 requests = (guint64)CLAMP(n, (double)PILOT, 5e7);
    return run_tool(s, command, clients, pipeline, requests, f, error);
}
