"""Embedded OLE objects that LibreOffice's OOXML export loses, put back from the legacy file.

LibreOffice 25.2 numbers a ``.pptx``'s embedded objects per slide, so objects on different slides get the same
part name (``ppt/embeddings/oleObject1.bin``) and only one of them survives: every slide then shows its own
replacement image, but activating the object opens another slide's. The ``.ppt`` holds every object as an
ExOleObjStg record (a compound file, zlib-compressed after its 4-byte size when recInstance is 1), named from each
shape's ExObjRefAtom through the ExObjList's ExOleEmbed atoms ([MS-PPT] 2.10.27-2.10.34). ``mend`` gives each
object of a shared part its own ``oleObjectN.bin`` with that record's storage, as PowerPoint itself writes a
legacy object into a ``.pptx``, and the ProgID the source names.

A slide's ``p:oleObj`` elements are matched with its OLE shapes in drawing order, only on slides where both
counts agree: on the corpus the order held wherever the objects could be told apart (the storages LibreOffice
kept as they were hold the same streams as the source's record in that place). Nothing else is touched: a part
only one shape refers to stays as LibreOffice wrote it (it may have made an Office object a ``.docx``).
"""

import logging
import posixpath
import re
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.dom import minidom

import olefile

from docshift.engine import ooxml
from docshift.engine.inventory import officeart
from docshift.engine.inventory.common import Budget, Unreadable, stream

# the persist directory and shape walks of the inventory's .ppt reader, reused rather than written twice
from docshift.engine.inventory.package import NS_P, NS_R, SEP, Package, relationships_part
from docshift.engine.inventory.ppt import (
    RT_CSTRING,
    RT_EXEMBED,
    RT_EXOBJ_LIST,
    RT_EXOLEOBJ_ATOM,
    RT_SLIDE,
    RT_SLIDE_LIST,
    RT_SLIDE_PERSIST,
    _Presentation,
)
from docshift.errors import ResultUnreadable

log = logging.getLogger("docshift.engine")

RT_EXOLEOBJ_STG = 0x1011
OLE_OBJECT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/oleObject"
OLE_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.oleObject"
CT_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
REL_NS = ooxml.PACKAGE_RELATIONSHIPS
OLE_OBJ = f"{NS_P}{SEP}oleObj"
EMBEDDINGS = "ppt/embeddings/"
# an object's storage inflated from a 4 MiB upload: each and all together, past which the rest stay as they are
MAX_OBJECT = 64 << 20
MAX_OBJECTS = 256 << 20
MAX_EDITED_PART = 16 << 20  # slides, their relationships and [Content_Types].xml: kilobytes in real files
# the ProgIDs of the objects Office documents embed most, by the CLSID of their storage
PROG_IDS = {f"{clsid}-0000-0000-C000-000000000046": prog_id for clsid, prog_id in (
    ("00020810", "Excel.Sheet.5"), ("00020811", "Excel.Chart.5"), ("00020820", "Excel.Sheet.8"),
    ("00020821", "Excel.Chart.8"), ("00020900", "Word.Document.6"), ("00020906", "Word.Document.8"),
    ("00020803", "MSGraph.Chart.8"), ("0002CE02", "Equation.3"), ("0003000C", "Package"))} | {
    "64818D10-4F9B-11CF-86EA-00AA00B929E8": "PowerPoint.Show.8", "64818D11-4F9B-11CF-86EA-00AA00B929E8":
    "PowerPoint.Slide.8"}
ERRORS = (Unreadable, ResultUnreadable, zipfile.BadZipFile, zlib.error, struct.error, EOFError, OSError, ValueError,
          KeyError, NotImplementedError)


@dataclass
class Source:
    """One embedded object of the .ppt: its ProgID as the ExOleEmbed names it, and where its storage is."""
    prog_id: str
    persist: int


def mend(result: Path, source: Path, kind: str) -> int:
    """Give each embedded object of the presentation ``result`` (LibreOffice's export of ``source``) that shares
    its part with another object a part of its own, holding its storage from the legacy file, with its ProgID and
    relationship; the replacement image stays. Returns how many objects got a part (0: the file is untouched).
    Writes a new package next to ``result`` and moves it over; a part it cannot read or an object it cannot find
    leaves the file as it was. Never raises for what the files hold."""
    if kind != "ppt":
        return 0
    return guarded(_mend, result, source, "embedded objects of %s stay as LibreOffice wrote them: %r")


def guarded(mending: Callable[[Path, Path], int], result: Path, source: Path, failure: str) -> int:
    """``mending(result, source)``, or 0 when a file does not read as it should: a legacy file the record readers
    do not know (PowerPoint 95, Word 6) quietly, any other such error logged with ``failure`` (source, error)."""
    try:
        return mending(result, source)
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


