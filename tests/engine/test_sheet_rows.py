"""A row's own format (``docshift/engine/sheet_rows.py``, ``sheet_xf.py``): the fill, border and font Excel shows in
the empty cells of an .xls row whose ROW record gives it an XF, which LibreOffice's export writes as no format.

The workbook is made by the suite: openpyxl gives rows of an .xlsx their own formats, and LibreOffice saves it as
an .xls whose ROW records carry them (fGhostDirty). Rows 1 and 3 hold cells of their format; rows 8 and 10 hold no
cell, and no cell of the workbook has their formats (a border and a font; a fill and a number format of its own).
"""

import re
import struct
import zipfile
from xml.parsers import expat

import openpyxl
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice
from openpyxl.styles import Border, Font, PatternFill, Side
from workbooks import saved_as_xls

from docshift.engine import convert, sheet_rows, sheet_xf

CORPUS = ROOT.parent / "shared" / "corpus" / "xls"


@pytest.fixture(scope="module")
def rows_xls(tmp_path_factory):
    out = tmp_path_factory.mktemp("rows")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Rows"
    for row in range(1, 6):
        sheet.cell(row, 1, f"row {row}")
        sheet.cell(row, 2, row)
    sheet.row_dimensions[1].fill = PatternFill("solid", fgColor="FFFF00")
    sheet.row_dimensions[1].font = Font(bold=True)
    sheet.row_dimensions[3].fill = PatternFill("solid", fgColor="00B0F0")
    sheet.row_dimensions[8].border = Border(bottom=Side("thick", color="FF0000"))
    sheet.row_dimensions[8].font = Font(italic=True, size=14, name="Courier New")
    sheet.row_dimensions[10].fill = PatternFill("solid", fgColor="C0C0C0")
    sheet.row_dimensions[10].number_format = "0.000%;[Red]-0.000%"
    return saved_as_xls(book, out, "rows")


def cells(result):
    """({cell: its style}, {row: its style where it has its own}) of the first sheet of ``result``, as written."""
    with zipfile.ZipFile(result) as package:
        data = package.read("xl/worksheets/sheet1.xml")
    return ({ref: style or b"0" for ref, style in sheet_rows.CELL_TAG.findall(data)},
            {int(row): re.search(rb' s="([0-9]+)"', tag).group(1)
             for row, tag in re.findall(rb'<row r="([0-9]+)"([^>]*)', data) if b'customFormat="1"' in tag})


def test_rows_keep_their_own_format_where_a_plain_soffice_drops_it(office, rows_xls, tmp_path):
    """The .xls's rows 1, 3, 8 and 10 have formats of their own; a plain soffice writes no row with one. docshift's
    rows have the fill, border and font the .xls gives them, and every cell keeps the style the plain one has."""
    assert {sheet: set(rows) for sheet, rows in sheet_rows.formatted_rows(rows_xls).items()} == {
        "Rows": {0, 2, 7, 9}}
    plain = soffice(rows_xls, "xlsx", tmp_path / "plain")
    plain_rows = openpyxl.load_workbook(plain)["Rows"].row_dimensions
    assert not any(plain_rows[number].customFormat for number in (1, 3, 8, 10))

    ours = convert.convert(office, rows_xls, "xls", tmp_path / "work", 60).path
    rows = openpyxl.load_workbook(ours)["Rows"].row_dimensions
    assert [number for number in range(1, 12) if rows[number].customFormat] == [1, 3, 8, 10]
    assert rows[1].fill.fill_type == "solid" and rows[1].fill.fgColor.rgb.endswith("FFFF00") and rows[1].font.b
    assert rows[3].fill.fill_type == "solid" and rows[3].fill.fgColor.rgb.endswith("00B0F0")
    assert rows[8].border.bottom.style == "thick" and rows[8].border.bottom.color.rgb.endswith("FF0000")
    assert rows[8].font.i and rows[8].font.sz == 14 and rows[8].font.name == "Courier New"
    assert rows[8].fill.fill_type is None and not rows[8].font.b
    assert rows[10].fill.fill_type == "solid" and rows[10].fill.fgColor.rgb.endswith("C0C0C0")
    assert rows[10].number_format == "0.000%;[RED]\\-0.000%"  # the .xls FORMAT record's code
    (written, own), (plain_cells, plain_own) = cells(ours), cells(plain)
    assert written == plain_cells and not plain_own
    # rows 1 and 3 take the style LibreOffice wrote for their cells; rows 8 and 10 are made, after LibreOffice's
    assert {written[b"A1"], written[b"B1"]} == {own[1]} and {written[b"A3"], written[b"B3"]} == {own[3]}
    assert min(int(own[8]), int(own[10])) > max(int(style) for style in written.values())


