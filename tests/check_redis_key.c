/* SPDX-License-Identifier: MIT */
/* The Redis key builder with untrusted keys: distinct keys for distinct callers,
 * exactly one hash tag in one slot, long keys hashed, checked by hand and against
 * real redis-servers (a plain one, and a one-node Redis Cluster). */
#include "fixture.h"

#include <string.h>

#include "redis/key.h"
#include "redis_cluster.h"

#define PREFIX "sluice:"

static test_cluster *cluster; /* one node, every slot served by itself */

/* Keys a caller could send to break the key format or the hash tag. */
static const char *nasty[32];
static gsize n_nasty;

static void make_nasty_keys(void)
{
    static const char *const fixed[] = {
        "a",     ":",     "a:b", "{",    "}",    "{}",   "}{",    "a}b",    "a{b}",  "{a}",
        " ",     "a b",   "\n",  "a\nb", "\r\t", "%",    "%7B",   "%257B",  "x:seq", "}:seq",
        ":seq}", "1:a:b", "#",   "a#b",  "ü{ß}", "\x7f", "a%20b", "a%2520b"};
    for (gsize i = 0; i < G_N_ELEMENTS(fixed); i++)
        nasty[n_nasty++] = fixed[i];
    /* 10 kB of bytes, 10 kB of braces, and the keys around the hashing bound */
    char *big = g_malloc(10241), *braces = g_malloc(10241);
    memset(big, 'x', 10240);
    memset(braces, '}', 10240);
    big[10240] = braces[10240] = '\0';
    nasty[n_nasty++] = big;
    nasty[n_nasty++] = braces;
    nasty[n_nasty++] = g_strnfill(SLUICE__REDIS_KEY_MAX_PLAIN, 'k');
    nasty[n_nasty++] = g_strnfill(SLUICE__REDIS_KEY_MAX_PLAIN + 1, 'k');
    g_assert(n_nasty <= G_N_ELEMENTS(nasty));
}

static const char *const names[] = {"n", "a", "a:b", "a}b", "n{", "n b", "1:a", "a:1"};

