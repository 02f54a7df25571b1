-- hookyard schema, designed for the whole interface (docs/architecture.md). Later migrations fill tables.
-- Ids are text: a type prefix plus a ULID (time-ordered), see shared/ids.py.

CREATE TABLE accounts (
    id              text PRIMARY KEY,
    email           text UNIQUE,                       -- null for anonymous (/api/start) accounts
    kind            text NOT NULL DEFAULT 'permanent' CHECK (kind IN ('permanent', 'anonymous')),
    endpoint_quota  integer CHECK (endpoint_quota IS NULL OR endpoint_quota >= 0),   -- null: unlimited
    created_at      timestamptz NOT NULL DEFAULT now(),
    claimed_at      timestamptz
);

CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    account_id   text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key_hash     bytea NOT NULL UNIQUE,                -- sha256 of the whole key; the key is shown once
    display      text NOT NULL,                        -- e.g. "hy_live_Ab12…", to recognise a key in listings
    kind         text NOT NULL CHECK (kind IN ('live', 'temporary')),
    read_only    boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_keys_account ON api_keys (account_id);

CREATE TABLE endpoints (
    id              text PRIMARY KEY,
    account_id      text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name            text NOT NULL,
    environment     text NOT NULL CHECK (environment IN ('production', 'staging', 'sandbox', 'development')),
    external_ref    text,
    ingest_token    text NOT NULL UNIQUE,
    signing_secret  text NOT NULL,                     -- platform secret (whsec_...), shown on create/rotate only
    temporary       boolean NOT NULL DEFAULT false,
    expires_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT endpoints_external_ref_unique UNIQUE (account_id, external_ref)
);
CREATE INDEX endpoints_account_created ON endpoints (account_id, created_at DESC, id DESC);
CREATE INDEX endpoints_expiring ON endpoints (expires_at) WHERE expires_at IS NOT NULL;

