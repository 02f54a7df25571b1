"""Retrying deliveries: POST /v1/deliveries/{id}/retry and the bulk job of POST /v1/endpoints/{id}/deliveries/retry,
against real loopback destinations with the deliver and retries loops running in process; one module for a
single delivery, one for the bulk job."""
