"""What an OOXML result holds, read from its XML as a stream: the facts that the output checks compare with what
LibreOffice loaded from the source.

Loading the result again in LibreOffice told the same and cost as much as the conversion itself; the parts that carry
the facts are read here instead, a chunk at a time, with nothing kept but the facts:

- ``.xlsx``: every sheet's name, in order, from ``xl/workbook.xml`` (chart sheets included; ``xstring``);
- ``.pptx``: the slides of ``ppt/presentation.xml``'s slide list whose part is in the package;
- ``.docx``: the characters of ``word/document.xml``'s text, counted per character, whitespace left out: ``w:t`` and
  ``w:delText`` (LibreOffice keeps tracked deletions in its text), and the characters that OOXML writes as elements
  (symbols, soft and non-breaking hyphens); and apart, those of them in fields' results (``FieldResults``).

A part that is missing, not well-formed XML, or declares a DTD (entity expansion) makes the result ``None``: it would
not open. The package's directory has already been checked for its size (``convert.check_package``), and a member is
never inflated past the size it declares.

Every other reader of a result's XML goes through ``stream`` too (``checked``, ``parse``), and whoever copies or reads
a whole member does it with ``copy`` and ``read``: a chunk at a time, within what it declares.
"""

import os
import posixpath
import re
import shutil
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from xml.parsers import expat
from xml.sax.saxutils import escape

from docshift.engine import zipcopy
from docshift.errors import ResultUnreadable as Unreadable
from docshift.formats import FORMATS

CHUNK = 1 << 16
SEPARATOR = "}"
SPREADSHEET = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
PRESENTATION = "http://schemas.openxmlformats.org/presentationml/2006/main"
WORD = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
HYPERLINK = f"{RELATIONSHIPS}/hyperlink"
PACKAGE_RELATIONSHIPS = "http://schemas.openxmlformats.org/package/2006/relationships"
# characters a .docx writes as an element of their own, not inside w:t
WORD_CHARACTERS = {f"{WORD}{SEPARATOR}softHyphen": "\u00ad", f"{WORD}{SEPARATOR}noBreakHyphen": "\u2011"}
FIELD_CHAR, FIELD_SIMPLE, FIELD_CHAR_TYPE = (f"{WORD}{SEPARATOR}{x}" for x in ("fldChar", "fldSimple", "fldCharType"))
# a start tag's name, each of its attributes and its end, as a part that expat has read whole writes them
TAG_NAME = re.compile(rb"<[^\s/>]+")
ATTRIBUTE = re.compile(rb"""\s+([^\s=/>]+)\s*=\s*(?:"[^"]*"|'[^']*')""")
TAG_END = re.compile(rb"\s*/?>")
IN_TAG = rb"(?:[^>\"']|\"[^\"]*\"|'[^']*')"  # in a pattern: a byte of a tag, or a quoted value whole
# what a value written into XML escapes besides & < >: in an attribute, the whitespace a reader would make a space
TEXT_REFERENCES = {"\r": "&#13;"}
# a character an ST_Xstring (a sheet's name, a cell's text) escapes: _x001C_ a control character, _x005F_ a "_"
XSTRING_ESCAPE = re.compile(r"_x([0-9A-Fa-f]{4})_")
ATTRIBUTE_REFERENCES = {'"': "&quot;", "\t": "&#9;", "\n": "&#10;", "\r": "&#13;"}


class FieldResults:
    """Where a reader of a text part is among its fields: a complex field (``w:fldChar`` begin, separate, end)
    shows its result between separate and end, a simple one (``w:fldSimple``) its content. LibreOffice computes
    those as it exports (a date, a character count, a reference's error text), where the source kept Word's."""
    TAGS = frozenset({FIELD_CHAR, FIELD_SIMPLE})

    def __init__(self) -> None:
        self.open: list[bool] = []  # per open field: whether its result is being read

    def start(self, tag: str, attributes: dict[str, str]) -> None:
        kind = attributes.get(FIELD_CHAR_TYPE) if tag == FIELD_CHAR else "simple"
        if kind in ("begin", "simple"):
            self.open.append(kind == "simple")
        elif kind == "separate" and self.open:
            self.open[-1] = True
        elif kind == "end" and self.open:
            self.open.pop()

    def end(self, tag: str) -> None:
        if tag == FIELD_SIMPLE and self.open:
            self.open.pop()

    @property
    def inside(self) -> bool:
        return any(self.open)


