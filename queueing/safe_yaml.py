"""Load untrusted YAML into plain Python data: one document, or a stream of several.

The text comes straight from users, so every limit is enforced while
parsing rather than afterwards: size before the parser sees a byte, nesting
depth while composing (so deep documents cannot exhaust the stack), and
anchors/aliases are refused outright (so "billion laughs" costs nothing).
Whatever the input, the only exception that escapes is ``ManifestError``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
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

from .errors import FieldError, ManifestError

if TYPE_CHECKING:
    from yaml._yaml import Mark as LibyamlMark

E = TypeVar("E", bound=Event)

DEFAULT_MAX_BYTES = 256 * 1024
DEFAULT_MAX_DEPTH = 32
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


class _Rejected(Exception):
    """Internal: abort parsing with a located error."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path, message)
        self.error = FieldError(path, message)


class _TooMany(_Rejected):
    def __init__(self, limit: int) -> None:
        super().__init__("", f"more than {limit} documents")


class _StrictLoader(_EventParser, SafeConstructor, Resolver):
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
                raise _Rejected("", "expected one document, found several")
        if root is None:
            raise _Rejected("", "empty document")
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
                raise _TooMany(max_documents)
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
                raise _Rejected(path, "YAML aliases are not allowed")
            return self._expand_alias(path, depth)
        event = self.peek_event()
        assert isinstance(event, NodeEvent), event
        anchor = event.anchor
        if anchor is None:
            return self._compose_unanchored(path, depth)
        if not self.allow_aliases:
            raise _Rejected(path, "YAML anchors are not allowed (aliases are refused)")
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
            raise _Rejected(path, f"undefined YAML alias {event.anchor!r}")
        node, size, height = self.anchored[event.anchor]
        if depth + height - 1 > self.max_depth:
            raise _Rejected(path, f"document nests deeper than {self.max_depth} levels")
        self.deepest = max(self.deepest, depth + height - 1)
        self.expanded_nodes += size
        if self.expanded_nodes > MAX_EXPANDED_NODES:
            raise _Rejected(path, f"document expands to more than {MAX_EXPANDED_NODES} values")
        return node

    def _compose_unanchored(self, path: str, depth: int) -> Node:
        self.expanded_nodes += 1
        event = self.peek_event()
        if isinstance(event, ScalarEvent):
            return self._compose_scalar(path)
        if depth > self.max_depth:
            raise _Rejected(path, f"document nests deeper than {self.max_depth} levels")
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
                raise _Rejected(path, "mapping keys must be plain values, not lists or mappings")
            if key_node.tag == _TAG + "merge":
                raise _Rejected(path, "YAML merge keys (<<) are not allowed")
            key = self.construct_object(key_node)
            child_path = _join(path, key)
            # Kubernetes' strict decoding rejects duplicates; last-wins would
            # silently drop whatever the user wrote first.
            if key in seen:
                raise _Rejected(child_path, f"duplicate key {str(key)!r}")
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
            raise _Rejected(path, f"YAML tag {event.tag!r} is not allowed")
        if kind is ScalarNode and event.tag != _TAG + "str":
            # SafeConstructor trusts explicit tags and crashes on "!!int foo";
            # accept a tag only where the plain value would mean the same.
            natural = self._resolve(ScalarNode, value, (True, False))
            if natural != event.tag and not (event.tag == _TAG + "float" and natural == _TAG + "int"):
                raise _Rejected(path, f"{value!r} is not a valid {event.tag.replace(_TAG, '!!')}")
        return event.tag

    def _resolve(self, kind: type[Node], value: str | None, implicit: tuple[bool, bool] | bool) -> str:
        tag: str = self.resolve(kind, value, implicit)  # type: ignore[no-untyped-call]  # unannotated in types-PyYAML
        return tag

    def construct_undefined(self, node: Any) -> Any:
        raise _Rejected("", f"YAML tag {node.tag!r} is not allowed")


# Go's YAML decoder (used by kubectl and the API server) hands unquoted dates
# to JSON as strings; keeping them as text means "2024-01-01" in a label or
# annotation stays a string here too instead of becoming datetime.date.
# (types-PyYAML bounds add_constructor to PyYAML's own loader classes, hence the ignores.)
_StrictLoader.add_constructor(_TAG + "timestamp", SafeConstructor.construct_yaml_str)  # type: ignore[type-var]
# PyYAML resolves a bare "=" to the YAML 1.1 "value" type it cannot build;
# to Go (and to users) it is just the string "=".
_StrictLoader.add_constructor(_TAG + "value", SafeConstructor.construct_yaml_str)  # type: ignore[type-var]


