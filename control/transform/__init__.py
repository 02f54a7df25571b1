"""JavaScript transformations: a sandbox (V8 through mini-racer) and the mapping of a request in and out.

- ``prelude``: the JavaScript that locks an isolate down, and the wrapper user code is compiled in;
- ``sandbox``: one transform compiled in its own isolate, called within the limits (1 s, 64 MB);
- ``apply``: a request to send as a transform sees it, and what it returns as a request to send.

Below the services and the deliver worker, above records: it knows nothing of the database.
"""
