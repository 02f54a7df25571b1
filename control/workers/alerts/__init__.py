"""The alerts loop (``loop``) and the jobs it runs: evaluating the alert conditions (``evaluator``, which
reads the edges' signature refusals through ``signature_refusals``) and sending the due alerts (``sender``)."""
