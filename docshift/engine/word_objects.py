"""Embedded objects of a .doc that LibreOffice loaded as pictures, put back as objects from the legacy file.

LibreOffice 25.2 loads an object of a .doc whose storage names no server (a "Package", a file of any kind put in
the text through Office's Object Packager, stored with its ``Ole10Native`` stream and no ``CompObj``) as its
replacement image only: the .docx holds an inline picture where Word would write a ``w:object``. In the .doc
each object is an EMBED field whose separator character carries ``sprmCFOle2`` and, in ``sprmCPicLocation``, the
number of its storage in the ``ObjectPool`` (``_<number>``); the picture character after it is its replacement
image. ``mend`` lists the main text's inline pictures and objects in the order of the text (CPs) and the
result's in the order of ``word/document.xml``; where the two lists pair up one for one (every object the result
kept stands where the source has an object), each picture that stands where the source has an object becomes a
``w:object`` again, as Word writes one: its VML shape shows the same image, in the same size, and its
``o:OLEObject`` names a part holding the object's storage from the ``ObjectPool``, with its ProgID. Lists that do
not pair up (a picture LibreOffice wrote in another way, a chart it made a drawing of) leave the file as it was.
"""

import posixpath
import re
import struct
import uuid
import zipfile
from pathlib import Path
from typing import Any
from xml.dom import minidom
from xml.sax.saxutils import escape

import olefile

from docshift.engine import cfb, ooxml
from docshift.engine.embedding import (
    MAX_EDITED_PART,
    MAX_OBJECT,
    MAX_OBJECTS,
    OLE_OBJECT,
    PROG_IDS,
    content_types,
    free_name,
    guarded,
    prog_id_of,
    read_part,
    relate,
)
from docshift.engine.inventory import doc as word
from docshift.engine.inventory.common import Budget, stream
from docshift.engine.inventory.package import NS_A, NS_O, NS_R, NS_V, NS_W, Package, relationships_part

NS_WP = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
NS_PIC = "http://schemas.openxmlformats.org/drawingml/2006/picture"
NS_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
CHART_URI = "http://schemas.openxmlformats.org/drawingml/2006/chart"
MAIN, MAIN_RELS = "word/document.xml", "word/_rels/document.xml.rels"
CHART_PART = re.compile(r"word/charts/chart[0-9]+\.xml")
PACKAGE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/package"  # an OOXML object's
EMPTY_RELS = f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{ooxml.PACKAGE_RELATIONSHIPS}"/>'
OLE_TAG = re.compile(rb"<o:OLEObject\b[^>]*>")
OBJECT_PREFIXES = (f'xmlns:o="{NS_O}"'.encode(), f'xmlns:r="{NS_R}"'.encode())  # the root's, as LibreOffice writes
STORY = re.compile(r"word/(document|header[0-9]*|footer[0-9]*|footnotes|endnotes)\.xml")
EMU_PER_POINT, EMU_PER_TWIP = 12700, 635
PREFIXES = {"w": NS_W, "v": NS_V, "o": NS_O, "r": NS_R}


def mend(result: Path, source: Path, kind: str, expected: int | None) -> int:
    """Put back, as OLE objects, the objects of the .doc ``source`` that LibreOffice's export ``result`` holds as
    pictures only. ``expected``: how many embedded objects the legacy file holds (None: unknown); nothing is read
    when it holds none. Returns how many objects were put back (0: the file is untouched). Never raises for what
    the files hold."""
    if kind != "doc" or expected == 0:
        return 0
    return guarded(_mend, result, source, "objects of %s that LibreOffice made pictures stay pictures: %r") + \
        guarded(_mend_stories, result, source, "objects of %s in notes or with no ProgID stay as written: %r")


