"""A SpreadsheetML 2003 workbook named .xls, as many programs export one: the fidelity report counts its sheets,
cells, comments and headers, where every count was null; and the Boolean and Error cells that LibreOffice's import
drops are written back into the result.

Made here: workbooks written as Excel writes "XML Spreadsheet 2003".
"""

import logging
import tracemalloc
import zipfile

import openpyxl
import pytest

from docshift.engine import convert, inventory, stored
from docshift.engine.inventory import spreadsheetml
from docshift.engine.inventory.common import ErrorValue, StoredDate

HEAD = ('<?xml version="1.0"?>\n<?mso-application progid="Excel.Sheet"?>\n'
        '<Workbook xmlns="urn:schemas-microsoft-com:office:spreadsheet" '
        'xmlns:x="urn:schemas-microsoft-com:office:excel" xmlns:ss="urn:schemas-microsoft-com:office:spreadsheet" '
        'xmlns:html="http://www.w3.org/TR/REC-html40">\n')
REPORT = HEAD + """<Styles><Style ss:ID="d"><NumberFormat ss:Format="Short Date"/></Style></Styles>
 <Worksheet ss:Name="Sales Report"><Table>
  <Row><Cell><Data ss:Type="String">Region</Data></Cell><Cell><Data ss:Type="String">Paid</Data></Cell>
   <Cell><Data ss:Type="String">Date</Data></Cell></Row>
  <Row><Cell><Data ss:Type="String">North</Data></Cell><Cell><Data ss:Type="Boolean">1</Data></Cell>
   <Cell ss:StyleID="d"><Data ss:Type="DateTime">2005-03-07T12:00:00.000</Data></Cell></Row>
  <Row ss:Index="4"><Cell ss:Index="2"><Data ss:Type="Number">0.1</Data>
   <Comment ss:Author="me"><ss:Data><B>Note:</B> checked</ss:Data></Comment></Cell>
   <Cell><Data ss:Type="Boolean">0</Data></Cell></Row>
  <Row><Cell ss:MergeAcross="1"><Data ss:Type="String">Merged two</Data></Cell>
   <Cell><Data ss:Type="Error">#N/A</Data></Cell><Cell><Data ss:Type="String"></Data></Cell></Row>
  <Row><Cell ss:Formula="=R[-4]C[1]*2"><Data ss:Type="Number">99</Data></Cell>
   <Cell><ss:Data ss:Type="String" xmlns="http://www.w3.org/TR/REC-html40"><B>Bold</B> text</ss:Data></Cell></Row>
 </Table>
 <WorksheetOptions xmlns="urn:schemas-microsoft-com:office:excel"><PageSetup><Header x:Data="&amp;CQuarterly"/>
  <Footer x:Data="&amp;L&amp;C&amp;R"/></PageSetup></WorksheetOptions></Worksheet>
 <Worksheet ss:Name="Second"><Table ss:TopCell="2" ss:LeftCell="2"><Row ss:Index="2"><Cell ss:Index="2">
  <Data ss:Type="Error">#DIV/0!</Data></Cell></Row></Table></Worksheet>
</Workbook>
"""
EXPECTED = {
    "Sales Report": {b"A1": "Region", b"B1": "Paid", b"C1": "Date", b"A2": "North", b"B2": True,
                     b"C2": 38418.5, b"B4": 0.1, b"C4": False, b"A5": "Merged two", b"C5": ErrorValue("#N/A"),
                     b"A6": 99.0, b"B6": "Bold text"},
    "Second": {b"C3": ErrorValue("#DIV/0!")},
}


def test_a_spreadsheetml_workbook_s_sheets_cells_comments_and_headers_are_counted(tmp_path):
    """Rows and cells where their table's offset, their indexes and merges put them (the second sheet's table starts
    at B2, as LibreOffice and liborcus place it); each type of value as an .xls reader gives
    it (a date as Excel's day number); rich text without its tags; a comment's text is no cell; a header that
    prints something counts, one of codes alone does not."""
    source = tmp_path / "report.xls"
    source.write_text("  \r\n" + REPORT)  # spaces before the declaration, which LibreOffice reads past
    assert spreadsheetml.is_spreadsheetml(source)
    held = inventory.of_source(source, "xls")
    assert held.sheets == ["Sales Report", "Second"]
    assert held.cells == EXPECTED
    assert isinstance(held.cells["Sales Report"][b"C2"], StoredDate)
    assert {what: held.counts[what] for what in ("sheets", "cells", "comments", "headers_footers", "images")} == \
        {"sheets": 2, "cells": 13, "comments": 1, "headers_footers": 1, "images": 0}


