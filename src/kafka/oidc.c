/*
 * oidc.c - OAUTHBEARER with OIDC client credentials as librdkafka 2.14
 * does it (see oidc.h): its settings read from [kafka], the request body,
 * and the answer read as librdkafka reads it (its
 * rdkafka_sasl_oauthbearer_oidc.c: "access_token" from the JSON, a JWT
 * whose payload must have "exp" and the sub claim), so that what `outboxd
 * check` shows is what the daemon's librdkafka would get. Pure.
 */
#include "oidc.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* [kafka] key, or its librdkafka alias, else NULL. */
static const char *get2(const struct config *c, const char *key, const char *alias)
{
    const char *v = config_kafka_get(c, key);
    return v ? v : config_kafka_get(c, alias);
}

enum oidc_use oidc_settings_from(const struct config *c, struct oidc_settings *s,
                                 const char **why)
{
    memset(s, 0, sizeof(*s));
    *why = NULL;
    const char *mech = get2(c, "sasl.mechanisms", "sasl.mechanism");
    const char *method = config_kafka_get(c, "sasl.oauthbearer.method");
    if (!mech || strcasecmp(mech, "OAUTHBEARER") || !method || strcasecmp(method, "oidc"))
        return OIDC_NONE;
    const char *grant = config_kafka_get(c, "sasl.oauthbearer.grant.type");
    if (grant && strcasecmp(grant, "client_credentials")) {
        *why = "sasl.oauthbearer.grant.type is not client_credentials (a JWT bearer "
               "assertion): the broker check below shows whether its token works";
        return OIDC_OTHER;
    }
    const char *meta = config_kafka_get(c, "sasl.oauthbearer.metadata.authentication.type");
    if (meta && strcasecmp(meta, "none")) {
        *why = "sasl.oauthbearer.metadata.authentication.type is set (Azure IMDS): the "
               "broker check below shows whether its token works";
        return OIDC_OTHER;
    }
    s->token_url = config_kafka_get(c, "sasl.oauthbearer.token.endpoint.url");
    s->client_id = get2(c, "sasl.oauthbearer.client.id",
                        "sasl.oauthbearer.client.credentials.client.id");
    s->client_secret = get2(c, "sasl.oauthbearer.client.secret",
                            "sasl.oauthbearer.client.credentials.client.secret");
    s->scope = config_kafka_get(c, "sasl.oauthbearer.scope");
    s->sub_claim = config_kafka_get(c, "sasl.oauthbearer.sub.claim.name");
    if (!s->sub_claim || !*s->sub_claim) s->sub_claim = "sub";
    s->ca_location = config_kafka_get(c, "https.ca.location");
    s->ca_pem = config_kafka_get(c, "https.ca.pem");
    return OIDC_CLIENT_CREDENTIALS;
}

char *oidc_request_body(const char *scope)
{
    static const char grant[] = "grant_type=client_credentials";
    size_t n = sizeof(grant) + (scope && *scope ? strlen("&scope=") + strlen(scope) : 0);
    char *b = malloc(n);
    if (!b) return NULL;
    if (scope && *scope)
        snprintf(b, n, "%s&scope=%s", grant, scope);
    else
        snprintf(b, n, "%s", grant);
    return b;
}

void oidc_token_clear(struct oidc_token *t)
{
    free(t->principal);
    free(t->audience);
    free(t->issuer);
    memset(t, 0, sizeof(*t));
}

static int b64url_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '-' || ch == '+') return 62;
    if (ch == '_' || ch == '/') return 63;
    return -1;
}

