/*
 * confdoc.h - the configuration as text, printed from config.c's key
 * table: the effective configuration with the source of each key
 * (`outboxd config`), the sample file deploy/outboxd.ini.example
 * (`outboxd config --example`) and the README's key tables (`outboxd
 * config --doc-table logical|polling`). tests/e2e/cli.sh diffs the last
 * two against the committed files, so documentation and parser cannot
 * drift.
 */
#ifndef OUTBOXD_CONFDOC_H
#define OUTBOXD_CONFDOC_H

#include <stdio.h>

#include "config.h"

/* Every key of c as "key = value  ; source", by section, secrets masked
 * (the conninfo's password, [kafka] secret properties). */
void confdoc_effective(const struct config *c, FILE *out);

/* The sample configuration: every key, its default and meaning. */
void confdoc_example(FILE *out);

/* The README's Markdown key table of "logical" (every section but
 * [polling], and outboxd's [kafka] keys) or "polling" ([polling]).
 * Returns 0, -1 for another name. */
int confdoc_table(const char *which, FILE *out);

#endif
