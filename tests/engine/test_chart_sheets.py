"""Chart sheets, which LibreOffice writes as worksheets holding their chart: the result has a chart sheet in their
place, as Excel writes one, and every other sheet as LibreOffice wrote it.

Made here: a workbook of a data sheet and a sheet holding a chart, saved by LibreOffice as an .xls, whose second
sheet is then made a chart sheet as Excel writes one (its BOUNDSHEET's dt 2, its substream the chart's own).
"""

import re
import shutil
import struct
import zipfile

import openpyxl
import pytest
from openpyxl.chart import BarChart, Reference
from workbooks import records, saved_as_xls, with_workbook_stream

from docshift.engine import chart_sheets, convert, inventory

BIFF_BOUNDSHEET, BIFF_BOF, BIFF_EOF, DT_CHART = 0x0085, 0x0809, 0x000A, 0x0020
CHARTSHEET = "application/vnd.openxmlformats-officedocument.spreadsheetml.chartsheet+xml"


def chart_sheet(stream):
    """The Workbook ``stream`` (LibreOffice's, of two sheets, the second holding a chart and nothing else) with its
    second sheet's substream the chart's substream alone and its BOUNDSHEET marked a chart sheet."""
    found = records(stream)
    bounds = [pos for pos, rec_type, _ in found if rec_type == BIFF_BOUNDSHEET]
    assert len(bounds) == 2
    second = struct.unpack_from("<I", stream, bounds[1] + 4)[0]
    depth, start, end = 0, None, None
    for pos, rec_type, _ in (record for record in found if record[0] >= second):
        if rec_type == BIFF_BOF:
            depth += 1
            if depth == 2 and start is None and struct.unpack_from("<H", stream, pos + 6)[0] == DT_CHART:
                start = pos
        elif rec_type == BIFF_EOF:
            if depth == 2 and start is not None and end is None:
                end = pos + 4
            depth -= 1
            if depth == 0:
                assert start is not None and end is not None and pos + 4 == len(stream)
                break
    made = bytearray(stream[:second] + stream[start:end])
    made[bounds[1] + 4 + 5] = 2  # BOUNDSHEET.dt
    return bytes(made)


@pytest.fixture(scope="module")
def charted(tmp_path_factory):
    out = tmp_path_factory.mktemp("chart-sheets")
    book = openpyxl.Workbook()
    data = book.active
    data.title = "Data"
    for row in range(1, 6):
        data.cell(row, 1, f"r{row}")
        data.cell(row, 2, row * 3)
    chart = BarChart()
    chart.add_data(Reference(data, min_col=2, min_row=1, max_row=5))
    book.create_sheet("Chart1").add_chart(chart, "A1")
    return with_workbook_stream(saved_as_xls(book, out, "charted"), chart_sheet, out / "chart-sheet.xls")


def test_the_xls_names_its_chart_sheets(charted):
    assert inventory.of_source(charted, "xls").chart_sheets == ["Chart1"]
    assert inventory.of_source(charted.parent / "charted.xls", "xls").chart_sheets == []


