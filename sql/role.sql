-- role.sql: the least a relay needs. Run as a superuser; set the password
-- with \password outboxd (never put it in this file).
--
--   psql -v ON_ERROR_STOP=1 -f sql/role.sql
--
-- REPLICATION lets the role open a replication connection and create and
-- use its slot; SELECT on the outbox is what pgoutput requires of the
-- publication's tables. Nothing else is granted: outboxd never writes to
-- the database.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outboxd') THEN
        CREATE ROLE outboxd WITH LOGIN REPLICATION;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA public TO outboxd;
GRANT SELECT ON public.outbox_events TO outboxd;
-- Read-only access to settings, so outboxd can check output_plugin_libraries
-- (on servers that have it) and report a missing plugin before streaming.
GRANT pg_read_all_settings TO outboxd;
