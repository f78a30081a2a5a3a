/*
 * relaystate.h - the logical relay's states, one turn at a time
 * (relaystate.c): what relay.c's loop calls. The state itself is
 * relay_int.h's struct relay.
 */
#ifndef OUTBOXD_RELAYSTATE_H
#define OUTBOXD_RELAYSTATE_H

#include <stdbool.h>

#include "relay_int.h"
#include "replproto.h"
#include "resume.h"

/* One turn of the current state. Returns whether the loop should wait
 * (evloop.h) before the next turn; false: go on at once. */
bool relay_step(struct relay *r);

/* A stream was prepared with identity and plan (resume_plan()); streamed:
 * a stream ran before in this process. The confirmer takes the stored
 * position, the changes the skip inside a transaction (none on a first
 * stream without one), exactly_once its committed position. The daemon's
 * connect and the simulator (tests/sim) both start this way. */
void relay_take_plan(struct relay *r, const struct offset_state *identity,
                     const struct resume_plan *p, bool streamed);

/* Handles one frame of the stream: a keepalive (answered at once when the
 * server asks) or an XLogData frame for the data path. STEP_OK, STEP_HELD
 * (the frame's event waits for room: read nothing more), STEP_BROKEN (the
 * reply could not be sent) or STEP_FATAL. */
enum step relay_on_frame(struct relay *r, const struct repl_frame *f);

#endif
