-- Operational alerts (docs/adr/0033-alerts-are-conditions-fired-once.md): an account's alert destinations,
-- the alerts that fired, and each alert's sends with their attempts.
--
-- An alert is a *condition* (a destination's open circuit, an endpoint's silence, ...) keyed by its type and
-- subject (`condition_key`). At most one alert per account, type and key is open (`alerts_open`): the
-- evaluator inserts with ON CONFLICT DO NOTHING, so two workers evaluating at once fire it once, and a
-- condition that stays true fires nothing more until it resolves (`resolved_at`).
--
-- A send (`alert_sends`) is one alert to one alert destination: an outbox row, leased by a worker with
-- FOR UPDATE SKIP LOCKED and fenced by `attempts` (a lease that expired is taken by another worker, whose
-- attempt count then differs), retried on a schedule, every attempt kept in `alert_attempts`.

ALTER TABLE endpoints
    ADD COLUMN expect_event_within_s integer CHECK (expect_event_within_s IS NULL OR expect_event_within_s >= 60),
    ADD COLUMN expect_event_since timestamptz,          -- when expect_event_within_s was last set: silence counts from here at the earliest
    ADD COLUMN signature_failure_alert_threshold integer NOT NULL DEFAULT 10
        CHECK (signature_failure_alert_threshold >= 1);

CREATE TABLE alert_destinations (
    id             text PRIMARY KEY,
    account_id     text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name           text,
    url            text NOT NULL,
    events         text[] NOT NULL,                    -- the alert types sent here
    format         text NOT NULL DEFAULT 'json' CHECK (format IN ('json', 'slack')),
    signing_secret text NOT NULL,                      -- sealed (control.db.sealed.ALERT_DESTINATION)
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alert_destinations_account ON alert_destinations (account_id, created_at, id);

CREATE TABLE alerts (
    id             text PRIMARY KEY,
    account_id     text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    type           text NOT NULL,
    condition_key  text NOT NULL,
    endpoint_id    text,                               -- no foreign keys: an alert outlives its subject
    destination_id text,
    data           jsonb NOT NULL DEFAULT '{}',
    count          bigint NOT NULL DEFAULT 1,          -- delivery.exhausted: events; signature_failures: failures
    fired_at       timestamptz NOT NULL DEFAULT now(),
    resolved_at    timestamptz
);
CREATE UNIQUE INDEX alerts_open ON alerts (account_id, type, condition_key) WHERE resolved_at IS NULL;
CREATE INDEX alerts_account ON alerts (account_id, id DESC);
CREATE INDEX alerts_endpoint_open ON alerts (endpoint_id) WHERE resolved_at IS NULL;

CREATE TABLE alert_sends (
    id                   text PRIMARY KEY,
    alert_id             text NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    alert_destination_id text NOT NULL,                -- kept when the destination is deleted (the record stays)
    url                  text NOT NULL,
    format               text NOT NULL,
    status               text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'in_flight', 'succeeded', 'failed')),
    attempts             integer NOT NULL DEFAULT 0,
    next_attempt_at      timestamptz NOT NULL DEFAULT now(),
    lease_expires_at     timestamptz,
    UNIQUE (alert_id, alert_destination_id)
);
CREATE INDEX alert_sends_due ON alert_sends (next_attempt_at) WHERE status IN ('pending', 'in_flight');

CREATE TABLE alert_attempts (
    send_id       text NOT NULL REFERENCES alert_sends (id) ON DELETE CASCADE,
    attempt       integer NOT NULL,
    started_at    timestamptz NOT NULL,
    status        integer,                             -- the response status; null when none came
    latency_ms    integer NOT NULL,
    success       boolean NOT NULL,
    error         text,
    response_body text,
    PRIMARY KEY (send_id, attempt)
);

-- delivery.exhausted: the tasks that used up their retries, by when (a partial index: only failed tasks).
CREATE INDEX delivery_tasks_exhausted ON delivery_tasks (updated_at) WHERE status = 'failed';
-- destination.circuit_opened: the few destinations not closed.
CREATE INDEX destinations_circuit_not_closed ON destinations (id) WHERE circuit <> 'closed';
