/* SPDX-License-Identifier: MIT */
/* The sluice command, run as a program: every subcommand, its output and exit
 * status, on the memory backend and on real Redis (SLUICE_TEST_BACKEND=redis, cluster,
 * sentinel, tls). */
#include "fixture.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH: the path of the built sluice command (tests/CMakeLists.txt)"
#endif

typedef struct {
    int status; /* the exit status */
    char *out;
    char *err;
} result;

static void result_free(result *r)
{
    g_free(r->out);
    g_free(r->err);
    g_free(r);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(result, result_free)

/* Runs argv (argv[0] is the program) and waits for it. */
static result *spawn(const char *const *argv)
{
    result *r = g_new0(result, 1);
    g_autoptr(GError) error = NULL;
    int wait_status;
    ck_assert_msg(g_spawn_sync(NULL, test_strv(argv), NULL, G_SPAWN_DEFAULT, NULL, NULL, &r->out,
                               &r->err, &wait_status, &error),
                  "cannot run %s: %s", argv[0], error ? error->message : "");
    ck_assert_msg(WIFEXITED(wait_status), "%s did not exit: %d", argv[0], wait_status);
    r->status = WEXITSTATUS(wait_status);
    return r;
}

/* Runs the sluice command with the arguments of args (NULL-terminated). */
static result *sluicev(const char *const *args)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, test_unconst(SLUICE_CLI_PATH));
    for (; *args; args++)
        g_ptr_array_add(argv, test_unconst(*args));
    g_ptr_array_add(argv, NULL);
    return spawn((const char *const *)argv->pdata);
}

/* The same with the arguments that follow. */
static result *sluice(const char *first, ...) G_GNUC_NULL_TERMINATED;

static result *sluice(const char *first, ...)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    va_list list;
    va_start(list, first);
    for (const char *a = first; a; a = va_arg(list, const char *))
        g_ptr_array_add(args, test_unconst(a));
    va_end(list);
    g_ptr_array_add(args, NULL);
    return sluicev((const char *const *)args->pdata);
}

/* Asserts a run's exit status and its whole stdout and stderr. */
#define ck_run(r, status_, out_, err_)                                                             \
    do {                                                                                           \
        ck_assert_msg((r)->status == (status_), "exit %d, expected %d; stderr: %s", (r)->status,   \
                      (status_), (r)->err);                                                        \
        ck_assert_str_eq((r)->out, (out_));                                                        \
        ck_assert_str_eq((r)->err, (err_));                                                        \
    } while (0)

/* TRUE when every process shares each limit: on Redis, and in a zone (shm). */
static gboolean shared(void)
{
    return fixture_on_redis() || fixture_on_shm();
}

/* A keyfile for the command: on Redis it points at the suite's redis-server,
 * which is flushed first (as fixture_init does); on shm at the test's zone, made
 * afresh. */
static char *keyfile(const char *contents)
{
    if (!shared())
        return fixture_write_keyfile(contents);
    fixture_flush();
    g_autofree char *with = fixture_contents(contents);
    return fixture_write_keyfile(with);
}

/* 1 when key exists on the server (or the Cluster's master) that holds it, else 0. */
static long long redis_exists(const char *key)
{
    redisReply *reply = fixture_command(key, "EXISTS %s", key);
    ck_assert_int_eq(reply->type, REDIS_REPLY_INTEGER);
    long long n = reply->integer;
    freeReplyObject(reply);
    return n;
}

/* The DEL commands each master of the suite's Cluster has run so far (at most 16). */
static void dels_per_master(gint64 *dels)
{
    test_cluster *c = fixture_cluster();
    for (int m = 0; m < c->masters && m < 16; m++) {
        dels[m] = test_redis_command_calls(c->node[m], "del");
        ck_assert_int_ge(dels[m], 0);
    }
}

/* ---- help ------------------------------------------------------------------------------- */

static const char *const commands[] = {"lint",  "acquire",  "status", "reset",
                                       "block", "penalize", "replay", "zone"};

START_TEST(help_is_printed_for_the_command_and_each_subcommand)
{
    g_autoptr(result) all = sluice("--help", NULL);
    ck_assert_int_eq(all->status, 0);
    ck_assert(g_str_has_prefix(all->out, "Usage:\n  sluice COMMAND"));
    for (guint i = 0; i < G_N_ELEMENTS(commands); i++) {
        g_autofree char *row = g_strdup_printf("\n  %-9s ", commands[i]);
        ck_assert_msg(strstr(all->out, row), "%s is not listed", commands[i]);

        g_autofree char *usage = g_strdup_printf("Usage:\n  sluice %s [OPTION…]", commands[i]);
        g_autoptr(result) one = sluice(commands[i], "--help", NULL);
        ck_assert_int_eq(one->status, 0);
        ck_assert_msg(g_str_has_prefix(one->out, usage), "%s", one->out);
        ck_assert(strstr(one->out, "Exit status:"));
        ck_assert_str_eq(one->err, "");
        g_autoptr(result) via_help = sluice("help", commands[i], NULL);
        ck_assert_str_eq(via_help->out, one->out);
    }
    g_autoptr(result) none = sluicev((const char *const[]){NULL});
    ck_assert_int_eq(none->status, 2);
    ck_assert(g_str_has_prefix(none->err, "Usage:"));
    g_autoptr(result) unknown = sluice("frobnicate", NULL);
    ck_run(unknown, 2, "", "sluice: no command 'frobnicate'; try 'sluice --help'\n");
    g_autoptr(result) bad_option = sluice("acquire", "--bogus", NULL);
    ck_run(bad_option, 2, "",
           "sluice acquire: Unknown option --bogus\nTry 'sluice acquire --help'.\n");
    g_autoptr(result) version = sluice("--version", NULL);
    ck_run(version, 0, "sluice " SLUICE_VERSION_STRING "\n", ""); /* project(VERSION) */
}
END_TEST

/* ---- lint ------------------------------------------------------------------------------- */

START_TEST(lint_says_ok_for_a_valid_keyfile)
{
    g_autofree char *path = fixture_write_keyfile(
        "[sluice]\nbackend = redis\nredis = redis://127.0.0.1:1/0\n" /* never connected to */
        "[limit:a]\nlimit = 5   # permits\nwindow = 10s\n");
    g_autoptr(result) r = sluice("lint", path, NULL);
    g_autofree char *expected = g_strdup_printf("%s: ok\n", path);
    ck_run(r, 0, expected, "");
}
END_TEST

