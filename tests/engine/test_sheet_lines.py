"""An .xls's horizontal and vertical lines drawn as Office Art (msosptLine), which LibreOffice's import drops: the
report counts them missing (``shapes``), and docshift writes each back as Excel writes a line (``sheet_lines``)."""

import re
import struct
import zipfile

import openpyxl
from conftest import _soffice_save as soffice
from test_sheet_shapes import XDR, anchored, shape_xml
from workbooks import converted_whole, parts_of, with_drawing, with_workbook_stream

from docshift.engine import convert, inventory

CONNECTOR, LINE, FSP = 32, 20, b"\x0a\xf0"


def connector(number, x, y, width, height, colour="000000", head=""):
    return (f'<xdr:cxnSp><xdr:nvCxnSpPr><xdr:cNvPr id="{number}" name="Line {number}"/><xdr:cNvCxnSpPr/>'
            f'</xdr:nvCxnSpPr><xdr:spPr><a:xfrm><a:off x="{x}" y="{y}"/><a:ext cx="{width}" cy="{height}"/>'
            f'</a:xfrm><a:prstGeom prst="line"><a:avLst/></a:prstGeom><a:ln w="19050"><a:solidFill><a:srgbClr '
            f'val="{colour}"/></a:solidFill>{head}</a:ln></xdr:spPr></xdr:cxnSp>')


def as_lines(workbook):
    """The Workbook stream with each straight connector's shape type made a line's (msosptLine), as Excel 2007 and
    later save a line drawn as Office Art; the records keep their size."""
    data, position, made = bytearray(workbook), 0, 0
    while (found := data.find(FSP, position)) >= 2:
        header = struct.unpack_from("<H", data, found - 2)[0]
        if header >> 4 == CONNECTOR:
            struct.pack_into("<H", data, found - 2, LINE << 4 | header & 0xF)
            made += 1
        position = found + 2
    assert made == 3
    return bytes(data)


def workbook_with_lines(tmp_path):
    """A group of a rectangle, a horizontal line and a red vertical line with an arrowhead, and a horizontal line at
    the top of the sheet: an .xlsx made here, saved as an .xls by LibreOffice (which writes each line as a straight
    connector), its connectors then made lines."""
    book = openpyxl.Workbook()
    book.active["A1"] = "lines"
    book.save(tmp_path / "base.xlsx")
    group = ('<xdr:grpSp><xdr:nvGrpSpPr><xdr:cNvPr id="2" name="Group 2"/><xdr:cNvGrpSpPr/></xdr:nvGrpSpPr>'
             '<xdr:grpSpPr><a:xfrm><a:off x="609600" y="381000"/><a:ext cx="1828800" cy="914400"/>'
             '<a:chOff x="609600" y="381000"/><a:chExt cx="1828800" cy="914400"/></a:xfrm></xdr:grpSpPr>'
             + shape_xml(3, "rect") + connector(4, 609600, 1295400, 1828800, 0)
             + connector(5, 2438400, 381000, 0, 914400, "FF0000", '<a:tailEnd type="triangle"/>') + "</xdr:grpSp>")
    drawing = (f'<xdr:wsDr xmlns:xdr="{XDR}" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">'
               + anchored(2, group, rows=4) + anchored(9, connector(6, 0, 0, 1828800, 0), rows=0) + "</xdr:wsDr>")
    made = with_drawing(parts_of(tmp_path / "base.xlsx"), drawing, tmp_path / "lines.xlsx")
    return with_workbook_stream(soffice(made, "xls", tmp_path / "legacy"), as_lines, tmp_path / "lines.xls")


def lines_libreoffice_reads(path, tmp_path):
    """How many lines and connectors LibreOffice reads from ``path`` (its ODF of it)."""
    ods = soffice(path, "ods", tmp_path / f"lines-{path.suffix[1:]}")
    return len(re.findall(rb"<draw:(?:line|connector)\b", zipfile.ZipFile(ods).read("content.xml")))


def test_lines_libreoffice_s_import_drops_come_back_as_excel_writes_them(office, tmp_path):
    source = workbook_with_lines(tmp_path)
    assert lines_libreoffice_reads(source, tmp_path) == 0  # not one of the three is loaded
    held = inventory.of_source(source, "xls")
    assert held.counts["shapes"] == 5  # the group, its three members, the line at the top
    plain = soffice(source, "xlsx", tmp_path / "plain")
    assert inventory.report(held, inventory.of_result(plain, "xls"))["counts"]["shapes"] == {"source": 5, "result": 2}

    converted = converted_whole(office, source, tmp_path / "work", "shapes", 5)
    with zipfile.ZipFile(converted.path) as package:
        drawing = package.read("xl/drawings/drawing1.xml").decode()
    lines = re.findall(r"<xdr:cxnSp\b.*?</xdr:cxnSp>", drawing)
    assert len(lines) == 3 and all('<a:prstGeom prst="line">' in line for line in lines)
    # 1.5 pt, as LibreOffice stored it in the .xls (in hundredths of a millimetre: 19,080 EMU)
    assert all(abs(int(re.search(r'<a:ln w="([0-9]+)"', line).group(1)) - 19050) < 100 for line in lines)
    assert sum('<a:srgbClr val="FF0000"/>' in line and '<a:tailEnd type="triangle"/>' in line for line in lines) == 1
    assert lines_libreoffice_reads(converted.path, tmp_path) == 3


def test_lines_libreoffice_loads_are_not_written_twice(office, tmp_path):
    """The same workbook with its lines left straight connectors, which LibreOffice loads: nothing is added."""
    workbook_with_lines(tmp_path)
    connectors = tmp_path / "legacy" / "lines.xls"  # LibreOffice's .xls, before its connectors were made lines
    assert lines_libreoffice_reads(connectors, tmp_path) == 3
    converted = convert.convert(office, connectors, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["shapes"] == {"source": 5, "result": 5}
    with zipfile.ZipFile(converted.path) as package:
        assert package.read("xl/drawings/drawing1.xml").count(b"<xdr:cxnSp") == 3
