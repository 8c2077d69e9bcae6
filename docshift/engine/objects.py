"""Embedded OLE objects of a presentation that LibreOffice's OOXML export loses, put back from the legacy file.

The ``.ppt`` holds every object as an ExOleObjStg record (a compound file, zlib-compressed after its 4-byte size
when recInstance is 1), named from each shape's ExObjRefAtom through the ExObjList's ExOleEmbed atoms ([MS-PPT]
2.10.27-2.10.34). ``mend`` puts back two losses, with one read of each file and one rewrite of the result:

- LibreOffice 25.2 numbers a ``.pptx``'s embedded objects per slide, so objects on different slides get the same
  part name (``ppt/embeddings/oleObject1.bin``) and only one of them survives: every slide then shows its own
  replacement image, but activating the object opens another slide's. Each object of a shared part gets its own
  ``oleObjectN.bin`` with its record's storage, as PowerPoint itself writes a legacy object into a ``.pptx``,
  and the ProgID the source names. A slide's ``p:oleObj`` elements are matched with its OLE shapes in drawing
  order, only on slides where both counts agree: on the corpus the order held wherever the objects could be told
  apart (the storages LibreOffice kept as they were hold the same streams as the source's record in that place).
  A part only one shape refers to stays as LibreOffice wrote it (it may have made an Office object a ``.docx``).
  A master's objects LibreOffice writes onto each layout of that master (a title master is a layout of its own),
  numbered as a slide's: a layout is matched with the master that the legacy slides using it name, and every layout
  of one master refers to the same new part of each of its objects (a master's object it loaded as a picture too).
- an object whose server LibreOffice does not know it loads as its picture only: on a slide with fewer
  ``p:oleObj`` than OLE shapes, ``slide_pictures.py`` makes such a picture an object again.

The source is read only where one of them can be: a part is shared, or the slides hold fewer objects than the
legacy file.
"""

import posixpath
import re
import struct
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import olefile

from docshift.engine import ooxml, slide_pictures
from docshift.engine.embedding import (
    MAX_OBJECT,
    MAX_OBJECTS,
    OLE_OBJECT,
    REL_NS,
    content_types,
    free_name,
    guarded,
    part_bytes,
    prog_id_of,
    read_part,
)
from docshift.engine.inventory import officeart
from docshift.engine.inventory.common import Budget

# the persist directory and shape walks of the inventory's .ppt reader, reused rather than written twice
from docshift.engine.inventory.package import NS_P, NS_R, SEP, Package, relationships_part
from docshift.engine.inventory.ppt import (
    RT_CSTRING,
    RT_EXEMBED,
    RT_EXOBJ_LIST,
    RT_EXOLEOBJ_ATOM,
    _Presentation,
    object_storage,
    slide_atom,
)

OLE_OBJ = f"{NS_P}{SEP}oleObj"
RELATIONSHIP = f"{REL_NS}{SEP}Relationship"
EMBEDDINGS = "ppt/embeddings/"
EMBEDDINGS_NAME = b"embeddings"
Found = list[tuple[str, str, str]]  # a result slide's p:oleObj in order: (rId, embedded part, relationship type)


@dataclass
class Source:
    """One embedded object of the .ppt: its ProgID as the ExOleEmbed names it, and where its storage is."""
    prog_id: str
    persist: int


def mend(result: Path, source: Path, kind: str, expected: int | None = None) -> int:
    """Put back in the presentation ``result`` (LibreOffice's export of ``source``) the embedded objects its
    export lost: each object that shares its part with another gets a part of its own, and each that LibreOffice
    loaded as its picture becomes an object again; both hold their storage from the legacy file, with its ProgID
    and relationship, and keep their replacement image. ``expected``: how many embedded objects the legacy file
    holds (None: unknown); nothing is read when it holds none. Returns how many objects got a part (0: the file is
    untouched). Writes a new package next to ``result`` and moves it over; a part it cannot read or an object it
    cannot find leaves the file as it was. Never raises for what the files hold."""
    if kind != "ppt" or expected == 0:
        return 0
    return guarded(lambda result, source: _mend(result, source, expected), result, source,
                   "embedded objects of %s stay as LibreOffice wrote them: %r")