START_TEST(lint_lists_the_overrides_of_a_valid_keyfile_and_refuses_bad_ones)
{
    g_autofree char *path = fixture_write_keyfile(
        "[limit:search]\nalgorithm = gcra\nlimit = 100\nwindow = 1m\nburst = 10\n"
        "[override:search]\npartner-7 = 1000/1m/50   # a partner\nhealth = 1/1m\n"
        "scraper-3 = blocked\nhealth = unlimited\n"); /* health twice: the last is read */
    g_autoptr(result) r = sluice("lint", path, NULL);
    g_autofree char *expected =
        g_strdup_printf("%s: ok\n"
                        "%s: [override:search] partner-7 = 1000/1m/50: instead of 100/1m/10\n"
                        "%s: [override:search] scraper-3 = blocked: always denied\n"
                        "%s: [override:search] health = unlimited: never limited\n",
                        path, path, path, path);
    ck_run(r, 0, expected, "");
    g_autofree char *bad = fixture_write_keyfile(
        "[override:nope]\nk = 1/1s\n[limit:shared]\nlimit = 5\nwindow = 1s\nper_key = false\n"
        "[override:shared]\nk = 1/1s\n[limit:a]\nlimit = 5\nwindow = 1s\n"
        "[override:a]\nk = 5 per second\n");
    g_autoptr(result) refused = sluice("lint", bad, NULL);
    g_autofree char *problems = g_strdup_printf(
        "%s: [override:nope]: no such limit; expected the [limit:NAME] group these overrides "
        "are exceptions of\n"
        "%s: [override:shared]: the limit has per_key = false: it ignores keys, so no key can "
        "have an override; expected per_key = true, or no [override:NAME]\n"
        "%s: [override:a] k = 5 per second: expected blocked, unlimited or LIMIT/WINDOW, e.g. "
        "1000/1m\n",
        bad, bad, bad);
    ck_run(refused, 1, problems, "");
}
END_TEST

START_TEST(lint_lists_every_problem_of_a_bad_keyfile_and_exits_1)
{
    g_autofree char *path =
        fixture_write_keyfile("[sluice]\nbackend = mongo\n"
                              "[limit:login]\nlimit = 0\nwindow = 10\nwidnow = 1s\n"
                              "[limits:typo]\nlimit = 1\n");
    g_autoptr(result) r = sluice("lint", path, NULL);
    g_autofree char *expected = g_strdup_printf(
        "%s: [sluice] backend = mongo: expected memory, redis or shm\n"
        "%s: [limit:login] limit = 0: must be at least 1\n"
        "%s: [limit:login] window = 10: missing unit, e.g. 10s\n"
        "%s: [limit:login] widnow: unknown key; expected one of algorithm, limit, window, "
        "burst, wait, mode, per_key, bands, shadow_bands, anchor, prefetch, prefetch_ttl, "
        "warmup, min_limit, controller\n"
        "%s: [limits:typo]: unknown group; expected [sluice], [limit:NAME] or [override:NAME]\n",
        path, path, path, path, path);
    ck_run(r, 1, expected, "");

    g_autoptr(result) missing = sluice("lint", "/nonexistent/limits.ini", NULL);
    ck_assert_int_eq(missing->status, 2);
    ck_assert_str_eq(missing->out, "");
    ck_assert(g_str_has_prefix(missing->err, "sluice lint: "));
    ck_assert(strstr(missing->err, "/nonexistent/limits.ini"));
    g_autoptr(result) nothing = sluice("lint", NULL);
    ck_run(nothing, 2, "", "sluice lint: missing FILE…\nTry 'sluice lint --help'.\n");
}
END_TEST

START_TEST(lint_refuses_a_bad_cluster_url_without_echoing_its_password)
{
    g_autofree char *path = fixture_write_keyfile(
        "[sluice]\nbackend = redis\nredis = redis+cluster://app:TOPSECRET@10.0.0.1:7000,"
        "10.0.0.2:x\n");
    g_autoptr(result) r = sluice("lint", path, NULL);
    g_autofree char *expected =
        g_strdup_printf("%s: [sluice] redis: the port is not a number from 1 to 65535; expected "
                        "redis+cluster://[user:password@]host:port[,host:port...]\n",
                        path);
    ck_run(r, 1, expected, "");
    ck_assert(!strstr(r->out, "TOPSECRET"));
}
END_TEST

/* ---- acquire -------------------------------------------------------------------------------- */

static const char *hourly = "[limit:api]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1h\n";

/* The numbers of "allowed=A limit=L remaining=R retry_after_ms=X reset_after_ms=Y\n". */
static void parse_decision(const char *line, sluice_decision *d)
{
    int allowed;
    ck_assert_msg(sscanf(line,
                         "allowed=%d limit=%" G_GINT64_FORMAT " remaining=%" G_GINT64_FORMAT
                         " retry_after_ms=%" G_GINT64_FORMAT " reset_after_ms=%" G_GINT64_FORMAT,
                         &allowed, &d->limit, &d->remaining, &d->retry_after_ms,
                         &d->reset_after_ms) == 5,
                  "not a decision: %s", line);
    d->allowed = allowed;
}

START_TEST(acquire_prints_one_decision_and_exits_0_when_allowed_and_1_when_denied)
{
    g_autofree char *path = keyfile(hourly);
    /* a fresh fixed window: every number is exact, whatever the clock */
    g_autoptr(result) first = sluice("acquire", "--config", path, "api", "--key", "alice", NULL);
    ck_run(first, 0, "allowed=1 limit=3 remaining=2 retry_after_ms=-1 reset_after_ms=3600000\n",
           "");
    g_autoptr(result) json = sluice("acquire", "-c", path, "api", "-k", "bob", "--json", NULL);
    ck_run(json, 0,
           "{\"allowed\":true,\"limit\":3,\"remaining\":2,\"retry_after_ms\":-1,"
           "\"reset_after_ms\":3600000}\n",
           "");
    /* more than the capacity: denied, never passes */
    g_autoptr(result) huge = sluice("acquire", "-c", path, "api", "-k", "carol", "-p", "4", NULL);
    ck_run(huge, 1, "allowed=0 limit=3 remaining=3 retry_after_ms=-1 reset_after_ms=0\n", "");

    if (!shared())
        return; /* each process has its own memory backend: the next call is a first one */
    /* on Redis (and in a zone) the limit is shared by every process: alice has 2 left,
     * then none */
    g_autoptr(result) second = sluice("acquire", "-c", path, "api", "-k", "alice", "-p", "2", NULL);
    ck_assert_int_eq(second->status, 0);
    sluice_decision d;
    parse_decision(second->out, &d);
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_le(d.reset_after_ms, 3600000);
    ck_assert_int_gt(d.reset_after_ms, 3600000 - 60000);
    g_autoptr(result) denied = sluice("acquire", "-c", path, "api", "-k", "alice", NULL);
    ck_assert_int_eq(denied->status, 1);
    parse_decision(denied->out, &d);
    ck_assert(!d.allowed);
    ck_assert_int_eq(d.limit, 3);
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_gt(d.retry_after_ms, 3600000 - 60000);
    ck_assert_int_eq(d.retry_after_ms, d.reset_after_ms);
}
END_TEST

