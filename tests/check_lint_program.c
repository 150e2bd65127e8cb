/* SPDX-License-Identifier: MIT */
/* sluice lint --program: the decorated names of built programs (tests/lint_sites) and a
 * built example checked against keyfiles, and the ELF reader (tools/sites.c) on files of
 * either class and byte order, cut short or malformed. */
#include "fixture.h"
#include "sites.h"

#include <elf.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>

#if !defined(SLUICE_CLI_PATH) || !defined(LINT_SITES) || !defined(LINT_SITES_SHARED)
#error "SLUICE_CLI_PATH, LINT_SITES, LINT_SITES_SHARED: built files (tests/CMakeLists.txt)"
#endif
#define SOURCE SLUICE_SOURCE_DIR "/tests/lint_sites/"

/* Runs the sluice command with args (NULL-terminated) and asserts its exit status
 * and whole output. */
static void run(int status, const char *out, const char *err, const char *const *args)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, test_unconst(SLUICE_CLI_PATH));
    for (; *args; args++)
        g_ptr_array_add(argv, test_unconst(*args));
    g_ptr_array_add(argv, NULL);
    g_autofree char *got_out = NULL, *got_err = NULL;
    g_autoptr(GError) error = NULL;
    int wait_status;
    ck_assert_msg(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               &got_out, &got_err, &wait_status, &error),
                  "cannot run sluice: %s", error ? error->message : "");
    ck_assert_msg(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == status,
                  "exit %d, expected %d; stdout: %s; stderr: %s", WEXITSTATUS(wait_status), status,
                  got_out, got_err);
    ck_assert_str_eq(got_out, out);
    ck_assert_str_eq(got_err, err);
}

#define RULE(name) "[limit:" name "]\nlimit = 1\nwindow = 1s\n"

/* ---- the built programs ---------------------------------------------------------------- */

START_TEST(a_misspelt_rule_is_reported_at_both_decorations_and_exits_1)
{
    g_autofree char *ini = fixture_write_keyfile(RULE("logn") RULE("report.export") RULE("healthz")
                                                     RULE("upload") RULE("café"));
    g_autofree char *out = g_strdup_printf(
        SOURCE "main.c:14: login_form() \"login\": no rule [limit:login] in %s; did you mean "
               "[limit:logn]?\n" SOURCE
               "main.c:21: guard \"login\": no rule [limit:login] in %s; did you mean "
               "[limit:logn]?\n" SOURCE
               "main.c:33: guard dynamic_name: not a string literal, so sluice lint cannot "
               "check it\n"
               "%s: [limit:logn]: no decorated function of " LINT_SITES ", " LINT_SITES_SHARED
               " uses it\n",
        ini, ini, ini);
    run(1, out, "",
        (const char *const[]){"lint", "--program", LINT_SITES, "-p", LINT_SITES_SHARED, ini, NULL});
}
END_TEST

START_TEST(every_name_with_a_rule_and_every_rule_used_is_ok)
{
    g_autofree char *ini = fixture_write_keyfile(RULE("login") RULE("report.export") RULE("healthz")
                                                     RULE("upload") RULE("café"));
    g_autofree char *out = g_strdup_printf(
        SOURCE "main.c:33: guard dynamic_name: not a string literal, so sluice lint cannot "
               "check it\n%s: ok\n",
        ini);
    run(0, out, "",
        (const char *const[]){"lint", "--program", LINT_SITES, "-p", LINT_SITES_SHARED, ini, NULL});
}
END_TEST

/* The archive member nothing calls is not linked, so never.linked is no site; the
 * shared library left out, its rules are used by no function. */
START_TEST(only_what_is_linked_counts)
{
    g_autofree char *ini = fixture_write_keyfile(RULE("login") RULE("report.export") RULE("healthz")
                                                     RULE("never.linked") RULE("upload"));
    g_autofree char *out = g_strdup_printf(
        SOURCE "main.c:33: guard dynamic_name: not a string literal, so sluice lint cannot "
               "check it\n"
               "%s: [limit:never.linked]: no decorated function of " LINT_SITES " uses it\n"
               "%s: [limit:upload]: no decorated function of " LINT_SITES " uses it\n",
        ini, ini);
    run(1, out, "", (const char *const[]){"lint", "--program", LINT_SITES, ini, NULL});
}
END_TEST

