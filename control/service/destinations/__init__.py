"""Destinations, the operations on them: create, read, change and delete one (``crud``), its auth and TLS
settings checked and shown (``auth``), its signing secret made and rotated (``signing``), disabled and enabled
by hand (``disable_enable``), and the one shape every operation shows it in (``view``)."""