START_TEST(acquire_refuses_bad_arguments_with_exit_2)
{
    g_autofree char *path = keyfile(hourly);
    g_autoptr(result) unknown = sluice("acquire", "-c", path, "nope", NULL);
    g_autofree char *no_rule =
        g_strdup_printf("sluice acquire: %s has no rule [limit:nope]\n", path);
    ck_run(unknown, 2, "", no_rule);
    g_autoptr(result) empty_key = sluice("acquire", "-c", path, "api", "--key", "", NULL);
    ck_run(empty_key, 2, "",
           "sluice acquire: key is empty; expected NULL for no key, or a string\n");
    g_autoptr(result) negative = sluice("acquire", "-c", path, "api", "--permits", "-1", NULL);
    ck_run(negative, 2, "", "sluice acquire: permits is negative; expected 0 (a peek) or more\n");
    g_autoptr(result) no_name = sluice("acquire", "-c", path, NULL);
    ck_run(no_name, 2, "", "sluice acquire: missing NAME\nTry 'sluice acquire --help'.\n");
    g_autoptr(result) no_config = sluice("acquire", "api", NULL);
    ck_run(no_config, 2, "",
           "sluice acquire: no keyfile; expected --config FILE (or SLUICE_CONFIG in the "
           "environment)\nTry 'sluice acquire --help'.\n");
    g_autofree char *bad = fixture_write_keyfile("[limit:api]\nlimit = 0\nwindow = 1s\n");
    g_autoptr(result) invalid = sluice("acquire", "-c", bad, "api", NULL);
    g_autofree char *problem =
        g_strdup_printf("sluice acquire: %s: [limit:api] limit = 0: must be at least 1\n", bad);
    ck_run(invalid, 2, "", problem);
}
END_TEST

START_TEST(every_subcommand_exits_3_when_the_backend_fails)
{
    g_autofree char *path = fixture_write_keyfile(
        "[sluice]\nbackend = redis\nredis = redis://127.0.0.1:1/0\n[limit:api]\nlimit = 1\n"
        "window = 1s\n");
    g_autofree char *trace = fixture_write_keyfile("0 api\n");
    const char *const runs[][5] = {{"acquire", "-c", path, "api", NULL},
                                   {"status", "-c", path, NULL},
                                   {"reset", "-c", path, "api", NULL},
                                   {"replay", "-c", path, trace, NULL}};
    for (guint i = 0; i < G_N_ELEMENTS(runs); i++) {
        g_autoptr(result) r = sluicev(runs[i]);
        ck_assert_msg(r->status == 3, "%s: exit %d", runs[i][0], r->status);
        ck_assert_str_eq(r->out, "");
        ck_assert_msg(strstr(r->err, "redis 127.0.0.1:1: connect"), "%s", r->err);
    }
}
END_TEST

/* ---- status ------------------------------------------------------------------------------- */

static const char *three_rules = "[limit:api]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1h\n"
                                 "[limit:login]\nalgorithm = gcra\nlimit = 10\nwindow = 1m\n"
                                 "burst = 4\n"
                                 "[limit:shared]\nalgorithm = concurrency\nlimit = 2\n"
                                 "per_key = false\n";

START_TEST(status_shows_every_rule_in_keyfile_order)
{
    g_autofree char *path = keyfile(three_rules);
    g_autoptr(result) all = sluice("status", "-c", path, NULL);
    ck_run(all, 0,
           "api - algorithm=fixed_window window=1h anchor=first_hit limit=3 remaining=3 "
           "retry_after_ms=-1 reset_after_ms=0\n"
           "login - algorithm=gcra window=1m limit=4 remaining=4 retry_after_ms=-1 "
           "reset_after_ms=0\n"
           "shared - algorithm=concurrency window=1m limit=2 remaining=2 retry_after_ms=-1 "
           "reset_after_ms=0\n",
           "");
    /* a key applies to each rule; per_key = false shares one state, shown as - */
    g_autoptr(result) json = sluice("status", "-c", path, "--key", "al\"ice", "--json", NULL);
    ck_run(json, 0,
           "{\"name\":\"api\",\"key\":\"al\\\"ice\",\"algorithm\":\"fixed_window\","
           "\"window_ms\":3600000,\"anchor\":\"first_hit\",\"limit\":3,"
           "\"remaining\":3,\"retry_after_ms\":-1,\"reset_after_ms\":0}\n"
           "{\"name\":\"login\",\"key\":\"al\\\"ice\",\"algorithm\":\"gcra\",\"window_ms\":60000,"
           "\"limit\":4,"
           "\"remaining\":4,\"retry_after_ms\":-1,\"reset_after_ms\":0}\n"
           "{\"name\":\"shared\",\"key\":null,\"algorithm\":\"concurrency\",\"window_ms\":60000,"
           "\"limit\":2,"
           "\"remaining\":2,\"retry_after_ms\":-1,\"reset_after_ms\":0}\n",
           "");
    g_autoptr(result) one = sluice("status", "-c", path, "login", "-k", "bob", NULL);
    ck_run(one, 0,
           "login bob algorithm=gcra window=1m limit=4 remaining=4 retry_after_ms=-1 "
           "reset_after_ms=0\n",
           "");
    g_autoptr(result) unknown = sluice("status", "-c", path, "nope", NULL);
    ck_assert_int_eq(unknown->status, 2);
}
END_TEST

/* A limit with overrides: status says which rule decides the key's calls. */
START_TEST(status_says_which_rule_decides_a_key)
{
    g_autofree char *path = keyfile("[limit:search]\nalgorithm = fixed_window\nlimit = 2\n"
                                    "window = 1m\n[override:search]\npartner-7 = 5/10s\n"
                                    "scraper-3 = blocked\nhealth = unlimited\n");
    g_autoptr(result) partner = sluice("status", "-c", path, "search", "-k", "partner-7", NULL);
    ck_run(
        partner, 0,
        "search partner-7 algorithm=fixed_window window=10s anchor=first_hit limit=5 remaining=5 "
        "retry_after_ms=-1 "
        "reset_after_ms=0 rule=override\n",
        "");
    g_autoptr(result) scraper =
        sluice("status", "-c", path, "search", "-k", "scraper-3", "--json", NULL);
    ck_run(scraper, 0,
           "{\"name\":\"search\",\"key\":\"scraper-3\",\"algorithm\":\"fixed_window\","
           "\"window_ms\":60000,\"anchor\":\"first_hit\",\"limit\":2,\"remaining\":0,\"retry_after_"
           "ms\":-1,\"reset_after_ms\":0,"
           "\"blocked\":true,\"rule\":\"blocked\"}\n",
           "");
    g_autoptr(result) health = sluice("status", "-c", path, "search", "-k", "health", NULL);
    ck_run(health, 0,
           "search health algorithm=fixed_window window=1m anchor=first_hit "
           "limit=9223372036854775807 "
           "remaining=9223372036854775807 retry_after_ms=-1 reset_after_ms=0 rule=unlimited\n",
           "");
    g_autoptr(result) other = sluice("status", "-c", path, "-k", "bob", NULL);
    ck_run(other, 0,
           "search bob algorithm=fixed_window window=1m anchor=first_hit limit=2 remaining=2 "
           "retry_after_ms=-1 "
           "reset_after_ms=0 rule=own\n",
           "");
}
END_TEST

/* Each line has the window of the rule that decides the calls (an override's for a key it
 * names) and, for fixed_window, where its windows start. */
