"""POST /v1/transformations/test: a transform's dry run on a stored event or a given request."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import errors
from control.db.context import Context, Principal
from control.records.transforms import TransformTest, TransformTestResult
from control.service import transforms as service

__all__ = ("TransformController",)


class TransformController(Controller):
    path = "/transformations"
    tags = ("transformations",)

    @post(
        "/test",
        operation_id="TestTransformation",
        status_code=200,
        responses=errors(400, 401, 403, 404, 410, 429),
    )
    async def test_transformation(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], data: JSONBody[TransformTest]
    ) -> TransformTestResult:
        """Runs `transform` once, as a delivery would, and answers what it returned, without sending or
        storing anything: on the stored event `event_id` (with `destination_id`, as a delivery to that
        destination sees it: its URL's path and query, its headers), or on a `request` given here
        (`{method, path, query, headers, body}`).

        The answer is always 200 when the input is valid: `request` is what would be sent (null when the
        transform returned null, `skipped: true`, or failed), `error` says what went wrong (`message`, and
        the source `line` when known: a syntax error, a throw, a returned request that cannot be sent, or a
        limit: 1 s, 64 MB), `logs` holds `console.log` output (4 KB at most), and `duration_ms` the call's
        time. hookyard's own headers (its signature, `x-hookyard-*`) are added after the transform and are
        not shown."""
        return await service.test_transform(ctx, principal, data)
