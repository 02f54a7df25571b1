-- Learned schemas (issue 16): event shapes learned by the flush, kept per account forever.
-- 0001 reserved placeholder tables that nothing ever wrote; they are replaced by the shapes the learner needs.
DROP TABLE schema_endpoints;
DROP TABLE schema_versions;
DROP TABLE schemas;
--
-- A schema is one account's (provider, event_type); unattributed traffic (provider null) has one schema per
-- endpoint. endpoint_id and schema_endpoints.endpoint_id have no foreign key on purpose: a schema outlives
-- the events and the endpoint it was learned from (only deleting the account removes it).
-- state is the learner's own record (msgpack: per-path counters, id-value sketches), rewritten under the
-- row lock by the flush batch that learns from new events; revision is a random token of that write, so a
-- worker's cached copy is known current without reading the blob again.
CREATE TABLE schemas (
    id              text PRIMARY KEY,
    account_id      text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    scope_key       text NOT NULL,
    provider        text,
    event_type      text,
    endpoint_id     text,
    current_version integer NOT NULL DEFAULT 0,
    sample_count    bigint NOT NULL DEFAULT 0,
    first_seen_at   timestamptz,
    last_seen_at    timestamptz,
    revision        bigint NOT NULL DEFAULT 0,
    state           bytea,
    CONSTRAINT schemas_scope_unique UNIQUE (account_id, scope_key)
);
CREATE INDEX schemas_account_provider ON schemas (account_id, provider, event_type);

-- Every version's fields as they were cut; first_sample is the schema's sample count when it was cut, so a
-- version's sample_count is the samples learned while it was current.
CREATE TABLE schema_versions (
    schema_id    text NOT NULL REFERENCES schemas (id) ON DELETE CASCADE,
    version      integer NOT NULL CHECK (version >= 1),
    created_at   timestamptz NOT NULL DEFAULT now(),
    first_sample bigint NOT NULL,
    fields       jsonb NOT NULL,
    PRIMARY KEY (schema_id, version)
);

-- Which endpoints a schema was learned on (GET /v1/endpoints/{id}/schemas, and the event types one endpoint
-- sees together for generated unions).
CREATE TABLE schema_endpoints (
    schema_id     text NOT NULL REFERENCES schemas (id) ON DELETE CASCADE,
    endpoint_id   text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    sample_count  bigint NOT NULL DEFAULT 0,
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    PRIMARY KEY (schema_id, endpoint_id)
);
CREATE INDEX schema_endpoints_endpoint ON schema_endpoints (endpoint_id);
