-- One trace per webhook (docs/adr/0061-one-trace-per-webhook.md): what the later spans of an event need to be
-- in its trace travels with it, as the W3C `traceparent` text of the span they are children of.
--
--   events.traceparent          the edge's ingest span (or, when the edge does not trace, the flush's routing
--                               span of the event): a replay's span is its child; the API shows its trace id.
--   delivery_tasks.traceparent  the routing span that made the task (a retry by hand: the retry's span): each
--                               attempt's span is its child. Null: the attempt follows the event's.
--   deliveries.trace_id/span_id the attempt's own span, when it was recorded (sampled).
--   destinations.propagate_trace whether deliveries carry the attempt's `traceparent` header (default true).
--
-- All nullable without a default but the last, whose constant default Postgres stores once: no table is
-- rewritten, and rows written before this read as "not traced".
ALTER TABLE events ADD COLUMN traceparent text;
ALTER TABLE delivery_tasks ADD COLUMN traceparent text;
ALTER TABLE deliveries ADD COLUMN trace_id text, ADD COLUMN span_id text;
ALTER TABLE destinations ADD COLUMN propagate_trace boolean NOT NULL DEFAULT true;
