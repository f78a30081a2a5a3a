/*
 * awsparse.c - the answers of the sources of AWS credentials, read (see
 * awsparse.h).
 *
 * The shared files (~/.aws/credentials, ~/.aws/config):
 *     [default]                     credentials: [NAME]
 *     aws_access_key_id = AKIA...   config: [profile NAME], [default]
 *     aws_secret_access_key = ...
 *     aws_session_token = ...       (optional)
 *     ; comment   # comment
 *     s3 =                          a nested block: indented lines below
 *       max_concurrent_requests = 2 belong to s3, not to the profile
 *
 * STS AssumeRoleWithWebIdentity (Query API, XML):
 *     <AssumeRoleWithWebIdentityResponse ...><AssumeRoleWithWebIdentityResult>
 *       <AssumedRoleUser><Arn>arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION</Arn>...
 *       <Credentials><AccessKeyId/><SecretAccessKey/><SessionToken/>
 *         <Expiration>2026-12-06T21:00:00Z</Expiration></Credentials>
 *     an error: <ErrorResponse><Error><Type/><Code/><Message/></Error>...
 *
 * The container endpoint and IMDS (JSON):
 *     {"Code": "Success", "AccessKeyId": "...", "SecretAccessKey": "...",
 *      "Token": "...", "Expiration": "2026-12-06T21:00:00Z", ...}
 */
#include "awsparse.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- INI ---- */

/* The line at p: its start and length without the newline; *next after it. */
static size_t line_at(const char *p, const char **next)
{
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    *next = e ? e + 1 : p + n;
    return n;
}

static void trim(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s))
        (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* Whether the section header h (inside the brackets, trimmed) names profile. */
static bool section_is(const char *h, size_t n, bool config_file, const char *profile)
{
    size_t pl = strlen(profile);
    if (config_file && n > 8 && !strncmp(h, "profile", 7) && isspace((unsigned char)h[7])) {
        h += 8, n -= 8;
        trim(&h, &n);
        return n == pl && !memcmp(h, profile, pl);
    }
    if (config_file && strcmp(profile, "default") != 0) return false;
    return n == pl && !memcmp(h, profile, pl);
}

/* Walks text's lines: for each key of profile's section, calls fn. Returns
 * whether the section was found. */
static bool ini_walk(const char *text, bool config_file, const char *profile,
                     void (*fn)(void *ctx, const char *k, size_t kn, const char *v,
                                size_t vn),
                     void *ctx)
{
    bool in = false, found = false, nested = false;
    for (const char *p = text, *next; *p; p = next) {
        size_t n = line_at(p, &next);
        bool indented = n && (p[0] == ' ' || p[0] == '\t');
        const char *s = p;
        trim(&s, &n);
        if (!n || s[0] == '#' || s[0] == ';') continue;
        if (s[0] == '[') {
            const char *close = memchr(s, ']', n);
            if (!close) {
                in = false;
                continue;
            }
            const char *h = s + 1;
            size_t hn = (size_t)(close - h);
            trim(&h, &hn);
            in = section_is(h, hn, config_file, profile);
            found |= in;
            nested = false;
            continue;
        }
        if (!in) continue;
        if (indented && nested) continue;
        const char *eq = memchr(s, '=', n);
        if (!eq) continue;
        const char *k = s, *v = eq + 1;
        size_t kn = (size_t)(eq - s), vn = n - kn - 1;
        trim(&k, &kn);
        trim(&v, &vn);
        nested = vn == 0;
        if (indented) continue; /* continuation of something we do not read */
        fn(ctx, k, kn, v, vn);
    }
    return found;
}

static void ignore(void *ctx, const char *k, size_t kn, const char *v, size_t vn)
{
    (void)ctx, (void)k, (void)kn, (void)v, (void)vn;
}

bool aws_ini_has_profile(const char *text, bool config_file, const char *profile)
{
    return ini_walk(text, config_file, profile, ignore, NULL);
}

struct ini_get {
    const char *key;
    const char *v;
    size_t vn;
};

static void get_one(void *ctx, const char *k, size_t kn, const char *v, size_t vn)
{
    struct ini_get *g = ctx;
    if (kn == strlen(g->key) && !memcmp(k, g->key, kn)) {
        g->v = v;
        g->vn = vn;
    }
}

char *aws_ini_get(const char *text, bool config_file, const char *profile, const char *key)
{
    struct ini_get g = {.key = key};
    ini_walk(text, config_file, profile, get_one, &g);
    if (!g.v || !g.vn) return NULL;
    return strndup(g.v, g.vn);
}

/* ---- times ---- */

int aws_parse_time(const char *s, time_t *out)
{
    struct tm tm = {0};
    int used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6)
        return -1;
    const char *p = s + used;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            ;
    if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0 && strcmp(p, "z") != 0) return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31) return -1;
    *out = timegm(&tm);
    return 0;
}

