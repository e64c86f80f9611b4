"""The RuntimeSource jobdash hands the core: objects jobs refer to (a TrainJob's
TrainingRuntime or ClusterTrainingRuntime), read from the cluster through the gateway,
only when a submitted job refers to one (the web otherwise never talks to the cluster)."""

from collections.abc import Callable, Mapping
from typing import Any

from queueing.workload import REFERENCED

from .gateway import ClusterGateway, GatewayError


class RuntimeUnreadable(Exception):
    """The cluster could not be asked (down, refused): the submission should be retried."""


class GatewayRuntimes:
    def __init__(self, gateway: Callable[[], ClusterGateway]):
        self._make_gateway = gateway
        self._gateway: ClusterGateway | None = None

    def runtime(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        referenced = REFERENCED.get(kind)
        if referenced is None:
            return None
        if self._gateway is None:
            self._gateway = self._make_gateway()
        try:
            return self._gateway.read_object(
                referenced.api_version, referenced.plural, namespace if referenced.namespaced else "", name
            )
        except GatewayError as error:
            raise RuntimeUnreadable(f"cannot read {kind} {name!r} from the cluster: {error}") from error


def from_settings() -> GatewayRuntimes:
    return GatewayRuntimes(_gateway_from_settings)


def _gateway_from_settings() -> ClusterGateway:
    """Imported when first needed: a process that never asks the cluster (the web, for
    almost every submission) never loads the Kubernetes client."""
    from .factory import gateway_from_settings

    return gateway_from_settings()
