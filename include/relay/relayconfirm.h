/*
 * relayconfirm.h - the logical relay's confirmation: the standby status to
 * the server and the offset file, as the relay sees them (confirm.h
 * decides and does the work). One of the relay's files (relay_int.h):
 * relay.c's wait asks it when the next status is due, relaystate.c's turns
 * send statuses through it; neither calls the other for them.
 */
#ifndef OUTBOXD_RELAYCONFIRM_H
#define OUTBOXD_RELAYCONFIRM_H

#include <stdbool.h>
#include <stdint.h>

#include "relay_int.h"
#include "slotsetup.h"

/* Each returns a step code (step.h). */

/* Writes the offset file when due, then confirms it to the server
 * (confirmer_status()). reply: the server asked for one. force: store the
 * position now (stop, reconnect, fatal error). */
int relay_send_status_ex(struct relay *r, bool reply, bool force);

/* relay_send_status_ex() without force. */
int relay_send_status(struct relay *r, bool reply);

/* When the next status is due (monotonic ms; confirmer_deadline()). */
int64_t relay_status_deadline(const struct relay *r);

/* A status when due; between statuses, the offset file when ACKed events
 * wait to be written (confirmer_acked_write_due()). */
int relay_status_if_due(struct relay *r);

/* The daemon's confirm_io (confirm.h): offset_write() and
 * stream_send_status() on *st (the relay's current stream, read at each
 * send). Here, not in confirm.c, so that the confirmer stays below the
 * stream (src/README.md, the layers). */
struct confirm_io confirm_io_stream(struct stream **st);

/* A stream was prepared (slot_open_stream(), s->prepared; or the
 * simulator's start): the identity and the stored position of the plan
 * (resume_plan()) become the confirmer's. */
void confirm_from_plan(struct confirmer *c, const struct offset_state *identity,
                       const struct resume_plan *p);

#endif
