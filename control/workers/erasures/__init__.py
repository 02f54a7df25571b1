"""The erasures loop (``loop``) and the job it runs: moving an erasure one bounded step (``step``)."""
