/*
 * check_oidc.c - the "kafka token" line of `outboxd check`: with [kafka]
 * sasl.mechanism = OAUTHBEARER and sasl.oauthbearer.method = oidc,
 * librdkafka fetches the daemon's tokens itself, and its failure reaches
 * the broker check only as a failed authentication. This check fetches one
 * token the way librdkafka does (oidc.h: the same settings, request and
 * reading of the answer) over libcurl, and prints its principal and
 * expiry, audience and issuer (the claims a broker checks), or the token
 * endpoint's own answer (HTTP status, error, error_description), its
 * certificate's problem (https.ca.location) or why no answer came.
 */
#include "check_int.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "grow.h"
#include "mskiam.h"
#include "oidc.h"
#include "redact.h"

/* How long check waits for the token endpoint (librdkafka: 20 s a try). */
#define CHECK_TOKEN_TIMEOUT_MS 10000
#define TOKEN_ANSWER_MAX (1u << 20)

/* https.ca.location / https.ca.pem as librdkafka applies them (rdhttp.c):
 * a directory or a file, a PEM string, or "probe" (the default paths). */
static void set_ca(CURL *c, const struct oidc_settings *s)
{
    struct stat st;
    if (s->ca_location && strcmp(s->ca_location, "probe")) {
        if (stat(s->ca_location, &st) == 0 && S_ISDIR(st.st_mode))
            curl_easy_setopt(c, CURLOPT_CAPATH, s->ca_location);
        else
            curl_easy_setopt(c, CURLOPT_CAINFO, s->ca_location);
    } else if (s->ca_pem) {
        struct curl_blob blob = {
            .data = (void *)s->ca_pem, .len = strlen(s->ca_pem), .flags = CURL_BLOB_COPY};
        curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
    }
}

/* One token by client credentials: 0 with *t, or -1 with err (the
 * endpoint's refusal, or why it did not answer) and *answered (whether an
 * HTTP answer came) and *cert (whether its certificate did not verify). */
static int fetch_token(const struct oidc_settings *s, struct oidc_token *t, bool *answered,
                       bool *cert, char *err, size_t errlen)
{
    char curlerr[CURL_ERROR_SIZE] = "";
    *answered = *cert = false;
    char *form = oidc_request_body(s->scope);
    CURL *c = curl_easy_init();
    if (!form || !c) {
        free(form);
        if (c) curl_easy_cleanup(c);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct growtext b = {.max = TOKEN_ANSWER_MAX};
    struct curl_slist *hdr = curl_slist_append(NULL, "Accept: application/json");
    hdr = curl_slist_append(hdr, "Content-Type: application/x-www-form-urlencoded");
    curl_easy_setopt(c, CURLOPT_URL, s->token_url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, form);
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERNAME, s->client_id ? s->client_id : "");
    curl_easy_setopt(c, CURLOPT_PASSWORD, s->client_secret ? s->client_secret : "");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, growtext_curl_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curlerr);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)CHECK_TOKEN_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    set_ca(c, s);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    free(form);
    int ret = -1;
    *cert = rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE;
    if (rc != CURLE_OK)
        snprintf(err, errlen, "%s%s", curlerr[0] ? curlerr : curl_easy_strerror(rc),
                 b.too_large ? " (the answer is larger than 1 MiB)" : "");
    else {
        *answered = true;
        ret = oidc_parse_answer(status, b.data ? b.data : "", b.len, s->sub_claim, t, err,
                                errlen);
    }
    free(b.data);
    return ret;
}

void check_kafka_token(struct ck *k)
{
    const char *what = "kafka token";
    if (msk_iam_configured(k->cfg)) return check_kafka_msk_token(k);
    struct oidc_settings s;
    const char *why;
    enum oidc_use use = oidc_settings_from(k->cfg, &s, &why);
    if (use == OIDC_NONE) return;
    if (use == OIDC_OTHER) return ck_skip(k, what, why);
    if (!k->kafka) return ck_skip(k, what, "the [kafka] configuration is not valid");
    char url[1024], err[1024];
    redact_url(s.token_url ? s.token_url : "", url, sizeof(url));
    struct oidc_token t;
    bool answered, cert;
    if (fetch_token(&s, &t, &answered, &cert, err, sizeof(err)) != 0) {
        if (cert) {
            ck_report(k, CHECK_FAIL, what,
                      "set [kafka] https.ca.location to the CA that signed the "
                      "identity provider's certificate (a PEM file or a directory; "
                      "https.ca.pem for the PEM text), and name the provider in the "
                      "URL as its certificate does",
                      "the token endpoint %s: its certificate did not verify%s; "
                      "client %s: %s",
                      url,
                      s.ca_location || s.ca_pem ? " against https.ca.location/pem"
                                                : " (no https.ca.location: the "
                                                  "system's CAs)",
                      s.client_id ? s.client_id : "(none)", err);
            return;
        }
        ck_report(k, CHECK_FAIL, what,
                  answered
                      ? "correct [kafka] sasl.oauthbearer.client.id and the secret "
                        "(sasl.oauthbearer.client.secret_file), or sasl.oauthbearer.scope, "
                        "as the identity provider has them for this client"
                      : "check [kafka] sasl.oauthbearer.token.endpoint.url, that the "
                        "identity provider is up and reachable from here, and "
                        "https.ca.location for its certificate",
                  "the token endpoint %s %s %s: %s", url,
                  answered ? "refused the client credentials of client"
                           : "did not answer; client",
                  s.client_id ? s.client_id : "(none)", err);
        return;
    }
    long long left = t.exp - (long long)time(NULL);
    char when[32] = "";
    time_t e = (time_t)t.exp;
    struct tm tm;
    if (gmtime_r(&e, &tm)) strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    ck_report(
        k, left > 0 ? CHECK_OK : CHECK_FAIL, what,
        left > 0 ? NULL : "correct the clock of this machine or of the identity provider",
        "principal %s (claim %s) from %s; the token expires %s (%s %lld s)%s; audience %s, "
        "issuer %s",
        t.principal, s.sub_claim, url, when, left > 0 ? "in" : "already, by",
        left > 0 ? left : -left,
        left > 0 ? "; librdkafka fetches a new one before then" : "",
        t.audience ? t.audience : "(none)", t.issuer ? t.issuer : "(none)");
    oidc_token_clear(&t);
}