def test_a_corpus_workbook_gets_every_row_format_it_holds(office, tmp_path):
    """``36947.xls`` gives 144 rows formats of their own, of six XFs, four of which no cell has."""
    source = CORPUS / "36947.xls"
    formatted = sheet_rows.formatted_rows(source)
    assert sum(len(rows) for rows in formatted.values()) == 144
    ours = convert.convert(office, source, "xls", tmp_path / "work", 60).path
    book = openpyxl.load_workbook(ours)
    for sheet, rows in formatted.items():
        dimensions = book[sheet].row_dimensions
        assert all(dimensions[row + 1].customFormat for row in rows)
    plain = openpyxl.load_workbook(soffice(source, "xlsx", tmp_path / "plain"))
    assert not any(plain[sheet].row_dimensions[row + 1].customFormat for sheet, rows in formatted.items()
                   for row in rows)


def test_rows_go_in_order_and_an_empty_sheet_data_gets_its_end():
    """A row the part has is given the style; one it lacks is made before the next row, or at the end."""
    data = (b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
            b'<row r="2" customFormat="false"><c r="A2"/></row><row r="5"/></sheetData></worksheet>')
    written, count = sheet_rows.restyled(data, "sheet.xml", {0: "3", 1: "4", 3: "5", 9: "6"})
    assert count == 4
    assert written == (b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
                       b'<row r="1" s="3" customFormat="1"/><row r="2" customFormat="1" s="4"><c r="A2"/></row>'
                       b'<row r="4" s="5" customFormat="1"/><row r="5"/><row r="10" s="6" customFormat="1"/>'
                       b'</sheetData></worksheet>')
    empty = b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData/></worksheet>'
    assert sheet_rows.restyled(empty, "sheet.xml", {2: "1"})[0] == (
        b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
        b'<row r="3" s="1" customFormat="1"/></sheetData></worksheet>')


def test_a_style_made_of_a_damaged_xf_stays_within_what_ooxml_allows():
    """An XF whose rotation, font size, font name and number format no Excel writes still makes a style that reads:
    rotation 0, no size, no name, General; a font past the FONT records is the default one, a colour past the
    palette the window's text."""
    styles = (b'<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
              b'<fonts count="1"><font/></fonts><fills count="1"><fill/></fills><borders count="1"><border/>'
              b'</borders><cellXfs count="1"><xf/></cellXfs></styleSheet>')
    damaged = struct.pack("<HHHBBBBIIH", 0, 100, 1, 0x21, 200, 0, 0, 0, 1 << 26 | 99, 99)
    beyond = struct.pack("<HHHBBBBIIH", 7, 0, 1, 0, 255, 0, 0, 0, 0, 0)
    padded = struct.pack("<HHHBBBBIIH", 1, 170, 1, 0, 0, 0, 0, 0, 0, 0)  # a name of NULs, a code with a control
    book = sheet_xf.Book(xfs=[damaged, beyond, padded], codes={170: "0.0\x01"},
                         fonts=[sheet_xf.Font(0, False, False, 200, True, 0, 0, 0, 0, " "),
                                sheet_xf.Font(200, False, False, 8, False, 0, 0, 0, 0, "Arial\x00\x00")])
    made = sheet_xf.Made.of(styles, "xl/styles.xml", book)
    assert (made.style(0), made.style(1), made.style(3)) == ("1", "2", None)
    assert made.style(2) == "3"
    expat.ParserCreate().Parse(made.written(), True)  # well-formed
    assert '<name val="Arial"/>' in made.written().decode() and 'formatCode="0.0"' in made.written().decode()
    written = made.written().decode()
    assert '<font><b/><color indexed="64"/></font>' in written  # no size, no name
    assert 'numFmtId="0" fontId="1"' in written and 'textRotation="200"' not in written
    assert 'fontId="0"' in written and 'textRotation="255"' in written  # stacked text, the default font
    assert '<fonts count="3">' in written and '<cellXfs count="4">' in written
