/* SPDX-License-Identifier: MIT */
/* sluice zone: what the shared-memory zone of a keyfile (backend = shm) holds, or
 * its removal. */
#include <stdio.h>

#include "cli.h"

#define COMMAND "zone"

static const cli_spec spec = {
    COMMAND,
    "",
    0,
    0,
    TRUE,
    "Shows what the shared-memory zone of a keyfile with backend = shm holds, or removes it.",
    "Prints one line:\n"
    "  zone=NAME path=/dev/shm/sluice-NAME size=BYTES capacity=C keys=K\n"
    "  evictions=E chunks=N chunks_free=F processes=P repairs=R bytes_per_key=B\n"
    "or with --json one object: its size, the most per-key states it holds\n"
    "(capacity; each band of a key is one), the states it holds now (keys), the\n"
    "states not yet back at full capacity it gave up for room since it was made\n"
    "(evictions), the chunks that hold sliding_log and concurrency runs (3 each),\n"
    "the processes attached, and the locks taken over from a process that died\n"
    "holding them (repairs). The zone is made if there is none yet.\n"
    "With --remove the zone's file is removed instead (it is not opened, so a\n"
    "damaged one can be removed): processes that have it keep theirs until they\n"
    "detach, and the next process to attach makes a new, empty one.\n\n"
    "Exit status: 0 done, 2 bad arguments, a keyfile without backend = shm, or no\n"
    "zone to remove, 3 the zone cannot be opened or removed.",
};

/* The zone's name in the keyfile at path; NULL after saying why. */
static char *zone_name(const char *path)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GKeyFile) keyfile = cli_keyfile_load(path, &error);
    if (!keyfile) {
        cli_fail(COMMAND, error);
        return NULL;
    }
    g_autofree char *backend = cli_keyfile_value(keyfile, "sluice", "backend");
    char *name = cli_keyfile_value(keyfile, "sluice", "shm");
    if (g_strcmp0(backend, "shm") != 0 || !name || !*name) {
        fprintf(stderr, "sluice %s: %s: no zone; expected [sluice] backend = shm and shm = NAME\n",
                COMMAND, path);
        g_free(name);
        return NULL;
    }
    return name;
}

static int remove_zone(const char *path)
{
    g_autofree char *name = zone_name(path);
    if (!name)
        return CLI_EXIT_USAGE;
    g_autoptr(GError) error = NULL;
    if (!sluice_zone_remove(name, &error)) {
        fprintf(stderr, "sluice %s: %s\n", COMMAND, error->message);
        return error->code == SLUICE_ERROR_IO ? CLI_EXIT_BACKEND : CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int cli_zone(char **argv)
{
    g_auto(GStrv) args = argv;
    g_autofree char *path = NULL;
    gboolean json = FALSE, remove = FALSE;
    const GOptionEntry entries[] = {
        {"remove", 0, 0, G_OPTION_ARG_NONE, &remove, "Remove the zone instead", NULL},
        {"json", 'j', 0, G_OPTION_ARG_NONE, &json, "Print one JSON object", NULL},
        G_OPTION_ENTRY_NULL,
    };
    int rc = cli_parse(&spec, entries, &args, &path);
    if (rc >= 0)
        return rc;
    if (remove)
        return remove_zone(path);
    g_autofree char *name = zone_name(path);
    if (!name)
        return CLI_EXIT_USAGE;
    if ((rc = cli_open(COMMAND, path, NULL, NULL)) >= 0)
        return rc;
    sluice_zone_info z;
    g_autoptr(GError) error = NULL;
    if (!sluice_zone_get(&z, &error))
        return cli_fail(COMMAND, error);
    gint64 per_key = z.capacity > 0 ? z.size / z.capacity : 0;
    g_autoptr(GString) out = g_string_new(NULL);
    if (json) {
        g_string_append(out, "{\"zone\":");
        cli_append_json_string(out, name);
        g_string_append(out, ",\"path\":");
        cli_append_json_string(out, z.path);
        g_string_append_printf(out,
                               ",\"size\":%" G_GINT64_FORMAT ",\"capacity\":%" G_GINT64_FORMAT
                               ",\"keys\":%" G_GINT64_FORMAT ",\"evictions\":%" G_GUINT64_FORMAT
                               ",\"chunks\":%" G_GINT64_FORMAT ",\"chunks_free\":%" G_GINT64_FORMAT
                               ",\"processes\":%u,\"repairs\":%" G_GUINT64_FORMAT
                               ",\"bytes_per_key\":%" G_GINT64_FORMAT "}",
                               z.size, z.capacity, z.keys, z.evictions, z.chunks, z.chunks_free,
                               z.processes, z.repairs, per_key);
    } else {
        g_string_append_printf(
            out,
            "zone=%s path=%s size=%" G_GINT64_FORMAT " capacity=%" G_GINT64_FORMAT
            " keys=%" G_GINT64_FORMAT " evictions=%" G_GUINT64_FORMAT " chunks=%" G_GINT64_FORMAT
            " chunks_free=%" G_GINT64_FORMAT " processes=%u repairs=%" G_GUINT64_FORMAT
            " bytes_per_key=%" G_GINT64_FORMAT,
            name, z.path, z.size, z.capacity, z.keys, z.evictions, z.chunks, z.chunks_free,
            z.processes, z.repairs, per_key);
    }
    puts(out->str);
    return CLI_EXIT_OK;
}
