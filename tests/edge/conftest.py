"""The edge (``edge/``): the raw ASGI app in process against the test Redis, its pipelining RESP connection, its
endpoint config cache and what control writes for it, the redis-py cluster internals it routes by, and one
real ``hookyard edge`` process as providers meet it."""
