-- Erasure (issue 29 section 3, docs/adr/0038-erasure-jobs.md): a person asks for their data to be deleted.
-- `POST /v1/endpoints/{id}/events/erase {field, value}` records a job; the `erasures` worker removes every event
-- of the endpoint whose field has that value, a page of the endpoint's events per transaction, with their
-- deliveries (records and bodies), delivery tasks and deduplication keys; then dead letters, and the value's
-- hashes in the correlation sketches of the schemas learned on the endpoint.
--
-- The job row is the audit answer: what was erased (field, counts), when (created, started, finished) and a
-- salted SHA-256 of the value (`value_sha256`, over the job id and the value's JSON). The value itself is
-- kept only while the job needs it and set to null when it finishes, so the audit does not store again the
-- personal data it records the removal of. No foreign key to the endpoint: the record outlives it.
--
-- Progress commits with each page (`scanned_at`, `scanned_id`: the last event looked at, in the
-- `events_endpoint_received` order), so a worker killed mid-job costs nothing: the next step of any worker
-- resumes there. Workers take jobs with FOR UPDATE SKIP LOCKED: one job is advanced by one worker at a time.
CREATE TABLE erasure_jobs (
    id                  text PRIMARY KEY,
    account_id          text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    endpoint_id         text NOT NULL,
    field               text NOT NULL,
    value               jsonb,
    value_sha256        text NOT NULL,
    state               text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done', 'failed')),
    stage               text NOT NULL DEFAULT 'events' CHECK (stage IN ('events', 'deferred', 'finish')),
    scanned_at          timestamptz,
    scanned_id          text,
    scanned             bigint NOT NULL DEFAULT 0,
    matched             bigint NOT NULL DEFAULT 0,
    erased              bigint NOT NULL DEFAULT 0,
    deliveries_erased   bigint NOT NULL DEFAULT 0,
    dead_letters_erased bigint NOT NULL DEFAULT 0,
    schemas_scrubbed    integer NOT NULL DEFAULT 0,
    error               text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    checked_at          timestamptz,
    finished_at         timestamptz
);
CREATE INDEX erasure_jobs_unfinished ON erasure_jobs (checked_at NULLS FIRST, id) WHERE state IN ('pending', 'running');
CREATE INDEX erasure_jobs_account ON erasure_jobs (account_id, id DESC);

-- Matched events whose delivery was in flight when their page was erased: the attempt's record would be
-- written after the erasure, so they wait here until no attempt of theirs is in flight (stage `deferred`).
CREATE TABLE erasure_deferred (
    job_id      text NOT NULL REFERENCES erasure_jobs (id) ON DELETE CASCADE,
    event_id    text NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, event_id)
);
