"""POST /v1/events/{id}/replay and POST /v1/destinations/{id}/test against real loopback destinations;
re-signed requests are checked at the receiving end with the providers' own libraries."""
