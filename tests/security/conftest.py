"""Each surface's security promise, tried the way an attacker would.

The fixtures of ``tests/conftest.py`` (a fresh database and Redis prefix per test, accounts, the real-process
stack) serve these modules too; only what these cases alone need lives here.
"""
