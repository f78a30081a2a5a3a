/*
 * config_outbox.c - the configuration's outbox sections built into maps,
 * and the checks of the built maps (see config_outbox.h).
 */
#include "config_outbox.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config_serde.h"

/* err, prefixed with s's label unless it names a section already. */
static void label_error(const struct outbox_spec *s, char *err, size_t errlen)
{
    if (!s->name || !strncmp(err, "[outbox.", 8)) return;
    char why[1024], label[128];
    snprintf(why, sizeof(why), "%s", !strncmp(err, "[outbox] ", 9) ? err + 9 : err);
    snprintf(err, errlen, "%s %s", config_outbox_label(s, label, sizeof(label)), why);
}

int config_outbox_map(const struct outbox_spec *s, struct outbox_map *m, char *err,
                      size_t errlen)
{
    if (outbox_map_init(m, s->table, (const char *const *)s->columns, s->topic, err,
                        errlen) != 0)
        goto fail_init;
    m->tombstone_on_empty = s->tombstone_on_empty;
    m->timestamp_commit = s->timestamp_commit;
    if (outbox_map_set_headers(m, s->headers, s->placement, err, errlen) != 0 ||
        outbox_map_set_value_json(m, s->value_format == VALUE_JSON, err, errlen) != 0 ||
        outbox_map_set_span_context(m, s->span_column, err, errlen) != 0 ||
        outbox_map_set_message_prefix(m, s->message_prefix, err, errlen) != 0)
        goto fail;
    return 0;
fail:
    outbox_map_free(m);
fail_init:
    label_error(s, err, errlen);
    return -1;
}

int config_outbox_set(const struct config *c, struct outbox_set *set, char *err,
                      size_t errlen)
{
    outbox_set_init(set);
    for (size_t i = 0; i < config_outbox_count(c); i++) {
        const struct outbox_spec *s = config_outbox_at(c, i);
        struct outbox_map m;
        if (config_outbox_map(s, &m, err, errlen) != 0) goto fail;
        if (outbox_set_add(set, &m, s->name) != 0) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    }
    return 0;
fail:
    outbox_set_free(set);
    return -1;
}

/* Sections dup and other of set have the same message_prefix: err says so
 * (and, when both inherit it from [outbox], where to set it instead). */
static void prefix_error(const struct config *c, const struct outbox_set *set, size_t dup,
                         size_t other, char *err, size_t errlen)
{
    size_t pi = config_key_index("outbox", "message_prefix");
    /* two maps: named sections, in c->outboxes' order */
    bool inherited = c->outboxes[dup].source[pi] == CONFIG_SRC_INHERITED ||
                     c->outboxes[other].source[pi] == CONFIG_SRC_INHERITED;
    snprintf(err, errlen,
             "[outbox.%s] and [outbox.%s] both have message_prefix = %s: a message belongs to "
             "one section, so each section needs its own prefix%s",
             set->names[other], set->names[dup], set->maps[dup].message_prefix,
             inherited ? " (inherited from [outbox]: set message_prefix in each "
                         "[outbox.NAME] section that has messages, not in [outbox])"
                       : "");
}

/* The sections' maps, built: no two on one table, no two with one
 * message_prefix, and none with one in polling mode. 0, or -1 with err. */
static int check_maps(const struct config *c, char *err, size_t errlen)
{
    struct outbox_set set;
    if (config_outbox_set(c, &set, err, errlen) != 0) return -1;
    size_t other;
    int dup = outbox_set_duplicate(&set, &other);
    if (dup >= 0)
        snprintf(err, errlen, "[outbox.%s] and [outbox.%s] are both on the table %s.%s: one "
                 "table, one section (one topic template per table)", set.names[other],
                 set.names[dup], set.maps[dup].schema, set.maps[dup].table);
    if (dup < 0 && (dup = outbox_set_duplicate_prefix(&set, &other)) >= 0)
        prefix_error(c, &set, (size_t)dup, other, err, errlen);
    if (dup < 0 && c->source_mode == SOURCE_POLLING && outbox_set_has_prefix(&set)) {
        snprintf(err, errlen,
                 "[outbox] message_prefix needs [source] mode = logical: polling reads the "
                 "outbox table, and logical decoding messages are only in the replication "
                 "stream (unset message_prefix, or use mode = logical)");
        dup = 0;
    }
    outbox_set_free(&set);
    return dup >= 0 ? -1 : 0;
}

int config_outbox_validate(const struct config *c, char *err, size_t errlen)
{
    if (config_validate(c, err, errlen) != 0) return -1;
    if (check_maps(c, err, errlen) != 0) return -1;
    return config_serde_validate(c, err, errlen);
}

bool config_outbox_key_set(const struct outbox_spec *s, const char *key)
{
    size_t i = config_key_index("outbox", key);
    return s->source[i] != CONFIG_SRC_DEFAULT && s->source[i] != CONFIG_SRC_PRESET;
}
