-- The provider catalog (docs/adr/0054-provider-catalog.md).
--
--   auth_configs.provider      a catalog provider's own name (shared/providers/catalog.json): its scheme checks
--                              and its handshake is answered; null recognises the provider from the headers.
--   auth_configs.verify_token  what a provider echoes in a keyed GET challenge (Meta's hub.verify_token).
--   events.handshake           a handshake the edge answered: stored and shown, never routed or delivered.
--   endpoints.response         what the sender gets once its request is stored, when not the usual answer:
--                              {status (2xx), content_type, body} (docs/reference/endpoints.md).
--
-- Nullable, or with a constant default Postgres stores once: no table is rewritten, and rows written before
-- this read as "recognised from the headers" and "not a handshake".
ALTER TABLE auth_configs ADD COLUMN provider text, ADD COLUMN verify_token text;
ALTER TABLE events ADD COLUMN handshake boolean NOT NULL DEFAULT false;
ALTER TABLE endpoints ADD COLUMN response jsonb;
