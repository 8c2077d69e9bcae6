"""What the mends of embedded objects share (``objects.py`` and ``slide_pictures.py`` for a presentation,
``sheet_objects.py`` for a workbook, ``word_objects.py`` for a text): an edited XML part read through the
DTD-refusing parser and written back, a new part's free name, an OLE object's relationship and content type, and
the ProgID an object's storage names.
"""

import logging
import re
import struct
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any
from xml.dom import minidom

import olefile

from docshift.engine import ooxml
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import Package
from docshift.errors import ResultUnreadable

log = logging.getLogger("docshift.engine")

OLE_OBJECT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/oleObject"
OLE_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.oleObject"
CT_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
REL_NS = ooxml.PACKAGE_RELATIONSHIPS
# an object's storage inflated from a 4 MiB upload: each and all together, past which the rest stay as they are
MAX_OBJECT = 64 << 20
MAX_OBJECTS = 256 << 20
MAX_EDITED_PART = 16 << 20  # slides, their relationships and [Content_Types].xml: kilobytes in real files
ROOT_TAG = re.compile(rb"<([A-Za-z_][\w.:-]*)" + ooxml.IN_TAG + rb"*>")  # a part's first element's start tag
# the ProgIDs of the objects Office documents embed most, by the CLSID of their storage
PROG_IDS = {f"{clsid}-0000-0000-C000-000000000046": prog_id for clsid, prog_id in (
    ("00020810", "Excel.Sheet.5"), ("00020811", "Excel.Chart.5"), ("00020820", "Excel.Sheet.8"),
    ("00020821", "Excel.Chart.8"), ("00020900", "Word.Document.6"), ("00020906", "Word.Document.8"),
    ("00020803", "MSGraph.Chart.8"), ("0002CE02", "Equation.3"), ("0003000C", "Package"))} | {
    "64818D10-4F9B-11CF-86EA-00AA00B929E8": "PowerPoint.Show.8", "64818D11-4F9B-11CF-86EA-00AA00B929E8":
    "PowerPoint.Slide.8"}
ERRORS = (Unreadable, ResultUnreadable, zipfile.BadZipFile, zlib.error, struct.error, EOFError, OSError, ValueError,
          KeyError, NotImplementedError)


def guarded(mending: Callable[[Path, Path], int], result: Path, source: Path, failure: str) -> int:
    """``mending(result, source)``, or 0 when a file does not read as it should: a legacy file the record readers
    do not know (PowerPoint 95, Word 6) or that is no compound file (RTF or HTML under .doc) quietly, any other
    such error logged with ``failure`` (source, error)."""
    try:
        return mending(result, source) if olefile.isOleFile(str(source)) else 0
    except Unreadable:
        return 0
    except ERRORS as error:
        log.warning(failure, source, error)
        return 0


def free_name(lower: set[str], pattern: str) -> str:
    """The first part name of ``pattern`` (numbered from 1) that ``lower`` (the package's names, lower-cased) does
    not hold; taken, into ``lower``."""
    number = 1
    while pattern.format(number).lower() in lower:
        number += 1
    lower.add(pattern.format(number).lower())
    return pattern.format(number)


def relate(rels: minidom.Document, target: str, rel_type: str = OLE_OBJECT) -> str:
    """A new relationship of ``rel_type`` (an OLE object's), to the part ``target``, in the relationships part
    ``rels``; returns its Id."""
    root: Any = rels.documentElement
    taken = {rel.getAttribute("Id") for rel in root.getElementsByTagNameNS(REL_NS, "Relationship")}
    number = len(taken) + 1
    while f"rId{number}" in taken:
        number += 1
    rel = root.appendChild(rels.createElementNS(REL_NS, f"{root.prefix}:Relationship" if root.prefix
                                                else "Relationship"))
    rel.setAttribute("Id", f"rId{number}")
    rel.setAttribute("Type", rel_type)
    rel.setAttribute("Target", target)
    return f"rId{number}"


def prog_id_of(data: bytes) -> str:
    """The ProgID in the storage's CompObj stream ([MS-OLEDS] 2.3.8), else the one its CLSID is registered
    under (LibreOffice writes none in either place), or ""."""
    try:
        with olefile.OleFileIO(data) as ole:
            known = PROG_IDS.get(ole.root.clsid.upper(), "")
            comp = ole.openstream("\x01CompObj").read(4096) if ole.exists("\x01CompObj") else b""
        pos = 28  # the header, then AnsiUserType, AnsiClipboardFormat and the ProgID
        (length,) = struct.unpack_from("<I", comp, pos)
        pos += 4 + length
        (marker,) = struct.unpack_from("<I", comp, pos)
        pos += 8 if marker in (0xFFFFFFFF, 0xFFFFFFFE) else 4 + marker
        (length,) = struct.unpack_from("<I", comp, pos)
        prog = comp[pos + 4:pos + 4 + length].split(b"\x00")[0].decode("latin-1")
        return prog if 0 < len(prog) < 40 and prog.isprintable() else known
    except (OSError, struct.error, ValueError):
        return known if "known" in locals() else ""


