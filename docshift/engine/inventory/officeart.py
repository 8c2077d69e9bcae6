"""OfficeArt ([MS-ODRAW]), shared by the three formats: its records and the walks over them, the BStore of
pictures, the shapes and the pictures they show."""

import hashlib
import struct
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from docshift.engine.inventory.common import MAX_DEPTH, Budget

# a BStore entry: (uid, foDelay, size, has_blip)
Entry = tuple[bytes, int, int, bool]

OA_DGG, OA_BSTORE, OA_SPGR, OA_SP, OA_FBSE, OA_FSP, OA_OPT, OA_TERTIARY_OPT = (
    0xF000, 0xF001, 0xF003, 0xF004, 0xF007, 0xF00A, 0xF00B, 0xF122)
OA_CLIENT_TEXTBOX, OA_CLIENT_ANCHOR, OA_CLIENT_DATA = 0xF00D, 0xF010, 0xF011
FSP_DELETED, FSP_OLE, FSP_BACKGROUND = 0x0008, 0x0010, 0x0400
PROP_PIB, PROP_FILL_TYPE, PROP_FILL_BLIP = 0x0104, 0x0180, 0x0186
FILL_TEXTURE, FILL_PICTURE = 2, 3


def header(data: bytes | bytearray, pos: int) -> tuple[int, int, int, int, int]:
    """(recVer, recInstance, recType, body start, body end) of the 8-byte record header at ``pos``."""
    ver_instance, rec_type, length = struct.unpack_from("<HHI", data, pos)
    return ver_instance & 0xF, ver_instance >> 4, rec_type, pos + 8, pos + 8 + length


def children(data: bytes | bytearray, start: int, end: int, budget: Budget) -> Iterator[tuple[int, int, int, int, int]]:
    """(recType, recInstance, recVer, body start, body end) of the records in ``data[start:end]``, one level."""
    pos = start
    end = min(end, len(data))
    while pos + 8 <= end:
        budget.spend()
        ver, instance, rec_type, body, stop = header(data, pos)
        yield rec_type, instance, ver, body, min(stop, end)
        pos = stop


def walk(data: bytes | bytearray, start: int, end: int, budget: Budget, into: Collection[int] = (),
         skip: Collection[int] = (),
         only: Collection[int] | None = None) -> Iterator[tuple[int, int, int, int, int, int]]:
    """Every record in ``data[start:end]`` in document order, descending into containers (recVer 0xF) and the
    record types ``into``, not into those of ``skip``, and when ``only`` is given into those types alone:
    (recType, recInstance, recVer, body start, body end, depth)."""
    stack = [(start, min(end, len(data)), 0)]
    while stack:
        pos, stop, depth = stack.pop()
        if pos + 8 > stop:
            continue
        budget.spend()
        ver, instance, rec_type, body, body_end = header(data, pos)
        body_end = min(body_end, stop)
        stack.append((body_end, stop, depth))  # the next sibling, after this record's children
        yield rec_type, instance, ver, body, body_end, depth
        if (ver == 0xF or rec_type in into) and rec_type not in skip and (only is None or rec_type in only) \
                and depth < MAX_DEPTH:
            stack.append((body, body_end, depth + 1))


def bstore(data: bytes | bytearray, start: int, end: int, budget: Budget) -> list[Entry]:
    """The BStore entries of the OfficeArtDggContainer at ``data[start:end]``: [(uid, foDelay, size, has_blip)]."""
    entries = []
    for rec_type, _, _, body, stop, _ in walk(data, start, end, budget):
        if rec_type == OA_FBSE and stop - body >= 36:
            uid = bytes(data[body + 2:body + 18])
            if not any(uid) and stop - body > 36:
                # JExcelAPI leaves every uid empty and writes a picture shown twice as two entries, which
                # LibreOffice keeps as one media part: such entries are told apart by the pictures they hold
                uid = hashlib.blake2b(data[body + 36:stop], digest_size=16).digest()
            size, _, delay = struct.unpack_from("<III", data, body + 20)
            entries.append((uid, delay, size, stop - body > 36))
    return entries


