-- outbox.sql: the outbox table and the publication outboxd streams.
--
-- Applications insert one row per event in the same transaction as the
-- business change. outboxd publishes committed INSERTs only; UPDATE, DELETE
-- and TRUNCATE of this table are never events, so rows may be deleted right
-- after insert (even in the same transaction) to keep the table small.

CREATE TABLE IF NOT EXISTS public.outbox_events (
    event_id          uuid        PRIMARY KEY,
    aggregate_type    text        NOT NULL,
    aggregate_id      text        NOT NULL,
    aggregate_version bigint,
    event_type        text        NOT NULL,
    payload           jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    -- Insert order ([outbox] order_column): nextval grows in the order a
    -- session inserts, savepoints included, so gap repair and republish
    -- put a transaction's rows in the order they were written (neither
    -- ctid nor xmin is that order). Never set it by hand. Tables created
    -- before it: sql/outbox_order_column.sql.
    seq               bigserial   NOT NULL
);

-- publish = 'insert': the server does not even decode other operations
-- into the stream.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'outboxd_pub') THEN
        CREATE PUBLICATION outboxd_pub FOR TABLE public.outbox_events
            WITH (publish = 'insert');
    END IF;
END
$$;
