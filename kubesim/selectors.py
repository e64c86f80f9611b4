"""Label and field selectors with the API server's grammar.

Label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``,
comma-separated (commas inside parentheses belong to the set). Field selectors:
``f=v``, ``f==v``, ``f!=v`` on the fields each resource supports; anything else is
400 ``field label not supported`` as on a real cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .errors import bad_request

Predicate = Callable[[dict], bool]

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET_TERM = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_EQ_TERM = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_TERM = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_terms(text: str) -> list[str]:
    terms, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def parse_label_selector(text: str | None) -> Callable[[dict], bool] | None:
    """Return a predicate over a labels dict, or None for 'everything'."""
    if not text or not text.strip():
        return None
    checks: list[Callable[[dict], bool]] = []
    for term in _split_terms(text):
        if m := _SET_TERM.match(term):
            key, op, values = m.group(1), m.group(3), {v.strip() for v in m.group(4).split(",") if v.strip()}
            if op == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif m := _EQ_TERM.match(term):
            key, op, value = m.group(1), m.group(3), m.group(4)
            if op == "!=":
                checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif m := _EXISTS_TERM.match(term):
            negate, key = m.group(1) == "!", m.group(2)
            if negate:
                checks.append(lambda labels, k=key: k not in labels)
            else:
                checks.append(lambda labels, k=key: k in labels)
        else:
            raise bad_request(f"unable to parse requirement: invalid label selector term {term.strip()!r}")
    return lambda labels: all(check(labels) for check in checks)


def match_label_selector_object(selector: dict | None, labels: dict) -> bool:
    """metav1.LabelSelector (matchLabels + matchExpressions); empty or None selects everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _path_getter(path: str) -> Callable[[dict], str]:
    parts = path.split(".")

    def get(obj: dict) -> str:
        value: object = obj
        for part in parts:
            if not isinstance(value, dict):
                return ""
            value = value.get(part)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


def parse_field_selector(text: str | None, supported: frozenset[str]) -> Predicate | None:
    """Return a predicate over a whole object, or None for 'everything'."""
    if not text or not text.strip():
        return None
    checks: list[Predicate] = []
    for term in text.split(","):
        term = term.strip()
        if not term:
            continue
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$", term)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, value = m.group(1), m.group(2), m.group(3)
        if field not in supported:
            raise bad_request(f"field label not supported: {field}")
        getter = _path_getter(field)
        if op == "!=":
            checks.append(lambda obj, g=getter, v=value: g(obj) != v)
        else:
            checks.append(lambda obj, g=getter, v=value: g(obj) == v)
    return lambda obj: all(check(obj) for check in checks)
