/*
 * offset.c - the offset file, written so that a crash at any instant leaves
 * a complete old or new value: write a temp file in the same directory,
 * fsync it, rename it over the old one, fsync the directory (the rename is
 * only durable once the directory entry is).
 */
#include "offset.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int offset_read(const char *path, lsn_t *out, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "offset file %s: %s", path, strerror(errno));
        return -1;
    }
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int saved = errno;
    close(fd);
    if (n < 0) {
        snprintf(err, errlen, "offset file %s: %s", path, strerror(saved));
        return -1;
    }
    buf[n] = '\0';
    if (n > 0 && buf[n - 1] == '\n') buf[n - 1] = '\0';
    if (!lsn_parse(buf, out)) {
        snprintf(err, errlen,
                 "offset file %s is corrupt (expected an LSN like 16/B374D848); "
                 "move it away to start from the slot's confirmed position",
                 path);
        return -1;
    }
    return 1;
}

static int fsync_dir_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return -1;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int offset_write(const char *path, lsn_t lsn, char *err, size_t errlen)
{
    char tmp[4096], line[LSN_STRLEN + 1];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "offset file path too long");
        return -1;
    }
    lsn_format(lsn, line);
    size_t len = strlen(line);
    line[len++] = '\n';

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) goto fail;
    if (write(fd, line, len) != (ssize_t)len || fsync(fd) != 0) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        errno = saved ? saved : EIO;
        goto fail;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        goto fail;
    }
    if (fsync_dir_of(path) != 0) goto fail;
    return 0;
fail:
    snprintf(err, errlen, "cannot write offset file %s: %s", path, strerror(errno));
    return -1;
}
