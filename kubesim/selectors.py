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
    terms: list[str] = []
    current: list[str] = []
    depth = 0
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


def parse_label_selector(text: str | None) -> Predicate | None:
    """Return a predicate over a labels dict, or None for 'everything'."""
    if not text or not text.strip():
        return None
    checks: list[Predicate] = []
    for term in _split_terms(text):
        if m := _SET_TERM.match(term):
            values = {v.strip() for v in m.group(4).split(",") if v.strip()}
            checks.append(_set_check(m.group(1), m.group(3), values))
        elif m := _EQ_TERM.match(term):
            checks.append(_equality_check(m.group(1), m.group(3), m.group(4)))
        elif m := _EXISTS_TERM.match(term):
            checks.append(_exists_check(m.group(2), negate=m.group(1) == "!"))
        else:
            raise bad_request(f"unable to parse requirement: invalid label selector term {term.strip()!r}")
    return lambda labels: all(check(labels) for check in checks)


def _set_check(key: str, op: str, values: set[str]) -> Predicate:
    if op == "in":
        return lambda labels: labels.get(key) in values
    return lambda labels: labels.get(key) not in values


def _equality_check(key: str, op: str, value: str) -> Predicate:
    if op == "!=":
        return lambda labels: labels.get(key) != value
    return lambda labels: labels.get(key) == value


def _exists_check(key: str, negate: bool) -> Predicate:
    if negate:
        return lambda labels: key not in labels
    return lambda labels: key in labels


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
        checks.append(_field_check(_path_getter(field), op, value))
    return lambda obj: all(check(obj) for check in checks)


def _field_check(getter: Callable[[dict], str], op: str, value: str) -> Predicate:
    if op == "!=":
        return lambda obj: getter(obj) != value
    return lambda obj: getter(obj) == value
