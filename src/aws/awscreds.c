/*
 * awscreds.c - AWS credentials from the standard chain (see awscreds.h):
 * the files, the environment and the HTTP requests of each source; what
 * their answers say is read by awsparse.c.
 *
 * The order is the SDKs' (Java v2 DefaultCredentialsProvider, Go v2,
 * botocore with no profile-level role): the first source that is
 * configured and answers wins; a source that is configured but fails is
 * reported with the others and the chain goes on (as the SDKs do, except
 * that a present but broken profile stops them; here it is one more
 * reason in the error).
 *   1 environment   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY [, AWS_SESSION_TOKEN]
 *   2 web identity  AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN
 *                   [+ AWS_ROLE_SESSION_NAME]: STS AssumeRoleWithWebIdentity
 *                   at AWS_ENDPOINT_URL_STS, else https://sts.REGION.amazonaws.com
 *                   (https://sts.amazonaws.com without a region); unsigned
 *   3 profile       AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), then
 *                   AWS_CONFIG_FILE (~/.aws/config): the profile's static keys
 *   4 container     AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (at http://169.254.170.2)
 *                   or _FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
 *                   or _TOKEN as the Authorization header
 *   5 instance      IMDSv2 at AWS_EC2_METADATA_SERVICE_ENDPOINT
 *                   (http://169.254.169.254): PUT /latest/api/token, GET
 *                   /latest/meta-data/iam/security-credentials/ (the role),
 *                   GET .../ROLE; skipped when AWS_EC2_METADATA_DISABLED=true
 * Each HTTP request waits at most AWS_HTTP_TIMEOUT_MS.
 */
#include "awscreds.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "awsparse.h"
#include "grow.h"

#define ANSWER_MAX (64u * 1024)

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

const char *aws_region(const struct aws_settings *s)
{
    if (s && s->region && *s->region) return s->region;
    const char *r = env("AWS_REGION");
    return r ? r : env("AWS_DEFAULT_REGION");
}

const char *aws_profile(const struct aws_settings *s)
{
    if (s && s->profile && *s->profile) return s->profile;
    const char *p = env("AWS_PROFILE");
    return p ? p : "default";
}

static void wipe_free(char *s)
{
    if (s) {
        memset(s, 0, strlen(s));
        free(s);
    }
}

void aws_creds_clear(struct aws_creds *c)
{
    if (!c) return;
    free(c->access_key_id);
    wipe_free(c->secret_access_key);
    wipe_free(c->session_token);
    memset(c, 0, sizeof(*c));
}

int aws_creds_copy(struct aws_creds *dst, const struct aws_creds *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->access_key_id = strdup(src->access_key_id ? src->access_key_id : "");
    dst->secret_access_key = strdup(src->secret_access_key ? src->secret_access_key : "");
    dst->session_token = src->session_token ? strdup(src->session_token) : NULL;
    dst->expires = src->expires;
    memcpy(dst->source, src->source, sizeof(dst->source));
    if (!dst->access_key_id || !dst->secret_access_key ||
        (src->session_token && !dst->session_token)) {
        aws_creds_clear(dst);
        return -1;
    }
    return 0;
}

/* Appends "; " and a formatted reason to err. */
__attribute__((format(printf, 3, 4))) static void note(char *err, size_t errlen,
                                                       const char *fmt, ...)
{
    size_t n = strlen(err);
    if (n + 3 >= errlen) return;
    if (n) {
        strcpy(err + n, "; ");
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - n, fmt, ap);
    va_end(ap);
}

/* A whole small file, NUL-terminated; malloc'ed, or NULL with errno. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    struct growtext t = {.max = 1u << 20};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        if (growtext_append(&t, buf, n) != 0) break;
    bool bad = ferror(f) || t.too_large;
    fclose(f);
    if (bad) {
        free(t.data);
        errno = bad ? EFBIG : errno;
        return NULL;
    }
    return t.data ? t.data : strdup("");
}

/* ---- 1: the environment ---- */

