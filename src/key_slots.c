/* SPDX-License-Identifier: MIT */
/* Keyed slots: packing keys into words, comparing and storing them atomically, and
 * the writers' stripe locks every table shares (fork() holds them all: with 8
 * stripes, fork() stays within the 64 mutexes ThreadSanitizer lets a thread hold). */
#include "key_slots.h"

#include <string.h>

#define STRIPES 8
#define WORDS   (SLUICE__KEY_SLOTS_MAX_KEY / 8)
#define NO_KEY  G_MAXUINT32

static GMutex stripes[STRIPES];

gboolean sluice__key_pack(const char *key, sluice__packed_key *k)
{
    memset(k->key.words, 0, sizeof k->key.words);
    if (!key) {
        k->key.len = NO_KEY;
        k->hash = 5381;
        return TRUE;
    }
    gsize n = strnlen(key, SLUICE__KEY_SLOTS_MAX_KEY + 1);
    if (n > SLUICE__KEY_SLOTS_MAX_KEY)
        return FALSE;
    memcpy(k->key.words, key, n);
    guint32 h = 5381;
    for (gsize i = 0; i < n; i++)
        h = h * 33 + (guchar)key[i];
    k->key.len = (guint32)n;
    k->hash = h;
    return TRUE;
}

GMutex *sluice__key_stripe(gconstpointer table, const sluice__packed_key *k)
{
    return &stripes[((GPOINTER_TO_SIZE(table) >> 6) + k->hash) % STRIPES];
}

/* The words a key of length len uses. */
static guint words_of(guint32 len)
{
    return len == NO_KEY ? 0 : (len + 7) / 8;
}

gboolean sluice__slot_key_holds(const sluice__slot_key *s, const sluice__packed_key *k)
{
    if (__atomic_load_n(&s->len, __ATOMIC_ACQUIRE) != k->key.len)
        return FALSE;
    for (guint i = 0; i < words_of(k->key.len); i++)
        if (__atomic_load_n(&s->words[i], __ATOMIC_ACQUIRE) != k->key.words[i])
            return FALSE;
    return TRUE;
}

void sluice__slot_key_set(sluice__slot_key *s, const sluice__packed_key *k)
{
    __atomic_store_n(&s->len, k->key.len, __ATOMIC_RELEASE);
    for (guint i = 0; i < WORDS; i++)
        __atomic_store_n(&s->words[i], k->key.words[i], __ATOMIC_RELEASE);
}

void sluice__slot_key_clear(sluice__slot_key *s)
{
    __atomic_store_n(&s->len, 0, __ATOMIC_RELEASE);
}

void sluice__key_stripes_lock(void)
{
    for (guint i = 0; i < STRIPES; i++)
        g_mutex_lock(&stripes[i]);
}

void sluice__key_stripes_unlock(void)
{
    for (guint i = 0; i < STRIPES; i++)
        g_mutex_unlock(&stripes[i]);
}
