"""Which clusters jobdash dispatches to: JOBDASH_CLUSTERS names a YAML file, one entry per
cluster, checked when a process starts (a bad file stops it with the field named)::

    clusters:
      - name: east                 # a DNS label: jobs and nodes are told by it
        kubeconfig: /etc/jobdash/east.kubeconfig
        context: east-admin        # optional: the kubeconfig's current context otherwise
        labels: {gpu: a100, region: eu}
      - name: west
        incluster: true            # the cluster jobdash runs in: its service account

Unset, jobdash speaks to the one cluster JOBDASH_CLUSTER and KUBECONFIG name, as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.core.exceptions import ImproperlyConfigured

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
KEYS = {"name", "kubeconfig", "context", "incluster", "labels"}


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    kubeconfig: str | None = None  # a file; None with incluster
    context: str | None = None
    incluster: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)


def load(path: str | Path) -> list[ClusterConfig]:
    """The clusters a JOBDASH_CLUSTERS file names; ImproperlyConfigured naming the field."""
    try:
        document = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: cannot read {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {path} is not YAML: {error}") from None
    entries = document.get("clusters") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {path}: `clusters` must be a list of one or more clusters")
    found = [_entry(entry, f"clusters[{number}]", Path(path).parent) for number, entry in enumerate(entries)]
    names = [cluster.name for cluster in found]
    for name in names:
        if names.count(name) > 1:
            raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {path}: the name {name!r} is given to two clusters")
    return found


def _entry(entry: object, where: str, base: Path) -> ClusterConfig:
    if not isinstance(entry, dict):
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {where} must be a mapping")
    unknown = set(entry) - KEYS
    if unknown:
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {where}: unknown key(s) {', '.join(sorted(unknown))}")
    name = entry.get("name")
    if not isinstance(name, str) or not DNS_LABEL.match(name):
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {where}.name must be a DNS label (a-z, 0-9, -), got {name!r}")
    incluster = entry.get("incluster", False)
    if not isinstance(incluster, bool):
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {where}.incluster must be true or false")
    kubeconfig = entry.get("kubeconfig")
    if incluster == (kubeconfig is not None):
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {where}: give exactly one of kubeconfig and incluster")
    if kubeconfig is not None:
        resolved = base / str(kubeconfig)
        if not resolved.is_file():
            raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {where}.kubeconfig: no file {resolved}")
        kubeconfig = str(resolved)
    context = entry.get("context")
    if context is not None and not isinstance(context, str):
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {where}.context must be a string")
    labels = entry.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise ImproperlyConfigured(f"JOBDASH_CLUSTERS: {where}.labels must map strings to strings")
    return ClusterConfig(name, kubeconfig, context, incluster, dict(labels))


def write(path: Path, clusters: list[ClusterConfig]) -> Path:
    """A JOBDASH_CLUSTERS file for `clusters` (make run writes one for its embedded clusters)."""
    entries = []
    for cluster in clusters:
        entry: dict = {"name": cluster.name}
        if cluster.incluster:
            entry["incluster"] = True
        else:
            entry["kubeconfig"] = cluster.kubeconfig
        if cluster.context:
            entry["context"] = cluster.context
        if cluster.labels:
            entry["labels"] = dict(cluster.labels)
        entries.append(entry)
    path.write_text(yaml.safe_dump({"clusters": entries}, sort_keys=False))
    return path
