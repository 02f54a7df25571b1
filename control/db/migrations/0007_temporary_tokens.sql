-- Anonymous provisioning (POST /api/start, POST /api/register, the sweep's expiry).
--
-- A temporary token (hy_tmp_) lives as long as the temporary lifetime it was issued with (3 days): it is
-- shown in a browser and pasted into agent configurations, so it must not stay a credential for ever, not
-- even once its account registered (the account then has a live key). Live keys keep `expires_at` null.
-- Adding a nullable column without a default touches no rows.
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;

-- The sweep looks for anonymous accounts left without endpoints; only a few accounts are anonymous at a time.
CREATE INDEX accounts_anonymous ON accounts (id) WHERE kind = 'anonymous';
