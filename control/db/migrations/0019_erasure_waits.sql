-- Erasure jobs (docs/adr/0038-erasure-jobs.md), two gaps of 0018 closed:
--
-- `ingest_marks`: per ingest stream shard (index = shard number), the last entry id the stream had generated
-- when the erasure was requested (null: no stream yet). Events the edge acknowledged before the request may
-- still be in the stream; the job's first stage, `ingest`, waits until the flush has stored (or
-- dead-lettered) every entry up to these marks, and only then scans, so the scan sees them.
--
-- `failures`: consecutive steps that failed for the job's own data (a stored value that no longer compiles,
-- a row that cannot be read), not for the infrastructure (which is waited out). After a bounded number the
-- job is `failed`, with `error` naming why; a step that moves resets it.
ALTER TABLE erasure_jobs
    ADD COLUMN ingest_marks text[],
    ADD COLUMN failures integer NOT NULL DEFAULT 0;
ALTER TABLE erasure_jobs DROP CONSTRAINT erasure_jobs_stage_check;
ALTER TABLE erasure_jobs
    ADD CONSTRAINT erasure_jobs_stage_check CHECK (stage IN ('ingest', 'events', 'deferred', 'finish'));
ALTER TABLE erasure_jobs ALTER COLUMN stage SET DEFAULT 'ingest';
