"""The controls on a workbook's sheets (the report's ``controls``): Excel's form controls, which LibreOffice's .xlsx
export writes as shapes of no size and docshift puts back as Excel 2007 writes them (``form_controls``), and ActiveX
controls, which it writes not at all (``test_sheet_activex.py``); the report names what is missing."""

import re
import struct
import xml.etree.ElementTree as ElementTree
import zipfile

import openpyxl
from conftest import ROOT
from conftest import _soffice_save as soffice
from workbooks import converted_whole

from docshift.engine import convert, form_controls, inventory
from docshift.engine.inventory import xls
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


FORM = "urn:oasis:names:tc:opendocument:xmlns:form:1.0"
KEPT = ("label", "linked-cell", "source-cell-range", "min-value", "max-value", "dropdown")


def controls_libreoffice_reads(path, tmp_path):
    """The form controls LibreOffice reads from the workbook at ``path`` (its ODF of it): (element, then each
    attribute of ``KEPT`` or None), sorted."""
    ods = soffice(path, "ods", tmp_path / f"ods-{path.suffix[1:]}")
    root = ElementTree.fromstring(zipfile.ZipFile(ods).read("content.xml"))
    controls = [element for element in root.iter() if element.tag.startswith(f"{{{FORM}}}")
                and element.tag.rpartition("}")[2] not in ("form", "forms", "properties", "property", "list-property",
                                                            "list-value", "item", "option")]
    return sorted((element.tag.rpartition("}")[2], *(element.get(f"{{{FORM}}}{name}") for name in KEPT))
                  for element in controls)


def test_option_buttons_come_back_as_excel_writes_them_and_libreoffice_reads_the_same_ones(office, tmp_path):
    """39512.xls: 61 option buttons, which a plain soffice's .xlsx writes as shapes of no size in the corner."""
    source = CORPUS / "39512.xls"
    plain = soffice(source, "xlsx", tmp_path / "plain")
    with zipfile.ZipFile(plain) as package:
        assert b'<a:ext cx="0" cy="0"/>' in package.read("xl/drawings/drawing1.xml")
        assert not any(name.endswith(".vml") for name in package.namelist())
    assert inventory.of_result(plain, "xls").counts["controls"] == 0

    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.fidelity["counts"]["controls"] == {"source": 61, "result": 61}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    with zipfile.ZipFile(converted.path) as package:
        vml = package.read("xl/drawings/vmlDrawing1.vml")
        assert vml.count(b'<x:ClientData ObjectType="Radio">') == 61 and vml.count(b"<x:FirstButton/>") == 1
    # LibreOffice itself finds in the result the controls it finds in the legacy file: kinds and labels
    kept = controls_libreoffice_reads(converted.path, tmp_path)
    assert kept == controls_libreoffice_reads(source, tmp_path)
    assert len(kept) == 61 and {control[:2] for control in kept} >= {("radio", "Option Button 39")}


