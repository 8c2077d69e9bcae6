"""A sheet's data validation over whole columns, put back where LibreOffice's export cuts it short.

An .xls keeps each data validation (a drop-down list, a number range, a date limit) with the cells it covers: a DV
record whose SqRefU lists its ranges, often a whole column (``D2:D65536``) so that every row typed later is
checked. LibreOffice loads the ranges whole (its ODF covers every cell); its OOXML export ends them at a row some
thousand rows past the sheet's used ones (``D2:D1063``) and leaves out those that start below it: of 25 workbooks
with validations among 685 of the corpus and POI's and LibreOffice's tests, 5 lost the rows past that, and a value
typed there goes unchecked in Excel.

``mend`` reads the DV records of a sheet whose result holds validations and gives each ``dataValidation`` whose
ranges are a DV's cut at a row (those below it left out, those across it ended there) the DV's ranges (``sqref``);
everything else stays byte for byte.
"""

import struct
from collections.abc import Iterator
from pathlib import Path

from docshift.engine import biff, ooxml, sheet_objects
from docshift.engine.embedding import PartEdit, edited
from docshift.engine.inventory.package import NS_S, SEP, Package
from docshift.engine.sheet_objects import cell_name, cell_place
from docshift.engine.sheet_skeleton import without_cells

BIFF_DV = 0x01BE
VALIDATION = f"{NS_S}{SEP}dataValidation"
Range = tuple[int, int, int, int]  # first row, first column, last row, last column (0-based)


def mend(result: Path, source: Path, kind: str) -> int:
    """Give each data validation of ``result`` (LibreOffice's export of the .xls ``source``) that LibreOffice cut
    short the ranges the .xls gives it. Returns how many were (0: the file is untouched). Never raises for what
    the files hold."""
    if kind != "xls":
        return 0
    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        sheets = [(name, part) for _, name, part in sheet_objects.worksheets(package)
                  if package.holds(part, b"<dataValidation ")]
        validations = ranges_of(source) if sheets else {}
        for name, part in sheets:
            if validations.get(name):
                yield part, _widening(validations[name])

    return edited(result, parts, "the data validations of %s stay as LibreOffice wrote them: %r", source)


def _widening(validations: list[list[Range]]) -> PartEdit:
    """The edit of a worksheet part that widens its validations cut short of ``validations`` (``widened``)."""
    return without_cells(lambda data, part: widened(data, part, validations))


def ranges_of(source: Path) -> dict[str, list[list[Range]]]:
    """{sheet name: [the ranges of each DV record of its substream, in order]} of the .xls ``source`` (BIFF8)."""
    found: dict[str, list[list[Range]]] = {}
    for _, sheet, data, body, end in biff.records(source, {BIFF_DV}):
        ranges = _dv_ranges(data, body, end)
        if sheet is not None and ranges:
            found.setdefault(sheet[:31], []).append(ranges)
    return found


def _dv_ranges(data: bytes, start: int, end: int) -> list[Range]:
    """The ranges (SqRefU) of the DV record ``data[start:end]``: after its flags, four XLUnicodeStrings (prompt
    and error titles and texts) and two formulas. [] where it does not read so."""
    pos = start + 4
    for _ in range(4):
        if pos + 3 > end:
            return []
        count, wide = struct.unpack_from("<HB", data, pos)
        pos += 3 + count * (2 if wide & 1 else 1)
    for _ in range(2):
        if pos + 4 > end:
            return []
        pos += 4 + struct.unpack_from("<H", data, pos)[0]
    if pos + 2 > end:
        return []
    count = struct.unpack_from("<H", data, pos)[0]
    if pos + 2 + 8 * count > end:
        return []
    refs = (struct.unpack_from("<HHHH", data, pos + 2 + 8 * index) for index in range(count))
    return [(first_row, first_column, last_row, last_column) for first_row, last_row, first_column, last_column in refs
            if first_row <= last_row and first_column <= last_column]


def widened(data: bytes, part: str, validations: list[list[Range]]) -> tuple[bytes, int]:
    """(the worksheet ``part`` (``data``) whose ``dataValidation`` elements cut short of one of ``validations``
    (each DV's ranges) cover that DV's ranges again; how many were)."""
    given = 0

    def widen(tag: str, attributes: dict[str, str]) -> dict[str, str | None] | None:
        nonlocal given
        if tag != VALIDATION:
            return None
        written = _parsed(attributes.get("sqref", ""))
        if not written:
            return None
        cut = max(last_row for _, _, last_row, _ in written)
        for ranges in validations:
            whole = sorted(ranges)
            clipped = [(first_row, first_column, min(last_row, cut), last_column)
                       for first_row, first_column, last_row, last_column in whole if first_row <= cut]
            if written != whole and written == clipped:
                given += 1
                return {"sqref": " ".join(_reference(cells) for cells in whole)}
        return None

    edited = ooxml.edit_tags(data, part, widen)
    return edited, given


def _parsed(sqref: str) -> list[Range] | None:
    """The ranges of an ``sqref`` ("D2:D50 D52:D1063"), sorted; None where one does not read."""
    ranges = []
    for reference in sqref.split():
        corners: list[tuple[int, int]] = []
        for cell in reference.split(":"):
            place = cell_place(cell)
            if place is None or len(corners) == 2:
                return None
            corners.append(place)
        ranges.append((*corners[0], *corners[-1]))
    return sorted(ranges)


def _reference(cells: Range) -> str:
    first_row, first_column, last_row, last_column = cells
    first, last = cell_name(first_row, first_column), cell_name(last_row, last_column)
    return first if first == last else f"{first}:{last}"
