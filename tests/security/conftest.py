"""The security audit's cases (issue 23): each surface's promise, tried the way an attacker would.

The fixtures of ``tests/conftest.py`` (a fresh database and Redis prefix per test, accounts, the real-process
stack) serve these modules too; only what these cases alone need lives here.
"""