def with_vml(parts, shapes, out):
    """The package ``parts`` ({name: bytes}) written to ``out`` with a VML drawing of ``shapes`` on its first sheet,
    as Excel 2007 writes form controls."""
    parts["xl/drawings/vmlDrawing9.vml"] = (
        '<xml xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office" '
        'xmlns:x="urn:schemas-microsoft-com:office:excel"><v:shapetype id="_x0000_t201" coordsize="21600,21600" '
        'o:spt="201" path="m,l,21600r21600,l21600,xe"/>' + shapes + "</xml>").encode()
    parts["xl/worksheets/sheet1.xml"] = parts["xl/worksheets/sheet1.xml"].replace(
        b"</worksheet>", b'<legacyDrawing xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/'
                         b'relationships" r:id="rId99"/></worksheet>')
    relationship = (b'<Relationship Id="rId99" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                    b'relationships/vmlDrawing" Target="../drawings/vmlDrawing9.vml"/>')
    rels = "xl/worksheets/_rels/sheet1.xml.rels"
    parts[rels] = parts[rels].replace(b"</Relationships>", relationship + b"</Relationships>") if rels in parts \
        else b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' + relationship + \
        b"</Relationships>"
    if b'Extension="vml"' not in parts["[Content_Types].xml"]:
        parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(
            b"</Types>", b'<Default Extension="vml" ContentType="application/vnd.openxmlformats-officedocument.'
                         b'vmlDrawing"/></Types>')
    with zipfile.ZipFile(out, "w") as package:
        for name, data in parts.items():
            package.writestr(name, data)


def workbook_with_controls(tmp_path):
    """A workbook with a check box, two option buttons, a spinner, a drop-down, a group box and a label, linked to
    cells and a range, made here as an .xlsx with Excel 2007's VML and saved as an .xls by LibreOffice."""
    book = openpyxl.Workbook()
    for row, colour in enumerate(["red", "green", "blue"], 1):
        book.active.cell(row=row, column=5, value=colour)
    book.save(tmp_path / "base.xlsx")
    with zipfile.ZipFile(tmp_path / "base.xlsx") as package:
        parts = {name: package.read(name) for name in package.namelist()}

    def shape(number, kind, anchor, data, text=""):
        box = f"<v:textbox><div><font>{text}</font></div></v:textbox>" if text else ""
        return (f'<v:shape id="_x0000_s{number}" type="#_x0000_t201" style="position:absolute;margin-left:60pt;'
                f'margin-top:{number % 100 * 20}pt;width:100pt;height:18pt" filled="f" stroked="f">{box}'
                f'<x:ClientData ObjectType="{kind}"><x:Anchor>{anchor}</x:Anchor>{data}</x:ClientData></v:shape>')

    shapes = [shape(1025, "Checkbox", "1, 10, 2, 2, 3, 10, 3, 2", "<x:FmlaLink>$B$2</x:FmlaLink>", "Agree"),
              shape(1026, "Radio", "1, 10, 4, 2, 3, 10, 5, 2", "<x:FmlaLink>$B$5</x:FmlaLink>", "First"),
              shape(1027, "Radio", "1, 10, 6, 2, 3, 10, 7, 2", "", "Second"),
              shape(1028, "Spin", "4, 10, 2, 2, 5, 10, 4, 2", "<x:Min>1</x:Min><x:Max>10</x:Max>"
                    "<x:FmlaLink>$C$2</x:FmlaLink>"),
              shape(1029, "Drop", "6, 10, 2, 2, 8, 10, 3, 2", "<x:FmlaRange>$E$1:$E$3</x:FmlaRange>"
                    "<x:FmlaLink>$C$5</x:FmlaLink>"),
              shape(1030, "GBox", "0, 5, 3, 10, 4, 10, 8, 2", "", "Colours"),
              shape(1031, "Label", "6, 10, 6, 2, 8, 10, 7, 2", "", "A label")]
    with_vml(parts, "".join(shapes), tmp_path / "controls.xlsx")
    return soffice(tmp_path / "controls.xlsx", "xls", tmp_path / "legacy")


def test_every_kind_comes_back_linked_to_its_cells_beside_the_check_box_libreoffice_keeps(office, tmp_path):
    source = workbook_with_controls(tmp_path)
    assert inventory.of_source(source, "xls").counts["controls"] == 7
    plain = soffice(source, "xlsx", tmp_path / "plain")
    assert inventory.of_result(plain, "xls").counts["controls"] == 1  # the check box: LibreOffice writes it

    converted = converted_whole(office, source, tmp_path / "work", "controls", 7)
    with zipfile.ZipFile(converted.path) as package:
        vml = package.read("xl/drawings/vmlDrawing1.vml").decode()
    kinds = re.findall(r'ObjectType="(\w+)"', vml)
    assert sorted(kinds) == ["Checkbox", "Drop", "GBox", "Label", "Radio", "Radio", "Spin"]
    assert "<x:FmlaRange>$E$1:$E$3</x:FmlaRange>" in vml and "<x:FmlaLink>$C$5</x:FmlaLink>" in vml
    kept = controls_libreoffice_reads(converted.path, tmp_path)
    legacy = controls_libreoffice_reads(source, tmp_path)
    assert [control[:4] for control in kept] == [control[:4] for control in legacy]  # kind, label, cell, range
    assert ("value-range", None, "Sheet.C2", None, "1", "10", None) in kept
    assert ("listbox", None, "Sheet.C5", "Sheet.E1:Sheet.E3", None, None, "true") in kept


def formula(*ptgs):
    """An ObjFmlaNoSize: cce, 4 unused bytes, the Ptgs."""
    rgce = b"".join(ptgs)
    return struct.pack("<H4x", len(rgce)) + rgce


def test_what_each_kind_carries_and_what_is_left_out():
    anchor = (1, 0, 1, 0, 2, 0, 2, 0)
    ref = struct.pack("<BHH", 0x24, 4, 2)  # $C$5
    relative = struct.pack("<BHH", 0x44, 0, 0xC001)  # B1, column and row relative
    checkbox = form_controls.control_of(obj(0x0B, 0, (0x14, formula(ref)), (0x12, struct.pack("<HHHH", 1, 0, 0, 1))),
                                        anchor, "Tick")
    assert (checkbox.kind, checkbox.text) == ("Checkbox", "Tick")
    assert checkbox.data == ["<x:Checked>1</x:Checked>", "<x:NoThreeD/>", "<x:FmlaLink>$C$5</x:FmlaLink>"]
    radio = form_controls.control_of(obj(0x0C, 0, (0x14, formula(relative)), (0x11, struct.pack("<HH", 0, 1))),
                                     anchor, "One")
    assert radio.data == ["<x:FmlaLink>B1</x:FmlaLink>", "<x:FirstButton/>"]
    spin = form_controls.control_of(obj(0x10, 0, (0x0C, struct.pack("<4xhhhhhHHH", 5, 0, 30, 2, 10, 0, 0, 0))),
                                    anchor, "ignored")
    assert spin.text == "" and spin.data == ["<x:Val>5</x:Val>", "<x:Min>0</x:Min>", "<x:Max>30</x:Max>",
                                             "<x:Inc>2</x:Inc>", "<x:Page>10</x:Page>"]
    area = struct.pack("<BHHHH", 0x25, 0, 9, 4, 4)  # $E$1:$E$10
    listed = obj(0x12, 0) [:-4] + struct.pack("<HH", 0x13, 0x1FEE) + struct.pack("<H", 6 + len(area)) + \
        formula(area) + struct.pack("<HHHH", 10, 3, 0x0010, 0)
    assert form_controls.control_of(listed, anchor, "").data == [
        "<x:FmlaRange>$E$1:$E$10</x:FmlaRange>", "<x:Sel>3</x:Sel>", "<x:SelType>Multi</x:SelType>"]
    # left out whole: a button that runs a macro, a link to another sheet's cell, Excel's own drop-down, a picture
    name = struct.pack("<BI2x", 0x23, 1)
    assert form_controls.control_of(obj(0x07, 0, (0x04, formula(name))), anchor, "Run") is None
    assert form_controls.control_of(obj(0x07, 0), anchor, "Nothing to run").kind == "Button"
    other_sheet = struct.pack("<BHHH", 0x3A, 0, 4, 2)
    assert form_controls.control_of(obj(0x0B, 0, (0x14, formula(other_sheet))), anchor, "x") is None
    assert form_controls.control_of(obj(0x14, 0x0100), anchor, "") is None
    assert form_controls.control_of(obj(0x08), anchor, "") is None


def test_a_control_s_macro_is_the_defined_name_its_formula_names_in_this_workbook():
    book = xls._Workbook(names=["\r", "Button1_Click", "Other"], supbooks=[True, False], references=[1, 0])
    name_x = formula(struct.pack("<BHI", 0x39, 1, 2))  # PtgNameX through XTI 1: this workbook's SUPBOOK, name 2
    outside = formula(struct.pack("<BHI", 0x39, 0, 2))  # through XTI 0: another workbook's
    name = formula(struct.pack("<BI", 0x23, 3))  # PtgName: name 3
    keep = form_controls.macro_names(book, keep=True)
    assert (keep(name_x), keep(name), keep(outside)) == ("Button1_Click", "Other", None)
    assert keep(formula(struct.pack("<BHI", 0x39, 1, 9))) is None  # no such name
    assert form_controls.macro_names(book, keep=False)(name_x) == ""  # the macros were not kept: none is named
    anchor = (1, 0, 1, 0, 2, 0, 2, 0)
    button = obj(0x07, 0, (0x04, name_x))
    assert form_controls.control_of(button, anchor, "Go", keep).client_data == \
        "<x:FmlaMacro>[0]!Button1_Click</x:FmlaMacro>"
    assert form_controls.control_of(button, anchor, "Go", form_controls.macro_names(book, keep=False)).client_data == ""
    assert form_controls.control_of(obj(0x07, 0, (0x04, outside)), anchor, "Go", keep) is None


def test_the_controls_libreoffice_writes_itself_are_given_their_macros():
    """LibreOffice writes a button as Excel does, its VML shape and its control of Excel 2010, without its macro."""
    vml = (b'<xml><v:shape o:spid="_x0000_s1001" type="#_x0000_t201"><x:ClientData ObjectType="Button"><x:Anchor>1'
           b'</x:Anchor></x:ClientData></v:shape><v:shape o:spid="_x0000_s1002"><x:ClientData ObjectType="Checkbox">'
           b'<x:FmlaMacro>[0]!Own</x:FmlaMacro></x:ClientData></v:shape></xml>')
    sheet = (b'<worksheet><controls><control shapeId="1001" r:id="rId3" name="Go"><controlPr defaultSize="0">'
             b'</controlPr></control><control shapeId="1002" r:id="rId4" name="Tick"><controlPr/></control>'
             b'</controls></worksheet>')
    anchor = (1, 0, 1, 0, 2, 0, 2, 0)
    go = form_controls.Control("Button", anchor, "Go", macro="[0]!Go_Click")
    tick = form_controls.Control("Checkbox", anchor, "Tick", macro="[0]!Tick_Click")
    pairs, dropped = form_controls._paired(vml, [go, tick])
    assert [control for _, control in pairs] == [go, tick] and dropped == []
    edited, data, given = form_controls._their_macros(vml, sheet, pairs)
    assert given == 1  # the check box runs a macro of its own already, which stays
    assert b'ObjectType="Button"><x:Anchor>1</x:Anchor><x:FmlaMacro>[0]!Go_Click</x:FmlaMacro></x:ClientData>' in edited
    assert b"[0]!Own" in edited and b"Tick_Click" not in edited
    assert b'<controlPr macro="[0]!Go_Click" defaultSize="0">' in data and data.count(b"macro=") == 1
    # two buttons of one text in the source and one in the result: which is which cannot be told
    assert form_controls._paired(vml, [go, go]) == ([], [])


def test_a_button_libreoffice_s_import_drops_is_told_by_its_text_and_written_here():
    """LibreOffice's import drops some buttons of a sheet (2 of the 6 of POI's StringContinueRecords.xls): the
    buttons it wrote are told from the dropped ones by their text."""
    vml = b"<xml>" + b"".join(
        b'<v:shape o:spid="_x0000_s%d" type="#_x0000_t201"><v:textbox><div><font>%s</font></div></v:textbox>'
        b'<x:ClientData ObjectType="Button"><x:Anchor>1</x:Anchor></x:ClientData></v:shape>' % (number, text)
        for number, text in ((1001, b"Full  picture"), (1002, b"R&amp;D<br/>report"))) + b"</xml>"
    anchor = (1, 0, 1, 0, 2, 0, 2, 0)
    picture, report, sql = (form_controls.Control("Button", anchor, text) for text in
                            ("Full picture", "R&D\nreport", "SQL to be executed"))
    pairs, dropped = form_controls._paired(vml, [picture, report, sql])
    assert [(shape.group().count(b"1001"), control) for shape, control in pairs] == [(1, picture), (0, report)]
    assert dropped == [sql]
    # a text the result has and the source has not, or two of one text: nothing is paired nor written
    assert form_controls._paired(vml, [picture, sql, sql]) == ([], [])
    assert form_controls._paired(vml, [picture, form_controls.Control("Button", anchor, "Other"), sql]) == ([], [])


def workbook_with_macro_controls(tmp_path):
    """The corpus's SimpleMacro.xls given a button and an option button that run its TestMacro: saved as .xlsm by
    LibreOffice, the two written there as Excel 2007's VML, and saved as .xls again (its VBA project kept)."""
    macro_enabled = soffice(CORPUS / "SimpleMacro.xls", "xlsm:Calc MS Excel 2007 VBA XML", tmp_path / "xlsm")
    with zipfile.ZipFile(macro_enabled) as package:
        parts = {name: package.read(name) for name in package.namelist()}
    shapes = "".join(
        f'<v:shape id="_x0000_s{number}" type="#_x0000_t201" style="position:absolute;margin-left:60pt;'
        f'margin-top:{top}pt;width:100pt;height:20pt" filled="f" stroked="f"><v:textbox><div><font>{text}</font>'
        f'</div></v:textbox><x:ClientData ObjectType="{kind}"><x:Anchor>{anchor}</x:Anchor>'
        f'<x:FmlaMacro>[0]!TestMacro</x:FmlaMacro>{extra}</x:ClientData></v:shape>'
        for number, top, text, kind, anchor, extra in (
            (1025, 40, "Run it", "Button", "1, 10, 3, 2, 3, 10, 4, 2", ""),
            (1026, 80, "Pick", "Radio", "1, 10, 6, 2, 3, 10, 7, 2", "<x:FmlaLink>$D$2</x:FmlaLink>")))
    with_vml(parts, shapes, tmp_path / "buttons.xlsm")
    return soffice(tmp_path / "buttons.xlsm", "xls", tmp_path / "legacy")


def macros_libreoffice_reads(path, tmp_path):
    """(the label of each form control, the script its click runs) that LibreOffice reads from ``path``, sorted."""
    ods = soffice(path, "ods", tmp_path / f"macros-{path.suffix[1:]}")
    root = ElementTree.fromstring(zipfile.ZipFile(ods).read("content.xml"))
    found = []
    for element in root.iter():
        label = element.get(f"{{{FORM}}}label")
        if label is not None:
            scripts = [listener.get("{http://www.w3.org/1999/xlink}href") for listener in element.iter()
                       if listener.tag.endswith("}event-listener")]
            found.append((label, tuple(sorted(scripts))))
    return sorted(found)


def test_a_button_and_an_option_button_run_their_macro_in_the_macro_enabled_result(office, tmp_path):
    source = workbook_with_macro_controls(tmp_path)
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert converted.path.suffix == ".xlsm"
    assert converted.fidelity["counts"]["controls"] == {"source": 2, "result": 2}
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    with zipfile.ZipFile(converted.path) as package:
        vml = b"".join(package.read(name) for name in package.namelist() if name.endswith(".vml"))
    # the button as LibreOffice wrote it, with its macro (here it keeps it); the option button written here with it
    assert vml.count(b"Module1.TestMacro</x:FmlaMacro>") == 2
    assert b"<x:FmlaMacro>[0]!Module1.TestMacro</x:FmlaMacro><x:FmlaLink>$D$2</x:FmlaLink>" in vml
    kept = macros_libreoffice_reads(converted.path, tmp_path)
    assert kept == macros_libreoffice_reads(source, tmp_path)
    assert [label for label, scripts in kept if any("TestMacro" in script for script in scripts)] == ["Pick", "Run it"]
    plain = macros_libreoffice_reads(soffice(source, "xlsm:Calc MS Excel 2007 VBA XML", tmp_path / "plain"), tmp_path)
    # a plain soffice's result keeps the button and its macro, and loses the option button
    assert [label for label, scripts in plain if scripts] == ["Run it"] and "Pick" not in dict(plain)