@dataclass
class Shape:
    """An OfficeArt shape: FSP flags, the BStore indexes of its pictures and, in PowerPoint, its text,
    placeholder type, OLE object reference, the sound a click plays and the macro or the verb of its object that a
    click or the mouse runs; ``anchor``: its client anchor's bytes, as the host writes them; ``client``: whether it has
    client data (in Excel, the sign that an OBJ record follows)."""
    flags: int = 0
    pibs: list[int] = field(default_factory=list)
    placeholder: int | None = None
    text: str = ""
    object_ref: int | None = None
    sound_ref: int | None = None
    actions: dict[int, str] = field(default_factory=dict)  # what a click (0) or mouse-over (1) runs, as .pptx writes
    anchor: bytes = b""
    client: bool = False
    kind: int = 0  # its FSP's shape type (MSOSPT): 20 a line, 32-40 a connector, 75 a picture frame, ...
    shadowed: bool = False  # in PowerPoint: its text's formatting turns a text shadow on (``ppt_text_styles``)


def shapes(data: bytes | bytearray, start: int, end: int, budget: Budget,
           client: Callable[[Shape, bytes | bytearray, int, int, Budget], None] | None = None) -> list[Shape]:
    """The shapes (:class:`Shape`) of the OfficeArt drawing records in ``data[start:end]``. ``client`` reads
    the host's records inside a shape's client text box and client data (PowerPoint: text, placeholders)."""
    found = []
    for rec_type, _, _, body, stop, _ in walk(data, start, end, budget, skip=(OA_SP,)):
        if rec_type != OA_SP:
            continue
        shape = Shape()
        fill_type, fill_blip = 0, None
        for child, instance, _, child_body, child_stop in children(data, body, stop, budget):
            if child == OA_FSP and child_stop - child_body >= 8:
                shape.flags, shape.kind = struct.unpack_from("<I", data, child_body + 4)[0], instance
            elif child in (OA_OPT, OA_TERTIARY_OPT):
                for index in range(min(instance, (child_stop - child_body) // 6)):
                    opid, value = struct.unpack_from("<HI", data, child_body + 6 * index)
                    number = opid & 0x3FFF
                    # a BStore index whether or not fBid (0x4000) says so: Gnumeric leaves it out, and LibreOffice
                    # shows the picture all the same
                    if number == PROP_PIB and not opid & 0x8000:
                        shape.pibs.append(value)
                    elif number == PROP_FILL_TYPE:
                        fill_type = value
                    elif number == PROP_FILL_BLIP and not opid & 0x8000:
                        fill_blip = value
            elif child == OA_CLIENT_ANCHOR:
                shape.anchor = bytes(data[child_body:child_stop])
            elif child in (OA_CLIENT_TEXTBOX, OA_CLIENT_DATA):
                shape.client = shape.client or child == OA_CLIENT_DATA
                if client:
                    client(shape, data, child_body, child_stop, budget)
        if fill_blip and fill_type in (FILL_TEXTURE, FILL_PICTURE):
            shape.pibs.append(fill_blip)
        found.append(shape)
    return found


def pictures(shapes: list[Shape], bstore: list[Entry],
             present: Callable[[Entry], bool] = lambda entry: entry[3] or entry[2] > 0) -> set[Any]:
    """The uids of the BStore entries that non-deleted, non-OLE ``shapes`` point to (1-based pib)."""
    found: set[Any] = set()
    for shape in shapes:
        if shape.flags & (FSP_DELETED | FSP_OLE):
            continue
        for pib in shape.pibs:
            if 1 <= pib <= len(bstore) and present(bstore[pib - 1]):
                uid = bstore[pib - 1][0]
                found.add(uid if any(uid) else ("entry", pib))
    return found
