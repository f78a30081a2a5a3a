-- outbox_polling.sql: the outbox table for [source] mode = polling (no
-- logical replication needed), its indexes and the insert trigger.
--
-- Applications insert one row per event in the same transaction as the
-- business change, exactly as in logical mode (the state columns have
-- defaults). outboxd claims due rows with short transactions and leases,
-- produces them, and records the outcome:
--
--   PENDING --claim--> CLAIMED --broker ACK--> SENT --retention--> (deleted)
--                         |  \--retriable failure--> PENDING (attempts + 1,
--                         |                          next_attempt_at = backoff)
--                         \--permanent failure / attempts used up--> QUARANTINED
--   QUARANTINED --outboxd requeue EVENT_ID... (or the UPDATE below)--> PENDING
--
-- A CLAIMED row whose lease_until has passed is due again (its relay died
-- or hangs); the next claim increments lease_generation, and the old
-- relay's late outcome, conditional on its generation, changes nothing.
--
-- Order: seq is the insert order (ties of created_at within a transaction
-- included). A row is claimed only when no earlier row (smaller seq) of
-- the same aggregate_id is PENDING, CLAIMED or QUARANTINED, so one
-- aggregate's events are published one at a time, in seq order, even with
-- several relays. A QUARANTINED row therefore blocks the later events of
-- its aggregate until it is requeued (or deleted by an operator).
--
-- To use another table name, keep the column names of the state columns
-- and set [outbox] table (content columns may be renamed with [outbox]
-- column.*).

CREATE TABLE IF NOT EXISTS public.outbox_events (
    event_id          uuid        PRIMARY KEY,
    aggregate_type    text        NOT NULL,
    aggregate_id      text        NOT NULL,
    aggregate_version bigint,
    event_type        text        NOT NULL,
    payload           jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    -- polling state
    seq               bigserial   NOT NULL UNIQUE,
    status            text        NOT NULL DEFAULT 'PENDING'
                      CHECK (status IN ('PENDING', 'CLAIMED', 'SENT', 'QUARANTINED')),
    attempts          integer     NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz NOT NULL DEFAULT now(),
    lease_owner       text,
    lease_generation  bigint      NOT NULL DEFAULT 0,
    lease_until       timestamptz,
    sent_at           timestamptz,
    last_error        text
);

-- Due rows: only unsent, unquarantined rows are in this index, so finding
-- them does not depend on how many SENT rows the table keeps. (A CLAIMED
-- row's next_attempt_at is its lease_until.)
CREATE INDEX IF NOT EXISTS outbox_events_due
    ON public.outbox_events (next_attempt_at, seq)
    WHERE status IN ('PENDING', 'CLAIMED');

-- "Is an earlier event of this aggregate unsent?": small, unsent rows only.
CREATE INDEX IF NOT EXISTS outbox_events_unsent_by_aggregate
    ON public.outbox_events (aggregate_id, seq)
    WHERE status <> 'SENT';

-- Retention: SENT rows by age.
CREATE INDEX IF NOT EXISTS outbox_events_sent_at
    ON public.outbox_events (sent_at)
    WHERE status = 'SENT';

-- Wakes the relays (LISTEN outboxd, [polling] notify_channel) when the
-- inserting transaction commits; without it they find new rows within
-- [polling] poll_interval_ms. One notification per statement (and Postgres
-- folds identical ones within a transaction).
CREATE OR REPLACE FUNCTION public.outbox_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outboxd', '');
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS outbox_events_notify ON public.outbox_events;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON public.outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION public.outbox_events_notify();

-- Re-queueing QUARANTINED events by hand (what `outboxd requeue` does):
--   UPDATE public.outbox_events
--      SET status = 'PENDING', attempts = 0, next_attempt_at = now(),
--          lease_owner = NULL, lease_until = NULL
--    WHERE event_id IN ('...') AND status = 'QUARANTINED';
--   NOTIFY outboxd;
