"""The shapes of an .xls's sheet drawing: those that pair with its OBJ records (``sheet_shapes``), a group's members
placed where the group puts them, in cells of the sheet (``sheet_drawing.inside``), so that a control or an object
in a group can be written where it stands; and the report's count of them (``shapes``)."""

import struct

import openpyxl
from conftest import _soffice_save as soffice
from test_sheet_controls import CORPUS
from workbooks import parts_of, with_drawing

from docshift.engine import convert, inventory, sheet_drawing, sheet_shapes
from docshift.engine.inventory import xlsx
from docshift.engine.inventory.common import Budget


def sp(*records):
    return container(0xF004, *records)


def container(rec_type, *records):
    body = b"".join(records)
    return struct.pack("<HHI", 0x000F, rec_type, len(body)) + body


def atom(rec_type, body, instance=0):
    return struct.pack("<HHI", instance << 4, rec_type, len(body)) + body


def test_a_group_s_members_are_placed_where_the_group_puts_them():
    client = atom(0xF011, b"")
    named = atom(0xF00B, struct.pack("<HI", 0x8380, 12) + "Box1\0\0".encode("utf-16-le"), 1)
    drawing = container(0xF002, container(
        0xF003,
        sp(atom(0xF009, struct.pack("<4i", 0, 0, 0, 0))),  # the patriarch
        sp(atom(0xF010, struct.pack("<H8H", 0, 1, 0, 1, 0, 2, 0, 2, 0)), client, named),  # a shape on its own
        container(0xF003,  # a group over C3:G7, its members in a space of 1000 by 1000
                  sp(atom(0xF009, struct.pack("<4i", 0, 0, 1000, 1000)),
                     atom(0xF010, struct.pack("<H8H", 0, 2, 0, 2, 0, 6, 0, 6, 0)), client),
                  sp(atom(0xF00F, struct.pack("<4i", 500, 0, 1000, 500)), client),
                  container(0xF003,  # a group in it, over its lower left quarter, in a space of its own
                            sp(atom(0xF009, struct.pack("<4i", 100, 100, 300, 300)),
                               atom(0xF00F, struct.pack("<4i", 0, 500, 500, 1000)), client),
                            sp(atom(0xF00F, struct.pack("<4i", 100, 100, 200, 200)), client)))))
    shapes = sheet_shapes.client_shapes(bytearray(drawing), Budget())
    assert [(shape.anchor, shape.member, shape.name, shape.within) for shape in shapes] == [
        ((1, 0, 1, 0, 2, 0, 2, 0), False, "Box1", None),
        ((2, 0, 2, 0, 6, 0, 6, 0), True, "", None),  # the group's own shape
        ((2, 0, 2, 0, 6, 0, 6, 0), True, "", (0.5, 0.0, 1.0, 0.5)),
        ((2, 0, 2, 0, 6, 0, 6, 0), True, "", (0.0, 0.5, 0.5, 1.0)),
        ((2, 0, 2, 0, 6, 0, 6, 0), True, "", (0.0, 0.5, 0.25, 0.75))]
    # on a sheet of columns 64 pixels wide and rows 20 points high, cells as Excel counts them
    assert sheet_drawing.inside((2, 0, 2, 0, 6, 0, 6, 0), (0.5, 0.0, 1.0, 0.5), lambda _: 64.0, lambda _: 20.0) == \
        (4, 0, 2, 0, 6, 0, 4, 0)
    assert sheet_drawing.inside((2, 512, 2, 0, 3, 512, 3, 0), (0.25, 0.5, 0.75, 1.0), lambda _: 64.0,
                                lambda _: 20.0) == (2, 768, 2, 128, 3, 256, 3, 0)


XDR = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"


def anchored(row, shape, rows=2):
    return (f'<xdr:twoCellAnchor><xdr:from><xdr:col>1</xdr:col><xdr:colOff>0</xdr:colOff><xdr:row>{row}</xdr:row>'
            f'<xdr:rowOff>0</xdr:rowOff></xdr:from><xdr:to><xdr:col>3</xdr:col><xdr:colOff>0</xdr:colOff><xdr:row>'
            f'{row + rows}</xdr:row><xdr:rowOff>0</xdr:rowOff></xdr:to>{shape}<xdr:clientData/></xdr:twoCellAnchor>')