START_TEST(status_shows_the_window_and_anchor_of_a_rule)
{
    g_autofree char *path = keyfile("[limit:day]\nalgorithm = fixed_window\nlimit = 100\n"
                                    "window = 1d\nanchor = epoch\n[override:day]\nbig = 1000/12h\n"
                                    "[limit:lease]\nalgorithm = concurrency\nlimit = 2\n"
                                    "window = 90s\n");
    g_autoptr(result) text = sluice("status", "-c", path, "-k", "big", NULL);
    ck_run(text, 0,
           "day big algorithm=fixed_window window=12h anchor=epoch limit=1000 remaining=1000 "
           "retry_after_ms=-1 reset_after_ms=0 rule=override\n"
           "lease big algorithm=concurrency window=90s limit=2 remaining=2 retry_after_ms=-1 "
           "reset_after_ms=0\n",
           "");
    g_autoptr(result) json = sluice("status", "-c", path, "day", "-k", "small", "--json", NULL);
    ck_run(json, 0,
           "{\"name\":\"day\",\"key\":\"small\",\"algorithm\":\"fixed_window\","
           "\"window_ms\":86400000,\"anchor\":\"epoch\",\"limit\":100,\"remaining\":100,"
           "\"retry_after_ms\":-1,\"reset_after_ms\":0,\"rule\":\"own\"}\n",
           "");
}
END_TEST

/* A rule with bands shows them as the keyfile writes them, the burst when it is not
 * the limit; the decision is the tightest band's. */
START_TEST(status_shows_the_bands_and_shadow_bands_of_a_rule)
{
    g_autofree char *path =
        keyfile("[limit:g]\nalgorithm = gcra\nlimit = 3000\nwindow = 1s\n"
                "bands = 7/1s, 100000/1d/5000\nshadow_bands = 90/90s, 5/1500ms\n");
    g_autoptr(result) text = sluice("status", "-c", path, NULL);
    ck_run(text, 0,
           "g - algorithm=gcra window=1s limit=7 remaining=7 retry_after_ms=-1 reset_after_ms=0 "
           "bands=7/1s,100000/1d/5000 shadow_bands=90/90s,5/1500ms\n",
           "");
    g_autoptr(result) json = sluice("status", "-c", path, "--json", NULL);
    ck_run(json, 0,
           "{\"name\":\"g\",\"key\":null,\"algorithm\":\"gcra\",\"window_ms\":1000,\"limit\":7,"
           "\"remaining\":7,"
           "\"retry_after_ms\":-1,\"reset_after_ms\":0,\"bands\":[\"7/1s\",\"100000/1d/5000\"],"
           "\"shadow_bands\":[\"90/90s\",\"5/1500ms\"]}\n",
           "");
    g_autofree char *shadow_only = keyfile("[limit:f]\nalgorithm = fixed_window\nlimit = 3\n"
                                           "window = 1h\nshadow_bands = 1/1m\n");
    g_autoptr(result) f = sluice("status", "-c", shadow_only, NULL);
    ck_run(f, 0,
           "f - algorithm=fixed_window window=1h anchor=first_hit limit=3 remaining=3 "
           "retry_after_ms=-1 reset_after_ms=0 "
           "shadow_bands=1/1m\n",
           "");
}
END_TEST

/* An adaptive rule shows its controller and bounds; its limit is this process's:
 * a fresh one, at its floor. */
START_TEST(status_shows_an_adaptive_rule_at_its_floor)
{
    g_autofree char *path =
        keyfile("[limit:db]\nalgorithm = adaptive\nlimit = 200\nmin_limit = 3\n");
    g_autoptr(result) text = sluice("status", "-c", path, NULL);
    ck_run(text, 0,
           "db - algorithm=adaptive limit=3 remaining=3 retry_after_ms=-1 reset_after_ms=0 "
           "controller=gradient min_limit=3 max_limit=200\n",
           "");
    g_autoptr(result) json = sluice("status", "-c", path, "--json", NULL);
    ck_run(json, 0,
           "{\"name\":\"db\",\"key\":null,\"algorithm\":\"adaptive\",\"limit\":3,"
           "\"remaining\":3,\"retry_after_ms\":-1,\"reset_after_ms\":0,"
           "\"controller\":\"gradient\",\"min_limit\":3,\"max_limit\":200}\n",
           "");
}
END_TEST

static const char *const algorithms[] = {"fixed_window", "sliding_log", "sliding_window",
                                         "token_bucket", "gcra",        "concurrency"};

START_TEST(status_consumes_nothing_for_every_algorithm)
{
    g_autofree char *ini =
        g_strdup_printf("[limit:r]\nalgorithm = %s\nlimit = 3\nwindow = 1h\n", algorithms[_i]);
    g_autofree char *path = keyfile(ini);
    g_autoptr(result) took = sluice("acquire", "-c", path, "r", "-k", "k", "-p", "2", NULL);
    ck_assert_int_eq(took->status, 0);
    /* on memory, every process starts full; on Redis, 1 is left and stays left; in a
     * zone too, but for concurrency: the leases of a process that has exited are
     * given back */
    gboolean leases_gone = fixture_on_shm() && strcmp(algorithms[_i], "concurrency") == 0;
    gint64 left = shared() && !leases_gone ? 1 : 3;
    for (int i = 0; i < 3; i++) {
        g_autoptr(result) status = sluice("status", "-c", path, "r", "-k", "k", "--json", NULL);
        ck_assert_int_eq(status->status, 0);
        g_autofree char *expected = g_strdup_printf("\"remaining\":%" G_GINT64_FORMAT ",", left);
        ck_assert_msg(strstr(status->out, expected), "%s", status->out);
    }
    if (shared() && !leases_gone) {
        g_autoptr(result) last = sluice("acquire", "-c", path, "r", "-k", "k", NULL);
        ck_assert_int_eq(last->status, 0);
        ck_assert(strstr(last->out, " remaining=0 "));
        g_autoptr(result) full = sluice("acquire", "-c", path, "r", "-k", "k", NULL);
        ck_assert_int_eq(full->status, 1);
    }
}
END_TEST

/* ---- zone ----------------------------------------------------------------------------------- */

/* sluice zone (shm): what the zone holds, one line or JSON, with what an acquire
 * left in it; --remove removes its file, and a keyfile without a zone is refused. */