char *oidc_jwt_payload(const char *jwt)
{
    const char *p = jwt ? strchr(jwt, '.') : NULL;
    const char *e = p ? strchr(p + 1, '.') : NULL;
    if (!e || strchr(e + 1, '.')) return NULL;
    p++;
    size_t n = (size_t)(e - p);
    while (n > 0 && p[n - 1] == '=')
        n--; /* padding, which JWTs should not have */
    if (n % 4 == 1) return NULL;
    char *out = malloc(n * 3 / 4 + 1);
    if (!out) return NULL;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64url_value((unsigned char)p[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    return out;
}

/* The refusal of a status other than 200: RFC 6749 section 5.2's error and
 * error_description when the body is such JSON, else its start. */
static void refusal(long status, const char *body, size_t len, char *err, size_t errlen)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    const char *e = j ? json_string_value(json_object_get(j, "error")) : NULL;
    const char *d = j ? json_string_value(json_object_get(j, "error_description")) : NULL;
    if (e)
        snprintf(err, errlen, "HTTP %ld: %.100s%s%.300s", status, e, d ? ": " : "",
                 d ? d : "");
    else if (len)
        snprintf(err, errlen, "HTTP %ld: %.*s", status, (int)(len < 200 ? len : 200), body);
    else
        snprintf(err, errlen, "HTTP %ld (an empty answer)", status);
    json_decref(j);
}

/* A string claim, or an array's strings joined by ", " (RFC 7519's aud),
 * into *out (malloc'ed; NULL when the claim is absent or holds no string).
 * -1: out of memory. */
static int claim_text(const json_t *v, char **out)
{
    *out = NULL;
    if (json_is_string(v)) return (*out = strdup(json_string_value(v))) ? 0 : -1;
    if (!json_is_array(v)) return 0;
    size_t n = 1, i;
    const json_t *e;
    json_array_foreach(v, i, e)
    {
        if (json_is_string(e)) n += strlen(json_string_value(e)) + 2;
    }
    if (n == 1) return 0;
    char *s = malloc(n);
    if (!s) return -1;
    s[0] = '\0';
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e)) continue;
        if (s[0]) strcat(s, ", ");
        strcat(s, json_string_value(e));
    }
    *out = s;
    return 0;
}

int oidc_parse_answer(long status, const char *body, size_t len, const char *sub_claim,
                      struct oidc_token *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    if (status != 200) {
        refusal(status, body, len, err, errlen);
        return -1;
    }
    json_t *j = json_loadb(body, len, 0, NULL);
    const char *at = j ? json_string_value(json_object_get(j, "access_token")) : NULL;
    if (!at) {
        snprintf(err, errlen,
                 "HTTP 200 without an \"access_token\" string in a JSON answer: "
                 "%.*s",
                 (int)(len < 120 ? len : 120), body);
        json_decref(j);
        return -1;
    }
    char *payload = oidc_jwt_payload(at);
    json_t *claims = payload ? json_loads(payload, 0, NULL) : NULL;
    free(payload);
    json_decref(j);
    int rc = -1;
    json_t *exp = json_object_get(claims, "exp");
    json_t *iat = json_object_get(claims, "iat");
    const char *sub = json_string_value(json_object_get(claims, sub_claim));
    if (!json_is_object(claims))
        snprintf(err, errlen,
                 "the access token is not a JWT with a JSON payload (librdkafka "
                 "needs one to read its expiry and principal)");
    else if (!json_is_number(exp) || !isfinite(json_number_value(exp)))
        snprintf(err, errlen, "the access token has no numeric \"exp\" claim");
    else if (!sub || !*sub)
        snprintf(err, errlen,
                 "the access token has no claim \"%s\" (a non-empty string): set [kafka] "
                 "sasl.oauthbearer.sub.claim.name to the claim that names the principal",
                 sub_claim);
    else if (!(t->principal = strdup(sub)))
        snprintf(err, errlen, "out of memory");
    else if (claim_text(json_object_get(claims, "aud"), &t->audience) != 0 ||
             claim_text(json_object_get(claims, "iss"), &t->issuer) != 0) {
        snprintf(err, errlen, "out of memory");
        oidc_token_clear(t);
    } else {
        t->exp = (long long)json_number_value(exp);
        t->issued_at = json_is_number(iat) ? (long long)json_number_value(iat) : -1;
        rc = 0;
    }
    json_decref(claims);
    return rc;
}
