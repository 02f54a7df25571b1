"""A document's shell blocks and documented outputs, read the way a person reads them, and the shape check.

The conventions the README keeps (and ``test_readme.py`` holds it to):

- In a ```` ```sh ```` block a command runs on to the end of its line, or further while a quote is open or the
  line ends with ``\\``. ``#`` lines right under a command (no blank line between) are its documented output;
  a ``#`` line after a blank line, or at the top of a block, is prose.
- ``…`` stands for what differs from run to run. In an output, ``ep_01K…`` is a placeholder: its kind (the
  text up to its last ``_``, ``ep_``) must match, and what it stands for is captured, so a later command that
  writes ``ep_01K…`` gets the real id. A placeholder without a name (``dlv_…``) only matches. ``…`` alone is
  any value (``{…}``), any further keys of an object, any further items of a list.
- A documented JSON output (after an optional HTTP status: ``# 202 {…}``) is checked by shape: an object
  has the keys shown (exactly those, unless it shows ``…``), a list the items shown (in order and no more,
  unless it shows ``…``: then each shown item matches one of the actual ones), a string is equal (a date-time
  is any date-time; with ``…``, the pattern), a number is any number, ``true``, ``false`` and ``null`` are
  themselves. Text after the closing bracket is prose. A documented text output is a series of lines that
  appear in that order among the output's lines, with any digits where digits are shown and any spaces where
  spaces are.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = (
    "ELLIPSIS",
    "Command",
    "Mismatch",
    "Shape",
    "commands",
    "fenced_blocks",
    "placeholders",
    "text_lines_match",
)

ELLIPSIS = "…"
PLACEHOLDER = re.compile(r"[\w+\-]*…")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
_STATUS = re.compile(r"^\d{3} (?=[{\[])")


class Mismatch(AssertionError):
    """What differs, and where (a JSON path, or the documented line)."""


@dataclass
class Command:
    text: str
    outputs: list[str] = field(default_factory=list)
    line: int = 0
    """Line of the document the command starts on."""


def fenced_blocks(markdown: str, language: str = "sh") -> list[tuple[int, list[str]]]:
    """Each ```` ```{language} ```` block: the document line of its first line, and its lines."""
    blocks: list[tuple[int, list[str]]] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == f"```{language}":
            start, body = i + 2, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            blocks.append((start, body))
        i += 1
    return blocks


