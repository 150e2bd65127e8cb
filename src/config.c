/* SPDX-License-Identifier: MIT */
/* The keyfile: read, validate every value, and produce an immutable configuration.
 *
 * Every problem is reported as "PATH: [GROUP] KEY = VALUE: what is expected"; all
 * the problems of one file go into one GError, one per line, in file order. */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <sluice/error.h>

#include "limit_name.h"
#include "override.h"
#include "redis/key.h"
#include "redis/url.h"
#include "secret.h"
#include "value.h"

#define LIMIT_PREFIX       "limit:"
#define OVERRIDE_PREFIX    "override:"
#define DEFAULT_TIMEOUT_US (50 * 1000)
#define DEFAULT_LEASE_US   (G_GINT64_CONSTANT(60) * 1000000)

static const char *const sluice_keys[] = {"backend",
                                          "redis",
                                          "password_file",
                                          "sentinel_password_file",
                                          "key_prefix",
                                          "timeout",
                                          "on_error",
                                          "reload",
                                          "denial_cache",
                                          "tls_ca_file",
                                          "tls_cert_file",
                                          "tls_key_file",
                                          "tls_server_name",
                                          "shm",
                                          "shm_size",
                                          "shm_mode",
                                          NULL};
static const char *const limit_keys[] = {"algorithm",    "limit",     "window",     "burst",
                                         "wait",         "mode",      "per_key",    "bands",
                                         "shadow_bands", "anchor",    "prefetch",   "prefetch_ttl",
                                         "warmup",       "min_limit", "controller", NULL};
static const char *const algorithm_names[] = {
#define ALGORITHM_NAME(code, name, tag, script) [code] = name,
    SLUICE__ALGORITHM_TABLE(ALGORITHM_NAME)
#undef ALGORITHM_NAME
        [SLUICE__ALGORITHMS] = NULL};
static const char *const backend_names[] = {"memory", "redis", "shm", NULL};
static const char *const shm_keys[] = {"shm", "shm_size", "shm_mode", NULL};
static const char *const on_error_names[] = {"allow", "deny", "local", NULL};
static const char *const mode_names[] = {"enforce", "shadow", NULL};
static const char *const anchor_names[] = {"first_hit", "epoch", NULL};

const char *sluice__algorithm_name(sluice__algorithm algorithm)
{
    return algorithm_names[algorithm];
}

/* A problem and where it stands in the file, so the report follows the file. */
typedef struct {
    gsize group_at, key_at, seq;
    char *text;
} found;

/* One pass over one keyfile: where we are, and every problem found so far. */
typedef struct {
    const char *path;
    GKeyFile *keyfile;
    const char *group;
    gsize group_at; /* the group's position in the file  */
    GStrv keys;     /* the group's keys, in file order   */
    GArray *problems;
    const char *data; /* the file's text, length bytes   */
    gsize length;
} reader;

static gsize key_position(reader *r, const char *key)
{
    for (gsize i = 0; key && r->keys && r->keys[i]; i++)
        if (strcmp(r->keys[i], key) == 0)
            return i + 1;
    return key ? G_MAXSIZE : 0; /* a missing key: after the group's keys */
}

/* Most bytes of a name or value that a message repeats. */
#define SHOWN_BYTES 80

/* text as a message shows it: bytes that are not UTF-8 as U+FFFD, and cut after
 * SHOWN_BYTES (on a character boundary) with "…", so that a 10 MB value makes a
 * short message. */
static char *shown(const char *text)
{
    gsize n = strnlen(text, SHOWN_BYTES + 1);
    char *valid = g_utf8_make_valid(text, MIN(n, SHOWN_BYTES));
    if (n <= SHOWN_BYTES)
        return valid;
    char *cut = g_strconcat(valid, "…", NULL);
    g_free(valid);
    return cut;
}

/* Records "PATH: [GROUP] KEY = VALUE: WHY", names and values as shown() shows
 * them, so that the message itself is valid UTF-8 and short. */
static void problem(reader *r, const char *key, const char *value, const char *why)
{
    g_autofree char *group = shown(r->group);
    GString *text = g_string_new(NULL);
    g_string_append_printf(text, "%s: [%s]", r->path, group);
    if (key) {
        g_autofree char *k = shown(key);
        g_string_append_printf(text, " %s", k);
    }
    if (value) {
        g_autofree char *v = shown(value);
        g_string_append_printf(text, " = %s", v);
    }
    g_string_append_printf(text, ": %s", why);
    found f = {r->group_at, key_position(r, key), r->problems->len, g_string_free(text, FALSE)};
    g_array_append_val(r->problems, f);
}

