"""The dependency direction, read from the source: jobs/ (models, services, selectors, the
web) never imports the dispatcher, and the queueing core imports no framework or I/O."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, relative imports resolved to absolute names."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            # `from jobdash import dispatch` imports jobdash.dispatch
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def offending(folder: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        bad = sorted(m for m in imported_modules(path) if any(m == f or m.startswith(f + ".") for f in forbidden))
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    return found


def test_the_import_reader_resolves_relative_and_absolute_imports():
    modules = imported_modules(ROOT / "jobdash/dispatch/cycle.py")
    assert {"jobdash.jobs.models", "jobdash.dispatch.tracker", "queueing", "django.conf"} <= modules


def test_jobs_imports_nothing_from_the_dispatcher():
    assert offending("jobdash/jobs", ("jobdash.dispatch",)) == {}


def test_the_queueing_core_imports_no_framework_cluster_client_or_jobdash():
    assert offending("queueing", ("django", "kubernetes", "jobdash", "rest_framework", "celery")) == {}
