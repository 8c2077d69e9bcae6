"""Excel 2007's conditional formats of an .xls sheet: LibreOffice's import drops its CONDFMT12 and CF12 records, and
the result gets the colour scales, data bars and icon sets back."""

import re
import struct
import zipfile

import pytest
from conftest import _soffice_save as soffice
from conftest import flat_odf
from workbooks import records, with_workbook_stream

from docshift.engine import convert, inventory, sheet_formats
from docshift.engine.inventory.common import Scale
from docshift.engine.inventory.package import NS_S
from docshift.engine.inventory.xls import BIFF_EOF
from docshift.engine.inventory.xls_formats import BIFF_CF12, BIFF_CONDFMT12, COLOUR_SCALE, DATA_BAR, ICON_SET

MINIMUM, MAXIMUM, PERCENT = 2, 3, 4  # CFVO's cfvoType


def record(rec_type, body):
    return struct.pack("<HH", rec_type, len(body)) + body


def header(rec_type, cells=(0, 0, 0, 0)):
    """A FrtRefHeader: the record's type, grbitFrt and a Ref8U."""
    return struct.pack("<HH4H", rec_type, 1, *cells)


def threshold(kind, value=None):
    """A CFVO: its type, an empty formula, and its number but for the minimum and the maximum."""
    return struct.pack("<BH", kind, 0) + (b"" if value is None else struct.pack("<d", value))


def rgb(red, green, blue):
    return struct.pack("<I4Bd", 2, red, green, blue, 0xFF, 0)


def formatted(cells, kind, priority, rule):
    """A CONDFMT12 of ``cells`` (first and last row, first and last column) and its one CF12 record: ``kind`` (ct),
    no formatting (cbdxf 0 and its 2 reserved bytes), no formulas, ``priority``, 16 bytes of template parameters and
    the ``rule``'s own structure after its 3 unused and reserved bytes."""
    ranges = header(BIFF_CONDFMT12, cells) + struct.pack("<HH4HH4H", 1, 2, *cells, 1, *cells)
    cf12 = header(BIFF_CF12) + struct.pack("<BBHHI", kind, 0, 0, 0, 0) + bytes(2) + struct.pack("<HB", 0, 1) + \
        struct.pack("<HHB", priority, kind - 1, 16) + bytes(16) + bytes(3) + rule
    return record(BIFF_CONDFMT12, ranges) + record(BIFF_CF12, cf12)


SCALE = bytes([2, 2, 3]) + threshold(MINIMUM) + struct.pack("<d", 0) + threshold(MAXIMUM) + struct.pack("<d", 1) + \
    struct.pack("<d", 0) + rgb(0xF8, 0x69, 0x6B) + struct.pack("<d", 1) + rgb(0x63, 0xBE, 0x7B)
BAR = bytes([0, 10, 90]) + struct.pack("<IId", 3, 4, 0.4) + threshold(MINIMUM) + threshold(MAXIMUM)
ICONS = bytes([3, 3, 0x01]) + b"".join(threshold(PERCENT, value) + bytes([equal]) + bytes(4)
                                       for value, equal in ((0, 1), (33, 0), (67, 1)))


def with_formats(stream):
    """The Workbook ``stream`` of one sheet given a colour scale on A1:A10, a data bar on B1:B10 and an icon set on
    C1:C10, before the sheet's EOF (the globals' offset of the sheet stays right)."""
    eofs = [pos for pos, rec_type, _ in records(stream) if rec_type == BIFF_EOF]
    assert len(eofs) == 2
    added = formatted((0, 9, 0, 0), COLOUR_SCALE, 3, SCALE) + formatted((0, 9, 1, 1), DATA_BAR, 2, BAR) + \
        formatted((0, 9, 2, 2), ICON_SET, 1, ICONS)
    return stream[:eofs[1]] + added + stream[eofs[1]:]


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    out = tmp_path_factory.mktemp("formats")
    row = '<table:table-row>' + '<table:table-cell office:value-type="float" office:value="{}"/>' * 3 + \
        '</table:table-row>'
    rows = "".join(row.format(n * 10, n, 100 - n * 7) for n in range(1, 11))
    (out / "scores.fods").write_text(flat_odf("spreadsheet", f'<table:table table:name="Scores">{rows}</table:table>'))
    return with_workbook_stream(soffice(out / "scores.fods", "xls", out), with_formats, out / "formatted.xls")


