"""Kubelet and the TFJob work clock, plus the loop that drives all controllers.

Every controller has ``step(now) -> bool`` (did it do anything) and ``next_deadline()``
(the earliest cluster time at which it has something to do by itself). Work queues are
filled by store hooks, so a step costs what changed, not the size of the cluster. The
same steps run from a background thread in real time (``Controllers.start``) or are called
directly in virtual time (``settle``/``advance``), e.g. by tests and trace replays.
"""

from __future__ import annotations

import heapq
import threading

from . import tfjob
from .clock import Clock, ManualClock, rfc3339
from .model import Event, Store, evolve, key_of
from .operator import JobPods, job_key_of_event
from .resources import PODS, TFJOBS, ResourceType
from .scheduler import set_pod_condition

Key = tuple[str, str]


class Kubelet:
    """Starts a bound pod ``start_delay`` seconds after binding; ends pods when told to."""

    name = "kubelet"

    def __init__(self, store: Store, clock: Clock, start_delay: float = 1.0):
        self.store, self.clock, self.start_delay = store, clock, start_delay
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, Key, str]] = []
        self._seen: set[str] = set()  # uids already scheduled to start
        self._seq = 0
        self._ip = 0
        store.hooks.append(self._on_event)

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        if rt is not PODS or event.type == "DELETED":
            if rt is PODS:
                self._seen.discard(event.obj["metadata"]["uid"])
            return
        pod = event.obj
        uid = pod["metadata"]["uid"]
        if (
            (pod.get("spec") or {}).get("nodeName")
            and (pod.get("status") or {}).get("phase") == "Pending"
            and uid not in self._seen
        ):
            with self._lock:
                self._seen.add(uid)
                self._seq += 1
                heapq.heappush(self._heap, (self.clock.now() + self.start_delay, self._seq, key_of(pod), uid))

    def next_deadline(self) -> float | None:
        with self._lock:
            return self._heap[0][0] if self._heap else None

    def step(self, now: float) -> bool:
        due = []
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                due.append(heapq.heappop(self._heap))
        for _, _, key, uid in due:
            self._start(key, uid, now)
        return bool(due)

    def _start(self, key: Key, uid: str, now: float) -> None:
        # Read-modify-write under the store lock: no client write can slip in between.
        with self.store.lock:
            pod = self.store.find(PODS, *key)
            if pod is None or pod["metadata"]["uid"] != uid or pod["status"].get("phase") != "Pending":
                return
            self._ip += 1
            status = dict(pod["status"])
            status.update(
                phase="Running",
                startTime=rfc3339(now),
                hostIP="192.0.2.1",
                podIP=f"10.{(self._ip >> 16) & 255}.{(self._ip >> 8) & 255}.{self._ip & 255}",
            )
            for ctype in ("Initialized", "ContainersReady", "Ready"):
                set_pod_condition(status, ctype, "True", now)
            status["containerStatuses"] = [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": f"docker-pullable://{c.get('image', '')}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": rfc3339(now)}},
                }
                for c in pod["spec"].get("containers") or []
            ]
            self.store.update(PODS, evolve(pod, status=status))

    def terminate(self, key: Key, exit_code: int, now: float) -> None:
        """The containers exit; with restartPolicy OnFailure/Always a failure restarts them in place."""
        with self.store.lock:
            pod = self.store.find(PODS, *key)
            if pod is None or pod["status"].get("phase") != "Running":
                return
            status = dict(pod["status"])
            restart = exit_code != 0 and pod["spec"].get("restartPolicy") in ("OnFailure", "Always")
            terminated = {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": status.get("startTime", rfc3339(now)),
                "finishedAt": rfc3339(now),
            }
            if restart:
                status["containerStatuses"] = [
                    {
                        **c,
                        "restartCount": c.get("restartCount", 0) + 1,
                        "lastState": {"terminated": terminated},
                        "state": {"running": {"startedAt": rfc3339(now)}},
                    }
                    for c in status.get("containerStatuses") or []
                ]
            else:
                status["containerStatuses"] = [
                    {**c, "ready": False, "started": False, "state": {"terminated": terminated}}
                    for c in status.get("containerStatuses") or []
                ]
                status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
                for ctype in ("ContainersReady", "Ready"):
                    set_pod_condition(status, ctype, "False", now, "PodCompleted")
            self.store.update(PODS, evolve(pod, status=status))


class WorkClock:
    """A TFJob makes progress only while its whole gang runs; then its pods finish.

    The clock of a job starts when every expected pod is Running and restarts from zero
    if the gang breaks. After ``kubesim.io/duration-seconds`` the workers (and chief)
    exit 0 -- parameter servers keep running until the operator cleans them up -- or,
    with ``kubesim.io/fail: "true"``, the coordinator (or worker 0) exits 1.
    """

    name = "work-clock"

    def __init__(self, store: Store, index: JobPods, kubelet: Kubelet, default_duration: float = 60.0):
        self.store, self.index, self.kubelet = store, index, kubelet
        self.default_duration = default_duration
        self._lock = threading.Lock()
        self._dirty: set[Key] = set()
        self._timers: dict[Key, float] = {}  # job -> when its work is done
        self.gang_started: dict[Key, float] = {}  # for inspection
        store.hooks.append(self._on_event)

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        key = job_key_of_event(rt, event)
        if key is not None:
            with self._lock:
                self._dirty.add(key)

    def next_deadline(self) -> float | None:
        with self._lock:
            return min(self._timers.values(), default=None)

    def _gang_running(self, job: dict, pods: list[dict]) -> bool:
        if tfjob.is_finished(job.get("status") or {}) or tfjob.is_suspended(job):
            return False
        expected = {tfjob.pod_name(job["metadata"]["name"], t, i) for t, i in tfjob.expected_pods(job)}
        running = {p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"}
        return bool(expected) and expected <= running

    def step(self, now: float) -> bool:
        with self._lock:
            keys = set(self._dirty)
            self._dirty.clear()
            keys.update(k for k, at in self._timers.items() if at <= now)
        for key in sorted(keys):
            job = self.store.find(TFJOBS, *key)
            pods = self.index.pods(key) if job is not None else []
            if job is None or not self._gang_running(job, pods):
                with self._lock:
                    self._timers.pop(key, None)
                self.gang_started.pop(key, None)
                continue
            with self._lock:
                if key not in self._timers:
                    self._timers[key] = now + tfjob.work_duration(job, self.default_duration)
                    self.gang_started[key] = now
                due = self._timers[key] <= now
                if due:
                    del self._timers[key]
            if due:
                self._finish(job, pods, now)
                with self._lock:
                    self._dirty.add(key)  # a restarted gang starts its clock again
        return bool(keys)

    def _finish(self, job: dict, pods: list[dict], now: float) -> None:
        if tfjob.should_fail(job):
            lead = next(
                (p for p in pods if (p["metadata"].get("labels") or {}).get(tfjob.JOB_ROLE_LABEL) == "master"), pods[0]
            )
            self.kubelet.terminate(key_of(lead), 1, now)
            return
        for pod in pods:
            if (pod["metadata"].get("labels") or {}).get(tfjob.REPLICA_TYPE_LABEL) != "ps":
                self.kubelet.terminate(key_of(pod), 0, now)


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
