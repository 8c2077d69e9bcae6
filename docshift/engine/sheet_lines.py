"""An .xls's horizontal and vertical lines drawn as Office Art, which LibreOffice's import drops, put back into the
.xlsx.

Excel 2007 and later save a shape into an .xls as an Office Art object (FtCmo.ot 0x1E). LibreOffice 25.2's import
does not load one of the line type (msosptLine) that has no width or no height, every horizontal and vertical line,
whether at the top of a sheet or in a group (a straight connector of the same box it loads): its ODF has none, and
the report counts them missing (``shapes``; Apache POI's 45129.xls: 74 lines of a form). ``mend`` writes each such
line into the sheet's DrawingML drawing as Excel writes a line, a connector (``xdr:cxnSp``) with its cell anchor,
where its group places it (``sheet_shapes``), its width, colour, dashes, arrowheads and flips. It does so only where
the sheet's drawing lacks exactly as many shapes as there are such lines, so a LibreOffice that loads them is never
given them twice.
"""

import re
import struct
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from docshift.engine import cfb, ooxml, sheet_drawing, sheet_objects, sheet_shapes
from docshift.engine.embedding import PartEdit, edit_parts, guarded, part_bytes
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import Package
from docshift.engine.inventory.xlsx import drawn_shapes

OT_OFFICE_ART = 0x1E
LINE = 20  # msosptLine: LibreOffice loads a straight connector (32) of no height, not a line
LINE_COLOR, LINE_WIDTH, LINE_DASHING, START_ARROW, END_ARROW = 0x01C0, 0x01CB, 0x01CE, 0x01D0, 0x01D1
FLIP_H, FLIP_V = 0x40, 0x80
ARROWS = {1: "triangle", 2: "stealth", 3: "diamond", 4: "oval", 5: "arrow"}
DASHES = {1: "dash", 2: "sysDot", 3: "dashDot", 4: "sysDashDotDot", 5: "sysDot", 6: "dash", 7: "lgDash",
          8: "dashDot", 9: "lgDashDot", 10: "lgDashDotDot"}
ID = re.compile(rb'<xdr:cNvPr\b[^>]*\bid="([0-9]+)"')


