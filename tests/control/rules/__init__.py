"""/v1/endpoints/{id}/rules and /v1/rules/{id}, one module per part: create and its refusals, update and
delete, what the flush worker reads (config version, races), and access (401/403/404, tenant isolation)."""
