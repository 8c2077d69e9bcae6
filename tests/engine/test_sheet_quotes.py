"""The "keep as text" prefix of an .xls's cells (XF's f123Prefix), which LibreOffice's import drops: the result's
cells get it back as their styles' quotePrefix, and nothing else changes."""

import re
import struct
import zipfile

import openpyxl
import pytest
from conftest import _soffice_save as soffice
from openpyxl.styles import Font
from workbooks import saved_as_xls, with_workbook_stream, with_xfs_edited, xfs_of_cells

from docshift.engine import convert, sheet_quotes
from docshift.engine.sheet_numbers import Styles

TYPED = ["00123", "1/2", "=A1"]  # texts Excel would read as a number, a date and a formula without the prefix


def prefixed(stream):
    """The Workbook ``stream`` with the XF of its first sheet's A1 given the prefix."""
    def prefix(xf):
        struct.pack_into("<H", xf, 4, struct.unpack_from("<H", xf, 4)[0] | sheet_quotes.PREFIXED)

    return with_xfs_edited(stream, {xfs_of_cells(stream)[0, 0]: prefix})


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """An .xls whose A1:A3 (bold) hold texts typed with the prefix, and A4 (not bold) a text typed without it."""
    out = tmp_path_factory.mktemp("quotes")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Typed"
    for row, text in enumerate([*TYPED, "plain"], 1):
        cell = sheet.cell(row, 1)
        cell.value, cell.data_type = text, "s"
        if row <= len(TYPED):
            cell.font = Font(bold=True)
    return with_workbook_stream(saved_as_xls(book, out, "typed"), prefixed, out / "typed-prefixed.xls")


def cells(result):
    """(value, quotePrefix) of A1:A4 of the first sheet of the .xlsx ``result``, as openpyxl reads them."""
    sheet = openpyxl.load_workbook(result).worksheets[0]
    return [(sheet.cell(row, 1).value, sheet.cell(row, 1).quotePrefix) for row in range(1, 5)]


def test_the_cells_whose_xf_has_the_prefix_are_read(typed):
    assert sheet_quotes.prefixed_cells(typed) == {"Typed": {(0, 0), (1, 0), (2, 0)}}


def test_the_prefix_is_put_back(office, typed, tmp_path):
    """A plain soffice's .xlsx has no prefix; docshift's has it on A1:A3 and not A4, the cells are otherwise as
    LibreOffice wrote them, and LibreOffice reads the texts back as texts."""
    plain = soffice(typed, "xlsx", tmp_path / "plain")
    assert cells(plain) == [(text, False) for text in [*TYPED, "plain"]]
    converted = convert.convert(office, typed, "xls", tmp_path / "work", 60)
    assert cells(converted.path) == [*((text, True) for text in TYPED), ("plain", False)]
    with zipfile.ZipFile(plain) as before, zipfile.ZipFile(converted.path) as after:
        written = [re.sub(rb' s="[0-9]+"', b"", package.read("xl/worksheets/sheet1.xml")) for package in (before,
                                                                                                           after)]
        styles = after.read("xl/styles.xml")
    assert written[0] == written[1]
    assert len(re.findall(rb'quotePrefix="1"', styles)) == 1  # one copy of the bold cells' style
    assert converted.fidelity["complete"] is True
    read = soffice(converted.path, "fods", tmp_path / "read").read_text()
    assert all(f'office:value-type="string" office:string-value="{text}"' in read or f"<text:p>{text}</text:p>" in
               read for text in TYPED)


def test_a_workbook_without_the_prefix_is_untouched(typed, tmp_path):
    """The .xls as LibreOffice saved it has no XF with the prefix: its result stays byte for byte."""
    source = typed.parent / "typed.xls"
    result = soffice(source, "xlsx", tmp_path)
    before = result.read_bytes()
    assert sheet_quotes.prefixed_cells(source) == {}
    assert sheet_quotes.mend(result, source, "xls") == 0
    assert result.read_bytes() == before


STYLES = ('<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><fonts count="1"><font/>'
          '</fonts><cellXfs count="2"><xf numFmtId="0" fontId="0"/><xf numFmtId="0" fontId="0" quotePrefix="1"/>'
          '</cellXfs></styleSheet>')


def test_only_wanted_cells_of_styles_without_the_prefix_change():
    """A cell of a style that has the prefix, a cell not named and a cell of a style the part has not keep theirs;
    two cells of one style share its copy."""
    data = STYLES.encode()
    styles = Styles.of(data, "xl/styles.xml")
    assert styles.quoted == {1}
    sheet = (b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">'
             b'<c r="A1" t="s"><v>0</v></c><c r="B1" s="1" t="s"><v>1</v></c><c r="C1" s="0"><v>2</v></c>'
             b'<c r="D1" s="7" t="s"><v>2</v></c><c r="E1" s="0" t="s"><v>3</v></c></row></sheetData></worksheet>')
    edit = sheet_quotes._quoting({(0, 0), (0, 1), (0, 3), (0, 4)}, styles)
    written, given = edit(sheet, "xl/worksheets/sheet1.xml")
    assert given == 2
    assert written == sheet.replace(b'<c r="A1" t="s"', b'<c r="A1" s="2" t="s"').replace(b'<c r="E1" s="0"',
                                                                                         b'<c r="E1" s="2"')
    assert styles.written(data, "xl/styles.xml") == STYLES.replace('count="2"', 'count="3"').replace(
        "</cellXfs>", '<xf numFmtId="0" fontId="0" quotePrefix="1"/></cellXfs>').encode()
