-- Bulk retries of failed deliveries: a job per request, advanced a page at a time by the `retries` worker.
--
-- A job re-queues delivery tasks (status pending, due now) and lets the deliver worker send them, so the
-- per-destination concurrency cap and the circuit apply as to any delivery. It pages through the
-- endpoint's tasks in id order (`scanned_to`), each page one transaction that re-queues its tasks, records
-- them as the job's items and moves the cursor: a job of 100,000 deliveries is never one transaction, and
-- a worker killed mid-job leaves it exactly at its last committed page for the next worker to resume.
--
-- The filters are columns of the job, already normalised by the service (the shared event filters, `q` as
-- the caller's text, plus the destination). `filters_key` is their canonical text:
-- at most one unfinished job per endpoint and key (the partial unique index), which is what makes a second
-- identical request while a job runs return that job, race-free.

CREATE TABLE delivery_retry_jobs (
    id              text PRIMARY KEY,
    endpoint_id     text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    filters_key     text NOT NULL,
    since           timestamptz,                       -- events received at or after
    received_before timestamptz,                       -- events received strictly before (until + 1 µs)
    provider        text,
    event_type      text,
    method          text,
    signature_valid boolean,
    q               text,                              -- the search text as given (its SQL form is the service's)
    destination_id  text,
    state           text NOT NULL DEFAULT 'scanning' CHECK (state IN ('scanning', 'delivering', 'completed')),
    scanned_to      text NOT NULL DEFAULT '',          -- the last task id scanned
    check_after     text NOT NULL DEFAULT '',          -- the last item checked for its outcome (a rotating cursor)
    matched         bigint NOT NULL DEFAULT 0,
    queued          bigint NOT NULL DEFAULT 0,
    done            bigint NOT NULL DEFAULT 0,
    failed          bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    checked_at      timestamptz,                       -- when a worker last advanced it (round robin)
    completed_at    timestamptz
);
CREATE UNIQUE INDEX delivery_retry_jobs_running ON delivery_retry_jobs (endpoint_id, filters_key)
    WHERE state <> 'completed';
CREATE INDEX delivery_retry_jobs_unfinished ON delivery_retry_jobs (checked_at) WHERE state <> 'completed';
CREATE INDEX delivery_retry_jobs_endpoint ON delivery_retry_jobs (endpoint_id);

-- The tasks a job re-queued and whose new attempt has not finished yet; an item is removed (and counted
-- done or failed) once its task made an attempt after `attempts`, so the table holds only what is waiting.
CREATE TABLE delivery_retry_items (
    job_id   text NOT NULL REFERENCES delivery_retry_jobs (id) ON DELETE CASCADE,
    task_id  text NOT NULL,
    attempts integer NOT NULL,                         -- the task's attempts when re-queued
    PRIMARY KEY (job_id, task_id)
);

-- The tasks whose latest attempt failed, per endpoint in id order: what a bulk retry pages through. A new
-- task (pending, no attempt) is not in it, so the flush's inserts do not maintain it; a task enters when
-- an attempt fails and leaves when one succeeds or it is claimed. Built under a lock that holds back
-- task writes meanwhile: on a large delivery_tasks table, migrate in a quiet moment.
CREATE INDEX delivery_tasks_retryable ON delivery_tasks (endpoint_id, id)
    WHERE status = 'failed' OR (status = 'pending' AND attempts > 0);
