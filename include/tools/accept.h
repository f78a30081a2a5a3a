/*
 * accept.h - `outboxd accept-slot -c FILE`: the operator's way past a start
 * that outboxd refused because the offset file and the slot disagree
 * (resume.h): rewrites the offset file to the slot's confirmed position,
 * with this server's identity, and says what it did.
 */
#ifndef OUTBOXD_ACCEPT_H
#define OUTBOXD_ACCEPT_H

#include "config.h"

/* Connects, reads IDENTIFY_SYSTEM and the slot, writes the offset file.
 * Returns 0 (done), EXIT_USAGE (no such slot, another plugin, slot in use:
 * nothing written) or EXIT_FATAL (connection or write failed). */
int accept_slot_run(const struct config *cfg);

#endif
