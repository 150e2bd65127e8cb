/* SPDX-License-Identifier: MIT */
/* The layout a zone's size decides, and the check of a zone's header against it:
 * nothing of another process's zone is used before its numbers are found to be
 * exactly what its size gives. */
#include "shm/layout.h"

#include <string.h>

#define ALIGN 64

static guint64 round_up(guint64 n)
{
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

sluice__zone_layout sluice__zone_layout_of(guint64 size, sluice__zone_share share)
{
    sluice__zone_layout l = {0};
    l.size = size;
    l.share = share;
    l.n_limits = (guint32)CLAMP(size >> 16, 64, 4096);
    l.procs_off = SLUICE__ZONE_HEADER_BYTES;
    l.limits_off = round_up(l.procs_off + SLUICE__ZONE_PROCS * sizeof(sluice__zone_proc));
    l.chunks_off = round_up(l.limits_off + (guint64)l.n_limits * sizeof(sluice__zone_limit));
    l.stripe_bytes = round_up(sizeof(sluice__zone_stripe));
    if (size < l.chunks_off)
        return l;
    guint64 rest = size - l.chunks_off;
    guint64 chunks =
        (share == SLUICE__ZONE_SHARE_LARGE ? rest / 4 : rest / 32) / sizeof(sluice__zone_chunk);
    l.n_chunks = (guint32)MIN(chunks, (guint64)G_MAXUINT32 - 1);
    l.stripes_off = round_up(l.chunks_off + (guint64)l.n_chunks * sizeof(sluice__zone_chunk));
    if (size >= l.stripes_off)
        l.n_stripes = (guint32)MIN((size - l.stripes_off) / l.stripe_bytes, (guint64)G_MAXUINT32);
    return l;
}

gboolean sluice__zone_header_check(const void *bytes, gsize length, guint64 file_size, char **why)
{
    const sluice__zone_header *h = bytes;
    if (length < sizeof *h || file_size < sizeof *h) {
        *why =
            g_strdup_printf("%" G_GUINT64_FORMAT " bytes, shorter than a zone's header", file_size);
        return FALSE;
    }
    if (memcmp(h->magic, SLUICE__ZONE_MAGIC, sizeof h->magic) != 0) {
        *why = g_strdup("not a sluice zone (no magic)");
        return FALSE;
    }
    if (h->version != SLUICE__ZONE_LAYOUT) {
        *why = g_strdup_printf("made by another version of sluice (zone layout %u, this one "
                               "reads %u); remove it with sluice zone --remove",
                               h->version, SLUICE__ZONE_LAYOUT);
        return FALSE;
    }
    if (h->header_bytes != sizeof *h || h->mutex_bytes != sizeof(pthread_mutex_t)) {
        *why = g_strdup("made by a build of sluice with other structure sizes");
        return FALSE;
    }
    if (h->layout.size != file_size) {
        *why = g_strdup_printf("its header says %" G_GUINT64_FORMAT
                               " bytes, the file has %" G_GUINT64_FORMAT " (truncated?)",
                               h->layout.size, file_size);
        return FALSE;
    }
    if (h->layout.share > SLUICE__ZONE_SHARE_LARGE) {
        *why = g_strdup("its header is damaged (chunk share)");
        return FALSE;
    }
    sluice__zone_layout expected = sluice__zone_layout_of(file_size, h->layout.share);
    if (memcmp(&expected, &h->layout, sizeof expected) != 0 || expected.n_stripes == 0) {
        *why = g_strdup("its header is damaged (the layout is not what its size gives)");
        return FALSE;
    }
    return TRUE;
}
