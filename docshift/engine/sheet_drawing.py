"""A worksheet's geometry and its VML drawing, through which Excel shows an embedded object.

Excel places an object twice: its ``<oleObject>``'s anchor in cells, and a VML shape of the same id in the sheet's
legacy drawing, positioned in points. Both are worked out here from the .xls's anchor (a column and 1/1024 of its
width, a row and 1/256 of its height) and the column widths and row heights the worksheet's XML says. A sheet that
has a VML drawing already (LibreOffice writes one for comments) gets the objects' shapes added to it.
"""

import re
from collections.abc import Callable

EMU_PER_PIXEL, EMU_PER_POINT = 9525, 12700
MAX_DIGIT_WIDTH = 7  # pixels of a digit in Calibri 11, Excel's default: column widths count digits
VML = {b"v": b"urn:schemas-microsoft-com:vml", b"o": b"urn:schemas-microsoft-com:office:office",
       b"x": b"urn:schemas-microsoft-com:office:excel"}
MAX_SPAN = 16384  # columns or rows a group's member is looked for across
SHAPES_PER_BLOCK = 1024  # an o:idmap block numbers this many shapes
PICTURE_TYPE = ('<v:shapetype id="_x0000_t75" coordsize="21600,21600" o:spt="75" o:preferrelative="t" '
                'path="m@4@5l@4@11@9@11@9@5xe" filled="f" stroked="f"><v:stroke joinstyle="miter"/><v:path '
                'o:extrusionok="f" gradientshapeok="t" o:connecttype="rect"/><o:lock v:ext="edit" aspectratio="t"/>'
                '</v:shapetype>')


Size = Callable[[int], float]


def geometry(data: bytes) -> tuple[Size, Size]:
    """(width of a 0-based column in pixels, height of a 0-based row in points) as a worksheet's XML says."""
    head = data[:data.find(b"<sheetData")] if b"<sheetData" in data else b""
    default = re.search(rb"<sheetFormatPr\b[^>]*>", head)
    width = re.search(rb'defaultColWidth="([0-9.]+)"', default.group(0)) if default else None
    height = re.search(rb'defaultRowHeight="([0-9.]+)"', default.group(0)) if default else None
    spans = []
    for col in re.findall(rb"<col\b[^>]*>", head):
        found = dict(re.findall(rb'\b(min|max|width)="([0-9.]+)"', col))
        if len(found) == 3:
            spans.append((int(found[b"min"]) - 1, int(found[b"max"]) - 1, pixels(float(found[b"width"]))))
    rows = {int(row) - 1: float(value) for row, value in re.findall(rb'<row r="([0-9]+)"[^>]*? ht="([0-9.]+)"', data)}
    column_default = pixels(float(width.group(1))) if width else 64.0
    row_default = float(height.group(1)) if height else 15.0

    def column(index: int) -> float:
        return next((width for first, last, width in spans if first <= index <= last), column_default)

    return column, lambda index: rows.get(index, row_default)


def pixels(width: float) -> float:
    """Pixels of a column ``width`` in characters, as Excel counts them."""
    return float(int(width * MAX_DIGIT_WIDTH + 0.5))


def cells(anchor: tuple[int, ...], column: Size, row: Size) -> list[tuple[int, int, int, int]]:
    """The anchor's two corners as (column, offset in EMU, row, offset in EMU)."""
    return [(col, int(min(dx, 1024) / 1024 * column(col) * EMU_PER_PIXEL), rw,
             int(min(dy, 256) / 256 * row(rw) * EMU_PER_POINT)) for col, dx, rw, dy in (anchor[0:4], anchor[4:8])]


def _left(column: Size, col: int, dx: int) -> float:
    """Points from the sheet's left edge to ``dx`` 1024ths into column ``col``."""
    return (sum(column(c) for c in range(col)) + min(dx, 1024) / 1024 * column(col)) * 0.75


def _top(row: Size, rw: int, dy: int) -> float:
    """Points from the sheet's top to ``dy`` 256ths into row ``rw``."""
    return sum(row(r) for r in range(rw)) + min(dy, 256) / 256 * row(rw)


def inside(anchor: tuple[int, ...], within: tuple[float, float, float, float] | None, column: Size,
           row: Size) -> tuple[int, ...]:
    """The cell anchor of what covers the fraction ``within`` (left, top, right, bottom) of the box ``anchor``
    places: a group's member, placed in its group (None: ``anchor`` itself)."""
    if within is None:
        return anchor
    col_l, dx_l, row_t, dy_t, col_r, dx_r, row_b, dy_b = anchor
    left, top = _left(column, col_l, dx_l), _top(row, row_t, dy_t)
    width, height = _left(column, col_r, dx_r) - left, _top(row, row_b, dy_b) - top
    x0, y0, x1, y1 = within
    return (*_column_at(column, col_l, left + x0 * width), *_row_at(row, row_t, top + y0 * height),
            *_column_at(column, col_l, left + x1 * width), *_row_at(row, row_t, top + y1 * height))


def _column_at(column: Size, first: int, points: float) -> tuple[int, int]:
    """(column, 1024ths of its width) at ``points`` from the sheet's left edge, from column ``first`` on."""
    start = _left(column, first, 0)
    for index in range(first, first + MAX_SPAN):
        width = column(index) * 0.75
        if points < start + width or width <= 0:
            return index, int(max(points - start, 0) / width * 1024) if width > 0 else 0
        start += width
    return first + MAX_SPAN, 0


