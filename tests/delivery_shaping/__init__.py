"""Per-destination rate limit, FIFO ordering and deduplication, with real workers and sinks."""
