/*
 * confdoc.c - the configuration as text, from config.c's key table (see
 * confdoc.h).
 */
#include "confdoc.h"

#include <stdbool.h>
#include <string.h>


#define MASK "********"


static void print_kv(FILE *out, const char *key, const char *value, const char *source)
{
    fprintf(out, "%s = %s%s; %s\n", key, value, *value ? "  " : " ", source);
}

/* [kafka] as it is in c, then outboxd's producer defaults it does not
 * override (kafkaconf.c applies them when the producer is made). */
static void effective_kafka(const struct config *c, FILE *out)
{
    for (size_t i = 0; i < c->nkafka; i++)
        print_kv(out, c->kafka[i].key,
                 config_kafka_key_secret(c->kafka[i].key) ? MASK : c->kafka[i].value,
                 config_source_name(c->kafka[i].source));
    if (c->kafka_sasl_password_file)
        print_kv(out, "sasl.password_file", c->kafka_sasl_password_file,
                 config_source_name(c->kafka_sasl_password_file_source));
    if (c->kafka_oidc_secret_file)
        print_kv(out, "sasl.oauthbearer.client.secret_file", c->kafka_oidc_secret_file,
                 config_source_name(c->kafka_oidc_secret_file_source));
    const char *k, *v, *m;
    for (size_t i = 0; config_kafka_producer_default(i, &k, &v, &m); i++)
        if (!config_kafka_get(c, k)) print_kv(out, k, v, "default");
}

/* The keys of one outbox section. */
static void effective_outbox(const struct outbox_spec *s, FILE *out)
{
    char value[4096];
    for (size_t i = 0; i < config_key_count(); i++)
        if (!strcmp(config_key_at(i)->section, "outbox"))
            print_kv(out, config_key_at(i)->key,
                     config_outbox_key_value(s, i, value, sizeof(value)),
                     config_source_name((enum config_source)s->source[i]));
}

/* [outbox], then each [outbox.NAME] (whose keys say "[outbox]" when they
 * come from the plain section). */
static void effective_outboxes(const struct config *c, FILE *out)
{
    if (c->noutboxes)
        fprintf(out, "; the defaults of the [outbox.NAME] sections below (each names its "
                     "table)\n");
    effective_outbox(&c->outbox, out);
    for (size_t i = 0; i < c->noutboxes; i++) {
        fprintf(out, "\n[outbox.%s]\n", c->outboxes[i].name);
        effective_outbox(&c->outboxes[i], out);
    }
}

void confdoc_effective(const struct config *c, FILE *out)
{
    char value[4096];
    fprintf(out, "; outboxd's effective configuration: key = value ; where it came from "
                 "(default, file, environment, --set, secret file; [outbox]: inherited from "
                 "the plain [outbox] section). Secrets are masked.\n");
    if (c->path) fprintf(out, "; file: %s\n", c->path);
    for (size_t s = 0; config_section_at(s); s++) {
        fprintf(out, "\n[%s]\n", config_section_at(s));
        if (!strcmp(config_section_at(s), "kafka")) {
            effective_kafka(c, out);
            continue;
        }
        if (!strcmp(config_section_at(s), "outbox")) {
            effective_outboxes(c, out);
            continue;
        }
        for (size_t i = 0; i < config_key_count(); i++) {
            const struct config_key *k = config_key_at(i);
            if (strcmp(k->section, config_section_at(s)) != 0) continue;
            print_kv(out, k->key, config_key_value(c, i, value, sizeof(value)),
                     config_source_name((enum config_source)c->source[i]));
        }
    }
}

/* The keys of section s, documented: the table's, or outboxd's [kafka] ones. */
static bool section_key(const char *s, size_t i, struct config_key *k)
{
    if (!strcmp(s, "kafka")) return config_kafka_doc(i, k);
    for (size_t j = 0, n = 0; j < config_key_count(); j++)
        if (!strcmp(config_key_at(j)->section, s) && n++ == i) {
            *k = *config_key_at(j);
            return true;
        }
    return false;
}

void confdoc_example(FILE *out)
{
    fprintf(out,
            "; outboxd sample configuration: every key, its default and what it means.\n"
            "; Printed by `outboxd config --example` from the key table the parser\n"
            "; uses (src/config/config.c); the test e2e.cli fails when this file and the\n"
            "; table differ.\n"
            "; A commented-out key shows its default; remove the ';' to change it. Every\n"
            "; key can also be set as OUTBOXD_<SECTION>_<KEY> (upper case, dots as '_')\n"
            "; or with --set section.key=value; precedence: --set > environment > file >\n"
            "; default. Durations take a unit (500ms, 5s, 2m, 1h, 7d); the *_ms keys\n"
            "; also take a bare number of milliseconds.\n");
    for (size_t s = 0; config_section_at(s); s++) {
        fprintf(out, "\n[%s]\n", config_section_at(s));
        if (!strcmp(config_section_at(s), "kafka"))
            fprintf(out, "; Passed to librdkafka as they are (any of its properties), except\n"
                         "; sasl.password_file, which outboxd reads. outboxd's defaults:\n");
        if (!strcmp(config_section_at(s), "outbox"))
            fprintf(out,
                    "; One outbox table. For several, give each an [outbox.NAME] section\n"
                    "; (NAME: letters, digits, '_', '-') with its table and any key below;\n"
                    "; a key set here is then the default of every named section, and\n"
                    "; table is left unset here. One publication, slot and offset file\n"
                    "; serve them all. Environment: OUTBOXD_OUTBOX_<NAME>_<KEY>; --set\n"
                    "; outbox.NAME.key=value. Logical replication only, no gap repair.\n");
        if (!strcmp(config_section_at(s), "polling"))
            fprintf(out, "; Used with [source] mode = polling only.\n");
        struct config_key k;
        for (size_t i = 0; section_key(config_section_at(s), i, &k); i++) {
            fprintf(out, "; %s\n", k.meaning);
            if (k.example)
                fprintf(out, "%s = %s\n", k.key, k.example);
            else
                fprintf(out, ";%s =%s%s\n", k.key, k.def ? " " : "", k.def ? k.def : "");
        }
    }
}

/* text with '|' escaped for a Markdown table cell. */
static void cell(FILE *out, const char *text)
{
    for (; *text; text++) {
        if (*text == '|') fputc('\\', out);
        fputc(*text, out);
    }
}

static void table_rows(const char *section, FILE *out)
{
    struct config_key k;
    for (size_t i = 0; section_key(section, i, &k); i++) {
        fprintf(out, "| `%s.%s` | ", section, k.key);
        if (k.def && *k.def)
            fprintf(out, "`%s`", k.def);
        else
            fprintf(out, "%s", k.example ? "(required)" : k.def ? "(empty)" : "(unset)");
        fprintf(out, " | ");
        cell(out, k.meaning);
        fprintf(out, " |\n");
    }
}

int confdoc_table(const char *which, FILE *out)
{
    bool polling = !strcmp(which, "polling");
    if (!polling && strcmp(which, "logical") != 0) return -1;
    fprintf(out, "| key | default | meaning |\n| --- | --- | --- |\n");
    for (size_t s = 0; config_section_at(s); s++)
        if (polling == !strcmp(config_section_at(s), "polling")) table_rows(config_section_at(s), out);
    return 0;
}
