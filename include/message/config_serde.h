/*
 * config_serde.h - the configuration's [registry] section and each outbox
 * section's value_* keys built into serde.h's set: the registry client
 * (registry.h) and a serde per section whose value_converter is avro,
 * json_schema or protobuf. Like config_outbox.h, it sits above the
 * configuration so that config.c depends on neither.
 */
#ifndef OUTBOXD_CONFIG_SERDE_H
#define OUTBOXD_CONFIG_SERDE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "registry.h"
#include "serde.h"

/* Whether any outbox section's values go through the registry. */
bool config_uses_registry(const struct config *c);

/* The registry client's options from [registry] into *o, the password
 * read from password_file into *password (malloc'd, the caller frees it;
 * NULL when there is none). o's strings borrow c's. 0, or -1 with err. */
int config_registry_opts(const struct config *c, struct registry_opts *o, char **password,
                         char *err, size_t errlen);

/* The value_* keys of section s into *spec (spec->record_name borrows
 * s's). 0, or -1 with err naming the section and key. */
int config_serde_spec(const struct outbox_spec *s, struct serde_spec *spec, char *err,
                      size_t errlen);

/* What config_outbox_validate() adds for the registry: every section's
 * value_* keys read, and [registry] url set (and readable) when a section
 * needs it. 0, or -1 with err. */
int config_serde_validate(const struct config *c, char *err, size_t errlen);

/* The set for the daemon: the registry client started (its thread runs)
 * when a section needs it, and a serde per such section, in
 * config_outbox_at() order. 0, or -1 with err. Free with
 * serde_set_free(). */
int config_serde_set(const struct config *c, struct serde_set *set, char *err, size_t errlen);

#endif
