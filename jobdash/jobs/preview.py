"""What the submit page shows while people type: the problems of a manifest with the line
each one is on, or its demand and whether it fits the namespace's quota right now.
Reads only; nothing is stored."""

import re
from dataclasses import dataclass, field

import yaml

from queueing.quota_fit import quota_lines
from queueing.safe_yaml import DEFAULT_MAX_DEPTH

from . import card_fit, node_fit, selectors, services, units
from .budgets import budget_words
from .exceptions import InvalidInput
from .presenters import page_demand


class _ShallowLoader(yaml.SafeLoader):
    """compose() recurses once per nesting level: past the depth the strict loader allows,
    stop instead of exhausting the stack (the text may be the very document refused for
    its depth)."""

    max_depth = DEFAULT_MAX_DEPTH + 1

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise yaml.YAMLError("nested too deeply to map lines")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_LINE_IN_MESSAGE = re.compile(r"\bline (\d+)\b")


def path_lines(text: str, paths: list[str]) -> dict[str, int]:
    """1-based line of each dotted path (`a.b[0].c`) in the YAML text, as far as the
    path exists; a missing key points at its parent, the place to add it.

    Also called on the text of a refused manifest, to place its errors: the size was
    checked, compose builds nodes without constructing any Python object (an alias is a
    reference to a node, not a copy) and _ShallowLoader bounds the nesting."""
    try:
        root = yaml.compose(text, Loader=_ShallowLoader)
    except yaml.YAMLError:
        return {}
    lines = {}
    for path in paths:
        node = root
        for key, index in _SEGMENT.findall(path):
            child = None
            if key and isinstance(node, yaml.MappingNode):
                child = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
                if child is not None and isinstance(child, yaml.ScalarNode):
                    # Point at the key, where the value starts, not at a multi-line block's end.
                    child = next(k for k, v in node.value if v is child)
            elif index and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
                child = node.value[int(index)]
            if child is None:
                break
            node = child
        if node is not None:
            lines[path] = node.start_mark.line + 1
    return lines


@dataclass
class Preview:
    problems: list[dict] = field(default_factory=list)  # path, message, line
    too_large: bool = False
    namespace: str = ""
    name: str = ""  # the job's (its metadata.name, or the name assigned from generateName)
    kind: str = ""
    demand: dict = field(default_factory=dict)
    fit: list[dict] = field(default_factory=list)  # key, needed, free, hard, ok, never: the keys it asks of
    fits: bool | None = None  # None: no quota known (no ResourceQuota, or no cycle yet)
    unasked: int = 0  # the quota's keys it asks nothing of: not in `fit`, they cannot stop it
    queued_ahead: int = 0
    cards: list[dict] = field(default_factory=list)  # card_fit.card_checks: pod sets asking a share of a card
    never: str = ""  # node_fit.never_fits: why no node could ever hold one of its pods
    budget: str = ""  # the namespace's GPU-hour budget, once 80 % of it is used (presenters.budget_words)
    # What the form submits besides one job (stream_preview): a workflow's name, its limit and
    # its jobs ({"name", "kind", "after", "verdict", "ok", "preview"}); an array's
    # {"count", "first", "last", "limit"}.
    workflow: str = ""
    concurrency: int | None = None
    jobs: list[dict] = field(default_factory=list)
    array: dict | None = None


def problem_rows(text: str, error: InvalidInput) -> list[dict]:
    """An InvalidInput's problems, each with the line of `text` it is on (as far as known)."""
    lines = {} if error.status == 413 else path_lines(text, [p.path for p in error.problems if p.path])
    rows = []
    for p in error.problems:
        line = lines.get(p.path)
        if line is None and not p.path:
            found = _LINE_IN_MESSAGE.search(p.message)
            line = int(found.group(1)) if found else None
        rows.append({"path": p.path, "message": p.message, "line": line})
    return rows


def manifest_preview(user, text: str, namespace: str = "", name_index: int | None = None) -> Preview:
    """One manifest's check (`name_index`: an array's index, appended to its name as
    submitting appends it)."""
    preview = Preview()
    try:
        _, workload = services.manifest_check(text, name_index=name_index)
    except InvalidInput as error:
        preview.too_large = error.status == 413
        preview.problems = problem_rows(text, error)
        return preview
    try:  # its jobdash.io/* options (after, retries, checkpoints, ...), read as submitting reads them
        services.options_check(workload)
    except InvalidInput as error:
        preview.problems += problem_rows(text, error)
    name = workload.namespace or namespace
    if workload.namespace and namespace and workload.namespace != namespace:
        preview.problems.append(
            {
                "path": "metadata.namespace",
                "line": path_lines(text, ["metadata.namespace"]).get("metadata.namespace"),
                "message": f"is {workload.namespace!r} but {namespace!r} is chosen",
            }
        )
    quotas, nodes = selectors.cluster_quotas_and_nodes()
    judge(preview, workload, nodes)
    if not name:
        return preview
    visible = selectors.namespaces_visible_to(user).filter(name=name).first()
    if visible is None:
        preview.problems.append(
            {"path": "metadata.namespace", "line": None, "message": f"you are not a member of namespace {name!r}"}
        )
        return preview
    fit_quota(preview, workload, name, quotas.get(name))
    if preview.fits is not None:
        preview.queued_ahead = visible.jobs.filter(state="Queued").count()
    return preview


def judge(preview: Preview, workload, nodes: list) -> None:
    """What the job asks and whether any node could ever hold it (the nodes last published)."""
    preview.name, preview.kind = workload.name, workload.kind
    preview.demand = page_demand(workload.to_json())
    preview.never = node_fit.never_fits(workload, nodes)
    if card_fit.share_demands(workload):
        preview.cards = card_fit.card_checks(workload, nodes)


def fit_quota(preview: Preview, workload, namespace: str, quota: dict | None) -> None:
    """Whether the job fits the namespace's free quota now, key by key: the keys it asks of.
    A key it asks nothing of never stops it (the planner's quota_check: a CPU-only job is
    admitted in a namespace whose GPU quota is full), so it is only counted (`unasked`); the
    keys that stop it are always among those it asks of."""
    preview.namespace = namespace
    preview.budget = budget_words(namespace, (quota or {}).get("budget"))
    if not quota or not quota.get("hard"):
        return
    lines = quota_lines(workload.quota_demand(), quota["hard"], quota.get("used", {}), quota.get("reserved", {}))
    for fit in lines:
        if not fit.needed and not fit.short:
            preview.unasked += 1
            continue
        needed, free, hard = units.readable(units.resource_of(fit.key), fit.needed, max(fit.free, 0), fit.hard)
        preview.fit.append(
            {"key": fit.key, "needed": needed, "free": free, "hard": hard, "ok": not fit.short, "never": fit.never}
        )
    preview.fits = not any(fit.short for fit in lines)
