"""Benchmarks: ``python -m bench NAME [--seconds N]``; each prints its figures as key=value on its last line."""
