-- Issue 17: hookyard's own signature on rule deliveries, and a resumable position in an endpoint's events.
--
-- Destinations get a Standard Webhooks signing secret of their own (`whsec_` + base64 of 32 random bytes;
-- existing rows get one here, from gen_random_uuid's strong random source) and `sign_deliveries`, which turns
-- the signature off. Stored as endpoint signing secrets are stored.
--
-- `events.stored_xid` is the id of the transaction that stored the event. `hookyard listen` resumes after the
-- last event it forwarded by (stored_xid, id): unlike received_at, it cannot be overtaken by a batch that
-- commits later, because a reader only moves past transactions older than its snapshot's xmin (all of them
-- finished). Added without a default first (no table rewrite; old rows stay null and are never followed),
-- then the default applies to new rows only.

-- A volatile default: every existing row gets its own secret (the table is rewritten once), and so does a row
-- inserted without one (the service always gives its own).
ALTER TABLE destinations ADD COLUMN signing_secret text NOT NULL DEFAULT ('whsec_' || encode(decode(
    replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''), 'hex'), 'base64'));
ALTER TABLE destinations ADD COLUMN sign_deliveries boolean NOT NULL DEFAULT true;

ALTER TABLE events ADD COLUMN stored_xid xid8;
ALTER TABLE events ALTER COLUMN stored_xid SET DEFAULT pg_current_xact_id();
CREATE INDEX events_endpoint_stored ON events (endpoint_id, stored_xid);
