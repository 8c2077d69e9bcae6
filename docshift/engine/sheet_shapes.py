"""The shapes of an .xls's sheet drawing that pair with its OBJ records, where each stands, and the pictures of the
workbook's BStore.

A sheet's drawing is an OfficeArtDgContainer whose patriarch group (OfficeArtSpgrContainer) holds its shapes
([MS-ODRAW]); each shape that has client data (OfficeArtClientData) is one OBJ record of the sheet, in order. A
shape at the top is anchored in cells (OfficeArtClientAnchorSheet: a column and 1/1024 of its width, a row and 1/256
of its height). A group's own shape carries that anchor and the coordinate space of its members
(OfficeArtFSPGR); each member is placed in that space (OfficeArtChildAnchor), a group in a group likewise. A
member's place is kept as the fraction of its outermost group's box it covers, which ``sheet_drawing.inside`` turns
into cells once the sheet's column widths and row heights are known.
"""

import struct
from collections.abc import Iterator
from typing import NamedTuple

from docshift.engine import pictures
from docshift.engine.embedding import MAX_OBJECT
from docshift.engine.inventory import officeart, xls
from docshift.engine.inventory.common import MAX_DEPTH, Budget

OA_FSPGR, OA_CHILD_ANCHOR, OA_CLIENT_ANCHOR = 0xF009, 0xF00F, 0xF010
PROP_NAME = 0x0380  # wzName: a shape's name, by which an ActiveX control's events find it
ARRAYS = (0x0140, 0x0200)  # the properties of a shape's geometry, fill and line, where its arrays are

Box = tuple[float, float, float, float]  # left, top, right, bottom


class Shape(NamedTuple):
    """A shape of a sheet's drawing that has client data (an OBJ record): its cell anchor (a member's: its
    outermost group's), the BStore index of its picture (0: none), whether it is in a group, its name ("" when it
    has none), and for a member the fraction of that group's box it covers (None: it cannot be told)."""
    anchor: tuple[int, ...] | None
    pib: int
    member: bool
    name: str = ""
    within: Box | None = None
    kind: int = 0  # its FSP's shape type (MSOSPT) and flags (fFlipH 0x40, fFlipV 0x80)
    flags: int = 0
    properties: dict[int, int] | None = None  # its simple OPT properties: {property number: value}


class _Frame(NamedTuple):
    """Where a group's members are placed: its outermost group's cell anchor, the fraction of that group's box
    this group covers, and the coordinate space of its members (None where it is not known)."""
    anchor: tuple[int, ...] | None
    box: Box
    space: Box | None


class _Read(NamedTuple):
    """What a shape's records say of it."""
    client_anchor: tuple[int, ...] | None
    child_anchor: Box | None
    space: Box | None
    pib: int
    name: str
    client: bool
    kind: int
    flags: int
    properties: dict[int, int]


def paired(book: xls._Workbook, budget: Budget) -> Iterator[tuple[int, str, list[tuple[Shape, bytes]]]]:
    """(its place among the sheets with a drawing, from 0; its name, cut as the result's; each shape with its OBJ
    record) of each sheet whose shapes with client data and OBJ records pair up one for one: elsewhere which is
    which cannot be told."""
    for index, (sheet, drawing, records) in enumerate(zip(book.drawing_sheets, book.drawings, book.objects)):
        shapes = client_shapes(drawing, budget)
        if len(shapes) == len(records):
            yield index, sheet[:31], list(zip(shapes, records))


def client_shapes(drawing: bytearray, budget: Budget) -> list[Shape]:
    """Each shape of ``drawing`` with client data, in order."""
    found: list[Shape] = []

    def container(start: int, stop: int, depth: int) -> None:
        for rec_type, _, ver, body, end in officeart.children(drawing, start, stop, budget):
            if rec_type == officeart.OA_SPGR:
                group(body, end, depth + 1, None)
            elif ver == 0xF and rec_type != officeart.OA_SP and depth < MAX_DEPTH:
                container(body, end, depth + 1)

    def group(start: int, stop: int, depth: int, parent: _Frame | None) -> None:
        """A group whose own shape is placed in ``parent`` (None: the patriarch, whose members are anchored in
        cells)."""
        inner: _Frame | None = None
        for index, (rec_type, _, _, body, end) in enumerate(officeart.children(drawing, start, stop, budget)):
            if rec_type == officeart.OA_SPGR and depth < MAX_DEPTH:
                group(body, end, depth + 1, inner or _Frame(None, (0, 0, 1, 1), None))
            elif rec_type == officeart.OA_SP:
                read = _read(drawing, body, end, budget)
                frame = parent if index == 0 else inner
                shape = _placed(read, frame)
                if read.client:
                    found.append(shape._replace(member=parent is not None))
                if index == 0 and parent is not None:  # the group's own shape: what its members are placed in
                    inner = _Frame(shape.anchor, shape.within or (0, 0, 1, 1), read.space)

    container(0, len(drawing), 0)
    return found