START_TEST(zone_prints_what_the_zone_holds_and_removes_it)
{
    g_autofree char *path = keyfile(hourly);
    g_autoptr(result) first = sluice("acquire", "-c", path, "api", "-k", "alice", NULL);
    ck_assert_int_eq(first->status, 0);
    g_autoptr(result) line = sluice("zone", "-c", path, NULL);
    g_autofree char *head = g_strdup_printf(
        "zone=%s path=/dev/shm/sluice-%s size=8388608 capacity=", fixture_zone_name(),
        fixture_zone_name());
    ck_assert_msg(line->status == 0 && g_str_has_prefix(line->out, head), "%s%s", line->out,
                  line->err);
    /* one state, none evicted, this command the one process attached */
    ck_assert_msg(strstr(line->out, " keys=1 evictions=0 ") && strstr(line->out, " processes=1 ") &&
                      g_str_has_suffix(line->out, "\n"),
                  "%s", line->out);
    gint64 per_key = g_ascii_strtoll(strstr(line->out, " bytes_per_key=") + 15, NULL, 10);
    ck_assert_int_gt(per_key, 0);
    ck_assert_int_le(per_key, 64);
    g_autoptr(result) json = sluice("zone", "-c", path, "--json", NULL);
    ck_assert_int_eq(json->status, 0);
    ck_assert_msg(g_str_has_prefix(json->out, "{\"zone\":\"") && strstr(json->out, ",\"keys\":1,"),
                  "%s", json->out);
    g_autoptr(result) removed = sluice("zone", "-c", path, "--remove", NULL);
    ck_run(removed, 0, "", "");
    g_autofree char *file = g_strdup_printf("/dev/shm/sluice-%s", fixture_zone_name());
    ck_assert(!g_file_test(file, G_FILE_TEST_EXISTS));
    g_autoptr(result) again = sluice("zone", "-c", path, "--remove", NULL);
    ck_assert_int_eq(again->status, 2);
    ck_assert_str_eq(again->out, "");
    ck_assert_str_ne(again->err, "");
    g_autofree char *memory = fixture_write_keyfile(hourly);
    g_autoptr(result) none = sluice("zone", "-c", memory, NULL);
    g_autofree char *why = g_strdup_printf(
        "sluice zone: %s: no zone; expected [sluice] backend = shm and shm = NAME\n", memory);
    ck_run(none, 2, "", why);
}
END_TEST

/* ---- reset ---------------------------------------------------------------------------------- */

START_TEST(reset_then_acquire_shows_a_full_limit)
{
    g_autofree char *path = keyfile(hourly);
    g_autoptr(result) took = sluice("acquire", "-c", path, "api", "-k", "alice", "-p", "3", NULL);
    ck_assert_int_eq(took->status, 0);
    g_autoptr(result) other = sluice("acquire", "-c", path, "api", "-k", "bob", "-p", "3", NULL);
    ck_assert_int_eq(other->status, 0);
    g_autoptr(result) reset = sluice("reset", "-c", path, "api", "--key", "alice", NULL);
    ck_run(reset, 0, "", "");
    g_autoptr(result) again = sluice("acquire", "-c", path, "api", "-k", "alice", NULL);
    ck_run(again, 0, "allowed=1 limit=3 remaining=2 retry_after_ms=-1 reset_after_ms=3600000\n",
           "");
    if (shared()) { /* bob's state is his own */
        g_autoptr(result) bob = sluice("acquire", "-c", path, "api", "-k", "bob", NULL);
        ck_assert_int_eq(bob->status, 1);
    }
    g_autoptr(result) unknown = sluice("reset", "-c", path, "nope", NULL);
    ck_assert_int_eq(unknown->status, 2);
    g_autoptr(result) no_name = sluice("reset", "-c", path, NULL);
    ck_assert_int_eq(no_name->status, 2);
}
END_TEST

/* ---- block and penalize ------------------------------------------------------------------ */

START_TEST(block_and_penalize_act_on_a_key_and_refuse_bad_arguments)
{
    g_autofree char *path = keyfile("[limit:api]\nalgorithm = fixed_window\nlimit = 3\n"
                                    "window = 1m\n[limit:jobs]\nalgorithm = concurrency\n"
                                    "limit = 2\n");
    g_autoptr(result) blocked =
        sluice("block", "-c", path, "api", "-k", "bob", "--for", "10m", NULL);
    ck_run(blocked, 0, "", "");
    g_autoptr(result) penalized = sluice("penalize", "-c", path, "api", "-k", "al", "2", NULL);
    ck_run(penalized, 0, "", "");
    if (shared()) { /* the limits outlive the command: the next one sees them */
        g_autoptr(result) bob = sluice("acquire", "-c", path, "api", "-k", "bob", NULL);
        ck_assert_int_eq(bob->status, 1);
        ck_assert_msg(strstr(bob->out, "allowed=0 limit=3 remaining=0 retry_after_ms=") &&
                          g_str_has_suffix(bob->out, " blocked=1\n"),
                      "%s", bob->out);
        g_autoptr(result) status = sluice("status", "-c", path, "api", "-k", "bob", NULL);
        ck_assert_int_eq(status->status, 0); /* a peek: it says blocked too */
        ck_assert_msg(g_str_has_prefix(status->out, "api bob algorithm=fixed_window ") &&
                          g_str_has_suffix(status->out, " blocked=1\n"),
                      "%s", status->out);
        g_autoptr(result) al = sluice("acquire", "-c", path, "api", "-k", "al", NULL);
        ck_assert_int_eq(al->status, 0); /* 2 taken by the penalty, 1 by this call */
        ck_assert_msg(g_str_has_prefix(al->out, "allowed=1 limit=3 remaining=0 retry_after_ms=-1 "),
                      "%s", al->out);
        g_autoptr(result) lifted =
            sluice("block", "-c", path, "api", "-k", "bob", "--for", "0", NULL);
        ck_run(lifted, 0, "", "");
        g_autoptr(result) again = sluice("acquire", "-c", path, "api", "-k", "bob", NULL);
        ck_assert_int_eq(again->status, 0);
    }
    g_autoptr(result) no_for = sluice("block", "-c", path, "api", NULL);
    ck_run(no_for, 2, "",
           "sluice block: missing --for DURATION, e.g. --for 10m\n"
           "Try 'sluice block --help'.\n");
    g_autoptr(result) bad_for = sluice("block", "-c", path, "api", "--for", "1.5s", NULL);
    ck_run(bad_for, 2, "",
           "sluice block: --for 1.5s: expected a whole number and a unit (ms s m h d), e.g. "
           "10m, at most 36500d; or 0\nTry 'sluice block --help'.\n");
    g_autoptr(result) too_long = sluice("block", "-c", path, "api", "--for", "36501d", NULL);
    ck_assert_int_eq(too_long->status, 2);
    g_autoptr(result) jobs = sluice("penalize", "-c", path, "jobs", "1", NULL);
    ck_run(jobs, 2, "",
           "sluice penalize: jobs: concurrency counts calls in flight; a penalty has nothing "
           "to take\n");
    g_autoptr(result) bad_permits = sluice("penalize", "-c", path, "api", "x1", NULL);
    ck_run(bad_permits, 2, "",
           "sluice penalize: PERMITS x1: expected a whole number, 0 or more\n"
           "Try 'sluice penalize --help'.\n");
    g_autoptr(result) no_rule = sluice("block", "-c", path, "nope", "--for", "1s", NULL);
    ck_assert_int_eq(no_rule->status, 2);
}
END_TEST

/* ---- replay --------------------------------------------------------------------------------- */

static const char *replay_rules =
    "[limit:api]\nalgorithm = fixed_window\nlimit = 2\nwindow = 1s\n"
    "[limit:upload]\nalgorithm = token_bucket\nlimit = 2\nwindow = 1s\nwait = 1s\n"
    "[limit:login]\nalgorithm = sliding_log\nlimit = 1\nwindow = 1s\nwait = 1500ms\n"
    "[limit:jobs]\nalgorithm = concurrency\nlimit = 1\nwindow = 300ms\nwait = 1s\n"
    "[limit:global]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\nburst = 2\nper_key = false\n";

