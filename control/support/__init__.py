"""What the operations, the jobs and the front doors share and none of them is: helpers and infrastructure.

Not an operation: nothing here is called by a /v1 handler or an MCP tool as a use case of its own (those are
``control.service``), and nothing here runs a job on a loop (those are ``control.workers``). Here are the
pieces several of them need: sealing secrets at rest, the edge's config in Redis, the dead-letter streams,
metrics, long-poll wakeups, rate-limit buckets, strict request decoding, cursors, body display, text checks,
the activity lines ``hookyard up`` prints (written by the flush and by delivery attempts).
It sits below ``control.delivery`` and above ``control.db``, so every layer that needs a piece can import it,
and it imports no operation, job or front door (import-linter's layers contract, pyproject.toml).
"""
