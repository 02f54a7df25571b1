"""Where what is learned from the provider's published examples says required or optional, and where the
provider's own published JSON Schema (``@octokit/webhooks-schemas``, same release as the examples) says it:
the count of agreements, and each kind of disagreement, explained by the examples themselves.

The provider's schema is per event and action; a learned schema is per event type, over the actions its
samples had. So the provider's word on a field is taken over the same actions: required when every object
its parent can be (each action's, each ``oneOf`` branch's) requires it; optional when one of them allows it
missing or does not declare it; undeclared when none declares it. Array items' own paths (``a[]``) are not
fields anyone calls optional, and are left out.

The kinds of disagreement, each checked against the examples:

- ``learned optional, provider required``: some example lacks the field where its parent is: that example
  does not validate against the provider's own schema (checked with ``jsonschema_rs``, draft-07, formats not
  asserted as draft-07 leaves them: the same 52 invalid examples as ``jsonschema`` found, in 0.3 s of CPU
  instead of 2.3, most of this test's);
- ``learned required, provider optional``: every example that had the parent had the field (the absence the
  provider allows never occurs in its own examples);
- ``undeclared``: the examples carry a field the provider's schema does not declare: where the parent is
  closed (``additionalProperties: false``), those examples do not validate either; where it is an object
  the provider leaves open (untyped metadata), or the field is under such an undeclared parent, they do.

``test_agreement_is_counted_and_every_disagreement_explained`` prints the counts (``pytest -s``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import jsonschema_rs

from control.schemas.shape import split_path
from control.schemas.state import fields
from tests.schemas.real import by_event_type, expected, provider_schema
from tests.schemas.test_learned_presence import learn

_View = dict[str, Any]


def _defs() -> dict[str, Any]:
    return provider_schema()["definitions"]


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = _defs()[node["$ref"].rsplit("/", 1)[-1]]
    return node


def _combine(a: _View, b: _View) -> _View:
    properties = {k: list(v) for k, v in a["properties"].items()}
    for k, v in b["properties"].items():
        properties.setdefault(k, []).extend(v)
    return {
        "properties": properties,
        "required": a["required"] | b["required"],
        "object": a["object"] or b["object"],
        "closed": a["closed"] or b["closed"],
        "items": a["items"] + b["items"],
    }


def views(node: dict[str, Any]) -> list[_View]:
    """What a schema node can be, each as one view: its properties (key → subschemas), required keys, whether
    it is an object, whether it is closed (``additionalProperties: false``), its items' schemas."""
    node = _resolve(node)
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else types
    base: _View = {
        "properties": {k: [v] for k, v in node.get("properties", {}).items()},
        "required": set(node.get("required", [])),
        "object": "object" in types or "properties" in node,
        "closed": node.get("additionalProperties") is False,
        "items": [node["items"]] if isinstance(node.get("items"), dict) else [],
    }
    out = [base]
    for part in node.get("allOf", []):
        out = [_combine(view, other) for view in out for other in views(part)]
    branches = [view for key in ("oneOf", "anyOf") for branch in node.get(key, []) for view in views(branch)]
    if branches:
        out = [_combine(view, branch) for view in out for branch in branches]
    return out


def _roots(event_type: str, payloads: list[dict[str, Any]]) -> list[_View]:
    defs = _defs()
    if f"{event_type}$event" in defs:
        return views(defs[f"{event_type}$event"])
    actions = {p.get("action") for p in payloads}
    named = [defs[f"{event_type}${a}"] for a in sorted(actions) if f"{event_type}${a}" in defs]
    return [v for node in named for v in views(node)] or views(defs[f"{event_type}_event"])


def provider_says(roots: list[_View], path: str) -> str:
    """``required``, ``optional``, ``undeclared, parent closed`` (``additionalProperties: false``), ``undeclared,
    parent open`` (an object the provider leaves untyped) or ``under undeclared`` (its parent is not declared)."""
    parents = roots
    steps = split_path(path)
    for i, (key, levels) in enumerate(steps):
        objects = [v for v in parents if v["object"]]
        declaring = [v for v in objects if key in v["properties"]]
        if i == len(steps) - 1:
            if not declaring:
                return "undeclared, parent closed" if all(v["closed"] for v in objects) else "undeclared, parent open"
            return "required" if all(key in v["required"] for v in objects) else "optional"
        if not declaring:
            return "under undeclared"
        parents = [view for v in declaring for node in v["properties"][key] for view in views(node)]
        for _ in range(levels):
            parents = [view for v in parents for node in v["items"] for view in views(node)]
    raise AssertionError(path)