static gint by_position(gconstpointer a, gconstpointer b)
{
    const found *x = a, *y = b;
    if (x->group_at != y->group_at)
        return x->group_at < y->group_at ? -1 : 1;
    if (x->key_at != y->key_at)
        return x->key_at < y->key_at ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Every problem in file order, one per line; NULL when there are none. */
static char *report_all(reader *r)
{
    if (r->problems->len == 0)
        return NULL;
    g_array_sort(r->problems, by_position);
    GString *all = g_string_new(NULL);
    for (guint i = 0; i < r->problems->len; i++)
        g_string_append_printf(all, "%s%s", i ? "\n" : "",
                               g_array_index(r->problems, found, i).text);
    return g_string_free(all, FALSE);
}

static void found_clear(gpointer p)
{
    g_free(((found *)p)->text);
}

/* Makes `group`, the index-th group of the file, the current one. */
static void enter_group(reader *r, const char *group, gsize index)
{
    r->group = group;
    r->group_at = index;
    g_strfreev(r->keys);
    r->keys = g_key_file_get_keys(r->keyfile, group, NULL, NULL);
}

/* The value of key in the current group without its comment ("5  # permits" -> "5":
 * a # after white space starts a comment), or NULL when the key is absent, or its
 * value is empty or not UTF-8 (reported). */
static char *value_of(reader *r, const char *key)
{
    g_autofree char *raw = g_key_file_get_value(r->keyfile, r->group, key, NULL);
    if (!raw)
        return NULL;
    for (char *p = raw; *p; p++) {
        if (*p == '#' && (p == raw || g_ascii_isspace(p[-1]))) {
            *p = '\0';
            break;
        }
    }
    g_strstrip(raw);
    if (!g_utf8_validate(raw, -1, NULL)) {
        problem(r, key, NULL, "not valid UTF-8");
        return NULL;
    }
    if (*raw == '\0') {
        problem(r, key, NULL, "no value");
        return NULL;
    }
    return g_steal_pointer(&raw);
}

static gboolean has_key(reader *r, const char *key)
{
    return g_key_file_has_key(r->keyfile, r->group, key, NULL);
}

static void check_keys(reader *r, const char *const *known)
{
    g_auto(GStrv) keys = g_key_file_get_keys(r->keyfile, r->group, NULL, NULL);
    for (gsize i = 0; keys && keys[i]; i++) {
        if (g_strv_contains(known, keys[i]))
            continue;
        g_autoptr(GString) why = g_string_new("unknown key; expected one of ");
        for (gsize k = 0; known[k]; k++)
            g_string_append_printf(why, "%s%s", k ? ", " : "", known[k]);
        problem(r, keys[i], NULL, why->str);
    }
}

/* Each read_* leaves *out alone when the key is absent, and reports bad values. */
static void report(reader *r, const char *key, const char *value, char *why)
{
    problem(r, key, value, why);
    g_free(why);
}

static void read_count(reader *r, const char *key, gint64 min, gint64 max, gint64 *out)
{
    g_autofree char *v = value_of(r, key);
    char *why = NULL;
    if (v && !sluice__parse_count(v, min, max, out, &why))
        report(r, key, v, why);
}

static void read_duration(reader *r, const char *key, gint64 min_us, gint64 *out)
{
    g_autofree char *v = value_of(r, key);
    char *why = NULL;
    if (v && !sluice__parse_duration(v, min_us, SLUICE__MAX_DURATION_US, out, &why))
        report(r, key, v, why);
}

static void read_choice(reader *r, const char *key, const char *const *choices, int *out)
{
    g_autofree char *v = value_of(r, key);
    char *why = NULL;
    if (v && !sluice__parse_choice(v, choices, out, &why))
        report(r, key, v, why);
}

static void read_bool(reader *r, const char *key, gboolean *out)
{
    g_autofree char *v = value_of(r, key);
    char *why = NULL;
    if (v && !sluice__parse_bool(v, out, &why))
        report(r, key, v, why);
}

/* file as a path: relative to the keyfile's directory unless absolute. */
static char *resolve_path(const sluice__config *c, const char *file)
{
    g_autofree char *dir = g_path_get_dirname(c->path);
    return g_path_is_absolute(file) ? g_strdup(file) : g_build_filename(dir, file, NULL);
}

/* The secret in the file that key names (a path relative to the keyfile's
 * directory), whose it is in the warning about a file others may read; NULL when
 * it cannot be read (reported). */
static char *read_secret_file(reader *r, const sluice__config *c, const char *key, const char *file,
                              const char *whose)
{
    g_autofree char *path = resolve_path(c, file);
    char *why = NULL;
    char *secret = sluice__secret_read_file(path, &why);
    if (!secret)
        report(r, key, file, why);
    guint mode;
    if (secret && sluice__secret_file_exposed(path, &mode)) {
        g_autofree char *name = g_filename_display_name(path);
        g_warning("%s holds %s and its group or others may read it (mode %04o): chmod 600 it", name,
                  whose, mode);
    }
    return secret;
}

/* The password when the URL has none: password_file, else $SLUICE_REDIS_PASSWORD;
 * and the Sentinels' own, sentinel_password_file, when the URL names Sentinels
 * (url_ok: the URL parsed, so sentinel says whether it does). */
static void read_passwords(reader *r, sluice__config *c, gboolean url_ok, gboolean sentinel)
{
    g_autofree char *file = value_of(r, "password_file");
    g_autofree char *sentinel_file = value_of(r, "sentinel_password_file");
    if (sentinel_file && url_ok && !sentinel)
        report(r, "sentinel_password_file", sentinel_file,
               g_strdup("applies only to redis+sentinel:// and rediss+sentinel:// URLs"));
    else if (sentinel_file)
        c->sentinel_password = read_secret_file(r, c, "sentinel_password_file", sentinel_file,
                                                "the Sentinels' password");
    if (file && c->password_in_keyfile) {
        report(r, "password_file", file,
               g_strdup("the redis URL holds a password already; keep one of them"));
        return;
    }
    if (file) {
        c->redis_password = read_secret_file(r, c, "password_file", file, "the Redis password");
        return;
    }
    const char *env = g_getenv(SLUICE__PASSWORD_ENV);
    if (!c->password_in_keyfile && env && *env)
        c->redis_password = g_strdup(env);
}

/* A tls_*_file key: the path, which must be a file this process can read. */
static char *read_tls_file(reader *r, const sluice__config *c, const char *key)
{
    g_autofree char *file = value_of(r, key);
    if (!file)
        return NULL;
    char *path = resolve_path(c, file);
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR) || g_access(path, R_OK) != 0) {
        g_autofree char *name = g_filename_display_name(path);
        report(r, key, file,
               g_strdup_printf("%s: %s", name,
                               g_file_test(path, G_FILE_TEST_EXISTS) ? "not a readable file"
                                                                     : "no such file"));
        g_free(path);
        return NULL;
    }
    return path;
}

static const char *const tls_keys[] = {"tls_ca_file", "tls_cert_file", "tls_key_file",
                                       "tls_server_name", NULL};

/* tls_ca_file, tls_cert_file, tls_key_file, tls_server_name: the files must be
 * readable; a client certificate needs its key; a key others may read is warned
 * about as the password file is. With a plaintext URL they are refused: a
 * forgotten rediss:// would otherwise send in the clear what was meant for TLS. */
