/* SPDX-License-Identifier: MIT */
/* sluice replay: a traffic trace replayed in virtual time against a keyfile's rules.
 *
 * Every trace line is one caller's call at its own time T_MS. The library's clock
 * is injected (sluice_clock_set) and set to each call's time, so a day of
 * traffic replays in moments and the answers are exact; on Redis the scripts get
 * that time as their override. A rule's `wait` is played out in virtual time:
 * while a caller waits, the calls after it in the trace go on at their own times.
 * A token_bucket waiter reserves its tokens at once (as the library does, for a
 * rule without bands); any other waiter is decided again when its permits are due (before the
 * trace's calls of that same millisecond), until it passes or its wait is over. Lines are printed
 * in trace order, each with its final decision. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include <glib/gstdio.h>

#include "cli.h"
#include "replay_svg.h"

#define COMMAND     "replay"
#define MAX_T_MS    G_GINT64_CONSTANT(4000000000000) /* µs stay well under 2^53 */
#define MAX_PERMITS (G_GINT64_CONSTANT(1) << 50)

/* What the replay knows of one limit name of the trace. */
typedef struct {
    char *name;
    gboolean ruled; /* the keyfile has a rule for it (else it is not limited) */
    sluice_rule_info rule;
    gboolean reserves; /* a token_bucket with a wait: waiters reserve their tokens */
    gboolean retries;  /* any other rule with a wait: waiters are decided again    */
    gboolean watched;  /* mode = shadow or shadow_bands: shadow_denied is printed   */
    GHashTable *keys;  /* the keys it was called with ("" for none), to reset after */
    gint64 calls, admitted, denied, permits_admitted, permits_denied, shadow_denied;
} limit;

/* One trace line's call. */
typedef struct {
    guint64 line;
    gint64 t_ms;
    limit *limit;
    char *key; /* NULL: none */
    gint64 permits;
    gint64 deadline_ms; /* until when it may wait */
    gint64 due_ms;      /* while waiting: when it is decided again */
    gboolean done;
    sluice_decision d;
    gboolean shadow_denied; /* allowed, but refused by shadow mode or a shadow band */
    gint64 waited_ms;
} call;

typedef struct {
    const char *trace;  /* its name in messages: the path or "stdin" */
    GHashTable *limits; /* name -> limit * */
    GPtrArray *order;   /* limit *, in order of first appearance */
    GQueue pending;     /* call *, in trace order, not printed yet */
    GSequence *waiting; /* call *, by due time, then trace order */
    gint64 now_us;      /* the virtual clock */
    gint64 slept_until; /* the latest token_bucket reservation's due time; -1: none */
    replay_svg *svg;    /* --svg: where the decisions are drawn; NULL: none */
    gboolean quiet;     /* --svg -: the picture is the output */
} replay;

static gint64 clock_now(gpointer user_data)
{
    return ((replay *)user_data)->now_us;
}

/* A waiting caller's sleep: only a token_bucket reservation gets here (the others
 * are decided without waiting and put back in the queue), and its permits are
 * already its own, so time does not move for the rest of the trace. */
static void clock_sleep(gint64 until_us, gpointer user_data)
{
    replay *r = user_data;
    r->slept_until = MAX(r->slept_until, until_us);
}

static void limit_free(gpointer p)
{
    limit *l = p;
    g_hash_table_unref(l->keys);
    g_free(l->name);
    g_free(l);
}

static void call_free(call *c)
{
    g_free(c->key);
    g_free(c);
}

