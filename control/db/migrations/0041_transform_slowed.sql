-- A destination whose transform keeps being stopped by a limit, so the deliver worker's sandbox pool waits
-- before each next call (control.transform.pool's strikes): since when, and the wait per call now. Written by
-- the worker when that changes (control.delivery.transforms), cleared when a call ends normally or its code
-- changes (a PATCH clears both). Each worker slows on its own counts: the last one to write is shown.
ALTER TABLE destinations
    ADD COLUMN transform_slowed_at timestamptz,
    ADD COLUMN transform_slowed_s real;
