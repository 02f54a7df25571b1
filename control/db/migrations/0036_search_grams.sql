-- `q` index-backed without pg_trgm (ADR 0057). The embedded Postgres (pgserver) ships no contrib modules, so the
-- trigram index of migration 0002 never existed there and `q` scanned. The search text's trigrams are now an
-- expression of built-in functions, indexed by GIN's built-in array operator class on any server:
--
--   hy_search_grams(t): every 3-character substring of t (in three passes: t, t from its 2nd character, from its
--   3rd, each cut into chunks of 3 by regexp_replace and split by string_to_array; the tail of each pass, shorter
--   than 3, comes along and is never asked for). A chunk holding the separator U+0001 is split apart, so a
--   trigram with U+0001 is missing: a query never asks for one (control.db.events.query_grams drops them).
--
-- IMMUTABLE so that it can be an index expression; a single SQL expression, so the planner inlines it in the
-- index and in the query alike. The indexes themselves are built by the sweep as before (control.db.partitions:
-- a finished day's full index, today's prefix), COLLATE "C" so that GIN sorts its keys by bytes (equality is the
-- same under any deterministic collation). Nothing is rebuilt here: a brought server's pg_trgm indexes of
-- finished days stay (LIKE still uses them) until retention drops their days; today's prefix index is rebuilt
-- the new way within the hour, and the embedded server's days are indexed by the next sweep.
CREATE FUNCTION hy_search_grams(t text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT string_to_array(regexp_replace(t, '(...)', E'\\1\x01', 'g'), E'\x01')
        || string_to_array(regexp_replace(substr(t, 2), '(...)', E'\\1\x01', 'g'), E'\x01')
        || string_to_array(regexp_replace(substr(t, 3), '(...)', E'\\1\x01', 'g'), E'\x01')
$$;

-- Daily partitions of finished days that still lack a valid search index: on every server now.
CREATE OR REPLACE FUNCTION hy_unindexed_search_partitions() RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'events'::regclass
       AND c.relname ~ '^events_[0-9]{8}$'
       AND to_date(substr(c.relname, 8), 'YYYYMMDD') < (now() AT TIME ZONE 'utc')::date
       AND NOT EXISTS (SELECT 1 FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
                        WHERE x.indrelid = c.oid AND ic.relname = c.relname || '_search' AND x.indisvalid)
     ORDER BY 1
$$;
