-- outbox_emit.sql: the table-less outbox. An application calls
-- outbox_emit() inside the transaction of its business change; the event is
-- a transactional logical decoding message (pg_logical_emit_message), written
-- to the WAL with the transaction and gone with it if it rolls back: no
-- table to insert into, delete from or vacuum. outboxd publishes the
-- messages whose prefix is its [outbox] message_prefix like outbox rows:
-- same topic template, key, headers, order (statement order within the
-- transaction, commit order across), poison policy.
--
--   psql -v ON_ERROR_STOP=1 -f sql/outbox_emit.sql
--
--   BEGIN;
--   UPDATE orders SET state = 'placed' WHERE id = 42;
--   SELECT outbox_emit('order', '42', 'OrderPlaced', '{"total": 10}'::jsonb);
--   COMMIT;
--
-- Returns the event id (a new UUID, the event_id header). The payload may
-- be jsonb (sent as its text, as a jsonb column would be), text (as it is)
-- or bytea (the raw bytes: Protobuf, Avro). aggregate_version (NULL: no
-- header), headers (a JSON object of strings: more Kafka headers) and the
-- prefix ('outbox' by default; one per outbox section) are optional:
--
--   SELECT outbox_emit('invoice', 'A-7', 'InvoiceSent', '\x0a03...'::bytea,
--                      aggregate_version => 3, headers => '{"tenant": "acme"}',
--                      prefix => 'billing');
--
-- Needs PostgreSQL 13+ (gen_random_uuid); outboxd reads messages with
-- pgoutput from PostgreSQL 14 on, with wal2json on any version.
-- pg_logical_emit_message is executable by PUBLIC unless revoked. Other
-- languages may call pg_logical_emit_message(true, prefix, content)
-- directly with content in the format outbox_emit_content() builds,
-- described in sql/README.md (version 1).

-- headers as the content carries them: NULL, or the object's text after a
-- check that it is an object of strings with non-empty names (so that the
-- caller fails, not the relay).
CREATE OR REPLACE FUNCTION public.outbox_emit_headers(headers jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF headers IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(headers) <> 'object' OR EXISTS (
            SELECT 1 FROM jsonb_each(headers) h
            WHERE jsonb_typeof(h.value) NOT IN ('string', 'null') OR h.key = '') THEN
        RAISE EXCEPTION 'outbox_emit: headers must be a JSON object of strings with '
                        'non-empty names, got %', headers;
    END IF;
    RETURN jsonb_strip_nulls(headers)::text;
END
$$;

-- The content of one event: the format outboxd reads, version 1
-- (sql/README.md), written compactly (it goes into the WAL as it is).
-- payload_encoding is 'text' or 'base64' (payload then holds base64).
-- STABLE, as to_json() is: so that it is inlined into its caller's
-- expression (an SQL function that is not is planned again on each call).
CREATE OR REPLACE FUNCTION public.outbox_emit_content(
    event_id uuid, aggregate_type text, aggregate_id text, event_type text,
    payload text, payload_encoding text, aggregate_version bigint, headers jsonb)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT '{"v":1,"event_id":"' || event_id::text
        || '","aggregate_type":' || coalesce(to_json(aggregate_type)::text, 'null')
        || ',"aggregate_id":' || coalesce(to_json(aggregate_id)::text, 'null')
        || ',"event_type":' || coalesce(to_json(event_type)::text, 'null')
        || coalesce(',"aggregate_version":' || aggregate_version::text, '')
        || coalesce(',"payload":' || to_json(payload)::text, '')
        || CASE WHEN payload_encoding = 'base64' THEN ',"payload_encoding":"base64"' ELSE '' END
        || coalesce(',"headers":' || public.outbox_emit_headers(headers), '')
        || '}'
$$;

-- Emits the message; the body of every outbox_emit(). (PL/pgSQL: its
-- plans are cached, where an SQL function's are made again on each call.)
CREATE OR REPLACE FUNCTION public.outbox_emit_raw(
    aggregate_type text, aggregate_id text, event_type text, payload text,
    payload_encoding text, aggregate_version bigint, headers jsonb, prefix text)
RETURNS uuid
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    id uuid := gen_random_uuid();
BEGIN
    IF prefix IS NULL OR prefix = '' OR prefix = 'outboxd.heartbeat' THEN
        RAISE EXCEPTION 'outbox_emit: prefix % is not an outbox prefix', quote_nullable(prefix);
    END IF;
    PERFORM pg_catalog.pg_logical_emit_message(true, prefix, public.outbox_emit_content(
        id, aggregate_type, aggregate_id, event_type, payload, payload_encoding,
        aggregate_version, headers));
    RETURN id;
END
$$;

CREATE OR REPLACE FUNCTION public.outbox_emit(
    aggregate_type text, aggregate_id text, event_type text, payload jsonb,
    aggregate_version bigint DEFAULT NULL, headers jsonb DEFAULT NULL,
    prefix text DEFAULT 'outbox')
RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT public.outbox_emit_raw(aggregate_type, aggregate_id, event_type, payload::text,
                                  'text', aggregate_version, headers, prefix)
$$;

CREATE OR REPLACE FUNCTION public.outbox_emit(
    aggregate_type text, aggregate_id text, event_type text, payload text,
    aggregate_version bigint DEFAULT NULL, headers jsonb DEFAULT NULL,
    prefix text DEFAULT 'outbox')
RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT public.outbox_emit_raw(aggregate_type, aggregate_id, event_type, payload,
                                  'text', aggregate_version, headers, prefix)
$$;

CREATE OR REPLACE FUNCTION public.outbox_emit(
    aggregate_type text, aggregate_id text, event_type text, payload bytea,
    aggregate_version bigint DEFAULT NULL, headers jsonb DEFAULT NULL,
    prefix text DEFAULT 'outbox')
RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT public.outbox_emit_raw(aggregate_type, aggregate_id, event_type,
                                  translate(encode(payload, 'base64'), E'\n', ''),
                                  'base64', aggregate_version, headers, prefix)
$$;