static const char *trace = "# a trace: T_MS NAME [KEY [PERMITS]]\n"
                           "0 api alice\n"
                           "0 api alice\n"
                           "0 api alice\n"
                           "0 api bob 2\n"
                           "0 upload u\n"
                           "0 upload u\n"
                           "0 upload u\n"
                           "0 login\n"
                           "0 login -\n"
                           "0 jobs\n"
                           "100 jobs\n"
                           "100\tupload u\n"
                           "\n"
                           "250 global x\n"
                           "250 global y\n"
                           "250 global z 2\n"
                           "500 api alice\n"
                           "1000 api alice   # a new window\n"
                           "1000 login\n"
                           "1200 other k 3\n";

/* Worked out by hand (docs/sluice.1 has the rules of waiting calls):
 * api, fixed_window 2 per 1 s: alice 2 then denied until 1000; bob's own 2.
 * upload, token_bucket 2 per 1 s (a token per 500 ms), wait 1 s: the third call at 0
 *   reserves the token due at 500; the call at 100 reserves the one due at 1000.
 * login, sliding_log 1 per 1 s, wait 1.5 s: the second call at 0 waits until the first
 *   leaves at 1000; the call at 1000 then waits until 2000.
 * jobs, concurrency 1 with 300 ms leases, wait 1 s: the call at 100 waits for the
 *   lease taken at 0 to expire at 300.
 * global, gcra 10 per 1 s (100 ms each), burst 2, one state for every key.
 * other has no rule: not limited. */
static const char *replayed =
    "0 api alice 1 allowed=1 limit=2 remaining=1 retry_after_ms=-1 reset_after_ms=1000\n"
    "0 api alice 1 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=1000\n"
    "0 api alice 1 allowed=0 limit=2 remaining=0 retry_after_ms=1000 reset_after_ms=1000\n"
    "0 api bob 2 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=1000\n"
    "0 upload u 1 allowed=1 limit=2 remaining=1 retry_after_ms=-1 reset_after_ms=500 "
    "waited_ms=0\n"
    "0 upload u 1 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=1000 "
    "waited_ms=0\n"
    "0 upload u 1 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=1500 "
    "waited_ms=500\n"
    "0 login - 1 allowed=1 limit=1 remaining=0 retry_after_ms=-1 reset_after_ms=1000 "
    "waited_ms=0\n"
    "0 login - 1 allowed=1 limit=1 remaining=0 retry_after_ms=-1 reset_after_ms=1000 "
    "waited_ms=1000\n"
    "0 jobs - 1 allowed=1 limit=1 remaining=0 retry_after_ms=-1 reset_after_ms=300 waited_ms=0\n"
    "100 jobs - 1 allowed=1 limit=1 remaining=0 retry_after_ms=-1 reset_after_ms=300 "
    "waited_ms=200\n"
    "100 upload u 1 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=1900 "
    "waited_ms=900\n"
    "250 global x 1 allowed=1 limit=2 remaining=1 retry_after_ms=-1 reset_after_ms=100\n"
    "250 global y 1 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=200\n"
    "250 global z 2 allowed=0 limit=2 remaining=0 retry_after_ms=200 reset_after_ms=200\n"
    "500 api alice 1 allowed=0 limit=2 remaining=0 retry_after_ms=500 reset_after_ms=500\n"
    "1000 api alice 1 allowed=1 limit=2 remaining=1 retry_after_ms=-1 reset_after_ms=1000\n"
    "1000 login - 1 allowed=1 limit=1 remaining=0 retry_after_ms=-1 reset_after_ms=1000 "
    "waited_ms=1000\n"
    "1200 other k 3 allowed=1 limit=9223372036854775807 remaining=9223372036854775807 "
    "retry_after_ms=-1 reset_after_ms=0\n"
    "summary api calls=6 admitted=4 denied=2 permits_admitted=5 permits_denied=2\n"
    "summary upload calls=4 admitted=4 denied=0 permits_admitted=4 permits_denied=0\n"
    "summary login calls=3 admitted=3 denied=0 permits_admitted=3 permits_denied=0\n"
    "summary jobs calls=2 admitted=2 denied=0 permits_admitted=2 permits_denied=0\n"
    "summary global calls=3 admitted=2 denied=1 permits_admitted=2 permits_denied=2\n"
    "summary other calls=1 admitted=1 denied=0 permits_admitted=3 permits_denied=0\n";

START_TEST(replay_prints_the_exact_decisions_of_a_trace)
{
    g_autofree char *path = keyfile(replay_rules);
    g_autofree char *trace_path = fixture_write_keyfile(trace);
    g_autofree char *warning =
        g_strdup_printf("sluice replay: %s: no rule [limit:other]: not limited\n", trace_path);
    gint64 start = g_get_monotonic_time();
    g_autoptr(result) r = sluice("replay", "--config", path, trace_path, NULL);
    ck_run(r, 0, replayed, warning);
    /* two virtual seconds with waits of up to a second pass in far less real time
     * (valgrind, which runs the command too, slows it by fixture_time_scale()) */
    ck_assert_int_lt(g_get_monotonic_time() - start, 1000000 * fixture_time_scale());
    /* replaying again gives the same: nothing was left behind */
    g_autoptr(result) again = sluice("replay", "--config", path, trace_path, NULL);
    ck_run(again, 0, replayed, warning);
}
END_TEST

/* The replay decides each key under its override, on every backend. */
START_TEST(replay_applies_overrides)
{
    g_autofree char *path = keyfile("[limit:api]\nalgorithm = fixed_window\nlimit = 1\n"
                                    "window = 1s\n[override:api]\nbig = 2/1s\nbad = blocked\n"
                                    "ops = unlimited\n");
    g_autofree char *trace_path =
        fixture_write_keyfile("0 api big\n0 api big\n0 api big\n0 api bad\n0 api ops 5\n"
                              "0 api bob\n0 api bob\n");
    g_autoptr(result) r = sluice("replay", "-c", path, trace_path, NULL);
    ck_run(
        r, 0,
        "0 api big 1 allowed=1 limit=2 remaining=1 retry_after_ms=-1 reset_after_ms=1000\n"
        "0 api big 1 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=1000\n"
        "0 api big 1 allowed=0 limit=2 remaining=0 retry_after_ms=1000 reset_after_ms=1000\n"
        "0 api bad 1 allowed=0 limit=1 remaining=0 retry_after_ms=-1 reset_after_ms=0 blocked=1\n"
        "0 api ops 5 allowed=1 limit=9223372036854775807 remaining=9223372036854775807 "
        "retry_after_ms=-1 reset_after_ms=0\n"
        "0 api bob 1 allowed=1 limit=1 remaining=0 retry_after_ms=-1 reset_after_ms=1000\n"
        "0 api bob 1 allowed=0 limit=1 remaining=0 retry_after_ms=1000 reset_after_ms=1000\n"
        "summary api calls=7 admitted=4 denied=3 permits_admitted=8 permits_denied=3\n",
        "");
    g_unlink(trace_path);
}
END_TEST

