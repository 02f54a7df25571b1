"""/v1/endpoints/{id}/destinations and /v1/destinations/{id}, one module per part: create (with its rule, in
one transaction) and its refusals; update and delete (rules losing a deleted destination); the config
version, 401/403/404 and tenant isolation."""