/* Redis Cluster's CRC16 (XMODEM: polynomial 0x1021, initial 0), as in cluster.c. */
static guint16 crc16(const char *buf, gsize len)
{
    guint16 crc = 0;
    for (gsize i = 0; i < len; i++) {
        crc ^= (guint16)((guchar)buf[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (guint16)((crc << 1) ^ 0x1021) : (guint16)(crc << 1);
    }
    return crc;
}

/* What Redis hashes: the bytes between the first `{` and the first `}` after it
 * when there are any, else the whole key (cluster.c keyHashSlot). */
static void hash_tag(const char *key, const char **start, gsize *len)
{
    const char *open = strchr(key, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    if (!open || !close || close == open + 1) {
        *start = key;
        *len = strlen(key);
        return;
    }
    *start = open + 1;
    *len = (gsize)(close - open - 1);
}

static int key_slot(const char *key)
{
    const char *tag;
    gsize len;
    hash_tag(key, &tag, &len);
    return crc16(tag, len) & 16383;
}

static gsize count_char(const char *s, char c)
{
    gsize n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

/* Every (name, key) pair and the keys it was given, for the tests below. */
typedef struct {
    const char *name, *key;
    sluice__redis_keys keys;
} built;

static GArray *build_all(void)
{
    GArray *all = g_array_new(FALSE, FALSE, sizeof(built));
    for (gsize n = 0; n < G_N_ELEMENTS(names); n++) {
        for (gsize k = 0; k <= n_nasty; k++) {
            built b = {names[n], k < n_nasty ? nasty[k] : NULL, {NULL, NULL}};
            sluice__redis_keys_build(&b.keys, PREFIX, b.name, b.key);
            g_array_append_val(all, b);
        }
    }
    return all;
}

static void free_all(GArray *all)
{
    for (guint i = 0; i < all->len; i++)
        sluice__redis_keys_clear(&g_array_index(all, built, i).keys);
    g_array_free(all, TRUE);
}

START_TEST(nasty_keys_and_names_never_share_a_redis_key)
{
    GArray *all = build_all();
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < all->len; i++) {
        built *b = &g_array_index(all, built, i);
        /* the state and seq keys of every pair: 2 × pairs distinct strings */
        ck_assert_msg(g_hash_table_add(seen, b->keys.state), "state key repeated: %.80s",
                      b->keys.state);
        ck_assert_msg(g_hash_table_add(seen, b->keys.seq), "seq key repeated: %.80s", b->keys.seq);
    }
    ck_assert_uint_eq(g_hash_table_size(seen), 2 * all->len);
    free_all(all);
}
END_TEST

START_TEST(every_key_has_exactly_the_intended_hash_tag_and_one_slot)
{
    GArray *all = build_all();
    for (guint i = 0; i < all->len; i++) {
        built *b = &g_array_index(all, built, i);
        const char *state = b->keys.state, *seq = b->keys.seq;
        ck_assert(g_str_has_prefix(state, PREFIX "{"));
        ck_assert_uint_eq(count_char(state, '{'), 1);
        ck_assert_uint_eq(count_char(state, '}'), 1);
        ck_assert(g_str_has_suffix(state, "}"));
        ck_assert_str_eq(seq + strlen(state), ":seq");
        ck_assert(strncmp(seq, state, strlen(state)) == 0);
        /* Redis hashes exactly the text between our braces */
        const char *tag;
        gsize len;
        hash_tag(state, &tag, &len);
        ck_assert_ptr_eq(tag, state + strlen(PREFIX) + 1);
        ck_assert_uint_eq(len, strlen(state) - strlen(PREFIX) - 2);
        ck_assert_int_eq(key_slot(state), key_slot(seq));
        /* the tag starts with the name's length, and holds no control byte or space */
        g_autofree char *head = g_strdup_printf("{%zu:", strlen(b->name));
        ck_assert(g_str_has_prefix(state + strlen(PREFIX), head));
        for (const char *p = state; *p; p++)
            ck_assert(*p != 0x7f && (guchar)*p > ' ');
    }
    free_all(all);
}
END_TEST

START_TEST(plain_keys_are_escaped_and_readable)
{
    static const struct {
        const char *name, *key, *state;
    } cases[] = {
        {"login", "alice", PREFIX "{5:login:alice}"},
        {"login", NULL, PREFIX "{5:login:}"},
        {"a:b", "c", PREFIX "{3:a:b:c}"},
        {"a", "b:c", PREFIX "{1:a:b:c}"},
        {"n", "a}b{c", PREFIX "{1:n:a%7Db%7Bc}"},
        {"n}", "x", PREFIX "{2:n%7D:x}"},
        {"n", "50% off", PREFIX "{1:n:50%25%20off}"},
        {"n", "a\nb\x7f", PREFIX "{1:n:a%0Ab%7F}"},
        {"n", "ü", PREFIX "{1:n:ü}"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        sluice__redis_keys keys;
        sluice__redis_keys_build(&keys, PREFIX, cases[i].name, cases[i].key);
        ck_assert_str_eq(keys.state, cases[i].state);
        g_autofree char *seq = g_strconcat(cases[i].state, ":seq", NULL);
        ck_assert_str_eq(keys.seq, seq);
        sluice__redis_keys_clear(&keys);
    }
}
END_TEST

START_TEST(keys_over_the_bound_are_hashed_and_never_equal_a_plain_key)
{
    g_autofree char *at_bound = g_strnfill(SLUICE__REDIS_KEY_MAX_PLAIN, 'k');
    g_autofree char *over = g_strnfill(SLUICE__REDIS_KEY_MAX_PLAIN + 1, 'k');
    g_autofree char *digest = g_compute_checksum_for_string(G_CHECKSUM_SHA256, over, -1);
    sluice__redis_keys plain, hashed, lookalike;

    sluice__redis_keys_build(&plain, PREFIX, "n", at_bound);
    g_autofree char *expected_plain = g_strdup_printf(PREFIX "{1:n:%s}", at_bound);
    ck_assert_str_eq(plain.state, expected_plain);

    sluice__redis_keys_build(&hashed, PREFIX, "n", over);
    g_autofree char *expected_hashed = g_strdup_printf(PREFIX "{1:n#%s}", digest);
    ck_assert_str_eq(hashed.state, expected_hashed);
    ck_assert_uint_eq(strlen(hashed.state), strlen(PREFIX) + strlen("{1:n#}") + 64);

    /* a plain key that spells the hash is another key: `:` after the name, not `#` */
    g_autofree char *spelled = g_strconcat("#", digest, NULL);
    sluice__redis_keys_build(&lookalike, PREFIX, "n", spelled);
    ck_assert_str_ne(lookalike.state, hashed.state);
    /* and so is a name that ends in "#" + the digest with its length counted */
    sluice__redis_keys named;
    g_autofree char *name = g_strconcat("n#", digest, NULL);
    sluice__redis_keys_build(&named, PREFIX, name, NULL);
    ck_assert_str_ne(named.state, hashed.state);

    /* 10 kB keys cost 64 hex digits in Redis, and different ones stay apart */
    g_autofree char *big1 = g_strnfill(10240, 'x');
    g_autofree char *big2 = g_strnfill(10240, 'x');
    big2[10239] = 'y';
    sluice__redis_keys k1, k2;
    sluice__redis_keys_build(&k1, PREFIX, "n", big1);
    sluice__redis_keys_build(&k2, PREFIX, "n", big2);
    ck_assert_str_ne(k1.state, k2.state);
    ck_assert_uint_eq(strlen(k1.state), strlen(hashed.state));

    sluice__redis_keys_clear(&plain);
    sluice__redis_keys_clear(&hashed);
    sluice__redis_keys_clear(&lookalike);
    sluice__redis_keys_clear(&named);
    sluice__redis_keys_clear(&k1);
    sluice__redis_keys_clear(&k2);
}
END_TEST

START_TEST(a_prefix_with_braces_is_refused_by_the_keyfile)
{
    char *why = NULL;
    ck_assert(sluice__redis_key_prefix_check("sluice:", &why));
    ck_assert(sluice__redis_key_prefix_check("app:limits:", &why));
    ck_assert(!sluice__redis_key_prefix_check("app{x}:", &why));
    g_free(why);
    ck_assert(!sluice__redis_key_prefix_check("}", &why));
    g_free(why);

    g_autoptr(GError) error = NULL;
    g_autofree char *path = fixture_write_keyfile("[sluice]\nkey_prefix = app{1}\n");
    ck_assert(!sluice_init(path, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG));
    ck_assert_msg(strstr(error->message, "[sluice] key_prefix = app{1}: holds { or }"), "%s",
                  error->message);
}
END_TEST

/* ---- against real servers -------------------------------------------------------------- */

static long long integer_of(redisReply *r)
{
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s",
                  r->type == REDIS_REPLY_ERROR ? r->str : "?");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static long long keyslot(redisContext *ctx, const char *key)
{
    return integer_of(redisCommand(ctx, "CLUSTER KEYSLOT %b", key, strlen(key)));
}

START_TEST(redis_cluster_puts_both_keys_in_the_slot_of_the_tag)
{
    redisContext *ctx = test_redis_connect(cluster->node[0], NULL);
    ck_assert(ctx && !ctx->err);
    GArray *all = build_all();
    for (guint i = 0; i < all->len; i++) {
        built *b = &g_array_index(all, built, i);
        long long slot = keyslot(ctx, b->keys.state);
        ck_assert_int_eq(slot, key_slot(b->keys.state)); /* our CRC16 is Redis' */
        ck_assert_int_eq(keyslot(ctx, b->keys.seq), slot);
    }
    free_all(all);
    /* the reference values of the Redis Cluster specification */
    ck_assert_int_eq(keyslot(ctx, "123456789"), crc16("123456789", 9) & 16383);
    ck_assert_int_eq(crc16("123456789", 9), 0x31C3);
    redisFree(ctx);
}
END_TEST

static const char *const algorithms[] = {"fixed_window", "sliding_log", "sliding_window",
                                         "token_bucket", "gcra",        "concurrency"};

/* A keyfile on server with a limit of 1 per key for each algorithm, under each name. */
static void init_on(const test_redis *server)
{
    GString *ini = g_string_new(NULL);
    g_string_append_printf(ini,
                           "[sluice]\nbackend = redis\nredis = redis://127.0.0.1:%d\n"
                           "on_error = deny\ntimeout = 2s\n",
                           server->port);
    for (gsize a = 0; a < G_N_ELEMENTS(algorithms); a++)
        for (gsize n = 0; n < G_N_ELEMENTS(names); n++)
            g_string_append_printf(ini, "[limit:%s.%s]\nalgorithm = %s\nlimit = 1\nwindow = 1h\n",
                                   algorithms[a], names[n], algorithms[a]);
    g_autofree char *path = fixture_write_keyfile(ini->str);
    g_string_free(ini, TRUE);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
}

/* Every name × nasty key takes its one permit, then is refused: no two share state,
 * and no script call touches two slots (a cluster would refuse it: CROSSSLOT). */
static void each_caller_has_its_own_state(const test_redis *server)
{
    init_on(server);
    for (gsize a = 0; a < G_N_ELEMENTS(algorithms); a++) {
        for (gsize n = 0; n < G_N_ELEMENTS(names); n++) {
            g_autofree char *name = g_strdup_printf("%s.%s", algorithms[a], names[n]);
            for (gsize k = 0; k <= n_nasty; k++) {
                const char *key = k < n_nasty ? nasty[k] : NULL;
                g_autoptr(GError) error = NULL;
                sluice_decision d;
                int r = sluice_acquire(name, key, 1, &d, &error);
                ck_assert_msg(r == SLUICE_ALLOWED, "%s key %zu: %d %s", name, k, r,
                              error ? error->message : "");
                ck_assert_int_eq(sluice_acquire(name, key, 1, &d, &error), SLUICE_DENIED);
            }
        }
    }
    sluice_shutdown();
    /* and each caller's state is one key of its own (plus concurrency's :seq
     * counter) */
    long long callers = (long long)G_N_ELEMENTS(names) * (long long)(n_nasty + 1);
    redisContext *ctx = test_redis_connect(server, NULL);
    ck_assert_int_eq(integer_of(redisCommand(ctx, "DBSIZE")),
                     callers * (G_N_ELEMENTS(algorithms) + 1));
    redisFree(ctx);
}

START_TEST(nasty_keys_keep_separate_state_on_a_real_server)
{
    test_redis *server = test_redis_start(NULL);
    each_caller_has_its_own_state(server);
    test_redis_stop(server);
}
END_TEST

START_TEST(nasty_keys_keep_separate_state_on_redis_cluster)
{
    each_caller_has_its_own_state(cluster->node[0]);
}
END_TEST

int main(void)
{
    make_nasty_keys();
    cluster = test_cluster_start(&(test_cluster_options){.masters = 1});

    Suite *s = suite_create("redis_key");
    TCase *tc = tcase_create("builder");
    tcase_add_test(tc, nasty_keys_and_names_never_share_a_redis_key);
    tcase_add_test(tc, every_key_has_exactly_the_intended_hash_tag_and_one_slot);
    tcase_add_test(tc, plain_keys_are_escaped_and_readable);
    tcase_add_test(tc, keys_over_the_bound_are_hashed_and_never_equal_a_plain_key);
    tcase_add_test(tc, a_prefix_with_braces_is_refused_by_the_keyfile);
    suite_add_tcase(s, tc);

    TCase *servers = tcase_create("servers");
    tcase_set_timeout(servers, 120);
    tcase_add_test(servers, redis_cluster_puts_both_keys_in_the_slot_of_the_tag);
    tcase_add_test(servers, nasty_keys_keep_separate_state_on_a_real_server);
    tcase_add_test(servers, nasty_keys_keep_separate_state_on_redis_cluster);
    suite_add_tcase(s, servers);

    int status = fixture_run(s);
    test_cluster_stop(cluster);
    return status;
}
