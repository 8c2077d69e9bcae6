"""Excel's "centre across selection", which LibreOffice's .xls import turns into merged cells, put back into the .xlsx.

A heading centred over the columns of a table is often not a merged cell but a cell whose XF aligns it "centre
across selection" ([MS-XLS] 2.5.1, alc 6), followed in its row by blank cells aligned the same way: Excel centres the
text over them all, and each cell stays a cell of its own (it can be selected, sorted, filled in). An .xlsx says the
same with ``horizontal="centerContinuous"`` (ECMA-376 18.18.40). LibreOffice has no such alignment: its import
centres the cell and merges it with the blank cells that follow it aligned so (as it does for "fill", alc 4,
``XclImpXFRangeBuffer::SetXF``), and its export writes those merges and ``horizontal="center"``. A plain ``soffice``
does the same: a sort over such a table then fails on the merged cells, and a value typed into one of the blanks
disappears under the merge. Of the workbooks of the corpus, POI's tests and unseen sets 25-29, 10 have such cells:
1,092 of them, merged by LibreOffice into 181 ranges.

``mend`` reads each cell's XF and record from the .xls in LibreOffice's order and finds the merges its import made of
them (those the .xls merges itself, MERGEDCELLS, stay); it takes those merges out of the result's ``mergeCells``, and
gives each cell whose XF centres across selection a copy of its cell style aligned ``centerContinuous``. Every other
cell, and every other byte, stays as LibreOffice wrote it.
"""

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from docshift.engine import biff
from docshift.engine.embedding import PartEdit, edited, spliced
from docshift.engine.sheet_numbers import Styles
from docshift.engine.sheet_objects import cell_name
from docshift.engine.sheet_quotes import restyled, styled_sheets
from docshift.errors import ResultUnreadable as Unreadable

BIFF_XF, BIFF_MERGEDCELLS = 0x00E0, 0x00E5
BLANKS = {0x0201, 0x00BE}  # BLANK and MULBLANK: cells of a format and no value
FILL, ACROSS = 4, 6  # an XF's horizontal alignment (alc, the low three bits of its seventh byte): fill, centre across
CONTINUOUS = {"horizontal": "centerContinuous"}
MERGE_CELLS = re.compile(rb'<mergeCells count="[0-9]+">((?:<mergeCell ref="[A-Z0-9:]+"/>)*)</mergeCells>')
MERGE_CELL = re.compile(rb'<mergeCell ref="([A-Z0-9:]+)"/>')


@dataclass
class Across:
    """What a sheet of the .xls centres across selection: the cells whose XF does, and the merges LibreOffice's
    import makes of them (as their A1 references), less those the .xls merges itself."""
    cells: set[tuple[int, int]] = field(default_factory=set)
    merges: set[bytes] = field(default_factory=set)


def mend(result: Path, source: Path, kind: str) -> int:
    """Take out of ``result`` (LibreOffice's export of the .xls ``source``) the merges LibreOffice made of cells that
    centre across selection, and align those cells so again. Returns how many merges and cells changed (0: the file
    is untouched). Never raises for what the files hold."""
    if kind != "xls":
        return 0

    return edited(result, lambda package: styled_sheets(package, centred(source), _unmerging),
                  "the cells of %s centred across selection stay merged: %r", source)


def centred(source: Path) -> dict[str, Across]:
    """{sheet name (its first 31 characters): what it centres across selection} of the .xls ``source`` (BIFF8); {}
    where no XF aligns so."""
    aligns = [data[body + 6] & 0x07 for _, sheet, data, body, end in biff.records(source, {BIFF_XF})
              if sheet is None and end - body >= 20]
    if ACROSS not in aligns:
        return {}
    found: dict[str, Across] = {}
    made: list[tuple[str, int, int, int, int]] = []  # LibreOffice's ranges in its order: sheet, row, first and last
    # column, the first cell's alignment
    for rec_type, sheet, row, column, xf in biff.typed_cells(source):
        align = aligns[xf] if xf < len(aligns) else 0
        if align == ACROSS:
            found.setdefault(sheet[:31], Across()).cells.add((row, column))
        if align not in (ACROSS, FILL):
            continue
        if rec_type not in BLANKS:  # a cell with a value starts a range; a blank right of the last one extends it
            made.append((sheet, row, column, column, align))
        elif made and made[-1][:2] == (sheet, row) and made[-1][3] == column - 1:
            made[-1] = (*made[-1][:3], column, made[-1][4])
    merged = _merged(source)
    for sheet, row, first, last, align in made:
        ref = f"{cell_name(row, first)}:{cell_name(row, last)}".encode()
        # a range begun by a cell aligned "fill" (none among the workbooks here) stays as LibreOffice merged it
        if align == ACROSS and last != first and ref not in merged.get(sheet, set()):
            found.setdefault(sheet[:31], Across()).merges.add(ref)
    return found


def _merged(source: Path) -> dict[str, set[bytes]]:
    """{sheet name: the A1 references of the ranges its MERGEDCELLS records merge} of the .xls ``source``."""
    merged: dict[str, set[bytes]] = {}
    for _, sheet, data, body, end in biff.records(source, {BIFF_MERGEDCELLS}):
        if sheet is None or end - body < 2:
            continue
        count = min(struct.unpack_from("<H", data, body)[0], (end - body - 2) // 8)
        for at in range(body + 2, body + 2 + 8 * count, 8):
            first_row, last_row, first_column, last_column = struct.unpack_from("<4H", data, at)
            merged.setdefault(sheet, set()).add(
                f"{cell_name(first_row, first_column)}:{cell_name(last_row, last_column)}".encode())
    return merged


def _unmerging(across: Across, styles: Styles) -> PartEdit:
    """The edit of a worksheet part that takes the merges ``across`` names out of its ``mergeCells`` and gives each
    cell it names whose style (of ``styles``) LibreOffice centred a copy of that style aligned ``centerContinuous``."""
    def edit(data: bytes, name: str) -> tuple[bytes, int]:
        edits = restyled(data, name, across.cells, lambda style: styles.with_attributes(style, {}, CONTINUOUS)
                         if styles.aligned.get(style, (0, ""))[1] == "center" else None)
        given = len(edits)
        if across.merges and b"<mergeCells" in data:
            merges = MERGE_CELLS.search(data)
            if merges is None:
                raise Unreadable(f"{name}: its mergeCells are not as LibreOffice writes them")
            kept = [each.group() for each in MERGE_CELL.finditer(merges.group(1)) if each.group(1) not in across.merges]
            given += len(MERGE_CELL.findall(merges.group(1))) - len(kept)
            edits.append((merges.start(), merges.end(), b'<mergeCells count="%d">%s</mergeCells>' % (
                len(kept), b"".join(kept)) if kept else b""))
        return spliced(data, edits), given
    return edit