def relate(rels: minidom.Document, target: str) -> str:
    """A new relationship of an OLE object, to the embedded part ``target``, in the relationships part ``rels``;
    returns its Id."""
    root: Any = rels.documentElement
    taken = {rel.getAttribute("Id") for rel in root.getElementsByTagNameNS(REL_NS, "Relationship")}
    number = len(taken) + 1
    while f"rId{number}" in taken:
        number += 1
    rel = root.appendChild(rels.createElementNS(REL_NS, f"{root.prefix}:Relationship" if root.prefix
                                                else "Relationship"))
    rel.setAttribute("Id", f"rId{number}")
    rel.setAttribute("Type", OLE_OBJECT)
    rel.setAttribute("Target", target)
    return f"rId{number}"


def _mend(result: Path, source: Path) -> int:
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        slides, references = _result_objects(package)
        shared = {target for target, count in references.items() if count > 1}
        if not shared:
            return 0
        show, objects, slide_objects = _source_objects(source)
        if len(slides) != len(slide_objects):
            return 0  # the slides themselves do not pair up (the content check refuses such a result)
        lower = {name.lower() for name in package.names}
        edits: dict[str, bytes] = {}
        added: dict[str, bytes] = {}
        inflated = 0
        for (slide, found), ole_shapes in zip(slides, slide_objects):
            shapes = [shape.object_ref for shape in ole_shapes]
            if len(found) != len(shapes) or not any(target in shared for _, target, _ in found):
                continue  # another count than the source's: which object is which cannot be told
            moved: dict[str, tuple[str, str | None]] = {}  # rId: (new target, ProgID)
            for (rid, target, rel_type), ref in zip(found, shapes):
                if target not in shared or ref not in objects:
                    continue
                data = _storage(show, objects[ref].persist, MAX_OBJECTS - inflated)
                if data is None:
                    continue
                inflated += len(data)
                name = free_name(lower, EMBEDDINGS + "oleObject{}.bin")
                added[name] = data
                # LibreOffice's own ProgID names the object it wrote: kept when the source names none, unless that
                # was an OOXML package (Excel.Sheet.12), which the legacy storage is not
                prog_id = objects[ref].prog_id or _prog_id(data) or ("" if rel_type.endswith("/package") else None)
                moved[rid] = (name, prog_id)
                references[target] -= 1
            if moved:
                rels = relationships_part(slide)
                edits[rels] = _relationships(_read(package, rels), moved)
                edits[slide] = _slide(_read(package, slide), moved)
        if not added:
            return 0
        dropped = {target for target in shared if references[target] == 0}
        edits["[Content_Types].xml"] = _content_types(_read(package, "[Content_Types].xml"), added, dropped)
        ooxml.rewrite(zf, result, edits, added, dropped)
    return len(added)


def _result_objects(package: Package) -> tuple[list[tuple[str, list[tuple[str, str, str]]]], Counter[str]]:
    """([(slide part, [(rId, embedded part, relationship type)] of its p:oleObj in order)] in slide order,
    {embedded part: how many relationships of the whole package point at it})."""
    main = "ppt/presentation.xml"
    slide_ids: list[str] = []
    package.parse(main, lambda tag, attrs: slide_ids.append(attrs.get(f"{NS_R}{SEP}id", ""))
                  if tag == f"{NS_P}{SEP}sldId" else None)
    main_rels = package.relationships(main, required=True)
    references: Counter[str] = Counter()
    for rels_part in package.names:
        match = re.fullmatch(r"(.*?)_rels/(.+)\.rels", rels_part)
        if match and match.group(1).startswith("ppt/"):
            for _, target in package.relationships(match.group(1) + match.group(2)).values():
                if target and target.startswith(EMBEDDINGS):
                    references[target] += 1
    slides = []
    for rid in slide_ids:
        slide = main_rels.get(rid, ("", None))[1]
        if not slide or slide not in package.names:
            continue
        rels = package.relationships(slide)
        found = [(ole, rels.get(ole, ("", None))) for ole in _ole_objects(package, slide)]
        slides.append((slide, [(ole, target or "", rel_type) for ole, (rel_type, target) in found]))
    return slides, references


def _ole_objects(package: Package, slide: str) -> list[str]:
    """The r:id of each p:oleObj of ``slide``, in document order."""
    rids: list[str] = []
    package.parse(slide, lambda tag, attrs: rids.append(attrs.get(f"{NS_R}{SEP}id", "")) if tag == OLE_OBJ else None)
    return rids


