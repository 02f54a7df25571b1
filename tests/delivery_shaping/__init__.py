"""Issue 27: per-destination rate limit, FIFO ordering and deduplication, with real workers and sinks."""
