"""The work clock of every job kind, plus the loop that drives all controllers.

Every controller has ``step(now) -> bool`` (did it do anything) and ``next_deadline()``
(the earliest cluster time at which it has something to do by itself). Work queues are
filled by store hooks, so a step costs what changed, not the size of the cluster. The
same steps run from a background thread in real time (``Controllers.start``) or are called
directly in virtual time (``settle``/``advance``), e.g. by tests and trace replays.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import TYPE_CHECKING, Protocol

from .admission import UserInfo
from .clock import Clock, ManualClock, rfc3339
from .errors import ApiError
from .kubeflow import (
    CHECKPOINT_ANNOTATION,
    CHECKPOINTED_AT_ANNOTATION,
    DURATION_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    FAIL_ANNOTATION,
    OOM_ANNOTATION,
)
from .kubelet import Kubelet
from .model import Event, Store, key_of
from .ownership import Owners
from .resources import BY_GROUP_PLURAL, PODS, ResourceType

if TYPE_CHECKING:
    from .api import Api

log = logging.getLogger(__name__)
Key = tuple[str, str, str]  # a workload: (plural, namespace, name)
PodKey = tuple[str, str]


class Workload(Protocol):
    """What the work clock asks a job kind's controller."""

    def gang(self, rt: ResourceType, obj: dict) -> tuple[int, list[dict]]:
        """(how many pods must run at once -- 0 when finished or suspended, its live pods)."""
        ...

    def finish(self, rt: ResourceType, obj: dict, pods: list[dict], fail: bool) -> list[tuple[dict, int]]:
        """The work is done (or failed): the (running) pods that exit now, with their exit codes."""
        ...


_BY_PLURAL = {rt.plural: rt for rt in BY_GROUP_PLURAL.values()}


def controller_type(plural: str) -> ResourceType:
    return _BY_PLURAL[plural]