static limit *limit_of(replay *r, const char *name)
{
    limit *l = g_hash_table_lookup(r->limits, name);
    if (l)
        return l;
    l = g_new0(limit, 1);
    l->name = g_strdup(name);
    l->keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    l->ruled = sluice_rule_get(name, &l->rule, NULL);
    gboolean waits = l->ruled && l->rule.wait_ms > 0 && !l->rule.shadow;
    sluice_band_info bands[SLUICE_RULE_BANDS_MAX];
    guint n =
        MIN(sluice_rule_bands(name, bands, SLUICE_RULE_BANDS_MAX, NULL), SLUICE_RULE_BANDS_MAX);
    /* with bands the library reserves nothing: the waiter asks again when due */
    l->reserves = waits && n == 1 && strcmp(l->rule.algorithm, "token_bucket") == 0;
    l->retries = waits && !l->reserves;
    l->watched = l->ruled && (l->rule.shadow || bands[n - 1].shadow);
    if (!l->ruled && g_utf8_validate(name, -1, NULL))
        fprintf(stderr, "sluice %s: %s: no rule [limit:%s]: not limited\n", COMMAND, r->trace,
                name);
    g_hash_table_insert(r->limits, l->name, l);
    g_ptr_array_add(r->order, l);
    return l;
}

static gint64 saturating_add(gint64 a, gint64 b)
{
    return a > G_MAXINT64 - b ? G_MAXINT64 : a + b;
}

static gint by_due(gconstpointer a, gconstpointer b, gpointer user_data)
{
    const call *x = a, *y = b;
    (void)user_data;
    if (x->due_ms != y->due_ms)
        return x->due_ms < y->due_ms ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* Decides c at the current virtual time: done, or back in the queue to wait. */
static gboolean decide(replay *r, call *c, GError **error)
{
    limit *l = c->limit;
    gint64 now_ms = r->now_us / 1000;
    r->slept_until = -1;
    /* token_bucket with a wait: the library reserves; else no real waiting at all */
    gint64 timeout_ms = l->reserves ? c->deadline_ms - now_ms : 0;
    sluice_stats before, after;
    if (l->watched && !sluice_stats_get(l->name, &before, error))
        return FALSE;
    if (sluice_acquire_wait(l->name, c->key, c->permits, timeout_ms, &c->d, error) == SLUICE_FAILED)
        return FALSE;
    if (l->watched && !sluice_stats_get(l->name, &after, error))
        return FALSE;
    c->shadow_denied = l->watched && after.shadow_denied > before.shadow_denied;
    if (!c->d.allowed && l->retries && c->d.retry_after_ms >= 0 && now_ms < c->deadline_ms) {
        c->due_ms = now_ms + MAX(1, c->d.retry_after_ms);
        if (c->due_ms > c->deadline_ms && (strcmp(l->rule.algorithm, "concurrency") == 0 ||
                                           strcmp(l->rule.algorithm, "adaptive") == 0))
            c->due_ms = c->deadline_ms; /* as the library: a release could come sooner */
        if (c->due_ms <= c->deadline_ms) {
            g_sequence_insert_sorted(r->waiting, c, by_due, NULL);
            return TRUE;
        }
    }
    c->done = TRUE;
    if (r->slept_until >= 0)
        c->waited_ms = (r->slept_until - c->t_ms * 1000 + 999) / 1000;
    else
        c->waited_ms = now_ms - c->t_ms;
    l->calls++;
    l->shadow_denied += c->shadow_denied;
    if (c->d.allowed) {
        l->admitted++;
        l->permits_admitted = saturating_add(l->permits_admitted, c->permits);
    } else {
        l->denied++;
        l->permits_denied = saturating_add(l->permits_denied, c->permits);
    }
    if (r->svg)
        replay_svg_add(r->svg, l->name, c->t_ms + c->waited_ms, c->permits, c->d.allowed,
                       c->shadow_denied);
    return TRUE;
}

/* Decides again every waiting call due at or before until_ms, in time order. */
static gboolean wake_until(replay *r, gint64 until_ms, GError **error)
{
    while (g_sequence_get_length(r->waiting) > 0) {
        GSequenceIter *first = g_sequence_get_begin_iter(r->waiting);
        call *c = g_sequence_get(first);
        if (c->due_ms > until_ms)
            break;
        g_sequence_remove(first);
        r->now_us = c->due_ms * 1000;
        if (!decide(r, c, error)) {
            g_prefix_error(error, "%s:%" G_GUINT64_FORMAT ": ", r->trace, c->line);
            return FALSE;
        }
    }
    return TRUE;
}

/* Prints the calls at the head of the trace order that are decided. */
static void print_done(replay *r)
{
    g_autoptr(GString) out = g_string_new(NULL);
    call *c;
    while ((c = g_queue_peek_head(&r->pending)) && c->done) {
        g_queue_pop_head(&r->pending);
        g_string_printf(out, "%" G_GINT64_FORMAT " %s %s %" G_GINT64_FORMAT " ", c->t_ms,
                        c->limit->name, c->key ? c->key : "-", c->permits);
        cli_append_decision(out, &c->d, TRUE);
        if (c->limit->reserves || c->limit->retries)
            g_string_append_printf(out, " waited_ms=%" G_GINT64_FORMAT, c->waited_ms);
        if (c->limit->watched)
            g_string_append_printf(out, " shadow_denied=%d", c->shadow_denied ? 1 : 0);
        if (!r->quiet)
            puts(out->str);
        call_free(c);
    }
}

static gboolean bad_line(GError **error, const replay *r, guint64 line, const char *format, ...)
    G_GNUC_PRINTF(4, 5);

static gboolean bad_line(GError **error, const replay *r, guint64 line, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    g_autofree char *why = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT, "%s:%" G_GUINT64_FORMAT ": %s",
                r->trace, line, why);
    return FALSE;
}

