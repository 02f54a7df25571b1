"""JavaScript transformations: sandbox processes (V8 through mini-racer) and the mapping of a request in and out.

- ``pool``: the sandbox processes a control plane or a worker calls, in fair shares per account; V8 never
  runs in the caller's process;
- ``child``: a sandbox process (OS limits, compiled transforms cached), the only place V8 runs;
- ``wire``: what crosses the pipe, the limits, and the check that what comes back is text;
- ``prelude``: the JavaScript that locks an isolate down, and the wrapper user code is compiled in;
- ``sandbox``: one transform compiled in its own isolate, called within the limits (1 s, 64 MB);
- ``apply``: a request to send as a transform sees it, and what it returns as a request to send.

Below the services and the deliver worker, above records: it knows nothing of the database.
"""