class WorkClock:
    """A workload makes progress only while its whole gang runs; then its pods finish.

    A workload is a job of any kind nobody else controls (a TFJob, an MPIJob, a JobSet, a
    TrainJob, a Job of its own...); its pods are found down the controller references
    (TrainJob -> JobSet -> Jobs -> pods). Its controller says how many pods must run at
    once (``gang``) and which pods end how (``finish``). The clock of a workload runs
    while that many of its pods are Running. After ``kubesim.io/duration-seconds`` (from
    the workload, the objects under it, or its pods' annotations; else
    ``workload.default_duration_seconds``) its pods exit 0 -- or its lead pod fails, looked
    up the same way: ``kubesim.io/oom: "true"`` (its main container OOMKilled, exit 137),
    ``kubesim.io/exit-code: "N"`` (1..255, reason Error) or ``kubesim.io/fail: "true"``
    (exit 1), the first that is set in that order.

    Checkpoints: when the gang stops running before the work is done (suspended, a pod
    deleted or failed, a container restarted in place), the work up to its last checkpoint is kept -- every
    ``kubesim.io/checkpoint-seconds`` of the run (looked up as the duration is; else
    ``workload.default_checkpoint_seconds``, 1800; 0: none) -- and the next run only does
    the rest. The kept work belongs to the object (its uid): a job deleted and created
    again starts from zero, and so does a workload restarted after its work ended (a
    failing pod restarted in place). ``progress`` tells the kept work.

    A workload that sets ``kubesim.io/checkpoint-seconds`` itself (not the config's default)
    says so as a real training job would, once it passes each checkpoint of a run: it patches
    its own object's annotation ``jobdash.io/checkpointed-at`` with the checkpoint's
    (simulated) time, through the API and its admission webhooks, as the namespace's default
    service account (given ``api``; a bare Pod's workload does not).
    """

    name = "work-clock"

    def __init__(
        self,
        store: Store,
        owners: Owners,
        kubelet: Kubelet,
        default_duration: float = 60.0,
        default_checkpoint: float = 1800.0,
        api: Api | None = None,
    ):
        self.store, self.owners, self.kubelet, self.api = store, owners, kubelet, api
        self.default_duration, self.default_checkpoint = default_duration, default_checkpoint
        self.workloads: dict[str, Workload] = {}  # plural -> the controller of that kind
        self._lock = threading.Lock()
        self._dirty: set[Key] = set()
        self._timers: dict[Key, float] = {}  # workload -> when its work is done
        self.gang_started: dict[Key, float] = {}  # workload -> when its running gang formed
        # running workload -> (its uid, checkpoint interval, container restarts of its running pods)
        self._runs: dict[Key, tuple[str, float, int]] = {}
        self._kept: dict[Key, tuple[str, float]] = {}  # workload -> (its uid, work kept from earlier runs)
        # a running workload that reports its checkpoints -> (its next checkpoint's time, its number in the run)
        self._checkpoints: dict[Key, tuple[float, int]] = {}
        store.hooks.append(self._on_event)

    def register(self, rt: ResourceType, controller: Workload) -> None:
        self.workloads[rt.plural] = controller

    def _root(self, rt: ResourceType, obj: dict) -> Key | None:
        """The workload an object belongs to: the topmost controller kubesim runs."""
        root: Key | None = None
        for _ in range(8):  # pod -> Job -> JobSet -> TrainJob at most
            if rt.plural in self.workloads:
                root = (rt.plural, obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
            owner = self.owners.owner(obj)
            if owner is None:
                break
            rt, obj = owner
        return root

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        if rt is not PODS and rt.plural not in self.workloads:
            return
        key = self._root(rt, event.obj)
        if key is None and rt.plural in self.workloads and event.type == "DELETED":
            key = (rt.plural, event.obj["metadata"].get("namespace") or "", event.obj["metadata"]["name"])
        if key is not None:
            with self._lock:
                self._dirty.add(key)

    def next_deadline(self) -> float | None:
        with self._lock:
            done = min(self._timers.values(), default=None)
            checkpoint = min((at for at, _ in self._checkpoints.values()), default=None)
        return min((t for t in (done, checkpoint) if t is not None), default=None)

    def _gang(self, key: Key) -> tuple[dict | None, int, list[dict]]:
        controller = self.workloads[key[0]]
        obj = self.store.find(controller_type(key[0]), key[1], key[2])
        if obj is None or self._root(controller_type(key[0]), obj) != key:
            return None, 0, []
        expected, pods = controller.gang(controller_type(key[0]), obj)
        return obj, expected, pods

    def step(self, now: float) -> bool:
        with self._lock:
            keys = set(self._dirty)
            self._dirty.clear()
            keys.update(k for k, at in self._timers.items() if at <= now)
            keys.update(k for k, (at, _) in self._checkpoints.items() if at <= now)
        for key in sorted(keys):
            obj, expected, pods = self._gang(key)
            running = [p for p in pods if p["status"].get("phase") == "Running"]
            if obj is None or expected <= 0 or len(running) < expected:
                with self._lock:
                    self._timers.pop(key, None)
                    self._checkpoints.pop(key, None)
                started = self.gang_started.pop(key, None)
                if started is not None:
                    self._stopped(key, obj, started, now)
                elif obj is None:
                    self._kept.pop(key, None)
                continue
            with self._lock:
                if key not in self._timers:
                    self._start(key, obj, pods, running, now)
                elif _restarts(running) > self._runs[key][2]:
                    # A container restarted in place: the work goes back to the last checkpoint.
                    self._stopped(key, obj, self.gang_started.pop(key), now)
                    self._start(key, obj, pods, running, now)
                due = self._timers[key] <= now
                if due:
                    del self._timers[key]
                    self._checkpoints.pop(key, None)
                mark = None if due else self._passed_checkpoint(key, now)
            if mark is not None:
                self._report_checkpoint(key, mark)
            if due:
                self.gang_started.pop(key, None)
                self._runs.pop(key, None)
                self._kept.pop(key, None)  # the work is done: a restart starts over
                rt = controller_type(key[0])
                failure = self._failure(obj, pods)
                for pod, code in self.workloads[key[0]].finish(rt, obj, running, failure is not None):
                    # The controller names the pods that fail; the annotations say how.
                    ending = failure if code != 0 and failure is not None else (code, "")
                    self.kubelet.terminate(key_of(pod), ending[0], now, ending[1])
                with self._lock:
                    self._dirty.add(key)  # a restarted gang starts its clock again
        return bool(keys)

    def _start(self, key: Key, obj: dict, pods: list[dict], running: list[dict], now: float) -> None:
        """The whole gang runs: the work left (after what earlier runs kept) is due in full."""
        uid = obj["metadata"]["uid"]
        chain = self._chain(obj, pods)
        duration = self._seconds(chain, pods, DURATION_ANNOTATION, self.default_duration)
        kept = self._kept.get(key)
        done = kept[1] if kept is not None and kept[0] == uid else 0.0
        self._timers[key] = now + max(0.0, duration - done)
        self.gang_started[key] = now
        checkpoint = self._seconds(chain, pods, CHECKPOINT_ANNOTATION, self.default_checkpoint)
        self._runs[key] = (uid, checkpoint, _restarts(running))
        self._checkpoints.pop(key, None)
        reports = self.api is not None and key[0] != PODS.plural
        if reports and 0 < checkpoint < math.inf and self._lookup(chain, pods, CHECKPOINT_ANNOTATION) is not None:
            if now + checkpoint < self._timers[key]:  # (one at the very end is no checkpoint: the work is done)
                self._checkpoints[key] = (now + checkpoint, 1)

    def _passed_checkpoint(self, key: Key, now: float) -> float | None:
        """The time of the last checkpoint of the run passed by `now` that is not reported yet
        (the next one is due then); None if none is due."""
        due = self._checkpoints.get(key)
        if due is None or due[0] > now:
            return None
        started, checkpoint = self.gang_started[key], self._runs[key][1]
        number = due[1]
        while started + (number + 1) * checkpoint <= now:  # (a clock that jumped past several)
            number += 1
        following = started + (number + 1) * checkpoint
        if following < self._timers[key]:
            self._checkpoints[key] = (following, number + 1)
        else:
            del self._checkpoints[key]
        return started + number * checkpoint

    def _report_checkpoint(self, key: Key, at: float) -> None:
        """The workload's own object annotated with its checkpoint's time, as its job would
        (outside the clock's lock: the write comes back through the store's hooks)."""
        assert self.api is not None
        plural, namespace, name = key
        account = UserInfo(
            f"system:serviceaccount:{namespace}:default",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
        )
        body = {"metadata": {"annotations": {CHECKPOINTED_AT_ANNOTATION: rfc3339(at)}}}
        try:
            self.api.patch(controller_type(plural), namespace, name, "application/merge-patch+json", body, account)
        except ApiError as error:  # (a webhook refused it, the object went): the next checkpoint tries again
            log.info("%s %s/%s: its checkpoint at %s not written: %s", plural, namespace, name, rfc3339(at), error)

    def _stopped(self, key: Key, obj: dict | None, started: float, now: float) -> None:
        """The gang broke before its work was done: the work up to the last checkpoint is kept."""
        uid, checkpoint, _ = self._runs.pop(key, ("", 0.0, 0))
        if obj is None or obj["metadata"]["uid"] != uid:
            self._kept.pop(key, None)  # another object now (or none): nothing to resume
            return
        saved = math.floor((now - started) / checkpoint) * checkpoint if 0 < checkpoint < math.inf else 0.0
        if saved > 0:
            kept = self._kept.get(key)
            self._kept[key] = (uid, saved + (kept[1] if kept is not None and kept[0] == uid else 0.0))

    def progress(self, key: Key) -> tuple[float, float | None]:
        """(seconds of work kept from the runs so far, when the current run began or None) of a
        workload ``(plural, namespace, name)``; the current run's work is not counted yet."""
        obj = self.store.find(controller_type(key[0]), key[1], key[2])
        if obj is None:
            return 0.0, None
        kept = self._kept.get(key)
        run = self._runs.get(key)
        done = kept[1] if kept is not None and kept[0] == obj["metadata"]["uid"] else 0.0
        since = self.gang_started.get(key) if run is not None and run[0] == obj["metadata"]["uid"] else None
        return done, since

    def _chain(self, obj: dict, pods: list[dict]) -> list[dict]:
        """The workload and the objects between it and its pods."""
        chain, seen = [obj], {obj["metadata"]["uid"]}
        for pod in pods:
            owner = self.owners.owner(pod)
            while owner is not None and owner[1]["metadata"]["uid"] not in seen:
                seen.add(owner[1]["metadata"]["uid"])
                chain.append(owner[1])
                owner = self.owners.owner(owner[1])
        return chain

    @staticmethod
    def _lookup(chain: list[dict], pods: list[dict], name: str) -> str | None:
        for holder in chain:
            value = (holder["metadata"].get("annotations") or {}).get(name)
            if value is None:
                value = _template_annotation(holder.get("spec"), name)
            if value is not None:
                return value
        return next((v for p in pods if (v := (p["metadata"].get("annotations") or {}).get(name)) is not None), None)

    def _seconds(self, chain: list[dict], pods: list[dict], name: str, default: float) -> float:
        value = self._lookup(chain, pods, name)
        try:
            return max(0.0, float(value)) if value is not None else default
        except ValueError:
            return default

    def _duration(self, key: Key, obj: dict, pods: list[dict]) -> float:
        return self._seconds(self._chain(obj, pods), pods, DURATION_ANNOTATION, self.default_duration)

    def _failure(self, obj: dict, pods: list[dict]) -> tuple[int, str] | None:
        """How the lead pod ends, if it fails: (exit code, the main container's reason)."""
        chain = self._chain(obj, pods)
        if str(self._lookup(chain, pods, OOM_ANNOTATION) or "").lower() == "true":
            return 137, "OOMKilled"  # the kernel's SIGKILL: 128 + 9
        code = exit_code(self._lookup(chain, pods, EXIT_CODE_ANNOTATION))
        if code is not None:
            return code, "Error"
        if str(self._lookup(chain, pods, FAIL_ANNOTATION) or "").lower() == "true":
            return 1, "Error"
        return None


def exit_code(value: str | None) -> int | None:
    """A ``kubesim.io/exit-code`` value, None when absent or not an integer in 1..255."""
    try:
        code = int(str(value).strip()) if value is not None else None
    except ValueError:
        return None
    return code if code is not None and 1 <= code <= 255 else None


def _restarts(pods: list[dict]) -> int:
    """Container restarts (in place, by the kubelet) of the pods, all told."""
    return sum(c.get("restartCount", 0) for p in pods for c in p["status"].get("containerStatuses") or ())


def _template_annotation(spec: object, name: str, depth: int = 0) -> str | None:
    """An annotation from any pod (or Job) template inside a spec, in document order."""
    if depth > 8:
        return None
    if isinstance(spec, dict):
        template = spec.get("template")
        if isinstance(template, dict):
            value = ((template.get("metadata") or {}).get("annotations") or {}).get(name)
            if value is not None:
                return value
        for child in spec.values():
            found = _template_annotation(child, name, depth + 1)
            if found is not None:
                return found
    elif isinstance(spec, list):
        for child in spec:
            found = _template_annotation(child, name, depth + 1)
            if found is not None:
                return found
    return None


class Controllers:
    """All controllers in a fixed order, steppable in virtual time or run by a thread."""

    def __init__(self, clock: Clock, controllers: list):
        self.clock = clock
        self.controllers = controllers
        self._step_lock = threading.Lock()  # one stepper at a time: thread or test, never both
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.steps = 0

    def notify(self, *_args) -> None:
        if not self._wake.is_set():  # a store hook: called on every write, keep it cheap
            self._wake.set()

    def step(self, now: float | None = None) -> bool:
        with self._step_lock:
            now = self.clock.now() if now is None else now
            self.steps += 1
            did = False
            for controller in self.controllers:
                did = controller.step(now) or did
            return did

    def settle(self, max_rounds: int = 100_000) -> int:
        """Step at the current time until nothing changes; returns the rounds taken."""
        for rounds in range(1, max_rounds + 1):
            if not self.step():
                return rounds
        raise RuntimeError("controllers did not settle")

    def next_deadline(self) -> float | None:
        deadlines = [d for c in self.controllers if (d := c.next_deadline()) is not None]
        return min(deadlines, default=None)

    def advance(self, seconds: float) -> None:
        """Move a ManualClock forward, stopping at every controller deadline on the way."""
        clock = self.clock
        if not isinstance(clock, ManualClock):
            raise RuntimeError("advance() needs a manual clock; a real clock moves by itself")
        target = clock.now() + seconds
        self.settle()
        stuck = 0
        while (deadline := self.next_deadline()) is not None and deadline <= target:
            # A deadline that stays in the past after settling is a controller bug; fail loudly
            # instead of spinning forever.
            stuck = stuck + 1 if deadline <= clock.now() else 0
            if stuck > 100:
                raise RuntimeError(f"a controller keeps a deadline it never consumes ({deadline})")
            clock.set(max(deadline, clock.now()))
            self.settle()
        clock.set(target)
        self.settle()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kubesim-controllers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            if self.step():
                continue
            deadline = self.next_deadline()
            wait = 1.0 if deadline is None else min(1.0, self.clock.real_seconds_until(deadline))
            self._wake.wait(wait)
