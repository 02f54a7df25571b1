-- Delivery bodies are kept as the exact bytes that were sent and received.
--
-- `request_body` and `response_body` were text, which cannot hold NUL (a captured UTF-8 JSON body with
-- "\u0000" decoded to one) or bytes that are not UTF-8: such a row failed its INSERT, and with it the whole
-- group commit of attempt results it was part of. As bytea every body is storable; the API shows a body as
-- text when it is UTF-8 and as base64 otherwise, with `request_body_encoding` / `response_body_encoding`
-- saying which (the way events show theirs with `body_encoding`).
--
-- Existing rows are converted as UTF-8, so each reads back as the text it was. Bodies that were not UTF-8
-- had been stored as their base64 text without a flag; they stay that text (no reliable way to tell them
-- apart from a body that was base64 to begin with).
--
-- Changing a column's type rewrites the table under an ACCESS EXCLUSIVE lock: on a large deliveries table,
-- run this migration in a quiet moment (delivery workers wait for it; nothing is lost meanwhile).
ALTER TABLE deliveries
    ALTER COLUMN request_body TYPE bytea USING convert_to(request_body, 'UTF8'),
    ALTER COLUMN response_body TYPE bytea USING convert_to(response_body, 'UTF8');
