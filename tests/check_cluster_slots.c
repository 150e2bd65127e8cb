/* SPDX-License-Identifier: MIT */
/* Redis Cluster's slots as sluice reads them: the slot of each key (against CLUSTER
 * KEYSLOT of a real Cluster), the map from CLUSTER SLOTS replies (written by hand
 * and from a real 3-master Cluster), MOVED and ASK; and the test Cluster itself. */
#include "fixture.h"

#include <signal.h>
#include <string.h>

#include "redis/cluster_slots.h"
#include "redis/key.h"
#include "redis_cluster.h"

static test_cluster *cluster; /* 3 masters, no replica */

/* The reply hiredis reads from RESP text. */
static redisReply *read_reply(const char *resp)
{
    redisReader *reader = redisReaderCreate();
    void *reply = NULL;
    ck_assert_int_eq(redisReaderFeed(reader, resp, strlen(resp)), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(reader, &reply), REDIS_OK);
    ck_assert_ptr_nonnull(reply);
    redisReaderFree(reader);
    return reply;
}

/* ---- the slot of a key ---------------------------------------------------------- */

START_TEST(key_slot_is_crc16_of_the_hash_tag)
{
    /* the check value of CRC16/XMODEM, and the Cluster specification's examples */
    ck_assert_uint_eq(sluice__cluster_key_slot("123456789", 9), 0x31c3);
    ck_assert_uint_eq(sluice__cluster_key_slot("foo", 3), 12182);
    ck_assert_uint_eq(sluice__cluster_key_slot("{user1000}.following", 20),
                      sluice__cluster_key_slot("user1000", 8));
    ck_assert_uint_ne(sluice__cluster_key_slot("foo{}{bar}", 10),
                      sluice__cluster_key_slot("bar", 3));
    ck_assert_uint_eq(sluice__cluster_key_slot("foo{{bar}}zap", 13),
                      sluice__cluster_key_slot("{bar", 4));
    ck_assert_uint_eq(sluice__cluster_key_slot("foo{bar}{zap}", 13),
                      sluice__cluster_key_slot("bar", 3));
    ck_assert_uint_eq(sluice__cluster_key_slot("", 0), 0);
    /* only len bytes are read */
    ck_assert_uint_ne(sluice__cluster_key_slot("{ab}", 3), sluice__cluster_key_slot("ab", 2));
}
END_TEST

START_TEST(key_slot_agrees_with_a_real_cluster_for_sluice_keys)
{
    static const char *const names[] = {"n", "login", "a}b", "n{", "ü", "report.export"};
    static const char *const keys[] = {NULL, "", "u1", "{", "}", "a b", "%7B", "x:seq", "ü{ß}"};
    g_autofree char *long_key = g_strnfill(300, 'k');
    for (gsize n = 0; n < G_N_ELEMENTS(names); n++) {
        for (gsize k = 0; k <= G_N_ELEMENTS(keys); k++) {
            g_auto(sluice__redis_keys) built = {NULL, NULL};
            sluice__redis_keys_build(&built, "sluice:gc:", names[n],
                                     k < G_N_ELEMENTS(keys) ? keys[k] : long_key);
            const char *both[] = {built.state, built.seq};
            guint slot = sluice__cluster_key_slot(built.state, strlen(built.state));
            for (int i = 0; i < 2; i++) {
                redisReply *r =
                    test_cluster_command(cluster, cluster->node[0], "CLUSTER KEYSLOT %s", both[i]);
                ck_assert_ptr_nonnull(r);
                ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
                ck_assert_msg(r->integer == slot, "%s: %lld, not %u", both[i], r->integer, slot);
                freeReplyObject(r);
            }
        }
    }
    /* and plain keys, with and without a tag */
    for (int i = 0; i < 2000; i++) {
        g_autofree char *key = g_strdup_printf(i % 2 ? "k%d" : "x{t%d}y", i);
        redisReply *r = test_cluster_command(cluster, cluster->node[1], "CLUSTER KEYSLOT %s", key);
        ck_assert_int_eq(r->integer, sluice__cluster_key_slot(key, strlen(key)));
        freeReplyObject(r);
    }
}
END_TEST

