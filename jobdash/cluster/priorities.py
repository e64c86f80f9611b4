"""Kubernetes PriorityClasses (scheduling.k8s.io/v1), read through the gateway only when a
submission names one (the web otherwise never talks to the cluster): a job's priority is
its class's value."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .gateway import ClusterGateway, GatewayError

API_VERSION = "scheduling.k8s.io/v1"
PLURAL = "priorityclasses"


class PriorityClassUnreadable(Exception):
    """The cluster could not be asked (down, refused): the submission should be retried."""


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    description: str = ""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> "PriorityClass":
        value = obj.get("value")
        return cls(
            name=str(obj["metadata"]["name"]),
            value=value if isinstance(value, int) and not isinstance(value, bool) else 0,
            description=str(obj.get("description") or ""),
        )

    def __str__(self) -> str:
        return f"{self.name!r} ({self.value})"


class GatewayPriorities:
    """Classes by name, each read once per instance (one is built per submission)."""

    def __init__(self, gateway: Callable[[], ClusterGateway]):
        self._make_gateway = gateway
        self._gateway: ClusterGateway | None = None
        self._read: dict[str, PriorityClass | None] = {}

    def _cluster(self) -> ClusterGateway:
        if self._gateway is None:
            try:
                self._gateway = self._make_gateway()
            except Exception as error:  # no kubeconfig, an unreadable one: the cluster cannot be asked
                raise GatewayError(f"no cluster client: {error}") from error
        return self._gateway

    def get(self, name: str) -> PriorityClass | None:
        """The class of that name, or None when the cluster has none."""
        if name not in self._read:
            try:
                obj = self._cluster().read_object(API_VERSION, PLURAL, "", name)
            except GatewayError as error:
                raise PriorityClassUnreadable(
                    f"cannot read PriorityClass {name!r} from the cluster: {error}"
                ) from error
            self._read[name] = None if obj is None else PriorityClass.from_object(obj)
        return self._read[name]

    def all(self) -> list[PriorityClass]:
        """Every class, lowest value first."""
        try:
            objects = self._cluster().list_objects(API_VERSION, PLURAL)
        except GatewayError as error:
            raise PriorityClassUnreadable(f"cannot list PriorityClasses: {error}") from error
        classes = [PriorityClass.from_object(obj) for obj in objects]
        self._read.update((c.name, c) for c in classes)
        return sorted(classes, key=lambda c: (c.value, c.name))


def from_settings() -> GatewayPriorities:
    return GatewayPriorities(_gateway_from_settings)


def _gateway_from_settings() -> ClusterGateway:
    """Imported when first needed: a process that never asks the cluster (the web, for
    almost every submission) never loads the Kubernetes client."""
    from .factory import gateway_from_settings

    return gateway_from_settings()
