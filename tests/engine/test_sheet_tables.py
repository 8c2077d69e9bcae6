"""What-If data tables: LibreOffice's export writes each cell as a formula of a function ``TABLE`` that Excel has
not; the result holds each table as Excel writes one, and LibreOffice reads it back to what it reads the .xls to."""

import re
import struct
import zipfile

import openpyxl
import pytest
from conftest import _soffice_save as soffice
from workbooks import with_workbook_stream

from docshift.engine import convert, sheet_tables
from docshift.engine.inventory.package import NS_S

TABLE = 0x0236
OPERATIONS = re.compile(r'table:formula="(of:=MULTIPLE\.OPERATIONS[^"]*)"')
# a loan's payment for three rates (one input, the rate in B3), and for three rates by two terms (B9 and B10)
ROWS = [
    [None, None, None, "PMT([.B3]/12;[.B4];-[.B5])"],
    [None, 0.05, 0.04, "MULTIPLE.OPERATIONS([.D$2];[.$B$3];[.$C3])"],
    [None, 240, 0.05, "MULTIPLE.OPERATIONS([.D$2];[.$B$3];[.$C4])"],
    [None, 150000, 0.06, "MULTIPLE.OPERATIONS([.D$2];[.$B$3];[.$C5])"],
    [], [],
    [None, None, "PMT([.B9]/12;[.B10];-[.B11])", 120, 240],
    *([None, term, rate] + [f"MULTIPLE.OPERATIONS([.$C$8];[.$B$9];[.$C{row}];[.$B$10];[.{column}$8])"
                            for column in "DE"]
      for row, term, rate in ((9, 0.05, 0.04), (10, 240, 0.05), (11, 150000, 0.06))),
]
# each TABLE record's flags and input cells (rwInpRw, colInpRw, rwInpCol, colInpCol) as Excel writes them: LibreOffice
# 25.2's own .xls export writes other cells there (it reads the one input as A3, not B3)
EXCEL_TABLES = [(0x0000, (2, 1, 0, 0)), (0x000C, (9, 1, 8, 1))]
# (row, column), 0-based, of the tables' cells: D3:D5 and D9:E11
TABLE_CELLS = [(row, 3) for row in (2, 3, 4)] + [(row, column) for row in (8, 9, 10) for column in (3, 4)]


def cell(value):
    if isinstance(value, str):
        return f'<table:table-cell table:formula="of:={value}"/>'
    if value is not None:
        return f'<table:table-cell office:value-type="float" office:value="{value}"/>'
    return "<table:table-cell/>"


def as_excel_writes(stream):
    """The Workbook ``stream`` with each TABLE record's flags and input cells as ``EXCEL_TABLES`` has them."""
    data, pos, tables = bytearray(stream), 0, iter(EXCEL_TABLES)
    while pos + 4 <= len(data):
        rec_type, length = struct.unpack_from("<HH", data, pos)
        if rec_type == TABLE:
            flags, inputs = next(tables)
            struct.pack_into("<H4H", data, pos + 10, flags, *inputs)
        pos += 4 + length
    return bytes(data)


@pytest.fixture(scope="module")
def loan(tmp_path_factory):
    """A .xls of the two data tables of ``ROWS``: made by LibreOffice from flat ODF, its TABLE records then written
    as Excel writes them."""
    out = tmp_path_factory.mktemp("tables")
    rows = "".join(f"<table:table-row>{''.join(cell(value) for value in row) or cell(None)}</table:table-row>"
                   for row in [[], *ROWS])
    (out / "loan.fods").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><office:document '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" office:version="1.2" '
        'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet>'
        f'<table:table table:name="Loan">{rows}</table:table></office:spreadsheet></office:body></office:document>')
    made = soffice(out / "loan.fods", "xls", out)
    return with_workbook_stream(made, as_excel_writes, out / "tables.xls")


def formulas(result):
    """{cell: its formula element} of the first sheet of the .xlsx ``result``."""
    with zipfile.ZipFile(result) as package:
        sheet = package.read("xl/worksheets/sheet1.xml").decode()
    return dict(re.findall(r'<c r="([A-Z]+[0-9]+)"[^>]*>(<f\b[^>]*/>|<f\b[^>]*>[^<]*</f>)', sheet))