/* Reads one trace line into a call (NULL for a blank line or a comment). */
static gboolean parse_line(replay *r, char *text, guint64 line, gint64 previous_ms, call **out,
                           GError **error)
{
    char *fields[5];
    int n = 0;
    *out = NULL;
    for (char *p = strtok(text, " \t\r\n\v\f"); p && *p != '#'; p = strtok(NULL, " \t\r\n\v\f")) {
        if (n == 4)
            return bad_line(error, r, line, "too many fields; expected T_MS NAME [KEY [PERMITS]]");
        fields[n++] = p;
    }
    if (n == 0)
        return TRUE;
    if (n == 1)
        return bad_line(error, r, line, "no NAME; expected T_MS NAME [KEY [PERMITS]]");
    guint64 t;
    if (!g_ascii_string_to_unsigned(fields[0], 10, 0, MAX_T_MS, &t, NULL))
        return bad_line(error, r, line,
                        "T_MS %s: expected milliseconds from the trace's start, 0 to "
                        "%" G_GINT64_FORMAT,
                        fields[0], MAX_T_MS);
    if ((gint64)t < previous_ms)
        return bad_line(error, r, line,
                        "T_MS %s is before the previous line's %" G_GINT64_FORMAT
                        "; expected times that never decrease",
                        fields[0], previous_ms);
    guint64 permits = 1;
    if (n == 4 && !g_ascii_string_to_unsigned(fields[3], 10, 0, MAX_PERMITS, &permits, NULL))
        return bad_line(error, r, line,
                        "PERMITS %s: expected a whole number, 0 (a peek) to %" G_GINT64_FORMAT,
                        fields[3], MAX_PERMITS);
    call *c = g_new0(call, 1);
    c->line = line;
    c->t_ms = (gint64)t;
    c->limit = limit_of(r, fields[1]);
    c->key = n >= 3 && strcmp(fields[2], "-") != 0 ? g_strdup(fields[2]) : NULL;
    c->permits = (gint64)permits;
    /* a peek (PERMITS 0) is answered at once: it never waits */
    c->deadline_ms =
        c->t_ms +
        (c->permits > 0 && (c->limit->reserves || c->limit->retries) ? c->limit->rule.wait_ms : 0);
    *out = c;
    return TRUE;
}

