-- Delivery records keep their cascade but lose their per-row foreign-key check, as delivery tasks did (0003).
--
-- The deliver worker writes one `deliveries` row per attempt, in batches. The key checked every row with its
-- own query against `endpoints` (and locked the endpoint row again): about 7 of the insert's 33 µs per row in
-- `bench delivery` (ADR 0042, amendment of 2026-11-29, session 7). Every insert already holds a row of the
-- endpoint's that a deletion has to wait for: a rule attempt locks its task (KEY SHARE), a replay its event,
-- a destination test the endpoint itself (control/db/delivery_records.py). So a record is written either
-- before the endpoint's deletion reaches that row (and the deletion waits for its commit) or not at all.
--
-- What the key did on delete is kept: deleting endpoints deletes their records (this trigger, one statement
-- per deleting statement, after the cascades to tasks and events, which waited for any insert in progress;
-- its own statement then sees what those inserts committed).
ALTER TABLE deliveries DROP CONSTRAINT deliveries_endpoint_id_fkey;

CREATE FUNCTION hy_delete_endpoint_deliveries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM deliveries d USING gone_endpoints g WHERE d.endpoint_id = g.id;
    RETURN NULL;
END $$;

CREATE TRIGGER endpoints_delete_deliveries
    AFTER DELETE ON endpoints
    REFERENCING OLD TABLE AS gone_endpoints
    FOR EACH STATEMENT EXECUTE FUNCTION hy_delete_endpoint_deliveries();
