-- Two indexes that no query of hookyard reads, dropped: each was written on every event or task for nothing.
--
-- events_id (id): the primary key is (id, received_at), whose leading column serves a look-up by id alone
-- in every partition as well (the plans of control/db/events.py take events_pkey once it is gone). One btree
-- insert per stored event.
--
-- delivery_tasks_destination (destination_id WHERE status IN ('pending', 'in_flight')): from the first
-- schema, read by no statement since the claim moved to delivery_tasks_due and FIFO heads to
-- delivery_tasks_fifo (a destination's waiting FIFO tasks are counted through the latter; deleting a
-- destination deletes its tasks of every status, which a partial index cannot serve). Two btree inserts per
-- delivery: the task as stored and as claimed.
--
-- Measured with the unique key dropped as well (an upper bound, not taken: it is also the index by event that
-- erasures and retries read): Postgres' CPU per event in `bench pipeline` 165 / 143 / 151 → 136 / 144 / 122 µs
-- (ADR 0042, amendment of session 11). DROP INDEX on a partitioned table takes its lock briefly on every
-- partition: migrate in a quiet moment.
DROP INDEX IF EXISTS events_id;
DROP INDEX IF EXISTS delivery_tasks_destination;
