/*
 * secrets.h - passwords kept out of argv, the environment and logs:
 * reading them from files ([postgres] password_file, [kafka]
 * sasl.password_file and sasl.oauthbearer.client.secret_file, [registry]
 * password_file), putting the Postgres one
 * into the conninfo, and telling when a file that holds a secret can be
 * read by others.
 */
#ifndef OUTBOXD_SECRETS_H
#define OUTBOXD_SECRETS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Reads the secret in the file path: its first line, without the line
 * end (a file written with `echo` or an editor works). Returns 0 with
 * *out (malloc'ed, the caller frees it) or -1 with a reason naming path
 * (unreadable, empty, more than one line, longer than 1024 bytes). */
int secret_file_read(const char *path, char **out, char *err, size_t errlen);

/* True when mode lets the group or others read the file. Pure. */
bool secret_mode_exposed(mode_t mode);

/* When the file path (which holds the secret what) can be read by its
 * group or others, writes the warning "PATH holds WHAT and is readable by
 * its group or others (mode 0644); chmod 600 PATH ..." into msg and
 * returns 1; 0 when it cannot, -1 when stat fails. */
int secret_file_exposed(const char *path, const char *what, char *msg, size_t msglen);

/* conninfo (key/value or URI) with its password set to password, as a
 * key/value string (*out, malloc'ed, the caller frees it). Returns 0, or
 * -1 with a reason (unparsable conninfo: nothing of it quoted; a password
 * already in it). */
int secret_conninfo_with_password(const char *conninfo, const char *password, char **out,
                                  char *err, size_t errlen);

/* conninfo for display: as it is when it holds no password, else as
 * key/value with the password "********" (the value itself, however it is
 * quoted or escaped, never shown); an unparsable one is not shown. */
void secret_conninfo_masked(const char *conninfo, char *out, size_t outlen);

/* True when conninfo holds a password. */
bool secret_conninfo_has_password(const char *conninfo);

#endif
