"""The headless browser of the inbox tests, for the transform editor's test."""

from tests.inbox_browser import browser  # noqa: F401 - a fixture, used by test_inbox_editor.py
