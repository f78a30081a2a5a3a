/*
 * connerr.c - permanent connection errors and their fixes (see connerr.h).
 *
 * The table is checked in order: the TLS messages come first because some
 * of them also contain words of later rows ("root certificate file ...
 * does not exist").
 */
#include "connerr.h"

#include <stddef.h>
#include <string.h>

struct connerr_rule {
    const char *pattern; /* a substring of the message */
    const char *fix;
};

#define TLS_NOT_VERIFIED                                                                 \
    "the server's certificate does not verify against sslrootcert (default "          \
    "~/.postgresql/root.crt): point sslrootcert in [postgres] conninfo at the CA that " \
    "signed it, or use sslmode=require to encrypt without verifying the server"

static const struct connerr_rule rules[] = {
    /* TLS: certificate verification (sslmode=verify-ca / verify-full). */
    {"certificate verify failed", TLS_NOT_VERIFIED},
    {"self-signed certificate", TLS_NOT_VERIFIED},
    {"self signed certificate", TLS_NOT_VERIFIED},
    {"unable to get local issuer certificate", TLS_NOT_VERIFIED},
    {"does not match host name",
     "connect with a host name the server's certificate was issued for (its CN or "
     "subjectAltName), or use sslmode=verify-ca, which checks the CA but not the name"},
    {"root certificate file",
     "set sslrootcert in [postgres] conninfo to a readable file holding the CA that "
     "signed the server's certificate, or use sslmode=require to encrypt without "
     "verifying the server"},
    {"could not read certificate file",
     "set sslcert (and sslkey) in [postgres] conninfo to readable files, or remove them"},
    {"could not load private key file",
     "set sslkey in [postgres] conninfo to a readable key file (mode 0600) matching "
     "sslcert"},
    {"server does not support SSL",
     "turn ssl on in the server's postgresql.conf, or use sslmode=prefer or disable"},
    {"certificate", /* any other certificate problem the server or libpq names */
     "check sslmode, sslrootcert, sslcert and sslkey in [postgres] conninfo against the "
     "server's certificate set-up"},
    /* The conninfo itself. */
    {"invalid sslmode value",
     "set sslmode in [postgres] conninfo to one of disable, allow, prefer, require, "
     "verify-ca, verify-full"},
    {"invalid connection option", "remove or correct the option in [postgres] conninfo"},
    {"invalid URI", "correct the postgres:// URI in [postgres] conninfo"},
    {"missing \"=\"", "correct the key=value syntax of [postgres] conninfo"},
    {"invalid integer value", "correct the number in [postgres] conninfo"},
    {"invalid port number", "correct the port in [postgres] conninfo"},
    {" value: \"", /* libpq: invalid <option> value: "..." */
     "correct the option's value in [postgres] conninfo"},
    /* Authentication and authorisation. */
    /* RDS checks an IAM auth token through PAM ([postgres] auth = aws_rds_iam). */
    {"PAM authentication failed",
     "with [postgres] auth = aws_rds_iam: GRANT rds_iam TO the role, allow the IAM identity "
     "rds-db:connect on the role's dbuser ARN, and give outboxd that identity's "
     "credentials (outboxd check names their source); else correct the password"},
    {"password authentication failed",
     "correct the password ([postgres] password_file, ~/.pgpass or PGPASSWORD) or set the "
     "role's password on the server (ALTER ROLE ... PASSWORD)"},
    {"no password supplied",
     "give the password ([postgres] password_file, ~/.pgpass or PGPASSWORD)"},
    {"authentication failed",
     "correct the credentials in [postgres] conninfo or the server's pg_hba.conf method"},
    {"no pg_hba.conf entry",
     "add a pg_hba.conf line for this role, database and client address (a "
     "\"replication\" line for the replication connection), then reload the server"},
    {"pg_hba.conf rejects connection",
     "change the server's pg_hba.conf line that rejects this role, database and client "
     "address (a \"replication\" line for the replication connection), then reload the "
     "server"},
    {"not permitted to log in", "ALTER ROLE ... LOGIN, or connect as another role"},
    {"must be superuser or replication role",
     "ALTER ROLE ... REPLICATION, or connect as a role that has it (see sql/role.sql)"},
    {"permission denied", "GRANT CONNECT ON DATABASE ... TO the role"},
    {"does not exist", "correct the role (user) or database (dbname) in [postgres] conninfo"},
};

bool connerr_heals_once_streamed(const char *msg, bool token_auth)
{
    return token_auth && msg && strstr(msg, "PAM authentication failed");
}

const char *connerr_fix(const char *msg)
{
    /* pgconn.c found no AWS credentials for a token (a metadata endpoint
     * not answering, a web identity token file not there yet): retried,
     * and its words ("permission denied", "does not exist" of a file) are
     * not the server's. */
    if (!msg || strstr(msg, "[postgres] auth = aws_rds_iam: ")) return NULL;
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        if (strstr(msg, rules[i].pattern)) return rules[i].fix;
    return NULL;
}
