"""Text PostgreSQL cannot store: a NUL character (refused in text and in jsonb) and lone
UTF-16 surrogates (no UTF-8 encoding). Such input is refused at the door with a 400 that
names the field, instead of failing as a 500 at the INSERT or the query."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character, which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate, which is not valid UTF-8"
    return None


def tree_problem(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first string (key or value) in a JSON-like tree that cannot be stored, as
    (path, problem). Iterative: a tree nested 100,000 deep must not exhaust the stack."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            problem = text_problem(node)
            if problem:
                return where, problem
        elif isinstance(node, dict):
            for key, child in node.items():
                child_path = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and (problem := text_problem(key)):
                    return where or "(key)", f"a key {problem}"
                stack.append((child, child_path))
        elif isinstance(node, list | tuple):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(node))
    return None


def params_problem(params: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """The first query or form parameter (name or value) that cannot be stored."""
    for name, value in params:
        problem = text_problem(name) or text_problem(value)
        if problem:
            return (name if not text_problem(name) else "(parameter name)"), problem
    return None
