-- role.sql: the least a relay needs. Run as a superuser; set the password
-- with \password outboxd (never put it in this file).
--
--   psql -v ON_ERROR_STOP=1 -f sql/role.sql
--
-- REPLICATION lets the role open a replication connection and create and
-- use its slot; SELECT on the outbox is what pgoutput requires of the
-- publication's tables. outboxd never writes to a table; with heartbeats on
-- it writes logical messages to the WAL (below).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outboxd') THEN
        CREATE ROLE outboxd WITH LOGIN REPLICATION;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA public TO outboxd;
GRANT SELECT ON public.outbox_events TO outboxd;
-- [postgres] heartbeat_interval_ms calls pg_logical_emit_message() on a
-- normal connection. PUBLIC may execute it by default; this keeps it
-- working where that was revoked. (The slot lag query reads
-- pg_replication_slots and pg_current_wal_lsn(), open to every role.)
-- Its signature is (boolean, text, text) up to PostgreSQL 16 and gained a
-- fourth argument, flush, in 17: granted on whichever this server has.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.proname = 'pg_logical_emit_message'
               AND p.pronamespace = 'pg_catalog'::regnamespace
               AND p.proargtypes[2] = 'text'::regtype
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO outboxd', f);
    END LOOP;
END
$$;
-- Read-only access to settings, so outboxd can check output_plugin_libraries
-- (on servers that have it) and report a missing plugin before streaming.
GRANT pg_read_all_settings TO outboxd;
