/* SPDX-License-Identifier: MIT */
/* The processes attached to a zone: a slot each, named by pid and start time, so
 * that the leases of one that died are given back, and a pid reused by another
 * process is not taken for it. Also the lock of the processes and limits tables,
 * and its repair. */
#include "shm/procs.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shm/lock.h"

#define LOOK_EVERY_MS 10

guint64 sluice__proc_start_time(pid_t pid, gboolean *zombie)
{
    if (zombie)
        *zombie = FALSE;
    char path[64], text[1024];
    g_snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    /* "pid (comm) state ppid ...": the comm may hold anything, up to its last ')';
     * the start time is the 22nd field, the 20th after it */
    char *p = strrchr(text, ')');
    if (!p)
        return 0;
    p++;
    while (*p == ' ')
        p++;
    if (zombie)
        *zombie = *p == 'Z' || *p == 'X';
    for (int field = 3; field < 22 && *p; field++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    return g_ascii_strtoull(p, NULL, 10);
}

/* A limit left half written by a process that died: empty again, and its states
 * (under a new gen) fresh. */
static void repair_tables(gpointer data)
{
    sluice__zone *z = data;
    for (guint32 i = 0; i < z->l.n_limits; i++) {
        sluice__zone_limit *l = sluice__zone_limit_at(z, i);
        if (l->state != SLUICE__LIMIT_EMPTY && l->state != SLUICE__LIMIT_VALID) {
            l->gen++;
            l->state = SLUICE__LIMIT_EMPTY;
        }
    }
}

gboolean sluice__zone_tables_lock(sluice__zone *z)
{
    return sluice__zone_lock_repairing(&z->h->lock, repair_tables, z, &z->h->repairs);
}

void sluice__zone_tables_unlock(sluice__zone *z)
{
    sluice__zone_unlock(&z->h->lock);
}

void sluice__zone_procs_join(sluice__zone *z)
{
    pid_t pid = getpid();
    guint64 start = sluice__proc_start_time(pid, NULL);
    z->pid = pid;
    z->proc = -1;
    z->owner = 0;
    for (guint32 i = 0; i < SLUICE__ZONE_PROCS; i++) {
        sluice__zone_proc *p = sluice__zone_proc_at(z, i);
        if (p->state != SLUICE__PROC_FREE)
            continue;
        p->pid = (guint32)pid;
        p->start = start;
        p->attached_us = (guint64)g_get_real_time();
        p->checked_ms = 0;
        guint32 gen = p->gen;
        __atomic_store_n(&p->state, SLUICE__PROC_LIVE, __ATOMIC_RELEASE); /* last: now it counts */
        z->proc = (gint)i;
        z->owner = (i + 1) << 16 | (gen & 0xffff);
        return;
    }
}

/* Frees slot p: leases named by it are no one's now. */
static void free_slot(sluice__zone_proc *p)
{
    __atomic_store_n(&p->state, SLUICE__PROC_FREE, __ATOMIC_RELEASE);
    __atomic_store_n(&p->gen, p->gen + 1, __ATOMIC_RELEASE);
}

void sluice__zone_procs_leave(sluice__zone *z)
{
    if (z->proc >= 0) {
        sluice__zone_proc *p = sluice__zone_proc_at(z, (guint32)z->proc);
        if (p->state == SLUICE__PROC_LIVE && (p->gen & 0xffff) == (z->owner & 0xffff))
            free_slot(p);
    }
    z->proc = -1;
    z->owner = 0;
}

/* TRUE when the process that took slot p is still running. */
static gboolean alive(const sluice__zone_proc *p)
{
    pid_t pid = (pid_t)p->pid;
    if (pid <= 0)
        return FALSE;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return FALSE;
    gboolean zombie;
    guint64 start = sluice__proc_start_time(pid, &zombie);
    /* 0: /proc says nothing, take it as alive */
    return !zombie && (start == 0 || start == p->start);
}

void sluice__zone_procs_scan(sluice__zone *z)
{
    for (guint32 i = 0; i < SLUICE__ZONE_PROCS; i++) {
        sluice__zone_proc *p = sluice__zone_proc_at(z, i);
        if (p->state == SLUICE__PROC_FREE || (gint)i == z->proc)
            continue;
        if (p->state != SLUICE__PROC_LIVE || !alive(p))
            free_slot(p);
    }
}

gboolean sluice__zone_owner_dead(sluice__zone *z, guint32 owner)
{
    if (sluice__zone_owner_alive(z, owner) == FALSE)
        return TRUE;
    if (owner == 0 || owner == z->owner)
        return FALSE;
    sluice__zone_proc *p = sluice__zone_proc_at(z, (owner >> 16) - 1);
    guint32 now_ms = (guint32)(g_get_monotonic_time() / 1000);
    guint32 last = __atomic_load_n(&p->checked_ms, __ATOMIC_RELAXED);
    if (now_ms - last < LOOK_EVERY_MS ||
        !__atomic_compare_exchange_n(&p->checked_ms, &last, now_ms, FALSE, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return FALSE; /* looked at a moment ago */
    if (alive(p) || !sluice__zone_tables_lock(z))
        return FALSE;
    if (sluice__zone_owner_alive(z, owner)) /* still the same process's slot */
        free_slot(p);
    sluice__zone_tables_unlock(z);
    return TRUE;
}

guint sluice__zone_procs_others(sluice__zone *z)
{
    guint n = 0;
    for (guint32 i = 0; i < SLUICE__ZONE_PROCS; i++) {
        sluice__zone_proc *p = sluice__zone_proc_at(z, i);
        n += p->state == SLUICE__PROC_LIVE && (gint)i != z->proc;
    }
    return n;
}
