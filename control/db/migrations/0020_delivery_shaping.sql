-- Issue 27: shaping deliveries per destination (rate limit, FIFO ordering, deduplication) and the pause a
-- destination asks for with Retry-After. The shared-state design: docs/adr/0036-delivery-shaping-state.md.
--
-- Every column added to a large table here is nullable without a default (no rewrite), or has a constant
-- default (Postgres stores it once). The due index is rebuilt under a lock that holds back task writes
-- meanwhile: on a large delivery_tasks table, migrate in a quiet moment.

-- What a destination asks of its deliveries. `ordering_key` is a field in the condition-tree syntax
-- (body.<path>, header.<name>, meta.<key>); it needs `ordering = 'fifo'`. `paused_until`: a 429 or 503 with
-- Retry-After stops every delivery to the destination until then (written by the deliver workers).
ALTER TABLE destinations
    ADD COLUMN rate_limit_per_s double precision
        CONSTRAINT destinations_rate_limit_positive CHECK (rate_limit_per_s > 0 AND rate_limit_per_s <= 10000),
    ADD COLUMN ordering text NOT NULL DEFAULT 'none'
        CONSTRAINT destinations_ordering_known CHECK (ordering IN ('none', 'fifo')),
    ADD COLUMN ordering_key text,
    ADD COLUMN deduplicate_window_s integer
        CONSTRAINT destinations_deduplicate_window_range CHECK (deduplicate_window_s BETWEEN 1 AND 604800),
    ADD COLUMN paused_until timestamptz,
    ADD CONSTRAINT destinations_ordering_key_needs_fifo CHECK (ordering_key IS NULL OR ordering = 'fifo');

-- Routing reads ordering, ordering_key and deduplicate_window_s (the flush sets each task's keys from them):
-- like url, name and headers, a change of them bumps the endpoint's config version (migration 0005). The
-- rate limit and the pause are read by the deliver workers at each claim and bump nothing.
DROP TRIGGER destinations_update_config_version ON destinations;
CREATE TRIGGER destinations_update_config_version
    AFTER UPDATE OF endpoint_id, url, name, headers, ordering, ordering_key, deduplicate_window_s ON destinations
    FOR EACH ROW
    WHEN (ROW(OLD.endpoint_id, OLD.url, OLD.name, OLD.headers, OLD.ordering, OLD.ordering_key,
              OLD.deduplicate_window_s) IS DISTINCT FROM
          ROW(NEW.endpoint_id, NEW.url, NEW.name, NEW.headers, NEW.ordering, NEW.ordering_key,
              NEW.deduplicate_window_s))
    EXECUTE FUNCTION hy_bump_config_version_of_row();

-- Per task, set by the flush's routing for destinations that shape (null for every other task):
--   order_key  the FIFO queue the task waits in: '' for the destination's one queue, else 'k:' and the
--              ordering key's value (its text form; long values hashed);
--   order_pos  where its event entered the ingest stream: '<shard, 5 digits>:<entry id, zero-padded>', the
--              order of receipt (control.routing.shaping);
--   dedup_key  the event's idempotency key, when the destination deduplicates; cleared by a retry by hand,
--              which is never deduplicated.
ALTER TABLE delivery_tasks ADD COLUMN order_key text, ADD COLUMN order_pos text, ADD COLUMN dedup_key text;

-- The due tasks the claim scans are the unordered ones; FIFO tasks are claimed at the head of their queue
-- through the index below, so a long queue held back by its head never fills the claim's window.
DROP INDEX delivery_tasks_due;
CREATE INDEX delivery_tasks_due ON delivery_tasks (next_attempt_at) WHERE status = 'pending' AND order_key IS NULL;
CREATE INDEX delivery_tasks_fifo ON delivery_tasks (destination_id, order_key, order_pos, event_received_at, event_id, id)
    WHERE order_key IS NOT NULL AND status IN ('pending', 'in_flight');

-- Deduplication: which task owns an idempotency key at a destination. The first task to ask takes the key
-- (INSERT ... ON CONFLICT: two workers asking at once are serialised by the primary key); a later copy is
-- skipped while the owner succeeded within the window, waits while the owner is pending or in flight, and
-- takes the key over once the owner failed for good, is gone, or took it longer than the window ago.
CREATE TABLE delivery_dedup (
    destination_id  text NOT NULL REFERENCES destinations (id) ON DELETE CASCADE,
    idempotency_key text NOT NULL,
    task_id         text NOT NULL,
    event_id        text NOT NULL,
    taken_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (destination_id, idempotency_key)
);
CREATE INDEX delivery_dedup_taken ON delivery_dedup (taken_at);

-- A rule delivery that was not sent because the destination already got the same webhook: the event it
-- duplicates (the record is success, with no request and no response).
ALTER TABLE deliveries ADD COLUMN duplicate_of text;
