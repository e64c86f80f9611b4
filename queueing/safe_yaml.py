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
from typing import Any

import yaml

from .errors import FieldError, ManifestError
from .yaml_composer import Rejected, StrictLoader, TooMany

DEFAULT_MAX_BYTES = 256 * 1024
DEFAULT_MAX_DEPTH = 32


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
        loader = StrictLoader(decoded, max_depth, allow_aliases)
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
    loader = StrictLoader(decoded, max_depth)
    try:
        try:
            found, starts = loader.load_stream(max_documents)
        finally:
            loader.dispose()
    except TooMany:
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
    if isinstance(error, Rejected):
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
