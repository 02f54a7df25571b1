"""The headless browser of the inbox tests, for the transform editor's and the crashed transform's tests."""

from tests.inbox_browser import browser  # noqa: F401 - a fixture, used by test_inbox_editor.py and test_inbox_crash.py
