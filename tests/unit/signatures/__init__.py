"""shared.signatures, one module per part (scheme families, failure reasons, detection, signing, the MAC,
repeated headers). Every test runs through the compiled fast path and through the Python checks alone
(the autouse fixture in conftest.py). Pure unit tests: no servers."""