/* ---- CLUSTER SLOTS -------------------------------------------------------------- */

START_TEST(slots_reply_gives_each_range_its_master)
{
    /* Redis 7: [first, last, [endpoint, port, id, {metadata}], replicas...] */
    redisReply *r = read_reply("*3\r\n"
                               "*4\r\n:0\r\n:5460\r\n"
                               "*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nm0\r\n*0\r\n"
                               "*4\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nr0\r\n*0\r\n"
                               "*3\r\n:5461\r\n:10922\r\n"
                               "*3\r\n$-1\r\n:7001\r\n$2\r\nm1\r\n" /* unknown endpoint */
                               "*3\r\n:10923\r\n:16383\r\n"
                               "*2\r\n$3\r\n::1\r\n:7002\r\n"); /* Redis 3: no id */
    sluice__cluster_slots slots;
    char *why = NULL;
    ck_assert(sluice__cluster_slots_parse(r, "node-a", &slots, &why));
    ck_assert_uint_eq(slots.n_ranges, 3);
    ck_assert_uint_eq(slots.ranges[0].first, 0);
    ck_assert_uint_eq(slots.ranges[0].last, 5460);
    ck_assert_str_eq(slots.ranges[0].host, "127.0.0.1");
    ck_assert_int_eq(slots.ranges[0].port, 7000);
    ck_assert_str_eq(slots.ranges[0].id, "m0");
    ck_assert_str_eq(slots.ranges[1].host, "node-a");
    ck_assert_int_eq(slots.ranges[1].port, 7001);
    ck_assert_str_eq(slots.ranges[2].host, "::1");
    ck_assert_ptr_null(slots.ranges[2].id);
    ck_assert_uint_eq(slots.ranges[2].last, 16383);
    sluice__cluster_slots_clear(&slots);
    ck_assert_ptr_null(slots.ranges);
    freeReplyObject(r);

    /* "" and "?" are unknown endpoints too */
    r = read_reply("*2\r\n*3\r\n:0\r\n:1\r\n*2\r\n$0\r\n\r\n:7000\r\n"
                   "*3\r\n:2\r\n:2\r\n*2\r\n$1\r\n?\r\n:7001\r\n");
    ck_assert(sluice__cluster_slots_parse(r, "h", &slots, &why));
    ck_assert_str_eq(slots.ranges[0].host, "h");
    ck_assert_str_eq(slots.ranges[1].host, "h");
    sluice__cluster_slots_clear(&slots);
    freeReplyObject(r);
}
END_TEST

