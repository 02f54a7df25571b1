"""JSON nesting capped at ``MAX_DEPTH`` levels on every input: /v1 bodies and MCP arguments alike.

A body nested 20,000 deep made the decoders recurse until Python's limit (``RecursionError``: a 500), and
anything that walks a value afterwards (validation, encoding, a condition tree, a dry run's event) would
recurse as deep. No webhook payload or request record here needs more than a few dozen levels, so deeper
input is refused before it is decoded, with a 400 naming where it went too deep (the first field or two of
its path: ``request.body: nested deeper than 128 levels``). A captured webhook is stored as sent, however
deep; a transform never gets one deeper than the cap (``control.transform.apply``: that attempt's transform
fails, saying so).

The check of raw bytes costs nothing for the usual body: strings are cut out and the brackets counted in C
(``re``, ``bytes.translate``, ``itertools.accumulate``); only a body over the cap is walked in Python, to
name the field.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from shared.errors import ValidationError

__all__ = ("MAX_DEPTH", "check_bytes", "check_value", "exceeds", "too_deep")

MAX_DEPTH = 128
"""Levels of arrays and objects a JSON input may nest (the top-level object is level 1)."""

_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NAMED_LEVELS = 2


def _depth(body: bytes) -> int:
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH:
        return 0  # the usual body: too few brackets to be too deep
    brackets = _STRINGS.sub(b"", body).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _where(body: bytes) -> str:
    """The path (its first ``_NAMED_LEVELS`` keys) down to where ``body`` passes the cap."""
    path: list[str | None] = []  # a key per object level, None per array level
    expecting_key = False
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == 0x22:  # a string: a key when an object expects one
            match = _STRINGS.match(body, i)
            end = match.end() if match else n
            if expecting_key and path:
                path[-1] = body[i + 1 : end - 1].decode("utf-8", "replace")
            i = end
            continue
        if c in (0x7B, 0x5B):  # { [
            path.append("" if c == 0x7B else None)
            if len(path) > MAX_DEPTH:
                break
            expecting_key = c == 0x7B
        elif c in (0x7D, 0x5D):  # } ]
            if path:
                path.pop()
            expecting_key = False
        elif c == 0x2C:  # ,
            expecting_key = bool(path) and path[-1] is not None
        elif c == 0x3A:  # :
            expecting_key = False
        i += 1
    return _name(path)


def _name(keys: list[str | None]) -> str:
    named = []
    for key in keys[:-1]:  # the last level is the one too deep: its parent's key names it
        if not key:
            break
        named.append(key[:100])
        if len(named) == _NAMED_LEVELS:
            break
    return ".".join(named) or "body"


def too_deep(where: str) -> ValidationError:
    return ValidationError(f"{where}: nested deeper than {MAX_DEPTH} levels")


def exceeds(body: bytes) -> bool:
    """Whether ``body`` nests deeper than the cap: for input that is not refused but must not be decoded (a
    captured webhook, stored as sent, that a transform is about to get)."""
    return _depth(body) > MAX_DEPTH


def check_bytes(body: bytes) -> None:
    """``ValidationError`` naming the field when ``body`` (JSON, or anything) nests deeper than the cap."""
    if _depth(body) > MAX_DEPTH:
        raise too_deep(_where(body))


def check_value(value: Any, where: str = "body") -> None:
    """The same for a decoded value (an MCP tool's arguments), walked without recursion."""
    stack: list[tuple[Any, int, list[str]]] = [(value, 1, [])]
    while stack:
        item, level, keys = stack.pop()
        if isinstance(item, dict):
            children: Any = item.items()
        elif isinstance(item, list | tuple):
            children = ((None, child) for child in item)
        else:
            continue
        if level > MAX_DEPTH:
            raise too_deep(".".join(keys) or where)
        for key, child in children:
            if isinstance(child, dict | list | tuple):
                named = keys if key is None or len(keys) >= _NAMED_LEVELS or len(keys) < level - 1 else [*keys, key]
                stack.append((child, level + 1, named))