def _mend_stories(result: Path, source: Path) -> int:
    """Two faults of LibreOffice 25.2's export in the objects of a text's stories, mended:

    - an object of a footnote or an endnote gets its relationship in the main document's part
      (``word/_rels/document.xml.rels``), so the note's ``r:id`` names nothing in its own part's, and Word or
      LibreOffice reading the .docx keeps its image alone: the relationship is written in the notes' part's;
    - an object whose server LibreOffice does not know but whose storage names one (a packaged file with its
      ``CompObj``, an Acrobat document, an Equation 3.0 object) is kept as the storage itself, ``ProgID=""``,
      with empty streams of its own added (``\\x03OCXNAME``, ``contents``): it gets the ProgID its storage names,
      and the storage as the ``ObjectPool`` holds it where one storage of the legacy file is the one kept (every
      stream of it equal, the streams added empty).

    Returns how many objects were mended; a package with no embedded part is not parsed."""
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        if not any(name.startswith("word/embeddings/") for name in package.names):
            return 0
        stories = _Stories(package, source)
        for part in sorted(name for name in package.names if STORY.fullmatch(name)):
            stories.mend(part)
        if stories.edits or stories.added:
            ooxml.rewrite(zf, result, stories.edits, stories.added)
    return stories.mended


class _Stories:
    """The mends of :func:`_mend_stories`, one story part at a time. A part is edited as bytes, one
    ``o:OLEObject`` start tag after another: a long text is not parsed."""

    def __init__(self, package: Package, source: Path) -> None:
        self.package, self.source = package, source
        self.edits: dict[str, bytes] = {}
        self.added: dict[str, bytes] = {}
        self.mended = 0
        self.storages: list[tuple[cfb.Entry, dict[str, bytes]]] | None = None  # with their streams
        self.main: dict[str | None, tuple[str, str | None]] | None = None

    def mend(self, part: str) -> None:
        raw = ooxml.read(self.package.zip, self.package.names[part], MAX_EDITED_PART)
        if b'ProgID=""' not in raw and (part == MAIN or b"OLEObject" not in raw):
            return
        root = raw[:raw.find(b">", raw.find(b"<w:")) + 1]
        if not all(prefix in root for prefix in OBJECT_PREFIXES):
            return  # written with other prefixes than LibreOffice's: not edited
        targets = self.package.relationships(part)
        rels: list[minidom.Document] = []
        edited = OLE_TAG.sub(lambda match: self._tag(match.group(0), part, targets, rels), raw)
        if edited != raw:
            self.edits[part] = edited
        if rels:
            rels_part = relationships_part(part)
            (self.edits if rels_part in self.package.names else self.added)[rels_part] = ooxml.serialize(rels[0])

    def _tag(self, element: bytes, part: str, targets: dict[str | None, tuple[str, str | None]],
             rels: list[minidom.Document]) -> bytes:
        """One ``o:OLEObject`` start tag of ``part`` mended; ``rels``: the part's relationships once read."""
        found = re.search(rb'\sr:id="([^"]*)"', element)
        rid = found.group(1).decode() if found else ""
        if rid not in targets and part != MAIN:
            self.main = self.package.relationships(MAIN) if self.main is None else self.main
            rel_type, target = self.main.get(rid, ("", None))
            if target in self.package.names and rel_type in (OLE_OBJECT, PACKAGE):
                rels_part = relationships_part(part)
                if not rels:
                    rels.append(read_part(self.package, rels_part) if rels_part in self.package.names
                                else minidom.parseString(EMPTY_RELS))
                rid = relate(rels[0], posixpath.relpath(target or "", posixpath.dirname(part)), rel_type)
                targets[rid] = (rel_type, target)
                element = re.sub(rb'(\sr:id=")[^"]*"', b"\\g<1>" + rid.encode() + b'"', element)
                self.mended += 1
        target = targets.get(rid, ("", None))[1]
        if b'ProgID=""' not in element or target not in self.package.names or not target.endswith(".bin"):
            return element
        data = self.edits.get(target) or ooxml.read(self.package.zip, self.package.names[target], MAX_OBJECT)
        if self.storages is None:
            with cfb.CompoundFile(self.source) as legacy:
                pool = cfb.read_storage(legacy, "ObjectPool", MAX_OBJECTS) if legacy.exists("ObjectPool") \
                    else cfb.Entry("ObjectPool")
            self.storages = [(child, child.streams()) for child in pool.children if child.data is None]
        original = _kept(data, self.storages)
        if original is not None:
            self.edits[target] = data = original
        prog_id = prog_id_of(data)
        if not prog_id:
            return element
        self.mended += 1
        return element.replace(b'ProgID=""', b'ProgID="' + escape(prog_id, {'"': "&quot;"}).encode() + b'"', 1)


