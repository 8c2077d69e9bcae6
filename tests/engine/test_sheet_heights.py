"""An Excel 5 or 95 workbook's row heights, which LibreOffice's BIFF5 import measures again with its own fonts: the
result's rows get the heights the .xls stores, and a row whose height was set by hand keeps it."""

import re
import struct
import zipfile

import olefile
import openpyxl
import pytest
from conftest import _soffice_save as soffice
from workbooks import excel_95, excel_95_file, record, saved_as_xls

from docshift.engine import biff, convert, sheet_heights

STORED, BY_HAND = 270, 600  # twips: 13.5 pt, as Excel 95 stores a row of 11 pt; 30 pt


def label(row: int, text: str) -> bytes:
    """A BIFF5 LABEL record of ``text`` at column A of ``row``, of the default cell XF."""
    return record(0x0204, struct.pack("<HHHH", row, 0, 15, len(text)) + text.encode("cp1252"))


def row_record(row: int, height: int, flags: int) -> bytes:
    """A ROW record of ``row``, one cell wide, ``height`` twips high, with ``flags`` (fUnsynced: set by hand)."""
    return record(0x0208, struct.pack("<HHHHHHHH", row, 0, 1, height, 0, 0, 0x0100 | flags, 15))


def heights_of(result):
    """(the sheet's default row height, {row: (its height, customHeight)}) of the first sheet of ``result``."""
    with zipfile.ZipFile(result) as package:
        data = package.read("xl/worksheets/sheet1.xml")
    default = float(re.search(rb'<sheetFormatPr[^>]*defaultRowHeight="([0-9.]+)"', data).group(1))
    return default, {int(row): (float(height), custom.decode()) for row, height, custom in re.findall(
        rb'<row r="([0-9]+)"[^>]*? ht="([0-9.]+)"[^>]*? customHeight="(\w+)"', data)}


def test_rows_get_the_heights_the_excel_95_workbook_stores(office, tmp_path):
    """Row 1 (a ROW record, measured by Excel), row 3 (no ROW record: the sheet's default) and the sheet's default
    are 13.5 pt in the .xls; a plain soffice measures them again with its fonts, docshift's result gives them 13.5
    again; row 2's 30 pt, set by hand, stays on both sides. LibreOffice reads the same values back."""
    cells = (record(0x0225, struct.pack("<HH", 0, STORED)) + row_record(0, STORED, 0)
             + row_record(1, BY_HAND, sheet_heights.UNSYNCED) + label(1, "tall by hand") + label(2, "no row record"))
    source = excel_95_file(tmp_path / "rows95.xls", excel_95("measured by Excel", cells=cells))
    assert biff.before_biff8(source)
    assert sheet_heights.heights(source) == {"Sheet": sheet_heights.Heights({0: 13.5, 1: None}, 13.5)}
    plain = soffice(source, "xlsx", tmp_path / "plain")
    default, rows = heights_of(plain)
    assert rows[2] == (30.0, "true")
    assert default != 13.5 and rows[1][0] != 13.5 and rows[3][0] != 13.5
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert heights_of(converted.path) == (13.5, {1: (13.5, "false"), 2: (30.0, "true"), 3: (13.5, "false")})
    assert converted.fidelity["complete"] is True
    values = [[cell.value for cell in openpyxl.load_workbook(path).active["A"]] for path in (plain, converted.path)]
    assert values[0] == values[1] == ["measured by Excel", "tall by hand", "no row record"]


def test_an_excel_97_workbook_is_not_read(tmp_path):
    """LibreOffice keeps a BIFF8 workbook's heights: the mend tells it from an Excel 95 one, and its result stays byte
    for byte."""
    book = openpyxl.Workbook()
    book.active["A1"] = "rows"
    book.active.row_dimensions[1].height = 30
    source = saved_as_xls(book, tmp_path, "rows97")
    result = soffice(source, "xlsx", tmp_path / "plain")
    before = result.read_bytes()
    assert not biff.before_biff8(source)
    assert sheet_heights.mend(result, source, "xls") == 0
    assert result.read_bytes() == before


def test_a_workbook_whose_compound_file_olefile_refuses_still_converts(office, tmp_path):
    """An .xls whose header counts DIFAT sectors it has not: olefile refuses it, LibreOffice reads it. It converts,
    its cells whole; the check of its BIFF version before the row heights raised, and failed the conversion (a
    damaged test workbook of xlrd's, unseen set 31)."""
    book = openpyxl.Workbook()
    book.active["A1"], book.active["A2"] = "hello", 42
    made = bytearray(saved_as_xls(book, tmp_path, "sound").read_bytes())
    struct.pack_into("<II", made, 0x44, 3, 2)  # the first DIFAT sector, and how many there are
    damaged = tmp_path / "damaged.xls"
    damaged.write_bytes(made)
    with pytest.raises(OSError):
        olefile.OleFileIO(str(damaged))
    result = convert.convert(office, damaged, "xls", tmp_path / "work", 60).path
    sheet = openpyxl.load_workbook(result).active
    assert (sheet["A1"].value, sheet["A2"].value) == ("hello", 42)
