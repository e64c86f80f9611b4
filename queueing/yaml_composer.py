"""The composer behind safe_yaml: PyYAML's parser events to nodes, with the limits that
must hold while composing.

safe_yaml owns the text (its size, its documents, the ManifestError a caller sees);
this module owns the walk over the events, where nesting depth is counted, anchors and
aliases are refused or charged for what they expand to, and duplicate keys and unsafe
tags are caught before construction. Its own refusals are ``Rejected`` (the parser's
errors pass through); safe_yaml turns both into a ManifestError.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from yaml.constructor import SafeConstructor
from yaml.error import Mark
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from .errors import FieldError

if TYPE_CHECKING:
    from yaml._yaml import Mark as LibyamlMark

E = TypeVar("E", bound=Event)

# With allow_aliases, the most values a document may stand for once every
# alias is expanded; far more than any real manifest, far less than a bomb.
MAX_EXPANDED_NODES = 1_000_000

try:  # libyaml is much faster; the pure-Python parser is a drop-in fallback
    from yaml._yaml import CParser as _EventParser
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _EventParser(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)


_TAG = "tag:yaml.org,2002:"
# Explicit tags beyond the JSON-compatible core would hand back Python-only
# values (sets, bytes, dates) that a Kubernetes object can never contain.
_ALLOWED_EXPLICIT_TAGS = frozenset(_TAG + name for name in ("str", "int", "float", "bool", "null", "seq", "map"))


class Rejected(Exception):
    """Internal: abort parsing with a located error."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path, message)
        self.error = FieldError(path, message)


class TooMany(Rejected):
    def __init__(self, limit: int) -> None:
        super().__init__("", f"more than {limit} documents")