#ifdef QUICKSTART
START_TEST(the_built_quickstart_example_shows_its_misspelt_rule)
{
    g_autofree char *ini = fixture_write_keyfile(RULE("report.export") RULE("logn")
                                                     RULE("cache.flush") RULE("healthz"));
    g_autofree char *out = g_strdup_printf(
        SLUICE_SOURCE_DIR "/examples/quickstart.c:33: guard \"login\": no rule [limit:login] in "
                          "%s; did you mean [limit:logn]?\n"
                          "%s: [limit:logn]: no decorated function of " QUICKSTART " uses it\n",
        ini, ini);
    run(1, out, "", (const char *const[]){"lint", "--program", QUICKSTART, ini, NULL});
}
END_TEST
#endif

START_TEST(a_file_that_is_not_elf_exits_2_and_one_without_sites_is_said)
{
    g_autofree char *ini = fixture_write_keyfile(RULE("login"));
    g_autofree char *not_elf = g_strdup_printf(
        "sluice lint: %s: not an ELF file (a program, shared library or object)\n", ini);
    run(2, "", not_elf, (const char *const[]){"lint", "--program", ini, ini, NULL});
    run(2, "", "sluice lint: /nonexistent/program: No such file or directory\n",
        (const char *const[]){"lint", "--program", "/nonexistent/program", ini, NULL});
    /* the sluice command decorates nothing */
    g_autofree char *out = g_strdup_printf(
        "%s: [limit:login]: no decorated function of " SLUICE_CLI_PATH " uses it\n", ini);
    run(1, out,
        "sluice lint: " SLUICE_CLI_PATH ": no decorated function found (no section "
        "sluice_sites)\n",
        (const char *const[]){"lint", "--program", SLUICE_CLI_PATH, ini, NULL});
    /* an invalid keyfile: its problems, not the programs' */
    g_autofree char *bad = fixture_write_keyfile("[limit:login]\nlimit = -1\nwindow = 1s\n");
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_config_check(bad, &error));
    g_autofree char *problems = g_strdup_printf("%s\n", error->message);
    run(1, problems, "", (const char *const[]){"lint", "--program", LINT_SITES, bad, NULL});
}
END_TEST

/* ---- the ELF reader -------------------------------------------------------------------- */

static void put(guint8 *at, gsize width, guint64 v, gboolean big)
{
    for (gsize i = 0; i < width; i++)
        at[big ? width - 1 - i : i] = (guint8)(v >> (8 * i));
}
#define PUT(type, at, member, v)                                                                   \
    put(d + (at) + offsetof(type, member), sizeof(((type *)0)->member), (v), big)
