"""Reading just the prologue of an XML document with expat, never expanding entities.

A document type declaration is where entity bombs and external entities live, so any DOCTYPE
ends the scan with a rejection before expat looks at its internal subset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from xml.parsers import expat

from .mime import UnsupportedFileType

_NAMESPACE_SEPARATOR = " "
_FEED_BYTES = 64 * 1024


class _StopScan(Exception):
    """Raised from a handler to end parsing once the scan knows enough."""


@dataclass(slots=True)
class XmlRoot:
    """What the scan learnt: the root element, if it was reached, and the prologue's PIs."""

    namespace: str | None = None
    local_name: str | None = None
    processing_instructions: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.local_name is not None


def _reject_doctype(name: str | None, *_args: object) -> None:
    if (name or "").lower() == "html":
        raise UnsupportedFileType("HTML documents are not allowed.")
    raise UnsupportedFileType("XML documents with a DOCTYPE declaration are not allowed.")


def _reject_entity(*_args: object) -> None:
    raise UnsupportedFileType("XML documents declaring entities are not allowed.")


def new_parser() -> expat.XMLParserType:
    """An expat parser with namespace processing that refuses DOCTYPEs and entity declarations."""
    parser = expat.ParserCreate(namespace_separator=_NAMESPACE_SEPARATOR)
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _reject_doctype
    parser.EntityDeclHandler = _reject_entity
    parser.UnparsedEntityDeclHandler = _reject_entity
    return parser


def split_name(name: str) -> tuple[str | None, str]:
    """Split expat's "namespace local" element name."""
    namespace, _, local = name.rpartition(_NAMESPACE_SEPARATOR)
    return namespace or None, local


def scan_root(data: bytes, complete: bool) -> XmlRoot:
    """Parse ``data`` only up to the start tag of the root element.

    ``complete`` says whether ``data`` is the whole document; a malformed prologue yields an
    XmlRoot without a root element rather than an exception.
    """
    result = XmlRoot()
    parser = new_parser()

    def start(name: str, _attributes: dict[str, str]) -> None:
        result.namespace, result.local_name = split_name(name)
        raise _StopScan

    def instruction(target: str, _data: str) -> None:
        result.processing_instructions.append(target)

    parser.StartElementHandler = start
    parser.ProcessingInstructionHandler = instruction
    _feed(parser, data, complete)
    return result


def _feed(parser: expat.XMLParserType, data: bytes, complete: bool) -> bool:
    """Parse ``data`` in slices; False if expat finds it malformed."""
    try:
        if not data:
            parser.Parse(b"", complete)
        for offset in range(0, len(data), _FEED_BYTES):
            last = offset + _FEED_BYTES >= len(data)
            parser.Parse(data[offset : offset + _FEED_BYTES], complete and last)
    except _StopScan:
        return True
    except expat.ExpatError:
        return False
    return True


def scan_elements(
    data: bytes, complete: bool, on_element: Callable[[str | None, str, dict[str, str]], None]
) -> bool:
    """Feed every start tag in ``data`` to ``on_element``; False if the XML is malformed.

    A truncated document (``complete`` false) is read as far as it goes.
    """
    parser = new_parser()

    def start(name: str, attributes: dict[str, str]) -> None:
        namespace, local = split_name(name)
        on_element(namespace, local, attributes)

    parser.StartElementHandler = start
    return _feed(parser, data, complete)