/* A rule with a warm-up replays like any other, on every backend (10 per second from
 * cold, warmup 2 s: permits cost 290, 270, 250 ms; docs/algorithms.md), and status
 * shows it. */
START_TEST(replay_and_status_show_a_warm_up)
{
    g_autofree char *path =
        keyfile("[limit:w]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\nwarmup = 2s\n");
    g_autofree char *trace_path = fixture_write_keyfile("0 w\n100 w\n290 w\n300 w\n560 w\n");
    g_autoptr(result) r = sluice("replay", "-c", path, trace_path, NULL);
    ck_run(r, 0,
           "0 w - 1 allowed=1 limit=10 remaining=0 retry_after_ms=-1 reset_after_ms=590\n"
           "100 w - 1 allowed=0 limit=10 remaining=0 retry_after_ms=190 reset_after_ms=490\n"
           "290 w - 1 allowed=1 limit=10 remaining=0 retry_after_ms=-1 reset_after_ms=570\n"
           "300 w - 1 allowed=0 limit=10 remaining=0 retry_after_ms=260 reset_after_ms=560\n"
           "560 w - 1 allowed=1 limit=10 remaining=0 retry_after_ms=-1 reset_after_ms=550\n"
           "summary w calls=5 admitted=3 denied=2 permits_admitted=3 permits_denied=2\n",
           "");
    g_unlink(trace_path);
    g_autoptr(result) status = sluice("status", "-c", path, NULL);
    ck_run(status, 0,
           "w - algorithm=gcra window=1s limit=10 remaining=10 retry_after_ms=-1 reset_after_ms=0 "
           "warmup=2s\n",
           "");
}
END_TEST

START_TEST(replay_reads_the_trace_from_stdin)
{
    g_autofree char *path = keyfile(replay_rules);
    g_autofree char *trace_path = fixture_write_keyfile(trace);
    for (int dash = 0; dash < 2; dash++) {
        g_autofree char *q_cli = g_shell_quote(SLUICE_CLI_PATH);
        g_autofree char *q_path = g_shell_quote(path);
        g_autofree char *q_trace = g_shell_quote(trace_path);
        g_autofree char *line = g_strdup_printf("exec %s replay -c %s%s < %s", q_cli, q_path,
                                                dash ? " -" : "", q_trace);
        const char *argv[] = {"/bin/sh", "-c", line, NULL};
        g_autoptr(result) r = spawn(argv);
        ck_run(r, 0, replayed, "sluice replay: stdin: no rule [limit:other]: not limited\n");
    }
}
END_TEST

START_TEST(replay_leaves_no_key_behind_and_never_touches_the_live_limits)
{
    g_autofree char *path = keyfile(replay_rules);
    g_autofree char *trace_path = fixture_write_keyfile(trace);
    /* the service has taken one of alice's api permits, under a rule of the same algorithm
     * whose key outlives the test however slow it runs (replay_rules' lives 1 s) */
    g_autofree char *live =
        keyfile("[limit:api]\nalgorithm = fixed_window\nlimit = 2\nwindow = 1h\n");
    g_autoptr(result) took = sluice("acquire", "-c", live, "api", "-k", "alice", NULL);
    ck_assert_int_eq(took->status, 0);
    ck_assert_int_eq(fixture_keys(), 1);
    gint64 dels_before[16], dels_after[16];
    if (fixture_on_cluster())
        dels_per_master(dels_before);
    g_autoptr(result) r = sluice("replay", "-c", path, trace_path, NULL);
    ck_assert_int_eq(r->status, 0);
    ck_assert_str_eq(r->out, replayed); /* alice starts full in the replay */
    ck_assert_int_eq(fixture_keys(), 1);
    ck_assert_int_eq(redis_exists("sluice:fw:{3:api:alice}"), 1);
    if (fixture_on_cluster()) {
        /* on a Cluster its keys are spread over the masters (each key its own slot), and
         * each master deletes those it holds: a trace whose keys reach all three */
        g_autofree char *spread = fixture_write_keyfile("0 api k0\n0 api k1\n0 api k2 2\n");
        g_autoptr(result) all = sluice("replay", "-c", path, spread, NULL);
        ck_assert_int_eq(all->status, 0);
        ck_assert_int_eq(fixture_keys(), 1);
        dels_per_master(dels_after);
        for (int m = 0; m < fixture_cluster()->masters; m++)
            ck_assert_msg(dels_after[m] > dels_before[m], "master %d deleted nothing", m);
    }
    g_autoptr(result) status = sluice("status", "-c", live, "api", "-k", "alice", NULL);
    ck_assert(strstr(status->out, " remaining=1 "));

    /* a replay that stops at a bad line deletes what it wrote before it */
    g_autofree char *bad_trace = fixture_write_keyfile("0 login\n0 jobs\n5 jobs\n3 api\n");
    g_autoptr(result) bad = sluice("replay", "-c", path, bad_trace, NULL);
    ck_assert_int_eq(bad->status, 2);
    ck_assert_int_eq(fixture_keys(), 1);
}
END_TEST

START_TEST(replay_refuses_a_bad_line_naming_its_number)
{
    g_autofree char *path = keyfile(replay_rules);
    typedef struct {
        const char *trace, *message;
    } bad;
    const bad cases[] = {
        {"0 api\n# fine\n\n7\n", "4: no NAME; expected T_MS NAME [KEY [PERMITS]]"},
        {"0 api k 1 extra\n", "1: too many fields; expected T_MS NAME [KEY [PERMITS]]"},
        {"10 api\n9 api\n", "2: T_MS 9 is before the previous line's 10; expected times that "
                            "never decrease"},
        {"-1 api\n", "1: T_MS -1: expected milliseconds from the trace's start, 0 to "
                     "4000000000000"},
        {"1s api\n", "1: T_MS 1s: expected milliseconds from the trace's start, 0 to "
                     "4000000000000"},
        {"0 api k -1\n", "1: PERMITS -1: expected a whole number, 0 (a peek) to "
                         "1125899906842624"},
        {"0 api k x\n", "1: PERMITS x: expected a whole number, 0 (a peek) to "
                        "1125899906842624"},
        {"0 api \xff\n", "1: key is not valid UTF-8"},
    };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *trace_path = fixture_write_keyfile(cases[i].trace);
        g_autoptr(result) r = sluice("replay", "-c", path, trace_path, NULL);
        g_autofree char *expected =
            g_strdup_printf("sluice replay: %s:%s\n", trace_path, cases[i].message);
        ck_assert_int_eq(r->status, 2);
        ck_assert_str_eq(r->err, expected);
    }
    /* the lines before it were replayed and printed */
    g_autofree char *trace_path = fixture_write_keyfile("0 api\n1 api x y z\n");
    g_autoptr(result) r = sluice("replay", "-c", path, trace_path, NULL);
    ck_assert_str_eq(r->out, "0 api - 1 allowed=1 limit=2 remaining=1 retry_after_ms=-1 "
                             "reset_after_ms=1000\n");
    /* a missing trace, a bad keyfile (named as the user wrote it) */
    g_autoptr(result) missing = sluice("replay", "-c", path, "/nonexistent/trace", NULL);
    ck_run(missing, 2, "", "sluice replay: /nonexistent/trace: No such file or directory\n");
    g_autofree char *bad_keyfile = fixture_write_keyfile("[limit:api]\nlimit = 1\n");
    g_autoptr(result) invalid = sluice("replay", "-c", bad_keyfile, trace_path, NULL);
    g_autofree char *problem = g_strdup_printf(
        "sluice replay: %s: [limit:api] window: missing; expected a duration, e.g. window = 10s\n",
        bad_keyfile);
    ck_run(invalid, 2, "", problem);
}
END_TEST

