"""Condition trees (control.routing.conditions), one module per part: operators, groups and compilation,
text form, validation, and properties over arbitrary JSON and events."""
