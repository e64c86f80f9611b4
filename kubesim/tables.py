"""Table responses (meta.k8s.io/v1 Table), what ``kubectl get`` prints.

A client asking with ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` gets the
rows the API server's printers make (kubernetes/pkg/printers/internalversion/printers.go)
for the built-in kinds, and a CRD's ``additionalPrinterColumns`` for the custom ones, as
the real CRDs declare them (TFJob/PyTorchJob/... and TrainJob: State, Age; JobSet:
TerminalState, Restarts, Completed, Suspended, Age; MPIJob and the runtimes: Age only).
Like the API server, every cell is computed (the wide ones too: priority 1 columns are
hidden by kubectl unless ``-o wide``); ages are relative to the cluster's clock.
"""

from __future__ import annotations

from collections.abc import Callable

from . import queuedjob, service
from .clock import parse_time

NAME_DOC = "Name must be unique within a namespace."
AGE_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created."
TABLE_MEDIA = "as=Table"


def wants_table(accept: str) -> bool:
    """True when the first media type the client accepts is a meta.k8s.io Table."""
    for media in accept.split(","):
        params = {p.strip() for p in media.split(";")[1:]}
        if TABLE_MEDIA in params and "g=meta.k8s.io" in params:
            return True
        if media.strip():
            return False
    return False


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _since(stamp: str | None, now: float) -> str:
    if not stamp:
        return "<unknown>"
    try:
        return human_duration(now - parse_time(stamp))
    except ValueError:
        return "<unknown>"


def _col(name: str, ctype: str = "string", priority: int = 0, description: str = "", fmt: str = "") -> dict:
    return {"name": name, "type": ctype, "format": fmt, "description": description, "priority": priority}


NAME = _col("Name", fmt="name", description=NAME_DOC)
AGE = _col("Age", description=AGE_DOC)


def _age(obj: dict, now: float) -> str:
    return _since(obj["metadata"].get("creationTimestamp"), now)


# --- the built-in printers --------------------------------------------------------------------


