/* SPDX-License-Identifier: MIT */
/* The picture of a replay (sluice replay --svg): per limit, admitted and denied permits over time.
 */
#ifndef SLUICE_REPLAY_SVG_H
#define SLUICE_REPLAY_SVG_H

#include <glib.h>
#include <sluice/sluice.h>

/* The decisions of one or more replays of the same trace, in buckets of time. */
typedef struct replay_svg replay_svg;

replay_svg *replay_svg_new(void);
void replay_svg_free(replay_svg *s);

/* Starts the replay of the trace against the keyfile `keyfile` (as shown in the
 * picture): its panels are drawn below the previous replay's. */
void replay_svg_run(replay_svg *s, const char *keyfile);

/* One decided call of the current replay: `permits` of the limit `name`, decided
 * at t_ms (the trace's time of the call plus what it waited); shadow_denied: allowed,
 * but mode = shadow or a shadow band would have refused it. Constant time and
 * memory: the calls are counted into at most a few thousand buckets per limit. */
void replay_svg_add(replay_svg *s, const char *name, gint64 t_ms, gint64 permits, gboolean allowed,
                    gboolean shadow_denied);

/* What the current replay's keyfile says of `name` (rule NULL: no rule), its bands
 * (bands[0 .. n_bands), as sluice_rule_bands gives them), and with how many distinct
 * keys the trace called it: each band's limit is drawn where one line is what it
 * allows (a rate, and one key or per_key = false). */
void replay_svg_rule(replay_svg *s, const char *name, const sluice_rule_info *rule,
                     const sluice_band_info *bands, guint n_bands, guint keys);

/* Writes the picture as SVG to path ("-": stdout). FALSE with *error when it
 * cannot be written. */
gboolean replay_svg_write(replay_svg *s, const char *path, GError **error);

#endif
