"""Authenticating deliveries to their destination (``auth``, ``tls_ca``): one module per idea.

- ``headers``: the static kinds' headers, and their redaction in what is recorded;
- ``oauth2``: client-credentials tokens, fetched under the egress policy and cached;
- ``tls``: a destination's own CA and client certificate as an ``ssl.SSLContext``, and the checks on write;
- ``authenticator``: what a send to a destination takes, per (destination, version), and the send itself;
- ``material``: the destination's sealed ``auth`` and its ``tls_ca``, read and opened for a send.

The decisions: docs/adr/0059-destination-auth-signing-and-state.md.
"""
