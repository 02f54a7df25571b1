"""Transform tools: update a destination's JavaScript, and run one without sending anything."""

from __future__ import annotations

from typing import Annotated

import msgspec

from control.mcp.registry import Call, tool
from control.records.destinations import Destination, DestinationUpdate
from control.records.transforms import TransformSource, TransformTest, TransformTestResult
from control.service import transforms as service
from control.service.destinations import crud as destinations_service

DestinationId = Annotated[str, msgspec.Meta(description="The destination's id (`dst_` and a ULID)")]


class DestinationTransform(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    transform: (
        Annotated[
            TransformSource,
            msgspec.Meta(
                description="The new code (checked: it must compile and define `handler`), or null to remove it"
            ),
        ]
        | None
    )


@tool("TestTransformation", idempotent=True)
async def test_transformation(call: Call, data: TransformTest) -> TransformTestResult:
    """Dry-run a transform on a stored event (`event_id`, optionally as `destination_id` sees it) or on a
    given `request`; answers the request it returns, its logs and any error, sending nothing."""
    return await service.test_transform(call.ctx, call.principal, data)


@tool(idempotent=True)
async def update_destination_transform(
    call: Call, destination_id: DestinationId, data: DestinationTransform
) -> Destination:
    """Set (or with null remove) the JavaScript `handler(request, context)` every delivery to a destination
    runs through: it returns the request to send, any field changed, or null to skip the delivery.

    Test it first with `test_transformation`. Deliveries made from now on, and retries of earlier ones, run
    the new code."""
    update = DestinationUpdate(transform=data.transform)
    return await destinations_service.update_destination(call.ctx, call.principal, destination_id, update)
