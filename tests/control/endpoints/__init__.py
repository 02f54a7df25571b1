"""/v1/endpoints: every route, its record shape and each error status docs/reference/endpoints.md lists for it,
one module per part: create, list and read; update and external_ref uniqueness; delete, tenant isolation and error
statuses."""