def _kept(data: bytes, storages: list[tuple[cfb.Entry, dict[str, bytes]]]) -> bytes | None:
    """The one storage of ``storages`` (each with its streams) that the compound file ``data`` keeps (its CLSID,
    each of its streams equal, every other stream of ``data`` empty), written as a file of its own; None for none
    or two that differ."""
    with olefile.OleFileIO(data) as ole:
        kept = cfb.read_storage(ole, "", MAX_OBJECT)
    streams = {name.lower(): data for name, data in kept.streams().items()}
    found = [(storage, original) for storage, original in storages
             if storage.clsid == kept.clsid and _keeps(streams, original)]
    if not found or any(original != found[0][1] for _, original in found[1:]):
        return None  # none, or two different storages that both could be this one
    return cfb.write(cfb.Entry("Root Entry", clsid=found[0][0].clsid, children=found[0][0].children))


def _keeps(streams: dict[str, bytes], original: dict[str, bytes]) -> bool:
    """Whether ``streams`` (names lower-cased) are the ``original`` ones and, beside them, empty ones only."""
    names = {name.lower() for name in original}
    return all(streams.get(name.lower()) == data for name, data in original.items()) and \
        all(not data for name, data in streams.items() if name not in names)


def _mend(result: Path, source: Path) -> int:
    with cfb.CompoundFile(source) as ole:
        sequence = _source_sequence(ole)
        if not any(sequence):
            return 0
        pool = cfb.read_storage(ole, "ObjectPool", MAX_OBJECTS)
    storages = {child.name: child for child in pool.children if child.data is None}
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        parts = sum(1 for name in package.names if name.startswith("word/embeddings/") or CHART_PART.fullmatch(name))
        if parts >= sum(1 for name in sequence if name):
            return 0  # every object of the text has a part (the common case): the document is not parsed
        doc = read_part(package, MAIN)
        root: Any = doc.documentElement
        if any(root.getAttribute(f"xmlns:{prefix}") != uri for prefix, uri in PREFIXES.items()):
            return 0  # written with other prefixes than LibreOffice's: not edited
        found = _result_sequence(doc)
        if found is None or len(found) != len(sequence) or \
                any(kept and name is None for (_, kept), name in zip(found, sequence)):
            return 0  # the two lists do not pair up: which picture is which object cannot be told
        rels = read_part(package, MAIN_RELS)
        lower = {name.lower() for name in package.names}
        added: dict[str, bytes] = {}
        for (drawing, kept), name in zip(found, sequence):
            storage = storages.get(name or "")
            if kept or storage is None:
                continue
            data = cfb.write(cfb.Entry("Root Entry", clsid=storage.clsid, children=storage.children))
            shown = _shown(drawing)
            if shown is None:
                continue
            part = free_name(lower, "word/embeddings/oleObject{}.bin")
            added[part] = data
            prog_id = prog_id_of(data) or PROG_IDS.get(str(uuid.UUID(bytes_le=storage.clsid)).upper(), "")
            _wrap(doc, drawing, shown, relate(rels, part.removeprefix("word/")), prog_id, name or "")
        if not added:
            return 0
        edits = {MAIN: ooxml.serialize(doc), MAIN_RELS: ooxml.serialize(rels),
                 "[Content_Types].xml": content_types(read_part(package, "[Content_Types].xml"), added, set())}
        ooxml.rewrite(zf, result, edits, added)
    return len(added)


def _source_sequence(ole: olefile.OleFileIO) -> list[str | None]:
    """The main text's inline pictures and objects in CP order: an object's storage name ("_<number>"), None for a
    picture; [] when the text does not read so (Word 6/95, an EMBED field without a picture)."""
    data = stream(ole, "WordDocument")
    if data is None:
        return []
    doc = word._fib(data, lambda name: stream(ole, name))
    if doc.nfib < 0xC0:
        return []
    doc.pieces = word._pieces(doc)
    events: list[tuple[int, str | None, bool]] = []  # (cp, the object's storage or None, is the separator)
    budget = Budget()
    for start, end, properties in word.character_runs(doc, budget):
        location = properties.get(word.SPRM_PIC_LOCATION, b"")
        if len(location) < 4 or properties.get(word.SPRM_FSPEC, b"\0")[:1] != b"\1":
            continue
        separator = properties.get(word.SPRM_FOLE2, b"\0")[:1] == b"\1"
        if not separator and properties.get(word.SPRM_FDATA, b"\0")[:1] == b"\1":
            continue  # a form field's data, not a picture
        name = f"_{struct.unpack_from('<I', location)[0]}" if separator else None
        for _, cp in word.special_characters(doc, start, end, "\x14" if separator else "\x01", budget):
            if cp < doc.ccp[0]:
                events.append((cp, name, separator))
    sequence: list[str | None] = []
    pending: str | None = None
    for _, name, separator in sorted(events):
        if separator:
            if pending is not None:
                return []  # an object without its picture
            pending = name
        else:
            sequence.append(pending)
            pending = None
    return sequence if pending is None else []


