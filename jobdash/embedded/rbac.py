"""Who may do what on `make run`'s cluster, as a real cluster has it (kubesim with RBAC on).

- jobdash's own identity is bound to the ClusterRole deploy/base ships for jobdash's
  controller, read from that very file, with deploy's ClusterRoleBinding (its subject, the
  ServiceAccount jobdash/jobdash, is the identity of var/jobdash.kubeconfig): whatever the
  dispatcher or the webhook's reads need and deploy lacks fails here first.
- deploy's job-roles.yaml, so that the default roles `edit` and `view` cover the job kinds
  as they would on a cluster where jobdash is installed.
- the demo member edits jobs in one namespace only, through a Role and RoleBinding of the
  kind Kubeflow's profiles give their members (kubeflow-edit): the managed kinds (from the
  adapters' registry), pods (read, logs, create: plain pods are queued too), events and the
  quota (read), QueuedJobs (read, delete to cancel). No quota writes, nothing cluster-wide,
  nothing in another namespace.
- the cluster admin is in `system:masters`, which kubesim binds to `cluster-admin`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from jobdash.cluster import kinds

DEPLOY = Path(__file__).resolve().parents[2] / "deploy/base"
RBAC_GROUP = "rbac.authorization.k8s.io"
MEMBER_ROLE = "jobdash-member"
# The people of embedded_cluster.yaml's users who are members, and of which namespace.
MEMBERS = {"demo": "team-a"}
JOB_VERBS = ["create", "get", "list", "watch", "update", "patch", "delete"]
READ = ["get", "list", "watch"]


def deploy_objects() -> list[dict[str, Any]]:
    """deploy/base's ClusterRoles and ClusterRoleBindings (the ServiceAccounts are kubesim's
    configured users), as `kubectl apply -k deploy/base` creates them."""
    found = []
    for name in ("rbac.yaml", "job-roles.yaml"):
        for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
            if doc and doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                found.append(doc)
    return found


def member_rules() -> list[dict[str, Any]]:
    by_group: dict[str, list[str]] = {}
    for key in kinds.keys():
        group, _version, plural = kinds.group_version_plural(key)
        by_group.setdefault(group, []).append(plural)
    rules = [{"apiGroups": [group], "resources": plurals, "verbs": JOB_VERBS} for group, plurals in by_group.items()]
    return rules + [
        {"apiGroups": [""], "resources": ["pods", "pods/log", "events", "resourcequotas"], "verbs": READ},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
        {"apiGroups": ["jobdash.io"], "resources": ["queuedjobs"], "verbs": [*READ, "delete"]},
    ]


def member_objects(user: str, namespace: str) -> list[dict[str, Any]]:
    meta = {"name": MEMBER_ROLE, "namespace": namespace}
    role = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": meta, "rules": member_rules()}
    binding = {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{user}-{MEMBER_ROLE}", "namespace": namespace},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": MEMBER_ROLE},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "User", "name": user}],
    }
    return [role, binding]


def cluster_objects(members: dict[str, str]) -> list[dict[str, Any]]:
    """Every RBAC object the stack creates with its cluster; `members`: user -> namespace."""
    objects = deploy_objects()
    for user, namespace in members.items():
        objects += member_objects(user, namespace)
    return objects
