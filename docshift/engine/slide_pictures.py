"""Embedded objects of a .ppt that LibreOffice loaded as pictures, put back as objects from the legacy file.

LibreOffice 25.2 loads an object whose server it does not know, such as a "Package" (a file of any kind put on a
slide, wrapped by Office's Object Packager: a PDF, a zip, a shortcut), as its replacement image only: the .pptx
holds a picture, and LibreOffice's own ODF export holds no object either. PowerPoint writes such an object into a
.pptx as an OLE object with its ProgID and its storage as it was. ``put_back`` does the same (``objects.mend`` calls
it, in its one read of each file, on a slide that holds fewer ``p:oleObj`` than the legacy slide has OLE shapes): it
finds the picture LibreOffice wrote where such a shape is anchored (the shape's ClientAnchor, in master units of
1/576 inch, against the picture's offset and size in EMU), and wraps it in a graphic frame whose ``p:oleObj`` names
a part holding the shape's own storage (its ExOleObjStg record), as LibreOffice writes an object it knows: the
picture stays the object's replacement image. A picture that more than one shape, or no shape, could stand for stays
as it was; so do objects in groups (their anchors are relative to the group) and slides whose picture positions do
not all read.
"""

import struct
from collections.abc import Callable, Collection
from typing import Any
from xml.dom import minidom

from docshift.engine import ooxml
from docshift.engine.embedding import read_part, relate
from docshift.engine.inventory import officeart
from docshift.engine.inventory.package import NS_A, NS_P, NS_R, Package, relationships_part

OLE_URI = "http://schemas.openxmlformats.org/presentationml/2006/ole"
EMU_PER_MASTER_UNIT = 914400 / 576
NEAR_EMU = 12700  # a point: LibreOffice rounds a shape's place through hundredths of a millimetre
Rect = tuple[float, float, float, float]  # x, y, width, height in EMU


def put_back(package: Package, slide: str, shapes: list[officeart.Shape], known: Collection[int],
             store: Callable[[int], tuple[str, str] | None]) -> dict[str, bytes]:
    """The edited ``slide`` of ``package`` and its relationships, each picture that stands where one of the legacy
    slide's OLE ``shapes`` is anchored (an embedded object of ``known``) wrapped as that object; ``store(ref)``
    adds the part holding the object's storage: (its name, its ProgID), or None. {} when no picture was."""
    doc = read_part(package, slide)
    root: Any = doc.documentElement
    if (root.getAttribute("xmlns:p"), root.getAttribute("xmlns:a"), root.getAttribute("xmlns:r")) != \
            (NS_P, NS_A, NS_R):
        return {}  # written with other prefixes than LibreOffice's: not edited
    pictures = _pictures(doc)
    if pictures is None:
        return {}
    claimed: dict[Any, list[int]] = {}
    for shape in shapes:
        anchor = anchor_rect(shape.anchor)
        there = [pic for pic, rect in pictures if anchor is not None and near(rect, anchor)]
        if len(there) == 1 and shape.object_ref is not None and shape.object_ref in known:
            claimed.setdefault(there[0], []).append(shape.object_ref)
    rels_part = relationships_part(slide)
    if rels_part not in package.names:
        return {}
    rels = read_part(package, rels_part)
    wrapped = 0
    for pic, refs in claimed.items():
        if len(refs) != 1:
            continue  # two shapes in one place: which object is which cannot be told
        stored = store(refs[0])
        if stored is None:
            continue
        name, prog_id = stored
        _wrap(doc, pic, relate(rels, "../embeddings/" + name.rsplit("/", 1)[1]), prog_id)
        wrapped += 1
    return {slide: ooxml.serialize(doc), rels_part: ooxml.serialize(rels)} if wrapped else {}


def anchor_rect(anchor: bytes) -> Rect | None:
    """A PowerPoint shape's ClientAnchor ([MS-PPT] 2.7.25: top, left, right, bottom in master units, as 16-bit
    SmallRectStruct or 32-bit RectStruct) as a rectangle in EMU; None for another size."""
    if len(anchor) == 8:
        top, left, right, bottom = struct.unpack("<4h", anchor)
    elif len(anchor) == 16:
        top, left, right, bottom = struct.unpack("<4i", anchor)
    else:
        return None
    return (left * EMU_PER_MASTER_UNIT, top * EMU_PER_MASTER_UNIT, (right - left) * EMU_PER_MASTER_UNIT,
            (bottom - top) * EMU_PER_MASTER_UNIT)


def near(rect: Rect, anchor: Rect) -> bool:
    """Whether ``rect``, as LibreOffice wrote a shape's place, is where ``anchor`` (``anchor_rect``) puts it."""
    return all(abs(a - b) <= NEAR_EMU for a, b in zip(rect, anchor))


def _pictures(doc: minidom.Document) -> list[tuple[Any, Rect]] | None:
    """[(p:pic, its rectangle)] of the pictures standing on the slide's shape tree itself (not in a group, not an
    object's replacement image); None if one of their places does not read."""
    found = []
    for tree in doc.getElementsByTagNameNS(NS_P, "spTree"):
        for pic in tree.childNodes:
            if pic.namespaceURI != NS_P or pic.localName != "pic":
                continue
            offsets = pic.getElementsByTagNameNS(NS_A, "off")
            sizes = pic.getElementsByTagNameNS(NS_A, "ext")
            try:
                found.append((pic, (float(offsets[0].getAttribute("x")), float(offsets[0].getAttribute("y")),
                                    float(sizes[0].getAttribute("cx")), float(sizes[0].getAttribute("cy")))))
            except (IndexError, ValueError):
                return None
    return found


def _wrap(doc: minidom.Document, pic: Any, rid: str, prog_id: str) -> None:
    """``pic`` replaced by a graphic frame in its place and size, holding an OLE object (``rid``, ``prog_id``) whose
    replacement image is ``pic``, as LibreOffice writes an object it knows."""
    ids = [int(c.getAttribute("id")) for c in doc.getElementsByTagNameNS(NS_P, "cNvPr")
           if c.getAttribute("id").isdigit()]

    def add(parent: Any, tag: str, **attributes: str) -> Any:
        element = parent.appendChild(doc.createElementNS(NS_A if tag.startswith("a:") else NS_P, tag))
        for key, value in attributes.items():
            element.setAttribute(key.replace("_", ":"), value)
        return element

    frame = doc.createElementNS(NS_P, "p:graphicFrame")
    properties = add(frame, "p:nvGraphicFramePr")
    frame_id = str(max(ids, default=1) + 1)
    add(properties, "p:cNvPr", id=frame_id, name=f"Object {frame_id}")
    add(properties, "p:cNvGraphicFramePr")
    add(properties, "p:nvPr")
    place = add(frame, "p:xfrm")
    for tag in ("off", "ext"):
        place.appendChild(pic.getElementsByTagNameNS(NS_A, tag)[0].cloneNode(True))
    data = add(add(frame, "a:graphic"), "a:graphicData", uri=OLE_URI)
    # no progId rather than a guess; an empty spid as LibreOffice writes (ECMA-376's first edition requires one)
    ole = add(data, "p:oleObj", spid="", **({"progId": prog_id} if prog_id else {}), r_id=rid)
    add(ole, "p:embed")
    pic.parentNode.replaceChild(frame, pic)
    ole.appendChild(pic)
