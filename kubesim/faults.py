"""Fault injection: errors, latency and 429s on chosen verbs and resources.

A rule matches requests by verb (get, list, watch, create, update, patch, delete) and
resource plural ("*" for any). A matching request is delayed by ``latency_ms`` and then,
with probability ``error_rate``, answered with ``status`` instead of being served.
``times`` limits how many errors a rule injects (then it only adds latency), which makes
"the next 3 creates get 429" deterministic. Watch connections are cut with
``Store.drop_watches`` (see Cluster.drop_watches).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from .errors import ApiError, internal, timeout, too_many_requests

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "*"})


@dataclass
class FaultRule:
    verbs: frozenset[str] = frozenset({"*"})
    resources: frozenset[str] = frozenset({"*"})
    error_rate: float = 0.0
    status: int = 500
    latency_ms: float = 0.0
    times: int | None = None
    retry_after: int = 1
    injected: int = field(default=0, compare=False)

    @classmethod
    def from_dict(cls, data: dict) -> FaultRule:
        unknown = set(data) - {"verbs", "resources", "error_rate", "status", "latency_ms", "times", "retry_after"}
        if unknown:
            raise ValueError(f"unknown fault rule keys: {sorted(unknown)}")
        verbs = data.get("verbs", ["*"])
        verbs = frozenset([verbs] if isinstance(verbs, str) else verbs)
        if not verbs <= VERBS:
            raise ValueError(f"unknown verbs {sorted(verbs - VERBS)}; use {sorted(VERBS)}")
        resources = data.get("resources", ["*"])
        resources = frozenset([resources] if isinstance(resources, str) else resources)
        status = int(data.get("status", 500))
        if status not in (429, 500, 503, 504):
            raise ValueError("fault status must be 429, 500, 503 or 504")
        rate = float(data.get("error_rate", 1.0 if "times" in data else 0.0))
        if not 0.0 <= rate <= 1.0:
            raise ValueError("error_rate must be between 0 and 1")
        return cls(
            verbs,
            resources,
            rate,
            status,
            float(data.get("latency_ms", 0.0)),
            data.get("times"),
            int(data.get("retry_after", 1)),
        )

    def matches(self, verb: str, resource: str) -> bool:
        return ("*" in self.verbs or verb in self.verbs) and ("*" in self.resources or resource in self.resources)

    def error(self) -> ApiError:
        if self.status == 429:
            return too_many_requests(self.retry_after)
        if self.status == 503:
            return ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
        if self.status == 504:
            return timeout(
                "the server was unable to return a response in the time allotted, but may still be processing the request"
            )
        return internal("injected fault")


class Faults:
    def __init__(self, rules: list[dict] | None = None, seed: int = 0):
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self.rules: list[FaultRule] = [FaultRule.from_dict(r) for r in rules or []]

    def add(self, **rule) -> FaultRule:
        parsed = FaultRule.from_dict(rule)
        with self._lock:
            self.rules.append(parsed)
        return parsed

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def check(self, verb: str, resource: str) -> tuple[float, ApiError | None]:
        """(seconds to delay, error to answer with or None) for one request."""
        if not self.rules:
            return 0.0, None
        delay, error = 0.0, None
        with self._lock:
            for rule in self.rules:
                if not rule.matches(verb, resource):
                    continue
                delay += rule.latency_ms / 1000.0
                exhausted = rule.times is not None and rule.injected >= rule.times
                if error is None and not exhausted and self._random.random() < rule.error_rate:
                    rule.injected += 1
                    error = rule.error()
        return delay, error