def _placed(read: _Read, frame: _Frame | None) -> Shape:
    """The shape ``read`` placed in ``frame`` (None: at the top, by its cell anchor)."""
    if frame is None:
        return Shape(read.client_anchor, read.pib, False, read.name, None, read.kind, read.flags, read.properties)
    if frame.anchor is None and read.client_anchor is not None:  # the outermost group's own shape
        return Shape(read.client_anchor, read.pib, True, read.name, None, read.kind, read.flags, read.properties)
    within = None
    if frame.space is not None and read.child_anchor is not None:
        left, top, right, bottom = frame.space
        if right != left and bottom != top:
            x0, y0, x1, y1 = frame.box

            def across(value: float, low: float, high: float, start: float, end: float) -> float:
                return start + min(max((value - low) / (high - low), 0.0), 1.0) * (end - start)
            cl, ct, cr, cb = read.child_anchor
            within = (across(cl, left, right, x0, x1), across(ct, top, bottom, y0, y1),
                      across(cr, left, right, x0, x1), across(cb, top, bottom, y0, y1))
    return Shape(frame.anchor, read.pib, True, read.name, within, read.kind, read.flags, read.properties)


def _read(drawing: bytearray, body: int, stop: int, budget: Budget) -> _Read:
    client_anchor, child_anchor, space, pib, name, client = None, None, None, 0, "", False
    kind, flags, properties = 0, 0, {}
    for child, instance, _, child_body, child_stop in officeart.children(drawing, body, stop, budget):
        if child == officeart.OA_FSP and child_stop - child_body >= 8:
            kind, flags = instance, struct.unpack_from("<I", drawing, child_body + 4)[0]
        elif child == OA_CLIENT_ANCHOR and child_stop - child_body >= 18:
            client_anchor = struct.unpack_from("<8H", drawing, child_body + 2)
        elif child in (OA_CHILD_ANCHOR, OA_FSPGR) and child_stop - child_body >= 16:
            box = tuple(float(value) for value in struct.unpack_from("<4i", drawing, child_body))
            child_anchor, space = (box, space) if child == OA_CHILD_ANCHOR else (child_anchor, box)
        elif child == officeart.OA_OPT:
            complex_at = child_body + 6 * instance  # complex values follow the fixed part, in its order
            for index in range(min(instance, (child_stop - child_body) // 6)):
                opid, value = struct.unpack_from("<HI", drawing, child_body + 6 * index)
                if opid & 0x3FFF == officeart.PROP_PIB and opid & 0x4000:
                    pib = value
                elif not opid & 0x8000:
                    properties[opid & 0x3FFF] = value
                else:
                    if opid & 0x3FFF == PROP_NAME and complex_at + value <= child_stop:
                        name = bytes(drawing[complex_at:complex_at + value]).decode("utf-16-le", "replace")
                        name = name.split("\0", 1)[0]
                    complex_at += _complex_size(drawing, complex_at, opid & 0x3FFF, value)
        elif child == officeart.OA_CLIENT_DATA:
            client = True
    return _Read(client_anchor, child_anchor, space, pib, name, client, kind, flags,  # type: ignore[arg-type]
                 properties)


def _complex_size(drawing: bytearray, at: int, number: int, size: int) -> int:
    """The bytes the complex value of property ``number`` takes at ``at``, whose op says ``size``. An array of a
    shape's geometry, fill or line (an IMsoArray: nElems, nElemsAlloc, cbElem, then its elements) is written by
    some (LibreOffice among them) with an op that leaves out its 6-byte header."""
    if ARRAYS[0] <= number < ARRAYS[1] and at + 6 <= len(drawing):
        count, _, element = struct.unpack_from("<HHH", drawing, at)
        if count * (4 if element == 0xFFF0 else element) == size:
            return size + 6
    return size


def blips_of(group: bytearray, budget: Budget) -> dict[int, pictures.Picture]:
    """{1-based BStore index: its picture} of the pictures OOXML can hold."""
    found: dict[int, pictures.Picture] = {}
    index = 0
    for rec_type, _, _, body, stop, _ in officeart.walk(group, 0, len(group), budget, skip=(officeart.OA_FBSE,)):
        if rec_type != officeart.OA_FBSE:
            continue
        index += 1
        if stop - body < 44:
            continue
        start = body + 36 + group[body + 33]  # after the FBSE's fixed part and its name
        if start + 8 > stop:
            continue
        _, instance, blip, blip_body, blip_stop = officeart.header(group, start)
        if blip_stop <= stop:
            picture = pictures.picture(group, blip, instance, blip_body, blip_stop, MAX_OBJECT)
            if picture is not None:
                found[index] = picture
    return found