def shape_xml(number, geometry, text=""):
    body = f'<xdr:txBody><a:bodyPr/><a:p><a:r><a:t>{text}</a:t></a:r></a:p></xdr:txBody>' if text else ""
    return (f'<xdr:sp><xdr:nvSpPr><xdr:cNvPr id="{number}" name="Shape {number}"/><xdr:cNvSpPr/></xdr:nvSpPr>'
            f'<xdr:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="914400" cy="457200"/></a:xfrm>'
            f'<a:prstGeom prst="{geometry}"><a:avLst/></a:prstGeom></xdr:spPr>{body}</xdr:sp>')


def workbook_with_shapes(tmp_path):
    """A workbook with a rectangle, an oval, a text box, a line, a group of two rectangles and a line of no height
    (an Office Art connector in the .xls, which shows), made here as an .xlsx with a DrawingML drawing and saved as
    an .xls by LibreOffice."""
    book = openpyxl.Workbook()
    book.active["A1"] = "shapes"
    book.save(tmp_path / "base.xlsx")
    parts = parts_of(tmp_path / "base.xlsx")
    line = ('<xdr:cxnSp><xdr:nvCxnSpPr><xdr:cNvPr id="9" name="Line 9"/><xdr:cNvCxnSpPr/></xdr:nvCxnSpPr><xdr:spPr>'
            '<a:xfrm><a:off x="0" y="0"/><a:ext cx="914400" cy="0"/></a:xfrm><a:prstGeom prst="line"><a:avLst/>'
            '</a:prstGeom><a:ln w="12700"><a:solidFill><a:srgbClr val="000000"/></a:solidFill></a:ln></xdr:spPr>'
            '</xdr:cxnSp>')
    group = ('<xdr:grpSp><xdr:nvGrpSpPr><xdr:cNvPr id="10" name="Group 10"/><xdr:cNvGrpSpPr/></xdr:nvGrpSpPr>'
             '<xdr:grpSpPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="914400" cy="457200"/><a:chOff x="0" y="0"/>'
             '<a:chExt cx="914400" cy="457200"/></a:xfrm></xdr:grpSpPr>' + shape_xml(11, "rect") + shape_xml(12, "rect")
             + "</xdr:grpSp>")
    drawing = (f'<xdr:wsDr xmlns:xdr="{XDR}" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">'
               + anchored(2, shape_xml(2, "rect")) + anchored(5, shape_xml(3, "ellipse"))
               + anchored(8, shape_xml(4, "rect", "A note"))
               + anchored(11, line) + anchored(14, group) + anchored(18, line.replace('"9"', '"19"'), rows=0)
               + "</xdr:wsDr>")
    with_drawing(parts, drawing, tmp_path / "shapes.xlsx")
    return soffice(tmp_path / "shapes.xlsx", "xls", tmp_path / "legacy")


def test_a_workbook_counts_its_drawing_shapes_and_a_group_s_members(office, tmp_path):
    source = workbook_with_shapes(tmp_path)
    held = inventory.of_source(source, "xls")
    assert held.counts["shapes"] == 8 and held.where["shapes"] == ["sheet 'Sheet'"] * 8  # the group and its two
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["shapes"] == {"source": 8, "result": 8}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]


def test_lines_in_a_group_libreoffice_s_import_drops_are_named(office, tmp_path):
    """A fuzzed copy of Apache POI's 45129.xls: 74 lines drawn in groups (Office Art objects of Excel 2007 and
    later), which LibreOffice's import does not load; its ODF of the file has none of them either."""
    source = CORPUS / "clusterfuzz-testcase-minimized-POIHSSFFuzzer-5285517825277952.xls"
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["shapes"] == {"source": 154, "result": 80}
    assert {"what": "shapes", "count": 74, "detail": "74 of 154 drawing shapes are missing; missing: sheet "
            "'Sheet1' (74)"} in converted.fidelity["lost"]


def test_the_shapes_of_no_size_libreoffice_writes_for_form_controls_are_not_counted():
    drawing = (f'<xdr:wsDr xmlns:xdr="{XDR}" xmlns:a="a">' + anchored(1, shape_xml(2, "rect"))
               + anchored(4, shape_xml(3, "rect").replace('cx="914400" cy="457200"', 'cx="0" cy="0"')) + "</xdr:wsDr>")
    assert xlsx.drawn_shapes(drawing.encode()) == 1