static void read_tls(reader *r, sluice__config *c, gboolean plaintext)
{
    sluice__tls_settings *t = &c->tls;
    if (plaintext) {
        for (gsize i = 0; tls_keys[i]; i++)
            if (has_key(r, tls_keys[i]))
                problem(r, tls_keys[i], NULL,
                        "applies only to TLS: the redis URL is plaintext; use rediss://");
        return;
    }
    t->ca_file = read_tls_file(r, c, "tls_ca_file");
    t->cert_file = read_tls_file(r, c, "tls_cert_file");
    t->key_file = read_tls_file(r, c, "tls_key_file");
    t->server_name = value_of(r, "tls_server_name");
    if (t->cert_file && !has_key(r, "tls_key_file"))
        problem(r, "tls_cert_file", NULL, "a client certificate needs its key: tls_key_file");
    if (t->key_file && !has_key(r, "tls_cert_file"))
        problem(r, "tls_key_file", NULL, "a key needs its client certificate: tls_cert_file");
    guint mode;
    if (t->key_file && sluice__secret_file_exposed(t->key_file, &mode)) {
        g_autofree char *name = g_filename_display_name(t->key_file);
        g_warning("%s holds the TLS client key and its group or others may read it (mode "
                  "%04o): chmod 600 it",
                  name, mode);
    }
}

/* The longest zone name: its file, /dev/shm/sluice-NAME, stays a short name. */
#define SHM_NAME_BYTES 200

/* shm, shm_size, shm_mode: for backend = shm, which needs a name (letters, digits,
 * '.', '_', '-'); refused with another backend. */
static void read_shm(reader *r, sluice__config *c)
{
    if (c->backend != SLUICE__BACKEND_SHM) {
        for (gsize i = 0; shm_keys[i]; i++)
            if (has_key(r, shm_keys[i]))
                problem(r, shm_keys[i], NULL, "applies only to backend = shm");
        return;
    }
    g_autofree char *name = value_of(r, "shm");
    if (!name && !has_key(r, "shm"))
        problem(r, "backend", "shm", "needs the zone's name: shm = NAME");
    gboolean ok = name && strlen(name) <= SHM_NAME_BYTES && name[0] != '.';
    for (const char *p = name; ok && *p; p++)
        ok = g_ascii_isalnum(*p) || *p == '.' || *p == '_' || *p == '-';
    if (name && !ok)
        problem(r, "shm", name,
                "expected a name of letters, digits, '.', '_' and '-' (not first), at most 200 "
                "bytes");
    else if (name)
        c->shm_name = g_steal_pointer(&name);
    g_autofree char *size = value_of(r, "shm_size");
    char *why = NULL;
    if (size &&
        !sluice__parse_size(size, SLUICE__SHM_MIN_SIZE, SLUICE__SHM_MAX_SIZE, &c->shm_size, &why))
        report(r, "shm_size", size, why);
    g_autofree char *mode = value_of(r, "shm_mode");
    if (mode && (strcmp(mode, "0600") == 0 || strcmp(mode, "600") == 0))
        c->shm_mode = 0600;
    else if (mode && (strcmp(mode, "0660") == 0 || strcmp(mode, "660") == 0))
        c->shm_mode = 0660;
    else if (mode)
        problem(r, "shm_mode", mode,
                "expected 0600 (this user only) or 0660 (and the zone file's group)");
}

static void read_sluice_group(reader *r, sluice__config *c)
{
    int backend = c->backend, on_error = c->on_error;
    g_autofree char *prefix = NULL;

    check_keys(r, sluice_keys);
    read_choice(r, "backend", backend_names, &backend);
    read_choice(r, "on_error", on_error_names, &on_error);
    read_duration(r, "timeout", 1000, &c->timeout_us);
    read_bool(r, "reload", &c->reload);
    read_bool(r, "denial_cache", &c->denial_cache);
    c->backend = backend;
    c->on_error = on_error;

    prefix = value_of(r, "key_prefix");
    char *prefix_why = NULL; /* report() takes it */
    if (prefix && !sluice__redis_key_prefix_check(prefix, &prefix_why))
        report(r, "key_prefix", prefix, prefix_why);
    else if (prefix) {
        g_free(c->key_prefix);
        c->key_prefix = g_steal_pointer(&prefix);
    }
    g_autofree char *url = value_of(r, "redis");
    gboolean url_ok = TRUE, sentinel = FALSE, tls = FALSE;
    if (url) {
        sluice__redis_url parsed;
        char *why = NULL;
        if (sluice__redis_url_parse(url, &parsed, &why)) {
            c->password_in_keyfile = parsed.password != NULL;
            sentinel = parsed.topology == SLUICE__REDIS_SENTINEL;
            tls = parsed.tls;
            sluice__redis_url_clear(&parsed);
        } else {
            report(r, "redis", NULL, why); /* the URL may hold a password: not repeated */
            url_ok = FALSE;
        }
        sluice__secret_free(c->redis_url);
        c->redis_url = g_steal_pointer(&url);
    }
    read_passwords(r, c, url_ok, sentinel);
    read_tls(r, c, url_ok && !tls);
    read_shm(r, c);
}

/* burst where the algorithm has none. */
static void check_burst(reader *r, sluice__algorithm algorithm)
{
    if (algorithm == SLUICE__TOKEN_BUCKET || algorithm == SLUICE__GCRA)
        return;
    g_autofree char *v = value_of(r, "burst");
    if (v)
        report(r, "burst", v,
               g_strdup_printf("applies only to token_bucket and gcra, not %s",
                               sluice__algorithm_name(algorithm)));
}

/* anchor where the algorithm has no windows to anchor. */
/* prefetch: not for concurrency (a lease must be given back by the caller that
 * took it) nor sliding_log (its exact window has no bound for permits used late);
 * at most the capacity; prefetch_ttl only with it, and within the window. */
