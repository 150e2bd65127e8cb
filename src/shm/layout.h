/* SPDX-License-Identifier: MIT */
/* The shm backend's zone as bytes: its header, tables and stripes, and the layout
 * that a zone's size decides.
 *
 * A zone is one file of /dev/shm that every process maps whole:
 *
 *   header      one page: what the zone is (magic, layout version, size, layout),
 *               its secret, the locks of the tables and of the chunk pool
 *   processes   who is attached: pid and start time, for the leases they hold
 *   limits      each limit's rule, as the processes that share it read it
 *   chunks      runs of sliding_log and concurrency, 3 to a chunk, in chains
 *   stripes     the per-key states: 256 cells, their tags and a robust lock each
 *
 * Every number here is also read back from a zone that another process wrote, so
 * whoever reads one checks it against these bounds first. */
#ifndef SLUICE_SHM_LAYOUT_H
#define SLUICE_SHM_LAYOUT_H

#include <pthread.h>

#include <glib.h>

#include "algorithm.h"
#include "rule.h"
#include "value.h"

#define SLUICE__ZONE_MAGIC  "sluicez" /* with its NUL, 8 bytes */
#define SLUICE__ZONE_LAYOUT 2         /* bumped whenever a byte below changes meaning */
#define SLUICE__ZONE_READY  0x52454459u

#define SLUICE__ZONE_HEADER_BYTES 4096
#define SLUICE__ZONE_PROCS        1024 /* processes attached at once (more: leases unowned) */
#define SLUICE__ZONE_CELLS        256  /* cells per stripe                                  */
#define SLUICE__ZONE_BANDS        (1 + SLUICE__MAX_BANDS)
#define SLUICE__ZONE_RUNS         3  /* runs per chunk                                    */
#define SLUICE__ZONE_NAME_BYTES   64 /* a limit's name as the zone keeps it (for messages) */
/* The most runs a log holds, and the most permits one run does: a logged rule's
 * limit (value.h's SLUICE__MAX_LOGGED_PERMITS), twice over with a penalty's debt. */
#define SLUICE__ZONE_MAX_RUNS (2 * SLUICE__MAX_LOGGED_PERMITS + 1)

/* How much of a zone the chunks take: a zone made for a keyfile without
 * sliding_log or concurrency gives them a 32nd, else a quarter. */
typedef enum {
    SLUICE__ZONE_SHARE_SMALL,
    SLUICE__ZONE_SHARE_LARGE,
} sluice__zone_share;

/* Where everything is: a function of the size and the share alone. */
typedef struct {
    guint64 size;
    guint32 share;
    guint32 n_limits;
    guint32 n_stripes;
    guint32 n_chunks;
    guint64 procs_off;
    guint64 limits_off;
    guint64 chunks_off;
    guint64 stripes_off;
    guint64 stripe_bytes;
} sluice__zone_layout;

/* The zone's first page. */
typedef struct {
    char magic[8];
    guint32 version;      /* SLUICE__ZONE_LAYOUT                                    */
    guint32 ready;        /* atomic: SLUICE__ZONE_READY once made                   */
    guint32 header_bytes; /* sizeof(sluice__zone_header)                            */
    guint32 mutex_bytes;  /* sizeof(pthread_mutex_t) of the process that made it    */
    sluice__zone_layout layout;
    guint64 secret[2]; /* the key of the hash of limits and keys                  */
    gint64 created_us; /* real time                                               */
    pthread_mutex_t lock __attribute__((aligned(64)));      /* the processes and limits tables */
    pthread_mutex_t pool_lock __attribute__((aligned(64))); /* the chunk pool             */
    guint32 pool_head;                                      /* first free chunk + 1; 0: none */
    guint32 pool_free;                                      /* free chunks                   */
    guint32 hand __attribute__((aligned(64))); /* atomic: next stripe to free chunks in */
    guint32 release_seq;                       /* atomic: bumped by every give-back   */
    guint64 repairs; /* atomic: locks taken over from a process that died holding them */
} sluice__zone_header;

G_STATIC_ASSERT(sizeof(sluice__zone_header) <= SLUICE__ZONE_HEADER_BYTES);

/* A process attached to the zone. A lease's owner is (slot + 1) << 16 | gen: the
 * owner is alive while the slot is SLUICE__PROC_LIVE with that gen. */
enum {
    SLUICE__PROC_FREE = 0,
    SLUICE__PROC_LIVE = 1,
};

typedef struct {
    guint32 state;
    guint32 pid;
    guint32 gen;        /* 16 bits of it name the owner; bumped when the slot is freed */
    guint32 checked_ms; /* atomic: when a process last looked whether it is alive   */
    guint64 start;      /* the process's start time (/proc/PID/stat, in clock ticks) */
    guint64 attached_us;
} sluice__zone_proc;

G_STATIC_ASSERT(sizeof(sluice__zone_proc) == 32);

/* A limit's rule as the zone keeps it: what decides the answers. */
typedef struct {
    guint32 algorithm;
    guint32 per_key;
    guint32 epoch;
    guint32 n_bands;
    guint32 n_shadow;
    guint32 reserved; /* 0 */
    gint64 limit;
    gint64 window_us;
    gint64 burst;
    gint64 warmup_us;
    sluice__band bands[SLUICE__MAX_BANDS];
} sluice__zone_rule;

enum {
    SLUICE__LIMIT_EMPTY = 0,
    SLUICE__LIMIT_VALID = 1,
    SLUICE__LIMIT_WRITING = 2, /* a process died while writing it: empty again */
};