def _pod(obj: dict, now: float) -> list:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    reason = status.get("reason") or status.get("phase") or ""
    if any(
        c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in status.get("conditions") or []
    ):
        reason = "SchedulingGated"
    restarts, ready, running, last_restart = 0, 0, False, None
    for container in reversed(status.get("containerStatuses") or []):
        restarts += container.get("restartCount", 0)
        last = (container.get("lastState") or {}).get("terminated")
        if last and last.get("finishedAt"):
            last_restart = max(last_restart or "", last["finishedAt"])
        state = container.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            terminated = state["terminated"] or {}
            reason = terminated.get("reason") or f"ExitCode:{terminated.get('exitCode', 0)}"
        elif container.get("ready") and "running" in state:
            running = True
            ready += 1
    if reason == "Completed" and running:
        ready_condition = any(c.get("type") == "Ready" for c in status.get("conditions") or [])
        reason = "Running" if ready_condition else "NotReady"
    if obj["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    restart_text = str(restarts)
    if restarts and last_restart:
        restart_text = f"{restarts} ({_since(last_restart, now)} ago)"
    ips = [p.get("ip") for p in status.get("podIPs") or [] if p.get("ip")] or [status.get("podIP")]
    return [
        obj["metadata"]["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        restart_text,
        _age(obj, now),
        ips[0] or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


def _node(obj: dict, now: float) -> list:
    status, labels = obj.get("status") or {}, obj["metadata"].get("labels") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    # printNode: Ready when True, NotReady for False and Unknown alike; Unknown only without the condition.
    state = "Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"
    if (obj.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = sorted(
        {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1]}
        | {v for k, v in labels.items() if k == "kubernetes.io/role" and v}
    )
    addresses: dict = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [
        obj["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        _age(obj, now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _namespace(obj: dict, now: float) -> list:
    return [obj["metadata"]["name"], (obj.get("status") or {}).get("phase", ""), _age(obj, now)]


def _quota(obj: dict, now: float) -> list:
    status = obj.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    request: list[str] = []
    limit: list[str] = []
    for name in sorted(hard):
        column = limit if name.split(".")[0] == "limits" and "." in name else request
        column.append(f"{name}: {used.get(name, '0')}/{hard[name]}")
    return [obj["metadata"]["name"], _age(obj, now), ", ".join(request), ", ".join(limit)]


def _event(obj: dict, now: float) -> list:
    first = _since(obj.get("firstTimestamp") or obj.get("eventTime"), now)
    last = _since(obj["lastTimestamp"], now) if obj.get("lastTimestamp") else first
    involved = obj.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    origin = source.get("component") or obj.get("reportingComponent") or ""
    if source.get("host"):
        origin += f", {source['host']}"
    return [
        last,
        obj.get("type", ""),
        obj.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        origin,
        (obj.get("message") or "").strip(),
        first,
        obj.get("count", 1),
        obj["metadata"]["name"],
    ]


def _job(obj: dict, now: float) -> list:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    succeeded = status.get("succeeded", 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    else:
        completions = f"{succeeded}/1 of {spec.get('parallelism', 1)}"
    duration = ""
    if status.get("startTime"):
        end = parse_time(status["completionTime"]) if status.get("completionTime") else now
        duration = human_duration(end - parse_time(status["startTime"]))
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    if "Complete" in true:
        state = "Complete"
    elif "Failed" in true:
        state = "Failed"
    elif obj["metadata"].get("deletionTimestamp"):
        state = "Terminating"
    elif "Suspended" in true:
        state = "Suspended"
    elif "FailureTarget" in true:
        state = "FailureTarget"
    elif "SuccessCriteriaMet" in true:
        state = "SuccessCriteriaMet"
    else:
        state = "Running"
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    return [
        obj["metadata"]["name"],
        state,
        completions,
        duration,
        _age(obj, now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


def _priority_class(obj: dict, now: float) -> list:
    return [
        obj["metadata"]["name"],
        obj.get("value", 0),
        bool(obj.get("globalDefault", False)),
        _age(obj, now),
        obj.get("preemptionPolicy", ""),
    ]


def _lease(obj: dict, now: float) -> list:
    return [obj["metadata"]["name"], (obj.get("spec") or {}).get("holderIdentity") or "", _age(obj, now)]


def _webhooks(obj: dict, now: float) -> list:
    return [obj["metadata"]["name"], len(obj.get("webhooks") or []), _age(obj, now)]


def _role(obj: dict, now: float) -> list:
    return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp", "")]


def _binding(obj: dict, now: float) -> list:
    ref = obj.get("roleRef") or {}
    subjects = obj.get("subjects") or []

    def names(kind: str) -> str:
        return ", ".join(
            (f"{s.get('namespace')}/{s['name']}" if kind == "ServiceAccount" else s["name"])
            for s in subjects
            if s.get("kind") == kind and s.get("name")
        )

    return [
        obj["metadata"]["name"],
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(obj, now),
        names("User"),
        names("Group"),
        names("ServiceAccount"),
    ]


# --- CRD columns (additionalPrinterColumns) ----------------------------------------------------


def _last_condition_type(obj: dict) -> str | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return conditions[-1].get("type") if conditions else None


def _condition_status(kind: str) -> Callable[[dict], object]:
    def read(obj: dict) -> object:
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == kind:
                return c.get("status")
        return None

    return read


def _crd_printer(columns: list[tuple[str, str, str, Callable[[dict], object]]], priorities: tuple[int, ...] = ()):
    """A CRD's additionalPrinterColumns: (name, type, description, reader); priorities 0 or 1 (wide)."""

    def cells(obj: dict, now: float) -> list:
        row: list = [obj["metadata"]["name"]]
        for _name, ctype, _doc, read in columns:
            value = read(obj)
            if ctype == "date":
                value = _since(value, now) if isinstance(value, str) else None
            row.append(value)
        return row

    priority = list(priorities) + [0] * (len(columns) - len(priorities))
    definitions = [NAME] + [
        _col(n, t, priority=p, description=d) for (n, t, d, _r), p in zip(columns, priority, strict=True)
    ]
    return definitions, cells


def _creation(obj: dict) -> object:
    return obj["metadata"].get("creationTimestamp")


STATE_AGE = _crd_printer([("State", "string", "", _last_condition_type), ("Age", "date", "", _creation)])
JOBSET = _crd_printer(
    [
        ("TerminalState", "string", "Final state of JobSet", lambda o: (o.get("status") or {}).get("terminalState")),
        ("Restarts", "string", "Number of restarts", lambda o: (o.get("status") or {}).get("restarts")),
        ("Completed", "string", "", _condition_status("Completed")),
        ("Suspended", "string", "JobSet suspended", lambda o: (o.get("spec") or {}).get("suspend")),
        ("Age", "date", "Time this JobSet was created", _creation),
    ]
)


# A CRD without additionalPrinterColumns: the API server's default (Name, Created At -> Age).
CRD_DEFAULT = _crd_printer([("Age", "date", AGE_DOC, _creation)])

PRINTERS: dict[tuple[str, str], tuple[list[dict], Callable[[dict, float], list]]] = {
    ("", "pods"): (
        [
            NAME,
            _col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", description="The aggregate status of the containers in this pod."),
            _col("Restarts", description="The number of times the containers in this pod have been restarted."),
            AGE,
            _col("IP", priority=1, description="IP address allocated to the pod."),
            _col("Node", priority=1, description="Name of the node the pod is assigned to."),
            _col("Nominated Node", priority=1, description="Name of the node the pod is nominated to."),
            _col("Readiness Gates", priority=1, description="Pod readiness gates."),
        ],
        _pod,
    ),
    ("", "nodes"): (
        [
            NAME,
            _col("Status", description="The status of the node"),
            _col("Roles", description="The roles of the node"),
            AGE,
            _col("Version", description="Kubelet Version reported by the node."),
            _col("Internal-IP", priority=1, description="List of addresses reachable to the node."),
            _col("External-IP", priority=1, description="List of addresses reachable to the node."),
            _col("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release."),
            _col("Kernel-Version", priority=1, description="Kernel Version reported by the node."),
            _col("Container-Runtime", priority=1, description="Container Runtime Version reported by the node."),
        ],
        _node,
    ),
    ("", "namespaces"): (
        [NAME, _col("Status", description="The status of the namespace"), AGE],
        _namespace,
    ),
    ("", "resourcequotas"): (
        [
            NAME,
            AGE,
            _col(
                "Request", description="Request represents a minimum amount of cpu/memory that a container may consume."
            ),
            _col("Limit", description="Limits control the maximum amount of cpu/memory that a container may use."),
        ],
        _quota,
    ),
    ("", "events"): (
        [
            _col("Last Seen"),
            _col("Type"),
            _col("Reason"),
            _col("Object"),
            _col("Subobject", priority=1),
            _col("Source", priority=1),
            _col("Message"),
            _col("First Seen", priority=1),
            _col("Count", priority=1),
            _col("Name", priority=1),
        ],
        _event,
    ),
    ("", "services"): (
        [
            NAME,
            _col("Type", description="The type of the service."),
            _col("Cluster-IP", description="The IP address of the service within the cluster."),
            _col("External-IP", description="The external IP addresses of the service."),
            _col("Port(s)", description="The ports the service serves."),
            AGE,
            _col("Selector", priority=1, description="The pods the service selects."),
        ],
        lambda obj, now: service.cells(obj, _age(obj, now)),
    ),
    ("batch", "jobs"): (
        [
            NAME,
            _col("Status", description="Status of the job."),
            _col("Completions", description="The completion status of the job."),
            _col("Duration", description="Time required to complete the job."),
            AGE,
            _col("Containers", priority=1, description="Names of each container in the template."),
            _col("Images", priority=1, description="Images referenced by each container in the template."),
            _col("Selector", priority=1, description="A label query over pods that should match the pod count."),
        ],
        _job,
    ),
    ("scheduling.k8s.io", "priorityclasses"): (
        [
            NAME,
            _col("Value", "integer", description="The value of this priority class."),
            _col("Global-Default", "boolean", description="Whether this is the default priority class."),
            AGE,
            _col("PreemptionPolicy", description="The policy for preempting pods with lower priority."),
        ],
        _priority_class,
    ),
    ("coordination.k8s.io", "leases"): ([NAME, _col("Holder", description="The holder of the lease"), AGE], _lease),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): (
        [NAME, _col("Webhooks", "integer"), AGE],
        _webhooks,
    ),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): (
        [NAME, _col("Webhooks", "integer"), AGE],
        _webhooks,
    ),
    ("rbac.authorization.k8s.io", "roles"): ([NAME, _col("Created At", "date")], _role),
    ("rbac.authorization.k8s.io", "clusterroles"): ([NAME, _col("Created At", "date")], _role),
    ("rbac.authorization.k8s.io", "rolebindings"): (
        [
            NAME,
            _col("Role"),
            AGE,
            _col("Users", priority=1),
            _col("Groups", priority=1),
            _col("ServiceAccounts", priority=1),
        ],
        _binding,
    ),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): (
        [
            NAME,
            _col("Role"),
            AGE,
            _col("Users", priority=1),
            _col("Groups", priority=1),
            _col("ServiceAccounts", priority=1),
        ],
        _binding,
    ),
    ("kubeflow.org", "tfjobs"): STATE_AGE,
    ("kubeflow.org", "pytorchjobs"): STATE_AGE,
    ("kubeflow.org", "xgboostjobs"): STATE_AGE,
    ("kubeflow.org", "paddlejobs"): STATE_AGE,
    ("kubeflow.org", "jaxjobs"): STATE_AGE,
    ("trainer.kubeflow.org", "trainjobs"): STATE_AGE,
    ("jobset.x-k8s.io", "jobsets"): JOBSET,
    (queuedjob.GROUP, queuedjob.PLURAL): _crd_printer(
        [(n, t, d, queuedjob.reader(path)) for n, t, path, d, _p in queuedjob.PRINTER_COLUMNS],
        tuple(p for *_rest, p in queuedjob.PRINTER_COLUMNS),
    ),
}


def _row(obj: dict, cells: list, include: str) -> dict:
    row: dict = {"cells": cells}
    if include == "Object":
        row["object"] = obj
    elif include != "None":
        row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
    return row


def table(group: str, plural: str, objects: list[dict], now: float, meta: dict, include: str = "Metadata") -> dict:
    """A meta.k8s.io/v1 Table of ``objects``; ``include`` is includeObject (None|Metadata|Object)."""
    definitions, cells = PRINTERS.get((group, plural), CRD_DEFAULT)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": definitions,
        "rows": [_row(obj, cells(obj, now), include) for obj in objects],
    }
