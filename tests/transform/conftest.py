"""The headless browser of the inbox tests, for the transform editor's test."""

from tests.e2e.test_inbox_browser import browser  # noqa: F401 - a fixture, used by test_inbox_editor.py