static void check_prefetch(reader *r, const sluice__rule *rule)
{
    g_autofree char *n = value_of(r, "prefetch");
    g_autofree char *ttl = value_of(r, "prefetch_ttl");
    if (n && rule->prefetch > 0 &&
        (rule->algorithm == SLUICE__CONCURRENCY || rule->algorithm == SLUICE__SLIDING_LOG ||
         rule->algorithm == SLUICE__ADAPTIVE))
        report(r, "prefetch", n,
               g_strdup_printf("applies only to fixed_window, sliding_window, token_bucket and "
                               "gcra, not %s",
                               sluice__algorithm_name(rule->algorithm)));
    else if (n && rule->prefetch > sluice__rule_capacity(rule) && sluice__rule_capacity(rule) > 0)
        report(r, "prefetch", n,
               g_strdup_printf("more than the %" G_GINT64_FORMAT
                               " permits that can pass at once; expected at most that",
                               sluice__rule_capacity(rule)));
    if (ttl && rule->prefetch == 0)
        report(r, "prefetch_ttl", ttl, g_strdup("applies only with prefetch = 1 or more"));
    else if (ttl && rule->window_us > 0 && rule->prefetch_ttl_us > rule->window_us)
        report(r, "prefetch_ttl", ttl,
               g_strdup("longer than the window; expected at most the window, e.g. a tenth of it"));
}

static void check_anchor(reader *r, sluice__algorithm algorithm)
{
    if (algorithm == SLUICE__FIXED_WINDOW)
        return;
    g_autofree char *v = value_of(r, "anchor");
    if (v)
        report(r, "anchor", v,
               g_strdup_printf("applies only to fixed_window, not %s",
                               sluice__algorithm_name(algorithm)));
}

/* A problem of the rule's limit or burst: under its own key, or, for a band, under
 * band_key with the band's text and what part of it is wrong. */
static void report_part(reader *r, const char *band_key, const char *band_text, const char *part,
                        gint64 value, char *why)
{
    if (band_key) {
        g_autofree char *full = g_strdup_printf("%s %" G_GINT64_FORMAT ": %s", part, value, why);
        g_free(why);
        report(r, band_key, band_text, g_steal_pointer(&full));
        return;
    }
    g_autofree char *v = g_strdup_printf("%" G_GINT64_FORMAT, value);
    report(r, part, v, why);
}

/* The checks that involve more than one value of a rule (or of one of its bands:
 * band_key and band_text name it). */
static void check_rule(reader *r, const sluice__rule *rule, const char *band_key,
                       const char *band_text)
{
    g_autofree char *window = sluice__format_duration(rule->window_us);
    char *why;
    if (rule->algorithm == SLUICE__SLIDING_WINDOW &&
        rule->limit > ((G_GINT64_CONSTANT(1) << 52) / (rule->window_us / 1000))) {
        why = g_strdup_printf("too large for sliding_window over %s: limit × window in ms must "
                              "stay under 2^52; at most %" G_GINT64_FORMAT,
                              window, (G_GINT64_CONSTANT(1) << 52) / (rule->window_us / 1000));
        report_part(r, band_key, band_text, "limit", rule->limit, why);
    }
    if ((rule->algorithm == SLUICE__SLIDING_LOG || rule->algorithm == SLUICE__CONCURRENCY) &&
        rule->limit > SLUICE__MAX_LOGGED_PERMITS) {
        why = g_strdup_printf("too large for %s, which keeps one entry per permit (on Redis, a "
                              "call for all of them writes as many); at most %" G_GINT64_FORMAT
                              "; sliding_window or token_bucket keep O(1) state",
                              sluice__algorithm_name(rule->algorithm), SLUICE__MAX_LOGGED_PERMITS);
        report_part(r, band_key, band_text, "limit", rule->limit, why);
    }
    if (rule->algorithm == SLUICE__TOKEN_BUCKET || rule->algorithm == SLUICE__GCRA) {
        /* any rate is exact (docs/algorithms.md); a full refill, burst × window /
         * limit, must fit in the longest duration */
        unsigned __int128 most = (unsigned __int128)SLUICE__MAX_DURATION_US *
                                 (unsigned __int128)rule->limit /
                                 (unsigned __int128)rule->window_us;
        if ((unsigned __int128)rule->burst > most) {
            why = g_strdup_printf("too large: refilling it would take more than 36500d; at "
                                  "most %" G_GINT64_FORMAT,
                                  (gint64)most);
            report_part(r, band_key, band_text, "burst", rule->burst, why);
        }
    }
}

/* One band, LIMIT/WINDOW or LIMIT/WINDOW/BURST, into *out; FALSE with a sentence. */
static gboolean parse_band(const char *text, sluice__algorithm algorithm, sluice__band *out,
                           char **why)
{
    g_auto(GStrv) parts = g_strsplit(text, "/", -1);
    guint n = g_strv_length(parts);
    gboolean bucket = algorithm == SLUICE__TOKEN_BUCKET || algorithm == SLUICE__GCRA;
    char *inner = NULL;
    if (n < 2 || n > 3 || (n == 3 && !bucket)) {
        *why = g_strdup_printf("\"%s\": expected LIMIT/WINDOW%s, e.g. 1000/1h", text,
                               bucket ? " or LIMIT/WINDOW/BURST" : "");
        return FALSE;
    }
    for (guint i = 0; i < n; i++)
        g_strstrip(parts[i]);
    if (!sluice__parse_count(parts[0], 1, SLUICE__MAX_PERMITS, &out->limit, &inner)) {
        *why = g_strdup_printf("\"%s\": limit %s: %s", text, parts[0], inner);
        g_free(inner);
        return FALSE;
    }
    if (!sluice__parse_duration(parts[1], 1000, SLUICE__MAX_DURATION_US, &out->window_us, &inner)) {
        *why = g_strdup_printf("\"%s\": window %s: %s", text, parts[1], inner);
        g_free(inner);
        return FALSE;
    }
    out->burst = out->limit;
    if (n == 3 && !sluice__parse_count(parts[2], 1, SLUICE__MAX_PERMITS, &out->burst, &inner)) {
        *why = g_strdup_printf("\"%s\": burst %s: %s", text, parts[2], inner);
        g_free(inner);
        return FALSE;
    }
    return TRUE;
}

static gboolean same_band(const sluice__band *a, gint64 limit, gint64 window_us, gint64 burst)
{
    return a->limit == limit && a->window_us == window_us && a->burst == burst;
}

/* `bands` or `shadow_bands`: a comma-separated list, appended to rule->bands; each
 * band is checked as a rule of its own, and none may repeat another. */
