"""Cells an .xls centres across selection (XF alc 6), which LibreOffice's import merges: the result's cells are
cells of their own again, aligned centerContinuous, and the .xls's own merges stay."""

import re
import zipfile

import openpyxl
import pytest
from conftest import _soffice_save as soffice
from openpyxl.styles import Font
from workbooks import saved_as_xls, with_workbook_stream, with_xfs_edited, xfs_of_cells

from docshift.engine import convert, sheet_across
from docshift.engine.sheet_numbers import Styles


def across(stream):
    """The Workbook ``stream`` with the XFs of its first sheet's A1 (bold) and A4 (italic) centring across."""
    def centre(xf):
        xf[6] = xf[6] & 0xF8 | sheet_across.ACROSS

    found = xfs_of_cells(stream)
    return with_xfs_edited(stream, {found[0, 0]: centre, found[3, 0]: centre})


@pytest.fixture(scope="module")
def headed(tmp_path_factory):
    """An .xls whose A1 heads A1:C1 and A6 and C6 each head a pair (bold, centred across with blanks), A4:C4 is
    merged and centred across (italic), and A2:C2 and E1 are cells of a table beside them."""
    out = tmp_path_factory.mktemp("across")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Headed"
    bold, italic = Font(bold=True), Font(italic=True)
    for ref, value, font in [("A1", "A heading over three columns", bold), ("B1", None, bold), ("C1", None, bold),
                             ("A2", "a", None), ("B2", "b", None), ("C2", "c", None), ("E1", "beside", None),
                             ("A4", "merged in the .xls", italic), ("B4", None, italic), ("C4", None, italic),
                             ("A6", "left pair", bold), ("B6", None, bold), ("C6", "right pair", bold),
                             ("D6", None, bold)]:
        sheet[ref].value = value
        if font is not None:
            sheet[ref].font = font
    sheet.merge_cells("A4:C4")
    return with_workbook_stream(saved_as_xls(book, out, "headed"), across, out / "headed-across.xls")


def merges_and_alignments(result):
    """(the merged ranges, {cell: its horizontal alignment other than general} of A1:E6) of the first sheet of the
    .xlsx ``result``, as openpyxl reads them (a cell a merge covers has no alignment of its own there)."""
    sheet = openpyxl.load_workbook(result).worksheets[0]
    return (sorted(str(merged) for merged in sheet.merged_cells.ranges),
            {cell.coordinate: cell.alignment.horizontal for row in sheet["A1:E6"] for cell in row
             if cell.alignment.horizontal not in (None, "general")})


def test_the_merges_libreoffice_makes_are_found(headed):
    """LibreOffice's order: a cell with a value begins a range, the blanks right of it extend it; a merge of the
    .xls's own is not one."""
    found = sheet_across.centred(headed)
    assert found["Headed"].merges == {b"A1:C1", b"A6:B6", b"C6:D6"}
    assert found["Headed"].cells == {(0, 0), (0, 1), (0, 2), (3, 0), (3, 1), (3, 2), (5, 0), (5, 1), (5, 2), (5, 3)}


def test_cells_centred_across_selection_are_cells_again(office, headed, tmp_path):
    """A plain soffice merges the heads and centres them; docshift's result keeps only the .xls's merge, aligns the
    cells centred across selection so, leaves every other cell as it was, and LibreOffice reads the same values."""
    plain = soffice(headed, "xlsx", tmp_path / "plain")
    assert merges_and_alignments(plain) == (["A1:C1", "A4:C4", "A6:B6", "C6:D6"], dict.fromkeys(
        ("A1", "A4", "A6", "C6"), "center"))
    converted = convert.convert(office, headed, "xls", tmp_path / "work", 60)
    assert merges_and_alignments(converted.path) == (["A4:C4"], dict.fromkeys(
        ("A1", "B1", "C1", "A4", "A6", "B6", "C6", "D6"), "centerContinuous"))
    with zipfile.ZipFile(plain) as before, zipfile.ZipFile(converted.path) as after:
        sheets = [re.sub(rb' s="[0-9]+"|<mergeCells.*</mergeCells>', b"", package.read("xl/worksheets/sheet1.xml"))
                  for package in (before, after)]
    assert sheets[0] == sheets[1]
    assert converted.fidelity["complete"] is True
    read = [soffice(path, "csv", tmp_path / name).read_text() for path, name in ((plain, "p"), (converted.path, "c"))]
    assert read[0] == read[1] and "A heading over three columns" in read[1]


def test_a_workbook_that_centres_nothing_across_is_untouched(headed, tmp_path):
    """The .xls as LibreOffice saved it has its merge and no XF centring across: its result stays byte for byte."""
    source = headed.parent / "headed.xls"
    result = soffice(source, "xlsx", tmp_path)
    before = result.read_bytes()
    assert sheet_across.centred(source) == {}
    assert sheet_across.mend(result, source, "xls") == 0
    assert result.read_bytes() == before


STYLES = ('<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><cellXfs count="3">'
          '<xf numFmtId="0" fontId="0"><alignment horizontal="center" vertical="bottom"/></xf>'
          '<xf numFmtId="0" fontId="1"><alignment horizontal="left"/></xf><xf numFmtId="0" fontId="2"/></cellXfs>'
          '</styleSheet>')


def test_only_centred_cells_named_change_and_only_made_merges_go():
    """A named cell LibreOffice did not centre, or whose style has no alignment, keeps its style; a merge not named
    stays; two cells of one style share its copy, whose alignment alone changes."""
    data = STYLES.encode()
    styles = Styles.of(data, "xl/styles.xml")
    sheet = (b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">'
             b'<c r="A1" s="0" t="s"><v>0</v></c><c r="B1" s="0"/><c r="C1" s="1" t="s"><v>1</v></c><c r="D1" s="2"/>'
             b'<c r="E1" s="0"/></row></sheetData><mergeCells count="2"><mergeCell ref="A1:B1"/>'
             b'<mergeCell ref="E1:F1"/></mergeCells></worksheet>')
    edit = sheet_across._unmerging(sheet_across.Across({(0, 0), (0, 1), (0, 2), (0, 3)}, {b"A1:B1"}), styles)
    written, given = edit(sheet, "xl/worksheets/sheet1.xml")
    assert given == 3
    assert written == sheet.replace(b'<c r="A1" s="0"', b'<c r="A1" s="3"').replace(
        b'<c r="B1" s="0"', b'<c r="B1" s="3"').replace(b'count="2"><mergeCell ref="A1:B1"/>', b'count="1">')
    assert styles.written(data, "xl/styles.xml") == STYLES.replace('count="3"', 'count="4"').replace(
        "</cellXfs>", '<xf numFmtId="0" fontId="0"><alignment horizontal="centerContinuous" vertical="bottom"/>'
        "</xf></cellXfs>").encode()