#define SET(kind, at, member, v)                                                                   \
    (is64 ? PUT(Elf64_##kind, at, member, v) : PUT(Elf32_##kind, at, member, v))

/* An ELF file of the class and byte order whose section sluice_sites holds sites
 * (n bytes); its section headers come last. */
static GBytes *elf_file(gboolean is64, gboolean big, const char *sites, gsize n)
{
    static const char names[] = "\0.shstrtab\0sluice_sites"; /* at 1 and 11 */
    gsize eh = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
    gsize sh = is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
    gsize names_at = eh, sites_at = eh + sizeof(names), sh_at = sites_at + n;
    gsize size = sh_at + 3 * sh;
    guint8 *d = g_malloc0(size);
    memcpy(d, ELFMAG, SELFMAG);
    d[EI_CLASS] = is64 ? ELFCLASS64 : ELFCLASS32;
    d[EI_DATA] = big ? ELFDATA2MSB : ELFDATA2LSB;
    d[EI_VERSION] = EV_CURRENT;
    SET(Ehdr, 0, e_type, ET_DYN);
    SET(Ehdr, 0, e_shoff, sh_at);
    SET(Ehdr, 0, e_shentsize, sh);
    SET(Ehdr, 0, e_shnum, 3);
    SET(Ehdr, 0, e_shstrndx, 1);
    SET(Shdr, sh_at + sh, sh_name, 1);
    SET(Shdr, sh_at + sh, sh_type, SHT_STRTAB);
    SET(Shdr, sh_at + sh, sh_offset, names_at);
    SET(Shdr, sh_at + sh, sh_size, sizeof(names));
    SET(Shdr, sh_at + 2 * sh, sh_name, 11);
    SET(Shdr, sh_at + 2 * sh, sh_type, SHT_PROGBITS);
    SET(Shdr, sh_at + 2 * sh, sh_offset, sites_at);
    SET(Shdr, sh_at + 2 * sh, sh_size, n);
    memcpy(d + names_at, names, sizeof(names));
    memcpy(d + sites_at, sites, n);
    return g_bytes_new_take(d, size);
}

/* Reads the first n bytes of file as cli_sites_read would from a program. */
static gboolean read_bytes(GBytes *file, gsize n, GPtrArray *sites, GError **error)
{
    g_autofree char *path = fixture_write_keyfile("");
    ck_assert(g_file_set_contents(path, g_bytes_get_data(file, NULL), (gssize)n, NULL));
    gboolean ok = cli_sites_read(path, sites, error);
    if (error && *error) { /* the temporary name, for exact asserts */
        char *message = (*error)->message;
        ck_assert(g_str_has_prefix(message, path));
        memmove(message, message + strlen(path), strlen(message + strlen(path)) + 1);
    }
    return ok;
}

static const char two_sites[] = "sluice-site/1\0\"a\" \"\\x62\"\0f.c\0"
                                "7\0fn\0\0\0"
                                "sluice-site/1\0NAME\0g.c\0"
                                "12\0\0";

START_TEST(records_are_read_in_either_class_and_byte_order)
{
    GBytes *file = elf_file(_i & 1, _i & 2, two_sites, sizeof(two_sites) - 1);
    g_autoptr(GPtrArray) sites = g_ptr_array_new_with_free_func((GDestroyNotify)cli_site_free);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(read_bytes(file, g_bytes_get_size(file), sites, &error), "%s", error->message);
    ck_assert_uint_eq(sites->len, 2);
    const cli_site *a = g_ptr_array_index(sites, 0), *b = g_ptr_array_index(sites, 1);
    ck_assert_str_eq(a->name, "ab");
    ck_assert_str_eq(a->spelling, "\"a\" \"\\x62\"");
    ck_assert_str_eq(a->file, "f.c");
    ck_assert_int_eq(a->line, 7);
    ck_assert_str_eq(a->function, "fn");
    ck_assert_ptr_null(b->name);
    ck_assert_str_eq(b->spelling, "NAME");
    ck_assert_str_eq(b->file, "g.c");
    ck_assert_int_eq(b->line, 12);
    ck_assert_ptr_null(b->function);
    g_bytes_unref(file);
}
END_TEST

/* Every length short of the whole file cuts the section headers off: an error,
 * never a crash or a site read from beyond the end. */
START_TEST(a_file_cut_short_anywhere_is_an_error)
{
    GBytes *file = elf_file(_i & 1, _i & 2, two_sites, sizeof(two_sites) - 1);
    for (gsize n = 0; n < g_bytes_get_size(file); n++) {
        g_autoptr(GPtrArray) sites = g_ptr_array_new_with_free_func((GDestroyNotify)cli_site_free);
        g_autoptr(GError) error = NULL;
        ck_assert_msg(!read_bytes(file, n, sites, &error), "%" G_GSIZE_FORMAT " bytes read", n);
        ck_assert_uint_eq(sites->len, 0);
        if (n < SELFMAG)
            ck_assert_str_eq(error->message,
                             ": not an ELF file (a program, shared library or object)");
        else if (n >= (_i & 1 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr)))
            ck_assert_str_eq(error->message, ": not a valid ELF file: bad section headers");
    }
    g_bytes_unref(file);
}
END_TEST

#define BYTES(s) s, sizeof(s) - 1 /* a string literal's bytes, without the final NUL */
static const struct {
    const char *sites;
    gsize n;
    const char *error;
} malformed[] = {
    {BYTES("sluice-site/1\0\"a\"\0f.c\0"
           "7"),
     ": not a valid ELF file: a record of its section sluice_sites is cut short"},
    {BYTES("sluice-site/1\0\"a\"\0f.c\0seven\0\0"),
     ": not a valid ELF file: a record of its section sluice_sites has no line number"},
    {BYTES("\0\0sluice-site/9\0\"a\"\0f.c\0"
           "7\0\0"),
     ": section sluice_sites holds a record this sluice does not know (offset 2): built with "
     "another version of sluice?"},
};

START_TEST(a_malformed_record_is_an_error)
{
    GBytes *file = elf_file(TRUE, FALSE, malformed[_i].sites, malformed[_i].n);
    g_autoptr(GPtrArray) sites = g_ptr_array_new_with_free_func((GDestroyNotify)cli_site_free);
    g_autoptr(GError) error = NULL;
    ck_assert(!read_bytes(file, g_bytes_get_size(file), sites, &error));
    ck_assert_str_eq(error->message, malformed[_i].error);
    g_bytes_unref(file);
}
END_TEST

static const struct {
    const char *spelling;
    const char *name; /* NULL: not a string literal */
} literals[] = {
    {"\"login\"", "login"},
    {"\"report\" \".export\"", "report.export"},
    {"( (\"a\") )", "a"},
    {"u8\"caf\\u00e9\"", "café"},
    {"\"\\U0001F600\"", "\xf0\x9f\x98\x80"},
    {"\"t\\x61\\142\\tq\\\"\\\\\\101\\0cut\"", "tab\tq\"\\A"},
    {"\"\\e\\?\\'\"", "\033?'"},
    {"\"\"", ""},
    {"LOGIN_NAME", NULL},
    {"names[1]", NULL},
    {"flag ? \"a\" : \"b\"", NULL},
    {"\"open", NULL},
    {"\"a\" b", NULL},
    {"\"\\x100\"", NULL},
    {"\"\\777\"", NULL},
    {"\"\\q\"", NULL},
    {"\"\\u12\"", NULL},
    {"\"\\uD800\"", NULL},
    {"()", NULL},
    {"", NULL},
};

START_TEST(a_spelling_is_decoded_as_c_reads_the_literal)
{
    g_autofree char *name = cli_site_literal(literals[_i].spelling);
    if (literals[_i].name)
        ck_assert_msg(name && strcmp(name, literals[_i].name) == 0, "%s: %s", literals[_i].spelling,
                      name ? name : "NULL");
    else
        ck_assert_msg(!name, "%s: %s", literals[_i].spelling, name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lint_program");
    TCase *tc = tcase_create("lint_program");
    tcase_add_test(tc, a_misspelt_rule_is_reported_at_both_decorations_and_exits_1);
    tcase_add_test(tc, every_name_with_a_rule_and_every_rule_used_is_ok);
    tcase_add_test(tc, only_what_is_linked_counts);
#ifdef QUICKSTART
    tcase_add_test(tc, the_built_quickstart_example_shows_its_misspelt_rule);
#endif
    tcase_add_test(tc, a_file_that_is_not_elf_exits_2_and_one_without_sites_is_said);
    tcase_add_loop_test(tc, records_are_read_in_either_class_and_byte_order, 0, 4);
    tcase_add_loop_test(tc, a_file_cut_short_anywhere_is_an_error, 0, 4);
    tcase_add_loop_test(tc, a_malformed_record_is_an_error, 0, G_N_ELEMENTS(malformed));
    tcase_add_loop_test(tc, a_spelling_is_decoded_as_c_reads_the_literal, 0,
                        G_N_ELEMENTS(literals));
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
