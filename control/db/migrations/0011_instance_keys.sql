-- Keys of the deployment itself, by purpose: today the one that signs inbox links and their cookies
-- (control.service.inbox_links). Made on first use by whichever control process needs it first, so every
-- process of a deployment signs and checks with the same key without a setting to share. Deleting a row
-- revokes everything signed with it (each process reads the key again after a restart).
CREATE TABLE instance_keys (
    name       text PRIMARY KEY,
    secret     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