/* Replays every line of in; FALSE and *error at the first bad line or failure. */
static gboolean replay_trace(replay *r, FILE *in, GError **error)
{
    g_autofree char *text = NULL;
    size_t size = 0;
    guint64 line = 0;
    gint64 previous_ms = 0;
    while (getline(&text, &size, in) >= 0) {
        call *c;
        if (!parse_line(r, text, ++line, previous_ms, &c, error))
            return FALSE;
        if (!c)
            continue;
        previous_ms = c->t_ms;
        g_queue_push_tail(&r->pending, c);
        if (!wake_until(r, c->t_ms, error))
            return FALSE;
        r->now_us = c->t_ms * 1000;
        if (!decide(r, c, error)) {
            g_prefix_error(error, "%s:%" G_GUINT64_FORMAT ": ", r->trace, line);
            return FALSE;
        }
        if (c->limit->ruled) /* its state is to be forgotten at the end */
            g_hash_table_add(c->limit->keys, g_strdup(c->key ? c->key : ""));
        print_done(r);
    }
    if (ferror(in)) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_IO, "%s: %s", r->trace, g_strerror(errno));
        return FALSE;
    }
    if (!wake_until(r, G_MAXINT64, error))
        return FALSE;
    print_done(r);
    return TRUE;
}

static void print_summary(replay *r)
{
    for (guint i = 0; i < r->order->len; i++) {
        limit *l = g_ptr_array_index(r->order, i);
        printf("summary %s calls=%" G_GINT64_FORMAT " admitted=%" G_GINT64_FORMAT
               " denied=%" G_GINT64_FORMAT " permits_admitted=%" G_GINT64_FORMAT
               " permits_denied=%" G_GINT64_FORMAT,
               l->name, l->calls, l->admitted, l->denied, l->permits_admitted, l->permits_denied);
        if (l->watched)
            printf(" shadow_denied=%" G_GINT64_FORMAT, l->shadow_denied);
        putchar('\n');
    }
}

/* Forgets every state the replay made (on Redis: deletes its keys). */
static gboolean reset_all(replay *r, GError **error)
{
    for (guint i = 0; i < r->order->len; i++) {
        limit *l = g_ptr_array_index(r->order, i);
        GHashTableIter it;
        gpointer key;
        g_hash_table_iter_init(&it, l->keys);
        while (g_hash_table_iter_next(&it, &key, NULL))
            if (!sluice_reset(l->name, *(char *)key ? key : NULL, error)) {
                g_prefix_error(error, "deleting the replay's state: ");
                return FALSE;
            }
    }
    return TRUE;
}

/* A copy of the keyfile at path for the replay: its own key prefix (the keyfile's
 * followed by "replay-RANDOM:"), so that it never touches the service's limits,
 * and no watching; a zone's limits (backend = shm) are replayed in this process
 * (backend = memory: the same answers). Returns the copy's path, or NULL and
 * *error. */
static char *throwaway_copy(const char *path, GError **error)
{
    g_autoptr(GKeyFile) keyfile = cli_keyfile_load(path, error);
    if (!keyfile)
        return NULL;
    g_autofree char *prefix = cli_keyfile_value(keyfile, "sluice", "key_prefix");
    g_autofree char *unique = g_strdup_printf(
        "%sreplay-%08x%08x:", prefix ? prefix : "sluice:", g_random_int(), g_random_int());
    g_key_file_set_value(keyfile, "sluice", "key_prefix", unique);
    g_key_file_set_value(keyfile, "sluice", "reload", "false");
    g_autofree char *backend = cli_keyfile_value(keyfile, "sluice", "backend");
    if (g_strcmp0(backend, "shm") == 0) {
        g_key_file_set_value(keyfile, "sluice", "backend", "memory");
        for (const char *const *k = (const char *const[]){"shm", "shm_size", "shm_mode", NULL}; *k;
             k++)
            g_key_file_remove_key(keyfile, "sluice", *k, NULL);
    }
    char *copy = NULL;
    int fd = g_file_open_tmp("sluice-replay-XXXXXX.ini", &copy, error);
    if (fd < 0)
        return NULL;
    close(fd);
    if (!g_key_file_save_to_file(keyfile, copy, error)) {
        g_unlink(copy);
        g_free(copy);
        return NULL;
    }
    return copy;
}