START_TEST(bad_slots_replies_are_refused_saying_why)
{
    static const struct {
        const char *resp, *why;
    } cases[] = {
        {"-ERR This instance has cluster support disabled\r\n",
         "CLUSTER SLOTS: ERR This instance has cluster support disabled"},
        {"+OK\r\n", "CLUSTER SLOTS: not an array"},
        {"*1\r\n:1\r\n", "CLUSTER SLOTS: a range that is not [first slot, last slot, master, ...]"},
        {"*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n",
         "CLUSTER SLOTS: a range that is not [first slot, last slot, master, ...]"},
        {"*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",
         "CLUSTER SLOTS: a range that is not [first slot, last slot, master, ...]"},
        {"*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n",
         "CLUSTER SLOTS: a port that is not a number from 1 to 65535"},
        {"*1\r\n*3\r\n:0\r\n:1\r\n:7\r\n",
         "CLUSTER SLOTS: a master that is not [endpoint, port, ...]"},
        {"*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n:1\r\n:1\r\n",
         "CLUSTER SLOTS: an endpoint that is not a string"},
        /* the second range is bad: the first is dropped too */
        {"*2\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n*1\r\n:0\r\n",
         "CLUSTER SLOTS: a range that is not [first slot, last slot, master, ...]"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        redisReply *r = read_reply(cases[i].resp);
        sluice__cluster_slots slots;
        g_autofree char *why = NULL;
        ck_assert_msg(!sluice__cluster_slots_parse(r, "h", &slots, &why), "case %zu", i);
        ck_assert_str_eq(why, cases[i].why);
        ck_assert_ptr_null(slots.ranges);
        ck_assert_uint_eq(slots.n_ranges, 0);
        freeReplyObject(r);
    }
}
END_TEST

START_TEST(slots_of_a_real_cluster_cover_every_slot_once)
{
    redisReply *r = test_cluster_command(cluster, cluster->node[2], "CLUSTER SLOTS");
    sluice__cluster_slots slots;
    char *why = NULL;
    ck_assert_msg(sluice__cluster_slots_parse(r, "127.0.0.1", &slots, &why), "%s", why);
    freeReplyObject(r);
    static sluice__cluster_map map;
    sluice__cluster_map_init(&map);
    for (guint i = 0; i < slots.n_ranges; i++) {
        for (guint s = slots.ranges[i].first; s <= slots.ranges[i].last; s++)
            ck_assert_int_eq(sluice__cluster_map_owner(&map, s), SLUICE__CLUSTER_NO_NODE);
        sluice__cluster_map_set(&map, slots.ranges[i].first, slots.ranges[i].last,
                                slots.ranges[i].port);
        ck_assert_str_eq(slots.ranges[i].host, "127.0.0.1");
        ck_assert_uint_eq(strlen(slots.ranges[i].id), 40);
    }
    for (guint s = 0; s < SLUICE__CLUSTER_SLOTS; s++) {
        test_redis *owner = test_cluster_master_of(cluster, s);
        ck_assert_ptr_nonnull(owner);
        ck_assert_int_eq(sluice__cluster_map_owner(&map, s), owner->port);
        s += 97; /* a sample: each lookup asks every node */
    }
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 0), cluster->node[0]->port);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 16383), cluster->node[2]->port);
    sluice__cluster_slots_clear(&slots);
}
END_TEST

START_TEST(map_entries_change_one_range_at_a_time)
{
    static sluice__cluster_map map;
    sluice__cluster_map_init(&map);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 0), SLUICE__CLUSTER_NO_NODE);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 16383), SLUICE__CLUSTER_NO_NODE);
    sluice__cluster_map_set(&map, 0, 16383, 0);
    sluice__cluster_map_set(&map, 100, 200, 2);
    sluice__cluster_map_set(&map, 6965, 6965, 1);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 99), 0);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 100), 2);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 200), 2);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 201), 0);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 6964), 0);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 6965), 1);
    ck_assert_int_eq(sluice__cluster_map_owner(&map, 6966), 0);
}
END_TEST

/* ---- MOVED and ASK -------------------------------------------------------------- */

START_TEST(redirections_name_the_slot_and_the_node)
{
    sluice__cluster_redirect to;
    const char *moved = "MOVED 6965 127.0.0.1:7002";
    ck_assert(sluice__cluster_redirect_parse(moved, strlen(moved), &to));
    ck_assert_int_eq(to.kind, SLUICE__CLUSTER_MOVED);
    ck_assert_uint_eq(to.slot, 6965);
    ck_assert_str_eq(to.host, "127.0.0.1");
    ck_assert_int_eq(to.port, 7002);

    const char *ask = "ASK 0 ::1:17000";
    ck_assert(sluice__cluster_redirect_parse(ask, strlen(ask), &to));
    ck_assert_int_eq(to.kind, SLUICE__CLUSTER_ASK);
    ck_assert_uint_eq(to.slot, 0);
    ck_assert_str_eq(to.host, "::1");
    ck_assert_int_eq(to.port, 17000);

    const char *unknown = "MOVED 16383 :6380"; /* the node that answered */
    ck_assert(sluice__cluster_redirect_parse(unknown, strlen(unknown), &to));
    ck_assert_str_eq(to.host, "");
    ck_assert_int_eq(to.port, 6380);
    ck_assert_uint_eq(to.slot, 16383);

    static const char *const not_redirects[] = {
        "NOSCRIPT No matching script",
        "MOVED",
        "MOVED ",
        "MOVED 16384 h:1",
        "MOVED 99999999999999999999 h:1",
        "MOVED x h:1",
        "MOVED 1 h",
        "MOVED 1 h:",
        "MOVED 1 h:0",
        "MOVED 1 h:65536",
        "MOVED 1 h:1x",
        "MOVED 1  ",
        "ASKING",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down",
        "moved 1 h:1",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(not_redirects); i++)
        ck_assert_msg(
            !sluice__cluster_redirect_parse(not_redirects[i], strlen(not_redirects[i]), &to), "%s",
            not_redirects[i]);
    g_autofree char *hs = g_strnfill(300, 'h');
    g_autofree char *long_host = g_strdup_printf("MOVED 1 %s:1", hs);
    ck_assert(!sluice__cluster_redirect_parse(long_host, strlen(long_host), &to));
}
END_TEST

