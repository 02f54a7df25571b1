-- Header values that are not UTF-8 text are kept exactly.
--
-- `headers` is jsonb (string to string), and jsonb cannot hold NUL or bytes that are not UTF-8. A value that
-- is not UTF-8 text without NUL is stored in `headers` as the base64 of its raw bytes, and its name is listed
-- here (null when every value is text, the usual case), so the API can say which values are encoded
-- (`header_encodings`) and deliveries and replays can send the original bytes. Adding a nullable column
-- without a default touches no rows.
ALTER TABLE events ADD COLUMN headers_base64 text[];