static int from_env(struct aws_creds *out, char *err, size_t errlen)
{
    const char *id = env("AWS_ACCESS_KEY_ID"), *secret = env("AWS_SECRET_ACCESS_KEY");
    if (!id && !secret) {
        note(err, errlen, "environment: AWS_ACCESS_KEY_ID is not set");
        return 1;
    }
    if (!id || !secret) {
        note(err, errlen, "environment: %s is set but not %s",
             id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
             id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
        return -1;
    }
    struct aws_creds c = {.access_key_id = (char *)id,
                          .secret_access_key = (char *)secret,
                          .session_token = (char *)env("AWS_SESSION_TOKEN")};
    snprintf(c.source, sizeof(c.source), "environment");
    if (aws_creds_copy(out, &c) != 0) {
        note(err, errlen, "environment: out of memory");
        return -1;
    }
    return 0;
}

/* ---- HTTP ---- */

struct http {
    const char *method; /* "GET", "PUT", "POST" */
    const char *url;
    struct curl_slist *headers;
    const char *post; /* the body of a POST */
    long status;
    struct growtext body;
    char err[CURL_ERROR_SIZE];
};

/* One request; 0 when an HTTP answer came (h->status, h->body), else -1
 * with h->err. */
static int http_do(struct http *h)
{
    CURL *c = curl_easy_init();
    h->body = (struct growtext){.max = ANSWER_MAX};
    h->err[0] = '\0';
    if (!c) {
        snprintf(h->err, sizeof(h->err), "out of memory");
        return -1;
    }
    curl_easy_setopt(c, CURLOPT_URL, h->url);
    if (!strcmp(h->method, "PUT")) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
    if (h->post) curl_easy_setopt(c, CURLOPT_POSTFIELDS, h->post);
    if (h->headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, growtext_curl_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &h->body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->err);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)AWS_HTTP_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)AWS_HTTP_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOPROXY, "169.254.169.254,169.254.170.2,169.254.170.23");
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h->status);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        if (!h->err[0]) snprintf(h->err, sizeof(h->err), "%s", curl_easy_strerror(rc));
        free(h->body.data);
        h->body.data = NULL;
        return -1;
    }
    if (!h->body.data) h->body.data = strdup("");
    return h->body.data ? 0 : -1;
}

/* ---- 2: web identity ---- */

static int from_web_identity(const struct aws_settings *s, struct aws_creds *out, char *err,
                             size_t errlen)
{
    const char *file = env("AWS_WEB_IDENTITY_TOKEN_FILE"), *role = env("AWS_ROLE_ARN");
    if (!file && !role) return 1; /* not configured: not worth a word */
    if (!file || !role) {
        note(err, errlen, "web identity: %s is set but not %s",
             file ? "AWS_WEB_IDENTITY_TOKEN_FILE" : "AWS_ROLE_ARN",
             file ? "AWS_ROLE_ARN" : "AWS_WEB_IDENTITY_TOKEN_FILE");
        return -1;
    }
    char *jwt = read_file(file);
    if (!jwt) {
        note(err, errlen, "web identity: cannot read AWS_WEB_IDENTITY_TOKEN_FILE %s: %s",
             file, strerror(errno));
        return -1;
    }
    size_t n = strlen(jwt);
    while (n && (jwt[n - 1] == '\n' || jwt[n - 1] == '\r' || jwt[n - 1] == ' '))
        jwt[--n] = '\0';
    const char *session = env("AWS_ROLE_SESSION_NAME");
    char defsession[64];
    if (!session) {
        snprintf(defsession, sizeof(defsession), "outboxd-%lld", (long long)time(NULL));
        session = defsession;
    }
    const char *region = aws_region(s);
    char url[1024];
    const char *ep = env("AWS_ENDPOINT_URL_STS");
    if (ep)
        snprintf(url, sizeof(url), "%s", ep);
    else if (region)
        snprintf(url, sizeof(url), "https://sts.%s.amazonaws.com/", region);
    else
        snprintf(url, sizeof(url), "https://sts.amazonaws.com/");
    CURL *esc = curl_easy_init();
    char *er = esc ? curl_easy_escape(esc, role, 0) : NULL;
    char *es = esc ? curl_easy_escape(esc, session, 0) : NULL;
    char *et = esc ? curl_easy_escape(esc, jwt, 0) : NULL;
    wipe_free(jwt);
    char *form = NULL;
    if (er && es && et) form = malloc(strlen(er) + strlen(es) + strlen(et) + 128);
    if (form)
        sprintf(form,
                "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=%s&"
                "RoleSessionName=%s&WebIdentityToken=%s",
                er, es, et);
    curl_free(er);
    curl_free(es);
    if (et) memset(et, 0, strlen(et));
    curl_free(et);
    if (esc) curl_easy_cleanup(esc);
    if (!form) {
        note(err, errlen, "web identity: out of memory");
        return -1;
    }
    struct http h = {.method = "POST", .url = url, .post = form};
    h.headers = curl_slist_append(NULL, "Content-Type: application/x-www-form-urlencoded");
    h.headers = curl_slist_append(h.headers, "Accept: application/xml");
    int rc = http_do(&h);
    curl_slist_free_all(h.headers);
    wipe_free(form);
    if (rc != 0) {
        note(err, errlen, "web identity: STS %s did not answer: %s", url, h.err);
        return -1;
    }
    char why[512], *arn = NULL;
    rc = aws_parse_sts(h.status, h.body.data, out, &arn, why, sizeof(why));
    wipe_free(h.body.data);
    free(arn);
    if (rc != 0) {
        note(err, errlen, "web identity: STS %s refused role %s: %s", url, role, why);
        return -1;
    }
    return 0;
}

