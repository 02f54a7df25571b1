-- An event's path is stored as the sender wrote it after the ingest token, leading slash included: `/stripe`
-- for /h/<token>/stripe, `/` for the bare ingest URL. Before, the flush stored the edge's sub-path without
-- its slash (`stripe`, and `` for the bare URL), so the API, the inbox and rules on meta.path saw that form.
--
-- Rows written before are given their slash. A row already starting with `/` is left alone: written by a
-- flush of this version before this ran, or (the one ambiguous case) an old row of a sub-path that itself
-- began with a slash (/h/<token>//x, stored as `/x`), which keeps reading `/x`.
UPDATE events SET path = '/' || path WHERE path NOT LIKE '/%';

-- Rule leaves on meta.path, read the same way: `equals` / `not_equals` values get the slash their events got
-- (a value already starting with `/` matched only those ambiguous rows, and still does); a `regex` anchored
-- with `^` is anchored before the slash. `contains`, `exists` and unanchored patterns match as before.
-- Updating a rule bumps its endpoint's config_version (0005), so every flush reloads the new trees.
CREATE FUNCTION hy_slash_meta_path(node jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    value text;
BEGIN
    IF jsonb_typeof(node) <> 'object' THEN
        RETURN node;
    END IF;
    IF node ? 'children' AND jsonb_typeof(node -> 'children') = 'array' THEN
        RETURN jsonb_set(node, '{children}', COALESCE(
            (SELECT jsonb_agg(hy_slash_meta_path(child) ORDER BY n)
               FROM jsonb_array_elements(node -> 'children') WITH ORDINALITY AS c(child, n)),
            '[]'::jsonb));
    END IF;
    IF node ->> 'field' IS DISTINCT FROM 'meta.path' OR jsonb_typeof(node -> 'value') IS DISTINCT FROM 'string' THEN
        RETURN node;
    END IF;
    value := node ->> 'value';
    IF node ->> 'operator' IN ('equals', 'not_equals') AND value NOT LIKE '/%' THEN
        RETURN jsonb_set(node, '{value}', to_jsonb('/' || value));
    END IF;
    IF node ->> 'operator' = 'regex' AND value LIKE '^%' AND value NOT LIKE '^/%' THEN
        RETURN jsonb_set(node, '{value}', to_jsonb('^/' || substr(value, 2)));
    END IF;
    RETURN node;
END $$;

UPDATE rules SET condition_tree = hy_slash_meta_path(condition_tree)
 WHERE condition_tree::text LIKE '%"meta.path"%'
   AND condition_tree IS DISTINCT FROM hy_slash_meta_path(condition_tree);

DROP FUNCTION hy_slash_meta_path(jsonb);