def load_document(
    text: str | bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    allow_aliases: bool = False,
) -> Any:
    """Parse exactly one YAML (or JSON) document from untrusted text.

    Raises ``ManifestError`` (with ``too_large=True`` for the size limit) and
    nothing else.  With ``allow_aliases`` anchors and aliases are accepted,
    but each alias is charged for the depth and number of values it expands
    to, so alias bombs are still refused.
    """
    decoded = _decode(text, max_bytes)
    if not decoded.strip():
        # Before parsing: libyaml rejects some blank input (tab-indented
        # blank lines) with a confusing syntax error.
        raise ManifestError([FieldError("", "empty document")])
    try:
        loader = _StrictLoader(decoded, max_depth, allow_aliases)
        try:
            return loader.load_single()
        finally:
            loader.dispose()
    except Exception as error:
        raise _refusal(error, max_depth) from None


class TooManyDocuments(ManifestError):
    """A stream holds more than ``max_documents`` documents (a refusal on size: ``too_large``)."""

    def __init__(self, limit: int) -> None:
        super().__init__([FieldError("", f"more than {limit} documents")], too_large=True)
        self.limit = limit

    def __reduce__(self) -> tuple[type[TooManyDocuments], tuple[int]]:
        return (TooManyDocuments, (self.limit,))


@dataclass(frozen=True)
class Document:
    """One document of a YAML stream: its text as written (directives, ``---`` line and
    comments included, so it loads on its own to the same value) and that value."""

    text: str
    value: Any


def load_documents(
    text: str | bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_total_bytes: int | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_documents: int | None = None,
) -> list[Document]:
    """Parse a stream of YAML (or JSON) documents separated by ``---`` from untrusted text.

    Empty documents are skipped, as kubectl does. The limits are those of
    ``load_document``, per document (``max_bytes``), for the whole text
    (``max_total_bytes``, by default ``max_bytes``) and on the number of non-empty
    documents (``max_documents``); anchors and aliases are refused. Raises
    ``ManifestError`` and nothing else: too large (the text, a document, or too many
    documents) with ``too_large=True``. The paths of a problem inside a document start
    with its index among the non-empty documents, ``[2].spec...``, once the stream holds
    several; a stream of one document is refused exactly as ``load_document`` refuses it.
    """
    total = max_bytes if max_total_bytes is None else max_total_bytes
    decoded = _decode(text, total, what="the YAML stream")
    if not decoded.strip():
        raise ManifestError([FieldError("", "empty document")])
    loader = _StrictLoader(decoded, max_depth)
    try:
        try:
            found, starts = loader.load_stream(max_documents)
        finally:
            loader.dispose()
    except _TooMany:
        raise TooManyDocuments(max_documents or 0) from None
    except Exception as error:
        refusal = _refusal(error, max_depth)
        if loader.document == 0 and not _several_documents(decoded):
            raise refusal from None
        raise _in_document(loader.document, refusal) from None
    lines = _line_starts(decoded)
    documents = []
    for index, (start, value) in enumerate(found):
        begin = 0 if start == 0 else lines[starts[start]]
        end = lines[starts[start + 1]] if start + 1 < len(starts) else len(decoded)
        piece = decoded[begin:end]
        try:
            _check_size(len(piece.encode("utf-8")), max_bytes)
        except ManifestError as error:
            raise _in_document(index, error) from None
        documents.append(Document(piece, value))
    if not documents:
        raise ManifestError([FieldError("", "empty document")])
    return documents


def document_path(index: int, path: str) -> str:
    """``path`` inside the document at ``index`` of a list or stream: ``[2].spec.x``, ``[2][0]``, ``[2]``."""
    prefix = f"[{index}]"
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def _in_document(index: int, error: ManifestError) -> ManifestError:
    located = [FieldError(document_path(index, e.path), e.message) for e in error.errors]
    return ManifestError(located, too_large=error.too_large)


