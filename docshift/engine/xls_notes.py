"""An .xls whose notes have boxes of no height, given boxes for LibreOffice.

A note's box is a shape anchored to cells (OfficeArtClientAnchorSheet: a top-left and a bottom-right cell, each with
an offset). Excel writes some notes' boxes with their bottom edge on or above their top one (POI's 29982 and 36947
workbooks); the note is there all the same, its cell marked, its text shown on demand. LibreOffice leaves out any
object with no height or width, notes too, so the result lost them. LibreOffice gets a copy whose boxes of those notes
reach ``NOTE_ROWS`` rows below their top (``NOTE_COLUMNS`` columns right of their left where they have no width),
about the size Excel gives a new note, and keeps them; the customer's file is left as it is (``mended.copy``
writes the copy), and what the inventory counts is read of it.
"""

import struct
from pathlib import Path

from docshift.engine.cfb import CompoundFile

ANCHOR_RECORD = b"\x00\x00\x10\xf0\x12\x00\x00\x00"  # the header of an 18-byte OfficeArtClientAnchorSheet
NOTE_ROWS, LAST_ROW, NOTE_COLUMNS, LAST_COLUMN = 4, 0xFFFF, 2, 0xFF


def sized(source: Path, anchors: list[bytes]) -> dict[str, bytes] | None:
    """The Workbook stream of the .xls ``source`` with its client anchors among ``anchors`` (the 18 bytes of each)
    given a height and a width; None where none of them is found once, whole, in it (an anchor split between
    records is left as it is)."""
    with CompoundFile(source) as ole:
        name = "Workbook" if ole.exists("Workbook") else "Book"
        data = bytearray(ole.openstream(name).read())
    changed = 0
    for anchor in set(anchors):
        record = ANCHOR_RECORD + anchor
        if len(anchor) != 18 or data.count(record) != 1:
            continue
        at = data.index(record) + len(ANCHOR_RECORD)
        left, dx_left, top, dy_top, right, dx_right, bottom, dy_bottom = struct.unpack_from("<8H", anchor, 2)
        if (bottom, dy_bottom) <= (top, dy_top):
            struct.pack_into("<2H", data, at + 14, min(top + NOTE_ROWS, LAST_ROW), dy_top)
        if (right, dx_right) <= (left, dx_left):
            struct.pack_into("<2H", data, at + 10, min(left + NOTE_COLUMNS, LAST_COLUMN), dx_left)
        changed += 1
    return {name: bytes(data)} if changed else None