typedef struct {
    guint32 state;
    guint32 gen;       /* bumped when the rule keeps its state differently (algorithm,
                        * per_key, with or without warmup) */
    guint64 name_hash; /* the name's hash: the limit's identity                     */
    char name[SLUICE__ZONE_NAME_BYTES]; /* its first bytes, NUL-terminated            */
    sluice__zone_rule rule;
} sluice__zone_limit;

/* One key's state for one band (56 bytes: at most 64 per key with the stripe's share). */
typedef struct {
    guint32 meta;    /* limit index (12 bits) | its gen (12 bits) | flags (8 bits); 0: free */
    guint32 used_ms; /* the last decision on it, ms (wraps after 49 days)            */
    guint64 hash;    /* the key's hash for this band                                 */
    gint64 idle_at;  /* from then on the state is back at full capacity              */
    gint64 s[4];     /* a, b, c, d of sluice__state; a log: chain, runs, total        */
} sluice__zone_cell;

G_STATIC_ASSERT(sizeof(sluice__zone_cell) == 56);

#define SLUICE__CELL_STARTED 0x01u /* sluice__state.started                */
#define SLUICE__CELL_LOG     0x02u /* s[0] is a chain of runs (a log)      */
#define SLUICE__CELL_BLOCK   0x04u /* a key's block: s[0] is when it ends, s[1] the key's hash */

static inline guint32 sluice__cell_meta(guint32 limit, guint32 gen, guint32 flags)
{
    return (limit & 0xfff) << 20 | (gen & 0xfff) << 8 | (flags & 0xff);
}
static inline guint32 sluice__cell_limit(guint32 meta)
{
    return meta >> 20;
}
static inline guint32 sluice__cell_gen(guint32 meta)
{
    return (meta >> 8) & 0xfff;
}
static inline guint32 sluice__cell_flags(guint32 meta)
{
    return meta & 0xff;
}

/* A chain of chunks: the first's index + 1 (0: none) and how many. */
typedef struct {
    guint32 first;
    guint32 count;
} sluice__zone_chain;

static inline sluice__zone_chain sluice__chain_of(gint64 s0)
{
    return (sluice__zone_chain){(guint32)((guint64)s0 & 0xffffffffu), (guint32)((guint64)s0 >> 32)};
}
static inline gint64 sluice__chain_word(sluice__zone_chain c)
{
    return (gint64)((guint64)c.count << 32 | c.first);
}

/* A chunk: runs of one log, in a chain. owner is the stripe + 1 that holds the log
 * (0: free, in the pool), cell its cell there. */
typedef struct {
    guint32 owner;
    guint32 next;  /* the next chunk's index + 1; 0: none              */
    guint32 count; /* runs used, 0..SLUICE__ZONE_RUNS                   */
    guint32 cell;
    sluice__run runs[SLUICE__ZONE_RUNS];
} sluice__zone_chunk;

G_STATIC_ASSERT(sizeof(sluice__zone_chunk) == 64);

/* A change of one cell in progress: the cell as it was, and the chain taken from
 * the pool for it (freed if the change is undone). */
typedef struct {
    guint32 cell;
    guint32 reserved;
    sluice__zone_cell before;
    sluice__zone_chain alloc;
} sluice__zone_undo;

enum {
    SLUICE__JOURNAL_IDLE = 0,
    SLUICE__JOURNAL_CHANGING = 1,  /* undo: restore the cells, free what was taken  */
    SLUICE__JOURNAL_RELEASING = 2, /* done: free the chains the cells let go of     */
};

typedef struct {
    guint32 n; /* entries of e in use */
    guint32 reserved;
    sluice__zone_undo e[SLUICE__ZONE_BANDS];
} sluice__zone_journal;

/* The bit of a stripe's block filter for a key of hash h (bits 32-37: neither the
 * stripe's, nor the home group's, nor the tag's). */
static inline guint64 sluice__block_bit(guint64 h)
{
    return G_GUINT64_CONSTANT(1) << ((h >> 32) & 63);
}

/* A decision reads the first line (the lock, the time, the journal's state and
 * the block filter) whatever it decides; the second is written by a change. */
typedef struct {
    pthread_mutex_t lock __attribute__((aligned(64)));
    gint64 changed;  /* the time of the last decision in it                 */
    guint32 seq;     /* atomic: decisions in it so far (wraps)             */
    guint32 state;   /* the journal's: SLUICE__JOURNAL_*                    */
    guint64 blocked; /* the block filter: sluice__block_bit of each blocked key
                      * (sluice_block); a clear bit: the key has no block     */
    guint64 evictions __attribute__((aligned(64))); /* states not back at full capacity
                                                     * given up for room            */
    guint32 used;                                   /* cells that hold a state      */
    guint32 reserved;                               /* 0                            */
    sluice__zone_journal journal;
    guint8 tags[SLUICE__ZONE_CELLS]; /* 0: free; else 8 bits of the cell's hash     */
    sluice__zone_cell cells[SLUICE__ZONE_CELLS];
} sluice__zone_stripe;

G_STATIC_ASSERT(G_STRUCT_OFFSET(sluice__zone_stripe, blocked) + sizeof(guint64) <= 64);

/* The layout of a zone of `size` bytes with `share`; n_stripes 0 when it is too
 * small to hold one stripe. */
sluice__zone_layout sluice__zone_layout_of(guint64 size, sluice__zone_share share);

/* Checks a zone's first `length` bytes (the header at least) as read from a file
 * of file_size bytes: magic, version, the sizes of the structures and a layout
 * that is exactly what its size and share give. FALSE and a sentence in *why
 * (g_free it) when something is off. */
gboolean sluice__zone_header_check(const void *bytes, gsize length, guint64 file_size, char **why);

#endif
