-- `q`'s index keyed by endpoint (ADR 0057, amendment of 2026-12-03). The index of 0036 held each row's trigrams
-- alone, so a trigram's posting list held every endpoint's rows of the day: the index read of a page (one endpoint,
-- always) grew with the whole table, and a term the endpoint never holds still read every other endpoint's
-- matches. Its elements are now the trigrams prefixed by the endpoint's tag:
--
--   hy_search_keys(endpoint_id, t): left(md5(endpoint_id), 6) || g for every trigram g of t, made as
--   hy_search_grams makes them (three passes of regexp_replace and string_to_array), the tag written in by the
--   replacement itself. Every key is 9 characters; the pieces a U+0001 in t splits off, and each pass's tail, are
--   shorter, so a query (which asks for tag || trigram, trigrams with U+0001 left out: control.db.events) never
--   meets one. Two endpoints sharing a tag (one chance in 16.7M per pair) only read each other's candidates:
--   `endpoint_id = $1` and LIKE still decide.
--
-- The sweep builds it under new names, `<partition>_keys` for a finished day and `<partition>_keys_to_HHMMSS`
-- for today's prefix (control.db.partitions); a day's 0036 index (`_search`, `_search_to_*`) is dropped once its
-- new one is valid. Nothing is built here: until a day has its new index, q reads that day's endpoint rows, with
-- the same answers; `hookyard up` says so when it applies this to an existing data directory.
CREATE FUNCTION hy_search_keys(endpoint_id text, t text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT string_to_array(regexp_replace(t, '(...)', left(md5(endpoint_id), 6) || E'\\1\x01', 'g'), E'\x01')
        || string_to_array(regexp_replace(substr(t, 2), '(...)', left(md5(endpoint_id), 6) || E'\\1\x01', 'g'),
                           E'\x01')
        || string_to_array(regexp_replace(substr(t, 3), '(...)', left(md5(endpoint_id), 6) || E'\\1\x01', 'g'),
                           E'\x01')
$$;

-- Daily partitions of finished days that still lack a valid endpoint-keyed search index.
CREATE OR REPLACE FUNCTION hy_unindexed_search_partitions() RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'events'::regclass
       AND c.relname ~ '^events_[0-9]{8}$'
       AND to_date(substr(c.relname, 8), 'YYYYMMDD') < (now() AT TIME ZONE 'utc')::date
       AND NOT EXISTS (SELECT 1 FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
                        WHERE x.indrelid = c.oid AND ic.relname = c.relname || '_keys' AND x.indisvalid)
     ORDER BY 1
$$;