static void read_bands(reader *r, const char *key, sluice__rule *rule, guint *count)
{
    g_autofree char *v = value_of(r, key);
    if (!v)
        return;
    if (rule->algorithm == SLUICE__CONCURRENCY || rule->algorithm == SLUICE__ADAPTIVE) {
        report(r, key, v, g_strdup("applies to every algorithm but concurrency and adaptive"));
        return;
    }
    g_auto(GStrv) items = g_strsplit(v, ",", -1);
    for (guint i = 0; items[i]; i++) {
        char *item = g_strstrip(items[i]);
        sluice__band band;
        char *why = NULL;
        if (!parse_band(item, rule->algorithm, &band, &why)) {
            report(r, key, v, why);
            return;
        }
        gboolean repeated = same_band(&band, rule->limit, rule->window_us, rule->burst);
        for (guint j = 0; j < rule->n_bands + rule->n_shadow; j++)
            repeated =
                repeated || same_band(&rule->bands[j], band.limit, band.window_us, band.burst);
        if (repeated) {
            report(r, key, v,
                   g_strdup_printf("\"%s\" repeats the rule's limit and window or another "
                                   "band; expected each band once",
                                   item));
            return;
        }
        if (rule->n_bands + rule->n_shadow == SLUICE__MAX_BANDS) {
            report(r, key, v,
                   g_strdup_printf("more than %d bands (bands and shadow_bands together)",
                                   SLUICE__MAX_BANDS));
            return;
        }
        sluice__rule as_rule = *rule;
        as_rule.limit = band.limit;
        as_rule.window_us = band.window_us;
        as_rule.burst = band.burst;
        gsize before = r->problems->len;
        check_rule(r, &as_rule, key, item);
        if (r->problems->len != before)
            return;
        rule->bands[rule->n_bands + rule->n_shadow] = band;
        (*count)++;
    }
}

/* prefetch beside bands: at most what every enforced band can pass at once (else
 * every round trip for it is refused), and no shadow bands (a shadow band would
 * decide the permits taken at once, not each call's, so its counts would not say
 * what it refuses). */
static void check_prefetch_bands(reader *r, const sluice__rule *rule)
{
    if (rule->prefetch == 0 || rule->n_bands + rule->n_shadow == 0)
        return;
    g_autofree char *n = value_of(r, "prefetch");
    if (rule->n_shadow > 0) {
        report(r, "prefetch", n,
               g_strdup("not with shadow_bands: a shadow band would decide the permits taken "
                        "at once, not each call's; expected prefetch = 0 where shadow_bands "
                        "are watched"));
        return;
    }
    for (guint i = 0; i < rule->n_bands; i++) {
        const sluice__band *b = &rule->bands[i];
        gboolean bucket =
            rule->algorithm == SLUICE__TOKEN_BUCKET || rule->algorithm == SLUICE__GCRA;
        gint64 capacity = bucket ? b->burst : b->limit;
        if (rule->prefetch > capacity) {
            g_autofree char *window = sluice__format_duration(b->window_us);
            report(r, "prefetch", n,
                   g_strdup_printf("more than the %" G_GINT64_FORMAT
                                   " permits the band %" G_GINT64_FORMAT
                                   "/%s can pass at once; expected at most %" G_GINT64_FORMAT,
                                   capacity, b->limit, window, capacity));
            return;
        }
    }
}

/* The keys of algorithm = adaptive: min_limit (1 .. limit, default 1) and controller
 * (default gradient), which no other algorithm takes; and what adaptive refuses: a
 * window (its windows follow the calls' latency), a limit past
 * SLUICE__MAX_LOGGED_PERMITS calls in flight, per_key = true (one limit per process:
 * the calls in flight to one downstream). */
static void read_adaptive(reader *r, sluice__rule *rule)
{
    gboolean adaptive = rule->algorithm == SLUICE__ADAPTIVE;
    static const char *const own[] = {"min_limit", "controller", NULL};
    for (const char *const *key = own; !adaptive && *key; key++) {
        g_autofree char *v = value_of(r, *key);
        if (v)
            report(r, *key, v,
                   g_strdup_printf("applies only to adaptive, not %s",
                                   sluice__algorithm_name(rule->algorithm)));
    }
    if (!adaptive)
        return;
    rule->min_limit = 1;
    int controller = SLUICE__CONTROLLER_GRADIENT;
    read_count(r, "min_limit", 1, SLUICE__MAX_PERMITS, &rule->min_limit);
    read_choice(r, "controller", sluice__controller_names, &controller);
    rule->controller = controller;
    g_autofree char *window = value_of(r, "window");
    if (window)
        report(r, "window", window,
               g_strdup("adaptive takes no window: its windows follow the latency of the calls; "
                        "remove it"));
    if (rule->limit > SLUICE__MAX_LOGGED_PERMITS) {
        g_autofree char *v = g_strdup_printf("%" G_GINT64_FORMAT, rule->limit);
        report(r, "limit", v,
               g_strdup_printf("too large for adaptive: at most %" G_GINT64_FORMAT
                               " calls in flight",
                               SLUICE__MAX_LOGGED_PERMITS));
    } else if (rule->min_limit > rule->limit && rule->limit > 0) {
        g_autofree char *v = g_strdup_printf("%" G_GINT64_FORMAT, rule->min_limit);
        report(r, "min_limit", v,
               g_strdup_printf("more than limit = %" G_GINT64_FORMAT
                               ", the most the limit may grow to; expected at most that",
                               rule->limit));
    }
    if (rule->per_key) /* written: adaptive's default is false */
        problem(r, "per_key", "true",
                "adaptive keeps one limit per process, for the calls in flight to one "
                "downstream; expected per_key = false, or no per_key");
    rule->per_key = FALSE;
}

/* The most warmup x limit: the costs of a warm-up (1/L µs, products of two such
 * numbers divided by 2 L U) stay exact, in Lua's doubles too. */
#define MAX_WARMUP_TIMES_LIMIT (G_GINT64_CONSTANT(1) << 52)

