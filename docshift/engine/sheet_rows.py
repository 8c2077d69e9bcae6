"""A row's own format, which Excel gives each cell of the row that holds nothing, put back into the .xlsx.

An .xls row whose ROW record sets fGhostDirty has a format of its own, its XF (``ixfe``): Excel shows it in every cell
of the row that has no record, out to the sheet's last column. A heading's fill or border runs across the whole
width so, and a grey band marks every other row of a list. LibreOffice 25.2's import does not keep a row's format
(the row's empty cells take their column's), and its export writes ``customFormat="false"`` on every row: Excel showed
the fill stop at the last cell that holds something. A plain ``soffice`` does the same. Of 372 workbooks of POI's
tests, 71 have such rows, 44 with a fill, a border or bold text.

``mend`` learns which cell style LibreOffice wrote for an XF from the cells of the .xls that have it (up to
``SAMPLES`` a format; the style most of them got), and gives each row whose XF it learned that style
(``s`` with ``customFormat="1"``), adding the row where LibreOffice wrote none. A row whose XF no cell of the
workbook has stays as LibreOffice wrote it. Every other byte stays as it was.
"""

import bisect
import functools
import re
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from docshift.engine import biff, ooxml, sheet_objects
from docshift.engine.embedding import PartEdit, edited, guarded, part_bytes, spliced
from docshift.engine.inventory.package import Package
from docshift.engine.sheet_numbers import styles_part_of
from docshift.engine.sheet_objects import cell_name
from docshift.engine.sheet_skeleton import SHEET_DATA
from docshift.engine.sheet_xf import Book, Made
from docshift.errors import ResultUnreadable as Unreadable

BIFF_ROW = 0x0208
GHOST_DIRTY, XF_MASK = 0x80, 0x0FFF  # a ROW record's flag that its ixfe counts (byte 12), and ixfe's bits (14-15)
SAMPLES = 16  # cells of an XF looked at in the result
ROW_TAG = re.compile(rb'<(?:[A-Za-z_][\w.-]*:)?row r="([0-9]{1,7})"')
CELL_TAG = re.compile(rb'<(?:[A-Za-z_][\w.-]*:)?c r="([A-Z]{1,3}[0-9]{1,7})"(?: s="([0-9]+)")?')


def mend(result: Path, source: Path, kind: str) -> int:
    """Give each row of ``result`` (LibreOffice's export of the .xls ``source``) that has a format of its own in the
    .xls the cell style LibreOffice wrote for that format. Returns how many rows were given one (0: the file is
    untouched). Never raises for what the files hold."""
    if kind != "xls":
        return 0
    return guarded(_mend, result, source, "the rows' own formats of %s stay unwritten: %r")


def _mend(result: Path, source: Path) -> int:
    rows = formatted_rows(source)
    if not rows:
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        sheets = sheet_objects.worksheets(package)
        wanted = {xf for formats in rows.values() for xf in formats.values()}
        styles = _styles(package, sheets, _samples(source, wanted))
        made = None
        if wanted - set(styles):
            styles_part = styles_part_of(package)
            if styles_part is None:
                raise Unreadable("the workbook has no styles part")
            made = Made.of(part_bytes(package, styles_part), styles_part, Book.of(source))
            for xf in sorted(wanted - set(styles)):
                if (style := made.style(xf)) is not None:
                    styles[xf] = style
        for _, name, part in sheets:
            given = {row: styles[xf] for row, xf in rows.get(name[:31], {}).items() if xf in styles}
            if given:
                yield part, functools.partial(restyled, given=given)
        if made is not None:
            yield made.name, made.edit

    return edited(result, parts, "the rows' own formats of %s stay unwritten: %r", source)


def formatted_rows(source: Path) -> dict[str, dict[int, int]]:
    """{sheet name: {row (0-based): its XF}} of each row of the .xls ``source`` (BIFF8) with a format of its own."""
    rows: dict[str, dict[int, int]] = {}
    for _, sheet, data, body, end in biff.records(source, {BIFF_ROW}):
        if sheet is not None and end - body >= 16 and data[body + 12] & GHOST_DIRTY:
            row, xf = struct.unpack_from("<H", data, body)[0], struct.unpack_from("<H", data, body + 14)[0] & XF_MASK
            rows.setdefault(sheet[:31], {})[row] = xf
    return rows


def _samples(source: Path, wanted: set[int]) -> dict[str, dict[bytes, int]]:
    """{sheet name: {cell name (b"B2"): XF}} of up to ``SAMPLES`` cells of the .xls ``source`` for each XF of
    ``wanted``."""
    found: dict[str, dict[bytes, int]] = {}
    seen: Counter[int] = Counter()

    for sheet, row, column, xf in biff.cell_xfs(source):
        if xf in wanted and seen[xf] < SAMPLES:
            seen[xf] += 1
            found.setdefault(sheet[:31], {})[cell_name(row, column).encode()] = xf
            if len(seen) == len(wanted) and min(seen.values()) >= SAMPLES:
                break
    return found


def _styles(package: Package, sheets: list[tuple[int, str, str]],
            samples: dict[str, dict[bytes, int]]) -> dict[int, str]:
    """{XF: the cell style most of its ``samples`` have in the result}, from each cell's start tag as LibreOffice
    writes it (``<c r="B2" s="3"``; a cell it wrote otherwise is no sample)."""
    votes: dict[int, Counter[str]] = {}
    for _, name, part in sheets:
        places = samples.get(name[:31])
        if places:
            for cell, style in CELL_TAG.findall(part_bytes(package, part)):
                if cell in places:
                    votes.setdefault(places[cell], Counter())[style.decode() or "0"] += 1
    return {xf: counted.most_common(1)[0][0] for xf, counted in votes.items()}


def restyled(data: bytes, name: str, given: dict[int, str]) -> tuple[bytes, int]:
    """(the worksheet part ``data`` with each row of ``given`` ({row (0-based): cell style}) given its style, made
    where the part has no such row; how many rows). Its rows are found as LibreOffice writes their start tags
    (``<row r="2"``), which no text of a well-formed part holds."""
    sheet_data = SHEET_DATA.search(data)
    if sheet_data is None:
        raise Unreadable(f"{name} has no sheetData")
    found = [(int(row.group(1)), row.start()) for row in ROW_TAG.finditer(data, sheet_data.end())]
    prefix = sheet_data.group(1).decode().rpartition(":")[0]
    edits: list[tuple[int, int, bytes]] = []
    for number, at in found:
        if number - 1 in given:
            tag, tag_end = ooxml.retagged(data, at, name, {"s": given[number - 1], "customFormat": "1"})
            edits.append((at, tag_end, tag))
    missing = sorted(set(given) - {number - 1 for number, _ in found})
    if missing:
        empty = bool(sheet_data.group(2))
        closing = sheet_data.end() if empty else data.find(b"</" + sheet_data.group(1) + b">", sheet_data.end())
        if closing < 0:
            raise Unreadable(f"{name}: sheetData does not end")
        if empty:  # <sheetData/>: it gets an end tag to hold the rows
            edits.append((sheet_data.end() - 2, sheet_data.end(), b">"))
        numbers = [number for number, _ in found]  # in order, as a worksheet has them
        for row in missing:
            following = bisect.bisect_right(numbers, row + 1)
            at = found[following][1] if following < len(found) else closing
            edits.append((at, at, f'<{prefix + ":" if prefix else ""}row r="{row + 1}" s="{given[row]}" '
                          'customFormat="1"/>'.encode()))
        if empty:
            edits.append((closing, closing, b"</" + sheet_data.group(1) + b">"))
    return spliced(data, edits), len(given)
