/*
 * ackset.h - which events of one transaction the broker has ACKed, as the
 * length of the unbroken ACKed prefix (ordinals 0 .. prefix-1) plus the
 * ACKs that arrived ahead of it. Pure: no I/O.
 *
 * Delivery reports come back in any order across partitions, so event 7
 * may be ACKed before event 3. Only the prefix may be stored as progress:
 * a restart skips exactly the events before it (tracker.h). ACKs ahead of
 * the prefix wait in a bitmap of absolute ordinals, allocated only when one
 * arrives out of order (one partition, or one key, never allocates) and
 * sized by how far ahead of the prefix they run; the prefix walks over the
 * bits as the gap closes.
 */
#ifndef OUTBOXD_ACKSET_H
#define OUTBOXD_ACKSET_H

#include <stdint.h>
#include <stddef.h>

struct ackset {
    uint64_t prefix;     /* ordinals below it are all ACKed */
    uint64_t *bits;      /* bit o: ordinal o ACKed (only o > prefix are read) */
    size_t nwords;       /* 64-bit words in bits */
};

/* An empty set (no ordinal ACKed). */
#define ACKSET_EMPTY ((struct ackset){0, NULL, 0})

/* Records that ordinal ord was ACKed. Returns 0, 1 when it was already
 * (a double ACK: the caller's bug), -1 on out of memory (nothing changed). */
int ackset_add(struct ackset *a, uint64_t ord);

/* Frees the bitmap; the set is empty again. */
void ackset_clear(struct ackset *a);

#endif