/* warmup: token_bucket and gcra only, 0 (none) or at least 1ms; not beside burst
 * (every permit costs at least window / limit), bands, shadow_bands or prefetch; warmup
 * in µs x limit under MAX_WARMUP_TIMES_LIMIT. */
static void read_warmup(reader *r, sluice__rule *rule)
{
    read_duration(r, "warmup", 0, &rule->warmup_us);
    if (rule->warmup_us == 0)
        return; /* none (warmup = 0 too: no warm-up, never a rule that limits nothing) */
    g_autofree char *v = value_of(r, "warmup");
    if (rule->algorithm != SLUICE__TOKEN_BUCKET && rule->algorithm != SLUICE__GCRA) {
        report(r, "warmup", v,
               g_strdup_printf("applies only to token_bucket and gcra, not %s",
                               sluice__algorithm_name(rule->algorithm)));
        return;
    }
    g_autofree char *burst = value_of(r, "burst");
    if (burst)
        report(r, "burst", burst,
               g_strdup("not with warmup: every permit costs at least window / limit, so "
                        "nothing bursts; remove burst or warmup"));
    rule->burst = rule->limit;
    if (has_key(r, "bands") || has_key(r, "shadow_bands"))
        problem(r, "warmup", v, "not with bands or shadow_bands; expected a rule without them");
    if (rule->prefetch > 0)
        problem(r, "warmup", v, "not with prefetch; expected prefetch = 0");
    if (rule->limit > 0 && rule->warmup_us > (MAX_WARMUP_TIMES_LIMIT - 1) / rule->limit) {
        g_autofree char *most =
            sluice__format_duration((MAX_WARMUP_TIMES_LIMIT - 1) / rule->limit / 1000 * 1000);
        report(r, "warmup", v,
               g_strdup_printf("too long for limit = %" G_GINT64_FORMAT
                               ": warmup in µs × limit must stay under 2^52 (the costs are "
                               "exact); at most %s",
                               rule->limit, most));
    }
}

static void read_limit_group(reader *r, const char *name, sluice__config *c)
{
    sluice__rule *rule = g_new0(sluice__rule, 1);
    int algorithm = SLUICE__SLIDING_LOG, mode = 0;
    gsize before = r->problems->len;

    check_keys(r, limit_keys);
    switch (sluice__limit_name_check(name)) {
    case SLUICE__NAME_OK:
        break;
    case SLUICE__NAME_TOO_LONG:
        problem(r, NULL, NULL, "the limit name is longer than 1024 bytes");
        break;
    case SLUICE__NAME_NOT_UTF8:
        problem(r, NULL, NULL, "the limit name is not valid UTF-8");
        break;
    default:
        problem(r, NULL, NULL, "the limit has no name; expected [limit:NAME]");
        break;
    }

    read_choice(r, "algorithm", algorithm_names, &algorithm);
    rule->algorithm = algorithm;
    rule->on_error = c->on_error;
    rule->per_key = algorithm != SLUICE__ADAPTIVE;
    rule->window_us = algorithm == SLUICE__CONCURRENCY ? DEFAULT_LEASE_US : 0;

    if (!has_key(r, "limit"))
        problem(r, "limit", NULL,
                algorithm == SLUICE__CONCURRENCY
                    ? "missing; expected the most calls in flight, e.g. limit = 10"
                : algorithm == SLUICE__ADAPTIVE
                    ? "missing; expected the most calls in flight it may grow to, e.g. limit = 200"
                    : "missing; expected the permits per window, e.g. limit = 10");
    read_count(r, "limit", 1, SLUICE__MAX_PERMITS, &rule->limit);
    if (!has_key(r, "window") && algorithm != SLUICE__CONCURRENCY && algorithm != SLUICE__ADAPTIVE)
        problem(r, "window", NULL, "missing; expected a duration, e.g. window = 10s");
    if (algorithm != SLUICE__ADAPTIVE)
        read_duration(r, "window", 1000, &rule->window_us);
    rule->burst = rule->limit;
    read_count(r, "burst", 1, SLUICE__MAX_PERMITS, &rule->burst);
    read_duration(r, "wait", 0, &rule->wait_us);
    read_choice(r, "mode", mode_names, &mode);
    rule->shadow = mode == 1;
    read_bool(r, "per_key", &rule->per_key);
    int anchor = 0;
    read_choice(r, "anchor", anchor_names, &anchor);
    rule->epoch = anchor == 1;

    read_count(r, "prefetch", 0, SLUICE__MAX_PERMITS, &rule->prefetch);
    rule->prefetch_ttl_us = MAX(1000, rule->window_us / 10);
    read_duration(r, "prefetch_ttl", 1000, &rule->prefetch_ttl_us);
    read_adaptive(r, rule);
    read_warmup(r, rule);
    check_burst(r, rule->algorithm);
    check_anchor(r, rule->algorithm);
    check_prefetch(r, rule);
    if (r->problems->len == before && rule->window_us > 0 && rule->limit > 0)
        check_rule(r, rule, NULL, NULL);
    if (r->problems->len == before) {
        read_bands(r, "bands", rule, &rule->n_bands);
        read_bands(r, "shadow_bands", rule, &rule->n_shadow);
    }
    if (r->problems->len == before)
        check_prefetch_bands(r, rule);
    if (r->problems->len != before) {
        g_free(rule);
        return;
    }
    g_hash_table_replace(c->rules, g_strdup(name), rule);
}

/* ---- [override:NAME] ------------------------------------------------------------- */

/* Reports the keys of the current group that GKeyFile reads as locale variants
 * (KEY[LOCALE] = ...), which g_key_file_get_keys leaves out: found in the text. */
