"""No circle of imports among the modules of jobdash/, queueing/ and webhooks/, read from the
source: every import a module runs, at its top or inside a function, but not those under
``if TYPE_CHECKING:`` (never run).  A circle is reported as the modules in it, each with the
file and line of the import that leads to the next.

Importing a package's module runs the package's ``__init__`` first; that is not counted as an
import of the package by its module (every package that gathers its modules would be a circle).
"""

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.jobdash.test_layering import ROOT, imports, module_name

PACKAGES = ("jobdash", "queueing", "webhooks")

# module -> {imported module: (file, line) of the first import of it}
Graph = Mapping[str, Mapping[str, tuple[str, int]]]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` but those only a type checker reads (an ``if TYPE_CHECKING:``
    body; its ``else`` runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def run_imports(path: Path, root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """(line, module) of every import ``path`` runs (test_layering's reading, without the
    type checker's imports)."""
    return imports(path, root, nodes=_run_nodes)


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, dict[str, tuple[str, int]]]:
    files = sorted(path for package in packages for path in (root / package).rglob("*.py"))
    modules = {module_name(path, root): path for path in files}
    graph: dict[str, dict[str, tuple[str, int]]] = {name: {} for name in modules}
    for name, path in modules.items():
        for line, target in sorted(run_imports(path, root)):
            if target in modules and target != name:
                graph[name].setdefault(target, (str(path.relative_to(root)), line))
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan's), as the
    modules in import order, the first one again last; sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(_circle_in(graph, group) for group in groups)


def _circle_in(graph: Graph, group: set[str]) -> list[str]:
    """The shortest circle through the group's first module (breadth first, inside the group)."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph[module]):
                if target == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if target in group and target not in came_from:
                    came_from[target] = module
                    following.append(target)
        frontier = following
    raise AssertionError(f"no circle in {sorted(group)}")


def described(graph: Graph, circle: list[str]) -> str:
    steps = [f"  {a} -> {b}  ({':'.join(map(str, graph[a][b]))})" for a, b in zip(circle, circle[1:], strict=False)]
    return " -> ".join(circle) + "\n" + "\n".join(steps)


def test_no_module_of_jobdash_queueing_or_webhooks_imports_itself_round_a_circle():
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(described(graph, circle) for circle in found)


def write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_checker_finds_circles_through_functions_and_not_through_type_checking(tmp_path):
    for package in PACKAGES:
        write(tmp_path, f"{package}/__init__.py", "")
    # a circle closed by an import inside a function
    write(tmp_path, "queueing/a.py", "from . import b\n")
    write(tmp_path, "queueing/b.py", "def f():\n    from .c import thing\n")
    write(tmp_path, "queueing/c.py", "import queueing.a\n")
    # one only a type checker follows: no circle
    write(tmp_path, "queueing/d.py", "from .e import E\n")
    write(tmp_path, "queueing/e.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n")
    # ... but what its else runs counts, across packages too
    write(
        tmp_path,
        "webhooks/w.py",
        "import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    from jobdash import j\n",
    )
    write(tmp_path, "jobdash/j.py", "from webhooks.w import x\n")
    graph = import_graph(tmp_path)
    assert circles(graph) == [
        ["jobdash.j", "webhooks.w", "jobdash.j"],
        ["queueing.a", "queueing.b", "queueing.c", "queueing.a"],
    ]
    assert described(graph, ["queueing.a", "queueing.b", "queueing.c", "queueing.a"]).splitlines()[2] == (
        "  queueing.b -> queueing.c  (queueing/b.py:2)"
    )