/* ---- STS's XML ---- */

/* The text of the first <tag>...</tag> in body, entities decoded;
 * malloc'ed, or NULL. */
static char *xml_text(const char *body, const char *tag)
{
    char open[64], close[64];
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = strstr(body, open);
    if (!a) return NULL;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (!b) return NULL;
    char *out = malloc((size_t)(b - a) + 1), *o = out;
    if (!out) return NULL;
    static const char *const ent[][2] = {
        {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}};
    for (const char *p = a; p < b;) {
        size_t i;
        for (i = 0; i < 5; i++)
            if (!strncmp(p, ent[i][0], strlen(ent[i][0]))) break;
        if (i < 5) {
            *o++ = ent[i][1][0];
            p += strlen(ent[i][0]);
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

static void creds_zero(struct aws_creds *c)
{
    memset(c, 0, sizeof(*c));
}

int aws_parse_sts(long status, const char *body, struct aws_creds *out, char **role,
                  char *err, size_t errlen)
{
    creds_zero(out);
    *role = NULL;
    if (status != 200) {
        char *code = xml_text(body, "Code"), *msg = xml_text(body, "Message");
        if (code || msg)
            snprintf(err, errlen, "HTTP %ld: %s: %s", status, code ? code : "(no code)",
                     msg ? msg : "(no message)");
        else
            snprintf(err, errlen, "HTTP %ld: %.200s", status, body);
        free(code);
        free(msg);
        return -1;
    }
    char *exp = xml_text(body, "Expiration");
    out->access_key_id = xml_text(body, "AccessKeyId");
    out->secret_access_key = xml_text(body, "SecretAccessKey");
    out->session_token = xml_text(body, "SessionToken");
    int rc = 0;
    if (!out->access_key_id || !out->secret_access_key || !out->session_token) {
        snprintf(err, errlen,
                 "the answer has no AccessKeyId, SecretAccessKey and SessionToken");
        rc = -1;
    } else if (!exp || aws_parse_time(exp, &out->expires) != 0) {
        snprintf(err, errlen, "the answer's Expiration is missing or not a time");
        rc = -1;
    }
    free(exp);
    if (rc) {
        aws_creds_clear(out);
        return -1;
    }
    snprintf(out->source, sizeof(out->source), "web identity");
    const char *user = strstr(body, "<AssumedRoleUser>");
    if (user) *role = xml_text(user, "Arn");
    return 0;
}

/* ---- the container's and IMDS's JSON ---- */

static char *json_str(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v && *v ? strdup(v) : NULL;
}

int aws_parse_creds_json(const char *body, struct aws_creds *out, char *err, size_t errlen)
{
    creds_zero(out);
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    if (!j || !json_is_object(j)) {
        snprintf(err, errlen, "the answer is not a JSON object: %.120s", body);
        json_decref(j);
        return -1;
    }
    const char *code = json_string_value(json_object_get(j, "Code"));
    if (code && strcmp(code, "Success") != 0) {
        const char *msg = json_string_value(json_object_get(j, "Message"));
        snprintf(err, errlen, "Code %s: %s", code, msg ? msg : "(no message)");
        json_decref(j);
        return -1;
    }
    out->access_key_id = json_str(j, "AccessKeyId");
    out->secret_access_key = json_str(j, "SecretAccessKey");
    out->session_token = json_str(j, "Token");
    const char *exp = json_string_value(json_object_get(j, "Expiration"));
    int rc = 0;
    if (!out->access_key_id || !out->secret_access_key) {
        snprintf(err, errlen, "the answer has no AccessKeyId and SecretAccessKey");
        rc = -1;
    } else if (exp && aws_parse_time(exp, &out->expires) != 0) {
        snprintf(err, errlen, "the answer's Expiration is not a time: %.40s", exp);
        rc = -1;
    }
    json_decref(j);
    if (rc) aws_creds_clear(out);
    return rc;
}
