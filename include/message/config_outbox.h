/*
 * config_outbox.h - the configuration's outbox sections ([outbox],
 * [outbox.NAME]; config.h) built into outbox.c's maps, and the checks only
 * built maps can make. It sits above both config.h and outbox.h, so that
 * the configuration itself depends on neither outbox.c nor outboxset.c.
 */
#ifndef OUTBOXD_CONFIG_OUTBOX_H
#define OUTBOXD_CONFIG_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "outbox.h"
#include "outboxset.h"

/* Builds the outbox map section s describes (table, columns, topic
 * template, headers) into m. 0, or -1 with the reason in err (naming the
 * section). The caller frees m with outbox_map_free(). */
int config_outbox_map(const struct outbox_spec *s, struct outbox_map *m, char *err,
                      size_t errlen);

/* The maps of every section in use, in config_outbox_at() order, into
 * set (outbox_set_init()). 0, or -1 with err. The caller frees set with
 * outbox_set_free(). */
int config_outbox_set(const struct config *c, struct outbox_set *set, char *err,
                      size_t errlen);

/* config_validate(), then the maps: each section's builds (table name,
 * topic template, headers), no two are on one table or share a
 * message_prefix, and polling mode has no message_prefix. What the
 * daemon and the subcommands run on a loaded configuration. 0, or -1 with
 * err. */
int config_outbox_validate(const struct config *c, char *err, size_t errlen);

/* Whether [outbox] key was set for s (file, environment, --set, or
 * inherited from a set [outbox]), not left at its default or preset. */
bool config_outbox_key_set(const struct outbox_spec *s, const char *key);

#endif