def mend(result: Path, source: Path, kind: str, shapes: list[str]) -> int:
    """Put each line of a group of the .xls ``source`` that LibreOffice did not load into its sheet of ``result``;
    ``shapes``: where the legacy file's drawing shapes are ("sheet 'Name'", one each: the report's ``shapes``).
    Returns how many went in (0: the file is untouched). Never raises for what the files hold."""
    if kind != "xls" or not shapes:
        return 0
    shown = Counter(shapes)
    return guarded(lambda result, source: _mend(result, source, shown), result, source,
                   "the lines of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, source: Path, shown: Counter[str]) -> int:
    with cfb.CompoundFile(source) as ole:
        book, budget = sheet_objects.records_of(ole)
        if book is None:
            return 0
        lines = {sheet: [shape for shape, record in pairs if _dropped(shape, record)]
                 for _, sheet, pairs in sheet_shapes.paired(book, budget)}
    if not any(lines.values()):
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        for _, name, part in sheet_objects.worksheets(package):
            drawings = sheet_objects.drawings_of(package, part) if lines.get(name) else []
            if len(drawings) == 1:  # else a sheet with no drawing of LibreOffice's: its lines would need their own
                yield drawings[0], _drawing(lines[name], shown[f"sheet '{name}'"], partial(_sheet, package, part))

    return edit_parts(result, parts)


def _drawing(lines: list[sheet_shapes.Shape], shown: int, sheet: Callable[[], bytes]) -> PartEdit:
    """The edit of a sheet's drawing part that draws ``lines`` in it, where it lacks exactly as many of the ``shown``
    shapes of the legacy sheet: else which are the lines LibreOffice dropped cannot be told. ``sheet()``: the
    worksheet part, read only then, for its columns' widths and rows' heights."""
    def draw(data: bytes, part: str) -> tuple[bytes, int]:
        drawing = ooxml.checked(data, part)
        if shown - drawn_shapes(drawing) != len(lines):
            return data, 0
        return _with_lines(drawing, lines, *sheet_drawing.geometry(sheet())), len(lines)

    return draw


def _sheet(package: Package, part: str) -> bytes:
    return ooxml.checked(part_bytes(package, part), part)


def _dropped(shape: sheet_shapes.Shape, record: bytes) -> bool:
    """Whether ``shape`` (with its OBJ record) is a line LibreOffice's import does not load: an Office Art object
    of the line type (msosptLine) with no width or no height, at the top of the sheet or in a group."""
    if shape.kind != LINE or shape.anchor is None or len(record) < 6 or record[:2] != b"\x15\x00" or \
            struct.unpack_from("<H", record, 4)[0] != OT_OFFICE_ART:
        return False
    if shape.member:
        if shape.within is None:
            return False
        left, top, right, bottom = shape.within
        return left == right or top == bottom
    left_column, left_offset, top_row, top_offset, right_column, right_offset, bottom_row, bottom_offset = shape.anchor
    return (left_column, left_offset) == (right_column, right_offset) or (top_row, top_offset) == (bottom_row,
                                                                                                   bottom_offset)


def _with_lines(drawing: bytes, lines: list[sheet_shapes.Shape], column: sheet_drawing.Size,
                row: sheet_drawing.Size) -> bytes:
    """The DrawingML ``drawing`` with a connector for each of ``lines``, placed on a sheet of ``column`` widths and
    ``row`` heights."""
    end = drawing.rfind(b"</xdr:wsDr>")
    if end < 0:
        raise Unreadable("a drawing without its end")
    number = max((int(found) for found in ID.findall(drawing)), default=0)
    anchors = []
    for line in lines:
        number += 1
        if line.anchor is None:
            continue
        cells = sheet_drawing.inside(line.anchor, line.within, column, row)
        corners = sheet_drawing.cells(cells, column, row)
        style, _ = sheet_drawing.place(cells, column, row)
        size = dict(re.findall(r"(width|height):([0-9.]+)pt", style))
        ends = "".join(f"<xdr:{end}><xdr:col>{col}</xdr:col><xdr:colOff>{col_off}</xdr:colOff><xdr:row>{rw}"
                       f"</xdr:row><xdr:rowOff>{row_off}</xdr:rowOff></xdr:{end}>"
                       for end, (col, col_off, rw, row_off) in (("from", corners[0]), ("to", corners[1])))
        anchors.append(f'<xdr:twoCellAnchor editAs="oneCell">{ends}<xdr:cxnSp macro=""><xdr:nvCxnSpPr>'
                       f'<xdr:cNvPr id="{number}" name="{sheet_objects.escape(line.name or f"Line {number}")}"/>'
                       f'<xdr:cNvCxnSpPr/></xdr:nvCxnSpPr><xdr:spPr><a:xfrm{_flips(line.flags)}><a:off x="0" y="0"/>'
                       f'<a:ext cx="{int(float(size.get("width", 0)) * 12700)}" '
                       f'cy="{int(float(size.get("height", 0)) * 12700)}"/></a:xfrm><a:prstGeom prst="line">'
                       f'<a:avLst/></a:prstGeom>{_outline(line.properties or {})}</xdr:spPr></xdr:cxnSp>'
                       '<xdr:clientData/></xdr:twoCellAnchor>')
    return drawing[:end] + "".join(anchors).encode("utf-8") + drawing[end:]


def _flips(flags: int) -> str:
    return (' flipH="1"' if flags & FLIP_H else "") + (' flipV="1"' if flags & FLIP_V else "")


def _outline(properties: dict[int, int]) -> str:
    """The ``a:ln`` of a line's OfficeArt properties: its width (EMU, 9525 where unset), colour (an RGB one; black
    where unset or a scheme's or the system's), dashes and arrowheads."""
    colour = properties.get(LINE_COLOR, 0)
    rgb = "000000" if colour >> 24 else f"{colour & 0xFF:02X}{colour >> 8 & 0xFF:02X}{colour >> 16 & 0xFF:02X}"
    dash = DASHES.get(properties.get(LINE_DASHING, 0))
    heads = "".join(f'<a:{end} type="{ARROWS[value]}"/>' for end, value in (
        ("headEnd", properties.get(START_ARROW, 0)), ("tailEnd", properties.get(END_ARROW, 0))) if value in ARROWS)
    return (f'<a:ln w="{properties.get(LINE_WIDTH, 9525)}"><a:solidFill><a:srgbClr val="{rgb}"/></a:solidFill>'
            + (f'<a:prstDash val="{dash}"/>' if dash else "") + heads + "</a:ln>")