def _open_state(line: str, quote: str | None) -> tuple[str | None, bool]:
    """The quote still open at the end of ``line`` (given the one open at its start), and whether the line
    ends with an escaping backslash. A ``#`` starting a word outside quotes ends the line (a comment)."""
    i, escaped = 0, False
    while i < len(line):
        c = line[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
        elif c == "\\":
            if i == len(line) - 1:
                escaped = True
            i += 1
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            break
        i += 1
    return quote, escaped


def commands(lines: list[str], first_line: int = 1) -> list[Command]:
    """The commands of a block's lines, each with the output lines documented under it."""
    out: list[Command] = []
    attached = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            attached = False
            i += 1
            continue
        if line.lstrip().startswith("#"):
            if attached:
                text = line.lstrip()[1:]
                out[-1].outputs.append(text[1:] if text.startswith(" ") else text)
            i += 1
            continue
        start, quote, escaped, parts = i, None, False, []
        while i < len(lines):
            parts.append(lines[i])
            quote, escaped = _open_state(lines[i], quote)
            i += 1
            if quote is None and not escaped:
                break
        out.append(Command("\n".join(parts), line=first_line + start))
        attached = True
    return out


def placeholders(text: str) -> list[str]:
    """The named placeholders of ``text`` (``ep_01K…``, ``Xq3…``), in order; ``dlv_…`` and ``…`` are not."""
    return [token for token in PLACEHOLDER.findall(text) if _named(token)]


def _kind(token: str) -> str:
    return token[: token.rfind("_") + 1] if "_" in token else ""


def _named(token: str) -> bool:
    return len(token) - 1 > len(_kind(token))


def _regex(text: str, *, loose: bool) -> tuple[re.Pattern[str], list[tuple[str, str]]]:
    """``text`` as a pattern: each placeholder a group of its kind (its name and group name returned),
    digits and spaces any digits and spaces when ``loose``."""
    parts, groups, last = [], [], 0
    for n, found in enumerate(PLACEHOLDER.finditer(text)):
        parts.append(_literal(text[last : found.start()], loose))
        token = found.group()
        group = f"g{n}"
        parts.append(f"(?P<{group}>{re.escape(_kind(token))}.*?)")
        if _named(token):
            groups.append((token, group))
        last = found.end()
    parts.append(_literal(text[last:], loose))
    return re.compile("".join(parts), re.DOTALL), groups


def _literal(text: str, loose: bool) -> str:
    if not loose:
        return re.escape(text)
    out = []
    for piece in re.split(r"(\d+|\s+)", text):
        if not piece:
            continue
        out.append(r"\d+" if piece.isdigit() else r"\s+" if piece.isspace() else re.escape(piece))
    return "".join(out)


def _capture(pattern: str, actual: str, loose: bool, binds: dict[str, str], where: str) -> None:
    regex, groups = _regex(pattern, loose=loose)
    found = regex.fullmatch(actual)
    if found is None:
        raise Mismatch(f"{where}: {actual!r} does not match {pattern!r}")
    for name, group in groups:
        value = found.group(group)
        if binds.get(name, value) != value:
            raise Mismatch(f"{where}: {name} is {value!r} here but {binds[name]!r} in the same output")
        binds[name] = value


# -- documented JSON ---------------------------------------------------------------------------------------


class _Any:
    pass


@dataclass
class _Obj:
    members: dict[str, Any]
    more: bool


@dataclass
class _Arr:
    items: list[Any]
    more: bool


@dataclass
class _Num:
    pass


class _Reader:
    """JSON with ``…`` allowed as a member, an item or a value."""

    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0

    def skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def peek(self) -> str:
        self.skip()
        return self.text[self.i : self.i + 1]

    def take(self, expected: str) -> None:
        if self.peek() != expected:
            raise ValueError(f"expected {expected!r} at {self.text[self.i : self.i + 30]!r}")
        self.i += 1

    def value(self) -> Any:
        c = self.peek()
        if c == "{":
            return self.container("}", self.member)
        if c == "[":
            return self.container("]", self.value)
        if c == ELLIPSIS:
            self.i += 1
            return _Any()
        if c == '"':
            decoded, end = json.JSONDecoder().raw_decode(self.text, self.i)
            self.i = end
            return decoded
        found = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?|true|false|null").match(self.text, self.i)
        if found is None:
            raise ValueError(f"no JSON value at {self.text[self.i : self.i + 30]!r}")
        self.i = found.end()
        word = found.group()
        return {"true": True, "false": False, "null": None}.get(word, _Num())

    def member(self) -> tuple[str, Any]:
        key = self.value()
        if not isinstance(key, str):
            raise ValueError(f"an object key must be a string, near {self.text[self.i : self.i + 30]!r}")
        self.take(":")
        return key, self.value()

    def container(self, close: str, item: Any) -> _Obj | _Arr:
        self.i += 1
        items, more = [], False
        while self.peek() != close:
            if self.peek() == ELLIPSIS:
                self.i += 1
                more = True
            else:
                items.append(item())
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != close:
                raise ValueError(f"expected , or {close} at {self.text[self.i : self.i + 30]!r}")
        self.i += 1
        return _Obj(dict(items), more) if close == "}" else _Arr(items, more)


class Shape:
    """A documented JSON output; ``match`` checks an actual answer against it, capturing placeholders."""

    def __init__(self, documented: str) -> None:
        text = _STATUS.sub("", documented.lstrip(), count=1)
        reader = _Reader(text)
        self.doc = reader.value()
        self.prose = text[reader.i :].strip()

    @staticmethod
    def applies(outputs: list[str]) -> bool:
        return bool(outputs) and _STATUS.sub("", outputs[0].lstrip(), count=1)[:1] in "{["

    @property
    def is_error(self) -> bool:
        return isinstance(self.doc, _Obj) and "error" in self.doc.members

    def match(self, actual: Any, binds: dict[str, str]) -> dict[str, str]:
        """The placeholders this answer gives (merged into a copy of ``binds``); Mismatch if it does not fit."""
        found: dict[str, str] = {}
        _match(self.doc, actual, "$", found)
        return {**binds, **found}


def _match(doc: Any, actual: Any, where: str, found: dict[str, str]) -> None:
    if isinstance(doc, _Any):
        return
    if isinstance(doc, _Obj):
        if not isinstance(actual, dict):
            raise Mismatch(f"{where}: an object was documented, got {actual!r:.200}")
        for key, value in doc.members.items():
            if key not in actual:
                raise Mismatch(f"{where}: no key {key!r} (has {sorted(actual)})")
            _match(value, actual[key], f"{where}.{key}", found)
        extra = set(actual) - set(doc.members)
        if extra and not doc.more:
            raise Mismatch(f"{where}: keys {sorted(extra)} are not documented (write … for more keys)")
        return
    if isinstance(doc, _Arr):
        if not isinstance(actual, list):
            raise Mismatch(f"{where}: a list was documented, got {actual!r:.200}")
        if not doc.more:
            if len(actual) != len(doc.items):
                raise Mismatch(f"{where}: {len(doc.items)} items documented, got {len(actual)}: {actual!r:.300}")
            for n, (item, value) in enumerate(zip(doc.items, actual, strict=True)):
                _match(item, value, f"{where}[{n}]", found)
            return
        for n, item in enumerate(doc.items):
            errors = []
            for value in actual:
                trial = dict(found)
                try:
                    _match(item, value, f"{where}[{n}]", trial)
                except Mismatch as exc:
                    errors.append(str(exc))
                    continue
                found.update(trial)
                break
            else:
                raise Mismatch(f"{where}: no item matches documented item {n} ({'; '.join(errors[:3]) or 'empty'})")
        return
    if isinstance(doc, _Num):
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            raise Mismatch(f"{where}: a number was documented, got {actual!r}")
        return
    if isinstance(doc, str):
        if not isinstance(actual, str):
            raise Mismatch(f"{where}: a string was documented, got {actual!r:.200}")
        if ELLIPSIS in doc:
            _capture(doc, actual, True, found, where)
        elif _TIMESTAMP.fullmatch(doc):
            if not _TIMESTAMP.fullmatch(actual):
                raise Mismatch(f"{where}: a date-time was documented, got {actual!r}")
        elif actual != doc:
            raise Mismatch(f"{where}: {doc!r} was documented, got {actual!r:.200}")
        return
    if actual is not doc:
        raise Mismatch(f"{where}: {doc!r} was documented, got {actual!r:.200}")


def text_lines_match(documented: list[str], actual: str, binds: dict[str, str]) -> tuple[int, dict[str, str]]:
    """How many of the documented lines appear, in order, among ``actual``'s lines, and what they capture;
    a line that is only ``…`` stands for any lines."""
    lines = [line.strip() for line in actual.splitlines()]
    found: dict[str, str] = {}
    at, done = 0, 0
    for doc in documented:
        doc = doc.strip()
        if doc == ELLIPSIS:
            done += 1
            continue
        for n in range(at, len(lines)):
            trial = dict(found)
            try:
                _capture(doc, lines[n], True, trial, f"line {n + 1}")
            except Mismatch:
                continue
            found, at, done = trial, n + 1, done + 1
            break
        else:
            break
    return done, {**binds, **found}
