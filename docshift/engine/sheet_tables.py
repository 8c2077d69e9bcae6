"""A sheet's What-If data tables, written as Excel writes them where LibreOffice writes a function Excel has not.

Excel's Data > What-If Analysis > Data Table fills a range with one formula worked out for each value of one input
cell (a column or a row of values) or of two (the values down its left and along its top). An .xls keeps it as a
TABLE record beside the range's first cell; an .xlsx as ``<f t="dataTable" ref=.. dt2D=.. dtr=.. r1=.. r2=..>`` in
that cell, the range's other cells holding values only. LibreOffice loads it as MULTIPLE.OPERATIONS in each cell,
and its OOXML export writes each cell's as a formula of a function ``TABLE(..)`` that Excel has not: 126 cells of 11
tables in 5 of 685 workbooks of the corpus and POI's and LibreOffice's tests (a mortgage's payment by rate and
term) came out as formulas Excel cannot read.

``mend`` writes each rectangle of such cells that make one data table as one, from the arguments LibreOffice gave
them (``TABLE(formula, input, value)``: the values down a column, each column's formula above it, or along a row;
for two inputs ``TABLE(formula, column input, value, row input, value)``): LibreOffice reads the result back to the
same MULTIPLE.OPERATIONS as it reads the .xls to. A cell whose arguments do not read so, or a table that is no whole
rectangle, stays as LibreOffice wrote it.
"""

import re
from collections.abc import Iterator
from pathlib import Path

from docshift.engine import sheet_objects
from docshift.engine.embedding import PartEdit, edited, spliced
from docshift.engine.inventory.package import Package
from docshift.engine.sheet_objects import COLUMN_NUMBERS, cell_name

# a cell whose formula is LibreOffice's TABLE(..): its reference, the formula element and its arguments
TABLE_CELL = re.compile(rb'<c r="([A-Z]{1,3})([0-9]{1,7})"[^>]*>(<f\b[^>]*>TABLE\(([^<()]*)\)</f>)')
REFERENCE = re.compile(r"(\$?)([A-Z]{1,3})(\$?)([0-9]{1,7})")


def mend(result: Path, kind: str) -> int:
    """Write the data tables of ``result`` (LibreOffice's export of an .xls) as Excel does. Returns how many were
    (0: the file is untouched). Never raises for what the file holds."""
    if kind != "xls":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        for _, _, part in sheet_objects.worksheets(package):
            if package.holds(part, b">TABLE("):
                yield part, tabled

    return edited(result, parts, "the data tables of %s stay as LibreOffice wrote them: %r")


def tabled(data: bytes, part: str) -> tuple[bytes, int]:
    """(the worksheet ``part`` (``data``) with each of its data tables written as Excel writes one; how many)."""
    tables: dict[tuple[str, ...], dict[tuple[int, int], re.Match[bytes]]] = {}
    for match in TABLE_CELL.finditer(data):
        letters = match.group(1).decode()
        if letters in COLUMN_NUMBERS:
            place = (int(match.group(2)) - 1, COLUMN_NUMBERS[letters])
            key = _table_of(place, match.group(4).decode().split(","))
            if key is not None:
                tables.setdefault(key, {})[place] = match
    replaced: list[tuple[int, int, bytes]] = []
    for key, cells in tables.items():
        replaced += _table(key, cells)
    return spliced(data, replaced), sum(1 for _, _, element in replaced if element)


def _table_of(place: tuple[int, int], arguments: list[str]) -> tuple[str, ...] | None:
    """What the cell at ``place`` (row, column) shares with the other cells of its data table, from LibreOffice's
    ``arguments``: ("down", input, the values' column, the formulas' row) for one input whose values run down a
    column, each column's formula above it; ("along", input, the values' row, the formulas' column) for values
    along a row; ("both", formula, column input, row input) for two. None where they do not read so."""
    found = [REFERENCE.fullmatch(argument) for argument in arguments]
    if not all(found):
        return None
    cells = [(match.group(1), COLUMN_NUMBERS.get(match.group(2)), match.group(3), int(match.group(4)) - 1)
             for match in found if match]
    if any(column is None for _, column, _, _ in cells):
        return None
    row, column = place
    if len(cells) == 5:
        return "both", arguments[0], arguments[1], arguments[3]
    if len(cells) != 3:
        return None
    (_, formula_column, _, formula_row), _, (fixed_column, value_column, fixed_row, value_row) = cells
    if fixed_column and not fixed_row and value_row == row and formula_column == column:
        return "down", arguments[1], str(value_column), str(formula_row)
    if fixed_row and not fixed_column and value_column == column and formula_row == row:
        return "along", arguments[1], str(value_row), str(formula_column)
    return None


def _table(key: tuple[str, ...], cells: dict[tuple[int, int], re.Match[bytes]]) -> list[tuple[int, int, bytes]]:
    """The formula elements of the table ``cells`` ({(row, column): its cell's match}) that share ``key``
    (``_table_of``), each as (start, end, what goes there): the first cell's, the data table; the others', nothing.
    None of them where the cells do not make a whole rectangle."""
    rows = [row for row, _ in cells]
    columns = [column for _, column in cells]
    top, left, bottom, right = min(rows), min(columns), max(rows), max(columns)
    if len(cells) != (bottom - top + 1) * (right - left + 1):
        return []
    reference = f"{cell_name(top, left)}:{cell_name(bottom, right)}"
    if key[0] == "both":  # the row input cell first, then the column input cell
        table = f'<f t="dataTable" ref="{reference}" dt2D="1" dtr="1" r1="{_plain(key[3])}" r2="{_plain(key[2])}"/>'
    else:
        table = f'<f t="dataTable" ref="{reference}" dt2D="0" dtr="{int(key[0] == "along")}" r1="{_plain(key[1])}"/>'
    first = cells[(top, left)]
    return [(match.start(3), match.end(3), table.encode() if match is first else b"") for match in cells.values()]


def _plain(reference: str) -> str:
    """A cell reference without its ``$`` signs."""
    return reference.replace("$", "")
