-- instance_keys.secret holds a sealed value (control.keyring), like every other stored secret: a dump of the
-- database alone must not give away the key that signs inbox links and their cookies (issue 23, item 4).
--
-- Sealed values are text, so the column becomes text. A key stored before this migration becomes its base64
-- (clear text, which opens as itself): the same key, so links and cookies already handed out stay valid.
-- SQL never sees HOOKYARD_ENCRYPTION_KEYS, so the sealing itself is done by `hookyard migrate` right after
-- the SQL migrations (and by `hookyard up` on start, and `hookyard rotate-encryption-key`), which re-seal
-- every column listed in control/db/sealed.py. One row per deployment: the rewrite takes no time.
ALTER TABLE instance_keys
    ALTER COLUMN secret TYPE text USING replace(encode(secret, 'base64'), E'\n', '');
