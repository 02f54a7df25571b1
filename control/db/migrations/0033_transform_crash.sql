-- A destination whose transform ended its sandbox process (a V8 fatal error, memory past the OS limit, a
-- signal): when, and what the process said. Its deliveries are not run through it again until its code
-- changes (a PATCH clears both) or a retry of one of its deliveries asks for it (control.service.retries).
ALTER TABLE destinations
    ADD COLUMN transform_crashed_at timestamptz,
    ADD COLUMN transform_crash text;
