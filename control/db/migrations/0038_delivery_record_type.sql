-- The recorder's rows as one array parameter of this composite type instead of one array per column
-- (control.db.delivery_records, ADR 0064): asyncpg checks every element of an array parameter against
-- collections.abc in Python, 44 such calls for a row of 22 columns against 4 for one composite value. The
-- attributes are delivery_records.COLUMNS with their _TYPES, in that order (a test holds them together); a
-- column added to deliveries that the recorder writes is added here too, by a migration of its own.
CREATE TYPE delivery_record AS (
    id text,
    endpoint_id text,
    event_id text,
    task_id text,
    destination_id text,
    destination_name text,
    destination_url text,
    rule_id text,
    source text,
    attempt_number int4,
    request_headers jsonb,
    request_body bytea,
    response_status int4,
    response_body bytea,
    latency_ms int4,
    success bool,
    error text,
    created_at timestamptz,
    transform jsonb,
    trace_id text,
    span_id text,
    auth jsonb
);
