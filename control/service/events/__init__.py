"""Captured events, the operations on them: the filters, the newest-first list, the latest match, one
event and the plain long poll (``read``); the long poll with a position that ``hookyard listen`` and
``tail`` follow (``follow``)."""