static void check_locale_keys(reader *r)
{
    g_autofree char *text = g_strndup(r->data, r->length);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    gboolean inside = FALSE;
    for (gsize i = 0; lines[i]; i++) {
        char *line = g_strstrip(lines[i]);
        if (*line == '[') {
            char *end = strrchr(line, ']');
            inside = end && (gsize)(end - line - 1) == strlen(r->group) &&
                     strncmp(line + 1, r->group, strlen(r->group)) == 0;
            continue;
        }
        char *eq = strchr(line, '=');
        if (!inside || *line == '#' || !eq)
            continue;
        *eq = '\0';
        g_strchomp(line);
        gsize n = strlen(line);
        if (n > 0 && line[n - 1] == ']' && strchr(line, '['))
            problem(r, line, NULL,
                    "GKeyFile reads KEY[LOCALE] as a translation of KEY, not as a key of its "
                    "own; an override cannot name a key with [ or ] (docs/keyfile.md)");
    }
}

/* With anchor = epoch the windows of fixed_window start at multiples of the window
 * on the UTC clock: an override's must start where the rule's do, so its window
 * divides the rule's or is a whole multiple of it. */
static void check_override_epoch(reader *r, const sluice__rule *rule, const char *key,
                                 const char *value, gint64 window_us)
{
    if (rule->algorithm != SLUICE__FIXED_WINDOW || !rule->epoch || window_us == rule->window_us ||
        rule->window_us % window_us == 0 || window_us % rule->window_us == 0)
        return;
    g_autofree char *w = sluice__format_duration(rule->window_us);
    report(r, key, value,
           g_strdup_printf("with anchor = epoch the key's windows must start where the rule's "
                           "do; expected a window that divides %s or a whole multiple of it",
                           w));
}

/* An override of a rule with prefetch: the key must be able to take the permits
 * fetched at once, within their time to live. */
static void check_override_prefetch(reader *r, const sluice__rule *o, const char *key,
                                    const char *value)
{
    if (o->prefetch == 0)
        return;
    if (o->prefetch > sluice__rule_capacity(o))
        report(r, key, value,
               g_strdup_printf("less than the rule's prefetch = %" G_GINT64_FORMAT
                               " can pass at once; expected a capacity of at least that",
                               o->prefetch));
    else if (o->prefetch_ttl_us > o->window_us) {
        g_autofree char *ttl = sluice__format_duration(o->prefetch_ttl_us);
        report(r, key, value,
               g_strdup_printf("a window shorter than the rule's prefetch_ttl = %s; expected "
                               "at least that",
                               ttl));
    }
}

/* One key of [override:NAME] of rule: blocked, unlimited, or LIMIT/WINDOW[/BURST]
 * checked as a rule of its own is. FALSE after reporting what is wrong. */
static gboolean read_override(reader *r, const char *key, const sluice__rule *rule,
                              sluice__override_spec *out)
{
    if (!g_utf8_validate(key, -1, NULL)) {
        problem(r, key, NULL, "the key is not valid UTF-8, so no caller's key is it");
        return FALSE;
    }
    g_autofree char *v = value_of(r, key);
    if (!v)
        return FALSE;
    *out = (sluice__override_spec){SLUICE__KIND_LIMIT, 0, 0, 0};
    if (strcmp(v, "blocked") == 0 || strcmp(v, "unlimited") == 0) {
        out->kind = v[0] == 'b' ? SLUICE__KIND_BLOCKED : SLUICE__KIND_UNLIMITED;
        return TRUE;
    }
    gboolean bucket = rule->algorithm == SLUICE__TOKEN_BUCKET || rule->algorithm == SLUICE__GCRA;
    if (!strchr(v, '/')) {
        report(r, key, v,
               g_strdup_printf("expected blocked, unlimited or LIMIT/WINDOW%s, e.g. 1000/1m",
                               bucket ? "[/BURST]" : ""));
        return FALSE;
    }
    sluice__band band;
    char *why = NULL;
    if (!parse_band(v, rule->algorithm, &band, &why)) {
        report(r, key, v, why);
        return FALSE;
    }
    out->limit = band.limit;
    out->window_us = band.window_us;
    out->burst = band.burst;
    gsize before = r->problems->len;
    if (rule->warmup_us > 0 && band.burst != band.limit)
        report(r, key, v,
               g_strdup("a burst, where the limit has a warmup: every permit costs at least "
                        "window / limit; expected LIMIT/WINDOW"));
    if (rule->warmup_us > (MAX_WARMUP_TIMES_LIMIT - 1) / band.limit)
        report(r, key, v,
               g_strdup("a limit too large for the rule's warmup: warmup in µs × limit must "
                        "stay under 2^52"));
    sluice__rule o;
    sluice__override_rule(rule, out, &o);
    check_rule(r, &o, key, v);
    check_override_epoch(r, rule, key, v, o.window_us);
    check_override_prefetch(r, &o, key, v);
    return r->problems->len == before;
}

/* The most overrides one limit takes: its table (src/override.c) spends a cache
 * line or two on each, at most half full, built at every load. */
#define OVERRIDES_MAX 100000

/* [override:NAME]: exceptions for named keys of [limit:NAME], wherever that stands
 * in the file; into c->overrides. */
static void read_override_group(reader *r, const char *name, sluice__config *c)
{
    const sluice__rule *rule = g_hash_table_lookup(c->rules, name);
    check_locale_keys(r);
    if (!rule) {
        g_autofree char *limit = g_strconcat(LIMIT_PREFIX, name, NULL);
        if (!g_key_file_has_group(r->keyfile, limit)) /* else its problems are reported */
            problem(r, NULL, NULL,
                    "no such limit; expected the [limit:NAME] group these overrides are "
                    "exceptions of");
        return;
    }
    if (rule->algorithm == SLUICE__ADAPTIVE) {
        problem(r, NULL, NULL,
                "the limit is adaptive: one limit per process that ignores keys, so no key "
                "can have an override; expected no [override:NAME]");
        return;
    }
    if (!rule->per_key) {
        problem(r, NULL, NULL,
                "the limit has per_key = false: it ignores keys, so no key can have an "
                "override; expected per_key = true, or no [override:NAME]");
        return;
    }
    gsize n = r->keys ? g_strv_length(r->keys) : 0;
    if (n > OVERRIDES_MAX) {
        g_autofree char *why = g_strdup_printf(
            "%zu overrides: at most %d for one limit; expected fewer keys (a list that long "
            "is better kept as limits of its own)",
            n, OVERRIDES_MAX);
        problem(r, NULL, NULL, why);
        return;
    }
    GHashTable *specs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (gsize i = 0; r->keys && r->keys[i]; i++) {
        sluice__override_spec spec;
        if (read_override(r, r->keys[i], rule, &spec))
            g_hash_table_insert(specs, g_strdup(r->keys[i]), g_memdup2(&spec, sizeof spec));
    }
    g_hash_table_replace(c->overrides, g_strdup(name), specs);
}

