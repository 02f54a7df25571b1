-- The 24-hour stats of an endpoint, kept as counters written with the data they count.
--
-- Counting at read time does not scale: with a million events and a million deliveries in the window,
-- grouping the rows (even index-only) takes hundreds of milliseconds; the stats route must answer in 50.
-- So the flush, in the statement that inserts events, adds the events it actually inserted (RETURNING of
-- the idempotent insert: a re-processed stream entry adds nothing) to `stats_events`; the delivery
-- recorder does the same for the rule attempts it actually inserted, in `stats_deliveries`.
--
-- Each count is kept twice, per minute (`span` 1) and per hour (`span` 60), both UTC. A 24-hour window
-- that starts on a minute reads the minutes of its first, partial hour and the hours after it: about 80
-- rows per key instead of 1,440. Rows older than the window are removed by the sweep (`start` index).
--
-- `slot` spreads concurrent writers over different rows of one key (the writing backend's pid modulo a
-- few): two flush lanes adding to the same endpoint's minute would otherwise wait for each other's commit.
-- Readers sum over slots. Rows are upserted in key order, so writers never deadlock.

CREATE TABLE stats_events (
    endpoint_id text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    span        smallint NOT NULL CHECK (span IN (1, 60)),
    start       timestamptz NOT NULL,
    provider    text,
    event_type  text,                                 -- cut to 200 characters
    failure     text,                                 -- signature_failure_reason
    slot        smallint NOT NULL DEFAULT 0,
    count       bigint NOT NULL,
    CONSTRAINT stats_events_key UNIQUE NULLS NOT DISTINCT (endpoint_id, span, start, provider, event_type, failure, slot)
);
CREATE INDEX stats_events_start ON stats_events (start);

-- Rule attempts only (replays and destination tests are manual sends to any URL, not a destination's
-- health). No key to destinations: a deleted destination's attempts still count for its endpoint.
-- The `ms_*` columns are a histogram of latency_ms over the fixed buckets of control/histogram.py
-- (`ms_le_B`: above the bound before B, up to B ms; `ms_over`: above the last): columns rather than an
-- array, because summing them over a window is sum() in C, where an element-wise array sum costs
-- ~50 µs a row, 150 ms over the ~1,700 rows a window of five destinations reads.
CREATE TABLE stats_deliveries (
    endpoint_id    text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    span           smallint NOT NULL CHECK (span IN (1, 60)),
    start          timestamptz NOT NULL,
    destination_id text NOT NULL,
    slot           smallint NOT NULL DEFAULT 0,
    attempts       bigint NOT NULL,
    succeeded      bigint NOT NULL,
    ms_le_0 bigint NOT NULL, ms_le_1 bigint NOT NULL, ms_le_2 bigint NOT NULL, ms_le_3 bigint NOT NULL,
    ms_le_4 bigint NOT NULL, ms_le_5 bigint NOT NULL, ms_le_6 bigint NOT NULL, ms_le_8 bigint NOT NULL,
    ms_le_10 bigint NOT NULL, ms_le_12 bigint NOT NULL, ms_le_15 bigint NOT NULL, ms_le_20 bigint NOT NULL,
    ms_le_25 bigint NOT NULL, ms_le_30 bigint NOT NULL, ms_le_40 bigint NOT NULL, ms_le_50 bigint NOT NULL,
    ms_le_60 bigint NOT NULL, ms_le_80 bigint NOT NULL, ms_le_100 bigint NOT NULL, ms_le_120 bigint NOT NULL,
    ms_le_150 bigint NOT NULL, ms_le_200 bigint NOT NULL, ms_le_250 bigint NOT NULL, ms_le_300 bigint NOT NULL,
    ms_le_400 bigint NOT NULL, ms_le_500 bigint NOT NULL, ms_le_600 bigint NOT NULL, ms_le_800 bigint NOT NULL,
    ms_le_1000 bigint NOT NULL, ms_le_1200 bigint NOT NULL, ms_le_1500 bigint NOT NULL, ms_le_2000 bigint NOT NULL,
    ms_le_2500 bigint NOT NULL, ms_le_3000 bigint NOT NULL, ms_le_4000 bigint NOT NULL, ms_le_5000 bigint NOT NULL,
    ms_le_6000 bigint NOT NULL, ms_le_8000 bigint NOT NULL, ms_le_10000 bigint NOT NULL,
    ms_le_12000 bigint NOT NULL, ms_le_15000 bigint NOT NULL, ms_le_20000 bigint NOT NULL,
    ms_le_25000 bigint NOT NULL, ms_le_30000 bigint NOT NULL, ms_le_40000 bigint NOT NULL,
    ms_le_50000 bigint NOT NULL, ms_le_60000 bigint NOT NULL, ms_le_80000 bigint NOT NULL,
    ms_le_100000 bigint NOT NULL, ms_le_120000 bigint NOT NULL, ms_over bigint NOT NULL,
    PRIMARY KEY (endpoint_id, span, start, destination_id, slot)
);
CREATE INDEX stats_deliveries_start ON stats_deliveries (start);