def sheet(result):
    with zipfile.ZipFile(result) as package:
        return package.read("xl/worksheets/sheet1.xml").decode()


def test_the_xls_holds_three_rules_of_excel_2007(scores):
    assert inventory.of_source(scores, "xls").scales == {"Scores": [
        Scale(((0, 9, 0, 0),), 3, "colorScale", (), ((("type", "min"),), (("type", "max"),)),
              ((("rgb", "FFF8696B"),), (("rgb", "FF63BE7B"),))),
        Scale(((0, 9, 1, 1),), 2, "dataBar", (("minLength", "10"), ("maxLength", "90")),
              ((("type", "min"),), (("type", "max"),)), ((("theme", "4"), ("tint", "0.4")),)),
        Scale(((0, 9, 2, 2),), 1, "iconSet", (("iconSet", "3TrafficLights1"), ("showValue", "0")),
              ((("type", "percent"), ("val", "0")), (("type", "percent"), ("val", "33"), ("gte", "0")),
               (("type", "percent"), ("val", "67"))), ())]}


def test_colour_scales_data_bars_and_icon_sets_are_kept(office, scores, tmp_path):
    """A plain soffice's .xlsx has none of the three; docshift's has each, and LibreOffice reads them back from it."""
    plain = sheet(soffice(scores, "xlsx", tmp_path / "plain"))
    assert not re.search("colorScale|dataBar|iconSet", plain)
    converted = convert.convert(office, scores, "xls", tmp_path / "work", 60)
    written = re.findall(r"<conditionalFormatting .*?</conditionalFormatting>", sheet(converted.path))
    assert written == [
        '<conditionalFormatting sqref="C1:C10"><cfRule type="iconSet" priority="1"><iconSet iconSet="3TrafficLights1"'
        ' showValue="0"><cfvo type="percent" val="0"/><cfvo type="percent" val="33" gte="0"/><cfvo type="percent" '
        'val="67"/></iconSet></cfRule></conditionalFormatting>',
        '<conditionalFormatting sqref="B1:B10"><cfRule type="dataBar" priority="2"><dataBar minLength="10" '
        'maxLength="90"><cfvo type="min"/><cfvo type="max"/><color theme="4" tint="0.4"/></dataBar></cfRule>'
        '</conditionalFormatting>',
        '<conditionalFormatting sqref="A1:A10"><cfRule type="colorScale" priority="3"><colorScale><cfvo type="min"/>'
        '<cfvo type="max"/><color rgb="FFF8696B"/><color rgb="FF63BE7B"/></colorScale></cfRule>'
        '</conditionalFormatting>']
    read = soffice(converted.path, "fods", tmp_path / "read").read_text()
    assert re.search(r"<calcext:icon-set [^>]*calcext:icon-set-type=\"3TrafficLights1\"", read)
    assert re.search(r'<calcext:color-scale-entry [^>]*calcext:color="#f8696b"', read)
    assert "<calcext:data-bar" in read


def test_formats_go_after_the_sheet_s_own_with_later_priorities():
    """After the formats LibreOffice wrote and before the validations, in the part's prefix; priorities after the
    highest of the sheet's, in the order of the rules' own."""
    head = f'<x:worksheet xmlns:x="{NS_S}"><x:conditionalFormatting sqref="A1"><x:cfRule priority="4"/>' \
        '</x:conditionalFormatting>'
    tail = "<x:dataValidations/><x:pageMargins/></x:worksheet>"
    rules = [Scale(((0, 0, 1, 1),), 9, "dataBar", (), ((("type", "min"),), (("type", "max"),)), ((("auto", "1"),),)),
             Scale(((1, 1, 1, 2),), 2, "iconSet", (("iconSet", "3Arrows"),), (), ())]
    edited = sheet_formats.formatted((head + tail).encode(), "sheet1.xml", rules).decode()
    assert edited == head + (
        '<x:conditionalFormatting sqref="B2:C2"><x:cfRule type="iconSet" priority="5"><x:iconSet iconSet="3Arrows">'
        '</x:iconSet></x:cfRule></x:conditionalFormatting><x:conditionalFormatting sqref="B1"><x:cfRule '
        'type="dataBar" priority="6"><x:dataBar><x:cfvo type="min"/><x:cfvo type="max"/><x:color auto="1"/>'
        '</x:dataBar></x:cfRule></x:conditionalFormatting>') + tail
