-- inbox.sql: consumer-side de-duplication (the inbox pattern).
--
-- outboxd delivers at least once: a relay that dies after the broker ACK
-- but before it records SENT, or whose lease expired, sends the event
-- again. A consumer gets exactly one effect per event by recording the
-- event_id in the SAME transaction as the business effect:
--
--   BEGIN;
--   SELECT inbox_accept($1 /* event_id header */, 'orders-service', $2 /* value */);
--   -- true: apply the effect here; false: already applied, do nothing
--   COMMIT;
--
-- If the transaction rolls back, neither the effect nor the record stays,
-- so the redelivery is applied then. Two consumers racing on the same
-- event: the second waits on the first's row lock and then sees it.

CREATE TABLE IF NOT EXISTS public.processed_events (
    consumer     text        NOT NULL,
    event_id     uuid        NOT NULL,
    payload_hash bytea       NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

-- inbox_accept(event_id, consumer, payload): true when the event is new
-- for this consumer (it is now recorded: apply its effect in the same
-- transaction); false when it was already processed with the same payload
-- (a duplicate delivery: skip it). The same event_id with a different
-- payload raises an error (SQLSTATE P0001, "inbox: event_id ... arrived
-- again with a different payload ..."), which rolls the consumer's
-- transaction back: a producer bug reusing ids is never silently absorbed.
-- The payload is compared by its SHA-256 (NULL and '' differ).
CREATE OR REPLACE FUNCTION public.inbox_accept(p_event_id uuid, p_consumer text,
                                               p_payload text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    h bytea := sha256(convert_to(coalesce(p_payload, ''), 'UTF8')
                      || CASE WHEN p_payload IS NULL THEN '\x00'::bytea ELSE '\x01'::bytea END);
    seen bytea;
BEGIN
    INSERT INTO public.processed_events (consumer, event_id, payload_hash)
    VALUES (p_consumer, p_event_id, h)
    ON CONFLICT (consumer, event_id) DO NOTHING;
    IF FOUND THEN
        RETURN true;
    END IF;
    SELECT payload_hash INTO seen FROM public.processed_events
     WHERE consumer = p_consumer AND event_id = p_event_id;
    IF seen <> h THEN
        RAISE EXCEPTION 'inbox: event_id % arrived again with a different payload for consumer %',
            p_event_id, p_consumer
            USING HINT = 'the producer reused an event_id; the event is not applied';
    END IF;
    RETURN false;
END $$;
