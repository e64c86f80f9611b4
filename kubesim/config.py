"""kubesim's configuration file (YAML) and the kubeconfig it writes.

speed: 1.0                 # cluster seconds per real second (real clock)
clock: real                # or "manual": time moves only when told (tests, replays)
nodes:                     # absent: 3 nodes of 16 cpu / 64Gi; [] : no nodes
  - prefix: gpu-node       # nodes gpu-node-0 .. gpu-node-3 (or name: for one node)
    count: 4
    capacity: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "8", pods: "110"}
    allocatable: {...}     # optional, defaults to capacity
    labels: {pool: gpu}
    annotations: {hami.io/node-nvidia-register: "GPU-0,10,32768,100,NVIDIA-Tesla V100,0,true:"}
    taints: [{key: gpu, value: "true", effect: NoSchedule}]
    unschedulable: false
namespaces:
  - name: team-a
    labels: {team: a}
    quota: {requests.cpu: "64", requests.memory: 256Gi, requests.nvidia.com/gpu: "16"}
    quota_name: compute    # optional, default "quota"
users:
  - token: jobdash-token
    username: system:serviceaccount:jobdash:jobdash
    groups: [system:serviceaccounts]
services: {"jobdash/jobdash-webhook": "http://127.0.0.1:8000"}  # webhook service refs
admission_config: admission.yaml  # kube-apiserver's --admission-control-config-file: the
                           # client certificates presented to webhooks (relative to this file)
kubelet: {start_delay_seconds: 1.0}
unpullable_images: [repo/x:v1]  # image references (exact match) the kubelet can never pull: their
                           # pods stay Pending in ErrImagePull/ImagePullBackOff, as do images
                           # tagged does-not-exist
scheduler:                 # NodeResourcesFit's scoringStrategy (kube-scheduler's checks, nodefit.py)
  scoring: LeastAllocated  # or MostAllocated, RequestedToCapacityRatio
  resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]  # the default; weights 1..100
  shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]  # RequestedToCapacityRatio only
operator: {backoff_seconds: 1.0, max_backoff_seconds: 30.0}
workload: {default_duration_seconds: 60.0, default_checkpoint_seconds: 1800.0}
watch: {history: 20000, bookmark_interval_seconds: 30.0}
faults: [{verbs: [create], resources: [tfjobs], status: 429, error_rate: 0.1, latency_ms: 5}]
objects: []                # any further manifests to create at start (webhook configs, ...)
tls: false                 # true: serve HTTPS with a self-signed CA (in the kubeconfig), as
                           # `serve --tls` does; kubectl sends its token only over HTTPS
lent_pools:                # nodes lent for a while (kubesim plays the lender's controller, lentpools.py)
  - name: night-a          # DNS-1123 label; annotation jobdash.io/lent-pool on its nodes
    prefix: night-a        # nodes night-a-0 .. (or names: [n1, n2])
    count: 2
    capacity: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "8"}
    labels: {pool: night-a}
    annotations: {}
    schedule: {start: "22:00", end: "08:00", timezone: Europe/Berlin}  # nightly, wall clock in
                           # the zone (end <= start: the next day); or {until: "2026-11-28T08:00:00Z"}:
                           # lent from kubesim's start until then, once
    notice_seconds: 1800   # cordoned this long before the reclaim (default 1800)
rbac: false                # true: authorize requests with the RBAC objects (Roles, ClusterRoles
                           # and their bindings; kube-apiserver's default roles, system:masters
                           # bound to cluster-admin, admin/edit/view aggregated); false: any
                           # authenticated user may do everything
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .nodefit import validate_scoring
from .tide import parse_schedule

DEFAULT_USERS = [{"token": "admin-token", "username": "kubernetes-admin", "groups": ["system:masters"]}]
# Used when the config has no `nodes` key at all (an explicit empty list means no nodes).
DEFAULT_NODES = [{"prefix": "node", "count": 3, "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}]
# A healthy kubelet's node conditions, in the order it posts them.
NODE_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)
_TOP_KEYS = {
    "speed",
    "clock",
    "nodes",
    "namespaces",
    "users",
    "services",
    "admission_config",
    "kubelet",
    "scheduler",
    "operator",
    "workload",
    "watch",
    "faults",
    "objects",
    "start_time",
    "tls",
    "rbac",
    "lent_pools",
    "unpullable_images",
}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LENT_KEYS = {"name", "prefix", "names", "count", "capacity", "allocatable", "labels", "annotations", "taints"}
_LENT_KEYS |= {"schedule", "notice_seconds"}


@dataclass
class Config:
    speed: float = 1.0
    clock: str = "real"
    start_time: float | None = None
    nodes: list[dict] = field(default_factory=list)
    namespaces: list[dict] = field(default_factory=list)
    users: list[dict] = field(default_factory=lambda: [dict(u) for u in DEFAULT_USERS])
    services: dict[str, str] = field(default_factory=dict)
    admission_config: str | None = None
    start_delay_seconds: float = 1.0
    scheduler_scoring: str = "LeastAllocated"
    scheduler_resources: list[dict] = field(default_factory=list)
    scheduler_shape: list[dict] = field(default_factory=list)
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 30.0
    default_duration_seconds: float = 60.0
    default_checkpoint_seconds: float = 1800.0
    watch_history: int = 20000
    bookmark_interval_seconds: float = 30.0
    faults: list[dict] = field(default_factory=list)
    objects: list[dict] = field(default_factory=list)
    tls: bool = False
    rbac: bool = False
    lent_pools: list[dict] = field(default_factory=list)
    unpullable_images: list[str] = field(default_factory=list)


def _section(data: dict, name: str, keys: set[str]) -> dict:
    section = data.get(name) or {}
    if not isinstance(section, dict):
        raise ValueError(f"{name}: must be a mapping")
    unknown = set(section) - keys
    if unknown:
        raise ValueError(f"{name}: unknown keys {sorted(unknown)}")
    return section


def from_dict(data: dict | None) -> Config:
    data = dict(data or {})
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ValueError(f"unknown kubesim config keys {sorted(unknown)}; known: {sorted(_TOP_KEYS)}")
    config = Config()
    config.speed = float(data.get("speed", 1.0))
    if config.speed <= 0:
        raise ValueError("speed: must be positive")
    config.clock = data.get("clock", "real")
    if config.clock not in ("real", "manual"):
        raise ValueError("clock: must be 'real' or 'manual'")
    config.start_time = data.get("start_time")
    for group in (data["nodes"] or []) if "nodes" in data else [dict(g) for g in DEFAULT_NODES]:
        if not isinstance(group, dict) or not (group.get("prefix") or group.get("name")):
            raise ValueError("nodes: every entry needs a prefix (or a name)")
        if not isinstance(group.get("capacity"), dict):
            raise ValueError(f"nodes: {group.get('prefix') or group.get('name')}: capacity is required")
        for key in ("labels", "annotations"):
            if not isinstance(group.get(key) or {}, dict):
                raise ValueError(f"nodes: {group.get('prefix') or group.get('name')}: {key} must be a mapping")
        config.nodes.append(group)
    for ns in data.get("namespaces") or []:
        if not isinstance(ns, dict) or not ns.get("name"):
            raise ValueError("namespaces: every entry needs a name")
        config.namespaces.append(ns)
    if "users" in data:
        config.users = []
        for user in data["users"] or []:
            if not isinstance(user, dict) or not user.get("token") or not user.get("username"):
                raise ValueError("users: every entry needs a token and a username")
            config.users.append(
                {
                    "token": str(user["token"]),
                    "username": user["username"],
                    "groups": list(user.get("groups") or []),
                    "uid": user.get("uid", ""),
                }
            )
    config.services = dict(data.get("services") or {})
    if data.get("admission_config") is not None:
        config.admission_config = str(data["admission_config"])
    config.start_delay_seconds = float(
        _section(data, "kubelet", {"start_delay_seconds"}).get("start_delay_seconds", 1.0)
    )
    scoring = validate_scoring(_section(data, "scheduler", {"scoring", "resources", "shape"}))
    config.scheduler_scoring, config.scheduler_resources, config.scheduler_shape = scoring
    operator = _section(data, "operator", {"backoff_seconds", "max_backoff_seconds"})
    config.backoff_seconds = float(operator.get("backoff_seconds", 1.0))
    config.max_backoff_seconds = float(operator.get("max_backoff_seconds", 30.0))
    workload = _section(data, "workload", {"default_duration_seconds", "default_checkpoint_seconds"})
    config.default_duration_seconds = float(workload.get("default_duration_seconds", 60.0))
    config.default_checkpoint_seconds = float(workload.get("default_checkpoint_seconds", 1800.0))
    watch = _section(data, "watch", {"history", "bookmark_interval_seconds"})
    config.watch_history = int(watch.get("history", 20000))
    config.bookmark_interval_seconds = float(watch.get("bookmark_interval_seconds", 30.0))
    config.faults = list(data.get("faults") or [])
    config.objects = list(data.get("objects") or [])
    for key in ("tls", "rbac"):
        if not isinstance(data.get(key, False), bool):
            raise ValueError(f"{key}: must be true or false")
    config.tls = bool(data.get("tls", False))
    config.rbac = bool(data.get("rbac", False))
    images = data.get("unpullable_images") or []
    if not isinstance(images, list) or not all(isinstance(i, str) and i for i in images):
        raise ValueError("unpullable_images: must be a list of image references")
    config.unpullable_images = list(images)
    config.lent_pools = _lent_pools(data.get("lent_pools") or [], {n for g in config.nodes for n in node_names(g)})
    return config


def _lent_pools(pools: object, taken: set[str]) -> list[dict]:
    """Each pool checked, with ``node_groups`` (node_objects' groups) and a parsed ``schedule``."""
    if not isinstance(pools, list):
        raise ValueError("lent_pools: must be a list")
    parsed: list[dict] = []
    for i, pool in enumerate(pools):
        where = f"lent_pools[{i}]"
        if not isinstance(pool, dict):
            raise ValueError(f"{where}: must be a mapping")
        unknown = set(pool) - _LENT_KEYS
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        name = pool.get("name")
        if not isinstance(name, str) or not _DNS_LABEL.match(name):
            raise ValueError(f"{where}.name: must be a DNS-1123 label (lower case, digits, '-'), not {name!r}")
        where = f"lent_pools[{name}]"
        if not isinstance(pool.get("capacity"), dict):
            raise ValueError(f"{where}.capacity: is required (a mapping)")
        for key in ("labels", "annotations", "allocatable"):
            if not isinstance(pool.get(key) or {}, dict):
                raise ValueError(f"{where}.{key}: must be a mapping")
        shared = {k: pool[k] for k in ("capacity", "allocatable", "labels", "annotations", "taints") if k in pool}
        if ("prefix" in pool) == ("names" in pool):
            raise ValueError(f"{where}: give either prefix (with count) or names")
        if "names" in pool:
            names = pool["names"]
            if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
                raise ValueError(f"{where}.names: must be a non-empty list of node names")
            groups = [{**shared, "name": n, "count": 1} for n in names]
        else:
            count = pool.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise ValueError(f"{where}.count: must be a positive integer, not {count!r}")
            groups = [{**shared, "prefix": str(pool["prefix"]), "count": count}]
        notice = pool.get("notice_seconds", 1800)
        if not isinstance(notice, int | float) or isinstance(notice, bool) or notice < 0:
            raise ValueError(f"{where}.notice_seconds: must be a number >= 0, not {notice!r}")
        schedule = parse_schedule(pool.get("schedule"), f"{where}.schedule")
        for group in groups:
            for node in node_names(group):
                if node in taken:
                    raise ValueError(f"{where}: node {node!r} is already another node's or pool's")
                taken.add(node)
        parsed.append({"name": name, "node_groups": groups, "schedule": schedule, "notice_seconds": float(notice)})
    return parsed


def load(path: str | Path) -> Config:
    config = from_dict(yaml.safe_load(Path(path).read_text()) or {})
    if config.admission_config:
        config.admission_config = str(Path(path).parent / config.admission_config)
    return config


def node_names(group: dict) -> list[str]:
    count = int(group.get("count", 1))
    if group.get("name") and count == 1:
        return [group["name"]]
    return [f"{group.get('prefix') or group['name']}-{i}" for i in range(count)]


def node_objects(group: dict) -> list[dict]:
    """The Node objects of one node group, as a kubelet would register them."""
    names = node_names(group)
    capacity = {k: str(v) for k, v in group["capacity"].items()}
    capacity.setdefault("pods", "110")
    allocatable = {k: str(v) for k, v in (group.get("allocatable") or capacity).items()}
    nodes: list[dict] = []
    for i, name in enumerate(names):
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **{k: str(v) for k, v in (group.get("labels") or {}).items()},
        }
        spec: dict = {}
        if group.get("taints"):
            spec["taints"] = [dict(t) for t in group["taints"]]
        if group.get("unschedulable"):
            spec["unschedulable"] = True
        metadata: dict = {"name": name, "labels": labels}
        if group.get("annotations"):  # e.g. a device plugin's registration (HAMi's cards)
            metadata["annotations"] = {k: str(v) for k, v in group["annotations"].items()}
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": metadata,
                "spec": spec,
                "status": {
                    "capacity": capacity,
                    "allocatable": allocatable,
                    "conditions": [
                        {"type": ctype, "status": status, "reason": reason, "message": message}
                        for ctype, status, reason, message in NODE_CONDITIONS
                    ],
                    "addresses": [
                        {"type": "InternalIP", "address": f"192.0.2.{(len(nodes) + i) % 250 + 1}"},
                        {"type": "Hostname", "address": name},
                    ],
                    "nodeInfo": {
                        "architecture": "amd64",
                        "bootID": "",
                        "containerRuntimeVersion": "kubesim://1",
                        "kernelVersion": "6.1.0",
                        "kubeProxyVersion": "v1.30.0",
                        "kubeletVersion": "v1.30.0",
                        "machineID": name,
                        "operatingSystem": "linux",
                        "osImage": "kubesim",
                        "systemUUID": name,
                    },
                },
            }
        )
    return nodes


def kubeconfig(url: str, users: list[dict], current: str | None = None, ca_pem: bytes | None = None) -> dict:
    """A kubeconfig with one context per configured user, named by the user name; with
    `ca_pem`, the CA that signed the server's certificate (HTTPS)."""
    names = [u["username"] for u in users]
    cluster: dict = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubesim", "cluster": cluster}],
        "users": [{"name": u["username"], "user": {"token": u["token"]}} for u in users],
        "contexts": [{"name": n, "context": {"cluster": "kubesim", "user": n, "namespace": "default"}} for n in names],
        "current-context": current or (names[0] if names else ""),
        "preferences": {},
    }


def write_kubeconfig(
    path: str | Path, url: str, users: list[dict], current: str | None = None, ca_pem: bytes | None = None
) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(kubeconfig(url, users, current, ca_pem), sort_keys=False))
    tmp.replace(path)  # atomic: a reader polling for the file never sees half of it