/* ---- 3: the shared files and the profile ---- */

static int from_profile(const struct aws_settings *s, struct aws_creds *out, char *err,
                        size_t errlen)
{
    const char *profile = aws_profile(s), *home = env("HOME");
    char credpath[1024], confpath[1024];
    const char *cp = env("AWS_SHARED_CREDENTIALS_FILE"), *fp = env("AWS_CONFIG_FILE");
    snprintf(credpath, sizeof(credpath), "%s", cp ? cp : "");
    snprintf(confpath, sizeof(confpath), "%s", fp ? fp : "");
    if (!cp && home) snprintf(credpath, sizeof(credpath), "%s/.aws/credentials", home);
    if (!fp && home) snprintf(confpath, sizeof(confpath), "%s/.aws/config", home);
    const char *paths[2] = {credpath, confpath};
    bool seen_section = false;
    char missing[512] = "";
    for (int i = 0; i < 2; i++) {
        if (!*paths[i]) continue;
        char *text = read_file(paths[i]);
        if (!text) {
            if (errno != ENOENT)
                note(err, errlen, "profile %s: cannot read %s: %s", profile, paths[i],
                     strerror(errno));
            else
                snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
                         "%s%s (absent)", *missing ? ", " : "", paths[i]);
            continue;
        }
        bool cfg = i == 1;
        if (!aws_ini_has_profile(text, cfg, profile)) {
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
                     "%s%s (no [%s%s])", *missing ? ", " : "", paths[i],
                     cfg && strcmp(profile, "default") ? "profile " : "", profile);
            wipe_free(text);
            continue;
        }
        seen_section = true;
        char *id = aws_ini_get(text, cfg, profile, "aws_access_key_id");
        char *secret = aws_ini_get(text, cfg, profile, "aws_secret_access_key");
        char *token = aws_ini_get(text, cfg, profile, "aws_session_token");
        char *role = aws_ini_get(text, cfg, profile, "role_arn");
        char *sso = aws_ini_get(text, cfg, profile, "sso_session");
        if (!sso) sso = aws_ini_get(text, cfg, profile, "sso_start_url");
        char *proc = aws_ini_get(text, cfg, profile, "credential_process");
        wipe_free(text);
        int rc = 1;
        if (id && secret) {
            struct aws_creds c = {
                .access_key_id = id, .secret_access_key = secret, .session_token = token};
            snprintf(c.source, sizeof(c.source), "profile %s", profile);
            rc = aws_creds_copy(out, &c) == 0 ? 0 : -1;
            if (rc) note(err, errlen, "profile %s: out of memory", profile);
        } else if (id || secret) {
            note(err, errlen, "profile %s: %s has %s but not %s", profile, paths[i],
                 id ? "aws_access_key_id" : "aws_secret_access_key",
                 id ? "aws_secret_access_key" : "aws_access_key_id");
            rc = -1;
        } else if (role || sso || proc) {
            note(err, errlen,
                 "profile %s: %s gives %s, which outboxd does not support (only static "
                 "keys in a profile; use web identity, the container or instance role)",
                 profile, paths[i],
                 role  ? "role_arn"
                 : sso ? "IAM Identity Center (sso_*)"
                       : "credential_process");
            rc = -1;
        }
        free(id);
        wipe_free(secret);
        wipe_free(token);
        free(role);
        free(sso);
        free(proc);
        if (rc <= 0) return rc;
    }
    if (!seen_section)
        note(err, errlen, "profile %s: not found in %s", profile,
             *missing ? missing : "(no HOME, no AWS_SHARED_CREDENTIALS_FILE)");
    else
        note(err, errlen, "profile %s: has no aws_access_key_id", profile);
    return seen_section ? -1 : 1;
}

