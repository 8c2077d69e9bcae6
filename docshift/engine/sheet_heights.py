"""The row heights of an Excel 5 or 95 workbook, which LibreOffice's import calculates again, put back into the .xlsx.

An .xls stores each row's height in its ROW record ([MS-XLS] 2.4.221, miyRw in twips) and the height of a row that
has none in DEFAULTROWHEIGHT (2.4.87); Excel shows the rows at those heights. LibreOffice 25.2 keeps them from an
Excel 97 workbook (BIFF8), but its import of an Excel 5 or 95 one (BIFF5) measures each row whose height was not set
by hand (fUnsynced clear) again with its own fonts, and its export writes what it measured: a row of MS PGothic
11 pt, 13.5 pt high in the .xls, comes out 15.8 pt high where that font is not installed, and Excel 5's 12.75 pt
rows 14.65 pt. Every row, and every printed page, is so taller than the workbook's. A plain ``soffice`` does the
same. Of 29 Excel 5 and 95 workbooks of the corpus, POI's tests and unseen sets 25-29, 11 have rows so changed: 72.

``mend`` gives each row of the result whose ROW record's height is not set by hand (nor hidden) the record's height,
and a row that has no record and each sheet's ``sheetFormatPr`` the sheet's DEFAULTROWHEIGHT, where they differ.
Every other byte stays as LibreOffice wrote it; a BIFF8 workbook's result is not read.
"""

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from docshift.engine import biff, ooxml, sheet_objects
from docshift.engine.embedding import ERRORS, PartEdit, edited, log, spliced
from docshift.engine.inventory.package import Package
from docshift.engine.sheet_rows import ROW_TAG
from docshift.engine.sheet_skeleton import SHEET_DATA
from docshift.errors import ResultUnreadable as Unreadable

BIFF_ROW, BIFF_DEFAULTROWHEIGHT = 0x0208, 0x0225
UNSYNCED, HIDDEN = 0x40, 0x20  # a ROW record's flags (its thirteenth byte): height set by hand, row hidden
DEFAULT_UNSYNCED, DEFAULT_HIDDEN = 0x01, 0x02  # DEFAULTROWHEIGHT's
HEIGHT = 0x7FFF
FORMAT = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?sheetFormatPr\b")
HT = re.compile(rb'\sht="([0-9.]+)"')
DEFAULT_HT = re.compile(rb'\sdefaultRowHeight="([0-9.]+)"')


@dataclass
class Heights:
    """A sheet's heights in points: of each row of a ROW record (None where its height was set by hand, or it is
    hidden: LibreOffice keeps those), and of a row with none (None where the sheet has no DEFAULTROWHEIGHT, or one
    set by hand)."""
    rows: dict[int, float | None] = field(default_factory=dict)
    default: float | None = None


def mend(result: Path, source: Path, kind: str) -> int:
    """Give the rows of ``result`` (LibreOffice's export of the .xls ``source``) the heights the Excel 5 or 95
    workbook stores. Returns how many heights changed (0: the file is untouched). Never raises for what the files
    hold."""
    if kind != "xls":
        return 0
    try:
        before = biff.before_biff8(source)
    except ERRORS as error:  # a compound file olefile refuses, which LibreOffice may still have read
        log.warning("the rows of %s keep the heights LibreOffice measured: %r", source, error)
        return 0
    if not before:
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        stored = heights(source)
        for _, name, part in sheet_objects.worksheets(package) if stored else []:
            if name in stored:
                yield part, _heightening(stored[name])

    return edited(result, parts, "the rows of %s keep the heights LibreOffice measured: %r", source)


def heights(source: Path) -> dict[str, Heights]:
    """{sheet name: its heights} of the Excel 5 or 95 workbook ``source``."""
    found: dict[str, Heights] = {}
    for rec_type, sheet, data, body, end in biff.records(source, {BIFF_ROW, BIFF_DEFAULTROWHEIGHT}, True):
        if sheet is None:
            continue
        if rec_type == BIFF_ROW and end - body >= 16:
            row, height = struct.unpack_from("<H", data, body)[0], struct.unpack_from("<H", data, body + 6)[0]
            measured = not data[body + 12] & (UNSYNCED | HIDDEN) and height & HEIGHT
            found.setdefault(sheet, Heights()).rows[row] = (height & HEIGHT) / 20 if measured else None
        elif rec_type == BIFF_DEFAULTROWHEIGHT and end - body >= 4:
            flags, height = struct.unpack_from("<HH", data, body)
            if not flags & (DEFAULT_UNSYNCED | DEFAULT_HIDDEN) and height:
                found.setdefault(sheet, Heights()).default = height / 20
    return found


def _heightening(stored: Heights) -> PartEdit:
    """The edit of a worksheet part that gives its rows and its default row the ``stored`` heights."""
    def edit(data: bytes, name: str) -> tuple[bytes, int]:
        sheet_data = SHEET_DATA.search(data)
        if sheet_data is None:
            raise Unreadable(f"{name} has no sheetData")
        edits = []
        sheet_format = FORMAT.search(data, 0, sheet_data.start())
        if stored.default is not None and sheet_format is not None:
            edits += _height(data, name, sheet_format.start(), DEFAULT_HT, "defaultRowHeight", stored.default)
        for row in ROW_TAG.finditer(data, sheet_data.end()):
            if (height := stored.rows.get(int(row.group(1)) - 1, stored.default)) is not None:
                edits += _height(data, name, row.start(), HT, "ht", height)
        return spliced(data, edits), len(edits)
    return edit


def _height(data: bytes, name: str, at: int, written: re.Pattern[bytes], attribute: str,
            height: float) -> list[tuple[int, int, bytes]]:
    """The edit that gives the start tag at ``at`` the ``height`` (as its ``attribute``, which ``written`` finds),
    where the tag has one that differs; none otherwise."""
    found = written.search(data, at, ooxml.start_tag(data, at, name)[1].start())
    if found is None or abs(float(found.group(1)) - height) < 0.01:
        return []
    tag, end = ooxml.retagged(data, at, name, {attribute: f"{height:g}"})
    return [(at, end, tag)]
