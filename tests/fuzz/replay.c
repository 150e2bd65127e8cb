/* SPDX-License-Identifier: MIT */
/* Replays fuzz inputs without libFuzzer: every file named, or found in a directory
 * named, goes once through the harness's LLVMFuzzerTestOneInput. */
#include <glib.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
    g_autofree char *data = NULL;
    gsize length = 0;
    g_autoptr(GError) error = NULL;
    if (!g_file_get_contents(path, &data, &length, &error)) {
        g_printerr("replay: %s\n", error->message);
        return 1;
    }
    g_printerr("replay: %s\n", path); /* names the input if it crashes */
    /* an exact-size copy, so that ASan sees reads past the input as libFuzzer does */
    g_autofree guint8 *exact = g_memdup2(data, length);
    LLVMFuzzerTestOneInput(exact, length);
    return 0;
}

static gint by_path(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(const char *const *)a, *(const char *const *)b);
}

/* Every file in dir, in name order (the same order on every run). */
static int replay_dir(const char *dir, guint *count)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GDir) d = g_dir_open(dir, 0, &error);
    if (!d) {
        g_printerr("replay: %s\n", error->message);
        return 1;
    }
    g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
    for (const char *name; (name = g_dir_read_name(d));)
        g_ptr_array_add(paths, g_build_filename(dir, name, NULL));
    g_ptr_array_sort(paths, by_path);
    int failed = 0;
    for (guint i = 0; i < paths->len; i++) {
        failed |= replay_file(g_ptr_array_index(paths, i));
        (*count)++;
    }
    return failed;
}

int main(int argc, char **argv)
{
    guint count = 0;
    int failed = 0;
    if (argc < 2) {
        g_printerr("usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (g_file_test(argv[i], G_FILE_TEST_IS_DIR)) {
            failed |= replay_dir(argv[i], &count);
        } else {
            failed |= replay_file(argv[i]);
            count++;
        }
    }
    g_print("replay: %u inputs, none crashed\n", count);
    return failed;
}