def _result_sequence(doc: minidom.Document) -> list[tuple[Any, bool]] | None:
    """The main text's inline pictures and objects in document order: (w:drawing or w:object, whether it is an
    object: a ``w:object`` or a chart LibreOffice made of an MS Graph object); text boxes' content and floating
    drawings left out. None when an inline drawing is neither a picture nor a chart."""
    found: list[tuple[Any, bool]] = []
    bodies = doc.getElementsByTagNameNS(NS_W, "body")
    pending = list(reversed(bodies[0].childNodes)) if bodies else []
    while pending:
        node = pending.pop()
        if node.nodeType != node.ELEMENT_NODE:
            continue
        where = (node.namespaceURI, node.localName)
        if where in ((NS_W, "txbxContent"), (NS_MC, "Fallback")):
            continue
        if where == (NS_W, "object"):
            found.append((node, True))
        elif where == (NS_W, "drawing"):
            if not node.getElementsByTagNameNS(NS_WP, "inline"):
                continue
            if node.getElementsByTagNameNS(NS_PIC, "pic"):
                found.append((node, False))
            elif any(data.getAttribute("uri") == CHART_URI
                     for data in node.getElementsByTagNameNS(NS_A, "graphicData")):
                found.append((node, True))
            else:
                return None
        else:
            pending.extend(reversed(node.childNodes))
    return found


def _shown(drawing: Any) -> tuple[int, int, str] | None:
    """(width, height in EMU, the image's rId) of an inline picture, None when one of them does not read."""
    extents = drawing.getElementsByTagNameNS(NS_WP, "extent")
    blips = drawing.getElementsByTagNameNS(NS_A, "blip")
    try:
        width, height = int(extents[0].getAttribute("cx")), int(extents[0].getAttribute("cy"))
        image = blips[0].getAttributeNS(NS_R, "embed")
    except (IndexError, ValueError):
        return None
    return (width, height, image) if image else None


def _wrap(doc: minidom.Document, drawing: Any, shown: tuple[int, int, str], rid: str, prog_id: str,
          name: str) -> None:
    """``drawing`` (an inline picture ``shown``) replaced by a ``w:object`` of the same size showing the same
    image, whose ``o:OLEObject`` is ``rid``, as Word writes one."""
    width, height, image = shown
    element = doc.createElementNS(NS_W, "w:object")
    element.setAttribute("w:dxaOrig", str(round(width / EMU_PER_TWIP)))
    element.setAttribute("w:dyaOrig", str(round(height / EMU_PER_TWIP)))
    shape = element.appendChild(doc.createElementNS(NS_V, "v:shape"))
    shape_id = f"ole_{rid}"
    shape.setAttribute("id", shape_id)
    shape.setAttribute("style", f"width:{width / EMU_PER_POINT:.2f}pt;height:{height / EMU_PER_POINT:.2f}pt")
    shape.setAttribute("filled", "f")
    shape.setAttribute("o:ole", "")
    imagedata = shape.appendChild(doc.createElementNS(NS_V, "v:imagedata"))
    imagedata.setAttribute("r:id", image)
    imagedata.setAttribute("o:title", "")
    ole = element.appendChild(doc.createElementNS(NS_O, "o:OLEObject"))
    for key, value in (("Type", "Embed"), ("ProgID", prog_id), ("ShapeID", shape_id), ("DrawAspect", "Content"),
                       ("ObjectID", name), ("r:id", rid)):
        if value:  # no ProgID rather than a guess, where neither the storage nor its class names one
            ole.setAttribute(key, value)
    drawing.parentNode.replaceChild(element, drawing)
