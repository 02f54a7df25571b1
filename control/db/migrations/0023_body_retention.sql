-- Retention in three lifetimes (docs/adr/0040-body-retention-by-watermark.md): an endpoint may keep event
-- bodies shorter than the instance keeps events. After `body_retention_days` the sweep removes an event's
-- body and headers and its deliveries' request/response bodies and request headers; the event row and the
-- delivery records stay until the instance's retention drops the day's partition.
--
-- `body_expired_at` says the body was removed (the API shows `body: null, body_expired: true`, replay is a
-- 409) and `body_size` keeps the size the body had. `bodies_expired_before` is the sweep's watermark per
-- endpoint: every event received before it is expired, so a round reads only the events past it, in index
-- order, in short batches. Nullable columns without defaults: adding them touches no rows.
ALTER TABLE endpoints
    ADD COLUMN body_retention_days integer CHECK (body_retention_days IS NULL OR body_retention_days >= 1),
    ADD COLUMN bodies_expired_before timestamptz;
ALTER TABLE events
    ADD COLUMN body_expired_at timestamptz,
    ADD COLUMN body_size integer;
