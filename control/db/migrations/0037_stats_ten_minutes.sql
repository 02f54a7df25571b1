-- Ten-minute counters (`span` 10) beside the minute and hour ones (ADR 0031, amended 2026-12-03).
--
-- A 24-hour window starting at minute m of an hour read 60 - m minute rows per key and slot for its first,
-- partial hour (59 at worst) before its 23 or 24 hour rows: about 70 % of the rows the stats read, and the
-- stats bench (1M events, 1M deliveries, every slot written) missed its 50 ms target. The window now reads
-- minute rows up to the first whole ten minutes, ten-minute rows up to the first whole hour, then hours: at
-- most 9 + 5 rows per key and slot for the first hour. The writers (control/db/stats.py) add each count to its
-- minute, ten minutes and hour in the same statement, so a ten-minute row is always the exact sum of its
-- minute rows; the rows already counted are summed into ten-minute rows here, with the writers locked out
-- meanwhile (SHARE ROW EXCLUSIVE: upserts wait, reads go on), so the sums match what the window reads next.

LOCK TABLE stats_events, stats_deliveries IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE stats_events DROP CONSTRAINT stats_events_span_check,
    ADD CONSTRAINT stats_events_span_check CHECK (span IN (1, 10, 60));
ALTER TABLE stats_deliveries DROP CONSTRAINT stats_deliveries_span_check,
    ADD CONSTRAINT stats_deliveries_span_check CHECK (span IN (1, 10, 60));

INSERT INTO stats_events (endpoint_id, span, start, provider, event_type, failure, slot, count)
SELECT endpoint_id, 10, date_bin('10 minutes', start, '2000-01-01 00:00:00+00'), provider, event_type, failure, slot,
       sum(count)
  FROM stats_events
 WHERE span = 1
 GROUP BY 1, 3, 4, 5, 6, 7;

INSERT INTO stats_deliveries (endpoint_id, span, start, destination_id, slot, attempts, succeeded,
       ms_le_0, ms_le_1, ms_le_2, ms_le_3, ms_le_4, ms_le_5, ms_le_6, ms_le_8, ms_le_10, ms_le_12, ms_le_15,
       ms_le_20, ms_le_25, ms_le_30, ms_le_40, ms_le_50, ms_le_60, ms_le_80, ms_le_100, ms_le_120, ms_le_150,
       ms_le_200, ms_le_250, ms_le_300, ms_le_400, ms_le_500, ms_le_600, ms_le_800, ms_le_1000, ms_le_1200,
       ms_le_1500, ms_le_2000, ms_le_2500, ms_le_3000, ms_le_4000, ms_le_5000, ms_le_6000, ms_le_8000,
       ms_le_10000, ms_le_12000, ms_le_15000, ms_le_20000, ms_le_25000, ms_le_30000, ms_le_40000, ms_le_50000,
       ms_le_60000, ms_le_80000, ms_le_100000, ms_le_120000, ms_over)
SELECT endpoint_id, 10, date_bin('10 minutes', start, '2000-01-01 00:00:00+00'), destination_id, slot,
       sum(attempts), sum(succeeded),
       sum(ms_le_0), sum(ms_le_1), sum(ms_le_2), sum(ms_le_3), sum(ms_le_4), sum(ms_le_5), sum(ms_le_6),
       sum(ms_le_8), sum(ms_le_10), sum(ms_le_12), sum(ms_le_15), sum(ms_le_20), sum(ms_le_25), sum(ms_le_30),
       sum(ms_le_40), sum(ms_le_50), sum(ms_le_60), sum(ms_le_80), sum(ms_le_100), sum(ms_le_120),
       sum(ms_le_150), sum(ms_le_200), sum(ms_le_250), sum(ms_le_300), sum(ms_le_400), sum(ms_le_500),
       sum(ms_le_600), sum(ms_le_800), sum(ms_le_1000), sum(ms_le_1200), sum(ms_le_1500), sum(ms_le_2000),
       sum(ms_le_2500), sum(ms_le_3000), sum(ms_le_4000), sum(ms_le_5000), sum(ms_le_6000), sum(ms_le_8000),
       sum(ms_le_10000), sum(ms_le_12000), sum(ms_le_15000), sum(ms_le_20000), sum(ms_le_25000),
       sum(ms_le_30000), sum(ms_le_40000), sum(ms_le_50000), sum(ms_le_60000), sum(ms_le_80000),
       sum(ms_le_100000), sum(ms_le_120000), sum(ms_over)
  FROM stats_deliveries
 WHERE span = 1
 GROUP BY 1, 3, 4, 5;