def facts(path: str | Path, kind: str) -> dict[str, Any] | None:
    """The facts of the OOXML package at ``path`` (the target of ``kind``), or None if it would not open."""
    try:
        with zipfile.ZipFile(path) as package:
            if kind == "xls":
                return {"sheets": _sheets(package)}
            if kind == "ppt":
                return {"slides": _slides(package)}
            text, computed = _text(package)
            return {"text": text, "computed": computed}
    except (Unreadable, zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError):
        return None


def parse(package: zipfile.ZipFile, name: str, start: Callable[[str, dict[str, str]], None] | None = None,
           end: Callable[[str], None] | None = None, text: Callable[[str], None] | None = None) -> None:
    """Stream part ``name`` of ``package`` through expat with namespaces resolved (``uri}local``)."""
    try:
        with package.open(name) as part:
            stream(iter(lambda: part.read(CHUNK), b""), name, start, end, text)
    except KeyError as error:
        raise Unreadable(f"{name} is missing") from error


def checked(data: bytes, name: str) -> bytes:
    """``data``, the XML of part ``name``, once it has gone through ``stream``: a parser that expands entities
    (minidom) gets it only then."""
    stream((data,), name)
    return data


def read(package: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """The bytes of member ``info``, read a chunk at a time; ``Unreadable`` when it declares more than ``limit`` or
    inflates past what it declares."""
    if info.file_size > limit:
        raise Unreadable(f"{info.filename} is too large")
    return b"".join(chunks(package, info))


def copy(package: zipfile.ZipFile, info: zipfile.ZipInfo, out: zipfile.ZipFile) -> None:
    """Member ``info`` written into ``out`` as it was (``entry``), a chunk at a time: never whole in memory, never
    past what it declares (the caller has bounded that: ``convert.check_package``)."""
    with out.open(entry(info), "w", force_zip64=info.file_size >= zipfile.ZIP64_LIMIT) as written:
        for chunk in chunks(package, info):
            written.write(chunk)


def rewrite(src: zipfile.ZipFile, path: str | Path, edits: Mapping[str, bytes],
            added: Mapping[str, bytes] | None = None, dropped: Collection[str] = ()) -> None:
    """The package ``src`` (open on ``path``) written again over ``path``: ``edits`` in place of the parts they name,
    ``added`` parts after the rest, ``dropped`` ones left out, every other part copied as it is stored (``zipcopy``;
    inflated and deflated again, ``copy``, where ``zipcopy`` does not write). A new file next to it is moved over it
    atomically, so a failure leaves the package as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".rewrite-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            if not zipcopy.write(src, path, raw, edits, added or {}, dropped):
                with zipfile.ZipFile(raw, "w") as out:
                    for info in (info for info in src.infolist() if info.filename not in dropped):
                        if info.filename in edits:
                            out.writestr(entry(info), edits[info.filename])
                        else:
                            copy(src, info, out)
                    for name, data in (added or {}).items():
                        out.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
        shutil.copymode(path, tmp)  # mkstemp makes it 0600; the package keeps its own mode
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def entry(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    """A fresh zip entry with ``info``'s name, date, compression and attributes (reusing ``info`` itself would copy
    its extra fields and flags from the old archive, and writing changes it)."""
    fresh = zipfile.ZipInfo(info.filename, info.date_time)
    fresh.compress_type, fresh.external_attr, fresh.create_system = info.compress_type, info.external_attr, \
        info.create_system
    return fresh


def chunks(package: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The inflated bytes of member ``info``, a chunk at a time; ``Unreadable`` past its declared size."""
    inflated = 0
    with package.open(info) as part:
        while chunk := part.read(CHUNK):
            inflated += len(chunk)
            if inflated > info.file_size:
                raise Unreadable(f"{info.filename} inflates past its declared size")
            yield chunk


def stream(chunks: Iterable[bytes], name: str, start: Callable[[str, dict[str, str]], None] | None = None,
           end: Callable[[str], None] | None = None, text: Callable[[str], None] | None = None,
           unreadable: type[Exception] = Unreadable) -> None:
    """Feed the byte ``chunks`` of part ``name`` to expat, namespaces resolved (``uri}local``), with the
    handlers given; a DTD (entity expansion) or XML that is not well-formed raises ``unreadable``."""
    feed(parser(name, unreadable, start, end, text), chunks, name, unreadable)


