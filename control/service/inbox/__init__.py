"""The inbox page's operations: its data (events, alerts, replay targets) and its destinations, narrowed
to the page's endpoint; its signed links are credentials, beside the callers (``control.service.inbox_links``)."""
