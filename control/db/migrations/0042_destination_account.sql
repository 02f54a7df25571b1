-- A destination's account, copied from its endpoint (which never changes account), so that the deliver claim
-- reads each candidate's account from the destination it joins already (the share of a deliver worker per
-- account: docs/adr/0093-a-fair-share-of-the-deliver-loop.md). Joining endpoints per candidate instead cost the
-- claim ~30% more Postgres CPU per claimed task (bench/claim_window.py). A trigger fills it, so every way a
-- destination is made (the API, the CLI, tests' own rows) keeps it right without knowing of it.
ALTER TABLE destinations ADD COLUMN account_id text COLLATE "C";
UPDATE destinations d SET account_id = e.account_id FROM endpoints e WHERE e.id = d.endpoint_id;
ALTER TABLE destinations ALTER COLUMN account_id SET NOT NULL;

CREATE FUNCTION destinations_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.account_id := (SELECT account_id FROM endpoints WHERE id = NEW.endpoint_id);
    RETURN NEW;
END $$;

CREATE TRIGGER destinations_account BEFORE INSERT OR UPDATE OF endpoint_id ON destinations
    FOR EACH ROW EXECUTE FUNCTION destinations_account();