@pytest.mark.parametrize("text", [
    '<?xml version="1.0"?><Other xmlns="urn:schemas-microsoft-com:office:spreadsheet"/>',  # no workbook
    '<?xml version="1.0"?><!DOCTYPE Workbook [<!ENTITY a "aaaa">]><Workbook '
    'xmlns="urn:schemas-microsoft-com:office:spreadsheet"><Worksheet ss:Name="&a;"/></Workbook>',  # a DTD
    '<?xml version="1.0"?><Workbook xmlns="urn:schemas-microsoft-com:office:spreadsheet"><Worksheet>',  # cut short
])
def test_what_does_not_read_as_a_workbook_stays_unknown(tmp_path, text):
    source = tmp_path / "odd.xls"
    source.write_text(text)
    held = inventory.of_source(source, "xls")
    assert held.counts["sheets"] is None and held.cells is None


def test_elements_nested_past_any_workbook_s_stay_unknown_and_cost_little(tmp_path):
    """4 MB of nested elements held 226 MB of the worker's memory in expat; past the bound the counts are unknown
    at once."""
    source = tmp_path / "deep.xls"
    source.write_bytes(HEAD.encode() + b"<a>" * ((4 << 20) // 3))
    tracemalloc.start()
    try:
        held = inventory.of_source(source, "xls")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert held.cells is None and held.counts["sheets"] is None
    assert peak < 32 << 20


def test_cells_a_sheet_part_lacks_are_added_in_order():
    """In a row the part has, after the cells of lower columns; in a row it lacks, made between its neighbours;
    past the last row; an empty cell the part has (a merged one) is given its value, its style kept."""
    part = (b'<worksheet><sheetData><row r="2" ht="12"><c r="A2" t="s"><v>0</v></c><c r="C2" s="1"/>'
            b'<c r="D2"><v>4</v></c></row><row r="5"><c r="B5"><v>1</v></c></row></sheetData></worksheet>')
    cells = {b"B2": True, b"C2": ErrorValue("#N/A"), b"E2": 2.5, b"A3": "x<y", b"B9": False}
    written, count = stored._rewrite(part, cells)
    assert count == 5
    assert written == (
        b'<worksheet><sheetData><row r="2" ht="12"><c r="A2" t="s"><v>0</v></c><c r="B2" t="b"><v>1</v></c>'
        b'<c r="C2" s="1" t="e"><v>#N/A</v></c><c r="D2"><v>4</v></c><c r="E2"><v>2.5</v></c></row>'
        b'<row r="3"><c r="A3" t="str"><v>x&lt;y</v></c></row><row r="5"><c r="B5"><v>1</v></c></row>'
        b'<row r="9"><c r="B9" t="b"><v>0</v></c></row></sheetData></worksheet>')
    empty, count = stored._rewrite(b"<worksheet><sheetData/></worksheet>", {b"A1": 1.0})
    assert (empty, count) == (b'<worksheet><sheetData><row r="1"><c r="A1"><v>1</v></c></row></sheetData>'
                              b'</worksheet>', 1)


def test_a_spanned_row_moves_the_rows_after_it_and_no_cell_is_written_back(tmp_path):
    """A row's ss:Span stands for that many rows more, in Excel's reading; LibreOffice's import puts the next row
    right after it, so the cells that follow are where the report says they are missing, and none is written back
    (it would stand twice)."""
    source = tmp_path / "spanned.xls"
    source.write_text(HEAD + '<Worksheet ss:Name="T"><Table><Row><Cell><Data ss:Type="String">first</Data></Cell>'
                      '</Row><Row ss:Span="2"/><Row><Cell><Data ss:Type="Boolean">1</Data></Cell></Row></Table>'
                      '</Worksheet></Workbook>')
    held = inventory.of_source(source, "xls")
    assert held.cells == {"T": {b"A1": "first", b"A5": True}}
    assert held.cells_restored is False


def test_a_spreadsheetml_workbook_converts_with_its_booleans_and_errors(office, tmp_path, caplog):
    """LibreOffice 25.2 drops a SpreadsheetML workbook's Boolean and Error cells and its comments (a plain soffice
    too): the cells are written back into the result, a formula keeps the result Excel stored, and the report names
    the comment it could not keep. The mends that read an .xls's records find none, and say nothing (the number
    formats' mend logged each such workbook as a compound file that did not open)."""
    source = tmp_path / "report.xls"
    source.write_text(REPORT)
    with caplog.at_level(logging.WARNING):
        converted = convert.convert(office, source, "xls", tmp_path, 60)
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []
    assert converted.detected_format == "spreadsheetml-2003"
    book = openpyxl.load_workbook(converted.path)
    first, second = book["Sales Report"], book["Second"]
    assert (first["B2"].value, first["C4"].value, first["C5"].value, second["C3"].value) == \
        (True, False, "#N/A", "#DIV/0!")
    assert first["A6"].value == "=B2*2"
    with zipfile.ZipFile(converted.path) as package:
        assert b"<v>99</v>" in package.read("xl/worksheets/sheet1.xml")  # the result Excel stored
    report = converted.fidelity
    assert report["counts"]["cells"] == {"source": 13, "result": 13}
    assert [entry["detail"] for entry in report["lost"]] == ["1 of 1 comments is missing"]