def _invalid() -> set[int]:
    """``id`` of each example that does not validate against the provider's schema of its event."""
    definitions = provider_schema()["definitions"]
    out = set()
    for event_type, payloads in by_event_type().items():
        name = f"{event_type}$event" if f"{event_type}$event" in definitions else f"{event_type}_event"
        schema = {"definitions": definitions, "$ref": f"#/definitions/{name}"}
        validator = jsonschema_rs.Draft7Validator(schema, validate_formats=False)
        out.update(id(p) for p in payloads if not validator.is_valid(p))
    return out


def _parents(payload: Any, path: str) -> list[dict[str, Any]]:
    """Every object the field hangs from in the payload (through arrays' items)."""
    steps = split_path(path)
    nodes = [payload]
    for key, levels in steps[:-1]:
        nodes = [n[key] for n in nodes if isinstance(n, dict) and key in n]
        for _ in range(levels):
            nodes = [item for n in nodes if isinstance(n, list) for item in n]
    return [n for n in nodes if isinstance(n, dict)]


def _lacking(payloads: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """The payloads where one of the field's parents is there without it."""
    key = split_path(path)[-1][0]
    return [p for p in payloads if any(key not in parent for parent in _parents(p, path))]


def test_agreement_is_counted_and_every_disagreement_explained() -> None:
    invalid = _invalid()
    counts: Counter[str] = Counter()
    few: Counter[bool] = Counter()  # of the fields learned required where the provider allows absence
    examples: dict[str, list[str]] = {}
    for event_type, payloads in by_event_type().items():
        roots = _roots(event_type, payloads)
        reference = expected(payloads)
        for f in fields(learn(payloads)):
            path = f["path"]
            if path.endswith("[]"):
                continue
            says = provider_says(roots, path)
            learned = "optional" if f["optional"] else "required"
            if says.startswith(("undeclared", "under")):
                kind = says
                carriers = [p for p in payloads if _has(p, path)]
                assert carriers, path
                if says == "undeclared, parent closed":  # the examples carrying it break the provider's schema
                    assert all(id(p) in invalid for p in carriers), (event_type, path)
            elif says == learned:
                kind = f"agree ({learned})"
            elif learned == "optional":
                kind = "learned optional, provider required"
                lacking = _lacking(payloads, path)  # the examples without it break the provider's own schema
                assert lacking, (event_type, path)
                assert all(id(p) in invalid for p in lacking), (event_type, path)
            else:
                kind = "learned required, provider optional"
                assert reference.absent[path] == 0, (event_type, path)  # never missing where its parent was
                few[reference.looked[path] <= 3] += 1
            counts[kind] += 1
            examples.setdefault(kind, []).append(f"{event_type}:{path}")
    total = sum(counts.values())
    print(f"\n{total} learned fields (array item paths left out) of 58 event types:")
    for kind, n in counts.most_common():
        print(f"  {kind}: {n} ({n / total:.1%}); e.g. {', '.join(examples[kind][:3])}")
    print(f"  (learned required, provider optional: {few[True]} of them looked at in at most 3 samples)")
    print(f"  examples that do not validate against the provider's schema: {len(invalid)} of 329")
    declared = total - sum(n for kind, n in counts.items() if kind.startswith(("undeclared", "under")))
    agreed = counts["agree (required)"] + counts["agree (optional)"]
    assert agreed / declared > 0.9


def _has(payload: Any, path: str) -> bool:
    """Whether the field is anywhere in the payload (through arrays' items)."""
    nodes = [payload]
    for key, levels in split_path(path):
        nodes = [n[key] for n in nodes if isinstance(n, dict) and key in n]
        for _ in range(levels):
            nodes = [item for n in nodes if isinstance(n, list) for item in n]
    return bool(nodes)