def _refusal(error: Exception, max_depth: int) -> ManifestError:
    """The ManifestError for whatever the loader raised."""
    if isinstance(error, ManifestError):
        return error
    if isinstance(error, _Rejected):
        return ManifestError([error.error])
    if isinstance(error, yaml.MarkedYAMLError):
        if "maximum nesting depth" in str(error.problem):
            # Some libyaml builds stop deep flow collections in the scanner,
            # before our composer has counted to max_depth: same refusal.
            return ManifestError([FieldError("", f"document nests deeper than {max_depth} levels")])
        return ManifestError([FieldError("", _describe_marked(error))])
    if isinstance(error, yaml.reader.ReaderError):
        return ManifestError([FieldError("", _describe_reader(error))])
    if isinstance(error, yaml.YAMLError):
        return ManifestError([FieldError("", f"invalid YAML: {_one_line(str(error))}")])
    if isinstance(error, (ValueError, TypeError, KeyError, AttributeError, OverflowError, IndexError)):
        # PyYAML's constructors fail with builtin errors on values its own
        # resolver accepted ("0b_", "._") and Python caps int() at 4300
        # digits; the first clause of the message is the useful part.
        reason = _one_line(str(error)).split(";")[0]
        return ManifestError([FieldError("", f"invalid YAML value: {reason}")])
    raise error


# YAML's line breaks (1.1, as libyaml counts lines): not Python's str.splitlines set.
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
# A "---" line (a document start) followed by anything but blanks, comments and other markers.
_LATER_DOCUMENT = re.compile(r"^---(?:[ \t]|$)(?s:.*?)^(?!---(?:[ \t]|$)|\.\.\.(?:[ \t]|$))[ \t]*[^\s#]", re.M)


def _line_starts(text: str) -> list[int]:
    """The offset each line of `text` starts at, as YAML counts lines (the last: the end)."""
    return [0, *(match.end() for match in _LINE_BREAK.finditer(text))]


def _several_documents(text: str) -> bool:
    """Whether `text` goes on to another non-empty document after its first one. Only for
    errors in the first document, where the parser could not get that far: they are
    located in it (``[0]``) only when the stream is meant to hold several."""
    first = re.search(r"^[ \t]*[^\s#%]", text, re.M)
    if first is None:
        return False
    rest = text[first.end() :]
    newline = rest.find("\n")
    return newline >= 0 and _LATER_DOCUMENT.search(rest, newline + 1) is not None


def _decode(text: str | bytes, max_bytes: int, what: str = "document") -> str:
    if isinstance(text, (bytes, bytearray, memoryview)):
        raw = bytes(text)
        _check_size(len(raw), max_bytes, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ManifestError([FieldError("", "not UTF-8 text")]) from None
    if not isinstance(text, str):
        raise ManifestError([FieldError("", f"expected text, got {type(text).__name__}")])
    # Every character is at least one byte, so this rejects huge input without
    # paying to encode it.
    _check_size(len(text), max_bytes, what)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # lone surrogates cannot come from real UTF-8
        raise ManifestError([FieldError("", "not UTF-8 text")]) from None
    _check_size(size, max_bytes, what)
    return text


def _check_size(size: int, max_bytes: int, what: str = "document") -> None:
    if size > max_bytes:
        raise ManifestError(
            [FieldError("", f"{what} is larger than the limit of {max_bytes} bytes")],
            too_large=True,
        )


def _mark(mark: Mark | LibyamlMark | None) -> Mark | None:
    """types-PyYAML types node marks as PyYAML's Mark; libyaml's events carry its own, with the same fields."""
    return mark  # type: ignore[return-value]


def _is_empty(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _TAG + "null" and node.value == "" and not node.style


def _is_empty_scalar_event(event: ScalarEvent) -> bool:
    return event.value == "" and event.tag is None and event.implicit[0] and not event.style


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _describe_marked(error: yaml.MarkedYAMLError) -> str:
    problem = error.problem or error.context or "syntax error"
    mark = error.problem_mark or error.context_mark
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML: {_one_line(problem)}{where}"


def _describe_reader(error: yaml.reader.ReaderError) -> str:
    character = error.character
    shown = f"#x{character:04x}" if isinstance(character, int) else repr(character)
    return f"invalid YAML: unacceptable character {shown} at position {error.position}: {error.reason}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
