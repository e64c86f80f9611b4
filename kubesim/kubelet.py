"""The kubelet of every node: starts bound pods, pulls their images, ends their containers.

- Start: a pod bound to a Ready node runs ``start_delay`` seconds after binding; a node back
  in Ready starts the pods bound there meanwhile and reports its running pods Ready again.
- Image pulls (pkg/kubelet/images, v1.30): an image listed in the config's
  ``unpullable_images`` (exact reference) or tagged ``does-not-exist`` never pulls. Its
  container waits with reason ``ErrImagePull`` (message the runtime's error) at each pull,
  and ``ImagePullBackOff`` (``Back-off pulling image "x"``) from the kubelet's next sync
  (PLEG's 1 s relist) until the image back-off -- 10 s doubling to 5 min -- lets it pull
  again. The pod stays Pending (a waiting container keeps it so: getPhase) while its other
  containers run. Each pull records the kubelet's Events: Normal ``Pulling``, Warning
  ``Failed`` (``Failed to pull image "x": <error>``) and ``Failed`` (``Error: ErrImagePull``);
  each back-off Normal ``BackOff`` and Warning ``Failed`` (``Error: ImagePullBackOff``).
- Ends (``terminate``, told by the work clock): the main container (the first) exits with
  the code and reason given (``Completed``, ``Error`` or ``OOMKilled``), the others with the
  same code; under restartPolicy OnFailure/Always a failure restarts them in place
  (``lastState.terminated`` keeps how they ended, ``restartCount`` + 1), else the pod is
  Succeeded or Failed.
"""

from __future__ import annotations

import hashlib
import heapq
import threading

from .clock import Clock, rfc3339
from .extender import device_plugin_annotations
from .model import Event, Store, evolve, key_of
from .nodelifecycle import ready_status
from .resources import EVENTS, NODES, PODS, ResourceType
from .scheduler import set_pod_condition

PodKey = tuple[str, str]
SYNC_SECONDS = 1.0  # PLEG's relist period: how soon the kubelet syncs a pod again after a failed pull
PULL_BACKOFF_SECONDS, MAX_PULL_BACKOFF_SECONDS = 10.0, 300.0  # the image manager's back-off
MISSING_TAG = "does-not-exist"


def image_tag(image: str) -> str:
    """The tag of an image reference ("" without one): after the last ':' of the last path part."""
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[1] if ":" in name else ""


def pull_error(image: str) -> str:
    """What containerd answers for an image it cannot find (the kubelet passes it on verbatim)."""
    return (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )


