-- `hookyard listen` records each forward it made as a delivery of source 'listen' (POST
-- /v1/events/{id}/forwards), so `hookyard tail`, the inbox and the deliveries list show what reached the local
-- app beside replays. The CHECK only gains a value: every stored row already satisfies the new one, so it is
-- added NOT VALID (no scan of the table under the lock); rows written from now on are checked as before.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_source_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_source_check
    CHECK (source IN ('rule', 'replay', 'manual_test', 'listen')) NOT VALID;
