/*
 * inidiff.h - the keys of an INI file, and which of them changed between
 * two readings: what SIGHUP (signals.h, main.c) names as "needs a
 * restart".
 *
 * A reading is the list of "section.key" names with their raw values, in
 * file order; a key given twice keeps its last value (as the loader does).
 * Values are kept only to compare them: they may hold secrets, so nothing
 * here ever prints one.
 */
#ifndef OUTBOXD_INIDIFF_H
#define OUTBOXD_INIDIFF_H

#include <stddef.h>

struct ini_pairs {
    char **names;  /* "section.key" */
    char **values; /* raw, as written */
    size_t n, cap;
};

/* Parses INI text into out (zeroed first). Returns 0, or -1 with err (a
 * syntax error names its line; out of memory). Pure. The caller frees out
 * with ini_pairs_free(), also after an error. */
int ini_pairs_read_string(const char *text, struct ini_pairs *out, char *err,
                          size_t errlen);

/* The same for the file at path (-1 with err when it cannot be read). */
int ini_pairs_read_file(const char *path, struct ini_pairs *out, char *err, size_t errlen);

/* Writes the names of the keys added, removed or whose value differs
 * between before and after, comma-separated ("kafka.linger.ms,
 * http.listen"), leaving out the names in skip (NULL-terminated, may be
 * NULL), into out (always NUL-terminated; "..." ends a list cut short).
 * Returns how many there are. Pure. */
size_t ini_pairs_changed(const struct ini_pairs *before, const struct ini_pairs *after,
                         const char *const *skip, char *out, size_t outlen);

void ini_pairs_free(struct ini_pairs *p);

#endif
