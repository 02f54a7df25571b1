-- One label rule per key on an endpoint: an event's labels are {key, value} pairs that conditions read as
-- meta.label.<key>, so two rules writing one key would make both ambiguous. The API refuses a duplicate
-- with a 400 naming output_key; this index is what makes that check race-free.
CREATE UNIQUE INDEX label_rules_endpoint_key ON label_rules (endpoint_id, output_key);
