-- Destinations as users run them (issue 46; docs/adr/0059-destination-auth-signing-and-state.md).

-- Authentication to the destination. auth_sealed holds the whole configuration (secrets included) sealed
-- by the service layer (control.service.sealed, ADR 0027): SQL never sees it in clear. auth_shown is what
-- the API shows of it (its type and the fields that are not secret: username, token_url, client_id, the
-- client certificate's subject and expiry). tls_ca is a PEM bundle of CA certificates (public material).
-- auth_version changes with every write of either: a deliver worker keeps what it built per version and
-- loads the sealed material only for a version it has not seen (claims carry the version, not the secrets).
ALTER TABLE destinations
    ADD COLUMN auth_type text
        CHECK (auth_type IN ('basic', 'bearer', 'header', 'oauth2_client_credentials', 'mtls')),
    ADD COLUMN auth_shown jsonb,
    ADD COLUMN auth_sealed text,
    ADD COLUMN tls_ca text,
    ADD COLUMN auth_version text,
    ADD CONSTRAINT destinations_auth_whole CHECK ((auth_type IS NULL) = (auth_sealed IS NULL));

-- Signing: an Ed25519 destination keeps its secret key (whsk_) sealed in signing_secret, as HMAC ones keep
-- their whsec_, and its public key (whpk_) in clear. A rotation with overlap keeps the previous secret
-- (sealed) until previous_secret_expires_at; deliveries carry both signatures until then.
ALTER TABLE destinations
    ADD COLUMN signing_public_key text,
    ADD COLUMN previous_signing_secret text,
    ADD COLUMN previous_public_key text,
    ADD COLUMN previous_secret_expires_at timestamptz;

-- Gone means gone: a disabled destination gets nothing; its tasks are held (status 'held': no attempt,
-- no circuit, out of the due index) until it is enabled again.
ALTER TABLE destinations
    ADD COLUMN state text NOT NULL DEFAULT 'enabled' CHECK (state IN ('enabled', 'disabled')),
    ADD COLUMN disabled_reason text,
    ADD COLUMN disabled_at timestamptz,
    ADD COLUMN disabled_by text CHECK (disabled_by IN ('gone', 'api'));
CREATE INDEX destinations_disabled ON destinations (id) WHERE state = 'disabled';

ALTER TABLE delivery_tasks DROP CONSTRAINT delivery_tasks_status_check;
ALTER TABLE delivery_tasks ADD CONSTRAINT delivery_tasks_status_check
    CHECK (status IN ('pending', 'in_flight', 'succeeded', 'failed', 'held')) NOT VALID;
ALTER TABLE delivery_tasks VALIDATE CONSTRAINT delivery_tasks_status_check;
CREATE INDEX delivery_tasks_held ON delivery_tasks (destination_id) WHERE status = 'held';

-- What authentication did on an attempt (an OAuth2 token fetched, and why): never the token itself.
ALTER TABLE deliveries ADD COLUMN auth jsonb;
