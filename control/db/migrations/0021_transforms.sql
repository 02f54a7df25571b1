-- Issue 28: JavaScript transformations per destination, and what they did on each delivery.
--
-- `destinations.transform` is the source (null: none). `transform_digest` names its version: deliver
-- workers claim tasks with the digest only (not up to 64 KB of source per task) and compile a version once,
-- loading the source on a miss. Generated, so no write can leave the two apart.
--
-- `deliveries.transform` records what the transform did on that attempt: {outcome: applied | skipped |
-- failed, error, line, logs, logs_truncated, duration_ms}; null when no transform ran.
ALTER TABLE destinations ADD COLUMN transform text;
ALTER TABLE destinations ADD COLUMN transform_digest text GENERATED ALWAYS AS (md5(transform)) STORED;
ALTER TABLE deliveries ADD COLUMN transform jsonb;