/* Loads path's throwaway copy with the virtual clock of r. -1 when it worked. */
static int open_replay(const char *path, replay *r)
{
    g_autoptr(GError) error = NULL;
    if (!sluice_config_check(path, &error)) /* problems are reported against path */
        return cli_fail(COMMAND, error);
    g_autofree char *copy = throwaway_copy(path, &error);
    if (!copy)
        return cli_fail(COMMAND, error);
    sluice_clock_set(clock_now, clock_sleep, r);
    int rc = cli_open(COMMAND, copy, NULL, NULL);
    g_unlink(copy);
    return rc;
}

static const cli_spec spec = {
    COMMAND,
    "[TRACE]",
    0,
    1,
    TRUE,
    "Replays a traffic trace (a file, or stdin when absent or -) in virtual time against the "
    "keyfile's rules and backend.",
    "Each input line is T_MS NAME [KEY [PERMITS]]: milliseconds from the trace's\n"
    "start (never decreasing), the limit, the key (- for none) and the permits\n"
    "(default 1; 0 is a peek, answered at once). Blank lines and # comments are ignored. Each call "
    "is printed,\n"
    "in trace order, as\n"
    "  T_MS NAME KEY PERMITS allowed=A limit=L remaining=R retry_after_ms=X reset_after_ms=Y\n"
    "with waited_ms=W added for rules with a wait, and shadow_denied=0 or 1 for\n"
    "rules with mode = shadow or shadow_bands (1: passed, but enforcing the shadow\n"
    "would have refused it), then one line per name:\n"
    "  summary NAME calls=C admitted=A denied=D permits_admitted=P permits_denied=Q\n"
    "(and shadow_denied=S, the calls that were, for those rules).\n"
    "On Redis the replay uses its own key prefix and deletes its keys at the end;\n"
    "a zone's limits (backend = shm) are replayed in this process, not in the zone.\n"
    "With --compare the trace is replayed against each keyfile in turn, each\n"
    "replay's lines after a line '# replay of KEYFILE'. With --svg the decisions\n"
    "are also drawn: per limit, admitted and denied permits over time, one panel\n"
    "per keyfile (--svg - draws to stdout instead of printing the lines).\n"
    "See sluice(1) for how waiting calls and concurrency limits are replayed.\n\n"
    "Exit status: 0 done, 2 bad arguments, keyfile or trace line, 3 the backend failed.",
};

/* Replays the trace in (named trace in messages) against the keyfile at path;
 * the exit code. */
static int replay_with(const char *path, FILE *in, const char *trace, replay_svg *svg,
                       gboolean quiet)
{
    replay r = {0};
    r.trace = trace;
    r.limits = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, limit_free);
    r.order = g_ptr_array_new();
    r.waiting = g_sequence_new(NULL);
    r.svg = svg;
    r.quiet = quiet;
    g_queue_init(&r.pending);
    if (svg)
        replay_svg_run(svg, path);
    int rc = open_replay(path, &r);
    if (rc < 0) {
        g_autoptr(GError) error = NULL;
        gboolean ok = replay_trace(&r, in, &error);
        print_done(&r);
        if (ok && !quiet)
            print_summary(&r);
        else if (!ok)
            rc = cli_fail(COMMAND, error);
        for (guint i = 0; svg && i < r.order->len; i++) {
            limit *l = g_ptr_array_index(r.order, i);
            sluice_band_info bands[SLUICE_RULE_BANDS_MAX];
            guint n = sluice_rule_bands(l->name, bands, SLUICE_RULE_BANDS_MAX, NULL);
            replay_svg_rule(svg, l->name, l->ruled ? &l->rule : NULL, bands,
                            MIN(n, SLUICE_RULE_BANDS_MAX), g_hash_table_size(l->keys));
        }
        g_clear_error(&error);
        if (!reset_all(&r, &error)) {
            int failed = cli_fail(COMMAND, error);
            rc = MAX(rc, failed);
        }
        if (rc < 0)
            rc = CLI_EXIT_OK;
    }
    sluice_shutdown();
    sluice_clock_set(NULL, NULL, NULL);
    g_queue_clear_full(&r.pending, (GDestroyNotify)call_free);
    g_sequence_free(r.waiting);
    g_ptr_array_unref(r.order);
    g_hash_table_unref(r.limits);
    return rc;
}

