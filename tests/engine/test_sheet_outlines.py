"""Where a sheet's outline puts its summaries: LibreOffice's export writes no ``outlinePr``, and the result gets the
.xls's WSBOOL settings back."""

import re
import struct

import pytest
from workbooks import records, sheets_of, two_sheets

from docshift.engine import convert, inventory, sheet_outlines
from docshift.engine.inventory.package import NS_S
from docshift.engine.inventory.xls_views import BIFF_WSBOOL, ROWS_BELOW


def above(stream):
    """The Workbook ``stream`` whose first sheet's summary rows are above their details (its WSBOOL's
    fRowSumsBelow cleared); its second sheet's as LibreOffice wrote it."""
    data = bytearray(stream)
    found = [pos for pos, rec_type, length in records(stream) if rec_type == BIFF_WSBOOL and length == 2]
    assert len(found) == 2
    flags = struct.unpack_from("<H", data, found[0] + 4)[0]
    struct.pack_into("<H", data, found[0] + 4, flags & ~ROWS_BELOW)
    return bytes(data)


@pytest.fixture(scope="module")
def totals(tmp_path_factory):
    return two_sheets(tmp_path_factory.mktemp("outlines"), ("Budget", "Notes"), "of:=[.A1]+1", above, "above.xls")


def sheet_properties(result):
    """The ``sheetPr`` element of each of the two sheets of the .xlsx ``result``."""
    return [re.search(r"<sheetPr\b[^>]*/>|<sheetPr\b[^>]*>.*?</sheetPr>", sheet).group() for sheet in sheets_of(result)]


def test_the_xls_says_where_its_summaries_are(totals):
    assert inventory.of_source(totals, "xls").outlines == {"Budget": {"summaryBelow": "0"}}


def test_summaries_above_their_details_stay_so(office, totals, tmp_path):
    """A plain soffice's .xlsx has no ``outlinePr`` (summaries below, Excel's default); docshift's first sheet has
    its own before ``pageSetUpPr``, and its second sheet is as LibreOffice wrote it."""
    from conftest import _soffice_save as soffice

    plain = sheet_properties(soffice(totals, "xlsx", tmp_path / "plain"))
    assert "outlinePr" not in plain[0]
    converted = sheet_properties(convert.convert(office, totals, "xls", tmp_path / "work", 60).path)
    assert converted[0] == plain[0].replace("<pageSetUpPr", '<outlinePr summaryBelow="0"/><pageSetUpPr')
    assert converted[1] == plain[1]


@pytest.mark.parametrize(("sheet_pr", "expected"), [
    ('<x:sheetPr codeName="A"/>', '<x:sheetPr codeName="A"><x:outlinePr summaryRight="0"/></x:sheetPr>'),
    ('<x:sheetPr><x:tabColor rgb="FF0000FF"/><x:pageSetUpPr/></x:sheetPr>',
     '<x:sheetPr><x:tabColor rgb="FF0000FF"/><x:outlinePr summaryRight="0"/><x:pageSetUpPr/></x:sheetPr>'),
    ('<x:sheetPr><x:outlinePr summaryBelow="0"/></x:sheetPr>',
     '<x:sheetPr><x:outlinePr summaryBelow="0" summaryRight="0"/></x:sheetPr>'),
    ("", '<x:sheetPr><x:outlinePr summaryRight="0"/></x:sheetPr>')])
def test_an_outline_goes_in_its_place(sheet_pr, expected):
    """In an empty ``sheetPr``, after ``tabColor``, on an ``outlinePr`` there is, in a ``sheetPr`` of its own first
    in the sheet; in the part's prefix."""
    part = f'<x:worksheet xmlns:x="{NS_S}">{{}}<x:dimension ref="A1"/></x:worksheet>'
    edited = sheet_outlines.outlined(part.format(sheet_pr).encode(), "sheet1.xml", {"summaryRight": "0"})
    assert edited.decode() == part.format(expected)
