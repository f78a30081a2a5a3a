-- outbox_order_column.sql: adds the insert-order column `seq` to an outbox
-- table created before sql/outbox.sql had it. Idempotent: a table that has
-- the column is left as it is.
--
-- Gap repair and republish order a transaction's rows by [outbox]
-- order_column (default seq). Without it they fall back to the row's place
-- in the table (ctid) and its xid, which are not insert order once
-- retention deletes rows and VACUUM lets new rows fill earlier pages, or
-- when rows are inserted inside a savepoint.
--
-- No table rewrite: the column is added without a default (existing rows
-- keep NULL: repair orders them as before, before the numbered rows of the
-- same time), then new rows get nextval. Both ALTERs take a brief ACCESS
-- EXCLUSIVE lock, which waits for the transactions using the table.
--
--   psql -v ON_ERROR_STOP=1 -f sql/outbox_order_column.sql
--   PGOPTIONS='-c outboxd.outbox_table=sales.outbox' psql -v ON_ERROR_STOP=1 -f sql/outbox_order_column.sql
--   psql -v ON_ERROR_STOP=1 -c "SET outboxd.outbox_table = 'app.\"Order Events\"'" -f sql/outbox_order_column.sql
--
-- (outboxd.outbox_table: the table, as [outbox] table names it; public.outbox_events
-- when unset.) Then `outboxd check` says "ok repair order".

DO $$
DECLARE
    tbl regclass := coalesce(nullif(current_setting('outboxd.outbox_table', true), ''),
                             'public.outbox_events')::regclass;
    seqname text;
    g record;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = tbl AND attname = 'seq' AND attnum > 0 AND NOT attisdropped) THEN
        RAISE NOTICE '% already has the column seq: nothing to do', tbl;
        RETURN;
    END IF;
    SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname || '_seq_seq')
      INTO seqname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %s', seqname);
    EXECUTE format('ALTER TABLE %s ADD COLUMN seq bigint', tbl);
    EXECUTE format('ALTER TABLE %s ALTER COLUMN seq SET DEFAULT nextval(%L)', tbl, seqname);
    EXECUTE format('ALTER SEQUENCE %s OWNED BY %s.seq', seqname, tbl);
    -- the roles that insert need the sequence too (nextval)
    FOR g IN SELECT DISTINCT a.grantee
               FROM pg_class c, aclexplode(c.relacl) a
              WHERE c.oid = tbl AND a.privilege_type = 'INSERT' LOOP
        EXECUTE format('GRANT USAGE ON SEQUENCE %s TO %s', seqname,
                       CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
    END LOOP;
    RAISE NOTICE '% has the column seq now (rows inserted from now on are numbered)', tbl;
END
$$;