sluice__config *sluice__config_new_default(void)
{
    sluice__config *c = g_new0(sluice__config, 1);
    c->backend = SLUICE__BACKEND_MEMORY;
    c->redis_url = g_strdup("redis://127.0.0.1:6379/0");
    c->key_prefix = g_strdup("sluice:");
    c->timeout_us = DEFAULT_TIMEOUT_US;
    c->on_error = SLUICE__ON_ERROR_ALLOW;
    c->reload = TRUE;
    c->denial_cache = TRUE;
    c->shm_size = SLUICE__SHM_DEFAULT_SIZE;
    c->shm_mode = 0600;
    c->rules = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    c->overrides =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_hash_table_unref);
    return c;
}

sluice__config *sluice__config_parse(const char *data, gsize length, const char *path,
                                     GError **error)
{
    g_autoptr(sluice__config) c = sluice__config_new_default();
    g_autoptr(GKeyFile) keyfile = g_key_file_new();
    g_autoptr(GError) local = NULL;
    g_auto(GStrv) groups = NULL;
    g_autoptr(GArray) problems = g_array_new(FALSE, FALSE, sizeof(found));
    g_autofree char *display = g_filename_display_name(path); /* valid UTF-8 */
    reader r = {display, keyfile, NULL, 0, NULL, problems, data, length};

    g_array_set_clear_func(problems, found_clear);
    c->path = g_strdup(path);
    if (!g_key_file_load_from_data(keyfile, data, length, G_KEY_FILE_NONE, &local)) {
        /* GLib quotes the line, which may be a URL with a password */
        g_autofree char *valid = g_utf8_make_valid(local->message, -1);
        g_autofree char *why = sluice__secret_redact(valid);
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG, "%s: %s", display, why);
        return NULL;
    }
    groups = g_key_file_get_groups(keyfile, NULL);
    /* [sluice] first, wherever it stands: the rules take its on_error */
    for (gsize i = 0; groups[i]; i++) {
        if (strcmp(groups[i], "sluice") == 0) {
            enter_group(&r, groups[i], i);
            read_sluice_group(&r, c);
        }
    }
    for (gsize i = 0; groups[i]; i++) {
        enter_group(&r, groups[i], i);
        if (g_str_has_prefix(groups[i], LIMIT_PREFIX))
            read_limit_group(&r, groups[i] + strlen(LIMIT_PREFIX), c);
        else if (strcmp(groups[i], "sluice") != 0 && !g_str_has_prefix(groups[i], OVERRIDE_PREFIX))
            problem(&r, NULL, NULL,
                    "unknown group; expected [sluice], [limit:NAME] or [override:NAME]");
    }
    /* then the overrides, which need their limit's rule wherever it stands */
    for (gsize i = 0; groups[i]; i++) {
        enter_group(&r, groups[i], i);
        if (g_str_has_prefix(groups[i], OVERRIDE_PREFIX))
            read_override_group(&r, groups[i] + strlen(OVERRIDE_PREFIX), c);
    }
    g_strfreev(r.keys);
    g_autofree char *all = report_all(&r);
    if (all) {
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG, all);
        return NULL;
    }
    return g_steal_pointer(&c);
}

sluice__config *sluice__config_load(const char *path, GError **error)
{
    g_autofree char *data = NULL;
    gsize length = 0;
    g_autoptr(GError) local = NULL;
    GStatBuf st;

    if (g_stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* a directory, /dev/zero */
        g_autofree char *name = g_filename_display_name(path);
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_IO, "%s: not a regular file", name);
        return NULL;
    }
    if (!g_file_get_contents(path, &data, &length, &local)) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_IO, "%s", local->message);
        return NULL;
    }
    sluice__config *c = sluice__config_parse(data, length, path, error);
    sluice__secret_wipe(data, length); /* it may hold the password */
    guint mode;
    if (c && c->password_in_keyfile && sluice__secret_file_exposed(path, &mode)) {
        g_autofree char *name = g_filename_display_name(path);
        g_warning("%s holds the Redis password and its group or others may read it (mode %04o): "
                  "chmod 600 it, or move the password to password_file or $%s",
                  name, mode, SLUICE__PASSWORD_ENV);
    }
    return c;
}

void sluice__config_free(sluice__config *config)
{
    if (!config)
        return;
    g_free(config->path);
    sluice__secret_free(config->redis_url);
    sluice__secret_free(config->redis_password);
    sluice__secret_free(config->sentinel_password);
    g_free(config->key_prefix);
    g_free(config->tls.ca_file);
    g_free(config->tls.cert_file);
    g_free(config->tls.key_file);
    g_free(config->tls.server_name);
    g_free(config->shm_name);
    g_hash_table_unref(config->rules);
    g_hash_table_unref(config->overrides);
    g_free(config);
}

/* "PATH SHA256" of a file ("PATH ?" when it cannot be read now), or "". */
static char *describe_file(const char *path)
{
    if (!path)
        return g_strdup("");
    g_autofree char *data = NULL;
    gsize length = 0;
    g_autofree char *digest =
        g_file_get_contents(path, &data, &length, NULL)
            ? g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)data, length)
            : g_strdup("?");
    if (data)
        sluice__secret_wipe(data, length); /* it may be a private key */
    return g_strdup_printf("%s %s", path, digest);
}

char *sluice__tls_settings_describe(const sluice__tls_settings *t)
{
    g_autofree char *ca = describe_file(t->ca_file);
    g_autofree char *cert = describe_file(t->cert_file);
    g_autofree char *key = describe_file(t->key_file);
    return g_strdup_printf("%s\n%s\n%s\n%s", ca, cert, key, t->server_name ? t->server_name : "");
}
