-- Delivery tasks keep their cascade but lose their per-row foreign-key checks.
--
-- The flush inserts one task per routed event, in the statement that inserts the events. A foreign key
-- checks every inserted row with its own query against the parent (and locks the parent row again): the
-- two keys of delivery_tasks were about a fifth of the flush's Postgres CPU with a forward-all rule.
-- Every statement that inserts tasks (control/db/flush.py, control/db/tasks.py) already joins the
-- destination locked FOR KEY SHARE and of the task's own endpoint, so a task can only point at a live
-- destination of its endpoint; a destination deleted meanwhile is skipped, one being deleted waits for the
-- insert's commit.
--
-- What the keys did on delete is kept: deleting a destination deletes its tasks (this trigger, one
-- statement per deleting statement), and deleting an endpoint deletes its destinations (their own key)
-- and so its tasks. The trigger's DELETE runs after the destination rows are gone and, under READ
-- COMMITTED, sees tasks committed by a flush it waited for.
ALTER TABLE delivery_tasks DROP CONSTRAINT delivery_tasks_endpoint_id_fkey;
ALTER TABLE delivery_tasks DROP CONSTRAINT delivery_tasks_destination_id_fkey;

CREATE FUNCTION hy_delete_destination_tasks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM delivery_tasks t USING gone_destinations g WHERE t.destination_id = g.id;
    RETURN NULL;
END $$;

CREATE TRIGGER destinations_delete_tasks
    AFTER DELETE ON destinations
    REFERENCING OLD TABLE AS gone_destinations
    FOR EACH STATEMENT EXECUTE FUNCTION hy_delete_destination_tasks();
