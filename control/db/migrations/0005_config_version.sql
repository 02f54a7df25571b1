-- A configuration version per endpoint, bumped by the database itself on every change the edge or the
-- flush's routing reads.
--
-- Readers compare versions instead of waiting for notifications: the flush asks for the versions of a
-- batch's endpoints (one query, after the batch was read from the stream, so after every change whose 2xx
-- preceded its events) and reloads only what changed; control writes the edge's copy in Redis only over an
-- older version, so a stale writer (a sweep that read before a delete) can never roll it back.
--
-- Every bump is an UPDATE of the endpoint row, taken after its row lock: per endpoint, version order is
-- commit order. The lock is FOR NO KEY UPDATE (config_version is no key), which does not conflict with the
-- key-share locks the flush takes on endpoints and destinations, so a bump never waits on ingest.
-- A bump that finds no row (the endpoint is being deleted: its children go by cascade) is a no-op.

CREATE SEQUENCE hy_config_version;

ALTER TABLE endpoints ADD COLUMN config_version bigint NOT NULL DEFAULT nextval('hy_config_version');

-- Bumps the given endpoints, locking them in id order so two multi-endpoint bumps cannot deadlock.
CREATE FUNCTION hy_bump_config_versions(endpoint_ids text[]) RETURNS void
LANGUAGE sql AS $$
    UPDATE endpoints e SET config_version = nextval('hy_config_version')
      FROM (SELECT id FROM endpoints WHERE id = ANY(endpoint_ids) ORDER BY id FOR NO KEY UPDATE) locked
     WHERE e.id = locked.id
$$;

-- Statement level, over the transition table `changed` (the rows inserted, updated or deleted): one bump
-- per endpoint and statement, however many rows (a rule's destination list, a cascade).
CREATE FUNCTION hy_bump_config_version_of_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hy_bump_config_versions(ARRAY(SELECT DISTINCT endpoint_id FROM changed));
    RETURN NULL;
END $$;

-- rule_destinations has no endpoint_id: its rule's (or, when the rule is gone, its destination's) endpoint.
CREATE FUNCTION hy_bump_config_version_of_links() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hy_bump_config_versions(ARRAY(
        SELECT r.endpoint_id FROM rules r WHERE r.id IN (SELECT rule_id FROM changed)
        UNION
        SELECT d.endpoint_id FROM destinations d WHERE d.id IN (SELECT destination_id FROM changed)));
    RETURN NULL;
END $$;

-- Row level, for updates filtered by column (a trigger with a column list cannot have a transition table).
CREATE FUNCTION hy_bump_config_version_of_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hy_bump_config_versions(ARRAY[OLD.endpoint_id, NEW.endpoint_id]);
    RETURN NULL;
END $$;

-- Tables whose every row change matters: one trigger per event (a transition table allows only one).
DO $$
DECLARE
    t text;
    fn text;
BEGIN
    FOREACH t IN ARRAY ARRAY['rules', 'rule_destinations', 'auth_configs', 'allowlist_entries', 'label_rules',
                             'destinations'] LOOP
        fn := CASE t WHEN 'rule_destinations' THEN 'hy_bump_config_version_of_links'
                     ELSE 'hy_bump_config_version_of_rows' END;
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS changed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION %I()', t || '_insert_config_version', t, fn);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS changed '
                       'FOR EACH STATEMENT EXECUTE FUNCTION %I()', t || '_delete_config_version', t, fn);
        IF t <> 'destinations' THEN
            EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING NEW TABLE AS changed '
                           'FOR EACH STATEMENT EXECUTE FUNCTION %I()', t || '_update_config_version', t, fn);
        END IF;
    END LOOP;
END $$;

-- Destinations: the deliver worker updates their circuit-breaker columns after every attempt, which is no
-- configuration change; only what the API sets bumps.
CREATE TRIGGER destinations_update_config_version
    AFTER UPDATE OF endpoint_id, url, name, headers ON destinations
    FOR EACH ROW
    WHEN (ROW(OLD.endpoint_id, OLD.url, OLD.name, OLD.headers) IS DISTINCT FROM
          ROW(NEW.endpoint_id, NEW.url, NEW.name, NEW.headers))
    EXECUTE FUNCTION hy_bump_config_version_of_row();

-- The endpoint's own columns that the edge serves or routing reads (name and external_ref are neither).
CREATE FUNCTION hy_bump_own_config_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.config_version := nextval('hy_config_version');
    RETURN NEW;
END $$;

CREATE TRIGGER endpoints_config_version
    BEFORE UPDATE OF environment, expires_at, temporary, ingest_token, signing_secret ON endpoints
    FOR EACH ROW
    WHEN (ROW(OLD.environment, OLD.expires_at, OLD.temporary, OLD.ingest_token, OLD.signing_secret) IS DISTINCT FROM
          ROW(NEW.environment, NEW.expires_at, NEW.temporary, NEW.ingest_token, NEW.signing_secret))
    EXECUTE FUNCTION hy_bump_own_config_version();
