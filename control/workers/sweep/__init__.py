"""The sweep loop (``loop``) and the housekeeping only it runs: removing expired temporary endpoints
(``expired_endpoints``) and what retention removes a batch at a time (``retention``)."""
