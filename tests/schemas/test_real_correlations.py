"""Correlation candidates that rank, on the provider's real payloads (issue 26: every top-10 candidate scored
1.00, and a field that was always ``""`` ranked with 205 links, all on ``""``).

The 329 examples go through the real flush into one account; the answer is read through the service
function /v1 and MCP call. Scores differ and are the product of their stated parts; constant fields and
``""`` / ``0`` values are no candidates and link nothing."""

from __future__ import annotations

import itertools

import pytest

from control.db.context import Context
from control.schemas.correlate import LINKS_FULL
from control.service import schemas as service
from tests.schemas.real import by_event_type
from tests.schemas.support import learned, principal


async def test_candidates_rank_by_what_makes_a_key_join(ctx: Context, database_url: str) -> None:
    events = by_event_type()
    account_id, schemas = await learned(ctx, database_url, [(t, p) for t, ps in events.items() for p in ps])
    me = principal(account_id)
    answers = {t: (await service.schema_correlations(ctx, me, schemas[t])).candidates for t in events}

    # The examples come from a handful of test repositories and users: most id fields are constant in them.
    top = answers["issues"][:10]
    assert len(top) >= 5
    assert len({c.score for c in top}) >= 3, [(c.path, c.score) for c in top]  # they rank, not tie at 1.00
    assert [c.score for c in top] == sorted((c.score for c in top), reverse=True)
    assert top[0].path == "issue.node_id"  # the most varied, linked to other event types
    for a, b in itertools.pairwise(top):  # a tie is two fields alike in every part
        if a.score == b.score:
            assert (a.presence, a.cardinality, a.type_stability) == (b.presence, b.cardinality, b.type_stability)
    for event_type, found in answers.items():
        for c in found:
            assert c.distinct >= 2, (event_type, c.path)
            links = 0.5 + 0.5 * min(1.0, c.linked_event_types / LINKS_FULL)
            assert c.score == pytest.approx(c.presence * c.cardinality * c.type_stability * links, abs=2e-4)
            assert c.linked_event_types == len({link.schema_id for link in c.links} - {schemas[event_type]})
            assert 0 < c.cardinality <= 1
            assert c.type_stability in (1.0, 0.8, 0.5, 0.4)
    # ``gravatar_id`` (a user's, the sender's, an owner's...) is "" in every example: no candidate, no link.
    empty = {
        (t, f.path)
        for t in events
        for f in (await service.get_schema(ctx, me, schemas[t])).fields
        if f.path.endswith("gravatar_id") and "[]" not in f.path
    }
    assert len(empty) > 100
    for event_type, path in empty:
        assert path not in {c.path for c in answers[event_type]}
    linked = {(link.event_type, link.path) for found in answers.values() for c in found for link in c.links}
    assert not linked & empty
