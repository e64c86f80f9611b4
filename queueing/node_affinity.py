"""A pod's required node affinity: validated as the API server validates it, matched against a
node as kube-scheduler's NodeAffinity filter matches it.

Only ``spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` is read.
Preferred node affinity is a preference: the scheduler places a pod where none of it holds
if it must, so it never keeps a pod off a node and the planner has nothing to honour.
Neither is pod (anti-)affinity read: it depends on other pods, which a plan does not track.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .validation import (
    Problems,
    describe,
    dns1123_subdomain_problem,
    index,
    join,
    label_value_problem,
    optional_list,
    optional_mapping,
    qualified_name_problem,
)

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")
# The only node field a matchFields requirement may select (the API server's rule).
NODE_NAME = "metadata.name"
_TERM_FIELDS = frozenset({"matchExpressions", "matchFields"})
_REQUIREMENT_FIELDS = frozenset({"key", "operator", "values"})
# strconv.ParseInt(s, 10, 64), which Gt and Lt compare by.
_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = range(-(2**63), 2**63)


@dataclass(frozen=True, order=True, slots=True)
class Requirement:
    """One matchExpressions (a node label) or matchFields (the node's name) requirement."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            found["values"] = list(self.values)
        return found

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Requirement:
        return cls(data["key"], data["operator"], tuple(data.get("values", ())))

    def matches_labels(self, labels: Mapping[str, str]) -> bool:
        """As labels.Requirement.Matches of the selector kube-scheduler builds from it."""
        operator, value = self.operator, labels.get(self.key)
        if operator == "In":
            return value is not None and value in self.values
        if operator == "NotIn":
            return value is None or value not in self.values
        if operator == "Exists":
            return value is not None
        if operator == "DoesNotExist":
            return value is None
        # Gt and Lt compare integers; a label or a value that is not one matches nothing
        # (the scheduler cannot build the term, so the term selects no node).
        have = _int64(value)
        want = _int64(self.values[0]) if len(self.values) == 1 else None
        if have is None or want is None:
            return False
        if operator == "Gt":
            return have > want
        return operator == "Lt" and have < want

    def matches_name(self, name: str) -> bool:
        if self.key != NODE_NAME:
            return False
        if self.operator == "In":
            return name in self.values
        return self.operator == "NotIn" and name not in self.values


@dataclass(frozen=True, order=True, slots=True)
class Term:
    """One nodeSelectorTerm: every requirement of it must hold. A term without any selects
    no node (kube-scheduler's rule, not "every node")."""

    expressions: tuple[Requirement, ...] = ()  # matchExpressions
    fields: tuple[Requirement, ...] = ()  # matchFields

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if not self.expressions and not self.fields:
            return False
        return all(r.matches_labels(labels) for r in self.expressions) and all(
            r.matches_name(name) for r in self.fields
        )

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.expressions:
            found["matchExpressions"] = [r.to_json() for r in self.expressions]
        if self.fields:
            found["matchFields"] = [r.to_json() for r in self.fields]
        return found

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Term:
        return cls(
            tuple(Requirement.from_json(r) for r in data.get("matchExpressions", ())),
            tuple(Requirement.from_json(r) for r in data.get("matchFields", ())),
        )


# The required terms, any one of which must hold; () when the pod requires nothing (the API
# server refuses a required node affinity without terms, so () never means "no node").
NodeAffinity = tuple[Term, ...]


def matches(terms: NodeAffinity, labels: Mapping[str, str], name: str) -> bool:
    """Whether a node (its labels and name) satisfies a pod's required node affinity."""
    return not terms or any(term.matches(labels, name) for term in terms)


def canonical(terms: NodeAffinity) -> NodeAffinity:
    """The same affinity in one spelling: terms (ORed), requirements (ANDed) and values (a
    set) sorted and without repeats, so that equal constraints compare and hash equal."""
    if not terms:
        return ()

    def requirements(found: tuple[Requirement, ...]) -> tuple[Requirement, ...]:
        return tuple(sorted({Requirement(r.key, r.operator, tuple(sorted(set(r.values)))) for r in found}))

    return tuple(sorted({Term(requirements(t.expressions), requirements(t.fields)) for t in terms}))


def terms_to_json(terms: NodeAffinity) -> list[dict[str, Any]]:
    return [term.to_json() for term in terms]


def terms_from_json(data: Any) -> NodeAffinity:
    return tuple(Term.from_json(term) for term in data or ())


def _int64(text: str | None) -> int | None:
    if text is None or not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if value in _INT64 else None


# --- validation, as the API server's ValidateNodeSelector -------------------------------------


def required_node_affinity(pod_spec: Mapping[Any, Any], path: str, problems: Problems) -> NodeAffinity:
    """The required node affinity of the pod spec found at ``path``; () when it has none."""
    affinity = optional_mapping(pod_spec, "affinity", path, problems)
    here = join(path, "affinity")
    node = None if affinity is None else optional_mapping(affinity, "nodeAffinity", here, problems)
    here = join(here, "nodeAffinity")
    required = None if node is None else optional_mapping(node, REQUIRED, here, problems)
    if required is None:
        return ()
    return node_selector(required, join(here, REQUIRED), problems)


def node_selector(selector: Mapping[Any, Any], path: str, problems: Problems) -> NodeAffinity:
    """A NodeSelector ({nodeSelectorTerms}) found at ``path``."""
    items = optional_list(selector, "nodeSelectorTerms", path, problems)
    here = join(path, "nodeSelectorTerms")
    if not items:
        if items is not None or selector.get("nodeSelectorTerms") is None:
            problems.add(here, "required: at least one node selector term")
        return ()
    terms = []
    for position, term in enumerate(items):
        term_path = index(here, position)
        if not isinstance(term, Mapping):
            problems.add(term_path, f"must be a mapping, got {describe(term)}")
            continue
        for key in term:
            if key not in _TERM_FIELDS:
                problems.add(join(term_path, key), f"unknown field; expected {' or '.join(sorted(_TERM_FIELDS))}")
        expressions = _requirements(term, "matchExpressions", term_path, problems, field=False)
        fields = _requirements(term, "matchFields", term_path, problems, field=True)
        terms.append(Term(expressions, fields))
    return tuple(terms)


def _requirements(
    term: Mapping[Any, Any], key: str, path: str, problems: Problems, *, field: bool
) -> tuple[Requirement, ...]:
    items = optional_list(term, key, path, problems)
    here = join(path, key)
    found = []
    for position, item in enumerate(items or ()):
        item_path = index(here, position)
        if not isinstance(item, Mapping):
            problems.add(item_path, f"must be a mapping, got {describe(item)}")
            continue
        before = len(problems.errors)
        requirement = _requirement(item, item_path, problems, field=field)
        if len(problems.errors) == before:
            found.append(requirement)
    return tuple(found)


def _requirement(item: Mapping[Any, Any], path: str, problems: Problems, *, field: bool) -> Requirement:
    for name in item:
        if name not in _REQUIREMENT_FIELDS:
            problems.add(join(path, name), f"unknown field; expected one of {', '.join(sorted(_REQUIREMENT_FIELDS))}")
    key = _string(item, "key", path, problems)
    if key is not None:
        if field and key != NODE_NAME:
            problems.add(join(path, "key"), f"not a valid field selector key: only {NODE_NAME!r}, got {key!r}")
        elif not field and (problem := qualified_name_problem(key)):
            problems.add(join(path, "key"), f"must be a label key: {problem}")
    operator = _string(item, "operator", path, problems)
    allowed = FIELD_OPERATORS if field else OPERATORS
    if operator is not None and operator not in allowed:
        problems.add(join(path, "operator"), f"must be one of {', '.join(allowed)}, got {operator!r}")
        operator = None
    values = _values(item, path, problems, field=field)
    if operator is not None and values is not None:
        _count_rule(operator, len(values), join(path, "values"), problems, field=field)
    return Requirement(key or "", operator or "", tuple(values or ()))


def _string(item: Mapping[Any, Any], key: str, path: str, problems: Problems) -> str | None:
    value = item.get(key)
    if value is None or value == "":
        problems.add(join(path, key), "required")
        return None
    if not isinstance(value, str):
        problems.add(join(path, key), f"must be a string, got {describe(value)}")
        return None
    return value


def _values(item: Mapping[Any, Any], path: str, problems: Problems, *, field: bool) -> list[str] | None:
    """The values, each checked as a node name (matchFields) or a label value; None if unusable."""
    items = optional_list(item, "values", path, problems)
    if items is None:
        return None if item.get("values") is not None else []
    here = join(path, "values")
    values = []
    for position, value in enumerate(items):
        value_path = index(here, position)
        if not isinstance(value, str):
            problems.add(value_path, f"must be a string, got {describe(value)} (quote the value)")
        elif field and (problem := dns1123_subdomain_problem(value)):
            problems.add(value_path, f"must be a node name: {problem}")
        elif not field and (problem := label_value_problem(value)):
            problems.add(value_path, problem)
        else:
            values.append(value)
    return values if len(values) == len(items) else None


def _count_rule(operator: str, count: int, path: str, problems: Problems, *, field: bool) -> None:
    if field:
        if count != 1:
            problems.add(path, f"must hold exactly one value (a node name) when operator is {operator}, got {count}")
    elif operator in ("In", "NotIn"):
        if count == 0:
            problems.add(path, f"required: at least one value when operator is {operator}")
    elif operator in ("Exists", "DoesNotExist"):
        if count:
            problems.add(path, f"must be empty when operator is {operator}")
    elif count != 1:
        problems.add(path, f"must hold exactly one value (an integer) when operator is {operator}, got {count}")