def edit_tags(data: bytes, name: str, edit: Callable[[str, dict[str, str]], Mapping[str, str | None] | None]) -> bytes:
    """Part ``name`` (``data``, UTF-8) with each start tag for which ``edit(tag, attributes)`` (as ``stream`` gives
    them) answers changes written again: each attribute it names, unprefixed, set to its value or left out (None);
    every other byte as it was, where a DOM written out again would rewrite the whole part. A DTD or XML that is
    not well-formed raises ``Unreadable``."""
    edits: list[tuple[int, Mapping[str, str | None]]] = []

    def start(tag: str, attributes: dict[str, str]) -> None:
        changes = edit(tag, attributes)
        if changes:
            edits.append((reader.CurrentByteIndex, changes))

    reader = parser(name, Unreadable, start)
    feed(reader, (data,), name, Unreadable)
    out, done = [], 0
    for at, changes in edits:
        tag, done_at = retagged(data, at, name, changes)
        out += [data[done:at], tag]
        done = done_at
    return b"".join([*out, data[done:]])


def retagged(data: bytes, at: int, name: str, changes: Mapping[str, str | None]) -> tuple[bytes, int]:
    """(the start tag at byte ``at`` of part ``name`` (``data``) up to its ``>`` or ``/>``, with each attribute
    ``changes`` names set to its value or left out (None), the others as they were; where in ``data`` that
    ``>`` or ``/>`` is)."""
    _, end, attributes = start_tag(data, at, name)
    out = [data[at:attributes[0].start() if attributes else end.start()]]
    left = dict(changes)
    for attribute in attributes:
        written = attribute.group(1).decode()
        if written not in left:
            out.append(attribute.group())
        elif (value := left.pop(written)) is not None:
            out.append(_attribute(written, value))
    out.extend(_attribute(key, value) for key, value in left.items() if value is not None)
    return b"".join(out), end.start()


def _attribute(name: str, value: str) -> bytes:
    return f' {name}="{attribute_value(value)}"'.encode()


def attribute_value(value: str) -> str:
    """``value`` as an attribute writes it between double quotes."""
    return escape(value, ATTRIBUTE_REFERENCES)


def serialize(doc: Any) -> bytes:
    """A part edited as a minidom ``doc``, as bytes, with the declaration Office writes. minidom's own writer puts
    a tab, line feed or carriage return of an attribute as it is, and the next reader turns each into a space (an
    alternative text's line breaks); here they are character references, as the part that was read wrote them."""
    out = ['<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n']
    stack: list[Any] = [doc.documentElement]
    while stack:
        node = stack.pop()
        if isinstance(node, str):  # an end tag
            out.append(node)
        elif node.nodeType == node.ELEMENT_NODE:
            out.append("<" + node.tagName)
            out.extend(f' {name}="{attribute_value(value)}"' for name, value in node.attributes.items())
            if node.childNodes:
                out.append(">")
                stack.append(f"</{node.tagName}>")
                stack.extend(reversed(node.childNodes))
            else:
                out.append("/>")
        elif node.nodeType == node.TEXT_NODE:
            out.append(escape(node.data, TEXT_REFERENCES))
        elif node.nodeType == node.CDATA_SECTION_NODE:
            out.append(f"<![CDATA[{node.data}]]>")
        elif node.nodeType == node.COMMENT_NODE:
            out.append(f"<!--{node.data}-->")
        elif node.nodeType == node.PROCESSING_INSTRUCTION_NODE:
            out.append(f"<?{node.target} {node.data}?>")
    return "".join(out).encode()


def parser(name: str, unreadable: type[Exception], start: Callable[[str, dict[str, str]], None] | None = None,
           end: Callable[[str], None] | None = None, text: Callable[[str], None] | None = None) -> Any:
    """An expat parser of part ``name`` with namespaces resolved and the handlers given, that refuses a DTD
    (``unreadable``); ``feed`` it."""
    made = expat.ParserCreate(namespace_separator=SEPARATOR)

    def no_dtd(*_: object) -> None:
        raise unreadable(f"{name} declares a DTD")

    made.StartDoctypeDeclHandler = no_dtd
    made.EntityDeclHandler = no_dtd
    made.StartElementHandler, made.EndElementHandler, made.CharacterDataHandler = start, end, text
    made.buffer_text = True
    return made


def feed(reader: Any, chunks: Iterable[bytes], name: str, unreadable: type[Exception], final: bool = True) -> None:
    """Part ``name``'s ``chunks`` through ``reader`` (not ``final``: its start); bad XML raises ``unreadable``."""
    try:
        for chunk in chunks:
            reader.Parse(chunk, False)
        reader.Parse(b"", final)
    except expat.ExpatError as error:
        raise unreadable(f"{name}: {error}") from error


