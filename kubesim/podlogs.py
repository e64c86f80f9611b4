"""``GET .../pods/<name>/log`` (``kubectl logs``): kubesim's containers run nothing, so their log
is what the kubelet knows of them -- when each started and how it ended -- with the API
server's refusals: no host yet, a container still waiting, no container named, an unknown
one, no previous run (``previous=true``)."""

from __future__ import annotations

from .errors import bad_request


def pod_log(pod: dict, query: dict) -> bytes:
    name = pod["metadata"]["name"]
    containers = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
    container = query.get("container") or ""
    if not container:
        if len(containers) != 1:
            raise bad_request(
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
            )
        container = containers[0]
    if container not in containers:
        raise bad_request(f"container {container} is not valid for pod {name}")
    status = pod.get("status") or {}
    if not (pod.get("spec") or {}).get("nodeName"):
        raise bad_request(f"pod {name} does not have a host assigned")
    state = next((c for c in status.get("containerStatuses") or [] if c.get("name") == container), None)
    if query.get("previous") in ("true", "1"):
        last = ((state or {}).get("lastState") or {}).get("terminated")
        if not last:
            raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        return _lines(container, last, None)
    if state is None or "waiting" in (state.get("state") or {}):
        reason = ((state or {}).get("state") or {}).get("waiting", {}).get("reason") or "ContainerCreating"
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    current = state.get("state") or {}
    return _lines(container, current.get("terminated"), current.get("running"))


def _lines(container: str, terminated: dict | None, running: dict | None) -> bytes:
    started = (terminated or running or {}).get("startedAt", "")
    lines = [f"kubesim: container {container} started at {started} (simulated: no output)"]
    if terminated:
        lines.append(
            f"kubesim: container {container} exited with code {terminated.get('exitCode', 0)} "
            f"({terminated.get('reason', '')}) at {terminated.get('finishedAt', '')}"
        )
    return ("\n".join(lines) + "\n").encode()
