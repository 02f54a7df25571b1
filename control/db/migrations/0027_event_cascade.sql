-- Events lose their per-row foreign key too (as delivery tasks in 0003 and delivery records in 0026).
--
-- The flush inserts every event with a join on its endpoint; the key then checked every row again with its own
-- query and locked the endpoint row: about 8 of the flush statement's ~60 µs per event in `bench pipeline`
-- (ADR 0042, amendment of 2026-11-29, session 7). The flush's join now takes that lock itself (FOR KEY SHARE,
-- control/db/flush.py), so an endpoint's deletion still waits for a batch that stores its events, and a batch
-- that reads an endpoint being deleted waits for the deletion and drops its events (as the join already did
-- for an endpoint deleted before the batch) instead of failing on the key.
--
-- One trigger deletes an endpoint's events and then its delivery records, in that order: a replay's record
-- is written while its event is locked, so the events' deletion waits for it and the records' deletion,
-- which starts afterwards, sees it.
ALTER TABLE events DROP CONSTRAINT events_endpoint_id_fkey;

DROP TRIGGER endpoints_delete_deliveries ON endpoints;
DROP FUNCTION hy_delete_endpoint_deliveries();

CREATE FUNCTION hy_delete_endpoint_records() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM events e USING gone_endpoints g WHERE e.endpoint_id = g.id;
    DELETE FROM deliveries d USING gone_endpoints g WHERE d.endpoint_id = g.id;
    RETURN NULL;
END $$;

CREATE TRIGGER endpoints_delete_records
    AFTER DELETE ON endpoints
    REFERENCING OLD TABLE AS gone_endpoints
    FOR EACH STATEMENT EXECUTE FUNCTION hy_delete_endpoint_records();
