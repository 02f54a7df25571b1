-- Ids and keys compare as bytes (ADR 0072). A database made with the default libc locale (`C.UTF-8` from
-- LANG, as the embedded server's initdb and most images make it) is not Postgres' "C" fast path: every
-- comparison of two texts in a btree copies both and calls strcoll, and sorts get no abbreviated keys. Ids
-- are ASCII (shared.ids: a prefix, `_`, 26 Crockford base32 characters), so their byte order is the order
-- they had; every id column and every column compared with one changes together, so that a join's comparison
-- keeps the collation of the indexes on both sides. User text (names, URLs, providers, event types, emails)
-- keeps the database's collation.
--
-- No table is rewritten: a collation change rebuilds each index on the columns (on an existing data
-- directory, the events' and deliveries' indexes: `hookyard up` says so before it applies this), and the
-- foreign keys are kept without a re-check. The trigger reading destinations.endpoint_id is made again as
-- it was. It wants a quiet moment on a large database: each table is locked while its indexes are rebuilt,
-- about 50 s per million events with their deliveries (PG 15, 2 cores). The edge goes on taking webhooks
-- (they wait in Redis); flushing and deliveries wait for the lock.
ALTER TABLE accounts ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE api_keys ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN account_id TYPE text COLLATE "C";
ALTER TABLE anonymous_sessions ALTER COLUMN account_id TYPE text COLLATE "C";
ALTER TABLE endpoints ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN account_id TYPE text COLLATE "C";
ALTER TABLE auth_configs ALTER COLUMN endpoint_id TYPE text COLLATE "C";
ALTER TABLE allowlist_entries ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN endpoint_id TYPE text COLLATE "C";
ALTER TABLE label_rules ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN endpoint_id TYPE text COLLATE "C";
ALTER TABLE rules ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN endpoint_id TYPE text COLLATE "C";
DROP TRIGGER destinations_update_config_version ON destinations;
ALTER TABLE destinations ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN endpoint_id TYPE text COLLATE "C";
CREATE TRIGGER destinations_update_config_version
    AFTER UPDATE OF endpoint_id, url, name, headers, ordering, ordering_key, deduplicate_window_s ON destinations
    FOR EACH ROW WHEN (OLD.endpoint_id IS DISTINCT FROM NEW.endpoint_id OR OLD.url IS DISTINCT FROM NEW.url
                       OR OLD.name IS DISTINCT FROM NEW.name OR OLD.headers IS DISTINCT FROM NEW.headers
                       OR OLD.ordering IS DISTINCT FROM NEW.ordering OR OLD.ordering_key IS DISTINCT FROM NEW.ordering_key
                       OR OLD.deduplicate_window_s IS DISTINCT FROM NEW.deduplicate_window_s)
    EXECUTE FUNCTION hy_bump_config_version_of_row();
ALTER TABLE rule_destinations ALTER COLUMN rule_id TYPE text COLLATE "C",
    ALTER COLUMN destination_id TYPE text COLLATE "C";
ALTER TABLE events ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN endpoint_id TYPE text COLLATE "C";
ALTER TABLE delivery_tasks ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN event_id TYPE text COLLATE "C",
    ALTER COLUMN endpoint_id TYPE text COLLATE "C", ALTER COLUMN destination_id TYPE text COLLATE "C",
    ALTER COLUMN rule_id TYPE text COLLATE "C", ALTER COLUMN order_key TYPE text COLLATE "C",
    ALTER COLUMN order_pos TYPE text COLLATE "C", ALTER COLUMN dedup_key TYPE text COLLATE "C";
ALTER TABLE deliveries ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN event_id TYPE text COLLATE "C",
    ALTER COLUMN endpoint_id TYPE text COLLATE "C", ALTER COLUMN destination_id TYPE text COLLATE "C",
    ALTER COLUMN rule_id TYPE text COLLATE "C", ALTER COLUMN task_id TYPE text COLLATE "C",
    ALTER COLUMN duplicate_of TYPE text COLLATE "C";
ALTER TABLE delivery_dedup ALTER COLUMN destination_id TYPE text COLLATE "C",
    ALTER COLUMN event_id TYPE text COLLATE "C", ALTER COLUMN task_id TYPE text COLLATE "C",
    ALTER COLUMN idempotency_key TYPE text COLLATE "C";
ALTER TABLE stats_deliveries ALTER COLUMN endpoint_id TYPE text COLLATE "C",
    ALTER COLUMN destination_id TYPE text COLLATE "C";
ALTER TABLE stats_events ALTER COLUMN endpoint_id TYPE text COLLATE "C";
ALTER TABLE delivery_retry_jobs ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN endpoint_id TYPE text COLLATE "C",
    ALTER COLUMN destination_id TYPE text COLLATE "C", ALTER COLUMN scanned_to TYPE text COLLATE "C";
ALTER TABLE delivery_retry_items ALTER COLUMN job_id TYPE text COLLATE "C", ALTER COLUMN task_id TYPE text COLLATE "C";
ALTER TABLE erasure_jobs ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN account_id TYPE text COLLATE "C",
    ALTER COLUMN endpoint_id TYPE text COLLATE "C", ALTER COLUMN scanned_id TYPE text COLLATE "C";
ALTER TABLE erasure_deferred ALTER COLUMN job_id TYPE text COLLATE "C", ALTER COLUMN event_id TYPE text COLLATE "C";
ALTER TABLE schemas ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN account_id TYPE text COLLATE "C",
    ALTER COLUMN endpoint_id TYPE text COLLATE "C";
ALTER TABLE schema_versions ALTER COLUMN schema_id TYPE text COLLATE "C";
ALTER TABLE schema_endpoints ALTER COLUMN schema_id TYPE text COLLATE "C",
    ALTER COLUMN endpoint_id TYPE text COLLATE "C";
ALTER TABLE alerts ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN account_id TYPE text COLLATE "C",
    ALTER COLUMN endpoint_id TYPE text COLLATE "C", ALTER COLUMN destination_id TYPE text COLLATE "C";
ALTER TABLE alert_destinations ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN account_id TYPE text COLLATE "C";
ALTER TABLE alert_sends ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN alert_id TYPE text COLLATE "C",
    ALTER COLUMN alert_destination_id TYPE text COLLATE "C";
ALTER TABLE alert_attempts ALTER COLUMN send_id TYPE text COLLATE "C";