def _row_at(row: Size, first: int, points: float) -> tuple[int, int]:
    """(row, 256ths of its height) at ``points`` from the sheet's top, from row ``first`` on."""
    start = _top(row, first, 0)
    for index in range(first, first + MAX_SPAN):
        height = row(index)
        if points < start + height or height <= 0:
            return index, int(max(points - start, 0) / height * 256) if height > 0 else 0
        start += height
    return first + MAX_SPAN, 0


def place(anchor: tuple[int, ...], column: Size, row: Size) -> tuple[str, str]:
    """(a VML shape's style that places it at ``anchor``, without its z-index; the ``x:Anchor`` of it: columns and
    rows with offsets in pixels)."""
    col_l, dx_l, row_t, dy_t, col_r, dx_r, row_b, dy_b = anchor
    x, y = _left(column, col_l, dx_l), _top(row, row_t, dy_t)
    offsets = [int(min(dx_l, 1024) / 1024 * column(col_l)), int(min(dy_t, 256) / 256 * row(row_t) / 0.75),
               int(min(dx_r, 1024) / 1024 * column(col_r)), int(min(dy_b, 256) / 256 * row(row_b) / 0.75)]
    return (f"position:absolute;margin-left:{x:.2f}pt;margin-top:{y:.2f}pt;"
            f"width:{_left(column, col_r, dx_r) - x:.2f}pt;height:{_top(row, row_b, dy_b) - y:.2f}pt",
            f"{col_l}, {offsets[0]}, {row_t}, {offsets[1]}, {col_r}, {offsets[2]}, {row_b}, {offsets[3]}")


def shape(spid: int, rid: str, anchor: tuple[int, ...], column: Size, row: Size) -> str:
    """The VML shape that shows object ``spid`` with its image ``rid``, placed at ``anchor``."""
    style, cells_anchor = place(anchor, column, row)
    return (f'<v:shape id="_x0000_s{spid}" o:spid="_x0000_s{spid}" type="#_x0000_t75" style="{style};'
            f'z-index:{spid % 1024}" filled="t" fillcolor="window [65]" '
            f'stroked="t" strokecolor="windowText [64]" o:insetmode="auto"><v:fill color2="window [65]"/>'
            f'<v:imagedata o:relid="{rid}" o:title=""/><x:ClientData ObjectType="Pict"><x:SizeWithCells/>'
            f'<x:Anchor>{cells_anchor}</x:Anchor><x:CF>Pict</x:CF><x:AutoPict/></x:ClientData></v:shape>')


def drawing(index: int, shapes: list[str], shape_type: str = PICTURE_TYPE) -> bytes:
    """A new VML drawing for the ``index``th sheet, holding ``shapes`` of ``shape_type``."""
    return ('<xml xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office" '
            'xmlns:x="urn:schemas-microsoft-com:office:excel"><o:shapelayout v:ext="edit">'
            f'<o:idmap v:ext="edit" data="{index}"/></o:shapelayout>{shape_type}' + "".join(shapes)
            + "</xml>").encode("utf-8")


def shape_ids(vml: bytes | None, index: int, count: int) -> list[int] | None:
    """``count`` shape ids for new shapes of the ``index``th sheet, in the VML drawing ``vml`` (None: a new one):
    free ones of its first o:idmap block, or of block ``index`` when it declares none. None when too few are free."""
    block = index
    if vml is not None:
        declared = re.search(rb'<o:idmap\b[^>]*\bdata="\s*([0-9]+)', vml)
        block = int(declared.group(1)) if declared else index
    used = {int(number) for number in re.findall(rb"_x0000_s([0-9]+)", vml or b"")}
    free = [number for number in range(block * SHAPES_PER_BLOCK + 1, (block + 1) * SHAPES_PER_BLOCK)
            if number not in used]
    return free[:count] if len(free) >= count else None


def merged(vml: bytes, index: int, shapes: list[str], shape_type: str = PICTURE_TYPE) -> bytes | None:
    """The VML drawing ``vml`` with ``shapes`` added (and their ``shape_type`` and an o:idmap block for sheet
    ``index``, where it has none), or None where its root does not declare the prefixes the shapes use."""
    root = re.search(rb"<xml\b[^>]*>", vml)
    end = vml.rfind(b"</xml>")
    if root is None or end < root.end():
        return None
    for prefix, uri in VML.items():
        if not re.search(rb'\bxmlns:' + prefix + rb'="' + re.escape(uri) + rb'"', root.group(0)):
            return None
    layout = b"" if b"<o:shapelayout" in vml else (
        f'<o:shapelayout v:ext="edit"><o:idmap v:ext="edit" data="{index}"/></o:shapelayout>'.encode())
    type_id = re.search(r'\bid="([^"]*)"', shape_type)
    kind = b"" if type_id and f'id="{type_id.group(1)}"'.encode() in vml else shape_type.encode()
    return (vml[:root.end()] + layout + vml[root.end():end] + kind + "".join(shapes).encode("utf-8")
            + vml[end:])