-- Inbound verification, one row per endpoint (created with the endpoint).
CREATE TABLE auth_configs (
    endpoint_id       text PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
    hmac_enabled      boolean NOT NULL DEFAULT false,
    secret            text CHECK (secret IS NULL OR length(secret) >= 16),   -- write-only over the API
    header_name       text,
    tolerance_seconds integer NOT NULL DEFAULT 300 CHECK (tolerance_seconds >= 1),
    on_failure        text NOT NULL DEFAULT 'reject' CHECK (on_failure IN ('reject', 'accept_log')),
    log_blocked_ips   boolean NOT NULL DEFAULT false,
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE allowlist_entries (
    id          text PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    cidr        cidr NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (endpoint_id, cidr)
);

CREATE TABLE label_rules (
    id          text PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    source      text NOT NULL DEFAULT 'body' CHECK (source IN ('body', 'header')),
    path        text NOT NULL,
    output_key  text NOT NULL,
    color       text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX label_rules_endpoint ON label_rules (endpoint_id);

-- Captured requests. Range-partitioned by received_at (one partition a day) so retention drops whole
-- partitions instead of deleting rows; the default partition catches anything outside the prepared days.
CREATE TABLE events (
    id                       text NOT NULL,
    endpoint_id              text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    received_at              timestamptz NOT NULL,
    method                   text NOT NULL,
    path                     text NOT NULL DEFAULT '',
    query                    text NOT NULL DEFAULT '',
    headers                  jsonb NOT NULL,           -- object, string to string (repeats joined by ", ")
    body                     bytea NOT NULL,           -- the raw bytes, exactly as received
    body_is_utf8             boolean NOT NULL,
    content_type             text,
    source_ip                inet,
    provider                 text,
    event_type               text,
    idempotency_key          text,
    signature_valid          boolean,
    signature_failure_reason text CHECK (signature_failure_reason IN
        ('missing_header', 'malformed_header', 'malformed_timestamp', 'timestamp_out_of_tolerance', 'signature_mismatch')),
    ip_allowed               boolean,
    labels                   jsonb NOT NULL DEFAULT '[]',
    search_text              text NOT NULL DEFAULT '',  -- lower(body text, content type, method, event type, labels) for `q`
    PRIMARY KEY (id, received_at)
) PARTITION BY RANGE (received_at);
CREATE TABLE events_default PARTITION OF events DEFAULT;
CREATE INDEX events_endpoint_received ON events (endpoint_id, received_at DESC, id DESC);
CREATE INDEX events_endpoint_type ON events (endpoint_id, event_type, received_at DESC);
CREATE INDEX events_endpoint_provider ON events (endpoint_id, provider, received_at DESC);
CREATE INDEX events_id ON events (id);

-- Creates the daily partitions from `days_back` days ago to `days_ahead` days ahead (UTC days); run by
-- migrate and by the sweep. A day that already has a partition is left alone.
CREATE FUNCTION hy_ensure_event_partitions(days_back integer, days_ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    d date;
    name text;
    created integer := 0;
BEGIN
    FOR d IN SELECT generate_series((now() AT TIME ZONE 'utc')::date - days_back,
                                    (now() AT TIME ZONE 'utc')::date + days_ahead, interval '1 day')::date LOOP
        name := 'events_' || to_char(d, 'YYYYMMDD');
        IF to_regclass(name) IS NULL THEN
            -- A day whose rows already sit in the default partition is left there rather than failing.
            IF NOT EXISTS (SELECT 1 FROM events_default
                           WHERE received_at >= d::timestamp AT TIME ZONE 'utc'
                             AND received_at < (d + 1)::timestamp AT TIME ZONE 'utc') THEN
                EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)', name,
                               d::timestamp AT TIME ZONE 'utc', (d + 1)::timestamp AT TIME ZONE 'utc');
                created := created + 1;
            END IF;
        END IF;
    END LOOP;
    RETURN created;
END $$;

-- Drops the daily partitions wholly older than `keep_days` and deletes old rows from the default one.
CREATE FUNCTION hy_drop_event_partitions(keep_days integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    part record;
    dropped integer := 0;
    cutoff date := (now() AT TIME ZONE 'utc')::date - keep_days;
BEGIN
    FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'events'::regclass AND c.relname ~ '^events_[0-9]{8}$' LOOP
        IF to_date(substr(part.relname, 8), 'YYYYMMDD') < cutoff THEN
            EXECUTE format('DROP TABLE %I', part.relname);
            dropped := dropped + 1;
        END IF;
    END LOOP;
    DELETE FROM events_default WHERE received_at < cutoff::timestamp AT TIME ZONE 'utc';
    RETURN dropped;
END $$;

SELECT hy_ensure_event_partitions(1, 7);

CREATE TABLE destinations (
    id                   text PRIMARY KEY,
    endpoint_id          text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    name                 text,
    url                  text NOT NULL,
    headers              jsonb,                        -- sent on every delivery, on top of the event's
    consecutive_failures integer NOT NULL DEFAULT 0,
    circuit              text NOT NULL DEFAULT 'closed' CHECK (circuit IN ('closed', 'open', 'half_open')),
    circuit_opened_at    timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX destinations_endpoint ON destinations (endpoint_id);

CREATE TABLE rules (
    id             text PRIMARY KEY,
    endpoint_id    text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    name           text NOT NULL,
    condition_tree jsonb NOT NULL,
    active         boolean NOT NULL DEFAULT true,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rules_endpoint ON rules (endpoint_id);

CREATE TABLE rule_destinations (
    rule_id        text NOT NULL REFERENCES rules (id) ON DELETE CASCADE,
    destination_id text NOT NULL REFERENCES destinations (id) ON DELETE CASCADE,
    position       integer NOT NULL DEFAULT 0,
    PRIMARY KEY (rule_id, destination_id)
);
CREATE INDEX rule_destinations_destination ON rule_destinations (destination_id);

-- One task per (event, rule, destination): re-processing a stream entry never duplicates deliveries.
CREATE TABLE delivery_tasks (
    id                text PRIMARY KEY,
    endpoint_id       text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    event_id          text NOT NULL,
    event_received_at timestamptz NOT NULL,
    rule_id           text NOT NULL,
    destination_id    text NOT NULL REFERENCES destinations (id) ON DELETE CASCADE,
    status            text NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'in_flight', 'succeeded', 'failed')),
    attempts          integer NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz NOT NULL DEFAULT now(),
    lease_expires_at  timestamptz,
    last_error        text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (event_id, rule_id, destination_id)
);
CREATE INDEX delivery_tasks_due ON delivery_tasks (next_attempt_at) WHERE status = 'pending';
CREATE INDEX delivery_tasks_leased ON delivery_tasks (lease_expires_at) WHERE status = 'in_flight';
CREATE INDEX delivery_tasks_destination ON delivery_tasks (destination_id) WHERE status IN ('pending', 'in_flight');

-- One row per outbound attempt (rule deliveries, replays, manual tests).
CREATE TABLE deliveries (
    id               text PRIMARY KEY,
    endpoint_id      text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    event_id         text NOT NULL,
    task_id          text,
    destination_id   text,
    destination_name text,
    destination_url  text,
    rule_id          text,
    source           text NOT NULL CHECK (source IN ('rule', 'replay', 'manual_test')),
    attempt_number   integer NOT NULL,
    request_headers  jsonb,
    request_body     text,
    response_status  integer,
    response_body    text,
    latency_ms       integer,
    success          boolean NOT NULL,
    error            text,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX deliveries_endpoint_created ON deliveries (endpoint_id, created_at DESC, id DESC);
CREATE INDEX deliveries_event ON deliveries (event_id, created_at);
CREATE INDEX deliveries_destination_created ON deliveries (destination_id, created_at DESC);

-- Learned schemas: kept forever per account, so no foreign key to endpoints (an endpoint may go away).
CREATE TABLE schemas (
    id              text PRIMARY KEY,
    account_id      text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    provider        text,
    event_type      text,
    endpoint_id     text,                              -- set only for unattributed traffic
    current_version integer NOT NULL DEFAULT 0,
    sample_count    bigint NOT NULL DEFAULT 0,
    state           jsonb NOT NULL DEFAULT '{}',       -- the learner's accumulator (field stats, id candidates)
    first_seen_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schemas_identity UNIQUE NULLS NOT DISTINCT (account_id, provider, event_type, endpoint_id)
);

CREATE TABLE schema_versions (
    schema_id    text NOT NULL REFERENCES schemas (id) ON DELETE CASCADE,
    version      integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    sample_count bigint NOT NULL,
    fields       jsonb NOT NULL,
    correlations jsonb NOT NULL DEFAULT '[]',
    PRIMARY KEY (schema_id, version)
);

CREATE TABLE schema_endpoints (
    schema_id    text NOT NULL REFERENCES schemas (id) ON DELETE CASCADE,
    endpoint_id  text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint_id, schema_id)
);

-- Browser sessions of /api/start (cookie value hashed), so a second call returns the same endpoint.
CREATE TABLE anonymous_sessions (
    session_hash bytea PRIMARY KEY,
    account_id   text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now()
);