class StrictLoader(_EventParser, SafeConstructor, Resolver):
    """Composes nodes from parser events itself instead of using PyYAML's composer.

    Owning the composer is what lets us count depth, refuse anchors and
    aliases, and see duplicate keys (with their path) before construction
    silently keeps the last one.  Construction stays PyYAML's SafeConstructor.
    """

    def __init__(self, text: str, max_depth: int, allow_aliases: bool = False) -> None:
        _EventParser.__init__(self, text)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.max_depth = max_depth
        self.allow_aliases = allow_aliases
        # Only used with allow_aliases: anchor -> (node, expanded size, height),
        # so an alias is charged for everything it stands for.
        self.anchored: dict[str, tuple[Node, int, int]] = {}
        self.expanded_nodes = 0
        self.deepest = 0
        # While loading a stream: the index the document being read will have.
        self.document = 0

    def load_single(self) -> Any:
        self.get_event()  # StreamStartEvent
        root = None
        while not self.check_event(StreamEndEvent):
            if root is None:
                node = self._compose_document()
                if not _is_empty(node):
                    root = node
            elif not self._skip_empty_document():
                raise Rejected("", "expected one document, found several")
        if root is None:
            raise Rejected("", "empty document")
        return self.construct_document(root)

    def load_stream(self, max_documents: int | None) -> tuple[list[tuple[int, Any]], list[int]]:
        """Every non-empty document as (index of its start in `starts`, value), and the
        line each document of the stream (empty ones too) starts on."""
        self.get_event()  # StreamStartEvent
        found: list[tuple[int, Any]] = []
        starts: list[int] = []
        while not self.check_event(StreamEndEvent):
            self.document = len(found)
            start = self.peek_event()
            assert isinstance(start, DocumentStartEvent) and start.start_mark is not None, start
            starts.append(start.start_mark.line)
            node = self._compose_document()
            if _is_empty(node):
                continue
            if max_documents is not None and len(found) >= max_documents:
                raise TooMany(max_documents)
            found.append((len(starts) - 1, self.construct_document(node)))
        return found, starts

    def _compose_document(self) -> Node:
        self.get_event()  # DocumentStartEvent
        node = self._compose_node("", 1)
        self.get_event()  # DocumentEndEvent
        return node

    def _skip_empty_document(self) -> bool:
        # kubectl ignores empty documents (a trailing "---" is common), so only
        # a second document with content counts as "several".
        self.get_event()  # DocumentStartEvent
        event = self.peek_event()
        if not (isinstance(event, ScalarEvent) and _is_empty_scalar_event(event)):
            return False
        self.get_event()
        self.get_event()  # DocumentEndEvent
        return True

    def _next(self, kind: type[E]) -> E:
        """The next event, of the kind the YAML grammar guarantees at this point."""
        event = self.get_event()
        assert isinstance(event, kind), event
        return event

    def _compose_node(self, path: str, depth: int) -> Node:
        if self.check_event(AliasEvent):
            if not self.allow_aliases:
                raise Rejected(path, "YAML aliases are not allowed")
            return self._expand_alias(path, depth)
        event = self.peek_event()
        assert isinstance(event, NodeEvent), event
        anchor = event.anchor
        if anchor is None:
            return self._compose_unanchored(path, depth)
        if not self.allow_aliases:
            raise Rejected(path, "YAML anchors are not allowed (aliases are refused)")
        outer_deepest, self.deepest = self.deepest, depth - 1
        nodes_before = self.expanded_nodes
        node = self._compose_unanchored(path, depth)
        # Registered only once complete: an alias inside its own anchor would
        # build a cycle, and is reported as undefined instead.
        self.anchored[anchor] = (node, self.expanded_nodes - nodes_before, self.deepest - (depth - 1))
        self.deepest = max(outer_deepest, self.deepest)
        return node

    def _expand_alias(self, path: str, depth: int) -> Node:
        event = self._next(AliasEvent)
        if event.anchor not in self.anchored:
            raise Rejected(path, f"undefined YAML alias {event.anchor!r}")
        node, size, height = self.anchored[event.anchor]
        if depth + height - 1 > self.max_depth:
            raise Rejected(path, f"document nests deeper than {self.max_depth} levels")
        self.deepest = max(self.deepest, depth + height - 1)
        self.expanded_nodes += size
        if self.expanded_nodes > MAX_EXPANDED_NODES:
            raise Rejected(path, f"document expands to more than {MAX_EXPANDED_NODES} values")
        return node

    def _compose_unanchored(self, path: str, depth: int) -> Node:
        self.expanded_nodes += 1
        event = self.peek_event()
        if isinstance(event, ScalarEvent):
            return self._compose_scalar(path)
        if depth > self.max_depth:
            raise Rejected(path, f"document nests deeper than {self.max_depth} levels")
        self.deepest = max(self.deepest, depth)
        if isinstance(event, SequenceStartEvent):
            return self._compose_sequence(path, depth)
        return self._compose_mapping(path, depth)

    def _compose_scalar(self, path: str) -> ScalarNode:
        event = self._next(ScalarEvent)
        tag = self._tag_for(ScalarNode, event, path, event.value, event.implicit)
        return ScalarNode(tag, event.value, _mark(event.start_mark), _mark(event.end_mark), style=event.style)

    def _compose_sequence(self, path: str, depth: int) -> SequenceNode:
        start = self._next(SequenceStartEvent)
        tag = self._tag_for(SequenceNode, start, path, None, start.implicit)
        node = SequenceNode(tag, [], _mark(start.start_mark), None, flow_style=start.flow_style)
        while not self.check_event(SequenceEndEvent):
            node.value.append(self._compose_node(f"{path}[{len(node.value)}]", depth + 1))
        node.end_mark = _mark(self._next(SequenceEndEvent).end_mark)
        return node

    def _compose_mapping(self, path: str, depth: int) -> MappingNode:
        start = self._next(MappingStartEvent)
        tag = self._tag_for(MappingNode, start, path, None, start.implicit)
        node = MappingNode(tag, [], _mark(start.start_mark), None, flow_style=start.flow_style)
        seen: set[Any] = set()
        while not self.check_event(MappingEndEvent):
            key_node = self._compose_node(path, depth + 1)
            if not isinstance(key_node, ScalarNode):
                raise Rejected(path, "mapping keys must be plain values, not lists or mappings")
            if key_node.tag == _TAG + "merge":
                raise Rejected(path, "YAML merge keys (<<) are not allowed")
            key = self.construct_object(key_node)
            child_path = _join(path, key)
            # Kubernetes' strict decoding rejects duplicates; last-wins would
            # silently drop whatever the user wrote first.
            if key in seen:
                raise Rejected(child_path, f"duplicate key {str(key)!r}")
            seen.add(key)
            node.value.append((key_node, self._compose_node(child_path, depth + 1)))
        node.end_mark = _mark(self._next(MappingEndEvent).end_mark)
        return node

    def _tag_for(
        self,
        kind: type[Node],
        event: ScalarEvent | CollectionStartEvent,
        path: str,
        value: str | None,
        implicit: tuple[bool, bool] | bool,
    ) -> str:
        if event.tag is None or event.tag == "!":
            return self._resolve(kind, value, implicit)
        if event.tag not in _ALLOWED_EXPLICIT_TAGS:
            raise Rejected(path, f"YAML tag {event.tag!r} is not allowed")
        if kind is ScalarNode and event.tag != _TAG + "str":
            # SafeConstructor trusts explicit tags and crashes on "!!int foo";
            # accept a tag only where the plain value would mean the same.
            natural = self._resolve(ScalarNode, value, (True, False))
            if natural != event.tag and not (event.tag == _TAG + "float" and natural == _TAG + "int"):
                raise Rejected(path, f"{value!r} is not a valid {event.tag.replace(_TAG, '!!')}")
        return event.tag

    def _resolve(self, kind: type[Node], value: str | None, implicit: tuple[bool, bool] | bool) -> str:
        tag: str = self.resolve(kind, value, implicit)  # type: ignore[no-untyped-call]  # unannotated in types-PyYAML
        return tag

    def construct_undefined(self, node: Any) -> Any:
        raise Rejected("", f"YAML tag {node.tag!r} is not allowed")


# Go's YAML decoder (used by kubectl and the API server) hands unquoted dates
# to JSON as strings; keeping them as text means "2024-01-01" in a label or
# annotation stays a string here too instead of becoming datetime.date.
# (types-PyYAML bounds add_constructor to PyYAML's own loader classes, hence the ignores.)
StrictLoader.add_constructor(_TAG + "timestamp", SafeConstructor.construct_yaml_str)  # type: ignore[type-var]
# PyYAML resolves a bare "=" to the YAML 1.1 "value" type it cannot build;
# to Go (and to users) it is just the string "=".
StrictLoader.add_constructor(_TAG + "value", SafeConstructor.construct_yaml_str)  # type: ignore[type-var]


def _mark(mark: Mark | LibyamlMark | None) -> Mark | None:
    """types-PyYAML types node marks as PyYAML's Mark; libyaml's events carry its own, with the same fields."""
    return mark  # type: ignore[return-value]


def _is_empty(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _TAG + "null" and node.value == "" and not node.style


def _is_empty_scalar_event(event: ScalarEvent) -> bool:
    return event.value == "" and event.tag is None and event.implicit[0] and not event.style


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)