/* PERMITS 0 is a peek, as in the API: it takes nothing and never waits. */
START_TEST(replay_reads_permits_0_as_a_peek)
{
    g_autofree char *path = keyfile(replay_rules);
    g_autofree char *trace_path = fixture_write_keyfile("0 api alice 0\n"
                                                        "0 api alice 2\n"
                                                        "10 api alice 0\n"
                                                        "10 upload u 2\n"
                                                        "20 upload u 0\n");
    g_autoptr(result) r = sluice("replay", "-c", path, trace_path, NULL);
    ck_run(r, 0,
           "0 api alice 0 allowed=1 limit=2 remaining=2 retry_after_ms=-1 reset_after_ms=0\n"
           "0 api alice 2 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=1000\n"
           "10 api alice 0 allowed=0 limit=2 remaining=0 retry_after_ms=990 reset_after_ms=990\n"
           "10 upload u 2 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=1000 "
           "waited_ms=0\n"
           "20 upload u 0 allowed=0 limit=2 remaining=0 retry_after_ms=490 reset_after_ms=990 "
           "waited_ms=0\n"
           "summary api calls=3 admitted=2 denied=1 permits_admitted=2 permits_denied=0\n"
           "summary upload calls=2 admitted=1 denied=1 permits_admitted=2 permits_denied=0\n",
           "");
}
END_TEST

/* Replays trace_text against a keyfile of rules: exit 0, stdout `expected`, no stderr. */
static void ck_replay(const char *rules, const char *trace_text, const char *expected)
{
    g_autofree char *path = keyfile(rules);
    g_autofree char *trace_path = fixture_write_keyfile(trace_text);
    g_autoptr(result) r = sluice("replay", "-c", path, trace_path, NULL);
    ck_run(r, 0, expected, "");
}

/* A rule with bands replays as the API decides: the band with the fewest remaining
 * is printed, a call one band refuses takes nothing from the others. */
START_TEST(replay_decides_bands_as_the_api_does)
{
    /* the shadow band 1/1s would refuse the first call (2 permits), not the third */
    ck_replay("[limit:b]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1s\n"
              "bands = 2/100ms\nshadow_bands = 1/1s\n",
              "0 b x 2\n0 b x 1\n100 b x 1\n",
              "0 b x 2 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=1000 "
              "shadow_denied=1\n"
              "0 b x 1 allowed=0 limit=2 remaining=0 retry_after_ms=100 reset_after_ms=1000 "
              "shadow_denied=0\n"
              "100 b x 1 allowed=1 limit=3 remaining=0 retry_after_ms=-1 reset_after_ms=900 "
              "shadow_denied=0\n"
              "summary b calls=3 admitted=2 denied=1 permits_admitted=3 permits_denied=1 "
              "shadow_denied=1\n");
    /* a token_bucket waiter with bands reserves nothing, as in the library: it is
     * decided again when every band admits (2/1s has 1 back at 500 ms) */
    ck_replay("[limit:t]\nalgorithm = token_bucket\nlimit = 2\nwindow = 1s\nwait = 1s\n"
              "bands = 3/10s\n",
              "0 t x 2\n0 t x 1\n",
              "0 t x 2 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=6667 "
              "waited_ms=0\n"
              "0 t x 1 allowed=1 limit=2 remaining=0 retry_after_ms=-1 reset_after_ms=9500 "
              "waited_ms=500\n"
              "summary t calls=2 admitted=2 denied=0 permits_admitted=3 permits_denied=0\n");
    /* mode = shadow is watched too: the second call passes, shadow_denied */
    ck_replay("[limit:s]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1s\nmode = shadow\n",
              "0 s\n0 s\n",
              "0 s - 1 allowed=1 limit=1 remaining=0 retry_after_ms=-1 reset_after_ms=1000 "
              "shadow_denied=0\n"
              "0 s - 1 allowed=1 limit=1 remaining=0 retry_after_ms=-1 reset_after_ms=1000 "
              "shadow_denied=1\n"
              "summary s calls=2 admitted=2 denied=0 permits_admitted=2 permits_denied=0 "
              "shadow_denied=1\n");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_add_test(tc, help_is_printed_for_the_command_and_each_subcommand);
    tcase_add_test(tc, lint_says_ok_for_a_valid_keyfile);
    tcase_add_test(tc, lint_lists_every_problem_of_a_bad_keyfile_and_exits_1);
    tcase_add_test(tc, lint_lists_the_overrides_of_a_valid_keyfile_and_refuses_bad_ones);
    tcase_add_test(tc, lint_refuses_a_bad_cluster_url_without_echoing_its_password);
    tcase_add_test(tc, acquire_prints_one_decision_and_exits_0_when_allowed_and_1_when_denied);
    tcase_add_test(tc, acquire_refuses_bad_arguments_with_exit_2);
    tcase_add_test(tc, every_subcommand_exits_3_when_the_backend_fails);
    tcase_add_test(tc, status_shows_every_rule_in_keyfile_order);
    tcase_add_test(tc, status_shows_the_bands_and_shadow_bands_of_a_rule);
    tcase_add_test(tc, status_says_which_rule_decides_a_key);
    tcase_add_test(tc, status_shows_the_window_and_anchor_of_a_rule);
    tcase_add_test(tc, status_shows_an_adaptive_rule_at_its_floor);
    tcase_add_test(tc, replay_and_status_show_a_warm_up);
    tcase_add_loop_test(tc, status_consumes_nothing_for_every_algorithm, 0,
                        G_N_ELEMENTS(algorithms));
    tcase_add_test(tc, reset_then_acquire_shows_a_full_limit);
    tcase_add_test(tc, block_and_penalize_act_on_a_key_and_refuse_bad_arguments);
    tcase_add_test(tc, replay_prints_the_exact_decisions_of_a_trace);
    tcase_add_test(tc, replay_reads_the_trace_from_stdin);
    tcase_add_test(tc, replay_applies_overrides);
    if (fixture_on_redis())
        tcase_add_test(tc, replay_leaves_no_key_behind_and_never_touches_the_live_limits);
    tcase_add_test(tc, replay_refuses_a_bad_line_naming_its_number);
    tcase_add_test(tc, replay_reads_permits_0_as_a_peek);
    tcase_add_test(tc, replay_decides_bands_as_the_api_does);
    if (fixture_on_shm())
        tcase_add_test(tc, zone_prints_what_the_zone_holds_and_removes_it);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