def start_tag(data: bytes, at: int, name: str) -> tuple[bytes, re.Match[bytes], list[re.Match[bytes]]]:
    """The start tag at byte ``at`` of part ``name`` (``data``, read whole by expat, which found a tag there): its
    qualified name, its end (``/>`` when the element is empty) and each of its attributes."""
    tag = TAG_NAME.match(data, at)
    if tag is None:
        raise Unreadable(f"{name}: no start tag where expat found one")
    attributes, position = [], tag.end()
    while attribute := ATTRIBUTE.match(data, position):
        attributes.append(attribute)
        position = attribute.end()
    end = TAG_END.match(data, position)
    if end is None:
        raise Unreadable(f"{name}: a start tag does not end where its attributes do")
    return tag.group()[1:], end, attributes


def prefix(data: bytes, at: int, name: str) -> str:
    """The prefix and its colon ("x:"; "" for none) of the start tag at byte ``at``, for an element put beside it."""
    qualified = start_tag(data, at, name)[0].decode()
    return qualified.rpartition(":")[0] + ":" if ":" in qualified else ""


def element_end(data: bytes, at: int, end_at: int, name: str) -> int:
    """Where the element whose start tag is at byte ``at`` ends: past its ``/>``, or past its end tag, which expat
    reported at ``end_at``."""
    tag_end = start_tag(data, at, name)[1]
    return tag_end.end() if tag_end.group().endswith(b"/>") else data.index(b">", end_at) + 1


def xstring(text: str) -> str:
    """The text of an OOXML ``ST_Xstring`` as written, its ``_xHHHH_`` escapes resolved."""
    return XSTRING_ESCAPE.sub(lambda found: chr(int(found.group(1), 16)), text) if "_x" in text else text


def _sheets(package: zipfile.ZipFile) -> list[str]:
    names = []

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == f"{SPREADSHEET}{SEPARATOR}sheet":
            names.append(xstring(attributes.get("name", "")))

    parse(package, FORMATS["xls"].main_part, start)
    return names


def _slides(package: zipfile.ZipFile) -> int:
    main = FORMATS["ppt"].main_part
    slides: list[str | None] = []
    targets: dict[str | None, str] = {}

    def slide(tag: str, attributes: dict[str, str]) -> None:
        if tag == f"{PRESENTATION}{SEPARATOR}sldId":
            slides.append(attributes.get(f"{RELATIONSHIPS}{SEPARATOR}id"))

    def relationship(tag: str, attributes: dict[str, str]) -> None:
        if tag == f"{PACKAGE_RELATIONSHIPS}{SEPARATOR}Relationship":
            targets[attributes.get("Id")] = attributes.get("Target", "")

    parse(package, main, slide)
    folder, name = posixpath.split(main)
    parse(package, f"{folder}/_rels/{name}.rels", relationship)
    parts = set(package.namelist())
    # a slide counts when its relationship leads to a part that is there; a target is relative to
    # the folder of the part, or absolute from the package's root (OPC allows both)
    return sum(1 for rid in slides
               if rid in targets and posixpath.normpath(posixpath.join("/" + folder, targets[rid]))[1:] in parts)


def _text(package: zipfile.ZipFile) -> tuple[Counter[str], Counter[str]]:
    """The characters of the document's text, and those of them in its fields' results."""
    counted: Counter[str] = Counter()
    computed: Counter[str] = Counter()
    inside = [0]  # depth of w:t / w:delText elements the parser is in
    fields = FieldResults()
    text_tags = {f"{WORD}{SEPARATOR}t", f"{WORD}{SEPARATOR}delText"}
    symbol = f"{WORD}{SEPARATOR}sym"
    symbol_char = f"{WORD}{SEPARATOR}char"

    def count(chars: str) -> None:
        counted.update(chars)
        if fields.inside:
            computed.update(chars)

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag in text_tags:
            inside[0] += 1
        elif tag in WORD_CHARACTERS:
            count(WORD_CHARACTERS[tag])
        elif tag == symbol:
            try:
                count(chr(int(attributes.get(symbol_char, ""), 16)))
            except ValueError:
                pass
        elif tag in FieldResults.TAGS:
            fields.start(tag, attributes)

    def end(tag: str) -> None:
        if tag in text_tags:
            inside[0] -= 1
        elif tag in FieldResults.TAGS:
            fields.end(tag)

    def text(data: str) -> None:
        if inside[0]:
            count("".join(data.split()))

    parse(package, FORMATS["doc"].main_part, start, end, text)
    return counted, computed