class _NewParts:
    """The parts a mend adds to ``package``: each object's storage from the legacy file, under a free name, all
    of them within ``MAX_OBJECTS``."""

    def __init__(self, package: Package, show: _Presentation, objects: dict[int, Source]) -> None:
        self.lower = {name.lower() for name in package.names}
        self.show, self.objects = show, objects
        self.added: dict[str, bytes] = {}
        self.stored: dict[int, tuple[str, str] | None] = {}

    def store(self, ref: int) -> tuple[str, str] | None:
        """The new part holding the storage of object ``ref``, added once however many shapes show it: (its name,
        the ProgID the source or the storage names, or ""); None when the storage cannot be had (missing, too
        large, damaged: the others still can)."""
        if ref not in self.stored:
            self.stored[ref] = self._store(ref)
        return self.stored[ref]

    def _store(self, ref: int) -> tuple[str, str] | None:
        try:
            data = _storage(self.show, self.objects[ref].persist, MAX_OBJECTS - sum(map(len, self.added.values())))
        except zlib.error:
            data = None
        if data is None:
            return None
        name = free_name(self.lower, EMBEDDINGS + "oleObject{}.bin")
        self.added[name] = data
        return name, self.objects[ref].prog_id or prog_id_of(data)


def _mend(result: Path, source: Path, expected: int | None) -> int:
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        slides, references, on_layouts = _result_objects(package)
        shared = {target for target, count in references.items() if count > 1}
        pictured = expected is None or sum(len(found) for _, found in slides) + len(on_layouts) < expected
        if not shared and not pictured:
            return 0
        legacy = _source_objects(source)
        show, objects = legacy.show, legacy.objects
        if len(slides) != len(legacy.slides):
            return 0  # the slides themselves do not pair up (the content check refuses such a result)
        pages = list(zip(slides, legacy.slides))
        # the layouts are read only when a master holds an object: most decks' masters hold none
        layouts = _layout_objects(package, [slide for slide, _ in slides]) if any(legacy.masters.values()) else {}
        for layout, (found, users) in layouts.items():
            masters = {legacy.slide_masters[user] for user in users}
            master = masters.pop() if len(masters) == 1 else None
            if master is not None and legacy.masters.get(master):  # one master, with objects
                pages.append(((layout, found), legacy.masters[master]))
        new = _NewParts(package, show, objects)
        edits: dict[str, bytes] = {}
        for (slide, found), shapes in pages:
            if len(found) == len(shapes) and any(target in shared for _, target, _ in found):
                edits |= _own_parts(package, slide, found, [shape.object_ref for shape in shapes], shared,
                                    references, new)
            elif len(found) < len(shapes) and pictured:  # an OLE shape of the legacy slide has no object
                edits |= slide_pictures.put_back(package, slide, shapes, objects.keys(), new.store)
        if not new.added:
            return 0
        dropped = {target for target in shared if references[target] == 0}
        edits["[Content_Types].xml"] = content_types(read_part(package, "[Content_Types].xml"), new.added, dropped)
        ooxml.rewrite(zf, result, edits, new.added, dropped)
    return len(new.added)


def _own_parts(package: Package, slide: str, found: Found, refs: list[int | None], shared: set[str],
               references: Counter[str], new: _NewParts) -> dict[str, bytes]:
    """The edited ``slide`` and its relationships, each of its objects whose part is ``shared`` given a part of
    its own (``references`` counts the relationships left to each part); {} when none could be."""
    moved: dict[str, tuple[str, str | None]] = {}  # rId: (new target, ProgID)
    for (rid, target, rel_type), ref in zip(found, refs):
        if target not in shared or ref not in new.objects:
            continue
        stored = new.store(ref)
        if stored is None:
            continue
        # LibreOffice's own ProgID names the object it wrote: kept when the source names none, unless that was an
        # OOXML package (Excel.Sheet.12), which the legacy storage is not
        moved[rid] = (stored[0], stored[1] or ("" if rel_type.endswith("/package") else None))
        references[target] -= 1
    if not moved:
        return {}
    rels = relationships_part(slide)
    return {rels: _relationships(part_bytes(package, rels), rels, moved),
            slide: _slide(part_bytes(package, slide), slide, moved)}


def _result_objects(package: Package) -> tuple[list[tuple[str, Found]], Counter[str], set[str]]:
    """([(slide part, [(rId, embedded part, relationship type)] of its p:oleObj in order)] in slide order,
    {embedded part: how many relationships of the whole package point at it}, the embedded parts layouts name)."""
    references: Counter[str] = Counter()
    on_layouts: set[str] = set()
    for rels_part in package.names:
        match = re.fullmatch(r"(.*?)_rels/(.+)\.rels", rels_part)
        # a relationships part that does not write "embeddings" points at none (most of them: the slides')
        if match and match.group(1).startswith("ppt/") and package.holds(rels_part, EMBEDDINGS_NAME, b"&#"):
            for _, target in package.relationships(match.group(1) + match.group(2)).values():
                if target and target.startswith(EMBEDDINGS):
                    references[target] += 1
                    if match.group(1) == "ppt/slideLayouts/":
                        on_layouts.add(target)
    return [(slide, _found(package, slide)) for slide in slide_parts(package)], references, on_layouts


