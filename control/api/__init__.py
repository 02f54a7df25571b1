"""The HTTP surface: one module per resource, registered here and nowhere else."""

from __future__ import annotations

from typing import Self

from litestar import Router
from litestar.di import Provide

from control.api.alerts import AlertController, AlertDestinationController
from control.api.allowlist import AllowlistController, EndpointAllowlistController
from control.api.auth import bearer_auth
from control.api.auth_config import AuthConfigController
from control.api.deliveries import DeliveryController
from control.api.deps import provide_principal
from control.api.destinations import DestinationController, EndpointDestinationController
from control.api.endpoints import EndpointController
from control.api.erasures import EndpointErasureController, ErasureController
from control.api.events import EndpointEventController, EventController
from control.api.inbox.links import EndpointInboxLinkController
from control.api.labels import EndpointLabelController, LabelController
from control.api.no_body import refuse_unread_body
from control.api.query_names import UnknownQueryMiddleware
from control.api.replay import DestinationTestController, ReplayController
from control.api.retries import DeliveryRetryController, DeliveryRetryJobController, EndpointDeliveryRetryController
from control.api.rules import EndpointRuleController, RuleController
from control.api.schemas import EndpointSchemaController, SchemaController
from control.api.stats import EndpointStatsController
from control.api.transforms import TransformController
from control.api.trigger import EndpointTriggerController

__all__ = ("v1_router",)


class _OneOwnerRouter(Router):
    """A router made for the one app it is registered in (``v1_router`` makes a new one per call), so
    registering it need not copy it: Litestar deep-copies a Router it registers (one instance may be mounted
    under several owners), and that copy of every /v1 handler was a third of ``create_app``'s CPU, about 60 ms
    in every control plane worker's start (issue 44)."""

    def __deepcopy__(self, memo: dict[int, object]) -> Self:
        return self


def v1_router() -> Router:
    return _OneOwnerRouter(
        path="/v1",
        route_handlers=[
            EndpointController,
            AlertDestinationController,
            AlertController,
            EndpointInboxLinkController,
            EndpointEventController,
            EventController,
            EndpointErasureController,
            ErasureController,
            DeliveryController,
            EndpointDeliveryRetryController,
            DeliveryRetryController,
            DeliveryRetryJobController,
            AuthConfigController,
            EndpointAllowlistController,
            AllowlistController,
            EndpointDestinationController,
            DestinationController,
            EndpointRuleController,
            RuleController,
            EndpointLabelController,
            LabelController,
            EndpointStatsController,
            ReplayController,
            DestinationTestController,
            EndpointTriggerController,
            TransformController,
            SchemaController,
            EndpointSchemaController,
        ],
        middleware=[bearer_auth(), UnknownQueryMiddleware()],
        before_request=refuse_unread_body,
        dependencies={"principal": Provide(provide_principal, sync_to_thread=False)},
        security=[{"bearer": []}],
    )
