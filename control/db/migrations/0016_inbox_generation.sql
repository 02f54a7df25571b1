-- Inbox links and their page cookies are signed, not stored (control.service.inbox_links): nothing per link
-- to delete. This number is signed into every link and cookie of the endpoint, so raising it (POST
-- /v1/endpoints/{id}/inbox-link/rotate, the MCP tool rotate_inbox_links) revokes them all at once; that is
-- what makes a link valid for the whole life of a temporary endpoint (the inbox_url of /api/start)
-- acceptable. A column with a constant default is added without rewriting a row.
ALTER TABLE endpoints ADD COLUMN inbox_generation integer NOT NULL DEFAULT 0;