def _found(package: Package, part: str) -> Found:
    """The p:oleObj of a slide or layout ``part``, in document order."""
    oles = _ole_objects(package, part)
    rels = package.relationships(part) if oles else {}
    found = []
    for ole in oles:
        rel_type, target = rels.get(ole, ("", None))
        found.append((ole, target or "", rel_type))
    return found


def _layout_objects(package: Package, slides: list[str]) -> dict[str, tuple[Found, list[int]]]:
    """{layout part: (its p:oleObj in order, the indexes in ``slides`` of the slides that use it)}, for each layout
    a slide uses."""
    layouts: dict[str, tuple[Found, list[int]]] = {}
    for index, slide in enumerate(slides):
        for rel_type, layout in package.relationships(slide).values():
            if not (rel_type.endswith("/slideLayout") and layout and layout in package.names):
                continue
            layouts.setdefault(layout, (_found(package, layout), []))[1].append(index)
    return layouts


def slide_parts(package: Package) -> list[str]:
    """The slide parts of the presentation ``package``, in the order of its slide list."""
    main = "ppt/presentation.xml"
    slide_ids: list[str] = []
    package.parse(main, lambda tag, attrs: slide_ids.append(attrs.get(f"{NS_R}{SEP}id", ""))
                  if tag == f"{NS_P}{SEP}sldId" else None)
    main_rels = package.relationships(main, required=True)
    parts = (main_rels.get(rid, ("", None))[1] for rid in slide_ids)
    return [part for part in parts if part and part in package.names]


def _ole_objects(package: Package, slide: str) -> list[str]:
    """The r:id of each p:oleObj of ``slide``, in document order."""
    rids: list[str] = []
    if not package.holds(slide, b"oleObj"):  # most slides hold none
        return rids
    package.parse(slide, lambda tag, attrs: rids.append(attrs.get(f"{NS_R}{SEP}id", "")) if tag == OLE_OBJ else None)
    return rids


@dataclass
class _Legacy:
    """What the .ppt holds of its embedded objects."""
    show: _Presentation  # its live objects
    objects: dict[int, Source]  # exObjId: embedded object
    slides: list[list[officeart.Shape]]  # each slide's OLE shapes (``object_ref``: the ExObjRef) in drawing order
    slide_masters: list[int | None]  # each slide's master (its slideId), in slide order
    masters: dict[int, list[officeart.Shape]]  # each master's OLE shapes by slideId, in drawing order


def ole_shapes(shapes: list[officeart.Shape]) -> list[officeart.Shape]:
    return [shape for shape in shapes if shape.object_ref is not None and not shape.flags & officeart.FSP_DELETED]


def _source_objects(source: Path) -> _Legacy:
    """The .ppt's embedded objects, and the OLE shapes of its slides and masters."""
    show = _Presentation.of_file(source)
    doc, budget = show.doc, show.budget
    objects: dict[int, Source] = {}
    for rec_type, _, _, body, stop in officeart.children(doc, *show.document, budget):
        if rec_type == RT_EXOBJ_LIST:
            for child, _, _, child_body, child_stop in officeart.children(doc, body, stop, budget):
                if child == RT_EXEMBED:
                    _embed(doc, child_body, child_stop, budget, objects)
    located_slides = show.slide_containers()
    return _Legacy(show, objects, [ole_shapes(show.shapes(located)) if located else [] for located in located_slides],
                   [slide_atom(doc, located, budget)[0] if located else None for located in located_slides],
                   {slide_id: ole_shapes(show.shapes(located))
                    for slide_id, located in show.master_containers().items()})


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
    stored = object_storage(show, persist)
    if stored is None:
        return None
    body, compressed = stored
    limit = min(room, MAX_OBJECT)
    if compressed:
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


def _relationships(data: bytes, name: str, moved: dict[str, tuple[str, str | None]]) -> bytes:
    """A slide's relationships with each moved rId pointing at its own part, as an OLE object."""
    def edit(tag: str, attributes: dict[str, str]) -> dict[str, str | None] | None:
        if tag != RELATIONSHIP or attributes.get("Id") not in moved:
            return None
        return {"Target": "../embeddings/" + posixpath.basename(moved[attributes["Id"]][0]), "Type": OLE_OBJECT}

    return ooxml.edit_tags(data, name, edit)


def _slide(data: bytes, name: str, moved: dict[str, tuple[str, str | None]]) -> bytes:
    """A slide whose moved p:oleObj name their object's ProgID: set, removed ("") or left as it was (None)."""
    def edit(tag: str, attributes: dict[str, str]) -> dict[str, str | None] | None:
        if tag != OLE_OBJ:
            return None
        prog_id = moved.get(attributes.get(f"{NS_R}{SEP}id", ""), ("", None))[1]
        if prog_id:
            return {"progId": prog_id}
        return {"progId": None} if prog_id == "" and "progId" in attributes else None

    return ooxml.edit_tags(data, name, edit)