/* ---- 4: the container endpoint ---- */

/* Whether url may carry a container's credentials: https, or http to a
 * loopback address or ECS's and EKS Pod Identity's link-local ones (the
 * SDKs' rule for _FULL_URI). */
static bool container_url_ok(const char *url)
{
    if (!strncasecmp(url, "https://", 8)) return true;
    if (strncasecmp(url, "http://", 7)) return false;
    const char *h = url + 7;
    static const char *const ok[] = {"127.",          "localhost",      "[::1]",
                                     "169.254.170.2", "169.254.170.23", "[fd00:ec2::23]"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        size_t n = strlen(ok[i]);
        if (!strncasecmp(h, ok[i], n) &&
            (ok[i][n - 1] == '.' || h[n] == '\0' || h[n] == ':' || h[n] == '/'))
            return true;
    }
    return false;
}

static int from_container(struct aws_creds *out, char *err, size_t errlen)
{
    const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (!rel && !full) return 1;
    char url[1024];
    if (rel)
        snprintf(url, sizeof(url), "http://169.254.170.2%s", rel);
    else
        snprintf(url, sizeof(url), "%s", full);
    if (!rel && !container_url_ok(url)) {
        note(err, errlen,
             "container: AWS_CONTAINER_CREDENTIALS_FULL_URI %s is neither https nor a "
             "loopback or the container agent's address",
             url);
        return -1;
    }
    char *auth = NULL;
    const char *tf = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    if (tf) {
        auth = read_file(tf);
        if (!auth) {
            note(err, errlen,
                 "container: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s: %s", tf,
                 strerror(errno));
            return -1;
        }
    } else if (env("AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
        auth = strdup(env("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
    }
    struct http h = {.method = "GET", .url = url};
    h.headers = curl_slist_append(NULL, "Accept: application/json");
    if (auth) {
        size_t n = strlen(auth);
        while (n && (auth[n - 1] == '\n' || auth[n - 1] == '\r'))
            auth[--n] = '\0';
        char *hdr = malloc(n + 32);
        if (hdr) {
            sprintf(hdr, "Authorization: %s", auth);
            h.headers = curl_slist_append(h.headers, hdr);
            wipe_free(hdr);
        }
        wipe_free(auth);
    }
    int rc = http_do(&h);
    curl_slist_free_all(h.headers);
    if (rc != 0) {
        note(err, errlen, "container: %s did not answer: %s", url, h.err);
        return -1;
    }
    char why[256];
    if (h.status != 200) {
        note(err, errlen, "container: %s answered HTTP %ld: %.200s", url, h.status,
             h.body.data);
        rc = -1;
    } else if (aws_parse_creds_json(h.body.data, out, why, sizeof(why)) != 0) {
        note(err, errlen, "container: %s: %s", url, why);
        rc = -1;
    } else {
        snprintf(out->source, sizeof(out->source), "container");
    }
    wipe_free(h.body.data);
    return rc;
}

/* ---- 5: EC2 instance metadata (IMDSv2) ---- */

static int from_imds(struct aws_creds *out, char *err, size_t errlen)
{
    const char *dis = env("AWS_EC2_METADATA_DISABLED");
    if (dis && !strcasecmp(dis, "true")) {
        note(err, errlen, "instance: AWS_EC2_METADATA_DISABLED is true");
        return 1;
    }
    const char *ep = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    char base[512], url[1024];
    snprintf(base, sizeof(base), "%s", ep ? ep : "http://169.254.169.254");
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        base[--bl] = '\0';
    snprintf(url, sizeof(url), "%s/latest/api/token", base);
    struct http h = {.method = "PUT", .url = url};
    h.headers = curl_slist_append(NULL, "X-aws-ec2-metadata-token-ttl-seconds: 21600");
    int rc = http_do(&h);
    curl_slist_free_all(h.headers);
    if (rc != 0 || h.status != 200) {
        if (rc == 0)
            note(err, errlen, "instance: %s answered HTTP %ld", url, h.status);
        else
            note(err, errlen, "instance: %s did not answer: %s", url, h.err);
        free(h.body.data);
        return -1;
    }
    char *tokhdr = malloc(strlen(h.body.data) + 40);
    if (tokhdr) sprintf(tokhdr, "X-aws-ec2-metadata-token: %s", h.body.data);
    wipe_free(h.body.data);
    if (!tokhdr) {
        note(err, errlen, "instance: out of memory");
        return -1;
    }
    snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/", base);
    h = (struct http){.method = "GET", .url = url};
    h.headers = curl_slist_append(NULL, tokhdr);
    rc = http_do(&h);
    curl_slist_free_all(h.headers);
    if (rc != 0 || h.status != 200) {
        if (rc == 0)
            note(err, errlen, "instance: %s answered HTTP %ld (no instance profile?)", url,
                 h.status);
        else
            note(err, errlen, "instance: %s did not answer: %s", url, h.err);
        free(h.body.data);
        wipe_free(tokhdr);
        return -1;
    }
    char role[256];
    size_t n = strcspn(h.body.data, "\r\n");
    snprintf(role, sizeof(role), "%.*s", (int)(n < 255 ? n : 255), h.body.data);
    free(h.body.data);
    if (!*role) {
        note(err, errlen, "instance: no IAM role is attached to this instance");
        wipe_free(tokhdr);
        return -1;
    }
    snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/%s", base,
             role);
    h = (struct http){.method = "GET", .url = url};
    h.headers = curl_slist_append(NULL, tokhdr);
    rc = http_do(&h);
    curl_slist_free_all(h.headers);
    wipe_free(tokhdr);
    if (rc != 0) {
        note(err, errlen, "instance: %s did not answer: %s", url, h.err);
        return -1;
    }
    char why[256];
    if (h.status != 200) {
        note(err, errlen, "instance: %s answered HTTP %ld", url, h.status);
        rc = -1;
    } else if (aws_parse_creds_json(h.body.data, out, why, sizeof(why)) != 0) {
        note(err, errlen, "instance: role %s: %s", role, why);
        rc = -1;
    } else {
        snprintf(out->source, sizeof(out->source), "instance");
    }
    wipe_free(h.body.data);
    return rc;
}

int aws_creds_get(const struct aws_settings *s, struct aws_creds *out, char *err,
                  size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (errlen) err[0] = '\0';
    char why[2048] = "";
    if (from_env(out, why, sizeof(why)) == 0) return 0;
    if (from_web_identity(s, out, why, sizeof(why)) == 0) return 0;
    if (from_profile(s, out, why, sizeof(why)) == 0) return 0;
    if (from_container(out, why, sizeof(why)) == 0) return 0;
    if (from_imds(out, why, sizeof(why)) == 0) return 0;
    snprintf(err, errlen, "no AWS credentials: %s", why);
    return -1;
}

int aws_creds_cached(struct aws_creds_cache *cache, const struct aws_settings *s,
                     time_t now, struct aws_creds *out, char *err, size_t errlen)
{
    pthread_mutex_lock(&cache->mu);
    int rc = 0;
    if (!cache->c.access_key_id ||
        (cache->c.expires &&
         (long long)cache->c.expires - (long long)now < AWS_CREDS_REFRESH_S)) {
        struct aws_creds fresh;
        rc = aws_creds_get(s, &fresh, err, errlen);
        if (rc == 0) {
            aws_creds_clear(&cache->c);
            cache->c = fresh;
        } else if (cache->c.access_key_id && cache->c.expires > now) {
            rc = 0; /* the old ones still work: use them, and try again next time */
        }
    }
    if (rc == 0 && aws_creds_copy(out, &cache->c) != 0) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    pthread_mutex_unlock(&cache->mu);
    return rc;
}

void aws_creds_cache_clear(struct aws_creds_cache *cache)
{
    pthread_mutex_lock(&cache->mu);
    aws_creds_clear(&cache->c);
    pthread_mutex_unlock(&cache->mu);
}
