/* SPDX-License-Identifier: MIT */
/* What operators' tools need: check a keyfile, describe a rule, reset a limit. */
#include <sluice/admin.h>
#include <sluice/error.h>

#include <string.h>

#include <sluice/error.h>

#include "arguments.h"
#include "config.h"
#include "engine.h"
#include "override.h"
#include "registry.h"
#include "shm/zone.h"

gboolean sluice_config_check(const char *path, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (!sluice__check_path(path, error))
        return FALSE;
    g_autoptr(sluice__config) config = sluice__config_load(path, error);
    return config != NULL;
}

/* The rule of name in the running keyfile; NULL with *error for a bad name, before
 * sluice_init (SLUICE_ERROR_NOT_INITIALIZED) and for a name with no rule
 * (SLUICE_ERROR_NO_RULE). */
static const sluice__rule *rule_of(const char *name, GError **error)
{
    if (!sluice__check_name(name, error))
        return NULL;
    sluice__limiter *limiter = sluice__registry_find(name);
    const sluice__rule *rule = limiter ? sluice__limiter_rule(limiter) : NULL;
    if (rule)
        return rule;
    if (!limiter && !sluice__registry_active())
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED,
                            sluice_strerror(SLUICE_ERROR_NOT_INITIALIZED));
    else
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_NO_RULE, "the keyfile has no rule [limit:%s]",
                    name);
    return NULL;
}

static void describe(const sluice__rule *rule, sluice_rule_info *out)
{
    gboolean adaptive = rule->algorithm == SLUICE__ADAPTIVE;
    *out = (sluice_rule_info){sluice__algorithm_name(rule->algorithm),
                              rule->limit,
                              rule->burst,
                              rule->window_us / 1000,
                              rule->wait_us / 1000,
                              rule->shadow,
                              rule->per_key,
                              adaptive ? rule->min_limit : 0,
                              rule->warmup_us / 1000,
                              adaptive ? sluice__controller_names[rule->controller] : NULL,
                              rule->algorithm != SLUICE__FIXED_WINDOW ? NULL
                              : rule->epoch                           ? "epoch"
                                                                      : "first_hit"};
}

static gboolean out_given(gconstpointer out, GError **error)
{
    if (out)
        return TRUE;
    g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT,
                        "out is NULL; expected where to write the rule");
    return FALSE;
}

gboolean sluice_rule_get(const char *name, sluice_rule_info *out, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (!out_given(out, error))
        return FALSE;
    const sluice__rule *rule = rule_of(name, error);
    if (!rule)
        return FALSE;
    describe(rule, out);
    return TRUE;
}

gboolean sluice_rule_get_key(const char *name, const char *key, sluice_rule_info *out,
                             sluice_rule_source *source, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (!out_given(out, error) || !sluice__check_key(key, error))
        return FALSE;
    const sluice__rule *rule = rule_of(name, error);
    if (!rule)
        return FALSE;
    const sluice__rule *found = sluice__rule_for_key(rule, rule->per_key ? key : NULL);
    describe(found->kind == SLUICE__KIND_LIMIT ? found : rule, out);
    if (source)
        *source = found->kind == SLUICE__KIND_BLOCKED     ? SLUICE_RULE_BLOCKED
                  : found->kind == SLUICE__KIND_UNLIMITED ? SLUICE_RULE_UNLIMITED
                  : found != rule                         ? SLUICE_RULE_OVERRIDE
                                                          : SLUICE_RULE_OWN;
    return TRUE;
}

guint sluice_rule_overrides(const char *name, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, 0);
    const sluice__rule *rule = rule_of(name, error);
    return rule ? sluice__overrides_count(rule->overrides) : 0;
}

G_STATIC_ASSERT(SLUICE_RULE_BANDS_MAX == 1 + SLUICE__MAX_BANDS);

guint sluice_rule_bands(const char *name, sluice_band_info *out, guint n, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, 0);
    const sluice__rule *rule = rule_of(name, error);
    if (!rule)
        return 0;
    guint count = sluice__rule_bands(rule);
    for (guint i = 0; out && i < MIN(n, count); i++) {
        sluice__band b = sluice__rule_band(rule, i);
        out[i] = (sluice_band_info){b.limit, b.burst, b.window_us / 1000, i > rule->n_bands};
    }
    return count;
}

gboolean sluice_reset(const char *name, const char *key, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    sluice__limiter *limiter;
    return sluice__find(name, key, 0, &limiter, error) && sluice__engine_reset(limiter, key, error);
}

gboolean sluice_zone_get(sluice_zone_info *out, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (!out) {
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT, "out is NULL");
        return FALSE;
    }
    return sluice__engine_zone(out, error);
}

gboolean sluice_zone_remove(const char *name, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    gboolean ok = name && *name && *name != '.' && strlen(name) <= 200;
    for (const char *p = name; ok && *p; p++)
        ok = g_ascii_isalnum(*p) || *p == '.' || *p == '_' || *p == '-';
    if (!ok) {
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT,
                            "name is not a zone's name: letters, digits, '.', '_' and '-'");
        return FALSE;
    }
    return sluice__zone_remove(name, error);
}