def test_a_chart_sheet_is_written_as_one(office, charted, tmp_path):
    """A plain soffice writes a worksheet holding the chart; docshift a chart sheet holding it, anchored where
    LibreOffice placed it, with the data sheet as it was; openpyxl and LibreOffice read the chart back from it."""
    from conftest import _soffice_save as soffice

    plain = soffice(charted, "xlsx", tmp_path / "plain")
    read = openpyxl.load_workbook(plain)
    assert read.sheetnames == ["Data", "Chart1"] and read.chartsheets == []
    converted = convert.convert(office, charted, "xls", tmp_path / "work", 60)
    read = openpyxl.load_workbook(converted.path)
    assert read.sheetnames == ["Data", "Chart1"]
    assert [sheet.title for sheet in read.chartsheets] == ["Chart1"]
    assert [type(chart) for chart in read.chartsheets[0]._charts] == [BarChart]
    assert [[cell.value for cell in row] for row in read["Data"].iter_rows()] == \
        [[f"r{row}", row * 3] for row in range(1, 6)]
    with zipfile.ZipFile(converted.path) as package, zipfile.ZipFile(plain) as before:
        names = package.namelist()
        assert "xl/chartsheets/sheet1.xml" in names and "xl/worksheets/sheet2.xml" not in names
        assert f'PartName="/xl/chartsheets/sheet1.xml" ContentType="{CHARTSHEET}"' in \
            package.read("[Content_Types].xml").decode()
        drawing = package.read("xl/drawings/drawing1.xml").decode()
        assert "twoCellAnchor" not in drawing and "twoCellAnchor" in before.read("xl/drawings/drawing1.xml").decode()
        anchor = re.search(r'<xdr:absoluteAnchor><xdr:pos x="(\d+)" y="(\d+)"/><xdr:ext cx="(\d+)" cy="(\d+)"/>'
                           r'<xdr:graphicFrame>.*<xdr:xfrm><a:off x="(\d+)" y="(\d+)"/><a:ext cx="(\d+)" cy="(\d+)"/>'
                           r'</xdr:xfrm>.*r:id="rId1"/></a:graphicData></a:graphic></xdr:graphicFrame><xdr:clientData/>'
                           r"</xdr:absoluteAnchor>", drawing)
        assert anchor is not None and anchor.groups()[:4] == anchor.groups()[4:]
        assert package.read("xl/worksheets/sheet1.xml") == before.read("xl/worksheets/sheet1.xml")
    assert converted.fidelity["counts"]["sheets"] == {"source": 2, "result": 2}
    assert converted.fidelity["counts"]["charts"] == {"source": 1, "result": 1}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    back = soffice(converted.path, "fods", tmp_path / "back").read_text()
    chart_table = back[back.index('<table:table table:name="Chart1"'):]
    assert "<draw:object" in chart_table[:chart_table.index("</table:table>")]


def test_a_sheet_holding_more_than_its_chart_stays(charted, tmp_path):
    """Where the sheet named a chart sheet holds cells in the result, nothing changes."""
    from conftest import _soffice_save as soffice

    result = soffice(charted.parent / "charted.xls", "xlsx", tmp_path)
    for name in ("Data", "Chart1"):
        kept = tmp_path / f"{name}.xlsx"
        shutil.copy(result, kept)
        before = kept.read_bytes()
        assert chart_sheets.mend(kept, "xls", [name]) == (0 if name == "Data" else 1)
        assert (kept.read_bytes() == before) is (name == "Data")


def test_what_a_chart_sheet_has_of_the_worksheet():
    """The view's zoom and selection, the code name and tab colour, the protection of its content, the page setup a
    chart sheet has; a worksheet's own settings and the sheet view's selection go."""
    worksheet = (
        b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.'
        b'openxmlformats.org/officeDocument/2006/relationships"><sheetPr filterMode="false" codeName="Chart7">'
        b'<tabColor rgb="FF00FF00"/><pageSetUpPr fitToPage="false"/></sheetPr><dimension ref="A1"/><sheetViews>'
        b'<sheetView showGridLines="true" tabSelected="true" zoomScale="85" workbookViewId="0"><selection '
        b'pane="topLeft" activeCell="A1" sqref="A1"/></sheetView></sheetViews><sheetFormatPr defaultRowHeight="12.8"/>'
        b'<sheetData/><sheetProtection sheet="true" objects="true" password="CC3D"/><pageMargins left="0.7" '
        b'right="0.7" top="0.75" bottom="0.75" header="0.3" footer="0.3"/><pageSetup paperSize="9" scale="100" '
        b'orientation="landscape" cellComments="none" copies="1"/><drawing r:id="rId1"/></worksheet>')
    assert chart_sheets._chartsheet(worksheet, "xl/worksheets/sheet2.xml").decode().split("\n")[1] == (
        '<chartsheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.'
        'openxmlformats.org/officeDocument/2006/relationships"><sheetPr codeName="Chart7"><tabColor rgb="FF00FF00"/>'
        '</sheetPr><sheetViews><sheetView workbookViewId="0" tabSelected="true" zoomScale="85"/></sheetViews>'
        '<sheetProtection content="1" objects="1" password="CC3D"/><pageMargins left="0.7" right="0.7" top="0.75" '
        'bottom="0.75" header="0.3" footer="0.3"/><pageSetup paperSize="9" orientation="landscape" copies="1"/>'
        '<drawing r:id="rId1"/></chartsheet>')
    with_cells = worksheet.replace(b"<sheetData/>", b'<sheetData><row r="1"/></sheetData>')
    assert chart_sheets._chartsheet(with_cells, "xl/worksheets/sheet2.xml") is None
    assert chart_sheets._chartsheet(worksheet.replace(b"<sheetData/>", b'<sheetData/><mergeCells count="0"/>'),
                                    "xl/worksheets/sheet2.xml") \
        is None
