"""The controls on a workbook's sheets (the report's ``controls``): Excel's form controls and ActiveX controls,
which LibreOffice's .xlsx export does not keep; the report names them."""

import struct
import zipfile

import openpyxl
from conftest import ROOT

from docshift.engine import convert, inventory
from docshift.engine.inventory.package import Package
from docshift.engine.inventory.sheet_controls import in_result, is_control

CORPUS = ROOT.parent / "shared" / "corpus" / "xls"


def test_a_workbook_counts_its_form_and_activex_controls_sheet_by_sheet_but_not_excel_s_own_drop_downs():
    held = inventory.of_source(CORPUS / "39512.xls", "xls")  # 61 option buttons
    assert held.counts["controls"] == 61 and set(held.where["controls"]) == {"sheet 'Sheet1'"}
    assert inventory.of_source(CORPUS / "47701.xls", "xls").counts["controls"] == 1  # a list box
    assert inventory.of_source(CORPUS / "WithCheckBoxes.xls", "xls").counts["controls"] == 1  # an ActiveX check box
    # an AutoFilter's arrows are drop-downs of Excel's own (fUIObj)
    assert inventory.of_source(CORPUS / "32822.xls", "xls").counts["controls"] == 0


def obj(object_type, flags=0, *subrecords):
    """The body of a BIFF8 OBJ record: its FtCmo, ``subrecords`` [(ft, data)], its end."""
    body = struct.pack("<HHHHH12x", 0x15, 18, object_type, 1, flags)
    body += b"".join(struct.pack("<HH", ft, len(data)) + data for ft, data in subrecords)
    return body + bytes(4)


def test_which_obj_records_are_controls():
    assert is_control(obj(0x0B))  # a check box
    assert not is_control(obj(0x14, 0x0100))  # a drop-down of Excel's own
    assert is_control(obj(0x14))  # a combo box someone put there
    assert is_control(obj(0x08, 0, (0x08, struct.pack("<H", 0x0031))))  # a picture that is an ActiveX control
    assert not is_control(obj(0x08, 0, (0x08, struct.pack("<H", 0x0001))))  # a picture
    assert not is_control(obj(0x19)) and not is_control(obj(0x05))  # a note's box, a chart
    assert not is_control(b"\x15\x00") and not is_control(b"")


def test_a_result_counts_each_control_once_as_excel_writes_it(tmp_path):
    book = openpyxl.Workbook()
    book.active["A1"] = 1
    book.save(tmp_path / "made.xlsx")
    with zipfile.ZipFile(tmp_path / "made.xlsx") as package:
        parts = {name: package.read(name) for name in package.namelist()}
    control = '<control shapeId="{0}" r:id="rId{0}" name="Check Box {0}"/>'
    controls = ('<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
                '<mc:Choice Requires="x14"><controls>' + control.format(1025) + control.format(1026) +
                '</controls></mc:Choice><mc:Fallback><controls>' + control.format(1025) + control.format(1026) +
                '</controls></mc:Fallback></mc:AlternateContent>')
    sheet = parts["xl/worksheets/sheet1.xml"].decode()
    sheet = sheet.replace("<worksheet ", '<worksheet xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/'
                          'relationships" ', 1) if "xmlns:r=" not in sheet else sheet
    parts["xl/worksheets/sheet1.xml"] = sheet.replace("</worksheet>", controls + "</worksheet>").encode()
    vml = (b'<xml xmlns:x="urn:schemas-microsoft-com:office:excel"><x:ClientData ObjectType="Checkbox"/>'
           b'<x:ClientData ObjectType="Checkbox"/><x:ClientData ObjectType="Radio"/>'
           b'<x:ClientData ObjectType="Note"/><br></xml>')  # VML as Excel writes it need not be XML
    parts["xl/drawings/vmlDrawing1.vml"] = vml
    with zipfile.ZipFile(tmp_path / "controls.xlsx", "w") as package:
        for name, data in parts.items():
            package.writestr(name, data)
    with zipfile.ZipFile(tmp_path / "controls.xlsx") as package:
        opened = Package(package)
        assert in_result(opened, "xl/worksheets/sheet1.xml", []) == 2  # two shape ids, each written twice
        assert in_result(opened, "xl/worksheets/sheet1.xml", ["xl/drawings/vmlDrawing1.vml"]) == 3  # the VML's
    held = inventory.of_result(tmp_path / "made.xlsx", "xls")
    assert held.counts["controls"] == 0 and held.where["controls"] == []


def test_the_report_names_the_controls_libreoffice_does_not_keep(office, tmp_path):
    converted = convert.convert(office, CORPUS / "39512.xls", "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["controls"] == {"source": 61, "result": 0}
    assert {"what": "controls", "count": 61, "detail": "61 of 61 controls are missing; missing: sheet 'Sheet1' (61)"} \
        in converted.fidelity["lost"]
    assert converted.fidelity["complete"] is False
    # what LibreOffice wrote of them: shapes of no size in the corner, no control
    with zipfile.ZipFile(converted.path) as package:
        drawing = package.read("xl/drawings/drawing1.xml")
        assert drawing.count(b"Option Button") >= 61 and b'<a:ext cx="0" cy="0"/>' in drawing
        assert not any(name.startswith(("xl/ctrlProps/", "xl/activeX/")) for name in package.namelist())