def read_part(package: Package, name: str) -> minidom.Document:
    """Part ``name`` parsed by minidom once the DTD-refusing parser has let it through."""
    return minidom.parseString(ooxml.checked(part_bytes(package, name), name))


def part_bytes(package: Package, name: str) -> bytes:
    """The bytes of part ``name``, within ``MAX_EDITED_PART``: a part to be edited is held whole."""
    info = package.names.get(name)
    if info is None:
        raise Unreadable(f"{name} is missing")
    return ooxml.read(package.zip, info, MAX_EDITED_PART)


# an edit of a part: (its bytes, its name) -> (the bytes edited, how many things went in)
PartEdit = Callable[[bytes, str], tuple[bytes, int]]


def edit_parts(result: Path, parts: Callable[[Package], Iterable[tuple[str, PartEdit]]]) -> int:
    """Each part of the package ``result`` that ``parts(package)`` names given to its edit, and the package written
    again once with those that changed. Returns how many things went in, summed."""
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        edits, given = {}, 0
        for name, edit in parts(package):
            data = part_bytes(package, name)
            edited, count = edit(data, name)
            if edited != data:
                edits[name], given = edited, given + count
        if edits:
            ooxml.rewrite(zf, result, edits)
    return given


def edited(result: Path, parts: Callable[[Package], Iterable[tuple[str, PartEdit]]], failure: str,
           named: Path | None = None) -> int:
    """``edit_parts(result, parts)``, or 0 where the package or a part does not read as it should: logged with
    ``failure`` (the file, ``named`` or ``result``; the error). Never raises for what the file holds."""
    try:
        return edit_parts(result, parts)
    except ERRORS as error:
        log.warning(failure, named or result, error)
        return 0


def attributes_given(result: Path, part: str, tag: str, wanted: dict[str, str], failure: str) -> int:
    """Give each element ``tag`` of ``part`` of the package ``result`` the attributes ``wanted`` (unprefixed), every
    other byte of the part as it was. Returns 1 where they went in (0: the file is untouched); ``failure`` is
    logged where the part does not read (``edited``)."""

    def given(data: bytes, name: str) -> tuple[bytes, int]:
        return ooxml.edit_tags(data, name, lambda found, attributes: {
            key: value for key, value in wanted.items() if attributes.get(key) != value} or None
            if found == tag else None), 1

    return edited(result, lambda package: [(part, given)] if part in package.names else [], failure)


def root_frame(data: bytes) -> tuple[bytes, bytes] | None:
    """The start tag of the part ``data``'s root element, which declares LibreOffice's prefixes, and its end tag: a
    fragment of the part between them parses as it does in place; None where no root is found."""
    root = ROOT_TAG.search(data)
    return None if root is None else (root.group(), b"</" + root.group(1) + b">")


def spliced(data: bytes, edits: Iterable[tuple[int, int, bytes]]) -> bytes:
    """``data`` with each of ``edits`` ((from, to, the bytes there), none overlapping) made, every other byte as it
    was; of an insertion (from = to) and a replacement at one place, the insertion goes first."""
    out, done = [], 0
    for start, end, written in sorted(edits, key=lambda edit: (edit[0], edit[1] > edit[0])):
        out += [data[done:start], written]
        done = max(done, end)
    return b"".join([*out, data[done:]])


def child_place(data: bytes, name: str, tag: str, following: Collection[str],
                preceding: Collection[str] | None = None) -> tuple[bool, int, int]:
    """Of part ``name`` (``data``): (whether it holds an element ``tag``; where a child ``tag`` of its root goes: before
    the first of the root's children whose tag is one of ``following`` (or, given ``preceding``, is none of those),
    else before the root's end tag; where the root's start tag is). A part without a root element raises
    ``Unreadable``."""
    present, depth = False, 0
    root: list[int] = []
    before: list[int] = []

    def start(found: str, _: dict[str, str]) -> None:
        nonlocal depth, present
        depth += 1
        present = present or found == tag
        if depth == 1:
            root.append(reader.CurrentByteIndex)
        elif depth == 2 and not before and (found in following if preceding is None else found not in preceding):
            before.append(reader.CurrentByteIndex)

    def end(_: str) -> None:
        nonlocal depth
        depth -= 1
        if depth == 0:
            before.append(reader.CurrentByteIndex)

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    if not root or not before:
        raise Unreadable(f"{name}: no root element")
    return present, before[0], root[0]


def content_types(doc: minidom.Document, added: dict[str, bytes], dropped: set[str],
                  content_type: Callable[[str], str] = lambda name: OLE_CONTENT_TYPE) -> bytes:
    """[Content_Types].xml with a type for each added part (an OLE object's, unless ``content_type(name)`` says
    another), and none for the dropped ones."""
    root: Any = doc.documentElement
    for element in list(root.getElementsByTagNameNS(CT_NS, "Override")):
        if element.getAttribute("PartName").lstrip("/") in dropped:
            root.removeChild(element)
    for name in added:
        element = root.appendChild(doc.createElementNS(CT_NS, f"{root.prefix}:Override" if root.prefix
                                                       else "Override"))
        element.setAttribute("PartName", "/" + name)
        element.setAttribute("ContentType", content_type(name))
    return ooxml.serialize(doc)
