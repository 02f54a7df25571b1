"""The live inbox page: its shell, its data routes, its destinations and its signed links."""