class Kubelet:
    name = "kubelet"

    def __init__(self, store: Store, clock: Clock, start_delay: float = 1.0, unpullable: list[str] | None = None):
        self.store, self.clock, self.start_delay = store, clock, start_delay
        self.unpullable = set(unpullable or ())
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, PodKey, str]] = []
        self._seen: set[str] = set()  # uids already scheduled to start
        self._ready_nodes: set[str] = set()  # nodes (back) in Ready: their pods to look at
        # pods whose images do not pull -> (uid, next sync, pulls so far, whether that sync
        # pulls, when the image back-off ends)
        self._pulls: dict[PodKey, tuple[str, float, int, bool, float]] = {}
        self._seq = 0
        self._ip = 0
        store.hooks.append(self._on_event)

    def pullable(self, image: str) -> bool:
        return image not in self.unpullable and image_tag(image) != MISSING_TAG

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        if rt is NODES:
            if event.type != "DELETED" and ready_status(event.obj) == "True":
                with self._lock:
                    self._ready_nodes.add(event.obj["metadata"]["name"])
            return
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
            starts = self._heap[0][0] if self._heap else None
            pulls = min((entry[1] for entry in self._pulls.values()), default=None)
        return starts if pulls is None else pulls if starts is None else min(starts, pulls)

    def step(self, now: float) -> bool:
        due = []
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                due.append(heapq.heappop(self._heap))
            ready, self._ready_nodes = self._ready_nodes, set()
            pulls = sorted((key, entry) for key, entry in self._pulls.items() if entry[1] <= now)
            for key, _ in pulls:
                del self._pulls[key]
        for _, _, key, uid in due:
            self._start(key, uid, now)
        for key, (uid, _, attempts, pull, backoff_ends) in pulls:
            self._sync_pull(key, uid, attempts, pull, backoff_ends, now)
        for name in sorted(ready):
            self._node_back(name, now)
        return bool(due or ready or pulls)

    def _node_back(self, node: str, now: float) -> None:
        """A node (back) in Ready: its kubelet starts the pods bound there meanwhile and reports
        its running pods Ready again (the node lifecycle controller had marked them not Ready)."""
        for pod in self.store.items(PODS):
            if (pod.get("spec") or {}).get("nodeName") != node:
                continue
            status = pod.get("status") or {}
            if status.get("phase") == "Pending" and pod["metadata"]["uid"] not in self._seen:
                with self._lock:
                    self._seen.add(pod["metadata"]["uid"])
                    self._seq += 1
                    heapq.heappush(self._heap, (now + self.start_delay, self._seq, key_of(pod), pod["metadata"]["uid"]))
            elif status.get("phase") == "Running" and any(
                c.get("type") == "Ready" and c.get("status") == "False" for c in status.get("conditions") or []
            ):
                with self.store.lock:
                    current = self.store.find(PODS, *key_of(pod))
                    if current is not None and current["metadata"]["uid"] == pod["metadata"]["uid"]:
                        status = dict(current["status"])
                        set_pod_condition(status, "Ready", "True", now)
                        self.store.update(PODS, evolve(current, status=status))

    def _pending_here(self, key: PodKey, uid: str) -> dict | None:
        """The pod, still Pending, on a Ready node (a kubelet there to act on it); call under the
        store lock. Not on a Ready node: forgotten, and seen again once the node is Ready."""
        pod = self.store.find(PODS, *key)
        if pod is None or pod["metadata"]["uid"] != uid or pod["status"].get("phase") != "Pending":
            return None
        node = self.store.find(NODES, "", pod["spec"].get("nodeName", ""))
        if node is None or ready_status(node) != "True":
            self._seen.discard(uid)
            return None
        return pod

    def _start(self, key: PodKey, uid: str, now: float) -> None:
        # Read-modify-write under the store lock: no client write can slip in between.
        with self.store.lock:
            pod = self._pending_here(key, uid)
            if pod is None:
                return
            self._ip += 1
            status = dict(pod["status"])
            status.update(
                startTime=rfc3339(now),
                hostIP="192.0.2.1",
                podIP=f"10.{(self._ip >> 16) & 255}.{(self._ip >> 8) & 255}.{self._ip & 255}",
            )
            containers = pod["spec"].get("containers") or []
            if not all(self.pullable(c.get("image", "")) for c in containers):
                pod = self.store.update(PODS, evolve(pod, status=status))
            else:
                status["phase"] = "Running"
                for ctype in ("Initialized", "ContainersReady", "Ready"):
                    set_pod_condition(status, ctype, "True", now)
                status["containerStatuses"] = [_running(c, now) for c in containers]
                started = evolve(pod, status=status)
                devices = device_plugin_annotations(pod)
                if devices:  # the device plugins' Allocate, as the containers are created
                    started["metadata"]["annotations"] = {**(pod["metadata"].get("annotations") or {}), **devices}
                self.store.update(PODS, started)
                return
        self._sync_pull(key, uid, 0, True, now, now)

    def _sync_pull(self, key: PodKey, uid: str, attempts: int, pull: bool, backoff_ends: float, now: float) -> None:
        """A sync of a pod whose image does not pull: pull again (ErrImagePull) or, inside the
        back-off, report ImagePullBackOff; then schedule the next sync."""
        with self.store.lock:
            pod = self._pending_here(key, uid)
            if pod is None:
                return
            containers = pod["spec"].get("containers") or []
            waiting = [c for c in containers if not self.pullable(c.get("image", ""))]
            if not waiting:
                return  # an image changed to one that pulls: not modelled (the pod keeps waiting)
            reason = "ErrImagePull" if pull else "ImagePullBackOff"
            old = {c["name"]: c for c in pod["status"].get("containerStatuses") or []}
            statuses = []
            for c in containers:
                if self.pullable(c.get("image", "")):
                    statuses.append(old.get(c["name"]) or _running(c, now))
                    continue
                image = c.get("image", "")
                message = pull_error(image) if pull else f'Back-off pulling image "{image}"'
                statuses.append(
                    {
                        "name": c["name"],
                        "image": image,
                        "imageID": "",
                        "ready": False,
                        "started": False,
                        "restartCount": 0,
                        "state": {"waiting": {"reason": reason, "message": message}},
                    }
                )
            status = dict(pod["status"])
            status["containerStatuses"] = statuses
            unready = f"containers with unready status: [{' '.join(c['name'] for c in waiting)}]"
            if attempts == 0 and pull:
                set_pod_condition(status, "Initialized", "True", now)
                for ctype in ("Ready", "ContainersReady"):
                    set_pod_condition(status, ctype, "False", now, "ContainersNotReady", unready)
            self.store.update(PODS, evolve(pod, status=status))
            for c in waiting:
                image = c.get("image", "")
                if pull:
                    self._event(pod, c["name"], "Normal", "Pulling", f'Pulling image "{image}"', now)
                    self._event(
                        pod, c["name"], "Warning", "Failed", f'Failed to pull image "{image}": {pull_error(image)}', now
                    )
                else:
                    self._event(pod, c["name"], "Normal", "BackOff", f'Back-off pulling image "{image}"', now)
                self._event(pod, c["name"], "Warning", "Failed", f"Error: {reason}", now)
        if pull:  # the back-off runs from this pull; the next sync shows it
            ends = now + min(PULL_BACKOFF_SECONDS * 2**attempts, MAX_PULL_BACKOFF_SECONDS)
            entry = (uid, now + SYNC_SECONDS, attempts + 1, False, ends)
        else:
            entry = (uid, backoff_ends, attempts, True, backoff_ends)
        with self._lock:
            self._pulls[key] = entry

    def _event(self, pod: dict, container: str, etype: str, reason: str, message: str, now: float) -> None:
        """A core/v1 Event from this kubelet about a container, counted up when it repeats (the
        event correlator aggregates by object, reason and message). Called under the store lock."""
        meta = pod["metadata"]
        digest = hashlib.sha1(f"{meta['uid']}/{container}/{reason}/{message}".encode()).hexdigest()[:16]
        name, namespace, stamp = f"{meta['name']}.{digest}", meta.get("namespace") or "", rfc3339(now)
        existing = self.store.find(EVENTS, namespace, name)
        if existing is not None:
            self.store.update(EVENTS, evolve(existing, count=existing.get("count", 1) + 1, lastTimestamp=stamp))
            return
        node = pod["spec"].get("nodeName", "")
        self.store.create(
            EVENTS,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "namespace": namespace,
                    "uid": meta["uid"],
                    "fieldPath": f"spec.containers{{{container}}}",
                },
                "reason": reason,
                "message": message,
                "type": etype,
                "count": 1,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "source": {"component": "kubelet", "host": node},
                "reportingComponent": "kubelet",
                "reportingInstance": node,
            },
        )

    def terminate(self, key: PodKey, exit_code: int, now: float, reason: str = "") -> None:
        """The containers exit (the main one with ``reason``, else by the code); with restartPolicy
        OnFailure/Always a failure restarts them in place."""
        with self.store.lock:
            pod = self.store.find(PODS, *key)
            if pod is None or pod["status"].get("phase") != "Running":
                return
            status = dict(pod["status"])
            restart = exit_code != 0 and pod["spec"].get("restartPolicy") in ("OnFailure", "Always")
            by_code = "Completed" if exit_code == 0 else "Error"
            containers: list[dict] = pod["spec"].get("containers") or []
            main = containers[0]["name"] if containers else None

            def terminated(container: dict) -> dict:
                return {
                    "exitCode": exit_code,
                    "reason": (reason or by_code) if container["name"] == main else by_code,
                    "startedAt": status.get("startTime", rfc3339(now)),
                    "finishedAt": rfc3339(now),
                }

            if restart:
                status["containerStatuses"] = [
                    {
                        **c,
                        "restartCount": c.get("restartCount", 0) + 1,
                        "lastState": {"terminated": terminated(c)},
                        "state": {"running": {"startedAt": rfc3339(now)}},
                    }
                    for c in status.get("containerStatuses") or []
                ]
            else:
                status["containerStatuses"] = [
                    {**c, "ready": False, "started": False, "state": {"terminated": terminated(c)}}
                    for c in status.get("containerStatuses") or []
                ]
                status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
                for ctype in ("ContainersReady", "Ready"):
                    set_pod_condition(status, ctype, "False", now, "PodCompleted")
            self.store.update(PODS, evolve(pod, status=status))


def _running(container: dict, now: float) -> dict:
    return {
        "name": container["name"],
        "image": container.get("image", ""),
        "imageID": f"docker-pullable://{container.get('image', '')}",
        "ready": True,
        "started": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": rfc3339(now)}},
    }
