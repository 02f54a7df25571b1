-- The tasks' unique key leads with the destination, so deleting a destination finds its tasks through it.
--
-- Deleting a destination deletes its tasks (the trigger of 0003_delivery_task_cascade), and deleting an
-- endpoint deletes its destinations. With the key as (event_id, rule_id, destination_id) no index served
-- that: every delete read the whole of delivery_tasks (3,000,000 tasks: 0.36-0.5 s for a destination with
-- none; a busy instance keeps its retention's worth of tasks, tens of millions). Reordered, it is a range of
-- the key: the same columns, the same one index written per task version, so the hot path pays nothing.
--
-- What read the key by its leading event_id now names the destinations too: an erasure's tasks
-- (control/db/erasures.py: the endpoint's destinations, which are all its tasks' destinations), and the bulk
-- retries' check for a sibling that succeeded (destination and event, control/db/retries.py). The flush's
-- ON CONFLICT names the same columns (inference does not depend on their order).
--
-- The new index is built before the old one goes, taking a SHARE lock on delivery_tasks meanwhile (claims and
-- results wait; the edge does not, the flush's task inserts do): on a large instance, migrate in a quiet
-- moment.
CREATE UNIQUE INDEX delivery_tasks_destination_event_rule ON delivery_tasks (destination_id, event_id, rule_id);
ALTER TABLE delivery_tasks DROP CONSTRAINT delivery_tasks_event_id_rule_id_destination_id_key;
