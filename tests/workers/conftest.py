"""The flush worker in process against the real ingest stream and Postgres: storage, poison and dead letters,
routing into delivery tasks, and the counters behind /v1 stats."""