def _source_objects(source: Path) -> tuple[_Presentation, dict[int, Source], list[list[officeart.Shape]]]:
    """(the .ppt's live objects, {exObjId: embedded object}, [each OLE shape (its ``object_ref`` the ExObjRef), in
    drawing order] per slide, in slide order)."""
    with olefile.OleFileIO(str(source)) as ole:
        doc, current = stream(ole, "PowerPoint Document"), stream(ole, "Current User")
    if doc is None or current is None:
        raise Unreadable("no PowerPoint Document")
    budget = Budget()
    show = _Presentation(doc, current, budget)
    objects: dict[int, Source] = {}
    slide_refs: list[int] = []
    for rec_type, instance, _, body, stop in officeart.children(doc, *show.document, budget):
        if rec_type == RT_EXOBJ_LIST:
            for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
                if child == RT_EXEMBED:
                    _embed(doc, child_body, child_stop, budget, objects)
        elif rec_type == RT_SLIDE_LIST and instance == 0:
            for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
                if child == RT_SLIDE_PERSIST and child_stop - child_body >= 4:
                    slide_refs.append(struct.unpack_from("<I", doc, child_body)[0])
    slides = []
    for ref in slide_refs:
        located = show.container(ref, RT_SLIDE)
        shapes = show.shapes(located) if located else []
        slides.append([shape for shape in shapes
                       if shape.object_ref is not None and not shape.flags & officeart.FSP_DELETED])
    return show, objects, slides


def _embed(doc: bytes, start: int, end: int, budget: Budget, objects: dict[int, Source]) -> None:
    """The ExOleEmbed container at ``doc[start:end]`` into ``objects`` when it is an embedded object."""
    atom, prog_id = None, ""
    for rec_type, instance, _, body, stop in officeart.children(doc, start, end, budget):
        if rec_type == RT_EXOLEOBJ_ATOM and stop - body >= 20:
            atom = struct.unpack_from("<IIIII", doc, body)  # drawAspect, type, exObjId, subType, persistIdRef
        elif rec_type == RT_CSTRING and instance == 2:
            prog_id = bytes(doc[body:stop]).decode("utf_16_le", "replace").strip("\x00")
    if atom is not None and atom[1] == 0:  # type 0: embedded, not linked or a control
        objects[atom[2]] = Source(prog_id, atom[4])


def _storage(show: _Presentation, persist: int, room: int) -> bytes | None:
    """The compound file of the ExOleObjStg record ``persist``, or None when it is missing, larger than ``room``
    or ``MAX_OBJECT``, or not a compound file."""
    located = show.container(persist, RT_EXOLEOBJ_STG)
    if located is None:
        return None
    body = show.doc[located[0]:located[1]]
    instance = officeart.header(show.doc, located[0] - 8)[1]
    limit = min(room, MAX_OBJECT)
    if instance == 1:
        (size,) = struct.unpack_from("<I", body)
        if size > limit:
            return None
        # a decompressobj: PowerPoint may leave a zlib stream without its end (as its VBA storage, vba.py)
        data = zlib.decompressobj().decompress(body[4:], size)
    else:
        data = bytes(body)
    if len(data) > limit or len(data) < olefile.MINIMAL_OLEFILE_SIZE or not data.startswith(olefile.MAGIC):
        return None
    return data


def _prog_id(data: bytes) -> str:
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


def _read(package: Package, name: str) -> minidom.Document:
    """Part ``name`` parsed by minidom once the DTD-refusing parser has let it through."""
    info = package.names.get(name)
    if info is None:
        raise Unreadable(f"{name} is missing")
    return minidom.parseString(ooxml.checked(ooxml.read(package.zip, info, MAX_EDITED_PART), name))


def _relationships(doc: minidom.Document, moved: dict[str, tuple[str, str | None]]) -> bytes:
    """A slide's relationships with each moved rId pointing at its own part, as an OLE object."""
    for rel in doc.getElementsByTagNameNS(REL_NS, "Relationship"):
        if rel.getAttribute("Id") in moved:
            rel.setAttribute("Target", "../embeddings/" + posixpath.basename(moved[rel.getAttribute("Id")][0]))
            rel.setAttribute("Type", OLE_OBJECT)
    return _serialize(doc)


def _slide(doc: minidom.Document, moved: dict[str, tuple[str, str | None]]) -> bytes:
    """A slide whose moved p:oleObj name their object's ProgID: set, removed ("") or left as it was (None)."""
    for element in doc.getElementsByTagNameNS(NS_P, "oleObj"):
        prog_id = moved.get(element.getAttributeNS(NS_R, "id"), ("", None))[1]
        if prog_id:
            element.setAttribute("progId", prog_id)
        elif prog_id == "" and element.hasAttribute("progId"):
            element.removeAttribute("progId")
    return _serialize(doc)


def _content_types(doc: minidom.Document, added: dict[str, bytes], dropped: set[str]) -> bytes:
    """[Content_Types].xml with an OLE object's type for each added part, and none for the dropped ones."""
    root: Any = doc.documentElement
    for element in list(root.getElementsByTagNameNS(CT_NS, "Override")):
        if element.getAttribute("PartName").lstrip("/") in dropped:
            root.removeChild(element)
    for name in added:
        element = root.appendChild(doc.createElementNS(CT_NS, f"{root.prefix}:Override" if root.prefix
                                                       else "Override"))
        element.setAttribute("PartName", "/" + name)
        element.setAttribute("ContentType", OLE_CONTENT_TYPE)
    return _serialize(doc)


def _serialize(doc: minidom.Document) -> bytes:
    root: Any = doc.documentElement
    return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n' + root.toxml()).encode("utf-8")