/* A trace that can be read twice: in itself when it can seek, else a copy. */
static FILE *rereadable(FILE *in, const char *trace)
{
    if (fseek(in, 0, SEEK_SET) == 0)
        return in;
    FILE *copy = tmpfile();
    char buf[65536];
    size_t n;
    while (copy && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, copy) != n) {
            fclose(copy);
            copy = NULL;
        }
    if (copy && !ferror(in) && fseek(copy, 0, SEEK_SET) == 0)
        return copy;
    fprintf(stderr, "sluice %s: %s: cannot keep a copy to replay twice: %s\n", COMMAND, trace,
            g_strerror(errno));
    if (copy)
        fclose(copy);
    return NULL;
}

int cli_replay(char **argv)
{
    g_auto(GStrv) args = argv;
    g_autofree char *path = NULL, *svg_path = NULL, *compare = NULL;
    const GOptionEntry entries[] = {
        {"svg", 0, 0, G_OPTION_ARG_FILENAME, &svg_path,
         "Also draw the decisions as SVG into FILE (-: to stdout, instead of the lines)", "FILE"},
        {"compare", 0, 0, G_OPTION_ARG_FILENAME, &compare,
         "Replay the trace against OTHER too, after the keyfile", "OTHER"},
        G_OPTION_ENTRY_NULL,
    };
    int rc = cli_parse(&spec, entries, &args, &path);
    if (rc >= 0)
        return rc;
    const char *trace = args[1] && strcmp(args[1], "-") != 0 ? args[1] : NULL;
    FILE *in = trace ? fopen(trace, "r") : stdin;
    if (!in) {
        fprintf(stderr, "sluice %s: %s: %s\n", COMMAND, trace, g_strerror(errno));
        return CLI_EXIT_USAGE;
    }
    const char *name = trace ? trace : "stdin";
    gboolean quiet = svg_path && strcmp(svg_path, "-") == 0;
    replay_svg *svg = svg_path ? replay_svg_new() : NULL;
    FILE *again = compare ? rereadable(in, name) : in;
    if (!again) {
        rc = CLI_EXIT_USAGE;
    } else {
        const char *keyfiles[] = {path, compare};
        for (guint i = 0; i < (compare ? 2u : 1u) && rc < 0; i++) {
            if (compare && !quiet)
                printf("# replay of %s\n", keyfiles[i]);
            if (i > 0 && fseek(again, 0, SEEK_SET) != 0) {
                fprintf(stderr, "sluice %s: %s: %s\n", COMMAND, name, g_strerror(errno));
                rc = CLI_EXIT_USAGE;
                break;
            }
            fflush(stdout);
            int one = replay_with(keyfiles[i], again, name, svg, quiet);
            if (one != CLI_EXIT_OK)
                rc = one;
        }
    }
    g_autoptr(GError) error = NULL;
    if (rc < 0 && svg && !replay_svg_write(svg, svg_path, &error))
        rc = cli_fail(COMMAND, error);
    if (rc < 0)
        rc = CLI_EXIT_OK;
    replay_svg_free(svg);
    if (again && again != in)
        fclose(again);
    if (trace)
        fclose(in);
    return rc;
}