def test_a_data_table_is_written_as_excel_writes_one(office, loan, tmp_path):
    """A plain soffice writes each of the 9 cells as ``TABLE(..)``; docshift's result has one data table for each
    range, the other cells holding their values, and LibreOffice reads it back to the MULTIPLE.OPERATIONS it reads
    the .xls to."""
    legacy = OPERATIONS.findall(soffice(loan, "fods", tmp_path / "legacy").read_text())
    assert legacy[0] == "of:=MULTIPLE.OPERATIONS([.D$2];[.$B$3];[.$C3])" and len(legacy) == 9
    plain = formulas(soffice(loan, "xlsx", tmp_path / "plain"))
    assert sum(formula.count(">TABLE(") for formula in plain.values()) == 9
    converted = convert.convert(office, loan, "xls", tmp_path / "work", 60)
    result = formulas(converted.path)
    assert result["D3"] == '<f t="dataTable" ref="D3:D5" dt2D="0" dtr="0" r1="B3"/>'
    assert result["D9"] == '<f t="dataTable" ref="D9:E11" dt2D="1" dtr="1" r1="B10" r2="B9"/>'
    assert not any("TABLE(" in formula for formula in result.values()) and len(result) == 4  # and the two PMTs
    assert OPERATIONS.findall(soffice(converted.path, "fods", tmp_path / "read").read_text()) == legacy


def test_each_cell_of_a_data_table_keeps_the_result_excel_stored(office, loan, tmp_path):
    """LibreOffice calculates a data table again; where its result differs from what Excel stored (a function it
    computes otherwise, an add-in's), the stored value goes back into the cell. Only a table's first cell keeps an
    ``<f>``: the others are the table's cells all the same, and get theirs too."""
    def stored(stream):  # each FORMULA record of a table's cell stores (row + 1) * 10 + column as its result
        data, pos = bytearray(stream), 0
        while pos + 4 <= len(data):
            rec_type, length = struct.unpack_from("<HH", data, pos)
            row, column = struct.unpack_from("<HH", data, pos + 4) if length >= 4 else (0, 0)
            if rec_type == 0x0006 and (row, column) in TABLE_CELLS:
                struct.pack_into("<d", data, pos + 10, (row + 1) * 10.0 + column)
            pos += 4 + length
        return bytes(data)

    source = with_workbook_stream(loan, stored, tmp_path / "stored.xls")
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.fidelity["complete"], converted.fidelity["lost"]
    cells = openpyxl.load_workbook(converted.path, data_only=True)["Loan"]
    assert {(row, column): cells.cell(row + 1, column + 1).value for row, column in TABLE_CELLS} == \
        {(row, column): (row + 1) * 10.0 + column for row, column in TABLE_CELLS}


def test_only_a_whole_rectangle_of_one_table_is_written():
    """Three columns of formulas over one column of values make one table (each column's formula above it); values
    along a row make one whose dtr says so; a range with a hole, or arguments of no data table, stay as written."""
    def sheet(cells):
        return (f'<worksheet xmlns="{NS_S}"><sheetData>' + "".join(
            f'<c r="{ref}"><f aca="true">TABLE({arguments})</f><v>1</v></c>' for ref, arguments in cells)
            + "</sheetData></worksheet>").encode()

    down = sheet([(f"{column}{row}", f"{column}$3,$B$5,$D{row}") for row in (4, 5) for column in "EFG"])
    written, count = sheet_tables.tabled(down, "sheet1.xml")
    assert count == 1 and written.count(b"<f") == 1
    assert b'<c r="E4"><f t="dataTable" ref="E4:G5" dt2D="0" dtr="0" r1="B5"/><v>1</v></c>' in written
    along = sheet([(f"{column}{row}", f"$B{row},$B$26,{column}$26") for row in (27, 28) for column in "CD"])
    assert b'ref="C27:D28" dt2D="0" dtr="1" r1="B26"' in sheet_tables.tabled(along, "sheet1.xml")[0]
    holed = sheet([("E4", "E$3,$B$5,$D4"), ("E6", "E$3,$B$5,$D6")])
    odd = sheet([("E4", "E3,B5,D4"), ("E5", "E$3,$B$5")])
    for kept in (holed, odd):
        assert sheet_tables.tabled(kept, "sheet1.xml") == (kept, 0)