START_TEST(a_real_node_redirects_to_the_master_of_the_slot)
{
    guint slot = sluice__cluster_key_slot("{6965}", 6);
    test_redis *owner = test_cluster_master_of(cluster, slot);
    test_redis *other = owner == cluster->node[0] ? cluster->node[1] : cluster->node[0];
    redisReply *r = test_cluster_command(cluster, other, "GET {6965}");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    sluice__cluster_redirect to;
    ck_assert_msg(sluice__cluster_redirect_parse(r->str, r->len, &to), "%s", r->str);
    ck_assert_int_eq(to.kind, SLUICE__CLUSTER_MOVED);
    ck_assert_uint_eq(to.slot, slot);
    ck_assert_str_eq(to.host, "127.0.0.1");
    ck_assert_int_eq(to.port, owner->port);
    freeReplyObject(r);
}
END_TEST

/* ---- the test Cluster ----------------------------------------------------------- */

START_TEST(the_test_cluster_spreads_the_slots_and_fails_over_to_a_replica)
{
    test_cluster_options o = {.masters = 3, .replicas = 1, .node_timeout_ms = 300};
    test_cluster *c = test_cluster_start(&o);
    ck_assert_int_eq(c->n_nodes, 6);
    for (int m = 0; m < 3; m++) {
        ck_assert(test_cluster_is_master(c, c->node[m]));
        ck_assert(!test_cluster_is_master(c, c->node[3 + m]));
    }
    ck_assert_ptr_eq(test_cluster_master_of(c, 0), c->node[0]);
    ck_assert_ptr_eq(test_cluster_master_of(c, 5461), c->node[1]);
    ck_assert_ptr_eq(test_cluster_master_of(c, 16383), c->node[2]);

    gint64 killed = g_get_monotonic_time();
    test_redis_kill(c->node[1]);
    ck_assert_msg(test_cluster_wait_ok(c, 15 * G_USEC_PER_SEC), "no failover in 15 s");
    g_test_message("failover in %" G_GINT64_FORMAT " ms", (g_get_monotonic_time() - killed) / 1000);
    ck_assert_ptr_eq(test_cluster_master_of(c, 5461), c->node[4]);
    ck_assert(test_cluster_is_master(c, c->node[4]));
    test_cluster_stop(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_slots");
    TCase *unit = tcase_create("unit");
    tcase_add_test(unit, key_slot_is_crc16_of_the_hash_tag);
    tcase_add_test(unit, slots_reply_gives_each_range_its_master);
    tcase_add_test(unit, bad_slots_replies_are_refused_saying_why);
    tcase_add_test(unit, map_entries_change_one_range_at_a_time);
    tcase_add_test(unit, redirections_name_the_slot_and_the_node);
    suite_add_tcase(s, unit);

    TCase *real = tcase_create("real");
    tcase_set_timeout(real, 120);
    tcase_add_test(real, key_slot_agrees_with_a_real_cluster_for_sluice_keys);
    tcase_add_test(real, slots_of_a_real_cluster_cover_every_slot_once);
    tcase_add_test(real, a_real_node_redirects_to_the_master_of_the_slot);
    tcase_add_test(real, the_test_cluster_spreads_the_slots_and_fails_over_to_a_replica);
    suite_add_tcase(s, real);

    cluster = test_cluster_start(NULL);
    int status = fixture_run(s);
    test_cluster_stop(cluster);
    return status;
}
